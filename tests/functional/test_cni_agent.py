"""The CNI plugin and its node agent on a real node: ovs-vswitchd (netdev)
and ovn-controller in the node's namespace, pods as namespaces, the
plugin executed as a runtime executes it, the agent as a process. The
pods' interface lists are written on the API stand-in the way the watcher
writes them, with the same core functions."""

import json
import os
import signal
import subprocess
import threading
import time

import netaddr
import pytest

from tests.harness.cni_env import running
from ansible_collections.ovn4nfv.k8s.plugins.module_utils import cni
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from tests.harness.cni_runtime import call
from tests.harness.dataplane import FRAMES, heard, ip, listening, ns_name, ping, tcp_exchange
from tests.harness.dhcp_clients import udhcpc
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute, reconcile


@pytest.fixture(scope="module")
def env(tmp_path_factory, collections_path):
    with running(str(tmp_path_factory.mktemp("cni-agent")), collections_path) as environment:
        yield environment


TWO = ({"name": "net1", "interface": "net0"},
       {"name": "net2", "interface": "net1", "default_gateway": True})


def test_two_pods_with_two_interfaces_reach_each_other(env):
    netns_a, netns_b = env.pod("pa", *TWO), env.pod("pb", *TWO)
    code_a, result_a, err = env.cni("ADD", "pa", netns_a, "ctr-a")
    assert code_a == 0, (result_a, err, env.log_text())
    code_b, result_b, err = env.cni("ADD", "pb", netns_b, "ctr-b")
    assert code_b == 0, (result_b, err, env.log_text())
    assert [i["name"] for i in result_a["interfaces"] if i.get("sandbox")] == ["net0", "net1"]
    # no interface is named CNI_IFNAME (eth0): the first one's address has no index, as the pod's IP
    addresses_b = dict((result_b["interfaces"][i.get("interface", 0)]["name"], i["address"].split("/")[0])
                       for i in result_b["ips"])
    assert "interface" not in result_b["ips"][0] and [i.get("interface") for i in result_b["ips"][1:]] == [1]
    env.node.wait_hv()
    assert ping(netns_a, addresses_b["net0"]) and ping(netns_a, addresses_b["net1"])
    reply, _source = tcp_exchange(netns_b, netns_a, addresses_b["net1"], 8080)
    assert reply == "pong:ping"
    routes = ip("ip", "route", netns=netns_a).stdout
    assert "default via 172.16.2.1 dev net1" in routes, "the default route is on the flagged interface"
    assert "10.20.0.0/16 via 172.16.1.1 dev net0" in routes, "the network's routes are there"


def test_port_security_drops_a_pod_that_claims_another_pods_addresses(env):
    """Pod C sends, as hand-made frames, with pod B's IP, with B's MAC, and
    an ARP reply claiming B's IP; then honest frames. A receives the honest
    ones (and B's own, from B) and none of the lies: OVN dropped them."""
    pods = {}
    for name in ("ps-a", "ps-b", "ps-c"):
        netns = env.pod(name, {"name": "net2", "interface": "net0"})
        code, result, err = env.cni("ADD", name, netns, "ctr-" + name)
        assert code == 0, (result, err, env.log_text())
        mac = next(i["mac"] for i in result["interfaces"] if i.get("sandbox"))
        pods[name] = {"netns": netns, "mac": mac, "ip": result["ips"][0]["address"].split("/")[0]}
    env.node.wait_hv()
    a, b, c = pods["ps-a"], pods["ps-b"], pods["ps-c"]
    listener = subprocess.Popen(["ip", "netns", "exec", ns_name(a["netns"]), "python3", FRAMES, "listen", "net0",
                                 "20", "sentinel", "honest-b"], stdout=subprocess.PIPE, universal_newlines=True)
    try:
        assert listener.stdout.readline().strip() == "ready"
        lies = [dict(kind="udp", src_mac=c["mac"], dst_mac=a["mac"], src_ip=b["ip"], dst_ip=a["ip"], payload="ip-lie"),
                dict(kind="udp", src_mac=b["mac"], dst_mac=a["mac"], src_ip=c["ip"], dst_ip=a["ip"], payload="mac-lie"),
                dict(kind="arp", src_mac=c["mac"], dst_mac="ff:ff:ff:ff:ff:ff", src_ip=b["ip"], dst_ip=b["ip"])]
        truth = [dict(kind="arp", src_mac=c["mac"], dst_mac="ff:ff:ff:ff:ff:ff", src_ip=c["ip"], dst_ip=c["ip"]),
                 dict(kind="udp", src_mac=c["mac"], dst_mac=a["mac"], src_ip=c["ip"], dst_ip=a["ip"],
                      payload="sentinel")]
        ip("python3", FRAMES, "send", "net0", json.dumps(lies + truth), netns=c["netns"])
        ip("python3", FRAMES, "send", "net0", json.dumps([dict(
            kind="udp", src_mac=b["mac"], dst_mac=a["mac"], src_ip=b["ip"], dst_ip=a["ip"], payload="honest-b")]),
            netns=b["netns"])
        out, _err = listener.communicate(timeout=30)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.wait(5)
    seen = [json.loads(line) for line in out.splitlines()]
    payloads = [f.get("payload") for f in seen if f["kind"] == "udp"]
    assert "sentinel" in payloads and "honest-b" in payloads, seen
    assert "ip-lie" not in payloads and "mac-lie" not in payloads, seen
    claims = [(f["sha"], f["spa"]) for f in seen if f["kind"] == "arp"]
    assert (c["mac"], c["ip"]) in claims, "the honest ARP arrives: %s" % seen
    assert (c["mac"], b["ip"]) not in claims, "the ARP lie was dropped: %s" % seen
    rows = dict((r["name"], r) for r in env.node.box.rows("nb", "Logical_Switch_Port"))
    security = rows["default_ps-c_net0"]["port_security"]
    assert (security if isinstance(security, list) else [security]) == [
        "%s %s %s" % (c["mac"], c["ip"], netaddr.EUI(c["mac"]).ipv6_link_local())]


def test_check_passes_then_fails_when_an_address_is_removed(env):
    netns = env.pod("pc", {"name": "net1", "interface": "net0"})
    code, added, _err = env.cni("ADD", "pc", netns, "ctr-c")
    assert code == 0, added
    code, out, _err = env.cni("CHECK", "pc", netns, "ctr-c", prevResult=added)
    assert code == 0, out
    address = ip("ip", "-o", "-4", "addr", "show", "net0", netns=netns).stdout.split()[3]
    ip("ip", "addr", "del", address, "dev", "net0", netns=netns)
    code, out, _err = env.cni("CHECK", "pc", netns, "ctr-c", prevResult=added)
    assert code == 1 and out["code"] == 103 and address in out["msg"]


def test_check_follows_the_specification(env):
    """CHECK needs prevResult, compares it with what exists, and verifies
    that the interfaces were added for the container it names."""
    netns = env.pod("pk", {"name": "net1", "interface": "net0"})
    code, added, _err = env.cni("ADD", "pk", netns, "ctr-k")
    assert code == 0, added
    code, out, _err = env.cni("CHECK", "pk", netns, "ctr-k")
    assert code == 1 and out["code"] == 7 and "prevResult" in out["msg"], out
    code, out, _err = env.cni("CHECK", "pk", netns, "ctr-other", prevResult=added)
    assert code == 1 and out["code"] == 103 and "ctr-other" in out["msg"], out
    claimed = json.loads(json.dumps(added))
    claimed["ips"][0]["address"] = "172.16.1.250/24"       # the ADD's result says more than exists
    code, out, _err = env.cni("CHECK", "pk", netns, "ctr-k", prevResult=claimed)
    assert code == 1 and out["code"] == 103 and "172.16.1.250/24" in out["msg"], out
    code, out, _err = env.cni("CHECK", "pk", netns, "ctr-k", prevResult=added, cniVersion="0.3.1")
    assert code == 1 and out["code"] == 1, out


def test_add_onto_an_existing_interface_fails(env):
    netns = env.pod("pd", {"name": "net1", "interface": "net0"})
    assert env.cni("ADD", "pd", netns, "ctr-d")[0] == 0
    code, out, _err = env.cni("ADD", "pd", netns, "ctr-d")
    assert code == 1 and out["code"] == 100 and "net0" in out["msg"]


def test_del_twice_after_restart_and_without_netns_leaves_nothing(env):
    netns = env.pod("pe", {"name": "net1", "interface": "net0"}, {"name": "net2", "interface": "net1"})
    code, result, _err = env.cni("ADD", "pe", netns, "ctr-e")
    assert code == 0, result
    hosts = [i["name"] for i in result["interfaces"] if not i.get("sandbox")]
    assert set(hosts) <= set(env.node_links())
    env.stop_agent()
    env.start_agent()                                   # DEL after the agent restarted
    ip("ip", "netns", "delete", os.path.basename(netns))  # and the pod's namespace already gone
    for _attempt in range(2):                           # DEL twice
        code, out, err = env.cni("DEL", "pe", netns, "ctr-e")
        assert code == 0, (out, err)
    assert not set(hosts) & set(env.node_links()), "no veth left"
    ports = env.node.box.run("ovs-vsctl", "--db=" + env.node.box.ovs_db, "list-ports", "br-int").split()
    assert not set(hosts) & set(ports), "no OVS port left"
    for lsp in ("default_pe_net0", "default_pe_net1"):
        env.node.box.run("ovn-sbctl", "--db=" + env.node.box.sb_db, "--timeout=20", "wait-until",
                         "Port_Binding", lsp, "chassis=[]")


def test_restarted_agent_sweeps_ports_no_pod_needs(env):
    """A CNI DEL that never came (the pod went while the agent was down)
    and a reboot's leftovers (the pod's namespace and veth gone, the OVS
    port still in the database): the agent removes both ports when it
    starts, and leaves a live pod's alone."""
    pods = {}
    for name in ("sw-gone", "sw-rebooted", "sw-live"):
        netns = env.pod(name, {"name": "net1", "interface": "net0"})
        code, result, _err = env.cni("ADD", name, netns, "ctr-" + name)
        assert code == 0, result
        pods[name] = (netns, [i["name"] for i in result["interfaces"] if not i.get("sandbox")][0])
    env.stop_agent()
    env.api.delete_pod("default", "sw-gone")
    ip("ip", "netns", "delete", os.path.basename(pods["sw-rebooted"][0]))   # its veth goes with it,
    deadline = time.monotonic() + 30            # once the kernel's cleanup of the namespace has run
    while pods["sw-rebooted"][1] in env.node_links() and time.monotonic() < deadline:
        time.sleep(0.1)
    box = env.node.box
    # a port the product did not make, its device missing too: not the agent's to touch
    box.run("ovs-vsctl", "--db=" + box.ovs_db, "add-port", "br-int", "foreign0")
    env.start_agent()
    stale = sorted([pods["sw-gone"][1], pods["sw-rebooted"][1]])
    assert env.wait_log("sweep: removed 2 stale ports: " + ", ".join(stale), 30), env.log_text()
    ports = box.run("ovs-vsctl", "--db=" + box.ovs_db, "list-ports", "br-int").split()
    assert pods["sw-live"][1] in ports and "foreign0" in ports and not set(stale) & set(ports), (ports, stale)
    links = env.node_links()
    assert pods["sw-live"][1] in links and not set(stale) & set(links), (links, stale, env.log_text())
    assert ", ".join(stale) in env.log_text()
    box.run("ovs-vsctl", "--db=" + box.ovs_db, "del-port", "br-int", "foreign0")


def test_namespace_swapped_after_the_check_is_not_followed(env, tmp_path):
    """CNI_NETNS is a symlink to the pod's namespace when the plugin checks
    it, and is turned to the node's own while the agent waits for the
    interface list. The agent must build in the namespace that was checked:
    the pod's; nothing may appear in the node's."""
    netns, patch = env.unannounced_pod("swapped", {"name": "net1", "interface": "net7"})
    link = str(tmp_path / "netns-link")
    os.symlink(netns, link)
    watches = env.api.watches
    outcome = {}
    adding = threading.Thread(target=lambda: outcome.update(answer=env.cni("ADD", "swapped", link, "ctr-swap")))
    adding.start()
    try:
        # the agent has checked nothing by path since; it now waits on a watch of the pod
        assert env.api.wait(lambda api: api.watches > watches, 30), env.log_text()
        os.unlink(link)
        os.symlink("/var/run/netns/" + env.node.ns, link)
        env.api.set_annotations("default", "swapped", patch)
    finally:
        adding.join(60)
    code, result, err = outcome["answer"]
    assert code == 0, (result, err, env.log_text())
    assert "net7" not in env.node_links(), "an interface was made in the node's namespace"
    assert "net7" in ip("ip", "-o", "link", netns=netns).stdout, "the pod's namespace got it"
    assert "172.16.1." not in ip("ip", "-o", "-4", "addr", netns=env.node.ns).stdout


def test_del_with_a_stale_namespace_path_leaves_no_port(env, tmp_path):
    netns = env.pod("stale", {"name": "net1", "interface": "net0"})
    code, result, _err = env.cni("ADD", "stale", netns, "ctr-stale")
    assert code == 0, result
    host = [i["name"] for i in result["interfaces"] if not i.get("sandbox")][0]
    ip("ip", "netns", "delete", os.path.basename(netns))
    plain = str(tmp_path / "stale-netns")
    with open(plain, "w") as handle:
        handle.write("the namespace is gone; a file took its path")
    code, out, err = env.cni("DEL", "stale", plain, "ctr-stale")
    assert code == 0, (out, err, env.log_text())
    box = env.node.box
    assert host not in box.run("ovs-vsctl", "--db=" + box.ovs_db, "list-ports", "br-int").split()
    assert host not in env.node_links()


def test_missing_interface_list_times_out_and_leaves_nothing(env):
    env.api.create_pod("default", "pf", {})
    netns = "o4n-%s-pf" % env.node.tag
    env.node._add_ns(netns)
    before = env.node_links()
    code, out, _err = env.cni("ADD", "pf", "/var/run/netns/" + netns, "ctr-f")
    assert code == 1 and out["code"] == 101 and "ovnIfaceList" in out["msg"]
    assert env.node_links() == before
    assert len(ip("ip", "-o", "link", netns=netns).stdout.splitlines()) == 1, "only lo in the pod"


FORGED = {"interface": "net0", "ip_address": "172.16.1.200/24", "mac_address": "0a:58:ac:10:01:c8",
          "gateway_ip": "172.16.1.1", "default_gateway": "false"}


def _nothing_made(env, netns, links_before, pod):
    box = env.node.box
    ports = box.run("ovs-vsctl", "--db=" + box.ovs_db, "--columns=external_ids", "list", "interface")
    assert "default/" + pod + "\"" not in ports, "an OVS port was made for the pod"
    assert env.node_links() == links_before, "the node got an interface"
    assert len(ip("ip", "-o", "link", netns=netns).stdout.splitlines()) == 1, "only lo in the pod"


def test_a_provider_network_s_pod_on_a_node_without_its_physnet_is_refused_before_anything_is_made(env):
    """The node agent reads, with the pod's ports, the southbound's
    localnet ports of their switches: a provider network whose physical
    network this node does not map (or maps to a bridge that does not
    exist) is a CNI error naming it, with nothing made; once mapped to a
    bridge, the same ADD succeeds."""
    box = env.node.box

    def vsctl(*args):
        return box.run("ovs-vsctl", "--db=" + box.ovs_db, *args).strip()
    network = {"name": "provnet", "subnet": "192.168.77.0/24", "physnet": "physnet-prov", "vlan": 77}
    with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: vn.plan_networks(v, [("p", vn.check_network(network, "p"))], "merged", "ovn"),
                write=True)
    mappings = vsctl("--if-exists", "get", "open_vswitch", ".", "external_ids:ovn-bridge-mappings").strip('"')
    netns = env.pod("prov1", {"name": "provnet", "interface": "net0"})
    name = "o4n-%s-prov1" % env.node.tag
    before = env.node_links()
    try:
        code, out, _err = env.cni("ADD", "prov1", netns, "ctr-prov1")
        assert code == 1 and out["code"] == 106, out
        assert "needs physical network physnet-prov, which node node1 does not map" in out["msg"]
        assert "ovn_controller_physnets" in out["msg"]
        _nothing_made(env, name, before, "prov1")

        vsctl("set", "open_vswitch", ".", "external_ids:ovn-bridge-mappings=" + ",".join(
            [m for m in [mappings] if m] + ["physnet-prov:br-prov"]))
        code, out, _err = env.cni("ADD", "prov1", netns, "ctr-prov1")
        assert code == 1 and out["code"] == 106 and "maps to bridge br-prov, which does not exist" in out["msg"], out
        _nothing_made(env, name, before, "prov1")

        vsctl("add-br", "br-prov", "--", "set", "bridge", "br-prov", "datapath_type=netdev")
        code, out, _err = env.cni("ADD", "prov1", netns, "ctr-prov1")
        assert code == 0, out
        assert [i["name"] for i in out["interfaces"] if i.get("sandbox")] == ["net0"]
        code, out, _err = env.cni("DEL", "prov1", netns, "ctr-prov1")
        assert code == 0, out
    finally:
        if mappings:
            vsctl("set", "open_vswitch", ".", "external_ids:ovn-bridge-mappings=" + mappings)
        else:
            vsctl("remove", "open_vswitch", ".", "external_ids", "ovn-bridge-mappings")
        vsctl("--if-exists", "del-br", "br-prov")
        env.api.delete_pod("default", "prov1")
        with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
            execute(db, lambda v: vn.plan_networks(v, [("p", vn.check_network({"name": "provnet"}, "p"))], "deleted",
                                                   "ovn", force=True), write=True)


def test_an_interface_list_forged_before_the_watcher_ran_configures_nothing(env):
    """The pod's owner writes ``ovnIfaceList`` (an address of their
    choosing) before the watcher has run. The ADD reads it and finds no
    port in OVN yet; the watcher then makes the port, with OVN's address;
    the agent refuses the forged list, and nothing is made from it. The
    runtime's retry, after the watcher wrote the truth, succeeds."""
    requests = ({"name": "net1", "interface": "net0"},)
    obj = env.create_pod("forged", *requests, annotations=ann.output_annotations([FORGED]))
    netns = "/var/run/netns/o4n-%s-forged" % env.node.tag
    before = env.node_links()
    outcome = {}
    adding = threading.Thread(target=lambda: outcome.update(answer=env.cni("ADD", "forged", netns, "ctr-forged")))
    adding.start()
    try:
        _netns, truth = env.watcher_ran(obj, *requests)
    finally:
        adding.join(60)
    code, out, _err = outcome["answer"]
    assert code == 1 and out["code"] == 104, (out, env.log_text())
    assert "172.16.1.200" in out["msg"] and "default_forged_net0" in out["msg"], out
    _nothing_made(env, netns, before, "forged")
    env.api.set_annotations("default", "forged", truth)
    code, result, _err = env.cni("ADD", "forged", netns, "ctr-forged")
    assert code == 0, (result, env.log_text())
    assert result["ips"][0]["address"] != FORGED["ip_address"]


def test_an_interface_list_rewritten_to_another_pods_address_is_refused(env):
    """The watcher ran; then the pod's owner patched its interface list to
    claim another pod's MAC and IP. The agent refuses it at once."""
    victim = env.pod("victim", {"name": "net1", "interface": "net0"})
    code, result, _err = env.cni("ADD", "victim", victim, "ctr-victim")
    assert code == 0, result
    netns = env.pod("thief", {"name": "net1", "interface": "net0"})
    stolen = dict(FORGED, ip_address=result["ips"][0]["address"],
                  mac_address=[i["mac"] for i in result["interfaces"] if i.get("sandbox")][0])
    env.api.set_annotations("default", "thief", ann.output_annotations([stolen]))
    before = env.node_links()
    code, out, _err = env.cni("ADD", "thief", netns, "ctr-thief")
    assert code == 1 and out["code"] == 104 and stolen["ip_address"] in out["msg"], out
    _nothing_made(env, netns, before, "thief")


def _ports_of(env, pod):
    box = env.node.box
    ids = box.run("ovs-vsctl", "--db=" + box.ovs_db, "--columns=external_ids", "list", "interface")
    return ids.count("default/" + pod + "\"")


def _pod_links(netns):
    return sorted(line.split(":")[1].strip().split("@")[0] for line in ip("ip", "-o", "link", netns=netns).stdout.splitlines())


def test_an_add_that_fails_after_its_veth_leaves_nothing_and_the_retry_succeeds(env):
    """An MTU the kernel refuses (injected once, by tests/harness/agent_faults.py)
    fails the ADD after the veth was made; a pod that already has a
    default route fails it after its first interface was finished. Each
    time nothing is left, on the node, in the pod or in OVS, and the retry
    succeeds."""
    from pyroute2 import NetNS
    netns = env.pod("fail-mtu", {"name": "net1", "interface": "net0"})
    with env.agent_variant(faults={"mtu": 9000}):
        before = env.node_links()
        code, out, _err = env.cni("ADD", "fail-mtu", netns, "ctr-fail-mtu", mtu=9000)
        assert code == 1 and "injected for mtu 9000" in out["msg"], out
        assert env.node_links() == before and _pod_links(netns) == ["lo"] and _ports_of(env, "fail-mtu") == 0
        code, result, _err = env.cni("ADD", "fail-mtu", netns, "ctr-fail-mtu", mtu=9000)
        assert code == 0, (result, env.log_text())
    assert "mtu 9000" in ip("ip", "-o", "link", "show", "net0", netns=ns_name(netns)).stdout

    netns = env.pod("fail-route", *TWO)
    with NetNS(netns) as pod_ns:
        pod_ns.link("add", ifname="d0", kind="veth", peer="d1")
        index = pod_ns.link_lookup(ifname="d0")[0]
        pod_ns.link("set", index=index, state="up")
        pod_ns.route("add", dst="0.0.0.0/0", oif=index)
    before = env.node_links()
    code, out, _err = env.cni("ADD", "fail-route", netns, "ctr-fail-route")
    assert code == 1 and "exists" in out["msg"], out
    assert env.node_links() == before
    assert _pod_links(netns) == ["d0", "d1", "lo"] and _ports_of(env, "fail-route") == 0, _pod_links(netns)
    with NetNS(netns) as pod_ns:
        pod_ns.route("del", dst="0.0.0.0/0", oif=pod_ns.link_lookup(ifname="d0")[0])
    code, result, _err = env.cni("ADD", "fail-route", netns, "ctr-fail-route")
    assert code == 0, (result, env.log_text())


def _failing_pod(env, name, *requests):
    """A pod announced as the watcher announces it: ``(netns, uid)``."""
    obj = env.create_pod(name, *requests)
    netns, patch = env.watcher_ran(obj, *requests)
    env.api.set_annotations("default", name, patch)
    return netns, obj["metadata"]["uid"]


def _left_nothing(env, netns, pod, links_before):
    assert env.node_links() == links_before, "the node's interfaces changed"
    assert _pod_links(netns) == ["lo"], _pod_links(netns)
    assert _ports_of(env, pod) == 0, "an OVS port of the pod is left"


def test_an_add_whose_veth_name_is_taken_leaves_the_other_interface_alone(env):
    """The veth step fails: an interface that is not the product's holds
    the node-side name. The ADD fails, removes nothing of the other's and
    leaves nothing of its own; once the name is free the retry succeeds."""
    netns, uid = _failing_pod(env, "fail-veth", {"name": "net1", "interface": "net0"})
    taken = cni.host_ifname(uid, "net0")
    ip("ip", "link", "add", taken, "type", "veth", "peer", "name", "o4nforeign", netns=env.node.ns)
    try:
        before = env.node_links()
        code, out, _err = env.cni("ADD", "fail-veth", netns, "ctr-fail-veth")
        assert code == 1 and "exists" in out["msg"], out
        _left_nothing(env, netns, "fail-veth", before)
        assert taken in env.node_links() and "o4nforeign" in env.node_links(), "the other's interface was removed"
    finally:
        ip("ip", "link", "del", taken, netns=env.node.ns)
    code, result, _err = env.cni("ADD", "fail-veth", netns, "ctr-fail-veth")
    assert code == 0, (result, env.log_text())


def test_an_add_whose_address_the_kernel_refuses_leaves_nothing(env):
    """The address step fails (the kernel's answer replaced by ENOBUFS,
    once, by tests/harness/agent_faults.py): the veth made before it goes, and
    the runtime's retry succeeds."""
    static = "172.16.1.77"
    with env.agent_variant(faults={"address": static}):
        netns, _uid = _failing_pod(env, "fail-address", {"name": "net1", "interface": "net0",
                                                         "ip_address": static})
        before = env.node_links()
        code, out, _err = env.cni("ADD", "fail-address", netns, "ctr-fail-address")
        assert code == 1 and "injected for address %s" % static in out["msg"], out
        _left_nothing(env, netns, "fail-address", before)
        code, result, _err = env.cni("ADD", "fail-address", netns, "ctr-fail-address")
        assert code == 0, (result, env.log_text())
        assert result["ips"][0]["address"] == static + "/24"


def test_an_add_whose_ovs_port_ovs_refuses_leaves_the_other_port_alone(env):
    """The OVS port step fails: a port that is not the product's, on
    another bridge, holds the name (OVS keeps port names unique). The veth
    goes, the other port stays, and the retry succeeds once it is gone."""
    netns, uid = _failing_pod(env, "fail-port", {"name": "net1", "interface": "net0"})
    taken = cni.host_ifname(uid, "net0")
    box = env.node.box
    vsctl = ["ovs-vsctl", "--db=" + box.ovs_db]
    box.run(*vsctl + ["add-br", "o4nforeign", "--", "set", "bridge", "o4nforeign", "datapath_type=netdev",
                      "--", "add-port", "o4nforeign", taken, "--", "set", "interface", taken, "type=patch",
                      "options:peer=nowhere"])
    try:
        before = env.node_links()
        code, out, _err = env.cni("ADD", "fail-port", netns, "ctr-fail-port")
        assert code == 1 and out["code"] != 0, out
        _left_nothing(env, netns, "fail-port", before)
        assert box.run(*vsctl + ["port-to-br", taken]).strip() == "o4nforeign", "the other port was removed"
    finally:
        box.run(*vsctl + ["--if-exists", "del-br", "o4nforeign"])
    code, result, _err = env.cni("ADD", "fail-port", netns, "ctr-fail-port")
    assert code == 0, (result, env.log_text())


def test_an_add_ovn_controller_never_installs_leaves_nothing(env):
    """The ovn-installed wait fails: ovn-controller is stopped (SIGSTOP),
    so the port is never installed. The ADD fails when the agent's wait
    ends, the veth and the OVS port go, and once ovn-controller runs again
    the retry succeeds."""
    with open(os.path.join(env.node.box.dir, "ovn-controller.pid")) as handle:
        controller = int(handle.read().strip())
    netns, _uid = _failing_pod(env, "fail-install", {"name": "net1", "interface": "net0"})
    with env.agent_variant(install_seconds=2):
        before = env.node_links()
        os.kill(controller, signal.SIGSTOP)
        try:
            code, out, _err = env.cni("ADD", "fail-install", netns, "ctr-fail-install")
        finally:
            os.kill(controller, signal.SIGCONT)
        assert code == 1 and out["code"] == 102 and "did not install" in out["msg"], out
        _left_nothing(env, netns, "fail-install", before)
    code, result, _err = env.cni("ADD", "fail-install", netns, "ctr-fail-install")
    assert code == 0, (result, env.log_text())


def test_del_removes_a_veth_whose_ovs_port_was_lost(env):
    """DEL finds the container's veths by their mark on the node side, not
    only through OVS: a port OVS no longer has leaves no veth behind."""
    netns = env.pod("lost-port", {"name": "net1", "interface": "net0"})
    code, result, _err = env.cni("ADD", "lost-port", netns, "ctr-lost-port")
    assert code == 0, result
    host = [i["name"] for i in result["interfaces"] if not i.get("sandbox")][0]
    box = env.node.box
    box.run("ovs-vsctl", "--db=" + box.ovs_db, "del-port", "br-int", host)
    assert host in env.node_links()
    code, out, _err = env.cni("DEL", "lost-port", netns, "ctr-lost-port")
    assert code == 0, out
    assert host not in env.node_links() and _pod_links(netns) == ["lo"]


def test_an_add_the_plugin_gave_up_on_is_rolled_back(env):
    """The plugin's timeout ends the ADD for the runtime while the agent
    still waits for the interface list; when it comes, the agent finishes,
    finds nobody to tell, and undoes it. The runtime's retry succeeds."""
    netns, patch = env.unannounced_pod("late", {"name": "net1", "interface": "net0"})
    before = env.node_links()
    watches = env.api.watches
    outcome = {}
    adding = threading.Thread(target=lambda: outcome.update(answer=env.cni("ADD", "late", netns, "ctr-late", timeout=1)))
    adding.start()
    try:
        assert env.api.wait(lambda api: api.watches > watches, 30), env.log_text()
    finally:
        adding.join(30)
    code, out, _err = outcome["answer"]
    assert code == 1 and out["code"] == 11 and "did not answer within 1s" in out["msg"], out
    env.api.set_annotations("default", "late", patch)
    assert env.wait_log("ADD of ctr-late was abandoned by the plugin; rolled back", 30), env.log_text()
    assert env.node_links() == before and _pod_links(netns) == ["lo"] and _ports_of(env, "late") == 0
    code, result, _err = env.cni("ADD", "late", netns, "ctr-late")
    assert code == 0, (result, env.log_text())


def test_twenty_concurrent_adds_and_every_pair_pings(env):
    from concurrent.futures import ThreadPoolExecutor
    names = ["c%d" % i for i in range(20)]
    namespaces = dict((name, env.pod(name, {"name": "net2", "interface": "net0"})) for name in names)
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = dict(zip(names, pool.map(
            lambda name: env.cni("ADD", name, namespaces[name], "ctr-" + name), names)))
    failed = dict((n, r[1]) for n, r in results.items() if r[0] != 0)
    assert not failed, (failed, env.log_text())
    addresses = dict((n, r[1]["ips"][0]["address"].split("/")[0]) for n, r in results.items())
    assert len(set(addresses.values())) == 20
    env.node.wait_hv()
    unreachable = [(a, b) for a in names for b in names if a < b
                   and not ping(namespaces[a], addresses[b], count=1, wait=2)]
    assert unreachable == []


def test_ipam_plugin_with_debians_macvlan(env):
    """Seed 001's flow: macvlan makes the interface, ovn4nfv-ipam gives it
    the address the watcher took from the network serving the provider."""
    # the parent of the macvlans: a veth (this kernel has no dummy device)
    ip("ip", "link", "add", "o4nmaster", "type", "veth", "peer", "name", "o4nmaster-p", netns=env.node.ns)
    for link in ("o4nmaster", "o4nmaster-p"):
        ip("ip", "link", "set", link, "up", netns=env.node.ns)
    macvlan = {"cniVersion": "1.0.0", "name": "macvlan", "type": "macvlan", "master": "o4nmaster",
               "mode": "bridge", "ipam": {"type": "ovn4nfv-ipam", "provider": "macvlan.default",
                                          "server_socket": env.socket}}
    pods = {}
    for name, static in (("m1", None), ("m2", "172.16.30.77")):
        netns = env.pod(name, ipam=[("net1", "macvlan.default", "macvlan-net", static)])
        code, result, err = call("/usr/lib/cni/macvlan", "ADD", macvlan, netns=netns, ifname="net1",
                                 container_id="ctr-" + name,
                                 args="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + name,
                                 node=env.node.ns, extra_env={"CNI_PATH": env.tmp + ":/usr/lib/cni"})
        assert code == 0, (result, err, env.log_text())
        pods[name] = (netns, result["ips"][0]["address"])
    assert pods["m2"][1] == "172.16.30.77/24", "the static request is honoured"
    assert pods["m1"][1].startswith("172.16.30.") and pods["m1"][1] != pods["m2"][1]
    assert ping(pods["m1"][0], "172.16.30.77"), "the two pods reach each other over macvlan"
    reservations = [p for p in env.node.box.rows("nb", "Logical_Switch_Port")
                    if p["external_ids"].get("ovn4nfv-pod-name") in ("m1", "m2")]
    assert len(reservations) == 2, "each address is recorded in OVN"
    # m1 goes: the watcher removes its reservation (the same core call), and
    # its address goes to the next pod
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports
    uid = env.api.pod("default", "m1")["metadata"]["uid"]
    with ovsdb.Database(env.node.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: pod_ports.plan_delete(v, uid), write=True)
    env.api.delete_pod("default", "m1")
    netns = env.pod("m3", ipam=[("net1", "macvlan.default", "macvlan-net", None)])
    code, result, err = call("/usr/lib/cni/macvlan", "ADD", macvlan, netns=netns, ifname="net1", container_id="ctr-m3",
                             args="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=m3", node=env.node.ns,
                             extra_env={"CNI_PATH": env.tmp + ":/usr/lib/cni"})
    assert code == 0, (result, err)
    assert result["ips"][0]["address"] == pods["m1"][1], "the freed address is handed out again"
    # m4's author writes the IPAM annotations themselves, claiming m2's
    # address, before the watcher ran: the agent waits for OVN and refuses
    prefix = "macvlan.default.kubernetes.io/"
    forged = {prefix + "allocated": "true", prefix + "ip_address": "172.16.30.77",
              prefix + "cidr": "172.16.30.0/24", prefix + "gateway": "172.16.30.1"}
    obj = env.create_pod("m4", annotations=forged)
    netns = "/var/run/netns/o4n-%s-m4" % env.node.tag
    outcome = {}
    adding = threading.Thread(target=lambda: outcome.update(answer=call(
        "/usr/lib/cni/macvlan", "ADD", macvlan, netns=netns, ifname="net1", container_id="ctr-m4",
        args="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=m4", node=env.node.ns,
        extra_env={"CNI_PATH": env.tmp + ":/usr/lib/cni"})))
    adding.start()
    try:
        env.watcher_ran(obj, ipam=[("net1", "macvlan.default", "macvlan-net", None)])
    finally:
        adding.join(60)
    code, out, err = outcome["answer"]
    assert code != 0 and "172.16.30.77" in (out or {}).get("msg", "") + err and "104" in json.dumps(out) + err, \
        (out, err, env.log_text())
    assert "172.16.30." not in ip("ip", "-o", "-4", "addr", netns=netns).stdout, "no address was given"


def test_ovs_bridge_attachment_with_vlans(env):
    """The ovs-cni design: access ports on a plain OVS bridge. Two pods on
    VLAN 100 reach each other; a pod on VLAN 200 reaches neither."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources import ovs as ovs_resources
    with ovsdb.Database(env.node.box.ovs_db, ovsdb.OVS_SCHEMA, ovs_resources.Bridge.tables) as db:
        reconcile(ovs_resources.Bridge(), [{"name": "o4nvlan", "datapath_type": "netdev"}], "merged", db)
    pods = {}
    for name, vlan in (("v1", 100), ("v2", 100), ("v3", 200)):
        netns = "o4n-%s-%s" % (env.node.tag, name)
        env.node._add_ns(netns)
        config = {"cniVersion": "1.0.0", "name": "vlans", "type": "ovn4nfv", "mode": "ovs", "bridge": "o4nvlan",
                  "vlan": vlan, "server_socket": env.socket,
                  "ipam": {"type": "host-local", "subnet": "10.77.0.0/24",
                           "dataDir": os.path.join(env.tmp, "ipam-data")}}
        code, result, err = call(env.plugin, "ADD", config, netns="/var/run/netns/" + netns, ifname="net1",
                                 container_id="ctr-" + name, node=env.node.ns,
                                 extra_env={"CNI_PATH": env.tmp + ":/usr/lib/cni"})
        assert code == 0, (result, err, env.log_text())
        pods[name] = (netns, result["ips"][0]["address"].split("/")[0], config)
    tags = env.node.box.run("ovs-vsctl", "--db=" + env.node.box.ovs_db, "--columns=name,tag", "list", "Port")
    assert "100" in tags and "200" in tags
    assert ping(pods["v1"][0], pods["v2"][1]), "same VLAN"
    assert not ping(pods["v1"][0], pods["v3"][1], count=2, wait=1), "another VLAN"
    for name, (netns, _ip, config) in pods.items():
        code, out, err = call(env.plugin, "DEL", config, netns="/var/run/netns/" + netns, ifname="net1",
                              container_id="ctr-" + name, node=env.node.ns,
                              extra_env={"CNI_PATH": env.tmp + ":/usr/lib/cni"})
        assert code == 0, (out, err)
    ports = env.node.box.run("ovs-vsctl", "--db=" + env.node.box.ovs_db, "list-ports", "o4nvlan").split()
    assert ports == [], "DEL removed every port"
    netns = pods["v1"][0]
    for trunk in (["100"], [100], [{"id": True}], [{"minID": 5, "maxID": 2}]):
        config = dict(pods["v1"][2], trunk=trunk)
        config.pop("vlan")
        code, out, _err = call(env.plugin, "ADD", config, netns="/var/run/netns/" + netns, ifname="net1",
                               container_id="ctr-trunk", node=env.node.ns, extra_env={"CNI_PATH": env.tmp})
        assert code == 1 and out["code"] == 7 and "trunk" in out["msg"], (trunk, out)
    for bridge, vlan, words in (("br-int", 100, "not a bridge this node lets pods attach to"),
                                ("br-phy", 100, "ovs_bridges: o4nvlan"), ("o4nvlan", 300, "300 on o4nvlan is outside"),
                                ("o4nvlan", None, "0 on o4nvlan is outside")):
        config = dict(pods["v1"][2], bridge=bridge, vlan=vlan)
        code, out, _err = call(env.plugin, "ADD", config, netns="/var/run/netns/" + netns, ifname="net1",
                               container_id="ctr-bridge", node=env.node.ns, extra_env={"CNI_PATH": env.tmp})
        assert code == 1 and out["code"] == 7 and words in out["msg"], (bridge, vlan, out)
    assert env.node.box.run("ovs-vsctl", "--db=" + env.node.box.ovs_db, "list-ports", "o4nvlan").split() == []
    # An ADD that fails after host-local gave it an address (an MTU the
    # kernel refuses) gives the address back: nothing left, and the retry
    # is given the same first free address.
    data = os.path.join(env.tmp, "ipam-data", "vlans")
    reserved = sorted(name for name in os.listdir(data) if name[0].isdigit())
    config = dict(pods["v1"][2], mtu=9000)
    with env.agent_variant(faults={"mtu": 9000}):
        code, out, _err = call(env.plugin, "ADD", config, netns="/var/run/netns/" + netns, ifname="net1",
                               container_id="ctr-mtu", node=env.node.ns,
                               extra_env={"CNI_PATH": env.tmp + ":/usr/lib/cni"})
    assert code == 1 and "injected for mtu" in out["msg"], out
    reserved_now = sorted(name for name in os.listdir(data) if name[0].isdigit())
    assert reserved_now == reserved, "host-local keeps an address for the failed ADD"
    assert _pod_links(netns) == ["lo"]
    assert env.node.box.run("ovs-vsctl", "--db=" + env.node.box.ovs_db, "list-ports", "o4nvlan").split() == []


def test_called_once_per_attachment_as_multus_does(env):
    netns = env.pod("pm", *TWO)
    for ifname in ("net1", "net0"):
        code, result, err = env.cni("ADD", "pm", netns, "ctr-pm", ifname=ifname, provider="ovnnet.default.ovn")
        assert code == 0, (result, err, env.log_text())
        assert [i["name"] for i in result["interfaces"] if i.get("sandbox")] == [ifname]
    code, out, _err = env.cni("DEL", "pm", netns, "ctr-pm", ifname="net1", provider="ovnnet.default.ovn")
    assert code == 0, out
    links = ip("ip", "-o", "link", netns=netns).stdout
    assert "net0@" in links and "net1@" not in links, "DEL of one attachment keeps the other"


def test_status_with_the_agent_up(env):
    code, out, err = env.cni("STATUS", "none", "", "ctr-status")
    assert code == 0 and out is None and err == ""


def test_an_add_is_served_while_far_more_idle_connections_than_the_cap_are_opened(env):
    """A thread per connection let 1,100 idle connections take every
    descriptor the agent had (issue 32). Now idle connections cost no
    thread, and past the cap the one that waited longest is pushed out with
    a sentence: an ADD that sends its request at once is served."""
    import resource
    import socket
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    count = min(10000, hard - 500)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, count + 400), hard))
    netns = env.pod("crowd", *TWO)
    log_path = os.path.join(env.tmp, "agent.log")
    with env.agent_variant(max_connections=100, request_seconds=60):
        began = time.monotonic()                # the same ADD alone, for the figure printed below
        code, result, err = env.cni("ADD", "crowd", netns, "ctr-crowd")
        alone_ms = (time.monotonic() - began) * 1000
        assert code == 0, (result, err, env.log_text())
        assert env.cni("DEL", "crowd", netns, "ctr-crowd")[0] == 0
        # the descriptors a unit without LimitNOFILE gives: what the crowd exhausted before
        resource.prlimit(env.agent.pid, resource.RLIMIT_NOFILE, (1024, 1024))
        start = os.path.getsize(log_path)
        idle = []
        try:
            for _index in range(count):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                idle.append(sock)
                sock.connect(env.socket)
            began = time.monotonic()
            code, result, err = env.cni("ADD", "crowd", netns, "ctr-crowd")
            print("ADD beside %d idle connections: %.0f ms; alone: %.0f ms" % (
                count, (time.monotonic() - began) * 1000, alone_ms))
            assert code == 0, (result, err, env.log_text())
            idle[0].settimeout(10)
            refusal = json.loads(idle[0].recv(65536).decode())
            assert refusal["error"]["code"] == cni.TRY_AGAIN and "busy" in refusal["error"]["msg"], refusal
        finally:
            for sock in idle:
                sock.close()
        env.cni("DEL", "crowd", netns, "ctr-crowd")
        with open(log_path) as handle:
            handle.seek(start)
            log = handle.read()
    assert "Traceback" not in log
    assert log.count("refused a connection") == count + 1 - 100, "one line per refusal"


def test_a_failure_on_the_node_says_which_interface_and_what_in_words(env):
    """A netlink failure used to reach the runtime as ``(17, 'File exists')``:
    it now names the interface and the step, the errno kept as detail."""
    from pyroute2 import NetNS
    netns = env.pod("speaks", {"name": "net1", "interface": "net0"})
    with NetNS(netns) as pod_ns:                # the pod already has the route the network gives
        pod_ns.link("add", ifname="d0", kind="veth", peer="d1")
        index = pod_ns.link_lookup(ifname="d0")[0]
        pod_ns.link("set", index=index, state="up")
        pod_ns.addr("add", index=index, address="10.20.0.1", prefixlen=16)
    before = env.node_links()
    code, out, _err = env.cni("ADD", "speaks", netns, "ctr-speaks")
    assert code == 1, out
    assert out["msg"].startswith("interface net0: the route to 10.20.0.0/16 via 172.16.1.1: "), out
    assert "File exists" in out["msg"] and out["details"] == "errno 17 (EEXIST)", out
    assert env.node_links() == before, "nothing left behind"


def test_an_interface_configured_by_dhcp_gets_its_mac_and_takes_its_address_from_ovn(env):
    """``dhcp`` in the request: the plugin makes the interface with its MAC,
    up, with no address or route; a DHCP client in the pod gets the port's
    address and the network's MTU from OVN; CHECK asks for no address
    there; and the address a pod holds is the runtime's IP still."""
    netns = env.pod("pdhcp", {"name": "vmnet", "interface": "net0", "dhcp": True, "default_gateway": False},
                    {"name": "net2", "interface": "net1", "default_gateway": True})
    code, added, err = env.cni("ADD", "pdhcp", netns, "ctr-dhcp")
    assert code == 0, (added, err, env.log_text())
    assert [i["name"] for i in added["interfaces"] if i.get("sandbox")] == ["net0", "net1"]
    # the runtime's IP is net1's, the one the pod holds
    assert [ip_["address"].startswith("172.16.2.") for ip_ in added["ips"]] == [True]
    entry = [e for e in json.loads(env.api.pod("default", "pdhcp")["metadata"]["annotations"]["ovnIfaceList"])
             if e["interface"] == "net0"][0]
    link = json.loads(ip("ip", "-j", "addr", "show", "net0", netns=netns).stdout)[0]
    assert link["address"] == entry["mac_address"] and "UP" in link["flags"]
    # its network's MTU, which its DHCP gives too (the agent's own is another)
    assert entry["mtu"] == 1400 and link["mtu"] == 1400
    assert [a for a in link["addr_info"] if a["family"] == "inet"] == []
    assert "net0" not in ip("ip", "route", netns=netns).stdout
    code, out, _err = env.cni("CHECK", "pdhcp", netns, "ctr-dhcp", prevResult=added)
    assert code == 0, out
    env.node.wait_hv()
    lease = udhcpc(netns, ifname="net0")
    assert lease is not None and lease["ip"] == entry["ip_address"].split("/")[0], lease
    # default_gateway: false: its DHCP gives no router (net1 carries the default route)
    assert lease["mtu"] == "1400" and "router" not in lease
    code, out, _err = env.cni("DEL", "pdhcp", netns, "ctr-dhcp")
    assert code == 0, out


def test_a_pod_whose_interfaces_all_take_their_address_inside_starts_and_checks(env):
    netns = env.pod("pguest", {"name": "vmnet", "interface": "net0", "dhcp": True})
    code, added, err = env.cni("ADD", "pguest", netns, "ctr-guest")
    assert code == 0, (added, err, env.log_text())
    entry = json.loads(env.api.pod("default", "pguest")["metadata"]["annotations"]["ovnIfaceList"])[0]
    # the runtime's IP: the address the guest is given, without an index
    assert added["ips"] == [{"address": entry["ip_address"], "gateway": "172.16.60.1"}]
    assert [a for a in json.loads(ip("ip", "-j", "addr", "show", "net0", netns=netns).stdout)[0]["addr_info"]
            if a["family"] == "inet"] == []
    code, out, _err = env.cni("CHECK", "pguest", netns, "ctr-guest", prevResult=added)
    assert code == 0, out
    code, out, _err = env.cni("DEL", "pguest", netns, "ctr-guest")
    assert code == 0, out


def test_a_vm_s_launchers_attach_the_vm_s_port_one_after_another(env):
    """A KubeVirt launcher's interface is the VM's port (iface-id), bound
    by OVN on this node; a new launcher of the same VM, after the first
    is gone, attaches the same port with the same MAC and IP."""
    vmi_uid = "7c0c7a3e-0000-4000-8000-000000000001"
    labels = {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": vmi_uid}
    owners = [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "vm1", "uid": vmi_uid,
               "controller": True}]
    request = {"name": "vmnet", "interface": "net0", "dhcp": True}
    told = []
    env.node.wait_hv()
    for attempt, name in enumerate(("virt-launcher-vm1-a", "virt-launcher-vm1-b")):
        netns, patch = env.watcher_ran(env.create_pod(name, request, labels=labels, owners=owners), request)
        env.api.set_annotations("default", name, patch)
        code, added, err = env.cni("ADD", name, netns, "ctr-vm-%d" % attempt)
        assert code == 0, (added, err, env.log_text())
        [iface] = [i for i in env.node.box.rows("ovs", "Interface") if i["external_ids"].get("iface-id")
                   == "default_vm:vm1_net0"]
        assert iface["external_ids"]["ovn4nfv-pod-uid"] == env.api.pod("default", name)["metadata"]["uid"]
        [binding] = [b for b in env.node.box.rows("sb", "Port_Binding") if b["logical_port"] == "default_vm:vm1_net0"]
        assert binding["chassis"], "OVN bound the VM's port on this node"
        told.append(json.loads(patch["ovnIfaceList"])[0])
        if attempt == 0:
            # a pod that claims the VM (its labels, its VMI as owner, its interface list) while the watcher
            # lets only the launcher attach the VM's port: refused, and no OVS port names the VM's
            env.node._add_ns("o4n-%s-posing" % env.node.tag)
            netns_p = "/var/run/netns/o4n-%s-posing" % env.node.tag
            env.api.create_pod("default", "posing", patch, labels=labels, owners=owners)
            with env.agent_variant(binding_seconds=2):
                code, out, _err = env.cni("ADD", "posing", netns_p, "ctr-posing")
            assert code != 0 and out["code"] == 11 and "lets this launcher" in out["msg"], out
            assert len([i for i in env.node.box.rows("ovs", "Interface")
                        if i["external_ids"].get("iface-id") == "default_vm:vm1_net0"]) == 1
        code, out, _err = env.cni("DEL", name, netns, "ctr-vm-%d" % attempt)
        assert code == 0, out
    assert (told[0]["mac_address"], told[0]["ip_address"]) == (told[1]["mac_address"], told[1]["ip_address"])


def test_a_trunk_carries_its_vlans_as_ovn_nested_ports(env):
    """A VNF's trunk (issue 35): ``trunk0`` on net1, and net2 as VLAN 10 on
    it. The node makes one interface; the VLAN is OVN's nested port (its
    own address, port security and switch), which the VNF reaches by
    tagging its frames 10. An untagged frame is net1's; a frame tagged 10
    with the VLAN's own addresses reaches a pod of net2, one with another
    address or another VID does not; net2's answer comes back tagged 10."""
    trunk = env.pod("tr", {"name": "net1", "interface": "trunk0", "vlans": [{"name": "net2", "vlan": 10}]})
    peer = env.pod("tp", {"name": "net2", "interface": "net0"})
    code, result, err = env.cni("ADD", "tr", trunk, "ctr-tr")
    assert code == 0, (result, err, env.log_text())
    assert [i["name"] for i in result["interfaces"] if i.get("sandbox")] == ["trunk0"]
    assert _pod_links(trunk) == ["lo", "trunk0"], "no device for the VLAN: the pod's datapath tags its frames"
    code, peer_result, err = env.cni("ADD", "tp", peer, "ctr-tp")
    assert code == 0, (peer_result, err, env.log_text())
    listed = ann.parse_iface_list(env.api.pod("default", "tr")["metadata"]["annotations"][ann.IFACE_LIST])
    child = next(e for e in listed if e["interface"] == "trunk0.10")
    assert (child["parent"], child["vlan"]) == ("trunk0", 10) and child["ip_address"].startswith("172.16.2.")
    binding = env.node.box.sbctl("--bare", "--columns=parent_port,tag", "find", "port_binding",
                                 "logical_port=default_tr_trunk0.10").split()
    assert binding == ["default_tr_trunk0", "10"], binding
    env.node.wait_hv()
    mine = dict(mac=child["mac_address"], ip=child["ip_address"].split("/")[0])
    theirs = dict(mac=next(i["mac"] for i in peer_result["interfaces"] if i.get("sandbox")),
                  ip=peer_result["ips"][0]["address"].split("/")[0])
    assert ping(trunk, "172.16.1.1"), "untagged, the trunk is net1's interface: its gateway answers"

    listener = listening(peer, "net0", "vlan10", "sentinel")
    frame = dict(kind="udp", src_mac=mine["mac"], dst_mac=theirs["mac"], src_ip=mine["ip"], dst_ip=theirs["ip"])
    ip("python3", FRAMES, "send", "trunk0", json.dumps([
        dict(frame, payload="vlan10", vlan=10), dict(frame, payload="wrong-vid", vlan=11),
        dict(frame, payload="wrong-ip", vlan=10, src_ip="172.16.2.250"),
        dict(frame, payload="sentinel", vlan=10)]), netns=trunk)
    payloads = [f.get("payload") for f in heard(listener)]
    assert "vlan10" in payloads and "sentinel" in payloads, payloads
    assert "wrong-vid" not in payloads and "wrong-ip" not in payloads, payloads

    listener = listening(trunk, "trunk0", "back")
    ip("python3", FRAMES, "send", "net0", json.dumps([dict(
        kind="udp", src_mac=theirs["mac"], dst_mac=mine["mac"], src_ip=theirs["ip"], dst_ip=mine["ip"],
        payload="back")]), netns=peer)
    back = [f for f in heard(listener) if f.get("payload") == "back"]
    assert back and back[0].get("vlan") == 10, back
    code, out, _err = env.cni("CHECK", "tr", trunk, "ctr-tr", prevResult=result)
    assert code == 0, out

    # a list that calls the VLAN a plain interface (for a veth of its own) is not what OVN holds
    assert env.cni("DEL", "tr", trunk, "ctr-tr")[0] == 0
    forged = [dict((k, v) for k, v in e.items() if k not in ("parent", "vlan")) for e in listed]
    env.api.set_annotations("default", "tr", ann.output_annotations(forged))
    before = env.node_links()
    code, out, _err = env.cni("ADD", "tr", trunk, "ctr-tr")
    assert code == 1 and out["code"] == 104 and "VLAN 10 of default_tr_trunk0" in out["msg"], out
    _nothing_made(env, trunk, before, "tr")
