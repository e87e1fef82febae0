"""ovs_uplink against a real ovs-vswitchd (userspace datapath) and real
links, inside a network namespace of the test's own.

The node namespace holds ``ovs-vswitchd`` and three veths named as the
module's EXAMPLES name them, ``eth0`` (the underlay, with an address and a
route through a next hop), ``eth1`` (the external NIC) and ``eth2`` (a
provider network's NIC, without an address). Their peers sit in
a second namespace, the *peer*, which is where the test pings from. The
examples run as written, with only ``db`` pointed at the test's database.
"""

import json
import os
import signal
import sys

import pytest

from tests.harness.dataplane import Node, ip, ping
from tests.harness.playbook import run_playbook
from test_examples import examples

# The seed topology's worker addresses, as in the EXAMPLES; they exist only
# inside the test's namespaces.
UNDERLAY = "192.168.33.12/24"
UNDERLAY_IP = "192.168.33.12"
PEER = "192.168.33.1"
ROUTED = "10.251.0.0/24"
EXTERNAL = "192.168.50.12/24"


class UplinkHost:
    """A node namespace with eth0/eth1, and their peers in another."""

    def __init__(self):
        self.node = Node(ovn=False)      # OVS only: ovs_uplink needs no OVN
        try:
            self.peer = "o4n-%s-peer" % self.node.tag
            self.node._add_ns(self.peer)
            for nic, peer_nic, address, peer_address in (
                    ("eth0", "p0", UNDERLAY, PEER + "/24"),
                    ("eth1", "p1", EXTERNAL, "192.168.50.1/24"),
                    ("eth2", "p2", None, None)):     # a provider network's NIC: no address
                self.node.run_in_node("ip", "link", "add", nic, "type", "veth", "peer", "name",
                                      peer_nic, "netns", self.peer)
                if address:
                    self.node.run_in_node("ip", "addr", "add", address, "dev", nic)
                    ip("ip", "addr", "add", peer_address, "dev", peer_nic, netns=self.peer)
                self.node.run_in_node("ip", "link", "set", nic, "up")
                ip("ip", "link", "set", peer_nic, "up", netns=self.peer)
            self.node.run_in_node("ip", "route", "add", ROUTED, "via", PEER, "dev", "eth0")
        except Exception:
            self.node.stop()
            raise

    def addresses(self, ifname):
        out = self.node.run_in_node("ip", "-j", "-4", "addr", "show", "dev", ifname).stdout
        return sorted("%s/%d" % (a["local"], a["prefixlen"])
                      for link in json.loads(out) for a in link["addr_info"])

    def routes(self, ifname):
        out = self.node.run_in_node("ip", "-j", "-4", "route", "show", "dev", ifname).stdout
        return sorted((r["dst"], r.get("gateway")) for r in json.loads(out) if r.get("gateway"))

    def ipv6_disabled(self, ifname):
        return self.node.run_in_node(
            "cat", "/proc/sys/net/ipv6/conf/%s/disable_ipv6" % ifname).stdout.strip() == "1"

    def vsctl(self, *args):
        return self.node.box.vsctl(*args).strip()

    def fdb(self, bridge):
        """``(port, mac)`` of each entry the bridge learned."""
        out = self.node.run_in_node("ovs-appctl", "-t", os.path.join(
            self.node.box.dir, "ovs-vswitchd.ctl"), "fdb/show", bridge).stdout
        return [(line.split()[0], line.split()[2]) for line in out.splitlines()[1:]]

    def mac(self, ifname):
        out = self.node.run_in_node("ip", "-j", "link", "show", "dev", ifname).stdout
        return json.loads(out)[0]["address"]

    def play(self, collections_path, tasks):
        defaults = {"ovn4nfv.k8s.ovs_uplink": {"db": self.node.box.ovs_db}}
        return run_playbook(collections_path, tasks, module_defaults=defaults, netns=self.node.ns)

    def stop(self):
        self.node.stop()


@pytest.fixture
def host():
    box = UplinkHost()
    try:
        yield box
    finally:
        box.stop()


def uplink(name, **params):
    return {"name": name, "ovn4nfv.k8s.ovs_uplink": params}


def test_examples_move_the_nics_in_order_and_are_idempotent(host, collections_path):
    eth0_mac = host.mac("eth0")
    tasks = examples("ovs_uplink")
    first, proc = host.play(collections_path, tasks)
    assert proc.returncode == 0, proc.stdout[-4000:]
    underlay = first[tasks[0]["name"]]
    assert underlay["changed"]
    assert [op.split(":")[0] for op in underlay["operations"]] == [
        "disable IPv6 on eth0", "remove %s from eth0" % UNDERLAY, "create bridge br-phy",
        "create port eth0", "add %s to br-phy" % UNDERLAY,
        "route %s via %s on br-phy" % (ROUTED, PEER)]
    assert underlay["diff"]["before"]["interface_addresses"] == [UNDERLAY]
    assert underlay["diff"]["after"]["bridge_addresses"] == [UNDERLAY]

    # The host as the examples left it.
    assert host.vsctl("list-ports", "br-phy") == "eth0"
    assert host.vsctl("get", "bridge", "br-phy", "datapath_type") == "netdev"
    assert host.addresses("eth0") == [] and host.ipv6_disabled("eth0")
    assert host.addresses("br-phy") == [UNDERLAY]
    assert host.routes("br-phy") == [(ROUTED, PEER)]
    assert host.mac("br-phy") == eth0_mac, "the bridge takes the NIC's MAC"
    assert host.vsctl("list-ports", "br-ext") == "eth1"
    assert host.addresses("eth1") == [] and host.addresses("br-ext") == []
    # the node's address on VLAN 100 of eth2: a tagged internal port of br-prov
    assert sorted(host.vsctl("list-ports", "br-prov").split()) == ["br-prov.100", "eth2"]
    assert host.vsctl("get", "port", "br-prov.100", "tag") == "100"
    assert host.addresses("br-prov.100") == ["192.168.100.12/24"]

    # The node's address answers through the userspace bridge, and the
    # bridge never learned its own MAC on the NIC's port.
    assert ping(host.peer, UNDERLAY_IP)
    own = [port for port, mac in host.fdb("br-phy") if mac == eth0_mac]
    assert own in ([], ["LOCAL"]), "br-phy learned its own MAC on %s" % own

    second, proc = host.play(collections_path, tasks)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert [n for n, r in second.items() if r.get("changed")] == []


def test_check_mode_then_absent_gives_the_nic_back(host, collections_path):
    present = uplink("on", interface="eth0", bridge="br-phy")
    probe = dict(uplink("would", interface="eth0", bridge="br-phy", state="absent"),
                 check_mode=True)
    absent = uplink("off", interface="eth0", bridge="br-phy", state="absent")
    results, proc = host.play(collections_path, [present, probe])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert results["would"]["changed"]
    assert results["would"]["operations"][0] == "remove port eth0 from br-phy"
    assert host.vsctl("list-ports", "br-phy") == "eth0", "check mode changed nothing"
    assert host.addresses("br-phy") == [UNDERLAY]

    results, proc = host.play(collections_path, [absent, dict(absent, name="again")])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert results["off"]["changed"] and not results["again"]["changed"]
    assert host.vsctl("list-ports", "br-phy") == ""
    assert host.addresses("eth0") == [UNDERLAY] and host.addresses("br-phy") == []
    assert host.routes("eth0") == [(ROUTED, PEER)]
    assert not host.ipv6_disabled("eth0")
    assert ping(host.peer, UNDERLAY_IP)


def test_check_mode_creates_nothing(host, collections_path):
    results, proc = host.play(collections_path, [
        dict(uplink("would", interface="eth0", bridge="br-phy"), check_mode=True)])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert results["would"]["changed"]
    assert host.vsctl("list-br") == ""
    assert host.addresses("eth0") == [UNDERLAY] and not host.ipv6_disabled("eth0")


def test_a_missing_nic_fails_before_anything_is_touched(host, collections_path):
    results, proc = host.play(collections_path, [
        dict(uplink("typo", interface="eht0", bridge="br-phy"), ignore_errors=True)])
    assert results["typo"]["failed"]
    assert "eht0 does not exist" in results["typo"]["msg"]
    assert host.vsctl("list-br") == ""


def test_bridge_address_is_repaired_when_given(host, collections_path):
    """Once the NIC is a port, its address is no longer on it to learn from:
    ``addresses`` names what the bridge must hold, so a bridge that lost
    its address (ovs-vswitchd re-created its interface) is repaired."""
    results, proc = host.play(collections_path, [
        uplink("on", interface="eth0", bridge="br-phy", addresses=[UNDERLAY])])
    assert proc.returncode == 0, proc.stdout[-4000:]
    host.node.run_in_node("ip", "addr", "flush", "dev", "br-phy")
    assert host.addresses("br-phy") == []
    results, proc = host.play(collections_path, [
        uplink("mend", interface="eth0", bridge="br-phy", addresses=[UNDERLAY])])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert results["mend"]["changed"]
    assert results["mend"]["operations"] == ["add %s to br-phy" % UNDERLAY]
    assert host.addresses("br-phy") == [UNDERLAY]
    assert ping(host.peer, UNDERLAY_IP)


def test_nothing_goes_on_the_bridge_before_it_has_the_nic_mac(host, collections_path):
    """ovs-vswitchd takes a userspace bridge's tap down to give it the MAC
    ``other_config:hwaddr`` asks for, and a link that goes down loses its
    routes (a route added meanwhile fails with ENETUNREACH). So the module
    must not touch the bridge's interface before it has the NIC's MAC.

    With ovs-vswitchd stopped, a bridge that is up with another MAC never
    gets it: the module must fail after ``link_timeout``, having put nothing
    on the bridge, and give the NIC back as it found it. Once ovs-vswitchd
    runs again, the same task succeeds."""
    # Without --no-wait, ovs-vsctl returns once ovs-vswitchd made the tap.
    host.node.run_in_node("ovs-vsctl", "--db=" + host.node.box.ovs_db, "--timeout=60", "add-br",
                          "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev")
    host.node.run_in_node("ip", "link", "set", "br-phy", "up")
    eth0_mac = host.mac("eth0")
    assert host.mac("br-phy") != eth0_mac
    with open(os.path.join(host.node.box.dir, "ovs-vswitchd.pid")) as handle:
        vswitchd = int(handle.read())
    task = uplink("on", interface="eth0", bridge="br-phy", link_timeout=3)
    os.kill(vswitchd, signal.SIGSTOP)
    try:
        results, proc = host.play(collections_path, [dict(task, ignore_errors=True)])
    finally:
        os.kill(vswitchd, signal.SIGCONT)
    assert results["on"]["failed"], "the module went on before br-phy had eth0's MAC"
    assert results["on"]["msg"].startswith(
        "wait for br-phy: br-phy did not take the MAC %s within 3s" % eth0_mac), results["on"]["msg"]
    assert "eth0 was taken off br-phy and given back its addresses and routes" in results["on"]["msg"]
    assert host.addresses("br-phy") == [] and host.routes("br-phy") == []
    assert host.vsctl("list-ports", "br-phy") == ""
    assert host.addresses("eth0") == [UNDERLAY] and host.routes("eth0") == [(ROUTED, PEER)]
    assert not host.ipv6_disabled("eth0")
    assert ping(host.peer, UNDERLAY_IP)

    results, proc = host.play(collections_path, [task])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert results["on"]["changed"]
    assert host.mac("br-phy") == eth0_mac
    assert host.addresses("br-phy") == [UNDERLAY]
    assert host.routes("br-phy") == [(ROUTED, PEER)]
    assert ping(host.peer, UNDERLAY_IP)


def test_after_a_reboot_the_boot_unit_puts_the_uplink_back(host, collections_path, tmp_path):
    """What a reboot leaves: OVS still has eth0 on br-phy, but the kernel
    state is gone: the address is back on the NIC (a DHCP lease, a
    container's network) and the bridge has none. The boot unit's command
    (``python3 -m ovn4nfv_k8s.daemons.uplinks <file>``, here from the
    collection's tree) puts the address back on the bridge, in the safe
    order, and a second run changes nothing."""
    results, proc = host.play(collections_path, [
        uplink("on", interface="eth0", bridge="br-phy", addresses=[UNDERLAY])])
    assert proc.returncode == 0, proc.stdout[-4000:]
    host.node.run_in_node("ip", "addr", "flush", "dev", "br-phy")
    host.node.run_in_node("sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6")
    host.node.run_in_node("ip", "addr", "add", UNDERLAY, "dev", "eth0")
    config = tmp_path / "br-phy.json"
    config.write_text(json.dumps({"interface": "eth0", "bridge": "br-phy", "datapath_type": "netdev",
                                  "move_addresses": True, "addresses": [UNDERLAY],
                                  "ovs_db": host.node.box.ovs_db}))
    module = "ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.uplinks"
    env = dict(host.node.box.env, PYTHONPATH=collections_path)
    first = host.node.run_in_node(sys.executable, "-m", module, str(config), env=env)
    assert host.addresses("eth0") == [] and host.ipv6_disabled("eth0")
    assert host.addresses("br-phy") == [UNDERLAY]
    assert "restored" in first.stderr, first.stderr
    assert ping(host.peer, UNDERLAY_IP)
    second = host.node.run_in_node(sys.executable, "-m", module, str(config), env=env)
    assert "as configured" in second.stderr, second.stderr


def test_the_boot_unit_refuses_a_file_it_cannot_read_whole(host, collections_path, tmp_path):
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"interface": "eth0", "bridge": "br-phy", "mtu": 9000}))
    module = "ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.uplinks"
    proc = host.node.run_in_node(sys.executable, "-m", module, str(config),
                                 env=dict(host.node.box.env, PYTHONPATH=collections_path), check=False)
    assert proc.returncode == 1 and "a JSON object of interface" in proc.stderr, proc.stderr
    assert host.vsctl("list-br") == "", "nothing was made"
