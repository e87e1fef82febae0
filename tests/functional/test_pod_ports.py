"""A pod's interfaces as OVN ports, against a real NB with ovn-northd."""

import os

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports, remote_mirrors
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import addressing
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import Batch, execute
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View


@pytest.fixture
def nb(sandbox):
    """An NB with the topology and two networks, and a connection to it."""
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        for compute in (
                lambda v: plan_topology(v, {}, "merged"),
                lambda v: vn.plan_networks(v, [(w, vn.check_network(x, w)) for w, x in (
                    ("a", {"name": "net1", "subnet": "172.16.1.0/24", "exclude_ips": ["172.16.1.2..172.16.1.9"],
                           "routes": [{"dst": "10.20.0.0/16"}]}),
                    ("b", {"name": "net2", "subnet": "172.16.2.0/24"}))], "merged", "ovn")):
            execute(db, compute, write=True)
        yield db


def requests(*entries):
    return ann.parse_requests({ann.OVN_NETWORK: ann.json.dumps(list(entries))})[1]


def attach(db, pod, reqs):
    execute(db, lambda v: pod_ports.plan_release(v, pod.namespace, pod.name, pod.uid), write=True)
    execute(db, lambda v: pod_ports.plan_pod(v, pod, reqs), write=True)
    return db.wait_for(lambda idl: pod_ports.interface_list(View(idl), pod, reqs), 10)


def detach(db, uid):
    return execute(db, lambda v: pod_ports.plan_delete(v, uid), write=True)


def test_static_and_dynamic_interfaces(nb, sandbox):
    pod = pod_ports.Pod("default", "web", "uid-web")
    reqs = requests({"name": "net1", "interface": "net0"},
                    {"name": "net2", "interface": "net1", "ip_address": "172.16.2.30",
                     "mac_address": "0a:00:00:00:02:1e", "default_gateway": True})
    entries = attach(nb, pod, reqs)
    assert entries, "the dynamic address arrives through the NB update stream"
    dynamic, static = entries
    assert static == {"interface": "net1", "ip_address": "172.16.2.30/24", "mac_address": "0a:00:00:00:02:1e",
                      "gateway_ip": "172.16.2.1", "default_gateway": True, "routes": []}
    assert dynamic["ip_address"] == "172.16.1.10/24", "first free after the gateway and the excluded range"
    assert dynamic["routes"] == [{"dst": "10.20.0.0/16", "gw": "172.16.1.1"}]
    first_octet = int(dynamic["mac_address"].split(":")[0], 16)
    assert first_octet & 0x02 and not first_octet & 0x01, "locally administered unicast"
    ports = dict((p["name"], p) for p in sandbox.rows("nb", "Logical_Switch_Port"))
    assert ports["default_web_net1"]["external_ids"]["ovn4nfv-pod-uid"] == "uid-web"
    mac = dynamic["mac_address"]
    assert ports["default_web_net0"]["addresses"] == mac + " 172.16.1.10", "chosen here, not by ovn-northd"
    assert ports["default_web_net0"]["port_security"] == "%s 172.16.1.10 %s" % (mac, addressing.link_local(mac)), \
        "set in the transaction that makes the port"
    assert not ports["default_web_net0"]["dynamic_addresses"]


def northd_writes(sandbox, port):
    """The NB transactions ovn-northd made that touched ``port``, read
    from the database file's log."""
    log = sandbox.run("ovsdb-tool", "show-log", "-m", os.path.join(sandbox.dir, "ovnnb_db.db"))
    return [record for record in log.split("\n\n")
            if '"ovn-northd"' in record.split("\n", 1)[0] and 'Logical_Switch_Port row "%s"' % port in record]


def test_a_new_port_is_born_down_so_northd_writes_nothing_back(nb, sandbox):
    """ovn-northd sets ``up`` on a port that lacks it: one more NB
    transaction after each of the watcher's, which ovn-northd then
    computes over again. A pod's port is made with ``up=false``; a port
    made without it (as ovn-nbctl makes one) shows what that costs."""
    pod = pod_ports.Pod("default", "down", "uid-down")
    attach(nb, pod, requests({"name": "net1", "interface": "net0"}))
    sandbox.nbctl("lsp-add", "net2", "made-by-hand")
    sandbox.nbctl("--wait=sb", "sync")
    ports = dict((p["name"], p) for p in sandbox.rows("nb", "Logical_Switch_Port"))
    assert ports["default_down_net0"]["up"] is False and ports["made-by-hand"]["up"] is False
    assert northd_writes(sandbox, "made-by-hand"), "ovn-northd wrote up=false on the port made without it"
    assert northd_writes(sandbox, "default_down_net0") == []


def test_a_network_changed_in_the_nb_is_read_anew(nb, sandbox):
    """Networks read from their switches are kept by what they were read
    from (name, external_ids, other_config): a change from the server is
    read again, by the next pod and by a pod checked again."""
    pod = pod_ports.Pod("default", "routed", "uid-routed")
    reqs = requests({"name": "net1", "interface": "net0"})
    assert attach(nb, pod, reqs)[0]["routes"] == [{"dst": "10.20.0.0/16", "gw": "172.16.1.1"}]
    execute(nb, lambda v: vn.plan_networks(v, [("a", vn.check_network(
        {"name": "net1", "subnet": "172.16.1.0/24", "exclude_ips": ["172.16.1.2..172.16.1.9"],
         "routes": [{"dst": "10.30.0.0/16", "gw": "172.16.1.254"}]}, "a"))], "merged", "ovn"), write=True)
    sandbox.nbctl("set", "Logical_Switch", "net2", "other_config:subnet=172.16.4.0/24")
    assert nb.wait_for(lambda idl: vn.read_network(View(idl), "net2").subnet == addressing.parse_cidr(
        "172.16.4.0/24", "subnet"), 10), "a change another client made is read"
    assert nb.read(lambda idl: pod_ports.interface_list(View(idl), pod, reqs))[0]["routes"] == \
        [{"dst": "10.30.0.0/16", "gw": "172.16.1.254"}]
    other = pod_ports.Pod("default", "routed2", "uid-routed2")
    assert attach(nb, other, reqs)[0]["routes"] == [{"dst": "10.30.0.0/16", "gw": "172.16.1.254"}]


def test_a_pod_made_again_on_its_address_keeps_its_mac(nb):
    """The MAC comes from the address (0a:58 and its four bytes): a pod
    deleted and made again (a new UID) gets the lowest free address, its
    old one, and the same MAC, so its peers' neighbour entries stay right.
    A static address without a MAC gets the same rule."""
    reqs = requests({"name": "net1", "interface": "net0"}, {"name": "net2", "interface": "net1",
                                                            "ip_address": "172.16.2.40"})
    first = attach(nb, pod_ports.Pod("default", "fwd", "uid-1"), reqs)
    assert first[0]["mac_address"] == "0a:58:ac:10:01:0a" and first[1]["mac_address"] == "0a:58:ac:10:02:28"
    detach(nb, "uid-1")
    again = attach(nb, pod_ports.Pod("default", "fwd", "uid-2"), reqs)
    assert again == first


def test_a_port_ovn_northd_addressed_keeps_its_address(nb, sandbox):
    """A port an earlier version made with ``dynamic`` (ovn-northd chose its
    address) is left as it is: the pod keeps what it was told."""
    pod = pod_ports.Pod("default", "old", "uid-old")
    reqs = requests({"name": "net1", "interface": "net0"})
    legacy = {"name": pod.port_name("net0"), "switch": "net1", "addresses": ["dynamic"],
              "external_ids": pod.marks("net0")}
    execute(nb, lambda v: pod_ports._port_batch(v, [legacy], "merged"), write=True)
    [entry] = nb.wait_for(lambda idl: pod_ports.interface_list(View(idl), pod, reqs), 10)
    plan = execute(nb, lambda v: pod_ports.plan_pod(v, pod, reqs), write=True)
    assert not plan.changed
    assert nb.read(lambda idl: pod_ports.interface_list(View(idl), pod, reqs)) == [entry]
    [port] = [p for p in sandbox.rows("nb", "Logical_Switch_Port") if p["name"] == "default_old_net0"]
    assert port["addresses"] == "dynamic" and port["dynamic_addresses"].split()[1] == entry["ip_address"][:-3]


def test_addresses_of_one_batch_are_each_their_own(nb):
    """Pods planned in one transaction never get the same address: the
    allocator sees what the batch plans before it commits."""
    pods = [pod_ports.Pod("default", "p%d" % i, "uid-p%d" % i) for i in range(20)]
    reqs = requests({"name": "net1", "interface": "net0"})
    execute(nb, lambda v: Batch([pod_ports.plan_pod(v, pod, reqs) for pod in pods]), write=True)
    entries = nb.read(lambda idl: [pod_ports.interface_list(View(idl), pod, reqs)[0] for pod in pods])
    assert sorted(e["ip_address"] for e in entries) == sorted("172.16.1.%d/24" % i for i in range(10, 30))


def test_delete_frees_the_dynamic_address_for_the_next_pod(nb, sandbox):
    first = attach(nb, pod_ports.Pod("default", "a", "uid-a"), requests({"name": "net1", "interface": "net0"}))
    detach(nb, "uid-a")
    assert not [p for p in sandbox.rows("nb", "Logical_Switch_Port") if p["name"].startswith("default_a_")]
    second = attach(nb, pod_ports.Pod("default", "b", "uid-b"), requests({"name": "net1", "interface": "net0"}))
    assert second[0]["ip_address"] == first[0]["ip_address"]


def test_duplicate_static_ip_is_refused_naming_the_holder(nb):
    attach(nb, pod_ports.Pod("ns1", "holder", "uid-h"),
           requests({"name": "net2", "interface": "net0", "ip_address": "172.16.2.50"}))
    with pytest.raises(ValidationError) as err:
        execute(nb, lambda v: pod_ports.plan_pod(v, pod_ports.Pod("ns2", "other", "uid-o"), requests(
            {"name": "net2", "interface": "net0", "ip_address": "172.16.2.50"})), write=True)
    assert "172.16.2.50" in str(err.value) and "pod ns1/holder" in str(err.value)
    with pytest.raises(ValidationError) as err:
        execute(nb, lambda v: pod_ports.plan_pod(v, pod_ports.Pod("ns2", "other", "uid-o"), requests(
            {"name": "net2", "interface": "net0", "ip_address": "172.16.2.1"})), write=True)
    assert "gateway" in str(err.value)


def test_deleting_web_leaves_web_1_alone(nb, sandbox):
    attach(nb, pod_ports.Pod("default", "web", "uid-1"), requests({"name": "net1", "interface": "net0"}))
    attach(nb, pod_ports.Pod("default", "web-1", "uid-2"), requests({"name": "net1", "interface": "net0"}))
    detach(nb, "uid-1")
    names = [p["name"] for p in sandbox.rows("nb", "Logical_Switch_Port") if "web" in p["name"]]
    assert names == ["default_web-1_net0"]


def test_a_pod_recreated_under_the_same_name_replaces_the_stale_port(nb, sandbox):
    attach(nb, pod_ports.Pod("default", "db", "uid-old"),
           requests({"name": "net2", "interface": "net0", "ip_address": "172.16.2.60"}))
    entries = attach(nb, pod_ports.Pod("default", "db", "uid-new"),
                     requests({"name": "net1", "interface": "net0"}))
    assert entries[0]["ip_address"].startswith("172.16.1.")
    port = [p for p in sandbox.rows("nb", "Logical_Switch_Port") if p["name"] == "default_db_net0"]
    assert len(port) == 1 and port[0]["external_ids"]["ovn4nfv-pod-uid"] == "uid-new"


def test_unknown_network_is_an_error_and_writes_nothing(nb, sandbox):
    sandbox.nbctl("--wait=sb", "sync")      # let ovn-northd finish its own writes
    before = sandbox.dump("nb")
    with pytest.raises(ValidationError) as err:
        execute(nb, lambda v: pod_ports.plan_pod(v, pod_ports.Pod("d", "p", "u"), requests(
            {"name": "net1", "interface": "net0"}, {"name": "nosuch", "interface": "net1"})), write=True)
    assert "ovnNetwork[1].name" in str(err.value) and "nosuch" in str(err.value)
    assert sandbox.dump("nb") == before


def test_a_remote_tap_follows_its_pod_to_the_port_made_anew(nb, sandbox):
    """The tap declared for default/web's net0 is on the port the pod path
    makes, and on the port made for the pod made again (a new UID: a new
    row), in the same transaction; deleted, it leaves no rule behind."""
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES + remote_mirrors.TABLES) as db:
        tap = {"name": "web-gre", "source": {"pod": "web", "interface": "net0"},
               "collector": {"address": "10.20.0.9"}, "direction": "egress"}
        execute(db, lambda v: remote_mirrors.plan_taps(v, [("config[0]", tap)], "merged"), write=True)
        [mirror] = sandbox.rows("nb", "Mirror")

        def rules():
            ports = dict((p["name"], p) for p in sandbox.rows("nb", "Logical_Switch_Port"))
            return ports["default_web_net0"]["mirror_rules"] if "default_web_net0" in ports else None

        reqs = requests({"name": "net1", "interface": "net0"})
        attach(db, pod_ports.Pod("default", "web", "uid-1"), reqs)
        assert rules() == mirror["_uuid"]
        detach(db, "uid-1")
        assert rules() is None and sandbox.rows("nb", "Mirror") == [mirror], "the tap outlives the pod"
        attach(db, pod_ports.Pod("default", "web", "uid-2"), reqs)
        assert rules() == mirror["_uuid"], "the tap follows the pod"
        execute(db, lambda v: remote_mirrors.plan_taps(v, [("config[0]", {"name": "web-gre"})], "deleted"),
                write=True)
        assert sandbox.rows("nb", "Mirror") == [] and rules() == []


def test_a_grant_changed_in_place_keeps_others_marks_and_tightens_at_once(nb, sandbox):
    """Issue 37: a pod granted a virtual IP whose port a chain marks as a
    function: when the network takes the grant back, the pod's serving
    (plan_pod, then plan_port_security) keeps the chain's marks and its
    MAC-only port security, and writes the grant's marks and port security
    in one transaction; the watcher's tightening (security_audit) does it
    for every port of the network at once, whatever the pods' serving."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import security_audit
    vip = "172.16.2.250"
    execute(nb, lambda v: vn.plan_networks(v, [("b", vn.check_network(
        {"name": "net2", "relaxed_port_security": [{"namespace": "vnf", "level": "off"}],
         "virtual_ips": [{"address": vip, "namespaces": ["vnf"]}]}, "b"))], "merged", "ovn"), write=True)
    pod = pod_ports.Pod("vnf", "r1", "uid-r1")
    reqs = requests({"name": "net2", "interface": "net0", "virtual_ips": [vip]})
    attach(nb, pod, reqs)
    execute(nb, lambda v: pod_ports.plan_port_security(v, pod, reqs), write=True)
    row = next(p for p in sandbox.rows("nb", "Logical_Switch_Port") if p["name"] == "vnf_r1_net0")
    assert row["external_ids"]["ovn4nfv-vips"] == vip and vip in row["port_security"]
    mac = row["addresses"].split()[0]
    sandbox.nbctl("set", "Logical_Switch_Port", "vnf_r1_net0", "external_ids:ovn4nfv-chains=c1",
                  'port_security="%s"' % mac)
    execute(nb, lambda v: vn.plan_networks(v, [("b", vn.check_network(
        {"name": "net2", "virtual_ips": [{"address": vip, "namespaces": ["other"]}]}, "b"))], "merged", "ovn"),
        write=True)
    nb.wait_for(lambda idl: "other" in idl.tables["Logical_Switch"].rows[next(
        u for u, r in idl.tables["Logical_Switch"].rows.items() if r.name == "net2")].external_ids.get(
        "ovn4nfv-virtual-ips", ""), 10)
    execute(nb, lambda v: pod_ports.plan_pod(v, pod, reqs), write=True)
    row = next(p for p in sandbox.rows("nb", "Logical_Switch_Port") if p["name"] == "vnf_r1_net0")
    assert row["external_ids"].get("ovn4nfv-chains") == "c1", "the chain's mark stays"
    assert "ovn4nfv-vips" not in row["external_ids"] and row["port_security"] == mac, "its grant went, MAC-only kept"
    # by hand, a port made looser than its network allows: the tightening puts it right, and only it
    sandbox.nbctl("set", "Logical_Switch_Port", "vnf_r1_net0", "external_ids:ovn4nfv-port-security=off",
                  "external_ids:ovn4nfv-chains=\"\"", "port_security=[]")
    execute(nb, lambda v: vn.plan_networks(v, [("b", vn.check_network(
        {"name": "net2", "relaxed_port_security": [{"namespace": "vnf", "level": "mac"}]}, "b"))], "merged", "ovn"),
        write=True)
    nb.wait_for(lambda idl: any('"mac"' in r.external_ids.get("ovn4nfv-relaxed-security", "")
                                for r in idl.tables["Logical_Switch"].rows.values()), 10)
    assert execute(nb, lambda v: security_audit.plan_tighten(v, "net2"), write=True).changed
    row = next(p for p in sandbox.rows("nb", "Logical_Switch_Port") if p["name"] == "vnf_r1_net0")
    assert "ovn4nfv-port-security" not in row["external_ids"], "a grant looser than allowed is none at all"
    assert row["port_security"].split()[:2] == [mac, row["addresses"].split()[1]]
    assert not execute(nb, lambda v: security_audit.plan_tighten(v, "net2"), write=True).changed
