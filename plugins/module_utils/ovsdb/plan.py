# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plans: the difference between current and wanted rows, in the
operator's terms (:class:`Change`) and as operations (:class:`Plan`)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import ValidationError

STATES = ("merged", "replaced", "overridden", "deleted", "gathered", "rendered")
WRITE_STATES = ("merged", "replaced", "overridden", "deleted")

_ABSENT = object()


def wipes_everything(state, items):
    """Whether a task deletes every object of its kind the product owns and
    did not declare: ``overridden``, or ``deleted`` with nothing named.

    The most dangerous rule of the engine, in one place: a caller that plans
    ``deleted`` with an empty list it built itself (a repair with nothing to
    mend) deletes everything. Such a caller must not plan at all."""
    return state == "overridden" or (state == "deleted" and not items)


class Change:
    """What happens to one object: ``create``, ``update`` or ``delete``."""

    def __init__(self, action, label, before, after, ops):
        self.action = action
        self.label = label
        self.before = before
        self.after = after
        self.ops = ops

    def describe(self, resource_name, identity=()):
        head = "%s %s %s" % (self.action, resource_name, self.label)
        if self.action == "delete":
            return head
        after = dict((k, v) for k, v in (self.after or {}).items() if k not in identity)
        before = dict((k, v) for k, v in (self.before or {}).items() if k not in identity)
        details = describe_delta(before, after)
        return "%s: %s" % (head, "; ".join(details)) if details else head


def describe_delta(before, after):
    """Readable lines for what differs between two config dicts."""
    lines = []
    for option in sorted(set(before) | set(after)):
        old, new = before.get(option, _ABSENT), after.get(option, _ABSENT)
        if old == new:
            continue
        if isinstance(old, dict) or isinstance(new, dict):
            old = old if isinstance(old, dict) else {}
            new = new if isinstance(new, dict) else {}
            for k in sorted(set(old) | set(new)):
                if k not in new:
                    lines.append("%s.%s removed (was %r)" % (option, k, old[k]))
                elif k not in old:
                    lines.append("%s.%s=%r" % (option, k, new[k]))
                elif old[k] != new[k]:
                    lines.append("%s.%s %r -> %r" % (option, k, old[k], new[k]))
        elif old is _ABSENT:
            lines.append("%s=%r" % (option, new))
        elif new is _ABSENT:
            lines.append("%s removed (was %r)" % (option, old))
        else:
            lines.append("%s %r -> %r" % (option, old, new))
    return lines


class Plan:
    """The outcome of planning: the changes, and what to report."""

    def __init__(self, resource, state):
        self.resource = resource
        self.state = state
        self.changes = []
        self.gathered = []

    @property
    def ops(self):
        return [op for change in self.changes for op in change.ops]

    @property
    def changed(self):
        return bool(self.ops)

    @property
    def before(self):
        """The objects this plan changes, as they were."""
        return [c.before for c in self.changes if c.ops and c.before is not None]

    @property
    def after(self):
        """The objects this plan changes, as they will be."""
        return [c.after for c in self.changes if c.ops and c.after is not None]

    def operations(self):
        return [c.describe(self.resource.name, self.resource.identity)
                for c in self.changes if c.ops]

    def diff(self):
        """``{'before': ..., 'after': ...}`` keyed by object label, for
        Ansible's --diff: only objects that change."""
        before, after = {}, {}
        for change in self.changes:
            if not change.ops:
                continue
            if change.before is not None:
                before[change.label] = change.before
            if change.after is not None:
                after[change.label] = change.after
        return {"before": before, "after": after}


def validate_config(resource, config, state):
    """Static validation of every item; all problems reported at once."""
    problems, items, seen = [], [], {}
    for index, raw in enumerate(config or []):
        where = "config[%d]" % index
        item = dict((k, v) for k, v in (raw or {}).items() if v is not None)
        try:
            if resource.parent and state != "deleted":
                resource.parent.validate(item, where)
            item = resource.validate(item, where, state)
        except ValidationError as exc:
            problems.extend(exc.problems)
            continue
        key = resource.key(item)
        if key in seen:
            problems.append("%s: %s %s is already declared at %s" % (
                where, resource.name, resource.label(key), seen[key]))
            continue
        seen[key] = where
        items.append((where, item))
    if problems:
        raise ValidationError(problems)
    return items


def plan(resource, items, state, view, scope=None):
    """Compute the plan for validated ``items`` against ``view``.

    ``scope``, a predicate on :class:`Current`, narrows what ``overridden``
    (and ``deleted`` without items) may delete to part of what the product
    owns. Raises ValidationError, naming every problem, before anything is
    written.
    """
    declared_only = None
    if state in ("merged", "replaced") or (state == "deleted" and items):
        declared_only = resource.read_declared(view, items)
    current, duplicates = declared_only or resource.read(view)
    result = Plan(resource, state)
    if state == "gathered":
        wanted = set(resource.key(item) for _w, item in items)
        result.gathered = [current_config(resource, cur) for key, cur in sorted(
            current.items(), key=lambda kv: _sort_key(kv[0])) if not wanted or key in wanted]
        return result
    problems = []
    declared = set()
    for where, item in items:
        key = resource.key(item)
        declared.add(key)
        cur = current.get(key)
        if key in duplicates:
            problems.append("%s: %s %s exists more than once in the database" % (
                where, resource.name, resource.label(key)))
            continue
        try:
            parent_row = None
            if resource.parent and state != "deleted":
                parent_row = resource.parent.resolve(resource, item, where, view, cur)
            resource.check(item, where, view, cur, state)
            if state == "deleted" and resource.deletes_object:
                if cur is not None:
                    result.changes.append(Change("delete", resource.label(key),
                                                 current_config(resource, cur), None,
                                                 resource.delete_ops(cur)))
                continue
            cols = resource.wanted_cols(item, cur, state)
            if cur is None:
                after = resource_config(resource, cols, None, item)
                result.changes.append(Change("create", resource.label(key), None, after,
                                             resource.create_ops(item, cols, parent_row, view)))
                continue
            ops = resource.update_ops(cur, cols, view)
            if ops:
                # an object already as declared is not reported: its
                # before and after (two configs apiece) are not made
                result.changes.append(Change("update", resource.label(key), current_config(
                    resource, cur), resource_config(resource, cols, cur.parent, item), ops))
        except ValidationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ValidationError(problems)
    if wipes_everything(state, items):
        for key, cur in sorted(current.items(), key=lambda kv: _sort_key(kv[0])):
            if key in declared or key in duplicates or not resource.is_owned(cur):
                continue
            if scope is not None and not scope(cur):
                continue
            result.changes.append(Change("delete", resource.label(key),
                                         current_config(resource, cur), None,
                                         resource.delete_ops(cur)))
    return result


def _sort_key(key):
    return tuple("" if v is None else str(v) for v in key)


def current_config(resource, current):
    """An object in config form, as it is in the database."""
    return resource_config(resource, current.cols, current.parent)


def resource_config(resource, cols, parent_row=None, item=None):
    """An object in config form, from column values; the parent is named
    from its row when there is one, else from the item."""
    config = resource.to_config(cols)
    if resource.parent and resource.parent.option:
        if parent_row is not None:
            config[resource.parent.option] = parent_row.name
        elif item is not None:
            config[resource.parent.option] = item.get(resource.parent.option)
    ordered = {}
    for option in resource.identity:
        if option in config:
            ordered[option] = config.pop(option)
    ordered.update(sorted(config.items()))
    return ordered


def planning_state(state):
    """The state a plan is computed for: ``rendered`` shows what ``merged``
    would do."""
    if state not in STATES:
        raise ValidationError("state: %r is not one of %s" % (state, ", ".join(STATES)))
    return "merged" if state == "rendered" else state
