"""The watcher's restart: 10,000 pods already served (their ports in the
NB, their ovnIfaceList in the API), and the watcher started.

The pods (one dynamic and one static interface each) are served before
the watcher starts, by the core's own planning in rounds of 500 pods a
transaction, and their annotations written into the API stand-in. Then
the watcher starts, lists, and checks every pod. ``ready_s`` runs from its
start until a pod created once it has listed is annotated: that pod's key
is queued after every listed pod's, so by then each was taken up.
``nb_writes`` counts the NB transactions that touched a switch or a port
other than that new pod's, seen from outside by ``ovsdb-client monitor``:
a restart must write nothing. ``rss_mb`` is the watcher's resident memory
then. The baseline in the same run: the same start on an empty cluster.

Last line: ``resync: pods=10000 ready_s=<x> nb_writes=<n> rss_mb=<m>``
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from benchmarks.common import Ansible, Sandbox

PODS = int(sys.argv[1]) if len(sys.argv) > 1 else 10000     # another size, to try it
ROUND = 500
NETWORKS = [{"name": "dyn", "subnet": "10.100.0.0/16"}, {"name": "static", "subnet": "10.101.0.0/16"},
            {"name": "default-net", "subnet": "10.240.0.0/16"}]


def request(index):
    return json.dumps([{"name": "dyn", "interface": "net0"},
                       {"name": "static", "interface": "net1",
                        "ip_address": "10.101.%d.%d" % (index // 250, index % 250 + 2)}])


def serve_all(box, api, core):
    """The topology, the networks, every pod's ports (planned by the core,
    a round of pods a transaction) and its annotations."""
    ann, pod_ports, pod_addresses, vn, plan_topology, ovsdb, execute, Batch, View, TABLES = core
    pods = []
    for index in range(PODS):
        made = api.create_pod("bench", "pod%d" % index, {ann.OVN_NETWORK: request(index)})
        pods.append((pod_ports.Pod("bench", made["metadata"]["name"], made["metadata"]["uid"]),
                     ann.parse_requests(made["metadata"]["annotations"])[1]))
    with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES, timeout=120) as db:
        execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
        execute(db, lambda v: vn.plan_networks(v, [(n["name"], vn.check_network(n, n["name"])) for n in NETWORKS],
                                               "merged", "ovn"), write=True)
        addresses = pod_addresses.AddressIndex().attach(db)
        for plan_one in (lambda view, pod, reqs: pod_ports.plan_pod(view, pod, reqs, addresses),
                         None, pod_ports.plan_port_security):
            if plan_one is None:
                # port security follows the addresses northd assigns
                assert db.wait_for(lambda idl: all(pod_ports.interface_list(View(idl), pod, reqs)
                                                   for pod, reqs in pods), 300), "northd assigned no address"
                continue
            for start in range(0, PODS, ROUND):
                execute(db, lambda view: Batch([plan_one(view, pod, reqs) for pod, reqs in pods[start:start + ROUND]]),
                        write=True)
        patches = db.read(lambda idl: [(pod, pod_ports.pod_annotations(View(idl), pod, reqs))
                                       for pod, reqs in pods])
    for pod, patch in patches:
        api.set_annotations(pod.namespace, pod.name, patch)


class Transactions:
    """NB transactions seen by ``ovsdb-client monitor`` (a line each)."""

    def __init__(self, box):
        self.lines = []
        self.proc = subprocess.Popen(["ovsdb-client", "monitor", box.nb_db, "OVN_Northbound", "Logical_Switch_Port",
                                      "name", "addresses", "port_security", "-f", "json"],
                                     stdout=subprocess.PIPE, universal_newlines=True, env=box.env)
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 120
        while not self.lines and time.monotonic() < deadline:
            time.sleep(0.05)        # until it printed what the NB holds: it sees every write after
        assert self.lines, "ovsdb-client monitor printed nothing"

    def other_than(self, word):
        """Transactions after the first line (the initial state) that
        touched a port whose name does not hold ``word`` (a row changed is
        printed as its old columns and its new row, which has the name)."""
        def names(line):
            return [row[2] for row in json.loads(line).get("data", []) if row[2]]
        return sum(1 for line in self.lines[1:] if any(word not in name for name in names(line)))

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


def start(tmp, collections, box, api, Cluster):
    """Start the watcher; once it has listed, create a new pod; return
    ``(seconds to that pod's annotation, rss in MiB, cluster)``, the
    seconds from the start of the watcher's process (the harness's own
    look at the NB, to make sure of the networks, is not the restart)."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.watcher import Config
    # the watcher as it is deployed: its default number of workers
    env = Cluster(tmp, collections, networks=NETWORKS, api=api, box=box, workers=Config.DEFAULTS["workers"])
    started = env.started
    assert env.wait_log("resync: ", 600), env.log_text()
    listed = time.monotonic() - started
    api.create_pod("bench", "probe", {"ovnNetwork": request(PODS + 1)})
    assert api.wait(lambda a: ("bench", "probe") in a.annotated_at, 600), env.log_text()
    ready = api.annotated_at[("bench", "probe")] - started
    with open("/proc/%d/status" % env.proc.pid) as handle:
        rss = next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:")) / 1024.0
    return ready, rss, env, listed


def main():
    ansible = Ansible()      # only for its collection path
    collections = ansible.collections
    from tests.harness.watcher_env import Cluster
    from tests.harness.kube_api_standin import KubeAPIStandIn
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann, pod_addresses, pod_ports
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import Batch, execute
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
    core = (ann, pod_ports, pod_addresses, vn, plan_topology, ovsdb, execute, Batch, View, TABLES)
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-resync-")
    try:
        for name in ("empty", "full"):
            os.makedirs(os.path.join(tmp, name))
        # the baseline: an empty cluster
        with Sandbox(ovs=False) as box:
            api = KubeAPIStandIn()
            try:
                empty_s, empty_rss, env, _listed = start(os.path.join(tmp, "empty"), collections, box, api, Cluster)
                env.stop()
            finally:
                api.stop()
        with Sandbox(ovs=False) as box:
            api, env = KubeAPIStandIn(), None
            try:
                built = time.monotonic()
                serve_all(box, api, core)
                built = time.monotonic() - built
                seen = Transactions(box)
                ready_s, rss, env, listed_s = start(os.path.join(tmp, "full"), collections, box, api, Cluster)
                writes = seen.other_than("bench_probe_")
                seen.close()
            finally:
                if env is not None:
                    env.stop()
                api.stop()
    finally:
        ansible.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("setup: %d pods served by the core in rounds of %d, in %.0f s" % (PODS, ROUND, built))
    print("baseline, an empty cluster: ready in %.1f s, %.0f MiB" % (empty_s, empty_rss))
    print("the watcher listed (its NB cache and the API's pods in) after %.1f s; the rest is checking each pod"
          % listed_s)
    print("resync: pods=%d ready_s=%.1f nb_writes=%d rss_mb=%.0f" % (PODS, ready_s, writes, rss))


if __name__ == "__main__":
    main()
