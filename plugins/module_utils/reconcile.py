# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reconcile sequence every OVSDB-backed module runs.

    read current rows -> build wanted rows -> diff -> one transaction
    (none in check mode) -> a before/after that a reviewer can read

A *resource* (see :class:`Resource`) describes one kind of object: its
table, the options of its config and the column or map key each one lives
in, how it is identified and which parent row holds it. :func:`reconcile`
does the rest for every resource alike, for a whole list of objects in one
transaction.

A plan is a list of :class:`Op` (insert, update, mutate, delete). The same
list is applied to the IDL, rendered as RFC 7047 ``transact`` operations
for ``state: rendered``, and summarised as readable lines in
``operations``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from .errors import ValidationError

OWNER_KEY = "ovn4nfv-owner"
OWNER_VALUE = "ovn4nfv.k8s"

STATES = ("merged", "replaced", "overridden", "deleted", "gathered", "rendered")
WRITE_STATES = ("merged", "replaced", "overridden", "deleted")

_ABSENT = object()


# --------------------------------------------------------------------------
# Fields: one option of the config, stored in one column or one map key.
# --------------------------------------------------------------------------

class Field:
    """One config option and where it lives.

    ``kind`` is one of:

    * ``scalar``: a column that always holds one value;
    * ``optional``: a column of zero or one value; ``None`` in the config;
    * ``set``: a set column; a sorted list in the config;
    * ``map``: a string-to-string map column; the keys listed in
      ``exclude_keys`` belong to other fields (or to the product);
    * ``mapkey``: one key of a map column, ``key``.

    ``to_db``/``from_db`` convert one value between config and column.
    """

    def __init__(self, option, column=None, kind="scalar", table=None, key=None,
                 default=None, exclude_keys=(), to_db=None, from_db=None):
        self.option = option
        self.column = column or option
        self.kind = kind
        self.table = table
        self.key = key
        self.default = default
        self.exclude_keys = tuple(exclude_keys)
        self.to_db = to_db or (lambda value: value)
        self.from_db = from_db or (lambda value: value)

    def empty(self):
        """The column's value when this field is unset."""
        if self.kind == "scalar":
            return self.default
        if self.kind in ("optional", "set"):
            return []
        return {}

    def read(self, cols, table):
        value = cols.get((self.table or table, self.column))
        if self.kind == "scalar":
            return self.from_db(value)
        if self.kind == "optional":
            return self.from_db(value[0]) if value else None
        if self.kind == "set":
            return sorted(self.from_db(v) for v in value or [])
        if self.kind == "map":
            return dict((k, v) for k, v in sorted((value or {}).items())
                        if k not in self.exclude_keys)
        present = (value or {}).get(self.key)
        return None if present is None else self.from_db(present)

    def apply(self, cols, table, value, merge):
        """Write ``value`` (``None``: not given) into the wanted ``cols``."""
        where = (self.table or table, self.column)
        given = value is not None
        if self.kind == "map":
            current = cols.setdefault(where, {})
            if not merge:
                for k in list(current):
                    if k not in self.exclude_keys:
                        del current[k]
            for k, v in (value or {}).items():
                if v is None:
                    current.pop(k, None)
                else:
                    current[k] = v
        elif self.kind == "mapkey":
            current = cols.setdefault(where, {})
            if given:
                current[self.key] = self.to_db(value)
            elif not merge:
                current.pop(self.key, None)
        elif given:
            if self.kind == "scalar":
                cols[where] = self.to_db(value)
            elif self.kind == "optional":
                cols[where] = [self.to_db(value)]
            else:
                cols[where] = sorted(self.to_db(v) for v in value)
        elif not merge:
            cols[where] = self.empty()


def map_of_strings(value, where):
    """Maps in OVSDB hold strings; refuse what would not survive the trip."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not a mapping" % (where, value))
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise ValidationError("%s: key %r is not a non-empty string" % (where, k))
        if v is None:
            out[k] = None
        elif isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, (str, int, float)):
            out[k] = str(v)
        else:
            raise ValidationError("%s.%s: %r is not a string" % (where, k, v))
    return out


# --------------------------------------------------------------------------
# Plan operations
# --------------------------------------------------------------------------

class NewRow:
    """A row this transaction inserts, known by its ``uuid-name``.

    Until the transaction commits, it stands in for the row: a later
    resource in the same batch may look it up by name and read the values
    it was planned with (an unset column reads as empty).
    """

    def __init__(self, table, uuid_name, values=None):
        self.__dict__.update(table=table, uuid_name=uuid_name, values=values or {})

    def __getattr__(self, column):
        return self.values.get(column, {})


class Op:
    """One OVSDB operation against a row (an IDL row, or a :class:`NewRow`).

    ``op`` is ``insert`` (``value``: column -> value), ``update`` (``column``
    takes ``value`` whole), ``mutate`` (``mutator`` ``insert``/``delete`` of
    map keys or set members in ``column``), ``delete``, or ``verify``: the
    transaction fails with "try again" if ``column`` changed since it was
    read, and the plan is made anew.
    """

    def __init__(self, op, table, row, column=None, value=None, mutator=None):
        self.op = op
        self.table = table
        self.row = row
        self.column = column
        self.value = value
        self.mutator = mutator


def _resolve(value, created):
    if isinstance(value, NewRow):
        return created[value.uuid_name]
    if isinstance(value, list):
        return [_resolve(v, created) for v in value]
    return value


def apply_ops(ops, idl, txn):
    """Apply a plan to an open IDL transaction."""
    created = {}
    for op in ops:
        if op.op == "insert":
            row = txn.insert(idl.tables[op.table])
            created[op.row.uuid_name] = row
            for column, value in op.value.items():
                setattr(row, column, _resolve(value, created))
            continue
        row = _resolve(op.row, created)
        if op.op == "verify":
            row.verify(op.column)
        elif op.op == "update":
            setattr(row, op.column, _resolve(op.value, created))
        elif op.op == "delete":
            row.delete()
        elif isinstance(op.value, dict):
            for k, v in sorted(op.value.items()):
                if op.mutator == "insert":
                    row.setkey(op.column, k, v)
                else:
                    row.delkey(op.column, k)
        else:
            for member in op.value:
                member = _resolve(member, created)
                if op.mutator == "insert":
                    row.addvalue(op.column, member)
                else:
                    row.delvalue(op.column, member)


def _datum(value):
    """A value in RFC 7047 JSON notation."""
    if isinstance(value, NewRow):
        return ["named-uuid", value.uuid_name]
    if hasattr(value, "uuid") and hasattr(value, "_table"):
        return ["uuid", str(value.uuid)]
    if isinstance(value, dict):
        return ["map", [[k, _datum(v)] for k, v in sorted(value.items())]]
    if isinstance(value, (list, tuple, set)):
        return ["set", [_datum(v) for v in value]]
    return value


def render_ops(ops):
    """The plan as the ``params`` of an RFC 7047 ``transact`` (without the
    database name): what ``ovsdb-client transact`` would send."""
    out = []
    for op in ops:
        if op.op == "verify":
            continue        # a precondition of the IDL's, not an operation to show
        if op.op == "insert":
            out.append({"op": "insert", "table": op.table, "uuid-name": op.row.uuid_name,
                        "row": dict((c, _datum(v)) for c, v in sorted(op.value.items()))})
            continue
        where = [["_uuid", "==", _datum(op.row)]]
        if op.op == "update":
            out.append({"op": "update", "table": op.table, "where": where,
                        "row": {op.column: _datum(op.value)}})
        elif op.op == "delete":
            out.append({"op": "delete", "table": op.table, "where": where})
        else:
            if isinstance(op.value, dict) and op.mutator == "delete":
                arg = ["set", sorted(op.value)]
            elif isinstance(op.value, dict):
                arg = _datum(op.value)
            else:
                arg = ["set", [_datum(v) for v in op.value]]
            out.append({"op": "mutate", "table": op.table, "where": where,
                        "mutations": [[op.column, op.mutator, arg]]})
    return out


# --------------------------------------------------------------------------
# Reading the database
# --------------------------------------------------------------------------

def column_value(row, column):
    """A column as plain Python: scalar, list (sets and optionals) or dict."""
    value = getattr(row, column)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, tuple, set)):
        return list(value)
    return value


class View:
    """The database as one run sees it, with name maps built once."""

    def __init__(self, idl):
        self.idl = idl
        self._by_name = {}
        self._pending = {}
        self._members = {}
        self._count = 0

    def new_row(self, table, values):
        """A :class:`NewRow` with a uuid-name unique in this view's batch.
        A named row is found by :meth:`lookup` and :meth:`by_name` from
        then on."""
        self._count += 1
        row = NewRow(table, "row%d" % self._count, values)
        if "name" in values:
            self._pending[(table, values["name"])] = row
            if (table, "name") in self._by_name:
                self._by_name[(table, "name")][values["name"]] = row
        return row

    def members(self, row, column):
        """The uuids in ``row``'s reference set ``column``, computed once per
        view (turning a large set into rows costs more than looking it up)."""
        key = (row.uuid, column)
        if key not in self._members:
            self._members[key] = set(r.uuid for r in getattr(row, column))
        return self._members[key]

    def lookup(self, table, name):
        """The row of ``table`` named ``name`` (a list where names repeat,
        None where there is none), through the IDL's name index."""
        pending = self._pending.get((table, name))
        if pending is not None:
            return pending
        if self.idl is None or table not in self.idl.tables:
            return None
        rows = self.idl.tables[table].rows
        index = rows.indexes.get("name")
        if index is None:
            return self.by_name(table).get(name)
        entry = rows.IndexEntry(name=name)
        found = list(index.irange(entry, entry))
        return found[0] if len(found) == 1 else (found or None)

    def rows(self, table):
        if self.idl is None or table not in self.idl.tables:
            return []
        return list(self.idl.tables[table].rows.values())

    def by_name(self, table, column="name"):
        """``{name: row}`` of a table, built on first use. Where names repeat,
        the value is a list of rows, for the caller to report."""
        key = (table, column)
        if key not in self._by_name:
            index = {}
            for row in self.rows(table):
                name = getattr(row, column)
                if name in index:
                    seen = index[name]
                    index[name] = (seen if isinstance(seen, list) else [seen]) + [row]
                else:
                    index[name] = row
            if column == "name":
                index.update((name, row) for (t, name), row in self._pending.items() if t == table)
            self._by_name[key] = index
        return self._by_name[key]

    def one(self, table, name, where, kind):
        """The single row of ``table`` named ``name``, or a problem naming ``where``."""
        row = self.lookup(table, name)
        if row is None:
            raise ValidationError("%s: %s %r does not exist" % (where, kind, name))
        if isinstance(row, list):
            raise ValidationError("%s: %d rows of %s are named %r; rename all but one" % (
                where, len(row), table, name))
        return row


class Current:
    """An object as it is in the database."""

    def __init__(self, key, rows, cols, parent=None):
        self.key = key
        self.rows = rows          # {table: row}
        self.cols = cols          # {(table, column): value}
        self.parent = parent      # the parent row, if any


# --------------------------------------------------------------------------
# Resources
# --------------------------------------------------------------------------

class Parent:
    """The row whose set column holds this resource's rows.

    When the parent is named by a config option, the engine requires that
    option (except under ``deleted``), checks the name with ``name_rule``,
    checks that the parent exists, and refuses an object that already
    exists under another parent rather than moving it silently.
    """

    def __init__(self, option, table, column, kind, name_rule=None):
        self.option = option      # config option naming the parent ("switch")
        self.table = table        # parent table
        self.column = column      # parent's set column of references
        self.kind = kind          # the parent in the operator's words
        self.name_rule = name_rule

    def validate(self, item, where):
        if not self.option:
            return
        if self.option not in item:
            raise ValidationError("%s.%s: the %s is required" % (where, self.option, self.kind))
        if self.name_rule:
            self.name_rule(item[self.option], "%s.%s" % (where, self.option))

    def resolve(self, resource, item, where, view, current):
        """The parent row for ``item``, after checking that it exists and
        that the object is not already under another parent."""
        if not self.option:
            rows = view.rows(self.table)
            if len(rows) != 1:
                raise ValidationError("%s: the database has %d %s rows, not one" % (
                    where, len(rows), self.table))
            return rows[0]
        row = view.one(self.table, item[self.option], "%s.%s" % (where, self.option), self.kind)
        if current is not None and current.parent.name != item[self.option]:
            raise ValidationError(
                "%s.%s: %s %s already exists on %s %r, not on %r; delete it there first" % (
                    where, self.option, resource.name, resource.label(current.key), self.kind,
                    current.parent.name, item[self.option]))
        return row


class Resource:
    """What :func:`reconcile` needs to know about one kind of object.

    Subclasses set the class attributes and may override the hooks. Each
    instance lives for one run.
    """

    name = None                   # e.g. "logical_switch_port"
    schema = None                 # ovsdb.NB_SCHEMA or ovsdb.OVS_SCHEMA
    table = None                  # the object's own table
    tables = ()                   # every table to monitor
    identity = ("name",)          # options that identify an object
    parent = None                 # a Parent, or None for a root table
    fields = ()                   # Field instances, identity included
    owner_column = "external_ids"
    deletes_object = True         # False: ``deleted`` clears values, keeps the row

    # -- static validation ------------------------------------------------
    def validate(self, item, where, state):
        """Check and normalise one config item without the database.

        Returns the item to use. Raises ValidationError.
        """
        return item

    def check(self, item, where, view, current, state):
        """Check one item against the database (unknown parents, clashes)."""

    # -- identity and labels -----------------------------------------------
    def key(self, item):
        return tuple(item.get(option) for option in self.identity)

    def label(self, key):
        return " ".join("%s=%s" % (o, v) for o, v in zip(self.identity, key) if v is not None) \
            if len(self.identity) > 1 else str(key[0])

    # -- reading -----------------------------------------------------------
    def extra_rows(self, row):
        """Rows of other tables that belong to this object, ``{table: row}``."""
        return {}

    def make_current(self, row, parent_row, view):
        rows = {self.table: row}
        rows.update(self.extra_rows(row))
        cols = {}
        for field in self.fields:
            table = field.table or self.table
            if table in rows and (table, field.column) not in cols:
                cols[(table, field.column)] = column_value(rows[table], field.column)
        owner = (self.table, self.owner_column)
        if owner not in cols:
            cols[owner] = column_value(row, self.owner_column)
        config = self.to_config(cols)
        if self.parent and self.parent.option:
            config[self.parent.option] = parent_row.name
        return Current(self.key(config), rows, cols, parent_row)

    def read(self, view):
        """Every object of this kind: ``{key: Current}``; keys seen twice in
        ``duplicates``."""
        found, duplicates = {}, set()
        if self.parent:
            pairs = ((row, prow) for prow in view.rows(self.parent.table)
                     for row in getattr(prow, self.parent.column))
        else:
            pairs = ((row, None) for row in view.rows(self.table))
        for row, prow in pairs:
            current = self.make_current(row, prow, view)
            if current is None:
                continue
            if current.key in found:
                duplicates.add(current.key)
            found[current.key] = current
        return found, duplicates

    def read_declared(self, view, items):
        """Like :meth:`read`, for the declared ``items`` only, through the
        name index; None where the resource has no name identity (the
        caller then reads everything)."""
        if self.identity != ("name",):
            return None
        found, duplicates = {}, set()
        for _where, item in items:
            row = view.lookup(self.table, item.get("name"))
            if row is None or isinstance(row, NewRow):
                continue
            if isinstance(row, list):
                duplicates.add((item.get("name"),))
                continue
            current = self.make_current(row, self._parent_of(view, row, item), view)
            if current is not None:
                found[current.key] = current
        return found, duplicates

    def _parent_of(self, view, row, item):
        if not self.parent:
            return None
        if self.parent.option and item.get(self.parent.option):
            candidate = view.lookup(self.parent.table, item[self.parent.option])
            if candidate is not None and not isinstance(candidate, (list, NewRow)) and \
                    row.uuid in view.members(candidate, self.parent.column):
                return candidate
        for prow in view.rows(self.parent.table):
            if row.uuid in view.members(prow, self.parent.column):
                return prow
        return None

    def to_config(self, cols):
        config = {}
        for field in self.fields:
            value = field.read(cols, self.table)
            if value is None or value == {} or value == []:
                continue
            config[field.option] = value
        return config

    def is_owned(self, current):
        return current.cols.get((self.table, self.owner_column), {}).get(OWNER_KEY) == OWNER_VALUE

    # -- building wanted rows ----------------------------------------------
    def wanted_cols(self, item, current, state):
        """The managed columns as they should be after this run."""
        merge = state == "merged" and current is not None
        if current is not None:
            cols = dict((where, _copy_value(value)) for where, value in current.cols.items())
        else:
            cols = {}
            for field in self.fields:
                where = (field.table or self.table, field.column)
                if where not in cols:
                    cols[where] = field.empty()
            cols.setdefault((self.table, self.owner_column), {})
        for field in self.fields:
            field.apply(cols, self.table, item.get(field.option), merge)
        cols[(self.table, self.owner_column)][OWNER_KEY] = OWNER_VALUE
        return cols

    # -- turning wanted rows into operations ------------------------------------
    def create_ops(self, item, cols, parent_row, view):
        """Insert the object's row(s) and link them to the parent."""
        values = dict((column, value) for (table, column), value in cols.items()
                      if table == self.table and value not in (None, [], {}))
        new = view.new_row(self.table, values)
        ops = [Op("insert", self.table, new, value=values)]
        if self.parent:
            ops.append(Op("mutate", self.parent.table, parent_row, self.parent.column,
                          [new], "insert"))
        return ops

    def update_ops(self, current, cols, view):
        ops = []
        for where in sorted(cols):
            table, column = where
            have, want = current.cols.get(where), cols[where]
            row = current.rows[table]
            if isinstance(want, dict):
                have = have or {}
                # RFC 7047's map insert never overwrites: a changed key is
                # deleted first, then inserted with its new value.
                removed = dict((k, v) for k, v in have.items() if want.get(k) != v)
                added = dict((k, v) for k, v in want.items() if have.get(k) != v)
                if removed:
                    ops.append(Op("mutate", table, row, column, removed, "delete"))
                if added:
                    ops.append(Op("mutate", table, row, column, added, "insert"))
            elif isinstance(want, list):
                if sorted(have or []) != sorted(want):
                    ops.append(Op("update", table, row, column, want))
            elif have != want:
                ops.append(Op("update", table, row, column, want))
        return ops

    def delete_ops(self, current):
        ops = []
        if self.parent:
            ops.append(Op("mutate", self.parent.table, current.parent, self.parent.column,
                          [current.rows[self.table]], "delete"))
        ops.append(Op("delete", self.table, current.rows[self.table]))
        return ops


def _copy_value(value):
    """A copy deep enough for column values: maps and lists of scalars."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


# --------------------------------------------------------------------------
# The sequence
# --------------------------------------------------------------------------

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
            after = resource_config(resource, cols, cur.parent if cur else None, item)
            if cur is None:
                result.changes.append(Change("create", resource.label(key), None, after,
                                             resource.create_ops(item, cols, parent_row, view)))
            else:
                ops = resource.update_ops(cur, cols, view)
                result.changes.append(Change("update", resource.label(key),
                                             current_config(resource, cur), after, ops))
        except ValidationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ValidationError(problems)
    if state == "overridden" or (state == "deleted" and not items):
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
    return execute(database, lambda view: plan(resource, items, mode, view),
                   write=state in WRITE_STATES and not check_mode)


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
