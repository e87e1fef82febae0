"""Virtual networks carry real traffic: two pods on two networks talk
through the distributed router, a pod reaches an external host through the
node gateway with SNAT, and a deleted network stops carrying traffic.

ovs-vswitchd (userspace datapath) and ovn-controller run in a namespace
that is the node; pods and the external host are namespaces of their own.
Everything OVN and OVS is built with the collection's core, as the
modules would build it.
"""

import json
import os
import sys

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources import ovs as ovs_resources
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import chains
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import services
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import remote_mirrors
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import port_mirrors

from tests.harness.dataplane import FRAMES, Node, heard, ip, listening, ping, tcp_exchange
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_gateways, plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute, reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import (
    LogicalSwitch, LogicalSwitchPort)

PROBE = os.path.join(os.path.dirname(__file__), "..", "..", "playbooks", "files", "probe.py")
EXTERNAL_HOST = "192.168.50.1"
GATEWAY_IP = "192.168.50.12"


def nb(node, compute):
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        return execute(db, compute, write=True)


def ovs(node, resource, config):
    with ovsdb.Database(node.box.ovs_db, ovsdb.OVS_SCHEMA, resource.tables) as db:
        return reconcile(resource, config, "merged", db)


def networks(items, state="merged", force=False):
    checked = [("config[%d]" % i, vn.check_network(x, "config[%d]" % i)) for i, x in enumerate(items)]
    return lambda view: vn.plan_networks(view, checked, state, "ovn", force)


@pytest.fixture(scope="module")
def cluster_node():
    node = Node()
    try:
        ovs(node, ovs_resources.Chassis(), [{
            "system_id": node.chassis, "ovn_remote": node.box.sb_db, "encap_type": ["geneve"],
            "encap_ip": "127.0.0.1", "bridge_datapath_type": "netdev",
            "bridge_mappings": {node.physnet: node.external_bridge}}])
        ovs(node, ovs_resources.Bridge(), [{"name": node.external_bridge, "datapath_type": "netdev"}])
        node.start_controller()
        nb(node, lambda v: plan_topology(v, {"join_subnet": "100.64.1.0/24"}, "merged"))
        nb(node, lambda v: plan_gateways(v, [("config[0]", {
            "node": node.chassis, "external_ip": GATEWAY_IP + "/24",
            "external_gateway": EXTERNAL_HOST})], "merged"))
        nb(node, networks([{"name": "net1", "subnet": "172.16.1.0/24", "subnet6": "fd00:1::/64"},
                           {"name": "net2", "subnet": "172.16.2.0/24", "subnet6": "fd00:2::/64"}]))
        with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA,
                            LogicalSwitchPort.tables) as db:
            reconcile(LogicalSwitchPort(), [
                {"name": "pod-a", "switch": "net1",
                 "addresses": ["0a:00:00:00:01:0a 172.16.1.10 fd00:1::10"]},
                {"name": "pod-b", "switch": "net2",
                 "addresses": ["0a:00:00:00:02:0a 172.16.2.10 fd00:2::10"]},
                {"name": "pod-c", "switch": "net1", "addresses": ["dynamic"]},
            ], "merged", db)
        node.wait_hv()
        node.pod_a = node.attach("pa", "br-int", "0a:00:00:00:01:0a", "172.16.1.10/24",
                                 gateway="172.16.1.1", iface_id="pod-a",
                                 cidr6="fd00:1::10/64", gateway6="fd00:1::1")
        node.pod_b = node.attach("pb", "br-int", "0a:00:00:00:02:0a", "172.16.2.10/24",
                                 gateway="172.16.2.1", iface_id="pod-b",
                                 cidr6="fd00:2::10/64", gateway6="fd00:2::1")
        node.external = node.attach("ext", node.external_bridge, "0a:00:00:00:50:01",
                                    EXTERNAL_HOST + "/24")
        node.wait_hv()
        yield node
        assert node.log_errors() == [], "the daemons logged errors"
    finally:
        node.stop()


def test_pods_on_two_networks_ping_and_talk_tcp(cluster_node):
    assert ping(cluster_node.pod_a, "172.16.2.10"), "pod-a cannot reach pod-b across the router"
    reply, source = tcp_exchange(cluster_node.pod_b, cluster_node.pod_a, "172.16.2.10", 8080)
    assert reply == "pong:ping"
    assert source == "172.16.1.10", "routed, not translated, between networks"


def test_dual_stack_pods_ping_over_ipv6(cluster_node):
    assert ping(cluster_node.pod_a, "fd00:2::10"), "pod-a cannot reach pod-b over IPv6"


def test_dynamic_port_gets_both_families_from_ovn(cluster_node):
    port = [p for p in cluster_node.box.rows("nb", "Logical_Switch_Port") if p["name"] == "pod-c"][0]
    mac, ipv4, ipv6 = port["dynamic_addresses"].split()
    assert ipv4.startswith("172.16.1.") and ipv4 != "172.16.1.1"
    assert ipv6.startswith("fd00:1::"), "ovn-northd assigns from the network's IPv6 prefix"


def test_pod_reaches_external_host_through_the_gateway_with_snat(cluster_node):
    assert ping(cluster_node.pod_a, EXTERNAL_HOST), "pod-a cannot reach the external host"
    reply, source = tcp_exchange(cluster_node.external, cluster_node.pod_b, EXTERNAL_HOST, 9000)
    assert reply == "pong:ping"
    assert source == GATEWAY_IP, "the external host must see the gateway's address (SNAT)"


def service_plan(node, endpoints, remove=False):
    service = services.Service("default", "web", "uid-web", {services.NETWORK_ANNOTATION: "net1"},
                               cluster_ip="10.96.0.10", external_ips=[SERVICE_EXTERNAL_IP],
                               ports=[services.Port("http", "TCP", 80, 8080)])
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES + services.TABLES) as db:
        if remove:
            return execute(db, lambda v: services.plan_remove(v, service.key), write=True)
        return execute(db, lambda v: services.plan_service(v, service, endpoints, None), write=True)


SERVICE_EXTERNAL_IP = "192.168.50.120"


def test_service_vip_and_external_ip_reach_the_backend(cluster_node):
    """A Service on net1 backed by pod-a: pod-b on net2 reaches its VIP
    through its own switch and the router; the external host reaches its
    external IP through the gateway, which answers ARP for it and sends
    the traffic on from its join address; with no backend left the VIP
    takes no connection; and removed, nothing of it stays in the NB."""
    backend = [services.Endpoint(True, {"http": 8080}, ip="172.16.1.10")]
    plan = service_plan(cluster_node, backend)
    assert sorted(c.label for c in plan.changes) == [
        "svc_default_web_tcp", "svcx_default_web_tcp_" + SERVICE_EXTERNAL_IP]
    cluster_node.wait_hv()
    reply, source = tcp_exchange(cluster_node.pod_a, cluster_node.pod_b, "10.96.0.10", 80,
                                 bind="0.0.0.0", server_port=8080)
    assert reply == "pong:ping", "pod-b cannot reach the Service's VIP"
    assert source == "172.16.2.10", "balanced on the client's switch: the backend sees the client"
    reply, source = tcp_exchange(cluster_node.pod_a, cluster_node.external, SERVICE_EXTERNAL_IP, 80,
                                 bind="0.0.0.0", server_port=8080)
    assert reply == "pong:ping", "the external host cannot reach the Service's external IP"
    assert source == "100.64.1.2", "the gateway sends balanced traffic on from its join address"

    service_plan(cluster_node, [])
    cluster_node.wait_hv()
    reply, _source = tcp_exchange(cluster_node.pod_a, cluster_node.pod_b, "10.96.0.10", 80,
                                  bind="0.0.0.0", server_port=8080, timeout=3)
    assert reply is None, "a Service without a ready backend takes no connection"

    service_plan(cluster_node, None, remove=True)
    assert [lb["name"] for lb in cluster_node.box.rows("nb", "Load_Balancer")] == []
    for table in ("Logical_Switch", "Logical_Router"):
        assert all(not r["load_balancer"] for r in cluster_node.box.rows("nb", table)), \
            "a switch or router still holds a balancer"


FUNCTION = {"left": ("fn-left", "0a:00:00:00:01:14", "172.16.1.20"),
            "right": ("fn-right", "0a:00:00:00:02:14", "172.16.2.20")}
CHAIN = {"name": "fw", "source_network": "net1", "destination_network": "net2",
         "functions": [{"selector": {"app": "fw"}, "left": {"interface": "eth0", "network": "net1"},
                        "right": {"interface": "eth1", "network": "net2"}}]}


def chain_nb(node, compute):
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES + chains.TABLES) as db:
        return execute(db, compute, write=True)


def reply_ttl(netns, address):
    """The TTL of one echo reply, or None when there is none."""
    out = ip("ping", "-n", "-c", "1", "-W", "2", address, netns=netns, check=False).stdout
    found = [w for w in out.split() if w.startswith("ttl=")]
    return int(found[0][4:]) if found else None


def rx_packets(netns, ifname):
    return int(ip("cat", "/sys/class/net/%s/statistics/rx_packets" % ifname, netns=netns).stdout)


@pytest.fixture(scope="module")
def function_ns(cluster_node):
    """A forwarding network function: eth0 on net1, eth1 on net2, IP
    forwarding on; its ports with full port security, as a pod's have."""
    with ovsdb.Database(cluster_node.box.nb_db, ovsdb.NB_SCHEMA, LogicalSwitchPort.tables) as db:
        reconcile(LogicalSwitchPort(), [
            {"name": FUNCTION[side][0], "switch": net, "addresses": ["%s %s" % FUNCTION[side][1:]],
             "port_security": ["%s %s" % FUNCTION[side][1:]]}
            for side, net in (("left", "net1"), ("right", "net2"))], "merged", db)
    name, mac, addr = FUNCTION["left"]
    netns = cluster_node.attach(name, "br-int", mac, addr + "/24", iface_id=name)
    name, mac, addr = FUNCTION["right"]
    cluster_node.attach(name, "br-int", mac, addr + "/24", iface_id=name, ifname="eth1", into=netns)
    ip("sysctl", "-qw", "net.ipv4.ip_forward=1", netns=netns)
    cluster_node.wait_hv()
    return netns


def test_a_chain_sends_traffic_through_its_function_and_fails_closed(cluster_node, function_ns):
    """net1 -> net2 through a forwarding function: without a ready function
    the chain drops (closed) or lets traffic go straight (open); with one,
    every packet crosses it (its counters, one more TTL hop), both ways,
    its ports relaxed to MAC-only port security so it may forward; deleted,
    nothing of the chain is left and the ports are secured again."""
    assert reply_ttl(cluster_node.pod_a, "172.16.2.10") == 63, "one router hop before the chain"
    ports = dict((FUNCTION[s][0], FUNCTION[s][0]) for s in FUNCTION)
    present = [True]

    def resolve(namespace, selector, interface):
        if not present[0] or selector != {"app": "fw"}:
            return []
        rows = chains_rows(cluster_node)
        return [("fw-pod", rows[ports["fn-left" if interface == "eth0" else "fn-right"]])]

    plan = chain_nb(cluster_node, lambda v: chains.plan_chains(v, [("config[0]", CHAIN)], "merged"))
    assert [c.action for c in plan.changes] == ["create"]
    chain_nb(cluster_node, lambda v: chains.plan_hops(v, "fw", resolve)[0])
    cluster_node.wait_hv()
    policies = cluster_node.box.rows("nb", "Logical_Router_Policy")
    assert sorted((p["action"], p["nexthops"]) for p in policies) == [
        ("reroute", "172.16.1.20"), ("reroute", "172.16.2.20")]
    lsp = dict((p["name"], p) for p in cluster_node.box.rows("nb", "Logical_Switch_Port"))
    assert lsp["fn-left"]["port_security"] == "0a:00:00:00:01:14", "MAC only: it forwards others' packets"
    before = rx_packets(function_ns, "eth0"), rx_packets(function_ns, "eth1")
    assert ping(cluster_node.pod_a, "172.16.2.10", count=5, wait=2)
    after = rx_packets(function_ns, "eth0"), rx_packets(function_ns, "eth1")
    assert after[0] - before[0] >= 5 and after[1] - before[1] >= 5, "requests and replies crossed it"
    assert reply_ttl(cluster_node.pod_a, "172.16.2.10") == 62, "one more hop: the function's"

    present[0] = False
    chain_nb(cluster_node, lambda v: chains.plan_hops(v, "fw", resolve)[0])
    cluster_node.wait_hv()
    assert not ping(cluster_node.pod_a, "172.16.2.10", count=2, wait=1), "no function: closed"
    assert cluster_node.box.rows("nb", "Logical_Switch_Port") and all(
        "ovn4nfv-chains" not in p["external_ids"] for p in cluster_node.box.rows("nb", "Logical_Switch_Port"))

    chain_nb(cluster_node, lambda v: chains.plan_chains(v, [("config[0]", dict(CHAIN, fail_open=True))],
                                                        "merged"))
    chain_nb(cluster_node, lambda v: chains.plan_hops(v, "fw", resolve)[0])
    cluster_node.wait_hv()
    assert reply_ttl(cluster_node.pod_a, "172.16.2.10") == 63, "no function, open: straight through"

    chain_nb(cluster_node, lambda v: chains.plan_chains(v, [("config[0]", {"name": "fw"})], "deleted"))
    assert cluster_node.box.rows("nb", "Logical_Router_Policy") == []
    lsp = dict((p["name"], p) for p in cluster_node.box.rows("nb", "Logical_Switch_Port"))
    assert lsp["fn-left"]["port_security"] == "0a:00:00:00:01:14 172.16.1.20 fe80::800:ff:fe00:114"


def tap_ovs(node, compute):
    with ovsdb.Database(node.box.ovs_db, ovsdb.OVS_SCHEMA, port_mirrors.TABLES) as db:
        return execute(db, compute, write=True)


def test_a_tap_copies_a_pods_traffic_to_its_collector_and_follows_the_pod(cluster_node):
    """Copies of pod-a's traffic reach the collector, counted there; pod-a
    made again (a new veth, the same logical port) is tapped again by the
    node agent's follow; deleted, the tap leaves no mirror and no record."""
    # the collector alone on a switch of its own: nothing but the copies reaches it
    with ovsdb.Database(cluster_node.box.nb_db, ovsdb.NB_SCHEMA, LogicalSwitchPort.tables) as db:
        reconcile(LogicalSwitch(), [{"name": "sink"}], "merged", db)
        reconcile(LogicalSwitchPort(), [{"name": "col", "switch": "sink",
                                         "addresses": ["0a:00:00:00:09:33 10.99.0.33"]}], "merged", db)
    collector = cluster_node.attach("col", "br-int", "0a:00:00:00:09:33", "10.99.0.33/24", iface_id="col")
    cluster_node.wait_hv()
    tap = {"name": "a-tap", "source": {"port": "pod-a"}, "collector": {"port": "col"}, "direction": "both"}
    plan = tap_ovs(cluster_node, lambda v: port_mirrors.plan_taps(v, [("config[0]", tap)], "merged"))
    assert [c.action for c in plan.changes] == ["create"]
    mirrors = cluster_node.box.rows("ovs", "Mirror")
    assert [m["name"] for m in mirrors] == ["ovn4nfv-tap-a-tap"]

    def copies(count):
        cluster_node.purge_flows()
        before = rx_packets(collector, "eth0")
        assert ping(cluster_node.pod_a, "172.16.2.10", count=count, wait=2)
        return rx_packets(collector, "eth0") - before

    assert copies(5) >= 10, "each request and each reply is copied to the collector"
    # verify.yml's probe finds the collector itself, and counts it as no pod of the matrix
    found = cluster_node.run_in_node(
        "env", "OVN4NFV_PROBE_OVS_DB=" + cluster_node.box.ovs_db, sys.executable, PROBE, "pods",
        json.dumps([{"name": "sink", "subnet": "10.99.0.0/24"}, {"name": "net1", "subnet": "172.16.1.0/24"}]))
    found = dict((p["netns"], p["collector"]) for p in json.loads(found.stdout))
    assert (found[collector], found[cluster_node.pod_a]) == (True, False)
    # pod-a made again, as a CNI ADD would: its old port goes, a new one comes
    cluster_node.box.run("ovs-vsctl", "--db=" + cluster_node.box.ovs_db, "del-port", "br-int", "pa-h")
    assert tap_ovs(cluster_node, port_mirrors.plan_follow).changed
    assert cluster_node.box.rows("ovs", "Mirror") == [], "no source, no mirror"
    cluster_node.box.run("ovs-vsctl", "--db=" + cluster_node.box.ovs_db, "add-port", "br-int", "pa-h", "--",
                         "set", "interface", "pa-h", "external_ids:iface-id=pod-a")
    assert tap_ovs(cluster_node, port_mirrors.plan_follow).changed
    cluster_node.wait_hv()
    assert copies(5) >= 10, "the tap follows the pod to its new port"

    tap_ovs(cluster_node, lambda v: port_mirrors.plan_taps(v, [("config[0]", {"name": "a-tap"})], "deleted"))
    assert cluster_node.box.rows("ovs", "Mirror") == []
    root = cluster_node.box.rows("ovs", "Open_vSwitch")[0]
    assert not [k for k in root["external_ids"] if k.startswith("ovn4nfv-tap")]
    # with the tap, 10 pings make at least 20 copies; the collector's own
    # interface may still see a stray multicast frame of its own network
    assert copies(10) < 10, "deleted: the pings are copied no more"


def has_ofport(node, name, timeout=30):
    """Wait (on the OVS database's own updates, at most ``timeout`` s)
    until ovs-vswitchd gave the interface ``name`` an OpenFlow port: its
    device exists then."""
    def numbered(idl):
        return any(row.name == name and list(row.ofport) for row in idl.tables["Interface"].rows.values()) or None
    with ovsdb.Database(node.box.ovs_db, ovsdb.OVS_SCHEMA, ("Interface",)) as db:
        return db.wait_for(numbered, timeout)


def tunnel_port(node, name, present, timeout=30):
    """Wait (on the OVS database's own updates, at most ``timeout`` s)
    until ovn-controller has made, or removed, the port ``name``; return
    its interface's type and options."""
    def found(idl):
        for row in idl.tables["Interface"].rows.values():
            if row.name == name:
                return (row.type, dict(row.options)) if present else None
        return None if present else True
    with ovsdb.Database(node.box.ovs_db, ovsdb.OVS_SCHEMA, ("Interface",)) as db:
        return db.wait_for(found, timeout)


def test_a_remote_tap_sends_gre_copies_to_the_collector_address(cluster_node):
    """A tap to a remote collector: ovn-controller makes the GRE port and
    the mirror, pod-a's requests arrive at the collector's address on the
    node's underlay, in GRE, and stop when the tap is deleted."""
    node = cluster_node
    # the node's underlay: br-und with the node's address 10.97.0.1, and
    # the collector host at 10.97.0.2
    ovs(node, ovs_resources.Bridge(), [{"name": "br-und", "datapath_type": "netdev"}])
    try:
        # ovs-vswitchd makes the bridge's device a moment later; its ofport says it did
        assert has_ofport(node, "br-und"), "ovs-vswitchd made no device for br-und"
        # IPv4 only: no router solicitations or MLD reports of its own reach the collector
        node.run_in_node("sysctl", "-qw", "net.ipv6.conf.br-und.disable_ipv6=1")
        node.run_in_node("ip", "addr", "add", "10.97.0.1/24", "dev", "br-und")
        node.run_in_node("ip", "link", "set", "br-und", "up")
        sink = node.attach("gre", "br-und", "0a:00:00:00:97:02", "10.97.0.2/24")
        ip("sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=1", netns=sink)
        # the userspace datapath resolves a tunnel's next hop itself: given, no copy waits on ARP
        node.run_in_node("ovs-appctl", "--target=%s/ovs-vswitchd.ctl" % node.box.dir,
                         "tnl/arp/set", "br-und", "10.97.0.2", "0a:00:00:00:97:02")
        tap = {"name": "pa-gre", "source": {"port": "pod-a"}, "direction": "egress",
               "collector": {"address": "10.97.0.2", "encapsulation": "gre", "key": 5}}
        with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES + remote_mirrors.TABLES) as db:
            execute(db, lambda v: remote_mirrors.plan_taps(v, [("config[0]", tap)], "merged"), write=True)
        kind, options = tunnel_port(node, "ovn-pa-gre", present=True)
        assert (kind, options["remote_ip"], options["key"]) == ("gre", "10.97.0.2", "5")
        node.wait_hv()

        def copies(count):
            node.purge_flows()
            before = rx_packets(sink, "eth0")
            assert ping(node.pod_a, "172.16.2.10", count=count, wait=2)
            return rx_packets(sink, "eth0") - before

        assert copies(10) >= 10, "each request pod-a sends is copied to 10.97.0.2 (which is on no logical network: only the tunnel reaches it)"
        with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES + remote_mirrors.TABLES) as db:
            execute(db, lambda v: remote_mirrors.plan_taps(v, [("config[0]", {"name": "pa-gre"})], "deleted"),
                    write=True)
        assert tunnel_port(node, "ovn-pa-gre", present=False)
        assert [m for m in node.box.rows("ovs", "Mirror") if m["name"] == "pa-gre"] == []
        assert copies(10) < 10, "deleted: the requests are copied no more"
    finally:
        node.box.run("ovs-vsctl", "--db=" + node.box.ovs_db, "--if-exists", "del-br", "br-und")


def chains_rows(node):
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, LogicalSwitchPort.tables) as db:
        return db.read(lambda idl: dict((r.name, r) for r in idl.tables["Logical_Switch_Port"].rows.values()))


PROVIDERS = [{"name": "prov-v100", "subnet": "192.168.100.0/24", "physnet": "physnet-ext", "vlan": 100},
             {"name": "prov-v200", "subnet": "192.168.200.0/24", "physnet": "physnet-ext", "vlan": 200}]


def broadcast(netns, iface, mac, src_ip, dst_ip, payload):
    ip(sys.executable, FRAMES, "send", iface, json.dumps([dict(
        kind="udp", src_mac=mac, dst_mac="ff:ff:ff:ff:ff:ff", src_ip=src_ip, dst_ip=dst_ip, payload=payload)]),
        netns=netns)


def test_provider_networks_reach_the_fabric_tagged_untranslated_and_apart(cluster_node):
    """Two provider networks on the gateways' physical network, VLANs 100
    and 200. The fabric is a VLAN switch (an OVS bridge of its own, joined
    to br-ex's wire by a patch: a trunk) whose access ports lead to the
    fabric's hosts on each VLAN, so a host answers only frames of its VID.
    Each pod reaches its VLAN's host by its own address (no NAT, no
    router), with full-size frames; a pod on both VLANs and an overlay
    reaches all three; the fabric learned the pods' MACs on their VLANs; a
    broadcast on VLAN 200 reaches VLAN 200's host and no one on VLAN 100."""
    node = cluster_node
    nb(node, networks(PROVIDERS))
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, LogicalSwitchPort.tables) as db:
        reconcile(LogicalSwitchPort(), [
            {"name": "prov-a", "switch": "prov-v100", "addresses": ["0a:00:00:00:64:0a 192.168.100.10"]},
            {"name": "prov-b", "switch": "prov-v200", "addresses": ["0a:00:00:00:c8:0a 192.168.200.10"]},
            {"name": "prov-m0", "switch": "net2", "addresses": ["0a:00:00:00:02:0b 172.16.2.11"]},
            {"name": "prov-m1", "switch": "prov-v100", "addresses": ["0a:00:00:00:64:0b 192.168.100.11"]},
            {"name": "prov-m2", "switch": "prov-v200", "addresses": ["0a:00:00:00:c8:0b 192.168.200.11"]},
        ], "merged", db)
    box = node.box
    box.run("ovs-vsctl", "--db=" + box.ovs_db, "add-br", "br-fabric", "--", "set", "bridge", "br-fabric",
            "datapath_type=netdev", "--", "add-port", node.external_bridge, "to-fabric", "--", "set", "interface",
            "to-fabric", "type=patch", "options:peer=to-ex", "--", "add-port", "br-fabric", "to-ex", "--", "set",
            "interface", "to-ex", "type=patch", "options:peer=to-fabric")
    hosts = {}
    for vid in (100, 200):
        hosts[vid] = node.attach("fab%d" % vid, "br-fabric", "0a:00:00:00:fa:%02x" % (vid % 256),
                                 "192.168.%d.1/24" % vid)
        box.run("ovs-vsctl", "--db=" + box.ovs_db, "set", "port", "fab%d-h" % vid, "tag=%d" % vid)
    a = node.attach("prova", "br-int", "0a:00:00:00:64:0a", "192.168.100.10/24", gateway="192.168.100.1",
                    iface_id="prov-a")
    b = node.attach("provb", "br-int", "0a:00:00:00:c8:0a", "192.168.200.10/24", gateway="192.168.200.1",
                    iface_id="prov-b")
    m = node.attach("provm", "br-int", "0a:00:00:00:02:0b", "172.16.2.11/24", gateway="172.16.2.1",
                    iface_id="prov-m0")
    node.attach("provm1", "br-int", "0a:00:00:00:64:0b", "192.168.100.11/24", iface_id="prov-m1", ifname="eth1",
                into=m)
    node.attach("provm2", "br-int", "0a:00:00:00:c8:0b", "192.168.200.11/24", iface_id="prov-m2", ifname="eth2",
                into=m)
    node.wait_hv()

    assert tcp_exchange(hosts[100], a, "192.168.100.1", 9100) == ("pong:ping", "192.168.100.10"), "untranslated"
    assert tcp_exchange(hosts[200], b, "192.168.200.1", 9200) == ("pong:ping", "192.168.200.10"), "untranslated"
    assert ip("ping", "-M", "do", "-s", "1472", "-c", "1", "-W", "2", "192.168.100.1", netns=a,
              check=False).returncode == 0, "a full 1500-byte packet, tagged, fits"
    # two provider networks and an overlay on one pod
    assert ping(m, "192.168.100.1") and ping(m, "192.168.200.1") and ping(m, "172.16.1.10")
    assert ping(m, "192.168.100.10"), "pods of one provider network on one node meet on its switch"
    # on the wire: the fabric learned each pod's MAC on the trunk, in its network's VLAN
    fdb = node.run_in_node("ovs-appctl", "-t", os.path.join(box.dir, "ovs-vswitchd.ctl"), "fdb/show",
                           "br-fabric").stdout
    learned = set((line.split()[1], line.split()[2]) for line in fdb.splitlines()[1:])
    assert {("100", "0a:00:00:00:64:0a"), ("200", "0a:00:00:00:c8:0a")} <= learned, fdb

    # VLAN 200's broadcast reaches VLAN 200's host; VLAN 100 never sees it
    # (its listeners stop on a later broadcast of VLAN 100's own)
    on200 = listening(hosts[200], "eth0", "v200-bcast")
    on100 = [listening(hosts[100], "eth0", "v100-sentinel"), listening(m, "eth1", "v100-sentinel")]
    broadcast(b, "eth0", "0a:00:00:00:c8:0a", "192.168.200.10", "192.168.200.255", "v200-bcast")
    assert "v200-bcast" in [f.get("payload") for f in heard(on200)]
    broadcast(a, "eth0", "0a:00:00:00:64:0a", "192.168.100.10", "192.168.100.255", "v100-sentinel")
    for listener in on100:
        payloads = [f.get("payload") for f in heard(listener)]
        assert "v100-sentinel" in payloads and "v200-bcast" not in payloads, payloads
    # nothing of them on the gateway router: no route, no SNAT
    nat = box.nbctl("lr-nat-list", "gr-" + node.chassis)
    assert "192.168.100.0/24" not in nat and "192.168.200.0/24" not in nat


def test_a_deleted_network_carries_no_traffic(cluster_node):
    """Runs last in this module: it deletes net1 (forced: pod-a is on it)."""
    assert ping(cluster_node.pod_a, "172.16.2.10")
    plan = nb(cluster_node, networks([{"name": "net1"}], state="deleted", force=True))
    assert "delete virtual_network net1" in plan.operations()
    cluster_node.wait_hv()
    assert not ping(cluster_node.pod_a, "172.16.2.10", count=2, wait=1)
    assert not ping(cluster_node.pod_a, EXTERNAL_HOST, count=2, wait=1)
    nat = cluster_node.box.nbctl("lr-nat-list", "gr-" + cluster_node.chassis)
    assert "172.16.1.0/24" not in nat and "172.16.2.0/24" in nat


def test_the_node_audit_finds_dead_and_stray_interfaces_and_repairs_the_products(cluster_node):
    """On a real node's br-int: a product port whose veth went with its pod
    (no CNI DEL), a product port naming a logical port the NB does not
    have, and a foreign one; the repair deletes the product's two in one
    transaction, and leaves pod-a, pod-b and the foreign port alone."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import host_audit
    node = cluster_node
    vsctl = ["ovs-vsctl", "--db=" + node.box.ovs_db]
    mark = "external_ids:ovn4nfv-container-id=c-test"
    node.box.run(*vsctl + ["add-port", "br-int", "gone-h", "--", "set", "interface", "gone-h",
                           "external_ids:iface-id=pod-c", mark])
    node.run_in_node("ip", "link", "add", "stray-h", "type", "veth", "peer", "name", "stray-p")
    for link in ("stray-h", "stray-p"):
        node.run_in_node("ip", "link", "set", link, "up")
    node.box.run(*vsctl + ["add-port", "br-int", "stray-h", "--", "set", "interface", "stray-h",
                           "external_ids:iface-id=default_nobody_eth0", mark])
    node.run_in_node("ip", "link", "add", "vanish-h", "type", "veth", "peer", "name", "vanish-p")
    for link in ("vanish-h", "vanish-p"):
        node.run_in_node("ip", "link", "set", link, "up")
    node.box.run(*vsctl + ["add-port", "br-int", "vanish-h", "--", "set", "interface", "vanish-h",
                           "external_ids:iface-id=pod-d", mark])
    node.run_in_node("ip", "link", "add", "foreign-h", "type", "veth", "peer", "name", "foreign-p")
    for link in ("foreign-h", "foreign-p"):
        node.run_in_node("ip", "link", "set", link, "up")
    node.box.run(*vsctl + ["add-port", "br-int", "foreign-h", "--", "set", "interface", "foreign-h",
                           "external_ids:iface-id=someone_else"])
    try:
        with ovsdb.Database(node.box.ovs_db, ovsdb.OVS_SCHEMA, host_audit.TABLES) as db:
            def dead(idl):
                return [i for i in idl.tables["Interface"].rows.values() if i.name == "gone-h" and i.ofport == [-1]]
            assert db.wait_for(dead, 30), "ovs-vswitchd found no device for gone-h"
            # a device that goes away (its pod's namespace with it): the
            # userspace datapath may keep its port number for a while
            node.expected_errors = getattr(node, "expected_errors", []) + [
                "error receiving data from vanish-h: Network is down"]
            node.run_in_node("ip", "link", "del", "vanish-h")
            devices = node.run_in_node("ls", "/sys/class/net").stdout.split()
            known = [p["name"] for p in node.box.rows("nb", "Logical_Switch_Port")] + ["pod-c", "pod-d"]
            findings = execute(db, lambda v: host_audit.audit_node(v, "chassis1", known, devices=devices,
                                                                   live_pods=[]), write=False)
            # (other tests of this module leave their own strays: only this test's are counted)
            mine = ("gone-h", "stray-h", "vanish-h", "foreign-h")
            findings = [f for f in findings if f["objects"][0] in mine]
            assert [(f["class"], f["objects"], bool(f["repair"])) for f in findings] == [
                ("stray_interface", ["foreign-h"], False), ("dead_interface", ["gone-h"], True),
                ("stray_interface", ["stray-h"], True), ("dead_interface", ["vanish-h"], True)]
            repaired = execute(db, lambda v: host_audit.plan_node_repair(v, findings), write=True)
            assert repaired.changed
            after = execute(db, lambda v: host_audit.audit_node(v, "chassis1", known, devices=devices,
                                                                live_pods=[]), write=False)
            assert [(f["class"], f["objects"]) for f in after if f["objects"][0] in mine] == [
                ("stray_interface", ["foreign-h"])]
        ports = set(p["name"] for p in node.box.rows("ovs", "Port"))
        assert {"pa-h", "pb-h", "foreign-h"} <= ports and not {"gone-h", "stray-h", "vanish-h"} & ports
    finally:
        node.box.run(*vsctl + ["--if-exists", "del-port", "foreign-h", "--", "--if-exists", "del-port", "stray-h",
                               "--", "--if-exists", "del-port", "gone-h", "--", "--if-exists", "del-port", "vanish-h"])
        for link in ("stray-h", "foreign-h"):
            node.run_in_node("ip", "link", "del", link, check=False)
