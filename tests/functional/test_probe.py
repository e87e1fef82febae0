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
    assert "servers not listening on %d: host: OSError" % port in proc.stderr


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
                          "collector": False}]
    finally:
        subprocess.run(["umount", pod_path], check=False, timeout=30, stderr=subprocess.DEVNULL)
        if os.path.exists(pod_path):
            os.unlink(pod_path)
        netns.remove(runtime_name)
