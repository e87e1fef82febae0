"""ovn_chassis' owned_bridge_mappings through ansible-playbook against a
real ovsdb-server: the product's provider-network mappings on a node are
exactly the inventory's, one it set before and no longer lists goes, and
another tool's mappings and every other key of external_ids stay as they
were. Check mode writes nothing; a second run changes nothing.

Then the node's own addresses on VLANs of a physical network
(``vlan_interfaces``), on a real ovs-vswitchd: see the second test."""

import json
import sys

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node.vlan_interfaces import vlan_mac
from tests.harness.dataplane import Node, ip, ping
from tests.harness.playbook import run_playbook
from tests.harness.sandbox import stable_dump


def test_the_product_s_own_mappings_and_nothing_else(sandbox, collections_path):
    ovs = sandbox.ovs_db
    sandbox.vsctl("set", "open_vswitch", ".", "external_ids:hostname=h1", "external_ids:some-tool=kept",
                  "external_ids:ovn-bridge-mappings=foreign:br-f")

    def chassis(name, config, state="merged", check=False, fail=False):
        task = {"name": name, "ovn4nfv.k8s.ovn_chassis": {"config": config, "state": state, "db": ovs}}
        if check:
            task["check_mode"] = True
        if fail:
            task["ignore_errors"] = True
        return task

    def ids(name):
        return {"name": name, "changed_when": False, "ansible.builtin.command": {
            "argv": ["ovs-vsctl", "--db=" + ovs, "get", "open_vswitch", ".", "external_ids"]}}

    def dump(name):
        return {"name": name, "changed_when": False, "ansible.builtin.command": {"argv": ["ovsdb-client", "dump", ovs]}}

    first = {"owned_bridge_mappings": {"physnet-a": "br-a", "physnet-b": "br-b"}}
    r, proc = run_playbook(collections_path, [
        dump("dump0"),
        chassis("check", first, check=True),
        dump("dump1"),
        chassis("set", first),
        chassis("again", first),
        ids("ids_set"),
        # node_gateway's merged mapping beside: neither writer undoes the other's order
        chassis("gateway", {"bridge_mappings": {"gw": "br-gw"}}),
        chassis("owned_after_gateway", first),
        chassis("gateway_again", {"bridge_mappings": {"gw": "br-gw"}}),
        chassis("drop_a", {"owned_bridge_mappings": {"physnet-b": "br-b2"}}),
        ids("ids_dropped"),
        chassis("gathered", None, state="gathered"),
        chassis("both", {"owned_bridge_mappings": {"x": "br-x"}, "bridge_mappings": {"y": "br-y"}}, fail=True),
        chassis("bad_name", {"owned_bridge_mappings": {"phys,1": "br-x"}}, fail=True),
        chassis("bad_bridge", {"owned_bridge_mappings": {"physnet-c": None}}, fail=True),
        chassis("take_over", {"owned_bridge_mappings": {"physnet-b": "br-b2", "foreign": "br-mine"}}, fail=True),
        ids("ids_refused"),
        chassis("delete", {"owned_bridge_mappings": {}}, state="deleted"),
        chassis("delete_again", {"owned_bridge_mappings": {}}, state="deleted"),
        ids("ids_deleted"),
    ])
    assert proc.returncode == 0, proc.stdout[-4000:]

    assert r["check"]["changed"] and stable_dump(r["dump0"]["stdout"]) == stable_dump(r["dump1"]["stdout"])
    assert r["check"]["diff"]["after"]["open_vswitch"]["owned_bridge_mappings"] == first["owned_bridge_mappings"]
    assert r["set"]["changed"] and not r["again"]["changed"]
    assert 'ovn-bridge-mappings="foreign:br-f,physnet-a:br-a,physnet-b:br-b"' in r["ids_set"]["stdout"]
    assert 'ovn4nfv-physnets="physnet-a,physnet-b"' in r["ids_set"]["stdout"]
    for kept in ('hostname=h1', 'some-tool=kept'):
        assert kept in r["ids_set"]["stdout"]

    # physnet-a no longer listed: gone; physnet-b's bridge changed; foreign stays
    assert r["drop_a"]["changed"]
    assert not r["owned_after_gateway"]["changed"] and not r["gateway_again"]["changed"]
    assert 'ovn-bridge-mappings="foreign:br-f,physnet-b:br-b2,gw:br-gw"' in r["ids_dropped"]["stdout"]
    assert 'ovn4nfv-physnets=physnet-b' in r["ids_dropped"]["stdout"]
    assert r["drop_a"]["diff"]["before"]["open_vswitch"]["owned_bridge_mappings"] == {
        "physnet-a": "br-a", "physnet-b": "br-b"}
    assert r["gathered"]["gathered"]["owned_bridge_mappings"] == {"physnet-b": "br-b2"}
    assert r["gathered"]["gathered"]["bridge_mappings"] == {"foreign": "br-f", "physnet-b": "br-b2", "gw": "br-gw"}

    # another tool's mapping is not taken over: refused, nothing written
    assert "physnet foreign is mapped already (to br-f)" in r["take_over"]["msg"]
    assert r["ids_refused"]["stdout"] == r["ids_dropped"]["stdout"]

    assert "not both" in r["both"]["msg"]
    assert "not a valid physical network name" in r["bad_name"]["msg"]
    assert r["bad_bridge"]["failed"] and "physnet-c" in r["bad_bridge"]["msg"]

    # deleted: the product's mappings and its record go, the rest stays
    assert r["delete"]["changed"] and not r["delete_again"]["changed"]
    assert 'ovn-bridge-mappings="foreign:br-f,gw:br-gw"' in r["ids_deleted"]["stdout"]
    assert "ovn4nfv-physnets" not in r["ids_deleted"]["stdout"]
    assert "some-tool=kept" in r["ids_deleted"]["stdout"]


# -- the node's own addresses on VLANs of a physical network ------------------
#
# ovs_uplink's vlan_interfaces (what the ovn_controller role's
# ovn_controller_physnets[].vlan_interfaces runs, now and at boot) against a
# real ovs-vswitchd (userspace datapath) in a namespace of the test's own:
# the NIC prov0 (a veth whose peer is in another namespace) on br-prov, and
# two hosts on br-prov by access ports of another tool's, one on VLAN 100 and
# one on VLAN 200, both in the same subnet, so that only the VLAN tells them
# apart. This kernel has no 8021q: the tagged internal port is the only way.

NODE_V100 = "192.168.100.5/24"
NODE_V100_IP = "192.168.100.5"
MOVED_V100 = "192.168.100.6/24"
NODE_V200 = "192.168.200.5/24"
NODE_V200_IP = "192.168.200.5"


class VlanHost:
    """A node namespace with the NIC prov0 and, once br-prov exists, two
    hosts on it by access ports (``h100`` on VLAN 100, ``h200`` on 200;
    ``h200`` has an address in VLAN 100's subnet too)."""

    def __init__(self):
        self.node = Node(ovn=False)
        try:
            self.wire = "o4n-%s-wire" % self.node.tag
            self.node._add_ns(self.wire)
            self.node.run_in_node("ip", "link", "add", "prov0", "type", "veth", "peer", "name", "wire0",
                                  "netns", self.wire)
            self.node.run_in_node("ip", "link", "set", "prov0", "up")
        except Exception:
            self.node.stop()
            raise

    def hosts(self):
        self.h100 = self.node.attach("h100", "br-prov", "02:00:00:00:01:00", "192.168.100.9/24")
        self.h200 = self.node.attach("h200", "br-prov", "02:00:00:00:02:00", "192.168.100.10/24")
        self.vsctl("set", "port", "h100-h", "tag=100")
        self.vsctl("set", "port", "h200-h", "tag=200")
        ip("ip", "addr", "add", "192.168.200.10/24", "dev", "eth0", netns=self.h200)

    def vsctl(self, *args):
        return self.node.box.vsctl(*args).strip()

    def link(self, ifname):
        """``(addresses, MAC, up)`` of a link in the node, or None."""
        proc = self.node.run_in_node("ip", "-j", "addr", "show", "dev", ifname, check=False)
        if proc.returncode != 0:
            return None
        link = json.loads(proc.stdout)[0]
        return (sorted("%s/%d" % (a["local"], a["prefixlen"]) for a in link["addr_info"]
                       if a.get("scope") == "global"), link["address"], "UP" in link["flags"])

    def config_dump(self):
        """What a writer of the configuration may change: the bridges, ports
        and interfaces' configuration columns (ovs-vswitchd keeps writing an
        interface's status and statistics on its own)."""
        columns = {"Bridge": ["name", "ports", "datapath_type", "other_config", "external_ids"],
                   "Port": ["name", "interfaces", "tag", "trunks", "external_ids"],
                   "Interface": ["name", "type", "options", "mac", "mtu_request", "external_ids"]}
        return "".join(self.node.run_in_node("ovsdb-client", "dump", self.node.box.ovs_db, "Open_vSwitch", table,
                                             *names).stdout for table, names in sorted(columns.items()))

    def play(self, collections_path, tasks):
        defaults = {"ovn4nfv.k8s.ovs_uplink": {"db": self.node.box.ovs_db}}
        return run_playbook(collections_path, tasks, module_defaults=defaults, netns=self.node.ns)


def vlan_uplink(name, vlans, check=False, fail=False):
    task = {"name": name, "ovn4nfv.k8s.ovs_uplink": {
        "interface": "prov0", "bridge": "br-prov", "move_addresses": False, "vlan_interfaces": vlans}}
    if check:
        task["check_mode"] = True
    if fail:
        task["ignore_errors"] = True
    return task


def test_the_node_s_address_on_a_vlan_is_a_tagged_internal_port(collections_path, tmp_path):
    host = VlanHost()
    try:
        v100 = [{"vlan": 100, "address": NODE_V100}]
        r, proc = host.play(collections_path, [vlan_uplink("check", v100, check=True)])
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert r["check"]["changed"] and "create port br-prov.100" in " ".join(r["check"]["operations"])
        assert "add %s to br-prov.100" % NODE_V100 in r["check"]["operations"]
        assert host.vsctl("list-br") == "" and host.link("br-prov.100") is None, "check mode made nothing"

        r, proc = host.play(collections_path, [vlan_uplink("set", v100), vlan_uplink("again", v100)])
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert r["set"]["changed"] and not r["again"]["changed"], r["again"]["operations"]
        assert r["set"]["diff"]["after"]["vlan_interfaces"] == [
            {"name": "br-prov.100", "vlan": 100, "addresses": [NODE_V100]}]
        # an OVS internal port with the tag, marked as the product's; its device holds the address
        assert host.vsctl("get", "interface", "br-prov.100", "type") == "internal"
        assert host.vsctl("get", "port", "br-prov.100", "tag") == "100"
        assert host.vsctl("get", "interface", "br-prov.100", "external_ids:ovn4nfv-vlan-interface") == '"100"'
        nic_mac = host.link("prov0")[1]
        assert host.link("br-prov.100") == ([NODE_V100], vlan_mac(nic_mac, 100), True)

        # traffic: a host on VLAN 100 reaches the node's VLAN address; one on
        # VLAN 200, in the same subnet, does not (another tool's access ports)
        host.hosts()
        assert ping(host.h100, NODE_V100_IP)
        assert not ping(host.h200, NODE_V100_IP, count=2, wait=1)

        # refused before anything changes: a name another port has, a bad VLAN,
        # a VLAN twice, an address without a host, a name over 15 characters
        before = host.config_dump()
        r, proc = host.play(collections_path, [
            vlan_uplink("foreign_name", [{"vlan": 100, "address": NODE_V100, "name": "h100-h"}], fail=True),
            vlan_uplink("vlan_4095", [{"vlan": 4095, "address": NODE_V100}], fail=True),
            vlan_uplink("vlan_twice", v100 + [{"vlan": 100, "address": NODE_V200, "name": "v100b"}], fail=True),
            vlan_uplink("bad_cidr", [{"vlan": 100, "address": "192.168.100.5"}], fail=True),
            vlan_uplink("long_name", [{"vlan": 100, "address": NODE_V100, "name": "a-very-long-name0"}], fail=True),
        ])
        assert "port h100-h exists in Open vSwitch and is not a VLAN interface of the product's" in \
            r["foreign_name"]["msg"], r["foreign_name"]["msg"]
        assert "vlan_interfaces[0].vlan: 4095 is out of range 1-4094" in r["vlan_4095"]["msg"]
        assert "vlan 100 is asked for twice" in r["vlan_twice"]["msg"]
        assert "not a valid IP/prefix" in r["bad_cidr"]["msg"]
        assert "is not a valid interface name" in r["long_name"]["msg"]
        assert host.config_dump() == before
        assert host.link("br-prov.100")[0] == [NODE_V100]

        # the address moves; VLAN 200 gains an interface of its own name and MTU
        both = [{"vlan": 100, "address": MOVED_V100}, {"vlan": 200, "address": NODE_V200, "name": "v200", "mtu": 1400}]
        r, proc = host.play(collections_path, [vlan_uplink("both", both), vlan_uplink("both_again", both)])
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert r["both"]["changed"] and not r["both_again"]["changed"]
        assert "remove %s from br-prov.100" % NODE_V100 in r["both"]["operations"]
        assert host.link("br-prov.100")[0] == [MOVED_V100]
        assert host.vsctl("get", "port", "v200", "tag") == "200"
        assert host.vsctl("get", "interface", "v200", "mtu") == "1400"
        assert ping(host.h200, NODE_V200_IP)
        assert ping(host.h100, MOVED_V100.split("/", maxsplit=1)[0])

        # a reboot: OVS makes the devices again (with their MAC), the addresses
        # are gone; the boot unit's command, with the file the role writes, puts
        # them back, and changes nothing a second time
        host.node.run_in_node("ip", "addr", "flush", "dev", "v200")
        config = tmp_path / "br-prov.json"
        config.write_text(json.dumps({"interface": "prov0", "bridge": "br-prov", "datapath_type": "netdev",
                                      "move_addresses": False, "addresses": [], "vlan_interfaces": both,
                                      "ovs_db": host.node.box.ovs_db}))
        module = "ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.uplinks"
        env = dict(host.node.box.env, PYTHONPATH=collections_path)
        first = host.node.run_in_node(sys.executable, "-m", module, str(config), env=env)
        assert "restored" in first.stderr and host.link("v200")[0] == [NODE_V200], first.stderr
        second = host.node.run_in_node(sys.executable, "-m", module, str(config), env=env)
        assert "as configured" in second.stderr, second.stderr

        # dropped from the list: its port and address go (check mode: not yet);
        # another tool's ports stay
        r, proc = host.play(collections_path, [vlan_uplink("would_drop", both[1:], check=True)])
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert r["would_drop"]["operations"] == ["delete port br-prov.100"]
        assert host.link("br-prov.100")[0] == [MOVED_V100]
        r, proc = host.play(collections_path, [vlan_uplink("drop", both[1:])])
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert r["drop"]["changed"] and "delete port br-prov.100" in r["drop"]["operations"]
        assert host.link("br-prov.100") is None
        assert sorted(host.vsctl("list-ports", "br-prov").split()) == ["h100-h", "h200-h", "prov0", "v200"]
        assert host.vsctl("get", "port", "h100-h", "tag") == "100"
        assert not ping(host.h100, MOVED_V100.split("/", maxsplit=1)[0], count=2, wait=1)

        # none left: [] deletes every one of the product's, and nothing else
        r, proc = host.play(collections_path, [vlan_uplink("none", []), vlan_uplink("none_again", [])])
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert r["none"]["changed"] and not r["none_again"]["changed"]
        assert sorted(host.vsctl("list-ports", "br-prov").split()) == ["h100-h", "h200-h", "prov0"]
        assert host.node.log_errors() == []
    finally:
        host.node.stop()
