"""Tenants' policies on the real data plane (``cluster/policy_render.py``,
``cluster/multi_policies.py``).

A node (ovs-vswitchd, userspace datapath, and ovn-controller in a
namespace) with three pods on one virtual network; policies checked by
``policy_model``, planned by the product's composite kind (port groups,
their ACLs, address sets, the network's default deny and conntrack
anchor), and real TCP between the pods' namespaces. What these tests pin
down: that the rendered matches are OVN's syntax (ovn-controller, which
compiles them, reads every one) and mean what the policy means, in the
bands they are put in. Which pods a policy selects and which addresses its
peers hold is given here: that is the watcher's to resolve (issue 33's
next step), and these tests stay.
"""

import os

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.multi_policies import (
    TABLES as TABLES_POLICIES, plan_policies)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import (
    INGRESS, POLICY_FOR, check_policy)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute, reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources import ovs as ovs_resources
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


def enforce(node, *items):
    """Plan the policies ``items`` (``(policy, selected pods, {(direction,
    rule index): peer pods})``) with the product's composite kind, as the
    only ones (``overridden``), and wait until ovn-controller has them."""
    resolved = [(str(i), {"name": checked.key, "policy": checked, "switches": [NET],
                          "members": [port(p) for p in pods],
                          "peers": dict((k, [a for p in v for a in PODS[p][1:]]) for k, v in (peers or {}).items())})
                for i, (checked, pods, peers) in enumerate(items)]
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES_POLICIES) as db:
        execute(db, lambda view: plan_policies(view, resolved, "overridden"), write=True)
    node.wait_hv()
    # ovn-controller compiles each match into flows, and says so when it cannot
    with open(os.path.join(node.box.dir, "ovn-controller.log")) as handle:
        unread = [line for line in handle if "error parsing" in line]
    assert unread == [], "ovn-controller could not read a rendered match"


def talk(node, client, server, port_number=8080, family=4):
    address = PODS[server][1 if family == 4 else 2]
    reply, source = tcp_exchange(node.pods[server], node.pods[client], address, port_number, timeout=SHORT)
    return reply is not None


DENY_IN = {"podSelector": {}, "ingress": []}
DENY_EG = {"podSelector": {}, "policyTypes": ["Egress"], "egress": []}


def test_an_ingress_deny_keeps_the_replies_of_the_pod_s_own_connections(node):
    enforce(node, (policy(DENY_IN), ["c"], None))
    assert not talk(node, "a", "c"), "nothing is allowed in to an isolated pod"
    assert talk(node, "c", "a"), "the replies of c's own connection come back (ovn-kubernetes #5667)"
    assert talk(node, "a", "d"), "another pod of the network is not isolated"
    # the negative control: without the anchor the switch has no conntrack,
    # and the replies look new to the default deny
    node.box.nbctl("acl-del", NET)
    node.wait_hv()
    assert not talk(node, "c", "a"), "without the anchor the replies are dropped: the anchor is what lets them in"
    enforce(node, (policy(DENY_IN), ["c"], None))
    assert talk(node, "c", "a"), "the next plan puts the anchor back"


def test_an_egress_deny_leaves_ingress_alone(node):
    enforce(node, (policy(DENY_EG), ["c"], None))
    assert not talk(node, "c", "a"), "nothing is allowed out of an egress-isolated pod"
    assert talk(node, "a", "c"), "ingress is untouched, and c's replies pass (ovn-kubernetes #4071)"


def test_a_pod_selector_peer_and_a_port_range_allow_exactly_that(node):
    checked = policy({"podSelector": {"matchLabels": {"app": "web"}},
                      "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}],
                                   "ports": [{"port": 8000, "endPort": 8080}]}]})
    enforce(node, (checked, ["c"], {(INGRESS, 0): ["a"]}))
    assert talk(node, "a", "c", 8080) and talk(node, "a", "c", 8000), "the range's both ends are allowed"
    assert talk(node, "a", "c", 8080, family=6), "the peer's IPv6 address is in the rule's IPv6 set"
    assert not talk(node, "a", "c", 8081), "a port past endPort is refused"
    assert not talk(node, "d", "c", 8080), "a pod the selector did not pick is refused"


def test_an_ip_block_admits_its_cidr_less_its_excepts(node):
    checked = policy({"podSelector": {}, "ingress": [
        {"from": [{"ipBlock": {"cidr": "172.16.1.0/24", "except": ["172.16.1.13/32"]}}]}]}, name="block")
    enforce(node, (checked, ["c"], None))
    assert talk(node, "a", "c"), "inside the cidr"
    assert not talk(node, "d", "c"), "inside an except"
    assert not talk(node, "a", "c", family=6), "the block is IPv4: IPv6 stays denied"
