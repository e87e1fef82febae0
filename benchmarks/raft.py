"""Northbound write throughput of a three-member RAFT cluster against a
standalone northbound, in one run, on loopback.

Each database gets the same writes through the core: 400 logical switch
ports created one transaction each, from one client (a write's latency:
a RAFT leader commits once a majority of members has logged it), then 2,000
more handed in by 32 threads at once to a group committer
(``ovsdb.batching.Committer``, 64 plans a transaction), as the watcher
writes under a burst. The cluster is made as the ovn_central role makes
it (``ovn_central_election_timer``, ms, at creation), and the client talks
to its leader. The standalone database is the baseline.

Last line:
``raft: single_tps=<standalone> cluster_single_tps=<c> single_ratio=<c/s> batched_pps=<s> cluster_batched_pps=<c> batched_ratio=<c/s>``
"""

import threading
import time

from benchmarks.common import Ansible
from tests.harness.raft_env import Northbound

SINGLE, BATCHED, THREADS = 400, 2000, 32
ELECTION_TIMER = 1000       # the role's default, ovn_central_election_timer


def measure(remote, core):
    ovsdb, Committer, LogicalSwitchPort, plan, validate_config, execute, LogicalSwitch = core
    resource = LogicalSwitchPort()

    def port(name):
        items = validate_config(resource, [{"name": name, "switch": "bench", "addresses": ["dynamic"]}], "merged")
        return lambda view: plan(resource, items, "merged", view)
    with ovsdb.Database(remote, ovsdb.NB_SCHEMA, ("Logical_Switch", "Logical_Switch_Port"), timeout=60) as db:
        switch = LogicalSwitch()
        items = validate_config(switch, [{"name": "bench"}], "merged")
        execute(db, lambda view: plan(switch, items, "merged", view), write=True)
        start = time.monotonic()
        for index in range(SINGLE):
            execute(db, port("single-%d" % index), write=True)
        single = SINGLE / (time.monotonic() - start)
        committer = Committer(db, limit=64)
        try:
            names = ["batched-%d" % index for index in range(BATCHED)]

            def hand_in(part):
                for name in part:
                    committer.execute(port(name))
            threads = [threading.Thread(target=hand_in, args=(names[i::THREADS],)) for i in range(THREADS)]
            start = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(600)
            batched = BATCHED / (time.monotonic() - start)
            rounds = committer.rounds
        finally:
            committer.close()
        count = db.read(lambda idl: len(idl.tables["Logical_Switch_Port"].rows))
    assert count == SINGLE + BATCHED, count
    return single, batched, rounds


def main():
    ansible = Ansible()      # only for its collection path
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.batching import Committer
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import plan, validate_config
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import (
        LogicalSwitch, LogicalSwitchPort)
    core = (ovsdb, Committer, LogicalSwitchPort, plan, validate_config, execute, LogicalSwitch)
    try:
        with Northbound(1) as alone:
            s_single, s_batched, s_rounds = measure(alone.remotes[0], core)
        with Northbound(3, election_timer=ELECTION_TIMER) as cluster:
            c_single, c_batched, c_rounds = measure(",".join(cluster.remotes), core)
    finally:
        ansible.close()
    print("baseline, standalone NB: %.0f single-port transactions/s; %.0f ports/s batched (%d transactions)" % (
        s_single, s_batched, s_rounds))
    print("3-member RAFT NB (election timer %d ms): %.0f transactions/s; %.0f ports/s batched (%d transactions)" % (
        ELECTION_TIMER, c_single, c_batched, c_rounds))
    print("raft: single_tps=%.0f cluster_single_tps=%.0f single_ratio=%.2f batched_pps=%.0f cluster_batched_pps=%.0f "
          "batched_ratio=%.2f" % (s_single, c_single, c_single / s_single, s_batched, c_batched,
                                  c_batched / s_batched))


if __name__ == "__main__":
    main()
