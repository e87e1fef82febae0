"""verify.yml's probe: its TCP servers, on loopback in this process's
namespace. A second ``serve`` must replace the first: left running, the
first keeps the port and ends its own time in the middle of the second
run's checks (a topology verify that failed only when two runs were close)."""

import importlib.util
import json
import os
import socket
import subprocess
import sys

import pytest

from tests.harness.sandbox import Sandbox

PROBE = os.path.join(os.path.dirname(__file__), "..", "..", "playbooks", "files", "probe.py")
_SPEC = importlib.util.spec_from_file_location("probe", PROBE)
probe_module = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(probe_module)


@pytest.fixture
def probe(tmp_path):
    env = dict(os.environ, OVN4NFV_PROBE_PIDS=str(tmp_path / "pids"))

    def run(*args, check=True):
        return subprocess.run([sys.executable, PROBE] + list(args), env=env, check=check, timeout=60,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    yield run, tmp_path / "pids"
    run("stop", check=False)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answer(port):
    with socket.create_connection(("127.0.0.1", port), timeout=3) as conn:
        conn.settimeout(3)
        return conn.recv(100).decode()


def test_a_second_serve_replaces_the_first(probe):
    run, pids = probe
    port = free_port()
    run("serve", str(port), "--seconds", "600")
    first = [int(line) for line in pids.read_text().split()]
    assert answer(port) == "seen 127.0.0.1 host\n"

    run("serve", str(port), "--seconds", "600")
    second = [int(line) for line in pids.read_text().split()]
    assert set(first).isdisjoint(second) and len(second) == 1
    assert not any(probe_module.running(pid) for pid in first)
    assert answer(port) == "seen 127.0.0.1 host\n"

    assert '"stopped": 1, "running": 0' in run("stop").stdout
    with pytest.raises(ConnectionRefusedError):
        answer(port)


def test_serve_fails_naming_a_server_that_cannot_listen(probe):
    run, _pids = probe
    with socket.socket() as holder:         # a port held by someone else, not a probe
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        proc = run("serve", str(port), "--seconds", "600", check=False)
    assert proc.returncode != 0
    assert "servers not listening: host:%d: OSError" % port in proc.stderr


def test_check_reports_each_link(probe):
    run, _pids = probe
    served, silent = free_port(), free_port()
    run("serve", str(served), "--seconds", "600")
    links = [{"dst": "127.0.0.1", "port": served, "name": "served"},
             {"dst": "127.0.0.1", "port": silent, "name": "silent"}]
    results = dict((r["name"], r) for r in json.loads(run("check", json.dumps(links)).stdout))
    assert results["served"]["ping"] and results["served"]["tcp"]
    assert results["served"]["seen"] == "127.0.0.1"
    assert results["silent"]["ping"] and not results["silent"]["tcp"]
    assert "refused" in results["silent"]["error"].lower()


def test_a_namespace_with_two_names_is_one_pod_under_the_pods_name():
    """containerd names a pod's namespace ``cni-<id>`` and the lab's kubelet
    binds the pod's own name onto it: ``pods`` lists it once, as the pod
    (two entries made every ``serve`` fail with 'Address already in use')."""
    from pyroute2 import NetNS, netns
    tag = "%05d" % (os.getpid() % 100000)
    runtime_name, pod_name = "cni-ovn4nfv-probe-" + tag, "probe-pod-" + tag
    netns.create(runtime_name)
    pod_path = os.path.join(probe_module.NETNS_DIR, pod_name)
    try:
        with NetNS(runtime_name) as ns:
            ns.link("add", ifname="d0", kind="veth", peer="d1")
            index = ns.link_lookup(ifname="d0")[0]
            ns.addr("add", index=index, address="10.250.77.9", prefixlen=24)
            ns.link("set", index=index, state="up")
        open(pod_path, "w").close()
        subprocess.run(["mount", "--bind", os.path.join(probe_module.NETNS_DIR, runtime_name), pod_path],
                       check=True, timeout=30)
        found = [p for p in probe_module.pods([{"name": "probe-net", "subnet": "10.250.77.0/24"}])
                 if p["netns"] in (runtime_name, pod_name)]
        assert found == [{"netns": pod_name, "networks": {"probe-net": {"ip": "10.250.77.9", "interface": "d0"}},
                          "collector": False, "namespace": None}]
    finally:
        subprocess.run(["umount", pod_path], check=False, timeout=30, stderr=subprocess.DEVNULL)
        if os.path.exists(pod_path):
            os.unlink(pod_path)
        netns.remove(runtime_name)


@pytest.fixture
def pod_netns():
    """A network namespace with its loopback up, as a pod's; removed after."""
    from pyroute2 import NetNS, netns
    name = "probe-pol-%05d" % (os.getpid() % 100000)
    netns.create(name)
    try:
        with NetNS(name) as ns:
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
        yield name
    finally:
        netns.remove(name)


def test_a_policy_server_listens_on_its_own_ports_and_each_try_is_said(probe, pod_netns):
    """``serve`` with ``NS:PORTS`` listens in NS on each of PORTS; a link
    with an ``expect`` is TCP only, each try's outcome said: an allowed one
    stops at the first answer, a refused one (a reset: the packet got
    there) is tried to the end."""
    run, pids = probe
    run("serve", "7777", "--netns", pod_netns + ":7777,7778", "--seconds", "600")
    assert len(pids.read_text().split()) == 2
    links = [{"row": 0, "src_netns": pod_netns, "dst": "127.0.0.1", "port": 7777, "expect": "allowed"},
             {"row": 1, "src_netns": pod_netns, "dst": "127.0.0.1", "port": 7778, "expect": "denied"},
             {"row": 2, "src_netns": pod_netns, "dst": "127.0.0.1", "port": 7779, "expect": "denied"}]
    results = dict((r["row"], r) for r in json.loads(run("check", json.dumps(links)).stdout))
    assert (results[0]["tries"], results[0]["seen"]) == (["answered"], "127.0.0.1")
    assert results[1]["tries"] == ["answered"] * probe_module.ATTEMPTS, "a denied row tries to the end"
    assert results[2]["tries"] == ["refused"] * probe_module.ATTEMPTS and results[2]["seen"] is None
    proc = run("serve", "7777", "--netns", pod_netns + ":77x7", check=False)
    assert proc.returncode != 0 and "serve: '77x7' is no port" in proc.stderr


def test_no_word_back_is_a_timeout(monkeypatch):
    """A connection that gets no word back in 3 s (here: a server that never
    answers) is a ``timeout``, what a policy's drop gives."""
    monkeypatch.setattr(probe_module, "ATTEMPTS", 1)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        result = probe_module.policed({"dst": "127.0.0.1", "port": silent.getsockname()[1], "expect": "denied"})
    assert result == {"tries": ["timeout"], "seen": None}


def test_a_pods_kubernetes_namespace_is_read_from_its_ovs_port(pod_netns):
    """The node agent marks a pod's OVS interface with ``ovn4nfv-pod:
    <namespace>/<name>``: ``pods`` says each pod's namespace from the port
    its interface is the peer of (verify.yml's matrix takes the
    namespaces it is told)."""
    box = Sandbox(ovn=False, vswitchd=False)
    host_end = "pvh%05d" % (os.getpid() % 100000)
    try:
        subprocess.run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", pod_netns],
                       check=True, timeout=30)
        subprocess.run(["ip", "-n", pod_netns, "addr", "add", "10.250.78.9/24", "dev", "eth0"], check=True, timeout=30)
        box.vsctl("add-br", "br-probe", "--", "add-port", "br-probe", host_end, "--", "set", "Interface", host_end,
                  "external_ids:ovn4nfv-pod=tenant-x/probe-pod")
        found = subprocess.run([sys.executable, PROBE, "pods", json.dumps([{"name": "n", "subnet": "10.250.78.0/24"}])],
                               env=dict(os.environ, OVN4NFV_PROBE_OVS_DB=box.ovs_db), check=True, timeout=60,
                               stdout=subprocess.PIPE, universal_newlines=True).stdout
        assert [p for p in json.loads(found) if p["netns"] == pod_netns] == [{
            "netns": pod_netns, "networks": {"n": {"ip": "10.250.78.9", "interface": "eth0"}},
            "collector": False, "namespace": "tenant-x"}]
    finally:
        subprocess.run(["ip", "link", "del", host_end], check=False, timeout=30, stderr=subprocess.DEVNULL)
        box.stop()
