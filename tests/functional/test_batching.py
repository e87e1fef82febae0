"""Group commit (ovsdb.batching.Committer) against a real NB with
ovn-northd: plans handed in at the same moment share transactions, and one
plan never fails the others. The transactions are counted from outside,
by ``ovsdb-client monitor`` (one line per transaction it sees)."""

import contextlib
import json
import subprocess
import threading
import time

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.batching import Committer
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.operations import Op
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import plan, validate_config


@pytest.fixture
def nb(sandbox):
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
        execute(db, lambda v: vn.plan_networks(v, [("n", vn.check_network(
            {"name": "net1", "subnet": "172.16.1.0/24"}, "n"))], "merged", "ovn"), write=True)
        committer = Committer(db, limit=8, claims=pod_ports.claims)
        try:
            yield db, committer
        finally:
            committer.close()


@contextlib.contextmanager
def transactions(box):
    """Count the NB transactions that touch Logical_Switch_Port while the
    block runs: ``ovsdb-client monitor`` prints one line for each. Yields
    a list that holds the count once the block is over."""
    out = subprocess.Popen(["ovsdb-client", "monitor", box.nb_db, "OVN_Northbound", "Logical_Switch_Port",
                            "name", "-f", "json"], stdout=subprocess.PIPE, universal_newlines=True, env=box.env)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(out.stdout), daemon=True)
    reader.start()

    def mark(name):
        # a port of its own, seen by the monitor: everything before it was seen too
        box.nbctl("lsp-add", "net1", name)
        deadline = time.monotonic() + 20
        while not any('"%s"' % name in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any('"%s"' % name in line for line in lines), lines
        return next(i for i, line in enumerate(lines) if '"%s"' % name in line)
    count = []
    try:
        start = mark("mark-start")
        yield count
        end = mark("mark-end")
        count.append(end - start - 1)
    finally:
        out.terminate()
        out.wait(10)


def port(name, address="dynamic"):
    resource = LogicalSwitchPort()
    items = validate_config(resource, [{"name": name, "switch": "net1", "addresses": [address]}], "merged")
    return lambda view: plan(resource, items, "merged", view)


def in_threads(committer, computes):
    """Hand every plan in from a thread each while the committer is held
    in a round of its own, so that they all wait for the next rounds
    together; ``{index: plan or error}``."""
    results, entered, release = {}, threading.Event(), threading.Event()

    def hold(view):
        entered.set()
        release.wait(10)
        return plan(LogicalSwitchPort(), [], "merged", view)

    def one(index, compute):
        try:
            results[index] = committer.execute(compute)
        except Exception as exc:  # noqa: the test looks at it
            results[index] = exc
    holder = threading.Thread(target=one, args=("hold", hold))
    holder.start()
    assert entered.wait(10)
    threads = [threading.Thread(target=one, args=(i, c)) for i, c in enumerate(computes)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while len(committer.waiting) < len(computes) and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for thread in threads + [holder]:
        thread.join(30)
    results.pop("hold")
    return results


def names(box):
    return sorted(n for n in box.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port").split()
                  if n.startswith("p"))


def test_plans_handed_in_together_share_transactions(sandbox, nb):
    _db, committer = nb
    with transactions(sandbox) as count:
        results = in_threads(committer, [port("p%02d" % i) for i in range(24)])
    assert all(not isinstance(r, Exception) and r.changed for r in results.values()), results
    assert names(sandbox) == ["p%02d" % i for i in range(24)]
    # 24 plans, 8 a round: 3 transactions
    assert count[0] == 3, count


def test_a_plan_that_raises_fails_only_its_caller(sandbox, nb):
    _db, committer = nb

    def bad(view):
        raise ValidationError("p-bad: refused on purpose")
    results = in_threads(committer, [port("p1"), bad, port("p2")])
    assert isinstance(results[1], ValidationError)
    assert names(sandbox) == ["p1", "p2"]


def test_a_transaction_the_server_refuses_is_split_and_only_the_faulty_plan_fails(sandbox, nb):
    _db, committer = nb
    sandbox.nbctl("lsp-add", "net1", "p0")

    class Raw:
        changed = True

        def __init__(self, ops):
            self.ops = ops

    def clash(view):
        # past the resource's checks: a second port named p0, which the
        # NB's unique index on names refuses, in any transaction
        switch = view.lookup("Logical_Switch", "net1")
        row = view.new_row("Logical_Switch_Port", {"name": "p0"})
        return Raw([Op("insert", "Logical_Switch_Port", row, value={"name": "p0"}),
                    Op("mutate", "Logical_Switch", switch, "ports", [row], "insert")])
    results = in_threads(committer, [port("p1"), clash, port("p2")])
    failed = [i for i, r in results.items() if isinstance(r, Exception)]
    assert failed == [1] and names(sandbox) == ["p0", "p1", "p2"], results
    assert "constraint violation" in str(results[1]), results[1]


def test_two_pods_claiming_one_static_address_in_one_round(sandbox, nb):
    _db, committer = nb
    reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([
        {"name": "net1", "interface": "eth0", "ip_address": "172.16.1.50"}])})[1]
    pods = [pod_ports.Pod("default", "a", "uid-a"), pod_ports.Pod("default", "b", "uid-b")]
    results = in_threads(committer, [lambda v, p=p: pod_ports.plan_pod(v, p, reqs) for p in pods])
    refused = [r for r in results.values() if isinstance(r, ValidationError)]
    assert len(refused) == 1 and "172.16.1.50 is already held by" in str(refused[0]), results
    holders = [row["name"] for row in sandbox.rows("nb", "Logical_Switch_Port")
               if "172.16.1.50" in json.dumps(row["addresses"])]
    assert len(holders) == 1, holders
