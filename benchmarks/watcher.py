"""The watcher under a burst: 500 pods with two interfaces each (one
dynamic, one static), created as fast as the API stand-in accepts them.

Measures the throughput (first create to last annotation) and each pod's
latency (create to annotation). The anchors, from other systems on much
larger machines: Kube-OVN about 19 pods/s; ovn-kubernetes a P99 pod-ready
time of about 3 s.

Last line: ``pods=500 pods_per_s=<x> p50_ms=<y> p99_ms=<z>``
"""

import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from common import Ansible  # noqa: E402

PODS = 500
NETWORKS = [{"name": "dyn", "subnet": "10.100.0.0/16"}, {"name": "static", "subnet": "10.101.0.0/16"},
            {"name": "default-net", "subnet": "10.240.0.0/16"}]


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    ansible = Ansible()      # only for its collection path
    collections = os.path.join(ansible.work, "collections")
    sys.path.insert(0, collections)
    from watcher_env import Cluster  # noqa: needs the collection on the path
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-watcher-")
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.watcher import Config
    workers = Config.DEFAULTS["workers"]
    env = Cluster(tmp, collections, networks=NETWORKS, workers=workers)
    try:
        for index in range(PODS):
            env.api.create_pod("bench", "pod%d" % index, {"ovnNetwork": json.dumps([
                {"name": "dyn", "interface": "net0"},
                {"name": "static", "interface": "net1", "ip_address": "10.101.%d.%d" % (index // 250, index % 250 + 2)},
            ])})
        done = env.api.wait(lambda api: len(api.annotated_at) >= PODS, 600)
        assert done, "not every pod was annotated:\n" + env.log_text()
        created, annotated = dict(env.api.created_at), dict(env.api.annotated_at)
    finally:
        log = env.log_text()
        code = env.stop()
        ansible.close()
        shutil.rmtree(tmp, ignore_errors=True)
    assert code == 0, "the watcher did not stop cleanly (%r):\n%s" % (code, log)
    latencies = [(annotated[k] - created[k]) * 1000 for k in created]
    span = max(annotated.values()) - min(created.values())
    print("pods: %d with 2 interfaces (1 dynamic, 1 static), %d workers (the default)" % (PODS, workers))
    print("all created at once: a pod's latency is mostly its wait in the queue")
    print("anchors: Kube-OVN ~19 pods/s; ovn-kubernetes P99 pod-ready ~3000 ms")
    print("pods=%d pods_per_s=%.1f p50_ms=%.0f p99_ms=%.0f" % (
        PODS, PODS / span, percentile(latencies, 0.5), percentile(latencies, 0.99)))


if __name__ == "__main__":
    main()
