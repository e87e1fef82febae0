"""Resolved MultiNetworkPolicies realised in a real NB (cluster/multi_policies.py):
a policy's port group, address sets and ACLs; each network's default deny,
the union of what its policies isolate, per direction; the conntrack anchor
while anything is isolated; all of it gone with the last policy; a second
plan changes nothing; bad input refused with nothing written; others'
rows untouched. Every assertion reads the NB with ovsdb-client."""

import json

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import audit, baseline
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import policy_render as render
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.multi_policies import TABLES, plan_policies
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import (
    EGRESS, INGRESS, POLICY_FOR, check_policy)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import (
    K_DEFAULT_DENY, K_POLICY, K_POLICY_RULE, OWNER_KEY, ROLE, ROLE_ACL_ANCHOR)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import reconcile

from tests.harness.nb_env import nb_with_networks

NETWORKS = [{"name": "net1", "subnet": "172.16.1.0/24", "subnet6": "fd00:1::/64"},
            {"name": "net2", "subnet": "172.16.2.0/24"}]
PORTS = {"p-a": "net1", "p-c": "net1", "p-x": "net2"}


@pytest.fixture
def nb():
    with nb_with_networks(NETWORKS) as (box, _db):
        with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, LogicalSwitchPort.tables) as db:
            reconcile(LogicalSwitchPort(), [{"name": p, "switch": s, "addresses": ["dynamic"]}
                                            for p, s in PORTS.items()], "merged", db)
        yield box


def policy(name, spec, networks="ovn4nfv.k8s/net1"):
    return check_policy({"metadata": {"namespace": "tenant-a", "name": name, "annotations": {POLICY_FOR: networks}},
                         "spec": spec})


WEB = policy("web", {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [
    {"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}], "ports": [{"port": 80}]},
    {"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]})
OUT = policy("out", {"podSelector": {}, "policyTypes": ["Egress"], "egress": []})


def web(members=("p-c",), peers=("172.16.1.10", "fd00:1::10")):
    return {"name": WEB.key, "policy": WEB, "switches": ["net1"], "members": list(members), "peers": {(INGRESS, 0): list(peers)}}


def run(box, items, state="replaced"):
    with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        return execute(db, lambda view: plan_policies(view, [("policies[%d]" % i, x) for i, x in enumerate(items)],
                                                      state), write=True)


def as_list(value):
    """A set column as ovsdb-client prints it: one member bare, more as a list."""
    return [value] if isinstance(value, str) else value


def state(box):
    """The product's policy rows, from outside: ``{group: members}``,
    ``{set: addresses}``, and ACLs as ``(where, direction, priority, match,
    action)``."""
    ports = dict((r["_uuid"], r["name"]) for r in box.rows("nb", "Logical_Switch_Port"))
    groups = dict((r["name"], sorted(ports[u] for u in as_list(r["ports"]))) for r in box.rows("nb", "Port_Group")
                  if r["external_ids"].get(OWNER_KEY))
    sets = dict((r["name"], sorted(as_list(r["addresses"]))) for r in box.rows("nb", "Address_Set")
                if r["external_ids"].get(K_POLICY))
    holder = {}
    for r in box.rows("nb", "Port_Group"):
        for u in as_list(r["acls"]):
            holder[u] = r["name"]
    for r in box.rows("nb", "Logical_Switch"):
        for u in as_list(r["acls"]):
            holder[u] = r["name"]
    acls = sorted((holder.get(r["_uuid"]), r["direction"], r["priority"], r["match"], r["action"])
                  for r in box.rows("nb", "ACL"))
    return groups, sets, acls


def test_a_policy_its_network_s_default_deny_and_anchor_and_a_second_plan_changes_nothing(nb):
    plan = run(nb, [web()])
    assert plan.changed
    groups, sets, acls = state(nb)
    group = render.policy_group(WEB.key)
    deny_in = render.deny_group("net1", INGRESS)
    assert groups == {group: ["p-c"], deny_in: ["p-c"]}
    assert sets == {render.peer_set(group, INGRESS, 0, 4): ["172.16.1.10"],
                    render.peer_set(group, INGRESS, 0, 6): ["fd00:1::10"]}, "a set per family; the block is inline"
    assert acls == sorted(
        [(group, a["direction"], a["priority"], a["match"], a["action"]) for a in render.policy_acls(WEB)] +
        [(deny_in, a["direction"], a["priority"], a["match"], a["action"]) for a in render.deny_acls("net1", INGRESS)] +
        [("net1", "to-lport", render.TENANT_ALLOW, "ip4.src == 172.16.1.1 || ip6.src == fd00:1::1", "allow-related")])
    marks = dict((r["match"], r["external_ids"]) for r in nb.rows("nb", "ACL"))
    assert marks[render.policy_acls(WEB)[1]["match"]][K_POLICY_RULE] == "ingress/1"
    assert marks["outport == @%s" % deny_in][K_DEFAULT_DENY] == INGRESS
    assert marks["ip4.src == 172.16.1.1 || ip6.src == fd00:1::1"][ROLE] == ROLE_ACL_ANCHOR

    assert not run(nb, [web()]).changed, "the same policy again: nothing to do"


def test_members_and_peers_change_by_themselves(nb):
    run(nb, [web()])
    before = state(nb)[2]
    plan = run(nb, [web(members=("p-a", "p-c"), peers=("172.16.1.99",))])
    groups, sets, acls = state(nb)
    group = render.policy_group(WEB.key)
    assert groups[group] == ["p-a", "p-c"] and groups[render.deny_group("net1", INGRESS)] == ["p-a", "p-c"]
    assert sets[render.peer_set(group, INGRESS, 0, 4)] == ["172.16.1.99"]
    assert sets[render.peer_set(group, INGRESS, 0, 6)] == []
    assert acls == before, "pods are members and addresses: no ACL changes with them"
    assert all(op.op != "insert" or op.table != "ACL" for op in plan.ops)


def test_each_network_s_deny_is_the_union_of_its_policies_and_goes_with_the_last(nb):
    run(nb, [web()])
    run(nb, [{"name": OUT.key, "policy": OUT, "switches": ["net1"], "members": ["p-a", "p-c"], "peers": {}}])
    groups, _sets, acls = state(nb)
    deny_in, deny_eg = render.deny_group("net1", INGRESS), render.deny_group("net1", EGRESS)
    assert groups[deny_in] == ["p-c"] and groups[deny_eg] == ["p-a", "p-c"]
    assert render.policy_group(OUT.key) in groups
    assert not [a for a in acls if a[0] == render.policy_group(OUT.key)], "a deny-all has no ACL of its own"

    run(nb, [{"name": WEB.key}], state="deleted")
    groups, sets, acls = state(nb)
    assert deny_in not in groups and render.policy_group(WEB.key) not in groups and sets == {}
    assert groups[deny_eg] == ["p-a", "p-c"]
    assert ("net1", "to-lport", render.TENANT_ALLOW, "ip4.src == 172.16.1.1 || ip6.src == fd00:1::1",
            "allow-related") in acls, "egress isolation still needs the anchor"

    run(nb, [{"name": OUT.key}], state="deleted")
    assert state(nb) == ({}, {}, []), "nothing of the product's left"


def test_overridden_keeps_only_what_is_declared_and_never_others_rows(nb):
    nb.nbctl("pg-add", "theirs", "p-x")
    nb.nbctl("acl-add", "theirs", "to-lport", "1000", "outport == @theirs", "drop")
    run(nb, [web(), {"name": OUT.key, "policy": OUT, "switches": ["net1"], "members": ["p-a"], "peers": {}}])
    run(nb, [{"name": OUT.key, "policy": OUT, "switches": ["net1"], "members": ["p-a"], "peers": {}}], state="overridden")
    groups, sets, acls = state(nb)
    assert set(groups) == {render.policy_group(OUT.key), render.deny_group("net1", EGRESS)}
    assert sets == {}
    assert ("theirs", "to-lport", 1000, "outport == @theirs", "drop") in acls
    run(nb, [], state="overridden")
    assert state(nb) == ({}, {}, [("theirs", "to-lport", 1000, "outport == @theirs", "drop")])


@pytest.mark.parametrize("item, problem", [
    (dict(web(), members=["p-x"]), "policies[0].members: switch port 'p-x' is not on a network the policy is for (net1)"),
    (dict(web(), switches=["nope"]), "policies[0].switches: 'nope' is not a virtual network of the product's"),
    (dict(web(), policy={"spec": {}}), "policies[0].policy: not a checked policy"),
    (dict(web(), name="tenant-a/other"), "policies[0].name: 'tenant-a/other' is not the policy's 'tenant-a/web'"),
    (dict(web(), members=["p-none"]), "policies[0].members: switch port 'p-none' is not on a network"),
])
def test_bad_input_is_refused_and_nothing_is_written(nb, item, problem):
    run(nb, [web()])
    before = state(nb)
    with pytest.raises(ValidationError) as caught:
        run(nb, [item])
    assert caught.value.problems[0].startswith(problem)
    assert state(nb) == before


def test_a_new_pod_s_port_joins_its_policies_groups_in_the_transaction_that_makes_it(nb):
    """No window where a new pod selected by a policy is reachable: its
    port is made with its group memberships, in one transaction; a port of
    a pod the policy does not select, or on another network, joins none."""
    run(nb, [web()])
    owner = pod_ports.Pod("tenant-a", "web-2", "uid-w2")
    reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([{"name": "net1", "interface": "eth1"},
                                                            {"name": "net2", "interface": "eth2"}])})[1]
    with ovsdb.Database(nb.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        made = execute(db, lambda v: pod_ports.plan_pod(v, owner, reqs, labels={"app": "web"}), write=True)
        other = pod_ports.Pod("tenant-a", "db", "uid-db")
        execute(db, lambda v: pod_ports.plan_pod(v, other, reqs[:1], labels={"app": "db"}), write=True)
    net1_port, net2_port = owner.port_name("eth1"), owner.port_name("eth2")
    joins = [(op.table, op.column) for op in made.ops if op.op == "mutate" and op.table == "Port_Group"]
    assert joins == [("Port_Group", "ports")] * 2, "the policy's group and the deny group, in the same plan"
    groups, _sets, _acls = state(nb)
    assert groups[render.policy_group(WEB.key)] == ["p-c", net1_port]
    assert groups[render.deny_group("net1", INGRESS)] == ["p-c", net1_port]
    assert net2_port not in sum(groups.values(), []), "not the policy's network"
    assert other.port_name("eth1") not in sum(groups.values(), []), "not selected"


def test_a_gone_pod_s_addresses_leave_every_address_set_with_its_ports(nb):
    owner = pod_ports.Pod("tenant-a", "cli", "uid-cli")
    asked = [{"name": "net1", "interface": "eth1", "ipAddress": "172.16.1.10/24"}]
    reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps(asked)})[1]
    with ovsdb.Database(nb.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: pod_ports.plan_pod(v, owner, reqs), write=True)
    run(nb, [web(peers=("172.16.1.10", "172.16.1.99"))])
    peers = render.peer_set(render.policy_group(WEB.key), INGRESS, 0, 4)
    assert state(nb)[1][peers] == ["172.16.1.10", "172.16.1.99"]
    with ovsdb.Database(nb.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        gone = execute(db, lambda v: pod_ports.plan_release(v, "tenant-a", "cli"), write=True)
    assert any(op.table == "Address_Set" for op in gone.ops), "in the transaction that deletes its port"
    assert state(nb)[1][peers] == ["172.16.1.99"]


def test_the_audit_finds_hand_made_drift_in_a_policy_s_rows_and_mends_it(nb):
    """Found from the NB alone (what the group records of the policy), and
    mended by planning it again: an ACL's action edited, a member taken out
    of the default deny, the anchor deleted, a stale address added."""
    run(nb, [web(peers=()), {"name": OUT.key, "policy": OUT, "switches": ["net1"], "members": ["p-a"], "peers": {}}])
    healthy = state(nb)
    with ovsdb.Database(nb.nb_db, ovsdb.NB_SCHEMA, audit.NB_TABLES) as db:
        assert execute(db, lambda v: audit.audit(v)[0], write=False) == [], "nothing on the healthy rows"
    group = render.policy_group(WEB.key)
    allow = [r for r in nb.rows("nb", "ACL") if r["match"] == render.policy_acls(WEB)[0]["match"]][0]
    nb.nbctl("set", "ACL", allow["_uuid"], "action=allow")
    nb.nbctl("clear", "Port_Group", render.deny_group("net1", INGRESS), "ports")
    nb.nbctl("acl-del", "net1")
    nb.nbctl("add", "Address_Set", render.peer_set(group, INGRESS, 0, 4), "addresses", '"172.16.1.77"')
    with ovsdb.Database(nb.nb_db, ovsdb.NB_SCHEMA, audit.NB_TABLES) as db:
        found = execute(db, lambda v: audit.audit(v)[0], write=False)
        assert sorted((f["class"], f["objects"][0]) for f in found) == [
            ("policy_address_stale", render.peer_set(group, INGRESS, 0, 4)),
            ("policy_drift", OUT.key), ("policy_drift", WEB.key)], found
        assert "action 'allow' -> 'allow-related'" in " ".join(f["message"] for f in found)
        execute(db, lambda v: audit.plan_repair(v, found), write=True)
        assert execute(db, lambda v: audit.audit(v)[0], write=False) == [], "mended"
    groups, sets, acls = state(nb)
    assert (groups, acls) == (healthy[0], healthy[2])
    assert sets[render.peer_set(group, INGRESS, 0, 4)] == [], "the stale address went"


def test_a_peer_set_changes_by_mutation(nb):
    run(nb, [web(peers=["172.16.1.%d" % i for i in range(10, 60)])])
    with ovsdb.Database(nb.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        plan = execute(db, lambda v: plan_policies(v, [("p", web(peers=["172.16.1.%d" % i for i in range(11, 61)]))],
                                                   "replaced"), write=True)
    ops = [(op.op, op.mutator, op.value) for op in plan.ops if op.table == "Address_Set"]
    assert ops == [("mutate", "delete", ["172.16.1.10"]), ("mutate", "insert", ["172.16.1.60"])], \
        "one address out, one in: the set is not rewritten"
    assert len(state(nb)[1][render.peer_set(render.policy_group(WEB.key), INGRESS, 0, 4)]) == 50


APART = {"name": "apart", "network": "net1", "peers": [{"network": "net2"}]}
SCRAPE = {"name": "scrape", "network": "net1", "action": "allow", "priority": 6000,
          "peers": [{"namespace_selector": {"matchLabels": {"role": "mon"}}}]}


def test_the_baseline_s_peer_sets_and_the_audit_of_its_rules(nb):
    """The watcher's side of a baseline rule: its selector peers' addresses,
    by family, from what ``resolve`` picks; then an ACL edited by hand and an
    address no port holds, each found and mended from the NB alone."""
    with ovsdb.Database(nb.nb_db, ovsdb.NB_SCHEMA, audit.NB_TABLES) as db:
        execute(db, lambda v: baseline.plan_baseline(v, [("config[0]", APART), ("config[1]", SCRAPE)], "merged"),
                write=True)
        asked = []

        def resolve(namespaces, pods):
            asked.append((namespaces.to_dict(), pods.to_dict()))
            return ["172.16.1.10", "fd00:1::10"] if namespaces.matches({"role": "mon"}) else []
        execute(db, lambda v: baseline.plan_peer_sets(v, resolve), write=True)
        assert asked == [({"matchLabels": {"role": "mon"}}, {})] * 2, "once per family's set"
    held = dict((r["name"], sorted(as_list(r["addresses"]))) for r in nb.rows("nb", "Address_Set"))
    v4, v6 = baseline.address_set("scrape", 4), baseline.address_set("scrape", 6)
    assert held == {v4: ["172.16.1.10"], v6: ["fd00:1::10"]}
    apart = [r for r in nb.rows("nb", "ACL") if r["name"] == "base:apart"][0]
    nb.nbctl("set", "ACL", apart["_uuid"], 'match="ip4.dst == 172.16.1.0/24"')
    with ovsdb.Database(nb.nb_db, ovsdb.NB_SCHEMA, audit.NB_TABLES) as db:
        found = execute(db, lambda v: audit.audit(v)[0], write=False)
        assert sorted((f["class"], f["objects"]) for f in found) == [
            ("baseline_drift", ["apart"]), ("policy_address_stale", [v4]), ("policy_address_stale", [v6])], found
        execute(db, lambda v: audit.plan_repair(v, found), write=True)
        assert execute(db, lambda v: audit.audit(v)[0], write=False) == [], "mended"
    mended = [r for r in nb.rows("nb", "ACL") if r["name"] == "base:apart"]
    assert [r["match"] for r in mended] == ["ip4.dst == 172.16.1.0/24 && ip4.src == 172.16.2.0/24"]
    assert all(as_list(r["addresses"]) == [] for r in nb.rows("nb", "Address_Set"))


def test_a_policy_for_networks_that_keep_state_differently_is_refused(nb):
    with ovsdb.Database(nb.nb_db, ovsdb.NB_SCHEMA, audit.NB_TABLES) as db:
        execute(db, lambda v: vn.plan_networks(v, [("n", vn.check_network({"name": "net2", "policy_mode": "stateless"},
                                                                          "n"))], "merged", "ovn"), write=True)
    both = policy("both", {"podSelector": {}, "ingress": []}, networks="net1,net2")
    with pytest.raises(ValidationError) as caught:
        run(nb, [{"name": both.key, "policy": both, "switches": ["net1", "net2"], "members": [], "peers": {}}])
    assert ("metadata.annotations[k8s.v1.cni.cncf.io/policy-for]: its networks keep state differently "
            "(stateful net1; stateless net2)") in str(caught.value)
    assert state(nb) == ({}, {}, []), "nothing of it written"
