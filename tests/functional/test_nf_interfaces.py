"""What network functions need from an interface (issue 37), on a real
data plane: one node (ovs-vswitchd netdev, ovn-controller), the watcher as
a process with the API stand-in, pods' namespaces attached with the
addresses the watcher wrote. A VRRP pair (Debian's keepalived) holds a
virtual IP in turn through OVN's virtual port; a pod that announces it
without being allowed is dropped; a virtual router forwards between two
networks only where its network lets its namespace relax port security;
the audit finds and tightens a port made looser by hand. Everything is
checked from outside the watcher: the NB and SB, the pods' Events, the
data plane."""

import json
import os
import re
import signal
import subprocess

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import audit, networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from tests.harness.dataplane import Node, ip, ns_name, ping
from tests.harness.watcher_env import Cluster, ovn_network

VIP = "10.50.0.250"
NETWORKS = [
    {"name": "vnf-a", "subnet": "10.50.0.0/24", "relaxed_port_security": [{"namespace": "vnf", "level": "mac"}],
     "virtual_ips": [{"address": VIP, "namespaces": ["vnf"]}]},
    {"name": "vnf-b", "subnet": "10.51.0.0/24", "relaxed_port_security": [{"namespace": "vnf", "level": "mac"}]},
    {"name": "default-net", "subnet": "10.240.0.0/16"},
]
KEEPALIVED = """global_defs {
  enable_script_security
}
vrrp_instance nf {
  state %(state)s
  interface eth0
  virtual_router_id 51
  priority %(priority)d
  advert_int 1
  virtual_ipaddress {
    %(vip)s/24
  }
}
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory, collections_path):
    tmp = str(tmp_path_factory.mktemp("nf"))
    node = Node()
    env = None
    try:
        node.join()
        env = Cluster(tmp, collections_path, networks=NETWORKS, box=node.box)
        env.api.create_namespace("vnf", {})
        env.api.create_namespace("other", {})
        env.tmp, env.node = tmp, node
        yield env
    finally:
        if env is not None:
            env.stop()
        node.stop()


def pod(env, namespace, name, *entries, routes=()):
    """A pod asking for ``entries``, served by the watcher, its namespace
    attached with the addresses it was told: ``(netns, [entries told])``."""
    env.api.create_pod(namespace, name, ovn_network(*entries))
    told = env.annotated(namespace, name)
    netns = None
    for entry in told:
        netns = env.node.attach(name if netns is None else "%s%s" % (name, entry["interface"]), "br-int",
                                entry["mac_address"], entry["ip_address"], iface_id="%s_%s_%s" % (
                                    namespace, name, entry["interface"]),
                                routes=routes if netns is None else (), ifname=entry["interface"], into=netns)
    return netns, told


def port(env, name):
    """The NB's switch port ``name``, its sets as lists."""
    row = dict(next(p for p in env.box.rows("nb", "Logical_Switch_Port") if p["name"] == name))
    for column in ("port_security", "addresses"):
        row[column] = [row[column]] if isinstance(row[column], str) else list(row[column])
    return row


def wait_nb(env, predicate, timeout=30):
    """Block, woken by the NB's updates, until ``predicate(view)``."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, ("Logical_Switch", "Logical_Switch_Port")) as db:
        return db.wait_for(lambda idl: predicate(View(idl)), timeout)


def holder(env, timeout=30, wanted=None):
    """The port the SB binds the virtual IP to (``virtual_parent``), once
    it is ``wanted`` when given; woken by the SB's updates."""
    def bound(idl):
        for row in idl.tables["Port_Binding"].rows.values():
            if row.logical_port == "vip-vnf-a-" + VIP:
                parent = row.virtual_parent[0] if row.virtual_parent else None
                return parent if (wanted is None and parent) or (wanted and parent == wanted) else None
        return None
    with ovsdb.Database(env.box.sb_db, ovsdb.SB_SCHEMA, ("Port_Binding",)) as db:
        return db.wait_for(bound, timeout)


class Keepalived:
    """keepalived's VRRP in a pod's namespace, stopped (SIGTERM) when done."""

    def __init__(self, env, netns, name, state, priority):
        base = os.path.join(env.tmp, name)
        with open(base + ".conf", "w") as handle:
            handle.write(KEEPALIVED % {"state": state, "priority": priority, "vip": VIP})
        self.log = open(base + ".log", "w+")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns_name(netns), "keepalived", "--dont-fork", "--log-console", "--vrrp",
             "--use-file", base + ".conf", "--pid", base + ".pid", "--vrrp_pid", base + ".vrrp.pid",
             # its children's too: two keepalived in one mount namespace must not share /run's (2.3 refuses)
             "--checkers_pid", base + ".checkers.pid", "--bfd_pid", base + ".bfd.pid"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


def reasons(env, name):
    return [e["reason"] for e in env.events_for(name)]


def test_a_virtual_ip_moves_to_the_backup_and_no_one_else_may_take_it(lab):
    env = lab
    entry = {"name": "vnf-a", "interface": "eth0", "virtual_ips": [VIP]}
    r1 = pod(env, "vnf", "r1", entry)[0]
    r2 = pod(env, "vnf", "r2", entry)[0]
    client = pod(env, "vnf", "cli", {"name": "vnf-a", "interface": "eth0"})[0]
    rogue, told = pod(env, "other", "x", entry)
    # the pod that asked without being allowed: said, and its port answers for its own address alone
    assert env.api.wait(lambda _api: "VirtualIPRefused" in reasons(env, "x"), 30), env.log_text()
    assert VIP not in " ".join(port(env, "other_x_eth0")["port_security"])
    assert VIP in " ".join(port(env, "vnf_r1_eth0")["port_security"])
    parents = wait_nb(env, lambda v: getattr(v.lookup("Logical_Switch_Port", "vip-vnf-a-" + VIP), "options", {}).get(
        "virtual-parents") == "vnf_r1_eth0,vnf_r2_eth0")
    assert parents, port(env, "vip-vnf-a-" + VIP)
    env.node.wait_hv()
    master, backup = Keepalived(env, r1, "r1", "MASTER", 200), Keepalived(env, r2, "r2", "BACKUP", 100)
    try:
        assert holder(env) == "vnf_r1_eth0", open(os.path.join(env.tmp, "r1.log")).read()
        assert ping(client, VIP), "the VIP answers from the master"
        steady = subprocess.Popen(["ip", "netns", "exec", ns_name(client), "ping", "-n", "-i", "0.01", "-w", "60",
                                   VIP], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        try:
            assert ping(client, VIP, count=1), "steady"
            master.stop()           # the master is stopped
            assert holder(env, wanted="vnf_r2_eth0"), "OVN binds the VIP to the backup"
            assert ping(client, VIP, count=3), "the VIP answers from the backup"
        finally:
            steady.send_signal(signal.SIGINT)
            out, _err = steady.communicate(timeout=30)
        answered = sorted(set(int(n) for n in re.findall(r"icmp_seq=(\d+)", out)))
        sent = answered[-1] if answered else 0
        gap = max([b - a for a, b in zip(answered, answered[1:])] + [1])
        print("vip: failover_ms=%d lost=%d" % ((gap - 1) * 10, sent - len(answered)))
        assert sent > 50 and len(answered) < sent + 1
        neighbours = ip("ip", "neigh", "show", VIP, netns=client).stdout
        assert told and port(env, "vnf_r2_eth0")["addresses"][0].split()[0] in neighbours
    finally:
        master.stop()
        backup.stop()
    # no holder left: the pod that was not allowed announces the VIP (its address, a
    # gratuitous ARP), and is dropped: the SB binds the VIP to no one new, the client gets no answer
    ip("ip", "neigh", "flush", "dev", "eth0", netns=client)
    ip("ip", "addr", "add", VIP + "/24", "dev", "eth0", netns=rogue)
    announce(rogue, told[0]["mac_address"])
    assert not ping(client, VIP, count=3), "a pod not allowed the VIP answers for it"
    assert holder(env, 5) == "vnf_r2_eth0", "the VIP was bound to the pod not allowed it"
    ip("ip", "addr", "del", VIP + "/24", "dev", "eth0", netns=rogue)
    # the same done by a pod allowed it is answered: what dropped the other was its port security
    ip("ip", "addr", "add", VIP + "/24", "dev", "eth0", netns=r1)
    announce(r1, port(env, "vnf_r1_eth0")["addresses"][0].split()[0])
    assert holder(env, wanted="vnf_r1_eth0"), "an allowed pod's announcement binds the VIP"
    assert ping(client, VIP, count=3), "an allowed pod answers for the VIP"
    ip("ip", "addr", "del", VIP + "/24", "dev", "eth0", netns=r1)


def announce(netns, mac):
    """A gratuitous ARP reply from ``netns``'s eth0: ``mac`` claims the VIP."""
    frames = os.path.join(os.path.dirname(os.path.dirname(__file__)), "harness", "frames.py")
    ip("python3", frames, "send", "eth0", json.dumps([{
        "kind": "arp", "src_mac": mac, "dst_mac": "ff:ff:ff:ff:ff:ff", "src_ip": VIP, "dst_ip": VIP}]), netns=netns)


def test_a_virtual_router_forwards_only_where_its_network_allows(lab):
    env = lab
    router, told = pod(env, "vnf", "vr", {"name": "vnf-a", "interface": "eth0", "port_security": "mac"},
                       {"name": "vnf-b", "interface": "eth1", "port_security": "mac"})
    strict, told2 = pod(env, "other", "vs", {"name": "vnf-a", "interface": "eth0", "port_security": "mac"},
                        {"name": "vnf-b", "interface": "eth1", "port_security": "mac"})
    for netns in (router, strict):
        ip("sysctl", "-qw", "net.ipv4.ip_forward=1", netns=netns)
    via = dict((e["interface"], e["ip_address"].split("/")[0]) for e in told)
    via2 = dict((e["interface"], e["ip_address"].split("/")[0]) for e in told2)
    left, lt = pod(env, "vnf", "ha", {"name": "vnf-a", "interface": "eth0"}, routes=[("10.51.0.0/24", via["eth0"])])
    right, rt = pod(env, "vnf", "hb", {"name": "vnf-b", "interface": "eth0"}, routes=[("10.50.0.0/24", via["eth1"])])
    target = rt[0]["ip_address"].split("/")[0]
    assert port(env, "vnf_vr_eth0")["port_security"] == [told[0]["mac_address"]], "MAC-only where allowed"
    assert env.api.wait(lambda _api: "PortSecurityRefused" in reasons(env, "vs"), 30), env.log_text()
    assert len(port(env, "other_vs_eth0")["port_security"][0].split()) > 1, "full outside the allowlist"
    env.node.wait_hv()
    assert ping(left, target), "the virtual router forwards where its network allows"
    # the same hosts through the pod outside the allowlist: its forwarded packets are dropped
    for netns, dst, hop in ((left, "10.51.0.0/24", via2["eth0"]), (right, "10.50.0.0/24", via2["eth1"])):
        ip("ip", "route", "replace", dst, "via", hop, netns=netns)
    assert ping(strict, target) and ping(strict, lt[0]["ip_address"].split("/")[0]), "it reaches both itself"
    assert not ping(left, target), "a router outside the allowlist forwards"
    for netns, dst, hop in ((left, "10.51.0.0/24", via["eth0"]), (right, "10.50.0.0/24", via["eth1"])):
        ip("ip", "route", "replace", dst, "via", hop, netns=netns)
    assert ping(left, target)
    # the operator takes the allowance back: the pods that had it lose it
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: vn.plan_networks(v, [("vnf-b", vn.check_network(
            {"name": "vnf-b", "relaxed_port_security": []}, "vnf-b"))], "merged", "ovn"), write=True)
    assert wait_nb(env, lambda v: len(v.lookup("Logical_Switch_Port", "vnf_vr_eth1").port_security[0].split()) > 1)
    env.node.wait_hv()
    assert not ping(left, target), "forwarding stops once the network no longer allows it"


def test_the_audit_finds_a_port_made_looser_by_hand_and_tightens_it(lab):
    env = lab
    _netns, told = pod(env, "other", "lo1", {"name": "vnf-a", "interface": "eth0"})
    strict = port(env, "other_lo1_eth0")["port_security"]
    assert env.terminate() == 0     # the watcher would mend it first: the audit is what is tested
    env.box.nbctl("lsp-set-port-security", "other_lo1_eth0", told[0]["mac_address"])
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, audit.NB_TABLES) as db:
        found = [f for f in execute(db, lambda v: audit.audit(v)[0], write=False)
                 if f["class"] == "port_security_looser"]
        assert [f["objects"] for f in found] == [["other_lo1_eth0"]], found
        execute(db, lambda v: audit.plan_repair(v, found), write=True)
        assert not [f for f in execute(db, lambda v: audit.audit(v)[0], write=False)
                    if f["class"] == "port_security_looser"]
    assert port(env, "other_lo1_eth0")["port_security"] == strict
