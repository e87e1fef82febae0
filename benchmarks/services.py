"""Services under endpoint churn: 100 Services with 20 ready pods each on
the API stand-in, kept by the watcher as OVN load balancers; then pods
turn unready and ready again, one at a time.

Measures, for each readiness change, the time from the API's change to
the NB's load balancer holding the new backend set, seen by a client of
the NB outside the watcher. The baseline, in the same run on the same NB:
the same change written straight to the NB by the core (one transaction,
no API, no watcher), timed to the same observer.

Last line: ``services=100 endpoints=2000 update_p50_ms=<x> update_p99_ms=<y>``
"""

import json
import random
import shutil
import tempfile
import time

from benchmarks.common import Ansible, percentile

SERVICES = 100
PER_SERVICE = 20
CHANGES = 200
NETWORKS = [{"name": "svcnet", "subnet": "10.100.0.0/16"}, {"name": "default-net", "subnet": "10.240.0.0/16"}]


def backends(idl, name):
    for row in idl.tables["Load_Balancer"].rows.values():
        if row.name == name:
            return set(b for value in row.vips.values() for b in value.split(",") if b)
    return None


def main():
    ansible = Ansible()      # only for its collection path
    collections = ansible.collections
    from tests.harness.watcher_env import Cluster
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import services
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-services-")
    env = Cluster(tmp, collections, networks=NETWORKS)
    rng = random.Random(12)
    try:
        pods = {}
        for s in range(SERVICES):
            for e in range(PER_SERVICE):
                name = "s%d-p%d" % (s, e)
                env.api.create_pod("bench", name, {"ovnNetwork": json.dumps([{"name": "svcnet", "interface": "net0"}])},
                                   labels={"svc": "s%d" % s}, ports=[{"name": "http", "containerPort": 8080}])
                pods[name] = "svc_bench_s%d_tcp" % s
        done = env.api.wait(lambda api: len(api.annotated_at) >= len(pods), 900)
        assert done, "not every pod was annotated:\n" + env.log_text()
        address = {}
        for name in pods:
            entries = json.loads(env.api.pod("bench", name)["metadata"]["annotations"]["ovnIfaceList"])
            address[name] = entries[0]["ip_address"].split("/")[0] + ":8080"
            env.api.set_ready("bench", name)
        for s in range(SERVICES):
            spec = {"selector": {"svc": "s%d" % s},
                    "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
            env.api.create_service("bench", "s%d" % s, spec, {services.NETWORK_ANNOTATION: "svcnet"})
        with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, TABLES + services.TABLES) as db:
            full = db.wait_for(lambda idl: sum(len(backends(idl, "svc_bench_s%d_tcp" % s) or ())
                                               for s in range(SERVICES)) == len(pods), 600)
            assert full, "the balancers never held every backend:\n" + env.log_text()
            ready = dict((name, True) for name in pods)
            latencies = []
            for _i in range(CHANGES):
                name = rng.choice(sorted(pods))
                ready[name] = not ready[name]
                start = time.monotonic()
                env.api.set_ready("bench", name, ready[name])
                seen = db.wait_for(lambda idl: (address[name] in backends(idl, pods[name])) == ready[name], 30)
                assert seen, "no update for %s:\n%s" % (name, env.log_text())
                latencies.append((time.monotonic() - start) * 1000)
            # baseline: the same kind of change, written by the core directly
            baseline = []
            service = services.Service("bench", "base", "uid-base", {services.NETWORK_ANNOTATION: "svcnet"},
                                       cluster_ip="10.96.200.1", ports=[services.Port("http", "TCP", 80, 8080)])
            members = [services.Endpoint(True, {"http": 8080}, ip="10.100.200.%d" % i) for i in range(1, PER_SERVICE + 1)]
            for i in range(CHANGES):
                members[i % PER_SERVICE].ready = not members[i % PER_SERVICE].ready
                want = set("%s:8080" % m.ip for m in members if m.ready)
                start = time.monotonic()
                execute(db, lambda view: services.plan_service(view, service, members, None), write=True)
                seen = db.wait_for(lambda idl: backends(idl, "svc_bench_base_tcp") == want, 30)
                assert seen
                baseline.append((time.monotonic() - start) * 1000)
    finally:
        log = env.log_text()
        code = env.stop()
        ansible.close()
        shutil.rmtree(tmp, ignore_errors=True)
    assert code == 0, "the watcher did not stop cleanly (%r):\n%s" % (code, log)
    print("%d Services x %d ready pods on one network; %d readiness changes, one at a time" % (
        SERVICES, PER_SERVICE, CHANGES))
    print("baseline (the core writing the same change to the NB itself): p50_ms=%.1f p99_ms=%.1f" % (
        percentile(baseline, 0.5), percentile(baseline, 0.99)))
    print("services=%d endpoints=%d update_p50_ms=%.0f update_p99_ms=%.0f" % (
        SERVICES, SERVICES * PER_SERVICE, percentile(latencies, 0.5), percentile(latencies, 0.99)))


if __name__ == "__main__":
    main()
