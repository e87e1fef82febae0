"""network_audit through ansible-playbook, against a real NB and SB with
ovn-northd and the Kubernetes API stand-in (the watcher's service account):
drift injected on purpose, found by class, mended in check mode (nothing
written) and for real (only what the product owns), and found no more."""

import json
import shlex

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.pod_addresses import Pod
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.vms import vm_owner
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_gateways, plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute, reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import Port

from tests.harness.kube_api_standin import WATCHER, KubeAPIStandIn
from tests.harness.playbook import run_playbook
from tests.harness.sandbox import stable_dump
from test_examples import example_tasks

REQUEST = {ann.OVN_NETWORK: json.dumps([{"name": "net1", "interface": "net0"}])}


@pytest.fixture
def api():
    server = KubeAPIStandIn()
    try:
        yield server
    finally:
        server.stop()


def port(name, mac, ip, pod):
    return {"name": name, "switch": "net1", "addresses": ["%s %s" % (mac, ip)], "port_security": ["%s %s" % (mac, ip)],
            "external_ids": pod.marks("net0")}


@pytest.fixture
def drifted(sandbox, api):
    """web (served, but its port bound on another node's chassis, worker5,
    whose node is gone from the API), lost (asks, was never served, has no
    port), told (served, its port deleted by hand), odd (its port outside
    the subnet), and the ports of gone and twin, pods the API does not
    have (twin holding web's address); a gateway router on an unregistered
    chassis; net1's exclusions removed by hand."""
    web = api.create_pod("default", "web", REQUEST)
    api.create_pod("default", "lost", REQUEST)
    api.create_pod("default", "told", dict(REQUEST, **ann.output_annotations([{
        "interface": "net0", "ip_address": "172.16.1.30/24", "mac_address": "0a:00:00:00:01:18",
        "gateway_ip": "172.16.1.1", "default_gateway": False, "routes": []}])))
    api.create_node("node1", ["127.0.0.11"])
    odd = api.create_pod("default", "odd", REQUEST)
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: plan_topology(v, {"join_subnet": "100.64.1.0/24"}, "merged"), write=True)
        execute(db, lambda v: plan_gateways(v, [("config[0]", {
            "node": "worker9", "external_ip": "192.168.50.19/24", "external_gateway": "192.168.50.1"})],
            "merged"), write=True)
        execute(db, lambda v: vn.plan_networks(v, [("a", vn.check_network(
            {"name": "net1", "subnet": "172.16.1.0/24"}, "a"))], "merged", "ovn", False), write=True)
        pods = dict((m["metadata"]["name"], Pod("default", m["metadata"]["name"], m["metadata"]["uid"]))
                    for m in (web, odd))
        pods.update(gone=Pod("default", "gone", "uid-gone"), twin=Pod("default", "twin", "uid-twin"))
        reconcile(LogicalSwitchPort(), [
            port("default_web_net0", "0a:00:00:00:01:14", "172.16.1.20", pods["web"]),
            port("default_gone_net0", "0a:00:00:00:01:16", "172.16.1.22", pods["gone"]),
            # a stopped VM's (its VirtualMachine is there, no launcher) and a deleted VM's
            port("default_vm:stopped_net0", "0a:00:00:00:01:1a", "172.16.1.26", vm_owner("default", "stopped")),
            port("default_vm:deleted_net0", "0a:00:00:00:01:1b", "172.16.1.27", vm_owner("default", "deleted"))],
            "merged", db)
    api.create_kubevirt("VirtualMachine", "default", {"metadata": {"name": "stopped"}, "spec": {"running": False}})
    # what the product would refuse to write, made by hand as drift is
    for name, mac, ip, pod in (("default_odd_net0", "0a:00:00:00:01:15", "10.9.9.9", pods["odd"]),
                               ("default_twin_net0", "0a:00:00:00:01:17", "172.16.1.20", pods["twin"])):
        marks = ["external_ids:%s=%s" % (k, json.dumps(v)) for k, v in sorted(pod.marks("net0").items())]
        sandbox.nbctl("lsp-add", "net1", name, "--", "set", "Logical_Switch_Port", name,
                      'addresses="%s %s"' % (mac, ip), 'port_security="%s %s"' % (mac, ip), *marks,
                      "external_ids:ovn4nfv-owner=ovn4nfv.k8s")
    # net1's exclusions (its gateway's address among them) removed by hand
    sandbox.nbctl("remove", "Logical_Switch", "net1", "other_config", "exclude_ips")
    # odd's port bound on its node's chassis, web's on another node's
    sandbox.nbctl("--wait=sb", "sync")
    for chassis, ip in (("node1", "127.0.0.11"), ("worker5", "127.0.0.15")):
        sandbox.sbctl("chassis-add", chassis, "geneve", ip)
    sandbox.sbctl("lsp-bind", "default_odd_net0", "node1")
    sandbox.sbctl("lsp-bind", "default_web_net0", "worker5")
    return sandbox


def test_network_audit_finds_repairs_and_is_clean_after(drifted, api, collections_path, tmp_path):
    box = drifted
    kubeconfig = api.kubeconfig(str(tmp_path / "watcher.kubeconfig"), WATCHER)
    dump = " && ".join(" ".join(shlex.quote(a) for a in cmd) for cmd in box.dump_commands("nb"))

    def audit(name, state="audited", check=False, **extra):
        task = {"name": name, "ovn4nfv.k8s.network_audit": dict(
            {"state": state, "kubeconfig": kubeconfig, "db": box.nb_db, "sb_db": box.sb_db}, **extra)}
        if check:
            task["check_mode"] = True
        return task

    tasks = [
        audit("first"),
        {"name": "dump0", "ansible.builtin.shell": dump, "changed_when": False},
        audit("repair_check", "repaired", check=True),
        {"name": "dump1", "ansible.builtin.shell": dump, "changed_when": False},
        audit("repair", "repaired"),
        audit("repair_again", "repaired"),
        audit("after"),
        {"name": "no_layers", "ovn4nfv.k8s.network_audit": {"db": box.nb_db, "sb_db": ""}},
    ]
    r, proc = run_playbook(collections_path, tasks)
    assert proc.returncode == 0, proc.stdout[-4000:]

    def classes(result):
        return sorted((f["class"], tuple(f["objects"])) for f in result["findings"])

    assert r["first"]["changed"] is False and r["first"]["skipped"] == []
    # handed down to the nodes' audit: northd's version as it writes it in the southbound
    [sb_global] = box.rows("sb", "SB_Global")
    assert r["first"]["northd_version"] == sb_global["options"]["northd_internal_version"]
    assert classes(r["first"]) == sorted([
        ("leaked_port", ("default_gone_net0",)), ("leaked_port", ("default_twin_net0",)),
        ("leaked_port", ("default_vm:deleted_net0",)),
        ("missing_port", ("default_lost_net0",)), ("missing_port", ("default_told_net0",)),
        ("duplicate_ip", ("default_twin_net0", "default_web_net0")),
        ("address_outside_network", ("default_odd_net0",)), ("network_drift", ("net1",)),
        ("port_bound_elsewhere", ("default_web_net0",)),
        ("gateway_on_missing_chassis", ("gr-worker9",)), ("stale_chassis", ("worker5",))])
    repairs = dict((f["objects"][0], f["repair"]) for f in r["first"]["findings"])
    assert repairs["default_lost_net0"] is None, "never served: the watcher's to make, and to say why not"
    assert repairs["default_told_net0"] == "make the ports default_told_net0 with the addresses the pod was told"
    assert any(line.startswith("WARNING leaked_port: pod default/gone (uid uid-gone) is gone")
               for line in r["first"]["lines"])
    assert "WARNING leaked_port: VM default/deleted is gone (no VirtualMachine, VMI or launcher pod), its ports are " \
        "not (repair: delete the ports default_vm:deleted_net0)" in r["first"]["lines"]

    assert r["repair_check"]["changed"] is True
    assert sorted(r["repair_check"]["repaired"]) == sorted(r["repair"]["repaired"])
    assert stable_dump(r["dump0"]["stdout"]) == stable_dump(r["dump1"]["stdout"]), "check mode wrote"
    assert r["repair"]["changed"] is True and r["repair_again"]["changed"] is False
    # what audit.yml judges: what the audit finds after the repair wrote, and in check mode everything found
    assert classes(dict(r["repair"], findings=r["repair"]["left"])) == classes(r["after"])
    assert r["repair_check"]["left"] == r["repair_check"]["findings"]
    [net1] = [s for s in box.rows("nb", "Logical_Switch") if s["name"] == "net1"]
    assert net1["other_config"].get("exclude_ips") == "172.16.1.1", "made as recorded: the gateway excluded"
    ports = dict((p["name"], p["addresses"]) for p in box.rows("nb", "Logical_Switch_Port")
                 if p["name"].startswith("default_"))
    assert sorted(ports) == ["default_odd_net0", "default_told_net0", "default_vm:stopped_net0", "default_web_net0"], \
        "only the gone pods' and VM's ports were deleted, and told's was made again"
    assert ports["default_told_net0"] == "0a:00:00:00:01:18 172.16.1.30", "with the addresses it was told"
    assert "delete chassis worker5" in r["repair"]["repaired"]
    assert sorted(c["name"] for c in box.rows("sb", "Chassis")) == ["node1"], "only the stale chassis went"
    # web's binding went with worker5's chassis, and told's new port waits for its node to claim it
    assert classes(r["after"]) == sorted([
        ("address_outside_network", ("default_odd_net0",)), ("missing_port", ("default_lost_net0",)),
        ("port_not_bound", ("default_told_net0",)), ("port_not_bound", ("default_web_net0",)),
        ("gateway_on_missing_chassis", ("gr-worker9",))])
    assert r["no_layers"]["skipped"] == ["leaked_port", "missing_port", "qos_drift", "port_not_bound",
                                         "port_bound_elsewhere", "gateway_on_missing_chassis", "stale_chassis",
                                         "provider_mapping_missing"]
    assert [f["class"] for f in r["no_layers"]["findings"]] == ["address_outside_network"]
    # the ovn4nfv-audit ClusterRole is what lets the watcher's account list the nodes: without it,
    # no chassis is judged (and none deleted), and the audit says the class was skipped
    api.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "ovn4nfv-audit"}, "rules": []})
    box.sbctl("chassis-add", "worker6", "geneve", "127.0.0.16")
    r, proc = run_playbook(collections_path, [audit("no_nodes", "repaired")])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert r["no_nodes"]["skipped"] == ["stale_chassis"]
    assert "worker6" in [c["name"] for c in box.rows("sb", "Chassis")]


def test_network_audit_examples_run(drifted, api, collections_path, tmp_path):
    """The module's examples, as written but for where the kubeconfig and
    the databases are."""
    kubeconfig = api.kubeconfig(str(tmp_path / "watcher.kubeconfig"), WATCHER)
    tasks = []
    for task in example_tasks(["network_audit"]):
        params = task.get("ovn4nfv.k8s.network_audit")
        if params and params.get("layer") == "node":
            task = dict(task, **{"ovn4nfv.k8s.network_audit": dict(params, db=drifted.ovs_db)})
        elif params:
            task = dict(task, **{"ovn4nfv.k8s.network_audit": dict(
                params, kubeconfig=kubeconfig, db=drifted.nb_db, sb_db=drifted.sb_db)})
        tasks.append(task)
    r, proc = run_playbook(collections_path, tasks)
    assert proc.returncode == 0, proc.stdout[-4000:]
    said = r["network_audit #1: Say it"]["msg"]
    assert len(said) == 11 and any("leaked_port" in line for line in said)
    assert r["network_audit #2: Mend what the product owns"]["changed"] is True
    node = r["network_audit #3: And on this node, against the northbound's ports"]
    assert node["changed"] is False and node["findings"] == [], "this OVS has no br-int"


def test_network_audit_on_a_node(sandbox, collections_path):
    """layer: node through ansible-playbook: a product interface naming a
    logical port the NB does not have, whose pod is gone, is found and
    deleted by the repair; a live pod's, and a foreign one, are found and
    left; without known_ports, strays are not looked at."""
    box = sandbox
    box.vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev")
    # the node agent's ports, as it makes them (the product's mark), and a foreign one; the
    # repair must delete exactly "ours", never every port the product owns
    with ovsdb.Database(box.ovs_db, ovsdb.OVS_SCHEMA, Port.tables) as db:
        reconcile(Port(), [{"name": name, "bridge": "br-int", "type": "internal", "external_ids": {
            "iface-id": "default_%s_net0" % name, "ovn4nfv-container-id": "c-" + name,
            "ovn4nfv-pod-uid": uid}} for name, uid in (("ours", "u1"), ("alive", "u2"), ("fine", "u3"))],
            "merged", db)
    box.vsctl("add-port", "br-int", "theirs", "--", "set", "interface", "theirs", "type=internal",
              "external_ids:iface-id=default_theirs_net0")

    def audit(name, state="audited", **extra):
        return {"name": name, "ovn4nfv.k8s.network_audit": dict(
            {"layer": "node", "node": "worker1", "db": box.ovs_db, "state": state}, **extra)}
    known = {"known_ports": ["default_fine_net0"], "live_pods": ["u2", "u3"],
             "port_mtus": {"default_fine_net0": 1400}}
    r, proc = run_playbook(collections_path, [
        audit("found", **known), dict(audit("check", "repaired", **known), check_mode=True),
        audit("repair", "repaired", **known), audit("repair_again", "repaired", **known),
        audit("after", **known), audit("unknown")])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert [(f["class"], f["objects"], f["repair"]) for f in r["found"]["findings"]] == [
        ("stray_interface", ["alive"], None),
        ("mtu_mismatch", ["fine"], "set the MTU of fine to 1400 on worker1"),
        ("stray_interface", ["ours"], "delete the OVS port ours on worker1"),
        ("stray_interface", ["theirs"], None)]
    assert "its pod is alive" in r["found"]["findings"][0]["message"]
    assert "has MTU 1500, its network's is 1400" in r["found"]["findings"][1]["message"]
    assert r["check"]["changed"] is True and r["repair"]["changed"] is True
    assert r["repair_again"]["changed"] is False and r["repair_again"]["repaired"] == []
    assert [f["objects"] for f in r["repair"]["left"]] == [["alive"], ["theirs"]]
    assert r["check"]["left"] == r["check"]["findings"]
    assert [f["objects"] for f in r["after"]["findings"]] == [["alive"], ["theirs"]]
    assert sorted(p["name"] for p in box.rows("ovs", "Port")) == ["alive", "br-int", "fine", "theirs"]
    [fine] = [i for i in box.rows("ovs", "Interface") if i["name"] == "fine"]
    assert fine["mtu_request"] == 1400 and fine["mtu"] == 1400, "asked of OVS, and OVS set it"
    # not this host's database: the tunnel class looks at this host's links, so it is not looked at
    assert r["unknown"]["skipped"] == ["stray_interface", "mtu_mismatch", "tunnel_down", "version_skew",
                                       "provider_mtu_mismatch"]
    assert r["unknown"]["findings"] == []


def test_a_chassis_without_a_provider_network_s_physnet_is_found(sandbox, collections_path):
    """provider_mapping_missing: a chassis binds a port of a provider
    network whose physical network its southbound row does not map (what
    ovn-controller copied of the node's ovn-bridge-mappings); once mapped,
    nothing is found. No repair: the mapping is the node's."""
    box = sandbox
    with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
        execute(db, lambda v: vn.plan_networks(v, [("p", vn.check_network(
            {"name": "prov-v100", "subnet": "192.168.100.0/24", "physnet": "physnet-ext", "vlan": 100}, "p"))],
            "merged", "ovn"), write=True)
        reconcile(LogicalSwitchPort(), [
            dict(port("default_%s_net0" % name, mac, address, Pod("default", name, "u-" + name)), switch="prov-v100")
            for name, mac, address in (("a", "0a:00:00:00:64:0a", "192.168.100.10"),
                                       ("b", "0a:00:00:00:64:0b", "192.168.100.11"))], "merged", db)
    box.nbctl("--wait=sb", "sync")
    box.sbctl("chassis-add", "worker1", "geneve", "127.0.0.11")
    box.sbctl("chassis-add", "worker2", "geneve", "127.0.0.12")
    box.sbctl("set", "chassis", "worker2", "other_config:ovn-bridge-mappings=physnet-ext:br-ext")
    box.sbctl("lsp-bind", "default_a_net0", "worker1")
    box.sbctl("lsp-bind", "default_b_net0", "worker2")

    def audit(name):
        return {"name": name, "ovn4nfv.k8s.network_audit": {"db": box.nb_db, "sb_db": box.sb_db}}
    r, proc = run_playbook(collections_path, [
        audit("found"),
        {"name": "map", "changed_when": False, "ansible.builtin.command": {"argv": [
            "ovn-sbctl", "--db=" + box.sb_db, "set", "chassis", "worker1",
            "other_config:ovn-bridge-mappings=physnet-other:br-o,physnet-ext:br-ex"]}},
        audit("after")])
    assert proc.returncode == 0, proc.stdout[-4000:]
    found = [f for f in r["found"]["findings"] if f["class"] == "provider_mapping_missing"]
    assert [(f["objects"], f["severity"], f["repair"]) for f in found] == [(["prov-v100", "worker1"], "error", None)]
    assert "chassis worker1 binds default_a_net0 of provider network prov-v100 but does not map its physical " \
           "network physnet-ext (ovn-bridge-mappings: none)" in found[0]["message"]
    assert not [f for f in r["after"]["findings"] if f["class"] == "provider_mapping_missing"]
    # handed down to the nodes' audit: the MTU each physnet's NIC must carry (1500: the network sets none)
    assert r["found"]["physnet_mtus"] == {"physnet-ext": 1500}


def test_a_mapped_physnet_whose_bridge_is_missing_or_holds_no_nic_is_found(sandbox, collections_path):
    """provider_bridge_unwired (layer: node): of the node's ovn-bridge-mappings,
    one to a bridge that does not exist and one to a bridge with only patch
    ports are found; one whose bridge holds a working NIC (the sandbox's
    ovs-vswitchd makes every device a dummy one, with a port number) is
    not. Reported only."""
    box = sandbox
    box.vsctl("set", "open_vswitch", ".",
              "external_ids:ovn-bridge-mappings=physnet-a:br-none,physnet-b:br-bare,physnet-c:br-nic")
    box.vsctl("add-br", "br-bare", "--", "set", "bridge", "br-bare", "datapath_type=netdev",
              "--", "add-port", "br-bare", "patch-to-int", "--", "set", "interface", "patch-to-int", "type=patch",
              "options:peer=patch-from-bare")
    box.vsctl("add-br", "br-nic", "--", "set", "bridge", "br-nic", "datapath_type=netdev",
              "--", "add-port", "br-nic", "nic0")
    node = {"layer": "node", "node": "worker1", "db": box.ovs_db}
    r, proc = run_playbook(collections_path, [
        {"name": "node", "ovn4nfv.k8s.network_audit": node},
        {"name": "repair", "ovn4nfv.k8s.network_audit": dict(node, state="repaired")},
        # the NIC's MTU against what its provider networks need (handed down by the cluster run)
        {"name": "jumbo", "ovn4nfv.k8s.network_audit": dict(node, physnet_mtus={"physnet-c": 9000})},
        {"name": "fits", "ovn4nfv.k8s.network_audit": dict(node, physnet_mtus={"physnet-c": 1500})}])
    assert proc.returncode == 0, proc.stdout[-4000:]
    found = [f for f in r["node"]["findings"] if f["class"] == "provider_bridge_unwired"]
    assert [(f["objects"], f["severity"], f["repair"]) for f in found] == [
        (["physnet-a"], "error", None), (["physnet-b"], "error", None)]
    assert "physical network physnet-a maps to bridge br-none, which does not exist" in found[0]["message"]
    assert "bridge br-bare, which holds no working NIC: its frames" in found[1]["message"]
    assert r["repair"]["changed"] is False
    assert "provider_mtu_mismatch" in r["node"]["skipped"]
    [short] = [f for f in r["jumbo"]["findings"] if f["class"] == "provider_mtu_mismatch"]
    assert short["objects"] == ["physnet-c"] and short["repair"] is None
    assert "NIC nic0 of physical network physnet-c has MTU 1500, less than the 9000" in short["message"]
    assert not [f for f in r["fits"]["findings"] if f["class"] == "provider_mtu_mismatch"]
