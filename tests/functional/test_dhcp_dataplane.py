"""A virtual network's DHCP on the real data plane: Debian's dhclient and
busybox's udhcpc, in a pod's namespace bound to the port the watcher's
core made, get exactly the port's address, the gateway, the network's
routes, MTU, DNS server and domain from OVN (ovn-controller answers in
the node); a dual-stack network's SLAAC address is the port's, its MTU
the network's; and a client with another MAC on the same port gets
nothing, because port security stays on.

ovs-vswitchd (userspace datapath) and ovn-controller run in a namespace
that is the node; the pod is a namespace of its own (tests/harness).
"""

import json
import time

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import addressing
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from tests.harness.dataplane import Node, ip
from tests.harness.dhcp_clients import dhclient, udhcpc

NETWORK = {"name": "vmnet", "subnet": "10.60.0.0/24", "subnet6": "fd00:60::/64", "mtu": 1400,
           "dns": ["10.60.0.53"], "routes": [{"dst": "192.168.70.0/24", "gw": "10.60.0.254"}],
           "dhcp": {"lease_time": 600, "domain": "lab.example"}}
FOREIGN_MAC = "0a:00:00:00:99:99"


def nb(node, compute):
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        return execute(db, compute, write=True)


@pytest.fixture(scope="module")
def vm_node():
    """A chassis, the network with DHCP, and a pod made as the watcher
    makes one, its namespace bound to its port with no address."""
    node = Node()
    try:
        node.join()
        nb(node, lambda v: plan_topology(v, {}, "merged"))
        nb(node, lambda v: vn.plan_networks(v, [("n", vn.check_network(NETWORK, "n"))], "merged", "ovn"))
        pod = pod_ports.Pod("default", "vm-launcher", "uid-vm")
        reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([{"name": "vmnet", "interface": "net0"}])})[1]
        nb(node, lambda v: pod_ports.plan_pod(v, pod, reqs))
        node.port = pod.port_name("net0")
        row = [r for r in node.box.rows("nb", "Logical_Switch_Port") if r["name"] == node.port][0]
        # a one-member set reads as its member
        words = (row["addresses"] if isinstance(row["addresses"], str) else row["addresses"][0]).split()
        node.mac, node.ip, node.ip6 = words[0], words[1], words[2]
        node.pod = node.attach("vm", "br-int", node.mac, None, iface_id=node.port)
        node.wait_hv()
        yield node
        assert node.log_errors() == []
    finally:
        node.stop()


def test_udhcpc_gets_the_port_s_address_gateway_routes_and_mtu(vm_node):
    lease = udhcpc(vm_node.pod)
    assert lease is not None, "no DHCP answer from OVN"
    assert lease["ip"] == vm_node.ip
    assert lease["subnet"] == "255.255.255.0"
    assert lease["router"] == "10.60.0.1"
    assert lease["mtu"] == "1400"
    assert lease["dns"].split() == ["10.60.0.53"]
    assert lease["domain"] == "lab.example"
    # RFC 3442: the network's route, and the default route after it
    assert lease["staticroutes"].split() == ["192.168.70.0/24", "10.60.0.254", "0.0.0.0/0", "10.60.0.1"]
    assert lease["serverid"] == "10.60.0.1"
    assert lease["lease"] == "600"


def test_dhclient_gets_the_same(vm_node):
    lease = dhclient(vm_node.pod)
    assert lease is not None, "no DHCP lease from OVN"
    assert lease["new_ip_address"] == vm_node.ip
    assert lease["new_subnet_mask"] == "255.255.255.0"
    assert lease["new_routers"] == "10.60.0.1"
    assert lease["new_interface_mtu"] == "1400"
    assert lease["new_domain_name_servers"] == "10.60.0.53"
    assert lease["new_domain_name"] == "lab.example"
    assert lease["new_rfc3442_classless_static_routes"].split() == [
        "24", "192", "168", "70", "10", "60", "0", "254", "0", "10", "60", "0", "1"]


def test_slaac_gives_the_port_s_ipv6_address_and_the_network_s_mtu(vm_node):
    expected = str(addressing.eui64(addressing.parse_cidr("fd00:60::/64", "subnet6"), vm_node.mac))
    assert vm_node.ip6 == expected
    # the router advertisement answers the kernel's solicitation (bounded:
    # 30 s, for a solicitation repeated every 4 s, RFC 4861)
    ip("ip", "link", "set", "eth0", "down", netns=vm_node.pod)
    ip("ip", "link", "set", "eth0", "up", netns=vm_node.pod)
    found, end = [], time.monotonic() + 30
    while time.monotonic() < end and not found:
        out = ip("ip", "-6", "-j", "addr", "show", "dev", "eth0", "scope", "global", netns=vm_node.pod).stdout
        found = [a["local"] for link in json.loads(out or "[]") for a in link.get("addr_info", [])
                 if a.get("family") == "inet6" and not a.get("tentative")]
        if not found:
            time.sleep(0.2)
    assert found == [expected]
    # the advertisement's MTU option, taken by the kernel for IPv6 on the link
    assert ip("cat", "/proc/sys/net/ipv6/conf/eth0/mtu", netns=vm_node.pod).stdout.strip() == "1400"


def test_a_client_with_another_mac_gets_nothing(vm_node):
    ip("ip", "link", "set", "eth0", "address", FOREIGN_MAC, netns=vm_node.pod)
    try:
        assert udhcpc(vm_node.pod, tries=3, timeout=1) is None
    finally:
        ip("ip", "link", "set", "eth0", "address", vm_node.mac, netns=vm_node.pod)
    # and with its own MAC back, the answer comes again
    assert udhcpc(vm_node.pod)["ip"] == vm_node.ip


def test_a_pod_s_own_routes_reach_its_guest_and_no_default_route_when_it_said_so(vm_node):
    pod = pod_ports.Pod("default", "vm-second", "uid-vm2")
    reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([{
        "name": "vmnet", "interface": "net0", "dhcp": True, "default_gateway": False,
        "routes": [{"dst": "10.99.0.0/16"}]}])})[1]
    nb(vm_node, lambda v: pod_ports.plan_pod(v, pod, reqs))
    row = [r for r in vm_node.box.rows("nb", "Logical_Switch_Port") if r["name"] == pod.port_name("net0")][0]
    mac, address = (row["addresses"] if isinstance(row["addresses"], str) else row["addresses"][0]).split()[:2]
    netns = vm_node.attach("vm2", "br-int", mac, None, iface_id=pod.port_name("net0"))
    vm_node.wait_hv()
    lease = udhcpc(netns)
    assert lease is not None and lease["ip"] == address
    assert "router" not in lease
    assert lease["staticroutes"].split() == ["192.168.70.0/24", "10.60.0.254", "10.99.0.0/16", "10.60.0.1"]
