"""Every module's EXAMPLES run, as written, against real daemons; a second
run changes nothing; the info modules report what the examples built."""

import ast
import os

import yaml

from tests.harness.playbook import run_playbook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Examples build on each other within a group: bridges before ports,
# switches and routers before their ports, routes and NAT; the topology
# before gateways and networks. The two groups tell separate stories (both
# declare ovn-ls-25, differently) and run on separate daemons.
BUILDING_BLOCKS = ["ovs_bridge", "ovs_port", "ovn_chassis", "ovs_info",
                   "ovn_logical_switch", "ovn_logical_router", "ovn_logical_switch_port",
                   "ovn_logical_router_port", "ovn_static_route", "ovn_nat", "ovn_load_balancer",
                   "ovn_info"]
CLUSTER = ["cluster_topology", "node_gateway", "virtual_network", "cluster_network", "network_chain", "network_policy"]
# Their db follows their database option, so each task gets the sandbox's
# NB or SB remote (the servers here do not act on Connection rows).
LISTENERS = ["ovn_connection"]
# Need pods on a node: their lifecycle in test_taps.py, their copies in test_dataplane.py.
ON_A_NODE = ["traffic_tap"]
# Moves host NICs: its examples run in test_uplink.py, in a namespace.
IN_A_NAMESPACE = ["ovs_uplink"]
# Traces pods of the lab's shape: its examples run in test_trace.py.
TRACED = ["network_trace"]
# Needs the API too: its examples run in test_audit.py, with the API stand-in.
AUDITED = ["network_audit"]
# Reads the NB and SB and writes files: its examples run in test_picture.py.
DRAWN = ["network_picture"]
# Upgrade a node's packages and restart its daemons under systemd: their
# examples are upgrade.yml's own tasks, run on the lab's nodes by
# make lab-upgrade (and the molecule topology scenario on Debian 12).
UPGRADING = ["node_upgrade", "upgrade_plan"]
ORDER = BUILDING_BLOCKS + CLUSTER + LISTENERS + IN_A_NAMESPACE + ON_A_NODE + TRACED + AUDITED + DRAWN + UPGRADING


def examples(module):
    with open(os.path.join(ROOT, "plugins", "modules", module + ".py")) as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "EXAMPLES":
            return yaml.safe_load(node.value.value)
    raise AssertionError("%s has no EXAMPLES" % module)


def test_every_module_is_in_the_order():
    modules = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "plugins", "modules"))
                     if f.endswith(".py"))
    assert sorted(ORDER) == modules


def example_tasks(modules):
    tasks = []
    for module in modules:
        for index, task in enumerate(examples(module)):
            task = dict(task)
            task["name"] = "%s #%d: %s" % (module, index, task["name"])
            tasks.append(task)
    return tasks


def run_twice(sandbox, collections_path, tasks):
    """Run ``tasks`` twice; the second run must change nothing."""
    defaults = {"group/ovn4nfv.k8s.ovs": {"db": sandbox.ovs_db},
                "group/ovn4nfv.k8s.ovn_nb": {"db": sandbox.nb_db}}
    first, proc = run_playbook(collections_path, tasks, module_defaults=defaults)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert any(r.get("changed") for r in first.values())

    second, proc = run_playbook(collections_path, tasks, module_defaults=defaults)
    assert proc.returncode == 0, proc.stdout[-4000:]
    changed = [name for name, r in second.items() if r.get("changed")]
    assert changed == [], "examples are not idempotent: %s" % changed
    return defaults


def test_cluster_examples_run_and_are_idempotent(sandbox, collections_path):
    defaults = run_twice(sandbox, collections_path, example_tasks(CLUSTER))
    # what the examples declared is what the audit finds recorded: no drift, nothing else
    audit, proc = run_playbook(collections_path, [{"name": "audit", "ovn4nfv.k8s.network_audit": {
        "db": sandbox.nb_db, "sb_db": ""}}], module_defaults=defaults)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert audit["audit"]["findings"] == [], audit["audit"]["lines"]
    nets = dict((n["name"], n) for n in sandbox.rows("nb", "Logical_Switch")
                if n["external_ids"].get("ovn4nfv-network"))
    assert set(nets) == {"ovn-ls-25", "ovn-ls-26", "macvlan-net", "vm-net", "prov-v100", "prov-v200", "vnf-net"}
    nat = sandbox.rows("nb", "NAT")
    assert len(nat) == 2 * 5, "each of two gateways SNATs each of five overlay networks (a provider network: none)"
    # virtual_network's VRRP example: the virtual IP's OVN virtual port
    vport = next(p for p in sandbox.rows("nb", "Logical_Switch_Port") if p["name"] == "vip-vnf-net-172.16.50.250")
    assert vport["type"] == "virtual" and vport["options"]["virtual-ip"] == "172.16.50.250"
    # virtual_network's DHCP example: an IPv4 and a DHCPv6 row, and the router port's advertisements
    assert sorted(r["cidr"] for r in sandbox.rows("nb", "DHCP_Options")) == ["172.16.40.0/24", "fd00:40::/64"]
    lrp = next(r for r in sandbox.rows("nb", "Logical_Router_Port") if r["name"] == "rtos-vm-net")
    assert lrp["ipv6_ra_configs"]["address_mode"] == "dhcpv6_stateful"


def test_examples_run_and_are_idempotent(sandbox, collections_path):
    defaults = run_twice(sandbox, collections_path, example_tasks(BUILDING_BLOCKS))

    info = [dict(name="ovs", **{"ovn4nfv.k8s.ovs_info": {}}),
            dict(name="nb", **{"ovn4nfv.k8s.ovn_info": {}}),
            dict(name="nb_switches", **{"ovn4nfv.k8s.ovn_info": {"gather": ["logical_switches"]}})]
    facts, proc = run_playbook(collections_path, info, module_defaults=defaults)
    assert proc.returncode == 0, proc.stdout[-4000:]
    ovs, nb = facts["ovs"], facts["nb"]
    assert sorted(b["name"] for b in ovs["bridges"]) == ["br-ex", "br-int"]
    assert {p["name"]: p["bridge"] for p in ovs["ports"]} == {
        "patch-int-ex": "br-int", "patch-ex-int": "br-ex", "veth1234ab": "br-int"}
    assert ovs["chassis"]["bridge_mappings"] == {"physnet-ext": "br-ex", "physnet-prov": "br-prov",
                                                 "physnet-vlan": "br-vlan"}
    assert ovs["chassis"]["owned_bridge_mappings"] == {"physnet-prov": "br-prov", "physnet-vlan": "br-vlan"}
    assert ovs["chassis"]["encap_ip"] == "192.168.33.12"
    assert [s["name"] for s in nb["logical_switches"]] == ["ovn-ls-25", "ovn-ls-26"]
    assert {p["name"] for p in nb["logical_switch_ports"]} == {
        "default_web_net0", "default_web_net1", "stor-ovn-ls-25"}
    assert {r["name"] for r in nb["logical_routers"]} == {"ovn4nfv-master", "gr-worker1"}
    gateway = [p for p in nb["logical_router_ports"] if p["name"] == "rtoe-ext"][0]
    assert gateway["gateway_chassis"] == [{"chassis_name": "worker1", "priority": 20},
                                          {"chassis_name": "worker2", "priority": 10}]
    assert len(nb["static_routes"]) == 2 and len(nb["nat"]) == 1
    web = nb["load_balancers"][0]
    assert web["vips"] == {"10.96.0.10:80": ["172.16.25.3:8080", "172.16.25.4:8080"]}
    assert web["switches"] == ["ovn-ls-25"] and web["routers"] == ["ovn4nfv-master"]
    assert web["health_checks"] == [{"vip": "10.96.0.10:80", "interval": 5, "timeout": 3,
                                     "failure_count": 3}]
    assert set(facts["nb_switches"]) >= {"logical_switches"}
    assert "logical_routers" not in facts["nb_switches"]


def test_listener_examples_run_and_are_idempotent(sandbox, collections_path):
    tasks = []
    for task in example_tasks(LISTENERS):
        params = dict(task["ovn4nfv.k8s.ovn_connection"])
        params["db"] = sandbox.sb_db if params.get("database") == "southbound" else sandbox.nb_db
        tasks.append(dict(task, **{"ovn4nfv.k8s.ovn_connection": params}))
    run_twice(sandbox, collections_path, tasks)
    nb = sandbox.rows("nb", "Connection")
    sb = sandbox.rows("sb", "Connection")
    assert [c["target"] for c in nb] == ["pssl:6641:192.168.33.11"]
    assert [(c["target"], c["role"]) for c in sb] == [("pssl:6642:192.168.33.11", "ovn-controller")]
