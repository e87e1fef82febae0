"""The policy renderer's ACLs on the real data plane (``cluster/policy_render.py``).

A node (ovs-vswitchd, userspace datapath, and ovn-controller in a
namespace) with three pods on one virtual network; policies checked by
``policy_model`` and rendered by ``policy_render``, the rows written
by the product's resources (port groups, their ACLs, address sets, a
switch's ACL) as the renderer names them, and real TCP between the pods'
namespaces. What these tests pin down is the renderer: that its matches
are OVN's syntax (ovn-controller, which compiles them, reads every one)
and mean what the policy means, in the bands it puts them. Which pods a
policy selects and which addresses its peers hold is given here: that is
the watcher's to resolve (issue 33's next step), and these tests stay.
"""

import os

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import policy_render as render
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import (
    EGRESS, INGRESS, POLICY_FOR, check_policy)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute, reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources import ovs as ovs_resources
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_acls import (
    PortGroup, PortGroupACL, SwitchACL)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_policies import AddressSet
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort

from tests.harness.dataplane import Node, tcp_exchange

NET = "net1"
GATEWAY4, GATEWAY6 = "172.16.1.1", "fd00:1::1"
PODS = {  # name: (MAC, IPv4, IPv6)
    "a": ("0a:00:00:00:01:0a", "172.16.1.10", "fd00:1::10"),
    "c": ("0a:00:00:00:01:0c", "172.16.1.12", "fd00:1::12"),
    "d": ("0a:00:00:00:01:0d", "172.16.1.13", "fd00:1::13"),
}
REFUSED = (None, None)
SHORT = 2   # seconds a refused connection is given: each refusal waits that long


def port(pod):
    return "pol-%s" % pod


@pytest.fixture(scope="module")
def node():
    node = Node()
    try:
        with ovsdb.Database(node.box.ovs_db, ovsdb.OVS_SCHEMA, ovs_resources.Chassis.tables) as db:
            reconcile(ovs_resources.Chassis(), [{
                "system_id": node.chassis, "ovn_remote": node.box.sb_db, "encap_type": ["geneve"],
                "encap_ip": "127.0.0.1", "bridge_datapath_type": "netdev"}], "merged", db)
        node.start_controller()
        checked = [("c0", vn.check_network({"name": NET, "subnet": "172.16.1.0/24", "subnet6": "fd00:1::/64"}, "c0"))]
        with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
            execute(db, lambda v: plan_topology(v, {"join_subnet": "100.64.1.0/24"}, "merged"), write=True)
            execute(db, lambda v: vn.plan_networks(v, checked, "merged", "ovn", False), write=True)
        with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, LogicalSwitchPort.tables) as db:
            reconcile(LogicalSwitchPort(), [{"name": port(p), "switch": NET, "addresses": ["%s %s %s" % v]}
                                            for p, v in PODS.items()], "merged", db)
        node.wait_hv()
        node.pods = dict((p, node.attach("p" + p, "br-int", mac, ip4 + "/24", gateway=GATEWAY4, iface_id=port(p),
                                         cidr6=ip6 + "/64", gateway6=GATEWAY6))
                         for p, (mac, ip4, ip6) in PODS.items())
        node.wait_hv()
        yield node
        assert node.log_errors() == [], "the daemons logged errors"
    finally:
        node.stop()


def policy(spec, name="web"):
    return check_policy({"metadata": {"namespace": "tenant-a", "name": name,
                                      "annotations": {POLICY_FOR: "ovn4nfv.k8s/" + NET}}, "spec": spec})


def write(node, resource, config, state="merged"):
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, resource.tables) as db:
        return reconcile(resource, config, state, db)


def acl_item(acl, **parent):
    item = dict((k, acl[k]) for k in ("direction", "priority", "match", "action", "name", "options"))
    item.update(parent)
    return item


def enforce(node, policies=(), members=None, peers=None, isolated=None, anchor=True):
    """Write what the renderer makes of ``policies`` (selecting the pods
    ``members[key]``; rule peers' addresses ``peers[(key, direction,
    index)]``), the network's default deny for the pods ``isolated[
    direction]``, and the anchor; everything a previous test wrote goes
    first (``overridden``: the product's rows only)."""
    write(node, PortGroup(), [], "overridden")
    write(node, AddressSet(addresses=True), [], "overridden")
    write(node, SwitchACL(), [], "overridden")
    groups, sets, acls = [], [], []
    for checked in policies:
        group = render.policy_group(checked.key)
        groups.append({"name": group, "ports": [port(p) for p in members[checked.key]]})
        for direction in (INGRESS, EGRESS):
            for index, _rule in enumerate(checked.rules(direction)):
                chosen = (peers or {}).get((checked.key, direction, index), ())
                sets.extend({"name": render.peer_set(group, direction, index, family),
                             "addresses": [PODS[p][column] for p in chosen]} for family, column in ((4, 1), (6, 2)))
        acls.extend(acl_item(acl, group=group) for acl in render.policy_acls(checked))
    for direction, pods in (isolated or {}).items():
        group = render.deny_group(NET, direction)
        groups.append({"name": group, "ports": [port(p) for p in pods]})
        acls.extend(acl_item(acl, group=group) for acl in render.deny_acls(NET, direction))
    write(node, PortGroup(), groups)
    write(node, AddressSet(addresses=True), sets)
    write(node, PortGroupACL(), acls)
    if anchor and isolated:
        write(node, SwitchACL(), [acl_item(render.anchor_acl(NET, GATEWAY4, GATEWAY6), switch=NET)])
    node.wait_hv()
    # ovn-controller compiles each match into flows, and says so when it cannot
    with open(os.path.join(node.box.dir, "ovn-controller.log")) as handle:
        unread = [line for line in handle if "error parsing" in line]
    assert unread == [], "ovn-controller could not read a rendered match"


def talk(node, client, server, port_number=8080, family=4):
    address = PODS[server][1 if family == 4 else 2]
    reply, source = tcp_exchange(node.pods[server], node.pods[client], address, port_number, timeout=SHORT)
    return reply is not None


def test_an_ingress_deny_keeps_the_replies_of_the_pod_s_own_connections(node):
    enforce(node, isolated={INGRESS: ["c"]})
    assert not talk(node, "a", "c"), "nothing is allowed in to an isolated pod"
    assert talk(node, "c", "a"), "the replies of c's own connection come back (ovn-kubernetes #5667)"
    assert talk(node, "a", "d"), "another pod of the network is not isolated"
    # the negative control: without the anchor the switch has no conntrack,
    # and the replies look new to the default deny
    enforce(node, isolated={INGRESS: ["c"]}, anchor=False)
    assert not talk(node, "c", "a"), "without the anchor the replies are dropped: the anchor is what lets them in"


def test_an_egress_deny_leaves_ingress_alone(node):
    enforce(node, isolated={EGRESS: ["c"]})
    assert not talk(node, "c", "a"), "nothing is allowed out of an egress-isolated pod"
    assert talk(node, "a", "c"), "ingress is untouched, and c's replies pass (ovn-kubernetes #4071)"


def test_a_pod_selector_peer_and_a_port_range_allow_exactly_that(node):
    checked = policy({"podSelector": {"matchLabels": {"app": "web"}},
                      "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}],
                                   "ports": [{"port": 8000, "endPort": 8080}]}]})
    enforce(node, [checked], members={checked.key: ["c"]}, peers={(checked.key, INGRESS, 0): ["a"]},
            isolated={INGRESS: ["c"]})
    assert talk(node, "a", "c", 8080) and talk(node, "a", "c", 8000), "the range's both ends are allowed"
    assert talk(node, "a", "c", 8080, family=6), "the peer's IPv6 address is in the rule's IPv6 set"
    assert not talk(node, "a", "c", 8081), "a port past endPort is refused"
    assert not talk(node, "d", "c", 8080), "a pod the selector did not pick is refused"


def test_an_ip_block_admits_its_cidr_less_its_excepts(node):
    checked = policy({"podSelector": {}, "ingress": [
        {"from": [{"ipBlock": {"cidr": "172.16.1.0/24", "except": ["172.16.1.13/32"]}}]}]}, name="block")
    enforce(node, [checked], members={checked.key: ["c"]}, isolated={INGRESS: ["c"]})
    assert talk(node, "a", "c"), "inside the cidr"
    assert not talk(node, "d", "c"), "inside an except"
    assert not talk(node, "a", "c", family=6), "the block is IPv4: IPv6 stays denied"
