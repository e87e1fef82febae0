# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading the database: a view over the IDL's cache, with indexes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import ValidationError
from .operations import NewRow


_NO_DEFAULT = object()


def cell(row, column, default=_NO_DEFAULT):
    """``getattr(row, column[, default])`` for an IDL row, the short way
    where the row has no change pending in a transaction: python-ovs 3.1
    turns every set and map it is asked for into Python, back into its own
    form with every constraint checked, and into Python again (measured:
    three quarters of what reading a network's settings cost)."""
    datum = _as_sent(row, column)
    if datum is not None:
        return datum.to_python(row._uuid_to_row)
    if default is _NO_DEFAULT:
        return getattr(row, column)
    return getattr(row, column, default)


class NameIndex:
    """A table's rows by ``name``, in a hash: what python-ovs calls an
    index (``rows.indexes["name"]``), with the hooks python-ovs calls
    (``add``, ``remove``, ``clear``, ``columns``) and ``irange``, so that
    it keeps it as it keeps its own. Its own is a sorted list ordered by a comparison function written
    in Python: a lookup among 3,000 ports was about a dozen Python calls
    (14 us), and so was every port a transaction inserts, three times (in
    the transaction, out of it when the transaction ends, and in again
    when the server's update comes). Here each is one dict operation.
    (python-ovs does not re-index a row a server's update renames; nor does
    this. The product never renames a row.) Another string column may be
    indexed the same way (``column``: a QoS row's ``match``)."""

    @classmethod
    def of(cls, table, column="name"):
        """``table``'s index of ``column``, or None if it has no such
        column. Made from the rows on first use, and again where python-ovs
        dropped it: it makes a new set of rows, without indexes, when a
        reconnection dumps the database again."""
        if column not in table.columns:
            return None
        index = table.rows.indexes.get(column)
        if not isinstance(index, cls):
            index = table.rows.indexes[column] = cls(table, column)
            for row in table.rows.values():
                index.add(row)
        return index

    def __init__(self, table, column="name"):
        self.table = table
        self.column = column
        self.columns = [_Column(column)]
        self.uuids = {}         # name: {uuid: None}, in insertion order
        self.names = {}         # uuid: name

    def add(self, row):
        try:
            name = getattr(row, self.column)
        except AttributeError:
            return      # a new row before its name is set: added when it is
        self.remove(row)
        self.uuids.setdefault(name, {})[row.uuid] = None
        self.names[row.uuid] = name

    def remove(self, row):
        name = self.names.pop(row.uuid, None)
        if name is not None:
            held = self.uuids[name]
            del held[row.uuid]
            if not held:
                del self.uuids[name]

    def clear(self):
        self.uuids.clear()
        self.names.clear()

    def equal(self, name):
        """The rows named ``name``."""
        rows = self.table.rows
        return [rows[uuid] for uuid in self.uuids.get(name, ()) if uuid in rows]

    def irange(self, start, end):
        # python-ovs's index_equal and ovsdbapp's index_lookup_all ask this way
        if getattr(start, self.column) != getattr(end, self.column):
            raise NotImplementedError("a name index finds one name, not a range")
        return iter(self.equal(getattr(start, self.column)))


class _Column:
    """What python-ovs reads of an index's column: its name."""

    def __init__(self, column):
        self.column = column


def column_value(row, column):
    """A column as plain Python: scalar, list (sets and optionals) or dict."""
    value = cell(row, column)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, tuple, set)):
        return list(value)
    return value


def _as_sent(row, column):
    """``row``'s datum of ``column`` as the server sent it (a python-ovs
    row with no change pending), else None. A column the server left at
    its default is not in python-ovs 3.1's row data until asked for by
    index: ``get`` would miss it (measured: every pod port's empty
    ``dynamic_addresses`` went the long way)."""
    if isinstance(row, NewRow):
        return None
    attrs = row.__dict__
    data = attrs.get("_data")
    if not data or attrs.get("_changes") or attrs.get("_mutations"):
        return None
    try:
        return data[column]
    except KeyError:
        return None


def _sent(row, column):
    """The atoms of ``row``'s set ``column`` as the server sent it, else None."""
    datum = _as_sent(row, column)
    return datum.values if datum is not None else None


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
        # a name column that is a string (ACL's is an optional one: a list)
        if isinstance(values.get("name"), str):
            self._pending[(table, values["name"])] = row
            if (table, "name") in self._by_name:
                self._by_name[(table, "name")][values["name"]] = row
        return row

    def members(self, row, column):
        """The uuids in ``row``'s reference set ``column``, computed once per
        view, from the row's datum as the server sent it where the row has
        no change pending (python-ovs turns a set into sorted rows, twice,
        at each read of the column: on a switch of thousands of ports that
        is milliseconds)."""
        key = (row.uuid, column)
        if key not in self._members:
            values = _sent(row, column)
            self._members[key] = set(atom.value for atom in values) if values is not None else \
                set(r.uuid for r in getattr(row, column))
        return self._members[key]

    def holds(self, row, column, uuid):
        """Whether ``row``'s reference set ``column`` holds ``uuid``: one
        lookup in the datum as the server sent it, where there is one."""
        values = _sent(row, column)
        if values is None:
            return uuid in self.members(row, column)
        sample = next(iter(values), None)
        return sample is not None and type(sample)(sample.type, uuid) in values

    def size(self, row, column):
        """How many members ``row``'s set ``column`` has."""
        values = _sent(row, column)
        return len(values) if values is not None else len(self.members(row, column))

    def cached(self, key, make):
        """``make()``, computed once per view for ``key``."""
        if key not in self._members:
            self._members[key] = make()
        return self._members[key]

    def planned(self, table):
        """The values of the named rows of ``table`` this view's batch
        creates so far (a rolled-back plan's are gone)."""
        return [row.values for (t, _name), row in self._pending.items() if t == table]

    def savepoint(self):
        """What :meth:`rollback` returns the view to: the rows planned so
        far (a plan that is dropped takes its planned rows with it)."""
        return dict(self._pending)

    def rollback(self, savepoint):
        for key in set(self._pending) - set(savepoint):
            del self._pending[key]
            self._by_name.pop((key[0], "name"), None)     # made again on use

    def referrers(self, table, column):
        """``{uuid: [rows of table]}``: which rows of ``table`` hold each uuid in
        their reference set ``column``; built once per view, so that finding
        the switches that hold each of many load balancers costs one pass."""
        key = ("referrers", table, column)
        if key not in self._members:
            index = {}
            for row in self.rows(table):
                for ref in getattr(row, column):
                    index.setdefault(ref.uuid, []).append(row)
            self._members[key] = index
        return self._members[key]

    def lookup(self, table, name):
        """The row of ``table`` named ``name`` (a list where names repeat,
        None where there is none), through the IDL's name index."""
        pending = self._pending.get((table, name))
        if pending is not None:
            return pending
        if self.idl is None or table not in self.idl.tables:
            return None
        index = NameIndex.of(self.idl.tables[table])
        if index is None:
            return self.by_name(table).get(name)
        found = index.equal(name)
        return found[0] if len(found) == 1 else (found or None)

    def equal(self, table, column, value):
        """The committed rows of ``table`` whose string ``column`` is
        ``value``, through an index of it (:class:`NameIndex`)."""
        if self.idl is None or table not in self.idl.tables:
            return []
        index = NameIndex.of(self.idl.tables[table], column)
        return index.equal(value) if index is not None else []

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
