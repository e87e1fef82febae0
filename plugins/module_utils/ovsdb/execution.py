# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reconcile sequence every OVSDB-backed module and daemon runs.

    read current rows -> build wanted rows -> diff -> one transaction
    (none in check mode) -> a before/after that a reviewer can read"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from .operations import apply_ops
from .plan import Change, WRITE_STATES, plan, planning_state, validate_config
from .view import View


def reconcile(resource, config, state, database, check_mode=False):
    """Run the sequence for one task. Returns the :class:`Plan`.

    ``database`` is a :class:`~.ovsdb.Database`. Nothing is written in
    check mode, nor for ``gathered`` and ``rendered``.
    """
    items = validate_config(resource, config, planning_state(state))
    return reconcile_items(resource, items, state, database, check_mode)


def reconcile_items(resource, items, state, database, check_mode=False):
    """:func:`reconcile` for items already checked by :func:`validate_config`,
    so that a caller can refuse bad input before it connects."""
    mode = planning_state(state)
    await_singleton(resource, database)
    adopt_parents(resource, database)
    return execute(database, lambda view: plan(resource, items, mode, view),
                   write=state in WRITE_STATES and not check_mode)


def adopt_parents(resource, database):
    """Under a narrowed monitor (:meth:`~.resource.Resource.conditions`),
    also monitor the parents of the objects found that no monitored parent
    holds, so that the plan sees where each object really is."""
    parent = getattr(resource, "parent", None)
    if parent is None or not database.narrowed(parent.table):
        return
    clauses = database.read(lambda idl: resource.orphans(View(idl)))
    if clauses:
        database.widen(parent.table, clauses)


def await_singleton(resource, database):
    """Wait, within the database's timeout, for the one row of the table a
    resource hangs from when it has no named parent (``NB_Global``,
    ``SB_Global``): ovn-northd creates them when it first connects, which
    under systemd may be just after the database server answers. Without
    it the plan says how many rows it found."""
    parent = getattr(resource, "parent", None)
    if parent is None or parent.option or parent.table not in database.tables:
        return
    database.wait_for(lambda idl: len(idl.tables[parent.table].rows) > 0, database.timeout)


class Batch:
    """Plans of several resources, made on one view, applied in one
    transaction in order: a later plan may use rows an earlier one creates."""

    def __init__(self, plans=()):
        self.plans = list(plans)

    def add(self, plan_):
        self.plans.append(plan_)
        return plan_

    @property
    def ops(self):
        return [op for p in self.plans for op in p.ops]

    @property
    def changed(self):
        return any(p.changed for p in self.plans)

    def operations(self):
        return [line for p in self.plans for line in p.operations()]


class CompositePlan:
    """A plan for objects that span several resources (a virtual network,
    a node gateway, the topology): changes in the operator's terms, and
    the :class:`Batch` of OVSDB plans that realises them."""

    def __init__(self, kind):
        self.kind = kind
        self.batch = Batch()
        self.changes = []       # Change per object, with before/after in config form
        self.gathered = []

    @property
    def changed(self):
        return self.batch.changed

    @property
    def ops(self):
        return self.batch.ops

    def record(self, label, before, after):
        if before != after:
            action = "delete" if after is None else "update" if before else "create"
            self.changes.append(Change(action, label, before, after, []))

    def operations(self):
        return [c.describe(self.kind) for c in self.changes] + self.batch.operations()

    @property
    def before(self):
        return [c.before for c in self.changes if c.before is not None]

    @property
    def after(self):
        return [c.after for c in self.changes if c.after is not None]

    def diff(self):
        return {"before": dict((c.label, c.before) for c in self.changes if c.before),
                "after": dict((c.label, c.after) for c in self.changes if c.after)}


def execute(database, compute, write):
    """Compute a plan (or :class:`Batch`) with ``compute(view)`` and, when
    ``write`` is true and it changes anything, apply it in one transaction.

    The plan is computed once on the cache; ovsdbapp asks for it again only
    after the server answered "try again", and then it is made anew.
    """
    if not write:
        return database.read(lambda idl: compute(View(idl)))
    first, seqno = database.read(lambda idl: (compute(View(idl)), idl.change_seqno))
    if not first.changed:
        return first

    def transaction(idl, txn):
        fresh = first if idl.change_seqno == seqno else compute(View(idl))
        apply_ops(fresh.ops, idl, txn)
        return fresh

    return database.transact(transaction)
