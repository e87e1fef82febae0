# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plan operations: insert, update, mutate, delete.

The same list of :class:`Op` is applied to the IDL, rendered as RFC 7047
``transact`` operations for ``state: rendered``, and summarised as
readable lines in ``operations``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


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


def set_mutations(table, row, column, have, want, removed=None, added=None):
    """The ops that bring ``row``'s set ``column`` from ``have`` to ``want``
    (sets) as mutations: members deleted, then inserted, each written as
    ``removed(member)`` and ``added(member)`` (the member itself by
    default): a large set is never rewritten for one member."""
    ops = []
    if have - want:
        ops.append(Op("mutate", table, row, column, [(removed or _same)(v) for v in sorted(have - want)], "delete"))
    if want - have:
        ops.append(Op("mutate", table, row, column, [(added or _same)(v) for v in sorted(want - have)], "insert"))
    return ops


def _same(value):
    return value


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
