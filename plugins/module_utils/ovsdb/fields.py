# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fields: one option of a resource's config, stored in one column or one map key."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import ValidationError


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


def map_options(item, where, options):
    """Check, in place, each of ``options`` that ``item`` carries as a map of
    strings (:func:`map_of_strings`)."""
    for option in options:
        if option in item:
            item[option] = map_of_strings(item[option], "%s.%s" % (where, option))
