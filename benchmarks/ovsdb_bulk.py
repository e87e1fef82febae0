"""1,000 logical switch ports on 10 switches in one module task.

Baseline, in the same run: the same ports created by a loop of single
``ovn-nbctl`` calls, one process per port. Also times re-running the task
when nothing has to change, and beside it, its own baseline: the same
no-change task as ``state: overridden``, which monitors and reads the
whole table. A task that names its rows monitors only those (a
conditional monitor); naming many should cost no more than reading the
table, so ``noop_s`` is printed beside ``noop_table_s``.

Each task time is the median of five runs (the creation in a fresh
database each time): a single sample on a shared 2-core machine swung
by half.

Last line:
``bulk_s=<x> nbctl_loop_s=<y> speedup=<y/x> noop_s=<z> noop_table_s=<t>``
"""

import statistics
import time

from benchmarks.common import Ansible, Sandbox

SWITCHES = 10
PORTS = 1000
RUNS = 5


def ports():
    return [{"name": "bulk-%04d" % i, "switch": "bulk-ls%d" % (i % SWITCHES),
             "addresses": ["dynamic"]} for i in range(PORTS)]


def make_switches(box):
    args = []
    for s in range(SWITCHES):
        args += ["--", "ls-add", "bulk-ls%d" % s, "--", "set", "Logical_Switch", "bulk-ls%d" % s,
                 "other_config:subnet=10.%d.0.0/16" % (100 + s)]
    box.nbctl(*args[1:])


def main():
    ansible = Ansible()
    try:
        empty = ansible.empty()
        bulks, noops, tables, ones = [], [], [], []
        for _run in range(RUNS):
            with Sandbox(ovs=False) as box:
                make_switches(box)
                task = [{"name": "1000 ports", "ovn4nfv.k8s.ovn_logical_switch_port": {
                    "config": "{{ ports }}", "db": box.nb_db}}]
                bulks.append(ansible.task_time(task, {"ports": ports()}))
                # northd gives the 1,000 new ports their dynamic addresses: the
                # no-change runs are timed once it has (it wrote behind the
                # first one's back, and that run paid for it)
                box.nbctl("--wait=sb", "sync")
                whole = [{"name": "1000 ports, the whole table", "ovn4nfv.k8s.ovn_logical_switch_port": {
                    "config": "{{ ports }}", "db": box.nb_db, "state": "overridden"}}]
                # the two no-change runs take turns at going first, so that
                # neither is always the one after the creation
                for which in ((noops, task), (tables, whole))[::1 if _run % 2 == 0 else -1]:
                    which[0].append(ansible.task_time(which[1], {"ports": ports()}))
                # context: what any no-change task costs, whatever its size
                ones.append(ansible.task_time(task, {"ports": ports()[:1]}))
                created = len(box.rows("nb", "Logical_Switch_Port"))
        bulk, noop, table, one = (statistics.median(x) for x in (bulks, noops, tables, ones))
        with Sandbox(ovs=False) as box:
            make_switches(box)
            start = time.monotonic()
            for port in ports():
                box.nbctl("lsp-add", port["switch"], port["name"], "--",
                          "lsp-set-addresses", port["name"], "dynamic")
            loop = time.monotonic() - start
            looped = len(box.rows("nb", "Logical_Switch_Port"))
    finally:
        ansible.close()
    assert created == looped == PORTS, (created, looped)
    print("empty playbook: %.2f s (subtracted from each task time)" % empty)
    print("module task, %d ports on %d switches, one transaction: %.2f s (runs: %s)" % (
        PORTS, SWITCHES, bulk, " ".join("%.2f" % x for x in bulks)))
    print("baseline, %d single ovn-nbctl calls: %.2f s" % (PORTS, loop))
    print("module task again, nothing to change: %.2f s (runs: %s)" % (noop, " ".join("%.2f" % x for x in noops)))
    print("baseline, the same as overridden (reads the whole table): %.2f s (runs: %s)" % (
        table, " ".join("%.2f" % x for x in tables)))
    print("context: a no-change task declaring 1 port, same database: %.2f s" % one)
    print("bulk_s=%.2f nbctl_loop_s=%.2f speedup=%.1f noop_s=%.2f noop_table_s=%.2f" % (
        bulk, loop, loop / bulk, noop, table))


if __name__ == "__main__":
    main()
