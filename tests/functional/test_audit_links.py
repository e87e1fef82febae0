"""The node audit's tunnel class on real netlink: in a network namespace
of the test's own, a device holding the encapsulation IP is found down,
brought up by the repair's netlink part, and found up; an IP no device
holds is said so."""

import json
import subprocess
import sys
import uuid

import pytest

PROBE = """
import json, sys
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import host_audit
action = sys.argv[1]
if action == "up":
    print(json.dumps(host_audit.bring_up(["o4n-encap"], True).operations()))
else:
    print(json.dumps(host_audit.encap_links(["10.250.0.1", "10.250.0.9"])))
"""


@pytest.fixture
def node_ns():
    name = "o4n-audit-" + uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for argv in (["link", "add", "o4n-encap", "type", "veth", "peer", "name", "o4n-peer"],
                     ["addr", "add", "10.250.0.1/24", "dev", "o4n-encap"]):
            subprocess.run(["ip", "-n", name] + argv, check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)


def probe(ns, action, collections_path):
    proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", PROBE, action],
                          env={"PYTHONPATH": collections_path, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def state(ns):
    out = subprocess.run(["ip", "-n", ns, "-j", "link", "show", "o4n-encap"], stdout=subprocess.PIPE, check=True)
    return "UP" in json.loads(out.stdout)[0]["flags"]


def test_tunnel_links_found_down_brought_up_and_found_up(node_ns, collections_path):
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import host_audit

    links = probe(node_ns, "read", collections_path)
    assert [tuple(link) for link in links] == [("10.250.0.1", "o4n-encap", False), ("10.250.0.9", None, False)]
    found = host_audit.audit_tunnels("worker2", [tuple(link) for link in links], {"o4n-encap"})
    assert [(f["class"], f["objects"], f["repair"]) for f in found] == [
        ("tunnel_down", ["o4n-encap"], "bring o4n-encap up on worker2"),
        ("tunnel_down", ["10.250.0.9"], None)]
    assert "holds the encapsulation IP 10.250.0.1, is down" in found[0]["message"]
    assert not state(node_ns)
    assert probe(node_ns, "up", collections_path) == ["set link o4n-encap up"]
    assert state(node_ns)
    assert [tuple(link) for link in probe(node_ns, "read", collections_path)][0] == ("10.250.0.1", "o4n-encap", True)
    # a device that is not one of this Open vSwitch's is reported, never touched
    assert host_audit.audit_tunnels("worker2", [("10.250.0.1", "o4n-encap", False)], set())[0]["repair"] is None


def test_controller_version_read_over_its_control_socket_and_judged(collections_path):
    """A real ovn-controller's version, read the way the node's audit reads
    it (its control socket), agrees with what the binary says; judged
    against a northd release of another span, unpinned and then pinned as
    the node's Open vSwitch says."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import host_audit
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View
    from tests.harness.dataplane import Node

    node = Node()
    try:
        box = node.box
        box.vsctl("set", "open", ".", "external_ids:system-id=chassis1", "external_ids:ovn-remote=" + box.sb_db,
                  "external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip=127.0.0.1")
        assert host_audit.controller_version(box.dir) is None, "none runs yet"
        node.start_controller()
        box.run("ovs-vsctl", "--db=" + box.ovs_db, "--timeout=30", "wait-until", "bridge", "br-int")
        running = host_audit.controller_version(box.dir)
        binary = box.run("ovn-controller", "--version").splitlines()[0]
        assert running.splitlines()[0] == binary, (running, binary)
        mine = "%02d.%02d" % releases_of(running)
        newer = "%d.03.0" % (releases_of(running)[0] + 4)      # a northd two LTS releases on

        def judged():
            with ovsdb.Database(box.ovs_db, ovsdb.OVS_SCHEMA, host_audit.TABLES) as db:
                return db.read(lambda idl: host_audit.audit_versions(View(idl), "node1", newer, running))
        [found] = judged()
        assert (found["class"], found["severity"], found["objects"]) == ("version_skew", "error", ["node1"])
        assert "ovn-controller %s is older than ovn-northd" % mine in found["message"]
        box.vsctl("set", "open", ".", "external_ids:ovn-match-northd-version=true")
        [found] = judged()
        assert found["severity"] == "warning" and "is pinned to ovn-northd's version" in found["message"]
        with ovsdb.Database(box.ovs_db, ovsdb.OVS_SCHEMA, host_audit.TABLES) as db:
            assert db.read(lambda idl: host_audit.audit_versions(View(idl), "node1", running, running)) == []
    finally:
        node.stop()


def releases_of(text):
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import releases
    return releases.release(text)
