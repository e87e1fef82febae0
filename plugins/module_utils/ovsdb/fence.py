# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fencing in the northbound database: a deposed leader cannot write.

A Lease says which watcher replica leads, but not when the old leader
learns that it no longer does: a paused process, or one cut off from the
API, wakes up believing it still leads. So the NB itself refuses it. The
one ``NB_Global`` row holds a term (``K_TERM``) and the identity of the
watcher that took it (``K_TERM_HOLDER``). A watcher that takes over
advances the term (:meth:`Fence.advance`); every other transaction it
commits carries an OVSDB ``wait`` that the row's ``external_ids`` are
still the ones it read, with its own term and identity in them
(:meth:`Fence.guard`). OVSDB applies a transaction whole or not at all,
so a transaction that reaches the server after another replica took over
fails its ``wait`` and nothing of it is applied; python-ovs answers "try
again", the transaction is made anew on the updated cache, and the guard
then sees the new term and raises :class:`Fenced`. In a RAFT cluster the
``wait`` is judged by the leader when it orders the transaction.

Why the check cannot go stale between the look and the send: the guard
runs inside :meth:`.connection.Database.transact`, under the connection's
lock, and python-ovs builds the ``wait`` from the cache in the same
``commit()`` call, with no update taken in between. So the ``wait``
carries the very map whose term was checked.

One detail of python-ovs (3.1 and 3.5 alike): ``Row.verify`` records the
prerequisite but does not enrol the row in the transaction, and
``Transaction.commit`` builds its ``wait`` operations only from enrolled
rows; a verified row the transaction does not otherwise touch sends no
``wait`` at all (the C IDL's ``ovsdb_idl_txn_verify`` enrols it).
:func:`_enrol` does what the C IDL does, in the one place that touches
python-ovs's private attribute; ``tests/functional/test_fencing.py``
fails if a release changes that behaviour either way.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging

from ..common import marks
from ..common.errors import Fenced

TABLE = "NB_Global"
COLUMNS = {TABLE: ["external_ids"]}     # what a fenced connection monitors of it

LOG = logging.getLogger("ovn4nfv.fence")


def _singleton(idl):
    rows = idl.tables[TABLE].rows if TABLE in idl.tables else {}
    return next(iter(rows.values()), None)


def _term_of(ids):
    try:
        return max(int(ids.get(marks.K_TERM, "0")), 0)
    except ValueError:
        return 0        # not a number: whoever advances next starts again from 1


def held(idl):
    """``(term, holder identity)`` as the cache has them: ``(0, None)``
    before any watcher took a term."""
    return _held_in(_singleton(idl))


def _held_in(row):
    if row is None:
        return 0, None
    return _term_of(row.external_ids), row.external_ids.get(marks.K_TERM_HOLDER)


def _enrol(txn, row):
    """Make python-ovs send the ``wait`` of a verified row (module
    docstring)."""
    txn._txn_rows.setdefault(row.uuid, row)


class Fence:
    """The term of one watcher process. ``may_act()`` (the elector's
    ``acting``) is asked before every transaction; ``on_fenced(exc)`` is
    told of every refusal (the elector ends the process)."""

    def __init__(self, identity, may_act=None, on_fenced=None):
        self.identity = identity
        self.may_act = may_act or (lambda: True)
        self.on_fenced = on_fenced or (lambda exc: None)
        self.term = None        # the term this process took; None: it took none
        self.refused = 0        # transactions the NB refused (they had left under the old term)
        self.stopped = 0        # transactions stopped before they were sent

    def comment(self, term):
        return "%s%d holder=%s" % (marks.TERM_COMMENT, term, self.identity)

    def advance(self, database):
        """Take the next term: one transaction that verifies the row's
        ``external_ids`` and sets the term one higher and this identity as
        its holder. A replica that advanced meanwhile makes the server
        answer "try again", and it is made anew on the new term; each try
        first asks ``may_act`` (a replica deposed while it took over, or
        paused in the middle, must not take a term from the one that
        leads now). Returns once this connection's cache shows the term,
        so the first guarded transaction sees it."""
        database.wait_for(lambda idl: _singleton(idl) is not None, database.timeout)

        def take(idl, txn):
            if not self.may_act():
                raise Fenced("%s may not act: no term taken" % self.identity)
            row = _singleton(idl)
            if row is None:
                raise Fenced("the NB has no %s row yet: ovn-northd has not started it" % TABLE)
            ids = dict(row.external_ids)
            term = _term_of(ids) + 1
            row.verify("external_ids")
            ids.update({marks.K_TERM: str(term), marks.K_TERM_HOLDER: self.identity})
            row.external_ids = ids
            txn.add_comment(self.comment(term) + " takes over")
            return term

        term = database.transact(take, fenced=False)
        if not database.wait_for(lambda idl: held(idl)[0] >= term, database.timeout):
            raise Fenced("term %d was taken, but the NB's update did not show it within %ss" % (
                term, database.timeout))
        seen = database.read(held)
        if seen != (term, self.identity):
            raise Fenced("term %d was taken, and at once overtaken by term %d of %s" % (term, seen[0], seen[1]))
        self.term = term
        LOG.info("took term %d in the northbound database as %s", self.term, self.identity)
        return self.term

    def guarded(self, function):
        """``function(idl, txn)`` followed by :meth:`guard`, for
        :meth:`.connection.Database.transact`. A transaction that passed the
        guard, was refused and is made again is counted as refused by the
        NB when the guard then stops it. ``on_fenced`` is told by the
        caller, once the connection's lock is let go (:meth:`told`)."""
        passed = []

        def run(idl, txn):
            result = function(idl, txn)
            try:
                self.guard(idl, txn, after_refusal=bool(passed))
            except Fenced as exc:
                if exc.refused:
                    self.refused += 1
                else:
                    self.stopped += 1
                raise
            passed.append(True)
            return result
        return run

    def told(self, exc):
        """Tell ``on_fenced`` of a refusal, outside the connection's lock
        (it may stop the whole process)."""
        self.on_fenced(exc)

    def guard(self, idl, txn, after_refusal=False):
        """Raise :class:`Fenced` unless this process may act and the cached
        term and holder are its own; then make the transaction wait on
        them and carry this term's comment."""
        if self.term is None:
            raise Fenced("this watcher took no term in the northbound database", after_refusal)
        if not self.may_act():
            raise Fenced("this watcher's leadership lapsed (term %d)" % self.term, after_refusal)
        row = _singleton(idl)
        term, holder = _held_in(row)
        if (term, holder) != (self.term, self.identity):
            raise Fenced("the northbound database's term is %d, held by %s; this watcher took %d" % (
                term, holder, self.term), after_refusal)
        row.verify("external_ids")
        _enrol(txn, row)
        txn.add_comment(self.comment(self.term))
