"""The cluster audit's cost as pods grow: ``network_audit`` (an
``ansible-playbook`` task, less an empty play's time) against a real NB and
SB with ovn-northd and the API stand-in, at 100 and then 1,000 pods, each
with one port on one network. No chassis is registered, so every port is
reported unbound: the audit reads, correlates and reports every pod.

Baseline, in the same run on the same databases: ``ovn_info`` gathering
the logical switch ports (a task that reads the same table, and nothing
else) at each size.

Last line: ``audit: pods=1000 audit_s=<x> audit_100_s=<y> per_pod_ms=<z>
info_s=<b> info_100_s=<c>``; linear growth shows as per_pod_ms holding
while pods grow tenfold.
"""

import json
import os
import shutil
import tempfile

from benchmarks.common import Ansible, Sandbox

SIZES = (100, 1000)


def main():
    ansible = Ansible()
    from tests.harness.kube_api_standin import WATCHER, KubeAPIStandIn
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.pod_addresses import Pod
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute, reconcile
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort

    box, api = Sandbox(vswitchd=False), KubeAPIStandIn()
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-audit-")
    try:
        kubeconfig = api.kubeconfig(os.path.join(tmp, "kubeconfig"), WATCHER)
        request = {"ovnNetwork": json.dumps([{"name": "bench", "interface": "net0"}])}
        figures = {}
        with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
            execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
            execute(db, lambda v: vn.plan_networks(v, [("a", vn.check_network(
                {"name": "bench", "subnet": "10.200.0.0/16"}, "a"))], "merged", "ovn", False), write=True)
            made = 0
            for size in SIZES:
                ports = []
                for i in range(made, size):
                    pod = api.create_pod("default", "p%d" % i, request)
                    identity = Pod("default", pod["metadata"]["name"], pod["metadata"]["uid"])
                    ports.append({"name": identity.port_name("net0"), "switch": "bench",
                                  "addresses": ["0a:00:00:c8:%02x:%02x 10.200.%d.%d" % (
                                      (i + 10) // 256, (i + 10) % 256, (i + 10) // 256, (i + 10) % 256)],
                                  "external_ids": identity.marks("net0")})
                for start in range(0, len(ports), 500):
                    reconcile(LogicalSwitchPort(), ports[start:start + 500], "merged", db)
                made = size
                audit = [{"name": "audit", "ovn4nfv.k8s.network_audit": {
                    "kubeconfig": kubeconfig, "db": box.nb_db, "sb_db": box.sb_db}}]
                info = [{"name": "info", "ovn4nfv.k8s.ovn_info": {
                    "db": box.nb_db, "gather": ["logical_switch_ports"]}}]
                figures[size] = (min(ansible.task_time(audit) for _i in range(3)),
                                 min(ansible.task_time(info) for _i in range(3)))
                print("pods=%d audit_s=%.2f info_s=%.2f" % (size, figures[size][0], figures[size][1]), flush=True)
        small, large = SIZES
        per_pod = (figures[large][0] - figures[small][0]) / (large - small) * 1000
        print("audit: pods=%d audit_s=%.2f audit_%d_s=%.2f per_pod_ms=%.2f info_s=%.2f info_%d_s=%.2f" % (
            large, figures[large][0], small, figures[small][0], per_pod, figures[large][1], small,
            figures[small][1]))
    finally:
        api.stop()
        box.stop()
        ansible.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
