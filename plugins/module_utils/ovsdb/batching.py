# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Group commit: the plans that several threads hand in at the same moment
share one OVSDB transaction.

A daemon's workers each make one object right (a pod's ports, say) and
would each wait for a transaction of their own; the server answers them
one after the other. A :class:`Committer` takes what is waiting when its
previous transaction ends, at most ``limit`` plans, makes each on one view
of the cache, and commits them together, so that under a burst the number
of transactions grows with the number of rounds, not of objects, and
alone a plan waits for nothing but its own transaction.

One plan never fails the others: a plan that raises is left out and its
caller gets the exception; a plan that claims what an earlier plan of the
same round claims (``claims``: a static address, say) waits for the next
round, where it is made against the committed winner; and when the server
refuses the whole transaction, each plan of it is committed alone, so that
only the faulty one fails.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading

from ..common.errors import Fenced, Ovn4nfvError
from .execution import execute
from .operations import apply_ops
from .view import View


class _Request:
    def __init__(self, compute):
        self.compute = compute
        self.done = threading.Event()
        self.result = None
        self.error = None


class Committer:
    """Hands plans of ``compute(view)`` to one thread that commits them in
    rounds on ``database`` (:class:`~.connection.Database`)."""

    def __init__(self, database, limit=64, claims=None, name="committer"):
        self.database = database
        self.limit = limit
        self.claims = claims or (lambda plan: ())
        self.waiting = []
        self.changed = threading.Condition()
        self.closed = False
        self.rounds = 0             # transactions this committer made
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def execute(self, compute):
        """The plan of ``compute(view)``, committed with what else waits;
        raises what ``compute`` raised, or what the transaction did. Every
        plan is made in the committer's thread only, inside the round: a
        first look from the caller's thread would hold the cache's lock
        that the round waits for (measured: that wait was half a round)."""
        request = _Request(compute)
        with self.changed:
            if self.closed:
                raise Ovn4nfvError("the committer of %s is closed" % self.database.remote)
            self.waiting.append(request)
            self.changed.notify()
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request.result

    def close(self):
        """Finish what waits, then stop."""
        with self.changed:
            self.closed = True
            self.changed.notify()
        self.thread.join(self.database.timeout * 2)

    def _run(self):
        while True:
            with self.changed:
                while not self.waiting and not self.closed:
                    self.changed.wait()
                if not self.waiting:
                    return
                batch, self.waiting = self.waiting[:self.limit], self.waiting[self.limit:]
            try:
                self._round(batch)
            except Fenced as exc:
                # the NB refused this process's term: no plan of the round
                # may be committed alone either
                for request in batch:
                    if not request.done.is_set():
                        request.error = exc
                        request.done.set()
            except Ovn4nfvError:
                # the server refused the whole: each alone, so that only the faulty one fails
                for request in batch:
                    if not request.done.is_set():
                        self._alone(request)
            except BaseException as exc:  # noqa: a fault here must reach every caller, not kill the thread
                for request in batch:
                    if not request.done.is_set():
                        request.error = exc if isinstance(exc, Exception) else Ovn4nfvError(str(exc))
                        request.done.set()

    def _round(self, batch):
        """One transaction for the plans of ``batch``; those that clash
        with an earlier one go back to wait for the next round."""
        outcome = {}

        def transaction(idl, txn):
            # ovsdbapp runs this again when the server answers "try again"
            view, claimed, ops = View(idl), set(), []
            outcome.clear()
            for request in batch:
                mark = view.savepoint()
                try:
                    plan = request.compute(view)
                except Ovn4nfvError as exc:
                    view.rollback(mark)
                    outcome[request] = ("error", exc)
                    continue
                mine = set(self.claims(plan))
                if mine & claimed:
                    view.rollback(mark)
                    outcome[request] = ("later", None)
                    continue
                claimed |= mine
                ops.extend(plan.ops if plan.changed else ())
                outcome[request] = ("done", plan)
            apply_ops(ops, idl, txn)

        self.database.transact(transaction)
        self.rounds += 1
        later = []
        for request in batch:
            kind, value = outcome[request]
            if kind == "later":
                later.append(request)
                continue
            if kind == "error":
                request.error = value
            else:
                request.result = value
            request.done.set()
        if later:
            with self.changed:
                self.waiting[:0] = later

    def _alone(self, request):
        try:
            request.result = execute(self.database, request.compute, write=True)
        except Exception as exc:  # noqa: the caller's to handle
            request.error = exc
        request.done.set()
