"""A real VM on the real data plane: the lab's guest (a Debian kernel and
a busybox initramfs, lab/guest) under QEMU, plugged into a launcher pod's
namespace by lab/vmm.py the way KubeVirt's bridge binding does it, gets
exactly its port's address, router, routes and MTU from OVN's DHCP (port
security on the port's MAC: only the guest, with the interface's original
MAC, may speak), and reaches another pod on the switch; then it is
live-migrated to a second QEMU in a second pod namespace and keeps
running: the same uptime counting on, the same address, a TCP connection
to it still open, and QEMU announcing its MAC (RARP) from the target.

One chassis, as in test_dhcp_dataplane: ovs-vswitchd (userspace datapath)
and ovn-controller in a namespace that is the node; pods are namespaces of
their own on br-int. QEMU runs in this machine's namespace, as on a node,
and migrates over loopback. A migration between chassis activates the
port on the target by that RARP (requested-chassis with
activation-strategy=rarp, the lab's part); with one chassis here the test
moves the port's binding (its iface-id) from the source's OVS port to the
target's after the migration, which is the step that strategy automates.

Traffic goes only between the test's namespaces, and over loopback.
"""

import json
import socket
import time

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from tests.harness.dataplane import Node, ip, ping
from tests.harness.guest import AnnounceWatch, Session, Vmm

NETWORK = {"name": "vmnet", "subnet": "10.61.0.0/24", "mtu": 1400,
           "routes": [{"dst": "192.168.71.0/24", "gw": "10.61.0.254"}],
           "dhcp": {"lease_time": 600}}
GATEWAY = "10.61.0.1"
ECHO_PORT = 7777


def nb(node, compute):
    with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        return execute(db, compute, write=True)


def make_port(node, pod_name, request):
    """A pod's port made as the watcher makes one; its (name, MAC, IP)."""
    pod = pod_ports.Pod("default", pod_name, "uid-" + pod_name)
    reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([request])})[1]
    nb(node, lambda v: pod_ports.plan_pod(v, pod, reqs))
    name = pod.port_name(request["interface"])
    row = [r for r in node.box.rows("nb", "Logical_Switch_Port") if r["name"] == name][0]
    words = (row["addresses"] if isinstance(row["addresses"], str) else row["addresses"][0]).split()
    return name, words[0], words[1]


@pytest.fixture(scope="module")
def node():
    """A chassis, the network with DHCP, a launcher pod's namespace bound
    to its port (an interface configured inside: no address in the pod),
    and a peer pod with its address; vmm with a state directory of its own."""
    chassis = Node()
    try:
        chassis.join()
        nb(chassis, lambda v: plan_topology(v, {}, "merged"))
        nb(chassis, lambda v: vn.plan_networks(v, [("n", vn.check_network(NETWORK, "n"))], "merged", "ovn"))
        chassis.vm_port, chassis.vm_mac, chassis.vm_ip = make_port(
            chassis, "virt-launcher-vm1", {"name": "vmnet", "interface": "net0", "dhcp": True})
        peer_port, peer_mac, chassis.peer_ip = make_port(chassis, "peer", {"name": "vmnet", "interface": "net0"})
        chassis.launcher = chassis.attach("vm", "br-int", chassis.vm_mac, None, iface_id=chassis.vm_port)
        chassis.peer = chassis.attach("peer", "br-int", peer_mac, chassis.peer_ip + "/24", gateway=GATEWAY,
                                      iface_id=peer_port)
        chassis.wait_hv()
        with Vmm() as vmm:
            chassis.vmm = vmm
            yield chassis
        assert chassis.log_errors() == []
    finally:
        chassis.stop()


def guest(node, name, command, timeout=30):
    """The output of ``command`` in the guest ``name``, which must succeed."""
    code, output = node.vmm.console(name, command, timeout)
    assert code == 0, "%s in the guest: exit %d\n%s" % (command, code, output)
    return output


def uptime(node, name):
    return float(guest(node, name, "cat /proc/uptime").split()[0])


def test_the_guest_gets_its_port_s_lease_by_the_bridge_binding_and_reaches_a_pod(node):
    started = time.monotonic()
    report = node.vmm.start("vm1", "/var/run/netns/" + node.launcher, "eth0")
    lease = node.vmm.wait_dhcp("vm1")
    to_lease = time.monotonic() - started
    print("accel %s (%s): console after %.2f s, lease after %.2f s (guest uptime %.2f s)" % (
        report["accel"], report["accel_reason"], report["boot_seconds"], to_lease, lease["bound_uptime"]))
    assert report["mac"] == node.vm_mac

    # the pod's side: the interface in the bridge with another MAC, the tap beside it
    links = {link["ifname"]: link for link in json.loads(ip("ip", "-j", "-d", "link", netns=node.launcher).stdout)}
    assert links["eth0"]["address"] == report["pod_side_mac"] != node.vm_mac
    assert links["eth0"]["master"] == links["tap-eth0"]["master"] == "k6t-eth0"
    assert not json.loads(ip("ip", "-j", "addr", "show", "dev", "eth0", netns=node.launcher).stdout)[0]["addr_info"]
    assert ip("cat", "/proc/sys/net/ipv6/conf/eth0/disable_ipv6", netns=node.launcher).stdout.strip() == "1"

    # the guest: the port's MAC, address, MTU, router and routes, as OVN's DHCP gave them
    assert lease["address"] == node.vm_ip + "/24"
    assert lease["lease"]["mtu"] == "1400"
    assert lease["lease"]["serverid"] == GATEWAY
    assert guest(node, "vm1", "cat /sys/class/net/eth0/address /sys/class/net/eth0/mtu").split() == [node.vm_mac, "1400"]
    addresses = guest(node, "vm1", "ip -o -4 addr show dev eth0").split()
    assert addresses[addresses.index("inet") + 1] == node.vm_ip + "/24"
    routes = sorted(line.split()[:5] for line in guest(node, "vm1", "ip -4 route show").splitlines())
    assert routes == sorted([["default", "via", GATEWAY, "dev", "eth0"],
                             ["10.61.0.0/24", "dev", "eth0", "scope", "link"],
                             ["192.168.71.0/24", "via", "10.61.0.254", "dev", "eth0"]])

    # both ways on the switch: the guest to the pod, the pod to the guest
    guest(node, "vm1", "ping -c 3 -W 2 %s" % node.peer_ip)
    assert ping(node.peer, node.vm_ip)


def free_port():
    """A TCP port free on loopback now (the migration target's)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_live_migration_keeps_the_guest_its_address_and_a_tcp_connection(node):
    if not node.vmm.status("vm1")["exists"]:      # the first test did not start it
        node.vmm.start("vm1", "/var/run/netns/" + node.launcher, "eth0")
        node.vmm.wait_dhcp("vm1")
    # the target's launcher pod: the same port's MAC, its OVS port not bound yet
    target_ns = node.attach("vmtarget", "br-int", node.vm_mac, None)
    before = uptime(node, "vm1")
    boot_id = guest(node, "vm1", "cat /proc/sys/kernel/random/boot_id").strip()
    session = Session(node.peer, node.vm_ip, ECHO_PORT)
    try:
        assert session.echo("before the migration") == "before the migration"
        port = free_port()
        target = node.vmm.start("vm1-target", "/var/run/netns/" + target_ns, "eth0", incoming=port)
        assert target["mac"] == node.vm_mac
        watch = AnnounceWatch(target_ns, "eth0", node.vm_mac)
        try:
            started = time.monotonic()
            report = node.vmm.migrate("vm1", "127.0.0.1:%d" % port)
            took = time.monotonic() - started
            announced = watch.result()
        finally:
            watch.stop()
        print("migration: %.2f s here; QEMU: total %s ms, downtime %s ms, setup %s ms, %s bytes sent; %s" % (
            took, report.get("total-time"), report.get("downtime"), report.get("setup-time"),
            report["ram"]["transferred"], announced))
        assert report["status"] == "completed" and report["source_status"] == "postmigrate"
        # QEMU announced the guest's MAC from the target: a RARP from it
        assert announced == "rarp %s op 3 target %s" % (node.vm_mac, node.vm_mac)
        assert node.vmm.status("vm1-target")["status"] == "running"

        # what requested-chassis with activation-strategy=rarp does between
        # chassis: the port bound where the guest now runs
        node.box.run("ovs-vsctl", "--db=" + node.box.ovs_db, "remove", "interface", "vm-h", "external_ids",
                     "iface-id", "--", "set", "interface", "vmtarget-h", "external_ids:iface-id=" + node.vm_port)
        node.wait_hv()

        # the same guest, not booted again: its boot's id, its clock going
        # on, its address the port's still
        assert guest(node, "vm1-target", "cat /proc/sys/kernel/random/boot_id").strip() == boot_id
        assert uptime(node, "vm1-target") > before
        addresses = guest(node, "vm1-target", "ip -o -4 addr show dev eth0").split()
        assert addresses[addresses.index("inet") + 1] == node.vm_ip + "/24"
        # the connection made to the source is open on the target
        assert session.echo("after the migration") == "after the migration"
        guest(node, "vm1-target", "ping -c 3 -W 2 %s" % node.peer_ip)
    finally:
        session.close()

    # the source stopped: its pod's interface is as the CNI plugin left it
    node.vmm.stop("vm1")
    links = {link["ifname"]: link for link in json.loads(ip("ip", "-j", "link", netns=node.launcher).stdout)}
    assert sorted(links) == ["eth0", "lo"]
    assert links["eth0"]["address"] == node.vm_mac and "master" not in links["eth0"]
    assert ip("cat", "/proc/sys/net/ipv6/conf/eth0/disable_ipv6", netns=node.launcher).stdout.strip() == "0"
