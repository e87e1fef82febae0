"""Tenants' policies on the real data plane (``cluster/policy_render.py``,
``cluster/multi_policies.py``).

A node (ovs-vswitchd, userspace datapath, and ovn-controller in a
namespace) with pods on two virtual networks joined by the distributed
router, one pod with an interface on each; policies checked by
``policy_model``, planned by the product's composite kind (port groups,
their ACLs, address sets, each network's default deny and conntrack
anchor), and real TCP, UDP and SCTP between the pods' namespaces. What
these tests pin down: that the rendered matches are OVN's syntax
(ovn-controller, which compiles them, reads every one) and mean what the
policy means, in the bands they are put in. Which pods a policy selects
and which addresses its peers hold is given here (the watcher's, tested in
test_policy_watcher.py).
"""

import os
import time

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import baseline, networks as vn
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

from tests.harness.dataplane import Node, ip as ip_run, sctp_reaches, tcp_exchange, udp_exchange

NETWORKS = {"net1": ("172.16.1.0/24", "fd00:1::/64"), "net2": ("172.16.2.0/24", None),
            "prov": ("172.16.3.0/24", None)}
# a provider network (issue 35): its switch has a localnet port, no router
PROVIDERS = {"prov": "physnet-pol"}
GATEWAY6 = "fd00:1::1"
# interface: (its pod, its name in the pod, network, MAC, IPv4, IPv6); m has one on each network
IFACES = {
    "a": ("a", "eth0", "net1", "0a:00:00:00:01:0a", "172.16.1.10", "fd00:1::10"),
    "c": ("c", "eth0", "net1", "0a:00:00:00:01:0c", "172.16.1.12", "fd00:1::12"),
    "d": ("d", "eth0", "net1", "0a:00:00:00:01:0d", "172.16.1.13", "fd00:1::13"),
    "b": ("b", "eth0", "net2", "0a:00:00:00:02:0b", "172.16.2.11", None),
    "m1": ("m", "eth0", "net1", "0a:00:00:00:01:0e", "172.16.1.14", None),
    "m2": ("m", "eth1", "net2", "0a:00:00:00:02:0e", "172.16.2.14", None),
    "p1": ("p1", "eth0", "prov", "0a:00:00:00:03:0a", "172.16.3.10", None),
    "p2": ("p2", "eth0", "prov", "0a:00:00:00:03:0b", "172.16.3.11", None),
}
SHORT = 2   # seconds a refused connection is given: each refusal waits that long


def port(iface):
    return "pol-%s" % iface


def addresses(iface):
    return [a for a in IFACES[iface][4:] if a]


@pytest.fixture(scope="module")
def node():
    node = Node()
    try:
        node.join()
        checked = [(n, vn.check_network(dict({"name": n, "subnet": v4}, **dict(
            ({"subnet6": v6} if v6 else {}), **({"physnet": PROVIDERS[n]} if n in PROVIDERS else {}))), n))
            for n, (v4, v6) in sorted(NETWORKS.items())]
        with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
            execute(db, lambda v: plan_topology(v, {"join_subnet": "100.64.1.0/24"}, "merged"), write=True)
            execute(db, lambda v: vn.plan_networks(v, checked, "merged", "ovn", False), write=True)
        with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, LogicalSwitchPort.tables) as db:
            reconcile(LogicalSwitchPort(), [{"name": port(i), "switch": net, "addresses": [
                " ".join(x for x in (mac, ip4, ip6) if x)]} for i, (_p, _e, net, mac, ip4, ip6) in IFACES.items()],
                "merged", db)
        node.wait_hv()
        node.pods = {}
        for iface, (pod, ifname, net, mac, ip4, ip6) in IFACES.items():
            first = pod not in node.pods
            made = node.attach(iface, "br-int", mac, ip4 + "/24", iface_id=port(iface), ifname=ifname,
                               gateway=NETWORKS[net][0].rsplit(".", 1)[0] + ".1" if first else None,
                               cidr6=ip6 and ip6 + "/64", gateway6=GATEWAY6 if ip6 else None,
                               into=None if first else node.pods[pod])
            node.pods.setdefault(pod, made)
        node.wait_hv()
        yield node
        assert node.log_errors() == [], "the daemons logged errors"
    finally:
        node.stop()


def policy(spec, name="web", networks="net1"):
    return check_policy({"metadata": {"namespace": "tenant-a", "name": name, "annotations": {
        POLICY_FOR: ", ".join("ovn4nfv.k8s/" + n for n in networks.split(","))}}, "spec": spec})


def enforce(node, *items):
    """Plan the policies ``items`` (``(policy, selected interfaces,
    {(direction, rule index): peer interfaces})``) with the product's
    composite kind, as the only ones (``overridden``), and wait until
    ovn-controller has them."""
    resolved = [(str(i), {"name": checked.key, "policy": checked, "switches": [n.name for n in checked.networks],
                          "members": [port(p) for p in chosen],
                          "peers": dict((k, [a for p in v for a in addresses(p)]) for k, v in (peers or {}).items())})
                for i, (checked, chosen, peers) in enumerate(items)]
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES_POLICIES) as db:
        execute(db, lambda view: plan_policies(view, resolved, "overridden"), write=True)
    node.wait_hv()
    # ovn-controller compiles each match into flows, and says so when it cannot
    with open(os.path.join(node.box.dir, "ovn-controller.log")) as handle:
        unread = [line for line in handle if "error parsing" in line]
    assert unread == [], "ovn-controller could not read a rendered match"


def where(iface, family=4):
    """(the namespace of ``iface``'s pod, the interface's address)."""
    return node_pod(iface), IFACES[iface][4 if family == 4 else 5]


def node_pod(iface):
    return IFACES[iface][0]


def talk(node, client, server, port_number=8080, family=4):
    """Whether a TCP connection from interface ``client``'s pod to interface
    ``server``'s address is made and answered."""
    pod, address = where(server, family)
    reply, _source = tcp_exchange(node.pods[pod], node.pods[node_pod(client)], address, port_number, timeout=SHORT)
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
    node.box.nbctl("acl-del", "net1")
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


def test_udp_and_sctp_ports(node):
    checked = policy({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}], "ports": [
        {"protocol": "UDP", "port": 5353}, {"protocol": "SCTP", "port": 3868}]}]}, name="l4")
    enforce(node, (checked, ["c"], {(INGRESS, 0): ["a"]}))
    pod, address = where("c")
    assert udp_exchange(node.pods[pod], node.pods["a"], address, 5353, timeout=SHORT)[0] == "pong:ping", \
        "a datagram in and its answer out (conntrack's UDP)"
    assert udp_exchange(node.pods[pod], node.pods["a"], address, 5354, timeout=SHORT) == (None, None)
    assert sctp_reaches(node.pods[pod], node.pods["a"], address, 3868, timeout=SHORT), "an SCTP INIT to the port"
    assert not sctp_reaches(node.pods[pod], node.pods["a"], address, 3869, timeout=SHORT)
    assert not talk(node, "a", "c", 5353), "the rule is UDP's, not TCP's"


def test_a_policy_for_one_network_leaves_the_pod_s_other_interface_open(node):
    enforce(node, (policy(DENY_IN, name="m-net1"), ["m1"], None))
    assert not talk(node, "a", "m1"), "m's net1 interface is isolated"
    assert talk(node, "b", "m2"), "m's net2 interface is not the policy's"


def test_traffic_between_networks_passes_both_ends_policies(node):
    """b (net2) to c (net1) through the router: b's egress on net2, then
    c's ingress on net1; each end decides for itself, and both must allow."""
    into_c = policy({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "172.16.2.0/24"}}]}]},
                    name="c-from-net2")
    enforce(node, (into_c, ["c"], None))
    assert talk(node, "b", "c"), "c admits net2, and b is not isolated"
    assert not talk(node, "a", "c"), "c admits net2 only"
    enforce(node, (into_c, ["c"], None), (policy(DENY_EG, name="b-out", networks="net2"), ["b"], None))
    assert not talk(node, "b", "c"), "b's own network's egress deny stops it, whatever c admits"
    allow_b = policy({"podSelector": {}, "policyTypes": ["Egress"], "egress": [
        {"to": [{"ipBlock": {"cidr": "172.16.1.0/24"}}], "ports": [{"port": 8080}]}]}, name="b-out", networks="net2")
    enforce(node, (into_c, ["c"], None), (allow_b, ["b"], None))
    assert talk(node, "b", "c"), "both ends allow: through, replies included"
    enforce(node, (policy(DENY_IN, name="c-from-net2"), ["c"], None), (allow_b, ["b"], None))
    assert not talk(node, "b", "c"), "b may send, but c no longer admits"


FLOOD = r"""
import socket, sys, time
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
start = time.monotonic()
for _ in range(int(sys.argv[3])):
    sock.sendto(b"x", (sys.argv[1], int(sys.argv[2])))
print("%.3f" % (time.monotonic() - start))
"""


def drop_logs(node):
    with open(os.path.join(node.box.dir, "ovn-controller.log")) as handle:
        return sum(1 for line in handle if "acl_log" in line and "deny:in:net1" in line)


def settled_drop_logs(node, before, timeout=15):
    """The count of drop log lines once it stops growing: ovn-controller
    writes them as the packets reach it (bounded in time)."""
    deadline, last, steady = time.monotonic() + timeout, -1, 0
    while time.monotonic() < deadline and steady < 5:
        now = drop_logs(node) - before
        steady = steady + 1 if now == last and now > 0 else 0
        last = now
        time.sleep(0.2)
    return last


def ip_in(netns, *args):
    return ip_run(*args, netns=netns).stdout.strip()


def flood(node, count):
    pod, address = where("c")
    return float(ip_in(node.pods["a"], "python3", "-c", FLOOD, address, "9", str(count)))


def test_drops_are_logged_through_a_meter_so_a_flood_cannot_flood_the_log(node):
    enforce(node, (policy(DENY_IN), ["c"], None))
    rate = 20
    meter, = node.box.rows("nb", "Meter")
    band, = node.box.rows("nb", "Meter_Band")
    assert (meter["name"], meter["fair"], band["rate"], band["burst_size"]) == ("ovn4nfv-acl-log", True, rate, rate)
    before = drop_logs(node)
    sent = flood(node, 2000)
    logged = settled_drop_logs(node, before)
    print("drop log: 2000 sent in %.2f s, %d lines with the meter" % (sent, logged))
    assert 1 <= logged <= rate * (sent + 2) + rate, "2,000 drops, %d lines in %.2f s" % (logged, sent)
    # the negative control: the same flood without the meter logs many more
    deny = [r for r in node.box.rows("nb", "ACL") if r["action"] == "drop"][0]
    node.box.nbctl("clear", "ACL", deny["_uuid"], "meter")
    node.wait_hv()
    before = drop_logs(node)
    sent = flood(node, 2000)
    unmetered = settled_drop_logs(node, before)
    print("drop log: 2000 sent in %.2f s, %d lines without it" % (sent, unmetered))
    assert unmetered > rate * (sent + 2) + rate, "without the meter the log takes them all"


def baseline_rules(node, *rules):
    """Make ``rules`` the operator's whole baseline (the network_policy
    module's plan), and wait until ovn-controller has it."""
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, tuple(sorted(set(TABLES + baseline.TABLES)))) as db:
        execute(db, lambda v: baseline.plan_baseline(v, [("config[%d]" % i, r) for i, r in enumerate(rules)],
                                                     "overridden" if rules else "deleted"), write=True)
    node.wait_hv()
    with open(os.path.join(node.box.dir, "ovn-controller.log")) as handle:
        unread = [line for line in handle if "error parsing" in line]
    assert unread == [], "ovn-controller could not read a rendered match"


APART = {"name": "net1-not-from-net2", "network": "net1", "peers": [{"network": "net2"}]}


def test_the_operator_s_baseline_wins_over_a_tenant_s_allow_and_over_its_default_deny(node):
    try:
        # the tenant isolates c and admits a (its network) and b (through the router)
        enforce(node, (policy({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}), ["c"],
                       {(INGRESS, 0): ["a", "b"]}))
        assert talk(node, "a", "c") and talk(node, "b", "c")
        baseline_rules(node, APART)
        assert not talk(node, "b", "c"), "the baseline's deny over the tenant's allow"
        assert talk(node, "a", "c"), "from its own network, the tenant's allow stands"
        assert not talk(node, "b", "d"), "d, which no tenant isolates, is guarded as well"
        assert talk(node, "d", "b"), "what net1 starts gets its replies: net1 is stateful (the tenant's anchor)"
        assert not talk(node, "m1", "c"), "m1 is not among the tenant's peers"
        baseline_rules(node, APART, {"name": "admit-m", "network": "net1", "action": "allow", "priority": 6000,
                                     "peers": [{"cidr": "172.16.1.14/32"}]})
        assert talk(node, "m1", "c"), "the baseline's allow over the tenant's default deny"
        # "accepts only from a", on both families (neighbour discovery is left to the link)
        enforce(node)
        baseline_rules(node, {"name": "only-a", "network": "net1",
                              "except": [{"cidr": "172.16.1.10/32"}, {"cidr": "fd00:1::10/128"}]})
        assert talk(node, "a", "d") and talk(node, "a", "d", family=6)
        assert not talk(node, "c", "d") and not talk(node, "c", "d", family=6)
        assert not talk(node, "m2", "d"), "nor from net2"
        assert talk(node, "d", "b"), "net1's own connections out are not what it accepts"
    finally:
        baseline_rules(node)
        enforce(node)


def set_mode(node, network, mode):
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: vn.plan_networks(v, [("n", vn.check_network({"name": network, "policy_mode": mode},
                                                                          "n"))], "merged", "ovn"), write=True)


ADMIT_8080 = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "egress": [],
              "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 8080}]}]}


def test_a_stateless_network_lets_replies_back_by_the_rules_mirrors_only(node):
    set_mode(node, "net2", "stateless")
    try:
        # b is isolated both ways on net2 and admits m's net2 interface on 8080 only
        enforce(node, (policy(ADMIT_8080, networks="net2"), ["b"], {(INGRESS, 0): ["m2"]}))
        on_net2 = [a for a in node.box.rows("nb", "ACL") if "net2" in (a["name"] or "")]
        assert not [a for a in node.box.rows("nb", "ACL") if a["name"] == "anchor:net2"], "no conntrack anchor"
        assert sorted(a["action"] for a in node.box.rows("nb", "ACL") if (a["name"] or "").startswith("mnp:")) == [
            "allow-stateless", "allow-stateless"], "the rule and its mirror: %s" % on_net2
        assert talk(node, "m2", "b"), "admitted; the reply passes b's egress deny through the mirror"
        assert not talk(node, "m2", "b", port_number=9090), "another port is not admitted"
        # the trade-off: nothing remembers b's own connection, so its replies are refused
        enforce(node, (policy(DENY_IN, networks="net2"), ["b"], None))
        assert not talk(node, "b", "m2"), "stateless: the replies of b's own connection are dropped"
        set_mode(node, "net2", "stateful")
        enforce(node, (policy(DENY_IN, networks="net2"), ["b"], None))
        assert talk(node, "b", "m2"), "the same policy on the stateful network lets them back"
    finally:
        enforce(node)
        set_mode(node, "net2", "stateful")


def test_a_policy_on_a_provider_network_works_as_on_an_overlay(node):
    """ACLs live in port groups of pod ports, so a provider network's switch
    (a localnet port, no router) isolates, keeps the replies of a pod's own
    connections through conntrack, and admits what a rule names, as an
    overlay's does."""
    try:
        enforce(node, (policy(DENY_IN, networks="prov"), ["p2"], None))
        assert not talk(node, "p1", "p2"), "nothing is allowed in to an isolated pod"
        assert talk(node, "p2", "p1"), "the replies of p2's own connection come back"
        enforce(node, (policy(ADMIT_8080, networks="prov"), ["p2"], {(INGRESS, 0): ["p1"]}))
        assert talk(node, "p1", "p2"), "admitted from p1 on 8080, its replies through p2's egress deny"
        assert not talk(node, "p1", "p2", port_number=9090), "another port is not admitted"
    finally:
        enforce(node)


def test_a_provider_network_s_policy_takes_the_fabric_s_hosts_as_ip_blocks(node):
    """The fabric's hosts are no pods: on a provider network a policy names
    them by ipBlock. Their physical network mapped to a bridge of their own,
    two hosts on it: the one the block names is admitted on the rule's port
    and no other, the other host not at all, and the isolated pod's own
    connection to the fabric has its replies back (conntrack on its port)."""
    box = node.box
    box.run("ovs-vsctl", "--db=" + box.ovs_db, "--may-exist", "add-br", "br-pol", "--", "set", "bridge", "br-pol",
            "datapath_type=netdev")
    with ovsdb.Database(box.ovs_db, ovsdb.OVS_SCHEMA, ovs_resources.Chassis.tables) as db:
        reconcile(ovs_resources.Chassis(), [{"system_id": node.chassis, "bridge_mappings": {
            PROVIDERS["prov"]: "br-pol"}}], "merged", db)
    hosts = dict((name, node.attach(name, "br-pol", "0a:00:00:00:03:%02x" % last, "172.16.3.%d/24" % last))
                 for name, last in (("fab1", 0x50), ("fab2", 0x51)))
    p2, p2_address = node.pods[node_pod("p2")], IFACES["p2"][4]
    node.wait_hv()
    try:
        assert tcp_exchange(p2, hosts["fab2"], p2_address, 8080, timeout=SHORT)[0], "open before the policy"
        enforce(node, (policy({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "172.16.3.80/32"}}],
                                                              "ports": [{"port": 8080}]}]}, networks="prov"),
                       ["p2"], None))
        assert tcp_exchange(p2, hosts["fab1"], p2_address, 8080, timeout=SHORT) == ("pong:ping", "172.16.3.80"), \
            "the block's host is admitted on 8080, as itself"
        assert tcp_exchange(p2, hosts["fab1"], p2_address, 9090, timeout=SHORT)[0] is None, "not on another port"
        assert tcp_exchange(p2, hosts["fab2"], p2_address, 8080, timeout=SHORT)[0] is None, "not another host"
        assert tcp_exchange(hosts["fab2"], p2, "172.16.3.81", 8080, timeout=SHORT)[0] == "pong:ping", \
            "the isolated pod's own connection to the fabric has its replies back"
    finally:
        enforce(node)
