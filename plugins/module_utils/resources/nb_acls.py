# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Port groups, ACLs and meters as reconcile resources.

A port group (``@name`` in a match) holds switch ports, by name here;
its members change as pods come and go, so a change is written as set
mutations (members added, members removed), never as the whole set: a
group of a thousand ports is not rewritten for one pod. An ACL is known by
where it hangs (a port group or a switch), its direction, priority and
match, as in ``ovn-nbctl acl-add``; everything else of it (action, name,
logging, options) is managed like any other column.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ..common.errors import ValidationError
from ..common.naming import in_range, ovn_name
from ..ovsdb.connection import NB_SCHEMA
from ..ovsdb.fields import Field
from ..ovsdb.operations import Op, set_mutations
from ..ovsdb.resource import Parent, Resource
from .nb_common import check_maps, external_ids_field

DIRECTIONS = ("from-lport", "to-lport")
ACTIONS = ("allow", "allow-related", "allow-stateless", "drop", "reject")
SEVERITIES = ("alert", "warning", "notice", "info", "debug")

# a port group's name is an identifier in matches (``@name``)
_GROUP = re.compile(r"^[A-Za-z_.][A-Za-z_.0-9]{0,252}\Z")


def group_name(value, field):
    """A port group's name: what a match can say after ``@``."""
    if not isinstance(value, str) or not _GROUP.match(value):
        raise ValidationError("%s: %r is not a port group name (letters, digits, '_' and '.', "
                              "not starting with a digit)" % (field, value))
    return value


class PortGroup(Resource):
    """A port group. With ``members`` false (a declaration), its ports are
    left to whoever keeps them current."""

    name = "port_group"
    schema = NB_SCHEMA
    table = "Port_Group"
    tables = ("Port_Group", "Logical_Switch_Port")
    narrow = True

    def __init__(self, members=True):
        self.members = members
        self.fields = (Field("name", default=""), external_ids_field()) + (
            (Field("ports", kind="set"),) if members else ())

    def validate(self, item, where, state):
        if "name" not in item:
            raise ValidationError("%s.name: a name is required" % where)
        group_name(item["name"], where + ".name")
        check_maps(item, where, ("external_ids",))
        if state != "deleted" and self.members and "ports" in item:
            ports = item.get("ports") or []
            if not isinstance(ports, list):
                raise ValidationError("%s.ports: %r is not a list of switch port names" % (where, ports))
            item["ports"] = sorted(set(ovn_name(p, "%s.ports[%d]" % (where, i)) for i, p in enumerate(ports)))
        return item

    def check(self, item, where, view, current, state):
        if state == "deleted" or not self.members:
            return
        problems = []
        for port in item.get("ports") or []:
            row = view.lookup("Logical_Switch_Port", port)
            if row is None:
                problems.append("%s.ports: switch port %r does not exist" % (where, port))
            elif isinstance(row, list):
                problems.append("%s.ports: %d switch ports are named %r" % (where, len(row), port))
        if problems:
            raise ValidationError(problems)

    def make_current(self, row, parent_row, view):
        current = super(PortGroup, self).make_current(row, parent_row, view)
        if self.members:
            # members by name (a weak reference to a port gone is gone)
            held = dict((port.name, port) for port in row.ports)
            current.cols[(self.table, "ports")] = sorted(held)
            current.members = held
        return current

    def create_ops(self, item, cols, parent_row, view):
        if self.members:
            cols = dict(cols)
            cols[(self.table, "ports")] = [view.lookup("Logical_Switch_Port", p)
                                           for p in cols.get((self.table, "ports")) or []]
        return super(PortGroup, self).create_ops(item, cols, parent_row, view)

    def update_ops(self, current, cols, view):
        where = (self.table, "ports")
        if not self.members:
            return super(PortGroup, self).update_ops(current, cols, view)
        want = set(cols[where])
        have = set(current.cols.get(where) or [])
        rest = dict((k, v) for k, v in cols.items() if k != where)
        ops = super(PortGroup, self).update_ops(current, rest, view)
        return ops + set_mutations(self.table, current.rows[self.table], "ports", have, want,
                                   removed=lambda p: current.members[p],
                                   added=lambda p: view.lookup("Logical_Switch_Port", p))


class _ACL(Resource):
    """What an ACL is, wherever it hangs."""

    schema = NB_SCHEMA
    table = "ACL"
    fields = (
        Field("direction", default="to-lport"),
        Field("priority", default=0),
        Field("match", default=""),
        Field("action", default="drop"),
        Field("name", kind="optional"),
        Field("log", default=False),
        Field("severity", kind="optional"),
        Field("meter", kind="optional"),
        Field("options", kind="map"),
        external_ids_field(),
    )

    def validate(self, item, where, state):
        if item.get("direction") not in DIRECTIONS:
            raise ValidationError("%s.direction: %r is not one of %s" % (
                where, item.get("direction"), ", ".join(DIRECTIONS)))
        in_range(item.get("priority"), 0, 32767, where + ".priority")
        if not isinstance(item.get("match"), str) or not item["match"].strip():
            raise ValidationError("%s.match: %r is not a match" % (where, item.get("match")))
        check_maps(item, where, ("options", "external_ids"))
        if state == "deleted":
            return item
        if item.get("action") not in ACTIONS:
            raise ValidationError("%s.action: %r is not one of %s" % (where, item.get("action"), ", ".join(ACTIONS)))
        name = item.get("name")
        if name is not None and (not isinstance(name, str) or len(name) > 63):
            raise ValidationError("%s.name: %r is not a name of at most 63 characters" % (where, name))
        if not isinstance(item.get("log", False), bool):
            raise ValidationError("%s.log: %r is not true or false" % (where, item.get("log")))
        if item.get("severity") is not None and item["severity"] not in SEVERITIES:
            raise ValidationError("%s.severity: %r is not one of %s" % (
                where, item["severity"], ", ".join(SEVERITIES)))
        return item


class PortGroupACL(_ACL):
    """An ACL of a port group: ``group`` names it."""

    name = "port_group_acl"
    tables = ("Port_Group", "ACL")
    identity = ("group", "direction", "priority", "match")
    parent = Parent("group", "Port_Group", "acls", "port group", group_name)


class SwitchACL(_ACL):
    """An ACL of a logical switch: ``switch`` names it."""

    name = "switch_acl"
    tables = ("Logical_Switch", "ACL")
    identity = ("switch", "direction", "priority", "match")
    parent = Parent("switch", "Logical_Switch", "acls", "switch", ovn_name)


class Meter(Resource):
    """A meter with one drop band: ``rate`` (of ``unit``) and ``burst_size``;
    ``fair``, a bucket per user (per ACL, for ACL logging)."""

    name = "meter"
    schema = NB_SCHEMA
    table = "Meter"
    tables = ("Meter", "Meter_Band")
    fields = (
        Field("name", default=""),
        Field("unit", default="pktps"),
        Field("fair", kind="optional"),
        Field("rate", table="Meter_Band", default=1),
        Field("burst_size", table="Meter_Band", default=0),
        external_ids_field(),
    )

    def validate(self, item, where, state):
        if "name" not in item:
            raise ValidationError("%s.name: a name is required" % where)
        ovn_name(item["name"], where + ".name")
        check_maps(item, where, ("external_ids",))
        if state == "deleted":
            return item
        if item.get("unit", "pktps") not in ("pktps", "kbps"):
            raise ValidationError("%s.unit: %r is not pktps or kbps" % (where, item.get("unit")))
        in_range(item.get("rate"), 1, 4294967295, where + ".rate")
        if "burst_size" in item:
            in_range(item["burst_size"], 0, 4294967295, where + ".burst_size")
        if "fair" in item and not isinstance(item["fair"], bool):
            raise ValidationError("%s.fair: %r is not true or false" % (where, item["fair"]))
        return item

    def extra_rows(self, row):
        bands = list(row.bands)
        return {"Meter_Band": bands[0]} if len(bands) == 1 else {}

    def make_current(self, row, parent_row, view):
        # a meter of several bands is not one this resource made or can say
        if len(list(row.bands)) != 1:
            return None
        return super(Meter, self).make_current(row, parent_row, view)

    def create_ops(self, item, cols, parent_row, view):
        band_values = {"action": "drop", "rate": cols[("Meter_Band", "rate")],
                       "burst_size": cols.get(("Meter_Band", "burst_size")) or 0}
        band = view.new_row("Meter_Band", band_values)
        values = dict((column, value) for (table, column), value in cols.items()
                      if table == self.table and value not in (None, [], {}))
        values["bands"] = [band]
        meter = view.new_row(self.table, values)
        return [Op("insert", "Meter_Band", band, value=band_values), Op("insert", self.table, meter, value=values)]
