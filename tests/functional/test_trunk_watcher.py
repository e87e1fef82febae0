"""A VNF's trunk as the watcher (a process) serves it, read from the NB
from outside: a VLAN's nesting changed by hand is put back (the tag is
what keeps the VLANs apart), and the trunks that cannot be served are
refused with nothing made."""

import json

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann, pod_ports, vms
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from tests.harness.watcher_env import NETWORKS, Cluster, ovn_network

MTUS = [{"name": "small", "subnet": "172.16.70.0/24", "mtu": 1400},
        {"name": "big", "subnet": "172.16.71.0/24", "mtu": 1500}]


@pytest.fixture(scope="module")
def k8s(tmp_path_factory, collections_path):
    env = Cluster(str(tmp_path_factory.mktemp("trunks")), collections_path, networks=NETWORKS + MTUS)
    try:
        yield env
    finally:
        code = env.stop()
    assert code == 0, "SIGTERM must stop the watcher cleanly (exit %r)" % code


def nesting(idl, name):
    row = next((r for r in idl.tables["Logical_Switch_Port"].rows.values() if r.name == name), None)
    return None if row is None else (list(row.parent_name), list(row.tag))


def test_a_vlan_s_tag_changed_by_hand_is_put_back(k8s):
    k8s.api.create_pod("default", "tr", ovn_network(
        {"name": "net1", "interface": "t0", "vlans": [{"name": "net2", "vlan": 10}]}))
    child = [e for e in k8s.annotated("default", "tr") if e.get("parent")]
    assert [(e["interface"], e["vlan"]) for e in child] == [("t0.10", 10)]
    k8s.box.nbctl("set", "logical_switch_port", "default_tr_t0.10", "tag=20")
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        mended = db.wait_for(lambda idl: nesting(idl, "default_tr_t0.10") == (["default_tr_t0"], [10]), 30)
    assert mended, "VID 20 still reaches net2; watcher log:\n%s" % k8s.log_text()


def test_a_vlan_whose_network_outgrows_its_trunk_s_mtu_is_refused(k8s):
    k8s.api.create_pod("default", "fat", ovn_network(
        {"name": "small", "interface": "t0", "vlans": [{"name": "big", "vlan": 5}]}))

    def told(api):
        return [e["message"] for e in k8s.events_for("fat") if e["reason"] == "InvalidNetworkRequest"]
    messages = k8s.api.wait(told, 30)
    assert messages and "MTU 1500" in messages[0] and "small" in messages[0], messages
    assert not [p for p in k8s.pod_ports() if p["external_ids"].get("ovn4nfv-pod-name") == "fat"]


def test_a_vm_s_interface_is_no_trunk(k8s):
    """A live migration announces the NIC's MAC, untagged: a VM's VLANs
    would stay on the source. Refused before anything is planned."""
    owner = vms.vm_owner("default", "vm1", "uid-vm1")
    requests = ann.parse_requests({ann.OVN_NETWORK: json.dumps([
        {"name": "net1", "interface": "eth0", "vlans": [{"name": "net2", "vlan": 7}]}])})[1]
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        with pytest.raises(ValidationError) as caught:
            execute(db, lambda view: pod_ports.plan_pod(view, owner, requests), write=True)
    assert "no trunk" in str(caught.value)
