"""The watcher serves MultiNetworkPolicy (daemons/policy_watch.py): a policy,
its networks in both forms, pods' and namespaces' labels changing, bad
input said on the policy with nothing of it applied, a deletion, and a
restart that writes nothing. The watcher runs as a process against the API
stand-in and a real NB; every assertion waits on the NB's own update
stream (an IDL of the test's, not the watcher's) and reads from outside."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import audit, baseline
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import policy_render as render
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import INGRESS, POLICY_FOR
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import K_BASELINE, K_POLICY, OWNER_KEY
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute

from tests.harness.watcher_env import Cluster, ovn_network

TIMEOUT = 30


@pytest.fixture(scope="module")
def env(tmp_path_factory, collections_path):
    cluster = Cluster(str(tmp_path_factory.mktemp("policies")), collections_path)
    try:
        api = cluster.api
        api.add_nad("default", "ovnnet", {"cniVersion": "1.0.0", "type": "ovn4nfv"})
        api.create_namespace("tenant-a", {"team": "a"})
        api.create_namespace("tenant-b", {"team": "b"})
        both = ovn_network({"name": "net1", "interface": "eth1"}, {"name": "net2", "interface": "eth2"})
        api.create_pod("tenant-a", "web", both, labels={"app": "web"})
        api.create_pod("tenant-a", "cli", ovn_network({"name": "net1", "interface": "eth1"}), labels={"app": "cli"})
        api.create_pod("tenant-b", "other", ovn_network({"name": "net1", "interface": "eth1"}), labels={"app": "cli"})
        cluster.ifaces = dict(((ns, name), cluster.annotated(ns, name))
                              for ns, name in (("tenant-a", "web"), ("tenant-a", "cli"), ("tenant-b", "other")))
        # every test may count on this one (each module's tests may run on another worker)
        api.create_policy("tenant-a", "web-in", {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [
            {"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}]}]}, {POLICY_FOR: "ovn4nfv.k8s/net1"})
        yield cluster
    finally:
        cluster.stop()


def address(env, ns, pod, interface="eth1"):
    entry, = [e for e in env.ifaces[(ns, pod)] if e["interface"] == interface]
    return entry["ip_address"].split("/")[0]


def port_of(env, ns, pod, interface):
    ports = [p["name"] for p in env.pod_ports()
             if (p["external_ids"].get("ovn4nfv-pod-namespace"), p["external_ids"].get("ovn4nfv-pod-name"),
                 p["external_ids"].get("ovn4nfv-interface")) == (ns, pod, interface)]
    assert len(ports) == 1, ports
    return ports[0]


def nb_state(idl):
    """``({group: {member port names}}, {set: {addresses}})`` of the product's rows."""
    groups = dict((g.name, set(p.name for p in g.ports)) for g in idl.tables["Port_Group"].rows.values()
                  if g.external_ids.get(OWNER_KEY))
    sets = dict((s.name, set(s.addresses)) for s in idl.tables["Address_Set"].rows.values()
                if s.external_ids.get(K_POLICY) or s.external_ids.get(K_BASELINE))
    return groups, sets


def wait_nb(env, predicate, timeout=TIMEOUT):
    """Block until ``predicate(groups, sets)`` holds in the NB (woken by its
    updates); return the state it held in."""
    seen = {}
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, ("Logical_Switch_Port", "Port_Group", "Address_Set")) as db:
        def check(idl):
            seen["state"] = nb_state(idl)
            return predicate(*seen["state"])
        held = db.wait_for(check, timeout)
    assert held, "the NB never held it: %s\nwatcher log:\n%s" % (seen.get("state"), env.log_text())
    return seen["state"]


def policy(env, name, spec, networks="ovn4nfv.k8s/net1", namespace="tenant-a"):
    return env.api.create_policy(namespace, name, spec, {POLICY_FOR: networks})


def test_a_policy_isolates_the_pods_it_selects_on_its_network_only(env):
    group = render.policy_group("tenant-a/web-in")
    web1 = port_of(env, "tenant-a", "web", "eth1")
    groups, sets = wait_nb(env, lambda g, s: g.get(group) == {web1})
    assert groups[render.deny_group("net1", INGRESS)] == {web1}, "isolated on net1"
    assert render.deny_group("net2", INGRESS) not in groups, "web's net2 interface is not the policy's"
    assert sets[render.peer_set(group, INGRESS, 0, 4)] == {address(env, "tenant-a", "cli")}, \
        "the peer is cli, of the policy's namespace; not tenant-b's pod of the same label"


def test_a_pod_s_labels_move_it_out_of_a_peer_set_and_back(env):
    group = render.policy_group("tenant-a/web-in")
    peers = render.peer_set(group, INGRESS, 0, 4)
    cli = address(env, "tenant-a", "cli")
    wait_nb(env, lambda g, s: s.get(peers) == {cli})
    env.api.set_labels("tenant-a", "cli", {"app": "other"})
    wait_nb(env, lambda g, s: s.get(peers) == set())
    env.api.set_labels("tenant-a", "cli", {"app": "cli"})
    wait_nb(env, lambda g, s: s.get(peers) == {cli})


def test_a_namespace_selector_follows_the_namespace_s_labels(env):
    policy(env, "from-b", {"podSelector": {"matchLabels": {"app": "web"}},
                           "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "b"}}}]}]})
    peers = render.peer_set(render.policy_group("tenant-a/from-b"), INGRESS, 0, 4)
    other = address(env, "tenant-b", "other")
    wait_nb(env, lambda g, s: s.get(peers) == {other})
    env.api.label_namespace("tenant-b", {"team": "c"})
    wait_nb(env, lambda g, s: s.get(peers) == set())
    env.api.label_namespace("tenant-b", {"team": "b"})
    wait_nb(env, lambda g, s: s.get(peers) == {other})
    env.api.delete_policy("tenant-a", "from-b")
    wait_nb(env, lambda g, s: peers not in s and render.policy_group("tenant-a/from-b") not in g)


def test_the_baseline_s_selector_peers_follow_pods_and_namespaces(env):
    """An operator's rule (the network_policy module's plan) whose peers
    are the pods of the namespaces a selector picks: the watcher fills its
    address set when the rule appears, and keeps it as labels change."""
    rule = {"name": "from-team-b", "network": "net1",
            "peers": [{"namespace_selector": {"matchLabels": {"team": "b"}}, "pod_selector": {}}]}

    def declare(state, config):
        with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, audit.NB_TABLES) as db:
            execute(db, lambda v: baseline.plan_baseline(v, config, state), write=True)
    declare("merged", [("config[0]", rule)])
    v4, v6 = baseline.address_set("from-team-b", 4), baseline.address_set("from-team-b", 6)
    other = address(env, "tenant-b", "other")
    wait_nb(env, lambda g, s: s.get(v4) == {other} and s.get(v6) == set())
    env.api.label_namespace("tenant-b", {"team": "c"})
    wait_nb(env, lambda g, s: s.get(v4) == set())
    env.api.label_namespace("tenant-b", {"team": "b"})
    wait_nb(env, lambda g, s: s.get(v4) == {other})
    # every namespace, the pods labelled role=x: none, until the pod is
    declare("merged", [("config[0]", {"name": "from-team-b", "peers": [
        {"namespace_selector": {}, "pod_selector": {"matchLabels": {"role": "x"}}}]})])
    wait_nb(env, lambda g, s: s.get(v4) == set())
    env.api.set_labels("tenant-b", "other", {"app": "cli", "role": "x"})
    wait_nb(env, lambda g, s: s.get(v4) == {other})
    env.api.set_labels("tenant-b", "other", {"app": "cli"})
    declare("deleted", [("config[0]", {"name": "from-team-b"})])
    wait_nb(env, lambda g, s: v4 not in s and v6 not in s)


def set_policy_mode(env, network, value):
    """What virtual_network writes for ``policy_mode``."""
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, audit.NB_TABLES) as db:
        execute(db, lambda v: vn.plan_networks(v, [("n", vn.check_network({"name": network, "policy_mode": value},
                                                                          "n"))], "merged", "ovn"), write=True)


def wait_actions(env, key, wanted):
    """Block until the ACLs of policy ``key``'s group have the actions ``wanted``."""
    group = render.policy_group(key)
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, ("Port_Group", "ACL")) as db:
        def check(idl):
            rows = [g for g in idl.tables["Port_Group"].rows.values() if g.name == group]
            return rows and sorted(a.action for a in rows[0].acls) == wanted
        assert db.wait_for(check, TIMEOUT), "%s's ACLs never became %s:\n%s" % (key, wanted, env.log_text())


def test_a_network_s_policy_mode_changed_renders_its_policies_again(env):
    """policy_mode set on net1 (what virtual_network writes): the watcher
    makes web-in's rules stateless, each with its mirror, and stateful again."""
    wait_actions(env, "tenant-a/web-in", ["allow-related"])
    set_policy_mode(env, "net1", "stateless")
    try:
        wait_actions(env, "tenant-a/web-in", ["allow-stateless", "allow-stateless"])
    finally:
        set_policy_mode(env, "net1", "stateful")
    wait_actions(env, "tenant-a/web-in", ["allow-related"])


def test_a_policy_mode_changed_after_a_restart_renders_its_policies_again(env):
    """The first change of net1's policy_mode the restarted watcher sees
    (it knew nothing of the switch's mode before) renders web-in again: it
    does not wait for the periodic resync."""
    wait_actions(env, "tenant-a/web-in", ["allow-related"])
    assert env.terminate() == 0
    env.start()
    assert env.wait_ready(TIMEOUT)
    # one worker serves the policies' queue in turn: once a policy created
    # now is served, what the restart queued (web-in among it) was served
    policy(env, "zz-cold", {"podSelector": {}, "ingress": []})
    wait_nb(env, lambda g, s: render.policy_group("tenant-a/zz-cold") in g)
    set_policy_mode(env, "net1", "stateless")
    try:
        wait_actions(env, "tenant-a/web-in", ["allow-stateless", "allow-stateless"])
    finally:
        set_policy_mode(env, "net1", "stateful")
        env.api.delete_policy("tenant-a", "zz-cold")
    wait_actions(env, "tenant-a/web-in", ["allow-related"])
    wait_nb(env, lambda g, s: render.policy_group("tenant-a/zz-cold") not in g)


def test_a_network_named_by_its_attachment(env):
    policy(env, "by-nad", {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": []},
           networks="default/ovnnet")
    web2 = port_of(env, "tenant-a", "web", "eth2")
    groups, _sets = wait_nb(env, lambda g, s: g.get(render.policy_group("tenant-a/by-nad")) == {web2})
    assert groups[render.deny_group("net2", INGRESS)] == {web2}, "the NAD is net2: isolated there"
    env.api.delete_policy("tenant-a", "by-nad")
    wait_nb(env, lambda g, s: render.deny_group("net2", INGRESS) not in g)


def test_bad_input_is_said_on_the_policy_and_the_last_good_rendering_stays(env):
    group = render.policy_group("tenant-a/ports")
    bad = {"podSelector": {}, "ingress": [{"ports": [{"port": 90, "endPort": 80}]}]}
    policy(env, "ports", bad)
    said = env.api.wait(lambda api: [e for e in api.events if e["involvedObject"]["name"] == "ports"], TIMEOUT)
    assert said, env.log_text()
    event = said[0]
    assert event["reason"] == "InvalidPolicy" and event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "MultiNetworkPolicy"
    assert event["involvedObject"]["apiVersion"] == "k8s.cni.cncf.io/v1beta1"
    assert "spec.ingress[0].ports[0].endPort: 80 is below the port 90" in event["message"]
    groups, _sets = wait_nb(env, lambda g, s: True)
    assert group not in groups, "nothing of a refused policy is written"

    env.api.update_policy("tenant-a", "ports", spec={"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]})
    wait_nb(env, lambda g, s: group in g)
    env.api.update_policy("tenant-a", "ports", spec=bad)
    assert env.api.wait(lambda api: len([e for e in api.events if e["involvedObject"]["name"] == "ports"]) == 2,
                        TIMEOUT), "the bad update is said again: it is a new generation"
    groups, _sets = wait_nb(env, lambda g, s: True)
    assert group in groups, "the last good rendering stays"
    env.api.delete_policy("tenant-a", "ports")
    wait_nb(env, lambda g, s: group not in g)


def test_a_restart_writes_nothing_and_a_policy_deleted_meanwhile_goes(env):
    group = render.policy_group("tenant-a/web-in")
    wait_nb(env, lambda g, s: group in g)
    policy(env, "gone-soon", {"podSelector": {}, "ingress": []})
    wait_nb(env, lambda g, s: render.policy_group("tenant-a/gone-soon") in g)
    env.terminate()
    env.api.delete_policy("tenant-a", "gone-soon")
    mark = len(env.log_text(whole=True))
    env.start()
    assert env.wait_ready(TIMEOUT)
    wait_nb(env, lambda g, s: render.policy_group("tenant-a/gone-soon") not in g)
    groups, _sets = wait_nb(env, lambda g, s: True)
    assert group in groups
    # one worker serves the policies' queue in turn: a policy created now is
    # served after those the restart queued, web-in among them
    policy(env, "zz-last", {"podSelector": {}, "ingress": []})
    wait_nb(env, lambda g, s: render.policy_group("tenant-a/zz-last") in g)
    since = env.log_text(whole=True)[mark:]
    assert "policy tenant-a/gone-soon:" in since, "the resync found it gone and removed its rows"
    assert "policy tenant-a/web-in:" not in since, "a policy as the NB holds it is not written again"
    env.api.delete_policy("tenant-a", "zz-last")
    wait_nb(env, lambda g, s: render.policy_group("tenant-a/zz-last") not in g)


def test_networks_the_product_cannot_police_are_said_and_others_plugins_left_alone(env):
    env.api.add_nad("default", "macvlan", {"cniVersion": "1.0.0", "type": "macvlan",
                                           "ipam": {"type": "ovn4nfv-ipam"}})
    env.api.add_nad("default", "bridged", {"cniVersion": "1.0.0", "type": "bridge"})
    policy(env, "mixed", {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": []},
           networks="default/macvlan, default/bridged, ovn4nfv.k8s/net1")
    group = render.policy_group("tenant-a/mixed")
    wait_nb(env, lambda g, s: g.get(group) == {port_of(env, "tenant-a", "web", "eth1")})
    said = [e for e in env.api.events if e["involvedObject"]["name"] == "mixed"]
    assert [e["reason"] for e in said] == ["NetworkNotPoliced"], said
    assert "default/macvlan" in said[0]["message"] and "bridged" not in said[0]["message"]

    policy(env, "no-nad", {"podSelector": {}, "ingress": []}, networks="default/nosuch")
    unknown = env.api.wait(lambda api: [e for e in api.events if e["involvedObject"]["name"] == "no-nad"], TIMEOUT)
    assert unknown and unknown[0]["reason"] == "UnknownNetwork"
    assert "NetworkAttachmentDefinition default/nosuch does not exist" in unknown[0]["message"]
    groups, _sets = wait_nb(env, lambda g, s: True)
    assert render.policy_group("tenant-a/no-nad") not in groups
    for name in ("mixed", "no-nad"):
        env.api.delete_policy("tenant-a", name)
    wait_nb(env, lambda g, s: group not in g)
