# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Composite kinds: objects an operator declares as a list, each realised
as rows of several tables (a virtual network, a node gateway, a network
function chain, a traffic tap).

A :class:`~.resource.Resource` is one row of one table, and
:func:`~.plan.plan` handles its states. A :class:`CompositeKind` is the
same idea one level up: the states of a declared list are handled here,
once, by :func:`plan_declared`, and a kind supplies only

- :meth:`CompositeKind.read`: the objects as they are, by name;
- :meth:`CompositeKind.complete`: one declared item checked and made the
  object it will be (merged over the current one under ``merged``);
- :meth:`CompositeKind.realise`: the rows that make the
  :class:`Declaration` true, added to the plan's batch.

What each state means for a declared list:

============  ==============================================================
merged        each item, over the object as it is (options not given kept)
replaced      each item, as given (options not given go back to defaults)
overridden    each item as given, and every other object the product owns
              is deleted
deleted       with items: those objects are deleted (absent ones ignored);
              without items: every object the product owns is deleted
gathered      the objects as they are (those named, or all); nothing planned
rendered      planned as ``merged``; never written (the caller's business)
============  ==============================================================

The two cases that delete what was not named are one predicate,
:func:`~.plan.wipes_everything`, shared with :func:`~.plan.plan`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import ValidationError
from .execution import CompositePlan
from .plan import wipes_everything


class Declaration:
    """What a declared list asks for, against what is.

    ``current`` maps each name to the object as the kind reads it;
    ``declared`` maps each name declared for creation or update to
    ``(where, object as it will be)``; ``deleting`` lists the names to
    delete, in the order they were found."""

    def __init__(self, state, current):
        self.state = state
        self.current = current
        self.declared = {}
        self.deleting = []

    @property
    def after(self):
        """Every object as it will be, by name: the current ones not
        deleted, with the declared ones over them."""
        out = dict((n, c) for n, c in self.current.items() if n not in self.deleting)
        out.update((n, obj) for n, (_where, obj) in self.declared.items())
        return out

    @property
    def touched(self):
        """The names the plan creates, changes or deletes, sorted."""
        return sorted(set(self.declared) | set(self.deleting))

    def record(self, result, shown=None):
        """Record, on the plan ``result``, each object touched as it was and
        as it will be (``shown(object)`` of each, when given: what a change
        report says of it); returns :attr:`touched`."""
        shown = shown or (lambda obj: obj)
        touched = self.touched
        for name in touched:
            after = self.declared.get(name)
            result.record(name, shown(self.current.get(name)), shown(after[1] if after else None))
        return touched


def over_current(item, current, merge):
    """What ``merged`` means for one item: the options it gives (those not
    None) over the object as it is; the item as given otherwise."""
    if merge and current is not None:
        return dict(current, **dict((k, v) for k, v in item.items() if v is not None))
    return item


class CompositeKind:
    """A kind of object declared as a list; subclasses say how one is read,
    checked and realised (see the module's docstring)."""

    #: the kind's name in plans and messages (the module's name)
    name = None
    #: what one object is called in messages ("network", "tap")
    noun = "object"
    #: the option that names an object
    key = "name"

    def read(self, view):
        """``{name: object}`` as the database holds them."""
        raise NotImplementedError

    def owned(self, current):
        """Whether a current object is the product's, so that
        ``overridden`` and a bare ``deleted`` may remove it."""
        return True

    def gather(self, current):
        """A current object as ``gathered`` returns it."""
        return current

    def complete(self, item, current, merge, where, view):
        """The object ``item`` declares, checked, as it will be; ``current``
        is the object as it is (or None), and ``merge`` is true under
        ``merged``. Raises ValidationError naming the field."""
        raise NotImplementedError

    def realise(self, view, declaration, result):
        """Add to ``result`` (a :class:`~.execution.CompositePlan`) the
        plans that make ``declaration`` true, and its changes in the
        operator's terms; raise ValidationError for what the declaration
        as a whole cannot do."""
        raise NotImplementedError


def plan_declared(kind, view, items, state):
    """The :class:`~.execution.CompositePlan` of ``items``, (where, item)
    pairs, of ``kind`` in ``state`` against ``view``.

    Every item is checked before anything is planned, and every problem is
    reported at once: nothing is half-applied."""
    result = CompositePlan(kind.name)
    current = kind.read(view)
    if state == "gathered":
        wanted = set(item.get(kind.key) for _where, item in items)
        result.gathered = [kind.gather(cur) for name, cur in sorted(current.items())
                           if not wanted or name in wanted]
        return result
    declaration = Declaration(state, current)
    problems = []
    for where, item in items:
        name = item.get(kind.key)
        if state == "deleted":
            if name in current and name not in declaration.deleting:
                declaration.deleting.append(name)
            continue
        if name is not None and name in declaration.declared:
            problems.append("%s.%s: %s %s is declared twice (first at %s)" % (
                where, kind.key, kind.noun, name, declaration.declared[name][0]))
            continue
        try:
            obj = kind.complete(item, current.get(name), state == "merged", where, view)
        except ValidationError as exc:
            problems.extend(exc.problems)
            continue
        declaration.declared[name] = (where, obj)
    if problems:
        raise ValidationError(problems)
    if wipes_everything(state, items):
        declaration.deleting.extend(
            name for name, cur in sorted(current.items())
            if name not in declaration.declared and name not in declaration.deleting and kind.owned(cur))
    kind.realise(view, declaration, result)
    return result
