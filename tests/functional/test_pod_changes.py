"""A running pod follows its request (issue 36, the watcher's side): an
interface added gets its port, one removed loses it with what it held (its
address free again, its addresses out of the policies' sets, its own DHCP
row gone), one whose static address or network changes is replaced; the
primary interface's removal or replacement is refused with an Event, as
bad input is, and a refused change drops nothing. The watcher runs as a
process against the API stand-in and a real NB with ovn-northd; every
assertion reads the NB from outside (an IDL of the test's, woken by its
updates) or the pod from the stand-in."""

import json
from types import SimpleNamespace

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import POLICY_FOR
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import (
    K_DHCP_PORT, K_INTERFACE, K_POLICY, K_UID)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb

from tests.harness.watcher_env import NETWORKS, Cluster

TIMEOUT = 30
NS = "hp"
REFUSED = "InterfaceChangeRefused"


@pytest.fixture(scope="module")
def env(tmp_path_factory, collections_path):
    cluster = Cluster(str(tmp_path_factory.mktemp("pod-changes")), collections_path,
                      networks=NETWORKS + [{"name": "dnet", "subnet": "172.16.50.0/24", "dhcp": {}}])
    try:
        cluster.api.create_namespace(NS)
        # a policy whose peers are the "cli" pods' net1 addresses: an address set to leak from
        cluster.api.create_policy(NS, "web-in", {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [
            {"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}]}]}, {POLICY_FOR: "ovn4nfv.k8s/net1"})
        cluster.api.create_pod(NS, "web", request(iface("net1", "net0")), labels={"app": "web"})
        yield cluster
    finally:
        code = cluster.stop()
    assert code == 0, "SIGTERM must stop the watcher cleanly (exit %r)" % code
    assert cluster.api.denied == []


def iface(network, interface, **extra):
    return dict({"name": network, "interface": interface}, **extra)


def request(*entries):
    return {ann.OVN_NETWORK: json.dumps(list(entries))}


def ask(env, name, *entries):
    env.api.set_annotations(NS, name, request(*entries))


def listed(env, name):
    text = env.api.pod(NS, name)["metadata"]["annotations"].get(ann.IFACE_LIST)
    return json.loads(text) if text else None


def ip_of(entry):
    return entry["ip_address"].split("/")[0]


def wait_listed(env, name, interfaces, check=lambda entries: True):
    """Block until the pod's list names exactly ``interfaces``, in order,
    and ``check(entries)`` holds; return the entries."""
    def done(api):
        entries = listed(env, name)
        return entries is not None and [e["interface"] for e in entries] == interfaces and check(entries)
    assert env.api.wait(done, TIMEOUT), "list %s; watcher log:\n%s" % (listed(env, name), env.log_text())
    return listed(env, name)


def create(env, name, *entries, **kwargs):
    env.api.create_pod(NS, name, request(*entries), **kwargs)
    return wait_listed(env, name, [e["interface"] for e in entries])


def snapshot(idl):
    """The product's pod ports (``{name: (switch, addresses, uuid, uid)}``),
    the ports its own DHCP rows are for, and every address in a policy's
    address sets."""
    switch_of = dict((p.name, s.name) for s in idl.tables["Logical_Switch"].rows.values() for p in s.ports)
    ports = dict((p.name, SimpleNamespace(switch=switch_of.get(p.name), addresses=" ".join(p.addresses),
                                          uuid=p.uuid, uid=p.external_ids.get(K_UID),
                                          interface=p.external_ids.get(K_INTERFACE)))
                 for p in idl.tables["Logical_Switch_Port"].rows.values()
                 if p.external_ids.get("ovn4nfv-role") == "pod-port")
    dhcp = set(r.external_ids.get(K_DHCP_PORT) for r in idl.tables["DHCP_Options"].rows.values()
               if r.external_ids.get(K_DHCP_PORT))
    sets = set(a for s in idl.tables["Address_Set"].rows.values() if s.external_ids.get(K_POLICY)
               for a in s.addresses)
    return SimpleNamespace(ports=ports, dhcp=dhcp, sets=sets)


def nb(env, predicate=lambda state: True):
    """Block until ``predicate(state)`` holds in the NB (:func:`snapshot`),
    woken by its updates; return the state it held in."""
    seen = {}
    tables = ("Logical_Switch", "Logical_Switch_Port", "DHCP_Options", "Address_Set")
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, tables) as db:
        def check(idl):
            seen["state"] = snapshot(idl)
            return predicate(seen["state"])
        held = db.wait_for(check, TIMEOUT)
    assert held, "the NB never held it: %s\nwatcher log:\n%s" % (seen.get("state"), env.log_text())
    return seen["state"]


def mine(state, name):
    """``{interface: port}`` of pod ``name``'s ports."""
    prefix = "%s_%s_" % (NS, name)
    return dict((p.interface, p) for n, p in state.ports.items() if n.startswith(prefix))


def held_anywhere(state, address):
    return any(address in p.addresses.split() for p in state.ports.values())


def logged(log, count):
    """``[(event, port name)]`` of the port log once it has ``count`` of
    them (its IDL is not the one the test waited on)."""
    log.wait_for(lambda found: len(found.events) >= count, TIMEOUT)
    return [(e, n) for e, n, _u, _t in log.events]


def events(env, name, reason):
    return [e for e in env.events_for(name) if e["reason"] == reason]


def wait_event(env, name, reason, count=1):
    """Block until pod ``name`` has ``count`` Events of ``reason``; return the last."""
    found = env.api.wait(lambda api: len(events(env, name, reason)) >= count and events(env, name, reason), TIMEOUT)
    assert found, "no %s Event on %s: %s\nwatcher log:\n%s" % (reason, name, env.events_for(name), env.log_text())
    return found[-1]


def test_an_interface_added_to_a_served_pod_gets_its_port(env):
    create(env, "grow", iface("net1", "net0"))
    before = mine(nb(env, lambda s: mine(s, "grow")), "grow")
    ask(env, "grow", iface("net1", "net0"), iface("net2", "net1"))
    entries = wait_listed(env, "grow", ["net0", "net1"])
    assert ip_of(entries[1]).startswith("172.16.2.")
    ports = mine(nb(env, lambda s: set(mine(s, "grow")) == {"net0", "net1"}), "grow")
    assert ports["net1"].switch == "net2" and ip_of(entries[1]) in ports["net1"].addresses.split()
    assert (ports["net0"].uuid, ports["net0"].addresses) == (before["net0"].uuid, before["net0"].addresses), \
        "the interface that stays is not touched"


def test_an_interface_removed_loses_its_port_its_address_its_sets_and_its_dhcp_row(env):
    entries = create(env, "shrink", iface("net2", "net0"), iface("net1", "net1"),
                     iface("dnet", "dn0", dhcp=True, default_gateway=False), labels={"app": "cli"})
    address = ip_of(entries[1])
    state = nb(env, lambda s: address in s.sets and "hp_shrink_dn0" in s.dhcp)
    kept = mine(state, "shrink")["net0"]
    log = env.port_log()
    try:
        ask(env, "shrink", iface("net2", "net0"))
        wait_listed(env, "shrink", ["net0"])
        state = nb(env, lambda s: set(mine(s, "shrink")) == {"net0"} and address not in s.sets
                   and "hp_shrink_dn0" not in s.dhcp)
        assert not held_anywhere(state, address)
        assert mine(state, "shrink")["net0"].uuid == kept.uuid
        assert sorted(logged(log, 2)) == [("delete", "hp_shrink_dn0"), ("delete", "hp_shrink_net1")], log.events
    finally:
        log.close()
    # its address is free: another pod takes it, static
    taken = create(env, "taker", iface("net1", "net0", ip_address=address))
    assert ip_of(taken[0]) == address


def test_a_changed_static_address_replaces_the_port(env):
    entries = create(env, "restatic", iface("net2", "net0"), iface("net1", "net1"))
    old = ip_of(entries[1])
    log = env.port_log()
    try:
        ask(env, "restatic", iface("net2", "net0"), iface("net1", "net1", ip_address="172.16.1.200"))
        wait_listed(env, "restatic", ["net0", "net1"], lambda e: ip_of(e[1]) == "172.16.1.200")
        state = nb(env, lambda s: "172.16.1.200" in getattr(mine(s, "restatic").get("net1"), "addresses", ""))
        assert not held_anywhere(state, old), "replaced: its old address is not kept"
        assert logged(log, 2) == [("delete", "hp_restatic_net1"), ("create", "hp_restatic_net1")], log.events
    finally:
        log.close()
    assert ip_of(create(env, "taker2", iface("net1", "net0", ip_address=old))[0]) == old


def test_a_changed_network_replaces_the_port(env):
    entries = create(env, "move", iface("net2", "net0"), iface("net1", "net1"))
    old = ip_of(entries[1])
    ask(env, "move", iface("net2", "net0"), iface("default-net", "net1"))
    entries = wait_listed(env, "move", ["net0", "net1"], lambda e: ip_of(e[1]).startswith("10.240."))
    assert entries[1]["gateway_ip"] == "10.240.0.1"
    state = nb(env, lambda s: getattr(mine(s, "move").get("net1"), "switch", None) == "default-net")
    assert ip_of(entries[1]) in mine(state, "move")["net1"].addresses.split()
    assert not held_anywhere(state, old)


def test_the_primary_interface_is_kept_and_the_change_refused(env):
    served = create(env, "prim", iface("net1", "net0"), iface("net2", "net1"))
    before = dict((i, p.uuid) for i, p in mine(nb(env, lambda s: len(mine(s, "prim")) == 2), "prim").items())
    log = env.port_log()
    try:
        ask(env, "prim", iface("net2", "net1"))             # net0 removed: it is the first addressed entry
        event = wait_event(env, "prim", REFUSED)
        assert "interface net0" in event["message"] and "removed" in event["message"], event
        assert event["type"] == "Warning"
        ask(env, "prim", iface("default-net", "net0"), iface("net2", "net1"))       # net0 replaced
        event = wait_event(env, "prim", REFUSED, 2)
        assert "interface net0" in event["message"] and "its network is now default-net" in event["message"]
        assert listed(env, "prim") == served
        assert dict((i, p.uuid) for i, p in mine(nb(env), "prim").items()) == before
        assert log.events == [], "a refused change drops nothing"
    finally:
        log.close()
    # the runtime holds net1's address (status.podIP): net0 may go, net1 may not
    env.api.patch_status(NS, "prim", {"status": {"podIP": ip_of(served[1])}})
    ask(env, "prim", iface("net2", "net1"))
    wait_listed(env, "prim", ["net1"])
    nb(env, lambda s: set(mine(s, "prim")) == {"net1"})
    ask(env, "prim", iface("net1", "net1"))
    event = wait_event(env, "prim", REFUSED, 3)
    assert "interface net1" in event["message"] and "status.podIP" in event["message"], event
    assert [e["interface"] for e in listed(env, "prim")] == ["net1"]
    assert mine(nb(env), "prim")["net1"].uuid == before["net1"]


def test_a_refused_change_drops_nothing(env):
    served = create(env, "keep", iface("net2", "net0"), iface("net1", "net1"))
    before = dict((i, p.uuid) for i, p in mine(nb(env, lambda s: len(mine(s, "keep")) == 2), "keep").items())
    holder = create(env, "holder", iface("net1", "net0", ip_address="172.16.1.222"))
    log = env.port_log()
    try:
        # an eleventh interface, net1 dropped in the same edit
        ask(env, "keep", *[iface("net2", "net0")] + [iface("net1", "eth%d" % i) for i in range(10)])
        event = wait_event(env, "keep", "InvalidNetworkRequest")
        assert "11 entries; at most 10" in event["message"], event
        # an unknown network, net1 dropped and net5 added in the same edit
        ask(env, "keep", iface("net2", "net0"), iface("net2", "net5"), iface("nosuch", "net6"))
        event = wait_event(env, "keep", "UnknownNetwork")
        assert "nosuch" in event["message"] and "ovnNetwork[2]" in event["message"], event
        # net1 moved to an unknown network: not stranded, it keeps its port and its entry
        ask(env, "keep", iface("net2", "net0"), iface("nosuch", "net1"))
        event = wait_event(env, "keep", "UnknownNetwork", 2)
        assert "ovnNetwork[1]" in event["message"], event
        # net1 replaced by an address another pod holds, net5 added beside
        ask(env, "keep", iface("net2", "net0"), iface("net1", "net1", ip_address="172.16.1.222"),
            iface("net2", "net5"))
        event = wait_event(env, "keep", "AddressConflict")
        assert "pod hp/holder" in event["message"], event
        assert listed(env, "keep") == served, "its list is as it was"
        assert dict((i, p.uuid) for i, p in mine(nb(env), "keep").items()) == before
        assert log.events == [], "a refused change drops nothing"
    finally:
        log.close()
    assert holder and listed(env, "holder") == holder


def test_two_changes_in_quick_succession_end_at_the_latest(env):
    create(env, "quick", iface("net1", "net0"), iface("net2", "net1"))
    ask(env, "quick", iface("net1", "net0"), iface("net2", "net1"), iface("dnet", "net2"))
    ask(env, "quick", iface("net1", "net0"), iface("default-net", "net3"))
    entries = wait_listed(env, "quick", ["net0", "net3"])
    state = nb(env, lambda s: set(mine(s, "quick")) == {"net0", "net3"})
    assert ip_of(entries[1]) in mine(state, "quick")["net3"].addresses.split()
    ask(env, "quick", iface("net1", "net0"), iface("net2", "net1", ip_address="172.16.2.99"))
    ask(env, "quick", iface("net1", "net0"), iface("net2", "net1", ip_address="172.16.2.98"))
    wait_listed(env, "quick", ["net0", "net1"], lambda e: ip_of(e[1]) == "172.16.2.98")
    state = nb(env, lambda s: set(mine(s, "quick")) == {"net0", "net1"} and
               "172.16.2.98" in mine(s, "quick")["net1"].addresses.split())
    assert not held_anywhere(state, "172.16.2.99") and not held_anywhere(state, ip_of(entries[1]))


def test_a_change_then_the_pod_s_deletion_leaks_nothing(env):
    address = ip_of(create(env, "brief", iface("net2", "net0"), iface("net1", "net1"), labels={"app": "cli"})[1])
    nb(env, lambda s: address in s.sets)
    uid = env.api.pod(NS, "brief")["metadata"]["uid"]
    log = env.port_log()
    try:
        ask(env, "brief", iface("net2", "net0"), iface("dnet", "net1", dhcp=True, default_gateway=False),
            iface("net1", "net2", ip_address="172.16.1.233"))
        env.api.delete_pod(NS, "brief")
        state = nb(env, lambda s: not mine(s, "brief") and not [d for d in s.dhcp if d.startswith("hp_brief_")]
                   and address not in s.sets and "172.16.1.233" not in s.sets)
        assert not any(p.uid == uid for p in state.ports.values())
        assert log.wait_for(lambda found: not any(u == uid for u in found.live.values()), TIMEOUT)
    finally:
        log.close()
    # and its addresses are free: the static one is taken by another
    assert ip_of(create(env, "after", iface("net1", "net0", ip_address="172.16.1.233"))[0]) == "172.16.1.233"


def test_a_trunk_s_vlan_stays_while_it_is_asked_for_as_it_is_and_is_replaced_with_its_nesting(env):
    """A trunk's VLAN is OVN's nested port (``parent_name``, ``tag``): one
    served as asked is left as it is, whatever else changes; one whose
    network changes is made anew, nested as before. (Its name is the
    trunk's and its VID: no plain interface may take it.)"""
    trunk = iface("net1", "net0", vlans=[{"vlan": 10, "name": "net2"}])
    env.api.create_pod(NS, "trunk", request(trunk))
    wait_listed(env, "trunk", ["net0", "net0.10"])
    log = env.port_log()
    try:
        ask(env, "trunk", trunk, iface("dnet", "net1", dhcp=True))
        wait_listed(env, "trunk", ["net0", "net0.10", "net1"])
        nb(env, lambda s: set(mine(s, "trunk")) == {"net0", "net0.10", "net1"})
        assert logged(log, 1) == [("create", "hp_trunk_net1")], log.events
        # net1 no longer configured by DHCP, the VLAN on another network: both replaced
        ask(env, "trunk", iface("net1", "net0", vlans=[{"vlan": 10, "name": "default-net"}]), iface("dnet", "net1"))
        entries = wait_listed(env, "trunk", ["net0", "net0.10", "net1"],
                              lambda e: ip_of(e[1]).startswith("10.240.") and not e[2].get("dhcp"))
        assert (entries[1]["parent"], entries[1]["vlan"]) == ("net0", 10)
        nb(env, lambda s: getattr(mine(s, "trunk").get("net0.10"), "switch", None) == "default-net")
        assert sorted(logged(log, 5)) == sorted([
            ("create", "hp_trunk_net1"), ("delete", "hp_trunk_net1"), ("create", "hp_trunk_net1"),
            ("delete", "hp_trunk_net0.10"), ("create", "hp_trunk_net0.10")]), log.events
    finally:
        log.close()
    nested = dict((r["name"], r) for r in env.box.rows("nb", "Logical_Switch_Port"))["hp_trunk_net0.10"]
    assert (nested["parent_name"], nested["tag"]) == ("hp_trunk_net0", 10), nested
