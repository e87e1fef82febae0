"""KubeVirt's VMs through the watcher, run as a process against the API
stand-in (serving KubeVirt's VirtualMachines and VMIs as CRDs) and a real
NB: a launcher pod's ports are its VM's, kept across launchers, bound
where they run, and freed with the VM. Every verdict is read from the NB
and the API, outside the watcher."""

import json

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from tests.harness.watcher_env import ovn_network

NS = "vms"
K_UID = "ovn4nfv-pod-uid"


def vm(api, name, running=True):
    """A VirtualMachine, as a user creates it."""
    return api.create_kubevirt("VirtualMachine", NS, {"metadata": {"name": name}, "spec": {"running": running}})


def vmi(api, name, owner=None):
    """A VM's VirtualMachineInstance, as virt-controller creates it (owned
    by its VM when there is one)."""
    meta = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": name,
                                    "uid": owner["metadata"]["uid"], "controller": True}]
    return api.create_kubevirt("VirtualMachineInstance", NS, {"metadata": meta, "spec": {}})


def launcher(api, instance, pod_name, node, request=None, active=True, migration=None, annotations=None):
    """A VMI's launcher pod as virt-controller makes it (KubeVirt's labels,
    its VMI as controller), then named in the VMI's ``status.activePods``
    as virt-controller does once it sees it (``active``)."""
    uid = instance["metadata"]["uid"]
    labels = {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": uid,
              "vm.kubevirt.io/name": instance["metadata"]["name"]}
    if migration:
        labels["kubevirt.io/migrationJobUID"] = migration
    pod = api.create_pod(NS, pod_name, annotations or ovn_network(request or {"name": "net1", "interface": "eth1"}),
                         node=node,
                         labels=labels, owners=[{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                                 "name": instance["metadata"]["name"], "uid": uid,
                                                 "controller": True, "blockOwnerDeletion": True}])
    if active:
        activate(api, instance["metadata"]["name"], pod, node)
    return pod


def activate(api, name, pod, node):
    api.patch_kubevirt("VirtualMachineInstance", NS, name, {"status": {"activePods": {pod["metadata"]["uid"]: node}}})


def port(k8s, name):
    found = [p for p in k8s.pod_ports() if p["name"] == name]
    return found[0] if found else None


def wait_port(k8s, name, predicate, timeout=30):
    """The NB's port ``name`` once ``predicate(port)`` holds, woken by the
    NB's update stream (a client of its own, outside the watcher)."""
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, ("Logical_Switch_Port",)) as db:
        db.wait_for(lambda idl: any(r.name == name and predicate({"options": dict(r.options)})
                                    for r in idl.tables["Logical_Switch_Port"].rows.values()), timeout)
    found = port(k8s, name)
    assert found is not None and predicate(found), "port %s never became as expected: %s\nwatcher log:\n%s" % (
        name, found, k8s.log_text())
    return found


def test_a_launcher_s_ports_are_its_vm_s_and_follow_it_through_restart_migration_and_deletion(k8s):
    machine = vm(k8s.api, "vm1")
    first = vmi(k8s.api, "vm1", machine)
    launcher(k8s.api, first, "virt-launcher-vm1-aaaaa", "node1")
    told = k8s.annotated(NS, "virt-launcher-vm1-aaaaa")[0]
    row = wait_port(k8s, "vms_vm:vm1_eth1", lambda p: p["options"].get("requested-chassis") == "node1")
    assert row["external_ids"][K_UID] == "vm:vms/vm1"
    assert row["external_ids"]["ovn4nfv-pod-name"] == "vm:vm1"
    assert "activation-strategy" not in row["options"]
    log = k8s.port_log()
    try:
        # a restart: the VMI and its launcher go, a new VMI's launcher comes on another node
        k8s.api.delete_kubevirt("VirtualMachineInstance", NS, "vm1")       # its launcher goes with it
        second = vmi(k8s.api, "vm1", machine)
        launcher(k8s.api, second, "virt-launcher-vm1-bbbbb", "node2")
        again = k8s.annotated(NS, "virt-launcher-vm1-bbbbb")[0]
        assert (again["mac_address"], again["ip_address"]) == (told["mac_address"], told["ip_address"])
        wait_port(k8s, "vms_vm:vm1_eth1", lambda p: p["options"].get("requested-chassis") == "node2")

        # a live migration: the target launcher beside the source, then the source done
        target = launcher(k8s.api, second, "virt-launcher-vm1-ccccc", "node3", migration="job-1")
        moved = k8s.annotated(NS, "virt-launcher-vm1-ccccc")[0]
        assert (moved["mac_address"], moved["ip_address"]) == (told["mac_address"], told["ip_address"])
        both = wait_port(k8s, "vms_vm:vm1_eth1", lambda p: p["options"].get("requested-chassis") == "node2,node3")
        assert both["options"]["activation-strategy"] == "rarp"
        assert sorted(both["external_ids"]["ovn4nfv-launchers"].split(",")) == sorted(
            [k8s.api.pod(NS, "virt-launcher-vm1-bbbbb")["metadata"]["uid"], target["metadata"]["uid"]])
        k8s.api.patch_status(NS, "virt-launcher-vm1-bbbbb", {"status": {"phase": "Succeeded"}})
        after = wait_port(k8s, "vms_vm:vm1_eth1", lambda p: p["options"].get("requested-chassis") == "node3")
        assert "activation-strategy" not in after["options"]
        # the node agents attach it for the target alone now
        assert after["external_ids"]["ovn4nfv-launchers"] == target["metadata"]["uid"]
        k8s.api.delete_pod(NS, "virt-launcher-vm1-bbbbb")
        # through all of it, the port was never made again
        assert [e[:2] for e in log.events if e[1] == "vms_vm:vm1_eth1"] == []
    finally:
        log.close()

    # the VM deleted: its VMI and launcher with it, and then its port
    k8s.api.delete_kubevirt("VirtualMachine", NS, "vm1")
    k8s.wait_ports_gone(["vms_vm:vm1_eth1"])
    assert not [key for key in k8s.api.pods if key[0] == NS]


def test_a_stopped_vm_keeps_its_address_through_a_watcher_restart(k8s):
    machine = vm(k8s.api, "vm2")
    first = vmi(k8s.api, "vm2", machine)
    launcher(k8s.api, first, "virt-launcher-vm2-aaaaa", "node1",
             {"name": "net1", "interface": "eth1", "ip_address": "172.16.1.77"})
    told = k8s.annotated(NS, "virt-launcher-vm2-aaaaa")[0]
    k8s.api.delete_kubevirt("VirtualMachineInstance", NS, "vm2")      # stopped: the VM stays
    log = k8s.port_log()
    try:
        k8s.terminate()
        k8s.start()
        assert k8s.wait_log("VM vms/vm2 runs nowhere; its ports are kept while its VirtualMachine or VMI is", 30), \
            k8s.log_text()
        assert log.events == []
        row = port(k8s, "vms_vm:vm2_eth1")
        assert row["addresses"] == "%s 172.16.1.77" % told["mac_address"]
    finally:
        log.close()
    # the VM is deleted while the watcher runs: freed
    k8s.api.delete_kubevirt("VirtualMachine", NS, "vm2")
    k8s.wait_ports_gone(["vms_vm:vm2_eth1"])


def test_another_vm_cannot_take_a_vm_s_address_and_a_pod_cannot_pose_as_its_launcher(k8s):
    first = vmi(k8s.api, "vm3")                 # a VMI of its own: no VM
    launcher(k8s.api, first, "virt-launcher-vm3-aaaaa", "node1",
             {"name": "net1", "interface": "eth1", "ip_address": "172.16.1.78"})
    k8s.annotated(NS, "virt-launcher-vm3-aaaaa")
    other = vmi(k8s.api, "vm4")
    launcher(k8s.api, other, "virt-launcher-vm4-aaaaa", "node2",
             {"name": "net1", "interface": "eth1", "ip_address": "172.16.1.78"})
    events = k8s.api.wait(lambda api: [e for e in api.events if e["involvedObject"]["name"] ==
                                       "virt-launcher-vm4-aaaaa" and e["reason"] == "AddressConflict"], 30)
    assert events and "VM vms/vm3" in events[0]["message"], k8s.log_text()

    # a pod with KubeVirt's labels and vm3's VMI as owner, which the VMI does not name
    launcher(k8s.api, first, "posing", "node2", active=False)
    events = k8s.api.wait(lambda api: [e for e in api.events if e["involvedObject"]["name"] == "posing"
                                       and e["reason"] == "LauncherNotActive"], 30)
    assert events, k8s.log_text()
    pod = k8s.api.pod(NS, "posing")
    assert "ovnIfaceList" not in pod["metadata"]["annotations"]
    assert port(k8s, "vms_vm:vm3_eth1")["options"]["requested-chassis"] == "node1"

    # a standalone VMI deleted: its launchers go with it, and its ports
    k8s.api.delete_kubevirt("VirtualMachineInstance", NS, "vm3")
    k8s.wait_ports_gone(["vms_vm:vm3_eth1"])


def test_a_vm_is_policed_its_launchers_agree_and_a_pod_no_longer_a_launcher_lets_go(k8s):
    """A tenant's policy selecting a VM's launcher isolates the VM's port;
    a migration's target asking for other addresses than the launcher the
    VM's ports were made from is refused, and the port keeps its address
    (no tug of war between launchers); a pod that stops being a launcher
    holds nothing once the VM is gone."""
    machine = vm(k8s.api, "vm5")
    first = vmi(k8s.api, "vm5", machine)
    launcher(k8s.api, first, "virt-launcher-vm5-aaaaa", "node1",
             {"name": "net1", "interface": "eth1", "ip_address": "172.16.1.80"})
    k8s.annotated(NS, "virt-launcher-vm5-aaaaa")
    k8s.api.set_labels(NS, "virt-launcher-vm5-aaaaa", dict(
        k8s.api.pod(NS, "virt-launcher-vm5-aaaaa")["metadata"]["labels"], app="db"))
    k8s.api.create_policy(NS, "db-in", {"podSelector": {"matchLabels": {"app": "db"}}, "ingress": []},
                          {"k8s.v1.cni.cncf.io/policy-for": "ovn4nfv.k8s/net1"})
    row = port(k8s, "vms_vm:vm5_eth1")
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, ("Port_Group", "Logical_Switch_Port")) as db:
        isolated = db.wait_for(lambda idl: [g.name for g in idl.tables["Port_Group"].rows.values()
                                            if g.name.startswith("ovn4nfv_mnp_") and
                                            any(str(p.uuid) == row["_uuid"] for p in g.ports)], 30)
    assert isolated, "the policy selecting the VM's launcher isolates the VM's port; log:\n" + k8s.log_text()

    log = k8s.port_log()
    try:
        launcher(k8s.api, first, "virt-launcher-vm5-bbbbb", "node2",
                 {"name": "net1", "interface": "eth1", "ip_address": "172.16.1.81"}, migration="job-5")
        events = k8s.api.wait(lambda api: [e for e in api.events if e["involvedObject"]["name"] ==
                                           "virt-launcher-vm5-bbbbb" and e["reason"] == "AddressConflict"], 30)
        assert events and "virt-launcher-vm5-aaaaa" in events[0]["message"], k8s.log_text()
        wait_port(k8s, "vms_vm:vm5_eth1", lambda p: p["options"].get("requested-chassis") == "node1,node2")
        assert port(k8s, "vms_vm:vm5_eth1")["addresses"] == row["addresses"]
        assert log.events == []
    finally:
        log.close()

    # the first launcher stops being one (its label edited away), then everything of the VM goes
    k8s.api.set_labels(NS, "virt-launcher-vm5-aaaaa", {"app": "db"})
    k8s.api.delete_kubevirt("VirtualMachine", NS, "vm5")
    k8s.wait_ports_gone(["vms_vm:vm5_eth1"])


def test_an_interface_a_restarted_vm_no_longer_has_is_freed(k8s):
    machine = vm(k8s.api, "vm6")
    first = vmi(k8s.api, "vm6", machine)
    launcher(k8s.api, first, "virt-launcher-vm6-aaaaa", "node1")
    k8s.annotated(NS, "virt-launcher-vm6-aaaaa")
    # its running launcher's request edited: the guest still has eth1, whose port stays
    k8s.api.set_annotations(NS, "virt-launcher-vm6-aaaaa", ovn_network({"name": "net2", "interface": "eth2"}))
    wait_port(k8s, "vms_vm:vm6_eth2", lambda p: True)
    assert port(k8s, "vms_vm:vm6_eth1") is not None
    k8s.api.delete_kubevirt("VirtualMachineInstance", NS, "vm6")
    second = vmi(k8s.api, "vm6", machine)
    k8s.api.create_pod(NS, "virt-launcher-vm6-bbbbb", ovn_network({"name": "net2", "interface": "eth2"}),
                       node="node2", labels={"kubevirt.io": "virt-launcher",
                                             "kubevirt.io/created-by": second["metadata"]["uid"]},
                       owners=[{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "vm6",
                                "uid": second["metadata"]["uid"], "controller": True}])
    activate(k8s.api, "vm6", k8s.api.pod(NS, "virt-launcher-vm6-bbbbb"), "node2")
    k8s.annotated(NS, "virt-launcher-vm6-bbbbb")
    k8s.wait_ports_gone(["vms_vm:vm6_eth1"])
    assert port(k8s, "vms_vm:vm6_eth2") is not None


def test_a_launcher_s_multus_attachment_of_a_nad_that_says_dhcp(k8s):
    """KubeVirt names a VM's secondary networks in the launcher's Multus
    annotation; a NetworkAttachmentDefinition of type ovn4nfv saying
    ``dhcp: true`` gives the VM's port an interface its guest configures
    by the network's DHCP."""
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: vn.plan_networks(v, [("vmnet", vn.check_network(
            {"name": "vmnet", "subnet": "172.16.70.0/24", "dhcp": {}}, "vmnet"))], "merged", "ovn"), write=True)
    k8s.api.add_nad(NS, "vmnet", {"cniVersion": "1.0.0", "type": "ovn4nfv", "network": "vmnet", "dhcp": True})
    first = vmi(k8s.api, "vm7", vm(k8s.api, "vm7"))
    launcher(k8s.api, first, "virt-launcher-vm7-aaaaa", "node1", annotations={
        "k8s.v1.cni.cncf.io/networks": json.dumps([{"name": "vmnet", "interface": "net1"}])})
    [entry] = k8s.annotated(NS, "virt-launcher-vm7-aaaaa")
    assert entry["dhcp"] is True and entry["ip_address"].startswith("172.16.70.")
    row = port(k8s, "vms_vm:vm7_net1")
    assert row is not None and row["dhcpv4_options"], "the VM's port points at the network's DHCP"
