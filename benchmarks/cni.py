"""ADD and DEL of a pod with two OVN interfaces, 100 times, through the
real plugin executable and node agent; ADD includes waiting until
ovn-controller has installed the ports.

Baseline, in the same run: Debian's reference bridge plugin with
host-local IPAM doing a one-interface ADD, 100 times. Pod objects and
namespaces are made outside the timing for both.

Beside it, in the same run, the same ADD through a real container runtime:
a private containerd (Debian's, its CRI plugin; ``tests/harness/containerd_env.py``)
in the node's namespace, its ``RunPodSandbox`` for a pod of the same two
interfaces, 100 times (each sandbox stopped and removed outside the timing):
what the runtime adds on top of the plugin (its network namespace, libcni,
the sandbox container through runc and its shim).

Before it, where an ADD's time goes: the node agent's own account of each
ADD (its log line: the pod's interface list from the API, the check
against the southbound, netlink, the OVS port, the wait for
``ovn-installed``), and the plugin executable's own start (a ``VERSION``
call, which never reaches the agent), as medians.

Last line: ``add_p50_ms=<a> add_p99_ms=<b> del_p50_ms=<c> baseline_add_p50_ms=<d> cri_add_p50_ms=<e>``
"""

import os
import re
import shutil
import tempfile
import time

from benchmarks.common import Ansible, percentile

ROUNDS = 100


def timed(function):
    start = time.monotonic()
    out = function()
    return (time.monotonic() - start) * 1000, out


def main():
    ansible = Ansible()      # only for its collection path
    collections = ansible.collections
    from tests.harness.cni_env import Env
    from tests.harness.cni_runtime import call
    from tests.harness.containerd_env import Containerd
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-cni-")
    env = Env(tmp, collections)
    adds, dels, baseline, cri_adds = [], [], [], []
    try:
        for index in range(ROUNDS):
            name = "b%d" % index
            netns = env.pod(name, {"name": "net1", "interface": "net0"}, {"name": "net2", "interface": "net1"})
            took, (code, out, err) = timed(lambda: env.cni("ADD", name, netns, "ctr-" + name))
            assert code == 0, (out, err)
            adds.append(took)
            took, (code, out, err) = timed(lambda: env.cni("DEL", name, netns, "ctr-" + name))
            assert code == 0, (out, err)
            dels.append(took)
        runtime = Containerd(env)
        try:
            cri_version = runtime.runtime.version().get("runtime_version", "?")
            for index in range(ROUNDS):
                obj = runtime.create_pod("c%d" % index, {"name": "net1", "interface": "net0"},
                                         {"name": "net2", "interface": "net1"})
                took, sandbox = timed(lambda: runtime.run_sandbox(obj))
                cri_adds.append(took)
                runtime.stop_sandbox(sandbox)
                runtime.remove_sandbox(sandbox)
        finally:
            runtime.stop()
        bridge = {"cniVersion": "1.0.0", "name": "bench", "type": "bridge", "bridge": "o4nbench0",
                  "ipam": {"type": "host-local", "subnet": "10.99.0.0/16", "dataDir": os.path.join(tmp, "ipam")}}
        for index in range(ROUNDS):
            netns = "o4n-%s-r%d" % (env.node.tag, index)
            env.node._add_ns(netns)
            took, (code, out, err) = timed(lambda: call(
                "/usr/lib/cni/bridge", "ADD", bridge, netns="/var/run/netns/" + netns, ifname="eth0",
                container_id="ref-%d" % index, node=env.node.ns,
                extra_env={"CNI_PATH": "/usr/lib/cni"}))
            assert code == 0, (out, err)
            baseline.append(took)
        starts = []
        for _index in range(ROUNDS):
            took, (code, _out, _err) = timed(lambda: call(env.plugin, "VERSION", {}, container_id="v"))
            assert code == 0
            starts.append(took)
        env.log.flush()
        with open(env.log.name) as handle:
            steps = {}
            for line in handle:
                match = re.search(r" ADD default/b\d+: .* \(((?:\w+=[0-9.]+ms ?)+)\)$", line.strip())
                for step, value in re.findall(r"(\w+)=([0-9.]+)ms", match.group(1) if match else ""):
                    steps.setdefault(step, []).append(float(value))
    finally:
        env.stop()
        ansible.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("where an ADD's time goes, medians in ms: plugin_start=%.1f %s (the agent's log, %d ADDs)" % (
        percentile(starts, 0.5), " ".join("%s=%.1f" % (step, percentile(values, 0.5)) for step, values in steps.items()),
        len(next(iter(steps.values()), []))))
    print("ovn4nfv: %d pods, 2 OVN interfaces each; ADD waits for ovn-installed" % ROUNDS)
    print("baseline: Debian's bridge + host-local, 1 interface, %d pods" % ROUNDS)
    print("through containerd %s: RunPodSandbox of the same pods, %d; p99 %.0f ms" % (
        cri_version, ROUNDS, percentile(cri_adds, 0.99)))
    print("add_p50_ms=%.0f add_p99_ms=%.0f del_p50_ms=%.0f baseline_add_p50_ms=%.0f cri_add_p50_ms=%.0f" % (
        percentile(adds, 0.5), percentile(adds, 0.99), percentile(dels, 0.5), percentile(baseline, 0.5),
        percentile(cri_adds, 0.5)))


if __name__ == "__main__":
    main()
