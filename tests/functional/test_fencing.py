"""Fencing in the NB (ovsdb/fence.py) on a real ovsdb-server and
ovn-northd: a watcher that lost its term cannot write, even when it does
not know yet. What the server kept is read from outside, with
``ovsdb-client`` and ``ovsdb-tool show-log`` (the database file's own
transaction history)."""

import subprocess
import threading

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import marks
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import Fenced
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import fence as nb_fence
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.batching import Committer
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import plan, validate_config
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitch


def connect(box, fence=None):
    return ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES, timeout=10, columns=nb_fence.COLUMNS, fence=fence)


def add_switch(name):
    def function(idl, txn):
        row = txn.insert(idl.tables["Logical_Switch"])
        row.name = name
    return function


def switches(box):
    return set(box.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split())


def term_of(box):
    return tuple(box.nbctl("get", "NB_Global", ".", "external_ids:" + key).strip().strip('"')
                 for key in (marks.K_TERM, marks.K_TERM_HOLDER))


def history(box):
    """The comments of every transaction in the NB's file, in order."""
    out = subprocess.run(["ovsdb-tool", "show-log", "-m", box.dir + "/ovnnb_db.db"], env=box.env,
                         stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    # record <n>: <date> <time> "<comment>"
    return [line.split('"', 1)[1].rsplit('"', 1)[0] for line in out.splitlines()
            if line.startswith("record ") and '"%s' % marks.TERM_COMMENT in line]


def paused_first_try(db, plan, meanwhile):
    """``db.transact`` of ``plan(idl, txn)`` in a thread; its first try,
    once planned, holds (with the connection's lock, its cache still, as a
    stopped process would) while ``meanwhile()`` runs. Returns what each
    try's ``plan`` returned, and the outcome: "committed" or the Fenced."""
    planned, resume, runs, outcome = threading.Event(), threading.Event(), [], []

    def paused(idl, txn):
        runs.append(plan(idl, txn))
        if len(runs) == 1:
            planned.set()
            assert resume.wait(30)

    def run():
        try:
            db.transact(paused)
            outcome.append("committed")
        except Fenced as exc:
            outcome.append(exc)
    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert planned.wait(30)
        meanwhile()
    finally:
        resume.set()
        thread.join(30)
    assert len(outcome) == 1, outcome
    return runs, outcome[0]


@pytest.fixture
def two(sandbox):
    """Two watcher processes' connections, A and B, each with its fence."""
    fences = [nb_fence.Fence("node-a_aaaaaaaa"), nb_fence.Fence("node-b_bbbbbbbb")]
    dbs = []
    try:
        for fence in fences:
            dbs.append(connect(sandbox, fence))
        yield sandbox, dbs, fences
    finally:
        for db in dbs:
            db.close()


def test_paused_leader_is_refused_by_the_nb(two):
    """A plans a switch and is paused (holding its own cache still, as a
    stopped process would) while B takes over. Woken, A's transaction
    leaves under the old term: the NB refuses it, nothing of it is
    applied, and made again it is stopped by the guard."""
    box, (db_a, db_b), (fence_a, fence_b) = two
    assert fence_a.advance(db_a) == 1
    db_a.transact(add_switch("written-by-a-term-1"))
    taken = []

    def stale(idl, txn):
        add_switch("stale-from-a")(idl, txn)
        return nb_fence.held(idl)
    runs, outcome = paused_first_try(db_a, stale, lambda: taken.append(fence_b.advance(db_b)))
    assert taken == [2]         # B took over while A slept
    assert isinstance(outcome, Fenced), outcome
    assert outcome.refused, "the NB itself must have refused it: it left under term 1"
    assert runs[0] == (1, fence_a.identity) and runs[-1] == (2, fence_b.identity), runs
    assert (fence_a.refused, fence_a.stopped) == (1, 0)
    assert "stale-from-a" not in switches(box)
    assert "written-by-a-term-1" in switches(box)
    # B writes; A, asked again, is stopped before anything is sent
    db_b.transact(add_switch("written-by-b"))
    with pytest.raises(Fenced) as stopped:
        db_a.transact(add_switch("stale-again"))
    assert not stopped.value.refused and fence_a.stopped == 1
    assert switches(box) == {"written-by-a-term-1", "written-by-b"}
    assert term_of(box) == ("2", fence_b.identity)
    # the file's history names the writer of each transaction, in order
    assert history(box) == [
        "%s1 holder=%s takes over" % (marks.TERM_COMMENT, fence_a.identity),
        "%s1 holder=%s" % (marks.TERM_COMMENT, fence_a.identity),
        "%s2 holder=%s takes over" % (marks.TERM_COMMENT, fence_b.identity),
        "%s2 holder=%s" % (marks.TERM_COMMENT, fence_b.identity),
    ]


def test_two_take_overs_at_once_get_two_terms(two):
    box, dbs, fences = two
    start = threading.Barrier(2)
    terms = {}

    def take(index):
        start.wait(10)
        try:
            terms[index] = fences[index].advance(dbs[index])
        except Fenced as exc:       # its term was overtaken before its cache showed it
            terms[index] = exc
    threads = [threading.Thread(target=take, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(terms) == 2 and 2 in terms.values(), terms
    last = fences[0] if terms[0] == 2 else fences[1]
    first = fences[1] if last is fences[0] else fences[0]
    assert terms[fences.index(first)] == 1 or isinstance(terms[fences.index(first)], Fenced), terms
    dbs[fences.index(last)].transact(add_switch("by-the-last"))
    with pytest.raises(Fenced):
        dbs[fences.index(first)].transact(add_switch("by-the-first"))
    assert switches(box) == {"by-the-last"}
    assert term_of(box) == ("2", last.identity)


def test_a_foreign_key_costs_a_retry_not_a_failure(two):
    """Someone else writes NB_Global's external_ids while A's transaction
    is on its way: the NB refuses it once (the map changed), and made
    again on the new map it commits, since the term is still A's."""
    box, (db_a, _db_b), (fence_a, _fence_b) = two
    fence_a.advance(db_a)
    runs, outcome = paused_first_try(db_a, add_switch("after-foreign"), lambda: box.nbctl(
        "set", "NB_Global", ".", "external_ids:other-cms=1"))
    assert outcome == "committed"
    assert len(runs) == 2, "the first try must have been refused for the changed map"
    assert "after-foreign" in switches(box)
    assert (fence_a.refused, fence_a.stopped) == (0, 0)


def test_no_term_or_lapsed_leadership_writes_nothing(sandbox):
    told = []
    acting = [True]
    fence = nb_fence.Fence("node-c_cccccccc", may_act=lambda: acting[0], on_fenced=told.append)
    with connect(sandbox, fence) as db:
        with pytest.raises(Fenced):
            db.transact(add_switch("before-any-term"))
        fence.advance(db)
        db.transact(add_switch("while-acting"))
        acting[0] = False
        with pytest.raises(Fenced):
            db.transact(add_switch("after-lapse"))
    assert switches(sandbox) == {"while-acting"}
    assert len(told) == 2 and not any(exc.refused for exc in told)


def test_committer_hands_a_refusal_to_every_plan_of_its_round(two):
    """No plan of a fenced round is committed alone afterwards."""
    box, (db_a, db_b), (fence_a, fence_b) = two
    fence_a.advance(db_a)
    fence_b.advance(db_b)
    committer = Committer(db_a, limit=8)
    try:
        def plan_switch(name):
            resource = LogicalSwitch()
            items = validate_config(resource, [{"name": name}], "merged")
            return lambda view: plan(resource, items, "merged", view)
        for name in ("c1", "c2"):
            with pytest.raises(Fenced):
                committer.execute(plan_switch(name))
    finally:
        committer.close()
    assert switches(box) == set()
    # one refusal per round (by the guard, or by the NB when A's cache had not yet seen B's
    # term): no plan of a fenced round is tried alone, which would count two a round
    assert fence_a.stopped + fence_a.refused == 2, (fence_a.stopped, fence_a.refused)


def test_a_replica_that_may_not_act_takes_no_term(two):
    """A replica deposed while it took over (or paused in the middle) must
    not take a term from the one that leads now."""
    box, (db_a, db_b), (fence_a, fence_b) = two
    assert fence_b.advance(db_b) == 1
    deposed = nb_fence.Fence(fence_a.identity, may_act=lambda: False)
    db_a.fence = deposed
    with pytest.raises(Fenced):
        deposed.advance(db_a)
    assert deposed.term is None
    db_b.transact(add_switch("the-leader-still-writes"))
    assert term_of(box) == ("1", fence_b.identity)
    assert switches(box) == {"the-leader-still-writes"}


def test_python_ovs_sends_no_wait_for_a_lone_verify(sandbox):
    """What makes ``fence._enrol`` necessary: a row that is verified but
    not otherwise written sends no ``wait`` in python-ovs, so a change to
    it meanwhile does not stop the transaction. If a release of python-ovs
    sends it, this fails: the enrolment is then no longer needed."""
    with connect(sandbox) as db:
        def verify_only(idl, txn):
            row = next(iter(idl.tables["NB_Global"].rows.values()))
            row.verify("external_ids")
            add_switch("despite-the-change")(idl, txn)
        runs, outcome = paused_first_try(db, verify_only, lambda: sandbox.nbctl(
            "set", "NB_Global", ".", "external_ids:changed=1"))
        assert outcome == "committed"
    assert len(runs) == 1, "python-ovs now sends the wait of a verified row: drop fence._enrol"
    assert "despite-the-change" in switches(sandbox)
