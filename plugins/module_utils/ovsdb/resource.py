# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Resources: one kind of object, its table, options and identity.

A *resource* (:class:`Resource`) describes one kind of object: its table,
the options of its config and the column or map key each one lives in, how
it is identified and which parent row holds it. :mod:`.plan` does the rest
for every resource alike."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import ValidationError
from ..common.marks import OWNER_KEY, OWNER_VALUE
from .operations import NewRow, Op
from .view import Current, column_value

# A task that names more objects than this monitors their tables whole: a
# condition's clauses cost per clause (sent, matched against every row,
# tracked by the IDL), so naming 1,000 ports cost more than reading a
# 1,000-port table (a no-change run went from 0.89 s to 1.05 s;
# benchmarks/ovsdb_bulk.py), while a task naming a hundred in a 50,000-port
# table must stay narrow (benchmarks/scale.py). A bulk task reads the table.
NARROW_MAX = 256


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
    narrow = False                # True: a task that names its objects monitors only their rows

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
                    view.holds(candidate, self.parent.column, row.uuid):
                return candidate
        for prow in view.rows(self.parent.table):
            if row.uuid in view.members(prow, self.parent.column):
                return prow
        return None

    # -- what to monitor ----------------------------------------------------
    def conditions(self, items, state):
        """``{table: clauses}``, the rows a task on ``items`` reads, for a
        conditional monitor (:class:`~.connection.Database` ``where``): the
        named objects, and the parents the items name. ``{}``, every row,
        where the task must see all (``overridden``; ``deleted`` and
        ``gathered`` without names), the resource is not ``narrow``, or
        the task names more than NARROW_MAX objects (each names one
        parent at most)."""
        if not self.narrow or self.identity != ("name",) or not items or state == "overridden":
            return {}
        names = sorted(set(i["name"] for _w, i in items))
        parents = sorted(set(item[self.parent.option] for _w, item in items if item.get(self.parent.option))) \
            if self.parent and self.parent.option else None
        if len(names) > NARROW_MAX:
            return {}
        where = {self.table: [["name", "==", name] for name in names]}
        if parents is not None:
            where[self.parent.table] = [["name", "==", name] for name in parents]
        return where

    def orphans(self, view):
        """Clauses that find the parents of this table's rows that no row
        of the parent table in ``view`` holds: under :meth:`conditions`, an
        object that exists under a parent the task does not name."""
        if not self.parent or not self.parent.option:
            return []
        held = set()
        for prow in view.rows(self.parent.table):
            held |= view.members(prow, self.parent.column)
        return [[self.parent.column, "includes", ["uuid", str(row.uuid)]]
                for row in view.rows(self.table) if row.uuid not in held]

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
