"""The watcher under a burst, then under a steady arrival.

Burst: once the watcher is up and has listed (an empty cluster), 500 pods
with two interfaces each (one whose address the watcher chooses, one
static) are created as fast as the API stand-in accepts them. Steady: then 50 pods a second for 20
seconds, each created at its time. Measures the burst's throughput (first
create to last annotation) and each pod's latency (create to annotation).
The anchors, from other systems on much larger machines: Kube-OVN about
19 pods/s; ovn-kubernetes a P99 pod-ready time of about 3 s. The baseline
in the same run: one pod alone, on the idle watcher, before the burst.

The CPU line says what each process used during the burst, and what
anything else on the host did. The stand-in's work is the same in every run
(500 creates, 500 patches and their watch events): when it and every other
process used more CPU than usual at once, with nothing else running, the
host itself was slower for that run. One run of 254 pods/s here had the
stand-in at 0.45 s against 0.30-0.34 s, and every other process about 40%
up with it, at the same code as runs of 330-377.

Last line: ``pods=500 pods_per_s=<x> p50_ms=<y> p99_ms=<z> steady_p99_ms=<w>``
"""

import json
import os
import shutil
import tempfile
import time

from benchmarks.common import Ansible, cpu_seconds, percentile

PODS = 500
STEADY_RATE, STEADY_SECONDS = 50, 20
NETWORKS = [{"name": "dyn", "subnet": "10.100.0.0/16"}, {"name": "static", "subnet": "10.101.0.0/16"},
            {"name": "default-net", "subnet": "10.240.0.0/16"}]


def create(api, index):
    api.create_pod("bench", "pod%d" % index, {"ovnNetwork": json.dumps([
        {"name": "dyn", "interface": "net0"},
        {"name": "static", "interface": "net1", "ip_address": "10.101.%d.%d" % (index // 250, index % 250 + 2)},
    ])})
    return ("bench", "pod%d" % index)


def main():
    ansible = Ansible()      # only for its collection path
    collections = ansible.collections
    from tests.harness.watcher_env import Cluster
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-watcher-")
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.watcher import Config
    workers = Config.DEFAULTS["workers"]
    env = Cluster(tmp, collections, networks=NETWORKS, workers=workers)
    try:
        assert env.wait_log("resync: 0 pods", 60), "the watcher did not start:\n" + env.log_text()
        alone = [create(env.api, PODS + STEADY_RATE * STEADY_SECONDS)]
        assert env.api.wait(lambda api: alone[0] in api.annotated_at, 60), env.log_text()
        # what each process spent during the burst: they share the machine's cores
        pids = dict((os.path.basename(path)[:-4], int(open(path).read())) for path in env.box.pidfiles)
        pids["watcher"] = env.proc.pid
        cpu_before = cpu_seconds(pids)
        burst = [create(env.api, index) for index in range(PODS)]
        done = env.api.wait(lambda api: all(k in api.annotated_at for k in burst), 600)
        assert done, "not every pod was annotated:\n" + env.log_text()
        cpu = dict((k, v - cpu_before[k]) for k, v in cpu_seconds(pids).items())
        steady, start = [], time.monotonic()
        for step in range(STEADY_RATE * STEADY_SECONDS):
            # pacing the arrivals, not waiting for a result
            time.sleep(max(0.0, start + step / float(STEADY_RATE) - time.monotonic()))
            steady.append(create(env.api, PODS + step))
        done = env.api.wait(lambda api: all(k in api.annotated_at for k in steady), 600)
        assert done, "not every steady pod was annotated:\n" + env.log_text()
        created, annotated = dict(env.api.created_at), dict(env.api.annotated_at)
    finally:
        log = env.log_text()
        code = env.stop()
        ansible.close()
        shutil.rmtree(tmp, ignore_errors=True)
    assert code == 0, "the watcher did not stop cleanly (%r):\n%s" % (code, log)

    def latencies(keys):
        return [(annotated[k] - created[k]) * 1000 for k in keys]
    span = max(annotated[k] for k in burst) - min(created[k] for k in burst)
    burst_ms, steady_ms = latencies(burst), latencies(steady)
    print("pods: %d with 2 interfaces (1 address chosen, 1 static), %d workers (the default)" % (PODS, workers))
    print("baseline, one pod alone on the idle watcher: %.0f ms" % latencies(alone)[0])
    print("burst, all created at once: a pod's latency is mostly its wait in the queue")
    print("CPU s during the burst (%.2f s; this host has %d cores): %s, API stand-in and benchmark %.2f, "
          "anything else on the host %.2f" % (
              span, os.cpu_count(), ", ".join("%s %.2f" % (k, v) for k, v in sorted(cpu.items())
                                              if k not in ("this", "host")),
              cpu["this"], max(0.0, cpu["host"] - sum(v for k, v in cpu.items() if k != "host"))))
    print("steady: %d pods/s for %d s, p50 %.0f ms, p99 %.0f ms" % (
        STEADY_RATE, STEADY_SECONDS, percentile(steady_ms, 0.5), percentile(steady_ms, 0.99)))
    print("anchors: Kube-OVN ~19 pods/s; ovn-kubernetes P99 pod-ready ~3000 ms")
    print("pods=%d pods_per_s=%.1f p50_ms=%.0f p99_ms=%.0f steady_p99_ms=%.0f" % (
        PODS, PODS / span, percentile(burst_ms, 0.5), percentile(burst_ms, 0.99), percentile(steady_ms, 0.99)))


if __name__ == "__main__":
    main()
