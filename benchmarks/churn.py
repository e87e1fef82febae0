"""The churn soak with fault injection (issue 11): pods created, changed,
relabelled and deleted at random on three networks, one small enough to
fill, and five MultiNetworkPolicies created, changed and deleted, while the
watcher is killed with SIGKILL and restarted, the NB ovsdb-server
restarted, the API answers 500 and 410, deletes land during retries and
the node agent restarts. Then it waits for convergence and compares, from
outside the product, the NB's pod ports and the node's OVS ports with the
live pods' requests, and the policies' address sets with the live pods'
addresses (tests/harness/churn_env.py; the suite runs the same code
shorter, tests/functional/test_churn.py).

The baseline, measured first in the same run: the same churn, shorter and
without faults, and its time to converge after the last operation.

Usage: python -m benchmarks.churn [OPS] [FAULTS]   (default 2000 and 24)
Last line, exactly:
``churn: ops=<n> faults=<k> leaked=<a> resurrected=<b> duplicated_ips=<c> missing=<d> converge_s=<x>``
"""

import shutil
import sys
import tempfile

from benchmarks.common import Ansible


def soak(collections, ops, faults, seed):
    from tests.harness.churn_env import Churn, line
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-churn-")
    churn = Churn(tmp, collections, seed=seed)
    try:
        result = churn.run(ops=ops, faults=faults)
        return line(result), churn.stages, result
    finally:
        churn.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ops = int(argv[0]) if argv else 2000
    faults = int(argv[1]) if len(argv) > 1 else 24
    ansible = Ansible()      # only for its collection path
    collections = ansible.collections
    try:
        baseline, stages, _whole = soak(collections, max(50, ops // 10), 0, seed=3)
        print("baseline (no faults, %d ops): %s stages=%s" % (max(50, ops // 10), baseline, stages), flush=True)
        result, stages, whole = soak(collections, ops, faults, seed=5)
    finally:
        ansible.close()
    print("stages (s after the last fault): %s" % stages, flush=True)
    print("policies: made=%d stale_policy_addresses=%d" % (whole["policies"], len(whole["stale_policy_addresses"])))
    print(result)
    clean = " leaked=0 resurrected=0 duplicated_ips=0 missing=0 " in result and not whole["stale_policy_addresses"]
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
