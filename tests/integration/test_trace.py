"""network_trace through ansible-playbook against a real NB and SB with
ovn-northd: the module's own examples, as written, on networks shaped as
the lab's; a link the router drops, port security that drops a forged
source, and bad requests refused before anything is read."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import baseline, multi_policies, networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import POLICY_FOR, check_policy
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute, reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_routers import StaticRoute
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort

from tests.harness.playbook import run_playbook
from test_examples import example_tasks

PORTS = [("default_pod-w1a_eth0", "ovn-net1", "0a:00:00:00:21:03", "172.16.33.3"),
         ("default_pod-w1b_eth0", "ovn-net1", "0a:00:00:00:21:04", "172.16.33.4"),
         ("default_pod-w2a_eth0", "ovn-net1", "0a:00:00:00:21:05", "172.16.33.5"),
         ("default_web-w2_net1", "ovn-net2", "0a:00:00:00:22:07", "172.16.44.7")]


@pytest.fixture
def cluster(sandbox):
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: plan_topology(v, {"join_subnet": "100.64.1.0/24"}, "merged"), write=True)
        items = [(w, vn.check_network(x, w)) for w, x in (
            ("a", {"name": "ovn-net1", "subnet": "172.16.33.0/24"}),
            ("b", {"name": "ovn-net2", "subnet": "172.16.44.0/24"}))]
        execute(db, lambda v: vn.plan_networks(v, items, "merged", "ovn", False), write=True)
        reconcile(LogicalSwitchPort(), [
            {"name": name, "switch": switch, "addresses": ["%s %s" % (mac, ip)],
             "port_security": ["%s %s" % (mac, ip)]} for name, switch, mac, ip in PORTS], "merged", db)
        # a dynamic port, as the watcher leaves it: the southbound says only "dynamic", the port
        # security holds what OVN assigned
        reconcile(LogicalSwitchPort(), [{"name": "default_pod-w1c_eth0", "switch": "ovn-net1",
                                         "addresses": ["dynamic"]}], "merged", db)
        assigned = db.wait_for(lambda idl: [p.dynamic_addresses[0] for p in idl.tables[
            "Logical_Switch_Port"].rows.values() if p.name == "default_pod-w1c_eth0" and p.dynamic_addresses], 10)
        reconcile(LogicalSwitchPort(), [{"name": "default_pod-w1c_eth0", "switch": "ovn-net1",
                                         "port_security": assigned}], "merged", db)
        # 10.99.0.0/16 goes nowhere: the router drops what is sent there
        reconcile(StaticRoute(), [{"router": "ovn4nfv-master", "ip_prefix": "10.99.0.0/16",
                                   "nexthop": "discard"}], "merged", db)
    sandbox.nbctl("--wait=sb", "sync")
    sandbox.dynamic = assigned[0].split()[1]
    return sandbox


def trace_task(name, params, db):
    return {"name": name, "ovn4nfv.k8s.network_trace": dict(params, db=db), "ignore_errors": True}


def test_network_trace_examples_and_verdicts(cluster, collections_path):
    box = cluster
    defaults = {"group/ovn4nfv.k8s.ovsdb": {"timeout": 20}}
    examples = [dict(t, **{"ovn4nfv.k8s.network_trace": dict(t["ovn4nfv.k8s.network_trace"], db=box.sb_db)})
                if "ovn4nfv.k8s.network_trace" in t else t for t in example_tasks(["network_trace"])]
    tasks = examples + [
        trace_task("routed", {"source": {"port": "default_pod-w1a_eth0"},
                              "destination": {"pod": "web-w2", "interface": "net1"}}, box.sb_db),
        trace_task("discarded", {"source": {"pod": "pod-w1a", "interface": "eth0"},
                                 "destination": {"address": "10.99.1.1"}}, box.sb_db),
        trace_task("nobody", {"source": {"pod": "pod-w1a", "interface": "eth0"},
                              "destination": {"address": "172.16.44.99"}}, box.sb_db),
        trace_task("from_dynamic", {"source": {"address": box.dynamic, "network": "ovn-net1"},
                                    "destination": {"address": "172.16.44.7"}, "protocol": "udp", "port": 53},
                   box.sb_db),
        trace_task("bad_no_source", {"source": {"interface": "eth0"},
                                     "destination": {"address": "10.99.1.1"}}, box.sb_db),
        trace_task("bad_port", {"source": {"port": "default_pod-w1a_eth0"}, "destination": {"address": "172.16.33.5"},
                                "protocol": "tcp", "port": 70000}, box.sb_db),
        trace_task("unknown_port", {"source": {"port": "default_nobody_eth0"},
                                    "destination": {"address": "172.16.33.5"}}, box.sb_db),
    ]
    r, proc = run_playbook(collections_path, tasks, module_defaults=defaults)
    assert proc.returncode == 0, proc.stdout[-4000:]
    first = r["network_trace #0: How does pod-w1a's eth0 reach 172.16.33.5?"]
    assert first["changed"] is False and first["verdict"] == "delivered", first
    assert first["where"] == "to port default_pod-w2a_eth0 on ovn-net1"
    assert [h["datapath"] for h in first["hops"] if h["direction"] == "ingress"] == ["ovn-net1"]
    assert r["network_trace #1: Say where it ends"]["msg"][-1].startswith("delivered to port default_pod-w2a_eth0")
    tcp = r["network_trace #2: TCP from an address on ovn-net1 to the web pod's net1, port 80"]
    assert tcp["source_port"] == "default_pod-w1b_eth0" and "tcp.dst == 80" in tcp["flow"]
    assert tcp["verdict"] == "delivered" and tcp["where"] == "to port default_web-w2_net1 on ovn-net2"
    routed = r["routed"]
    assert [h["datapath"] for h in routed["hops"] if h["direction"] == "ingress"] == [
        "ovn-net1", "ovn4nfv-master", "ovn-net2"]
    [router] = [h for h in routed["hops"] if h["datapath"] == "ovn4nfv-master" and h["direction"] == "ingress"]
    assert [e["kind"] for e in router["events"]] == ["route"] and "172.16.44.0/24" in router["events"][0]["match"]
    assert r["discarded"]["verdict"] == "dropped" and "ovn4nfv-master" in r["discarded"]["where"]
    assert r["discarded"]["lines"][-1].startswith("dropped by ovn4nfv-master lr_in_ip_routing")
    assert r["from_dynamic"]["source_port"] == "default_pod-w1c_eth0", r["from_dynamic"]
    assert r["from_dynamic"]["verdict"] == "delivered" and "udp.dst == 53" in r["from_dynamic"]["flow"]
    assert r["nobody"]["verdict"] == "unresolved", r["nobody"]
    assert r["nobody"]["where"].startswith("ovn4nfv-master has no MAC for the next hop")
    assert [h["datapath"] for h in r["nobody"]["hops"] if h["direction"] == "ingress"] == [
        "ovn-net1", "ovn4nfv-master"], "the ARP request the router floods is not the packet traced"
    for case, words in (("bad_no_source", ["source", "give a port"]), ("bad_port", ["port", "70000"]),
                        ("unknown_port", ["default_nobody_eth0", "not bound"])):
        assert r[case].get("failed") is True, case
        for word in words:
            assert word in r[case]["msg"], (case, word, r[case]["msg"])


def test_a_packet_a_policy_drops_names_the_acl(cluster, collections_path):
    """Default denies on both stages the product uses: to-lport (ingress)
    and from-lport after the load balancer (egress); each drop is named."""
    box = cluster
    policies = []
    for name, spec, network in (
            ("web-in", {"podSelector": {}, "ingress": []}, "ovn-net2"),
            ("w1b-out", {"podSelector": {}, "policyTypes": ["Egress"], "egress": []}, "ovn-net1")):
        checked = check_policy({"metadata": {"namespace": "default", "name": name,
                                             "annotations": {POLICY_FOR: "ovn4nfv.k8s/" + network}}, "spec": spec})
        policies.append(checked)
    items = [("p0", {"name": policies[0].key, "policy": policies[0], "switches": ["ovn-net2"],
                     "members": ["default_web-w2_net1"], "peers": {}}),
             ("p1", {"name": policies[1].key, "policy": policies[1], "switches": ["ovn-net1"],
                     "members": ["default_pod-w1b_eth0"], "peers": {}})]
    with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, multi_policies.TABLES) as db:
        execute(db, lambda v: multi_policies.plan_policies(v, items, "replaced"), write=True)
    box.nbctl("--wait=sb", "sync")
    tasks = [trace_task("into_web", {"source": {"port": "default_pod-w1a_eth0"},
                                     "destination": {"pod": "web-w2", "interface": "net1"},
                                     "protocol": "tcp", "port": 80}, box.sb_db),
             trace_task("out_of_w1b", {"source": {"port": "default_pod-w1b_eth0"},
                                       "destination": {"address": "172.16.33.5"}, "protocol": "tcp", "port": 80},
                        box.sb_db),
             trace_task("untouched", {"source": {"port": "default_pod-w1a_eth0"},
                                      "destination": {"address": "172.16.33.5"}, "protocol": "tcp", "port": 80},
                        box.sb_db)]
    r, proc = run_playbook(collections_path, tasks, module_defaults={"group/ovn4nfv.k8s.ovsdb": {"timeout": 20}})
    assert proc.returncode == 0, proc.stdout[-4000:]
    for case, network, stage in (("into_web", "ovn-net2", "ls_out_acl"), ("out_of_w1b", "ovn-net1", "ls_in_acl")):
        assert r[case]["verdict"] == "dropped", r[case]
        events = [e for h in r[case]["hops"] for e in h["events"] if e["kind"] == "acl"]
        assert [e.get("acl") for e in events] == ["deny:%s:%s" % ("in" if case == "into_web" else "eg", network)], \
            r[case]["lines"]
        assert events[0]["stage"].startswith(stage), events
        assert r[case]["where"].startswith("by %s %s" % (network, stage)) and \
            "ACL deny:" in r[case]["where"], r[case]["where"]
    assert r["out_of_w1b"]["hops"][0]["events"][0]["stage"].startswith("ls_in_acl_after_lb"), \
        "egress is judged after the load balancer"
    assert r["untouched"]["verdict"] == "delivered", "w1a is not isolated, nor is w2a"


def test_a_packet_the_operator_s_baseline_drops_names_its_rule(cluster, collections_path):
    """A baseline rule (network_policy's plan) on ovn-net2 refusing ovn-net1:
    a packet from ovn-net1 through the router is dropped by it, named."""
    box = cluster
    rule = {"name": "net2-not-from-net1", "network": "ovn-net2", "peers": [{"network": "ovn-net1"}]}
    with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, tuple(sorted(set(TABLES + baseline.TABLES)))) as db:
        execute(db, lambda v: baseline.plan_baseline(v, [("config[0]", rule)], "merged"), write=True)
    box.nbctl("--wait=sb", "sync")
    tasks = [trace_task("refused", {"source": {"port": "default_pod-w1a_eth0"},
                                    "destination": {"pod": "web-w2", "interface": "net1"},
                                    "protocol": "tcp", "port": 80}, box.sb_db)]
    r, proc = run_playbook(collections_path, tasks, module_defaults={"group/ovn4nfv.k8s.ovsdb": {"timeout": 20}})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert r["refused"]["verdict"] == "dropped", r["refused"]
    events = [e for h in r["refused"]["hops"] for e in h["events"] if e["kind"] == "acl"]
    assert [e.get("acl") for e in events] == ["base:net2-not-from-net1"], r["refused"]["lines"]
    assert r["refused"]["where"].startswith("by ovn-net2 ls_out_acl"), r["refused"]["where"]


def test_a_packet_from_a_provider_network_leaves_through_its_localnet_port(sandbox, collections_path):
    """A provider network has no router: a packet for the fabric (its
    gateway, or anything no port of it holds) is traced out of its localnet
    port, as OVN sends it; one for a pod of it is delivered to that pod."""
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
        execute(db, lambda v: vn.plan_networks(v, [("p", vn.check_network(
            {"name": "prov-v100", "subnet": "192.168.100.0/24", "physnet": "physnet-ext", "vlan": 100}, "p"))],
            "merged", "ovn", False), write=True)
        reconcile(LogicalSwitchPort(), [
            {"name": name, "switch": "prov-v100", "addresses": ["%s %s" % (mac, ip)],
             "port_security": ["%s %s" % (mac, ip)]} for name, mac, ip in (
                ("provider_prov-w1_eth0", "0a:00:00:00:64:02", "192.168.100.2"),
                ("provider_prov-w2_eth0", "0a:00:00:00:64:03", "192.168.100.3"))], "merged", db)
    sandbox.nbctl("--wait=sb", "sync")
    r, proc = run_playbook(collections_path, [
        trace_task("fabric", {"source": {"port": "provider_prov-w1_eth0"}, "destination": {"address": "8.8.8.8"}},
                   sandbox.sb_db),
        trace_task("gateway", {"source": {"port": "provider_prov-w1_eth0"},
                               "destination": {"address": "192.168.100.1"}}, sandbox.sb_db),
        trace_task("pod", {"source": {"port": "provider_prov-w1_eth0"},
                           "destination": {"port": "provider_prov-w2_eth0"}}, sandbox.sb_db)],
        module_defaults={"group/ovn4nfv.k8s.ovsdb": {"timeout": 20}})
    assert proc.returncode == 0, proc.stdout[-4000:]
    for case in ("fabric", "gateway"):
        assert r[case]["verdict"] == "delivered", r[case]
        assert r[case]["where"] == "to localnet port lnet-prov-v100 on prov-v100", r[case]
    assert r["pod"]["verdict"] == "delivered" and r["pod"]["where"] == "to port provider_prov-w2_eth0 on prov-v100"
