"""What a module task costs as the northbound grows: a no-change task on 10
ports, and the creation of 100 new ports, with 1,000 and then 50,000
logical switch ports (on 10, then 500 switches) in the database.

The ports are built directly (``ovsdb-client transact``, 5 switches and
500 ports a call), not by the module. ovn-northd is paused while the
tasks run, so that its work on 50,000 ports is not counted as theirs. The
baseline is the same tasks on the 1,000-port database in the same run:
each figure is the median of 5 runs, minus an empty playbook's time.

Last line:
``scale: lsps=50000 noop_1k_s=<a> noop_50k_s=<b> noop_ratio=<b/a> create_1k_s=<c> create_50k_s=<d> create_ratio=<d/c>``
"""

import json
import statistics

from benchmarks.common import Ansible, Sandbox

PER_SWITCH = 100
CALL = 5            # switches per ovsdb-client call (its argument stays under the kernel's 128 KiB)
RUNS = 5


def fill(box, first, last):
    """Switches ``first`` to ``last - 1``, each with PER_SWITCH ports with a
    MAC and an IP, as the watcher writes them."""
    for start in range(first, last, CALL):
        ops = []
        for s in range(start, min(start + CALL, last)):
            ports = []
            for p in range(PER_SWITCH):
                ref = "p%d_%d" % (s, p)
                ports.append(["named-uuid", ref])
                ops.append({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": ref, "row": {
                    "name": "s%03d-p%03d" % (s, p),
                    "addresses": "0a:00:%02x:%02x:%02x:%02x 10.%d.%d.%d" % (
                        s >> 8, s & 255, p >> 8, p & 255, 100 + s // 250, s % 250, p + 2),
                    "external_ids": ["map", [["ovn4nfv-owner", "ovn4nfv.k8s"]]]}})
            ops.append({"op": "insert", "table": "Logical_Switch", "row": {
                "name": "s%03d" % s, "ports": ["set", ports],
                "other_config": ["map", [["subnet", "10.%d.%d.0/24" % (100 + s // 250, s % 250)]]]}})
        box.run("ovsdb-client", "transact", box.nb_db, json.dumps(["OVN_Northbound"] + ops))


def noop_task(box):
    # ten existing ports on one switch, declared as they are
    return [{"name": "noop", "ovn4nfv.k8s.ovn_logical_switch_port": {"db": box.nb_db, "config": [
        {"name": "s001-p%03d" % p, "switch": "s001",
         "addresses": ["0a:00:00:01:00:%02x 10.100.1.%d" % (p, p + 2)]} for p in range(10)]}}]


def create_task(box, run):
    return [{"name": "create", "ovn4nfv.k8s.ovn_logical_switch_port": {"db": box.nb_db, "config": [
        {"name": "new%d-%03d" % (run, p), "switch": "s00%d" % (2 + run % 5), "addresses": ["dynamic"]}
        for p in range(100)]}}]


def measure(ansible, box, offset):
    noop = statistics.median(ansible.task_time(noop_task(box)) for _r in range(RUNS))
    create = statistics.median(ansible.task_time(create_task(box, offset + r)) for r in range(RUNS))
    return noop, create


def lsps(box):
    return len(box.run("ovn-nbctl", "--db=" + box.nb_db, "--bare", "--columns=_uuid", "list",
                       "Logical_Switch_Port").split())


def main():
    ansible = Ansible()
    try:
        ansible.empty()
        with Sandbox(ovs=False) as box:
            box.run("ovn-appctl", "-t", box.dir + "/ovn-northd.ctl", "pause")
            fill(box, 0, 10)
            small = lsps(box)
            noop_1k, create_1k = measure(ansible, box, 0)
            fill(box, 10, 500)
            large = lsps(box) - RUNS * 100
            noop_50k, create_50k = measure(ansible, box, RUNS)
    finally:
        ansible.close()
    print("empty playbook: %.2f s (subtracted from each task time)" % ansible.empty())
    print("baseline, %d ports in the NB: no-change task on 10 ports %.2f s, 100 new ports %.2f s" % (
        small, noop_1k, create_1k))
    print("%d ports in the NB: no-change task on 10 ports %.2f s, 100 new ports %.2f s" % (
        large, noop_50k, create_50k))
    print("scale: lsps=%d noop_1k_s=%.2f noop_50k_s=%.2f noop_ratio=%.2f create_1k_s=%.2f create_50k_s=%.2f "
          "create_ratio=%.2f" % (large, noop_1k, noop_50k, noop_50k / noop_1k, create_1k, create_50k,
                                 create_50k / create_1k))


if __name__ == "__main__":
    main()
