# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Traffic taps: how a tap is declared (its ends, its direction), and taps
to a remote collector: copies of a pod interface's traffic
sent, in GRE or ERSPAN, to an address outside OVN, as an OVN ``Mirror``.

The tap *is* its ``Mirror`` row in the northbound database: its name is
the tap's, its ``sink`` the collector's address, its ``index`` the GRE key
or ERSPAN session, its ``filter`` the direction, and its ``external_ids``
carry the owner mark and the source logical port
(``K_TAP_SOURCE``). The source port's ``mirror_rules`` point at it;
ovn-controller on the node that binds the port makes the tunnel port
(``ovn-<name>``) and the OVS mirror. When a pod is made again its port is
a new row: the pod path (:func:`mirrors_for`) puts the tap back on it in
the same transaction, so the tap follows the pod. ``mirror_rules`` is a
weak reference: deleting the ``Mirror`` leaves nothing behind.

A tap's name is at most 11 characters, because ovn-controller names the
tunnel port ``ovn-<name>`` and an interface name has at most 15.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import K_TAP, K_TAP_SOURCE, OWNER_KEY, OWNER_VALUE
from ..common.naming import in_range, interface_name, ovn_name
from ..ovsdb.declared import CompositeKind, plan_declared
from ..ovsdb.operations import NewRow, Op
from ..ovsdb.plan import Change, Plan

TABLES = ("Logical_Switch_Port", "Mirror")
DIRECTIONS = ("ingress", "egress", "both")
ENCAPSULATIONS = ("gre", "erspan")
FILTERS = {"egress": "from-lport", "ingress": "to-lport", "both": "both"}
KEY_RANGE = {"gre": 4294967295, "erspan": 1023}
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,9}[a-z0-9])?\Z")


def tap_end(value, where):
    """A tap's end: ``{port}`` or ``{pod, interface[, namespace]}`` -> the
    logical port's name."""
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not a mapping" % (where, value))
    if "address" in value:
        raise ValidationError("%s: a collector at an address is a remote tap (kind: remote)" % where)
    if value.get("port"):
        if set(value) - {"port"}:
            raise ValidationError("%s: give a port, or a pod and its interface, not both" % where)
        return ovn_name(value["port"], where + ".port")
    extra = sorted(set(value) - {"pod", "interface", "namespace"})
    if extra or not value.get("pod") or not value.get("interface"):
        raise ValidationError("%s: give a port, or a pod and its interface (and namespace)" % where)
    interface_name(value["interface"], where + ".interface")
    return "%s_%s_%s" % (value.get("namespace") or "default", value["pod"], value["interface"])


class _Kind:
    name = "mirror"
    identity = ("name",)


def _collector(value, where):
    if not isinstance(value, dict) or not value.get("address"):
        raise ValidationError("%s: a remote collector is an address (and encapsulation, key)" % where)
    extra = sorted(set(value) - {"address", "encapsulation", "key"})
    if extra:
        raise ValidationError("%s: %s: a remote collector takes an address, encapsulation and key" % (
            where, ", ".join(extra)))
    ip = addressing.parse_ip(value["address"], where + ".address")
    if ip.is_loopback() or ip.is_multicast() or ip.value == 0:
        raise ValidationError("%s.address: %s cannot receive a tunnel" % (where, ip))
    encapsulation = value.get("encapsulation") or "gre"
    if encapsulation not in ENCAPSULATIONS:
        raise ValidationError("%s.encapsulation: %r is not one of %s" % (
            where, encapsulation, ", ".join(ENCAPSULATIONS)))
    key = in_range(value.get("key", 0), 0, KEY_RANGE[encapsulation], where + ".key")
    return {"address": str(ip), "encapsulation": encapsulation, "key": key}


def check_remote_tap(item, where, filters=tuple(FILTERS.values())):
    """A remote tap as the operator wrote it -> its config form. ``filters``:
    the ``Mirror.filter`` values the northbound schema has."""
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError("%s.name: %r: lower-case letters, digits and '-', at most 11 (ovn-controller "
                              "names the tunnel port ovn-<name>, at most 15)" % (where, name))
    direction = item.get("direction") or "both"
    if direction not in DIRECTIONS:
        raise ValidationError("%s.direction: %r is not one of %s" % (where, direction, ", ".join(DIRECTIONS)))
    if FILTERS[direction] not in filters:
        raise ValidationError("%s.direction: this OVN's mirrors copy one direction each (its northbound "
                              "schema has no Mirror filter %r, OVN 24.03 has); declare an ingress and an "
                              "egress tap, with different keys" % (where, FILTERS[direction]))
    return {"name": name, "direction": direction, "source": tap_end(item.get("source"), where + ".source"),
            "collector": _collector(item.get("collector"), where + ".collector")}


def schema_filters(view):
    """The ``Mirror.filter`` values of the database's schema."""
    table = view.idl.tables.get("Mirror") if view.idl is not None else None
    if table is None:
        raise ValidationError("this OVN northbound database has no Mirror table (OVN 22.12 or later has)")
    enum = table.columns["filter"].type.key.enum
    return tuple(sorted(atom.value for atom in enum.values)) if enum is not None else ()


def _ours(row):
    ids = row.external_ids
    return ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(K_TAP)


def _as_tap(row):
    direction = dict((v, k) for k, v in FILTERS.items()).get(row.filter, row.filter)
    return {"name": row.name, "direction": direction, "source": row.external_ids.get(K_TAP_SOURCE),
            "collector": {"address": row.sink, "encapsulation": row.type, "key": row.index}}


def read_taps(view):
    """``{name: tap}`` of the product's remote taps."""
    return dict((row.name, _as_tap(row)) for row in view.rows("Mirror") if _ours(row))


def mirrors_for(view, port_name):
    """The product's ``Mirror`` rows whose source is the logical port
    ``port_name``: what a port made again must point at."""
    return sorted((row for row in view.rows("Mirror") if _ours(row) and row.external_ids.get(K_TAP_SOURCE) == port_name),
                  key=lambda row: row.name)


def _values(tap):
    collector = tap["collector"]
    return {"name": tap["name"], "type": collector["encapsulation"], "sink": collector["address"],
            "index": collector["key"], "filter": FILTERS[tap["direction"]],
            "external_ids": {OWNER_KEY: OWNER_VALUE, K_TAP: tap["name"], K_TAP_SOURCE: tap["source"]}}


def _port(view, name):
    row = view.lookup("Logical_Switch_Port", name) if name else None
    return None if row is None or isinstance(row, (list, NewRow)) else row


def _points_at(port, mirror):
    return any(rule.uuid == mirror.uuid for rule in port.mirror_rules)


class RemoteTaps(CompositeKind):
    """Taps to a remote collector, by name: ``Mirror`` rows, and their
    source ports' ``mirror_rules``, in one transaction."""

    name = "traffic_tap"
    noun = "tap"

    def read(self, view):
        return read_taps(view)

    def complete(self, item, current, merge, where, view):
        tap = check_remote_tap(item, where, schema_filters(view))
        row = view.lookup("Mirror", tap["name"])
        if row is not None and not _ours(row):
            raise ValidationError("%s.name: mirror %r exists and is not the product's" % (where, tap["name"]))
        return tap

    def realise(self, view, declaration, result):
        _realise_mirrors(view, declaration, result)


def plan_taps(view, items, state):
    """``traffic_tap``'s :class:`~..ovsdb.execution.CompositePlan` for remote
    collectors (:class:`RemoteTaps`)."""
    return plan_declared(RemoteTaps(), view, items, state)


def _realise_mirrors(view, declaration, result):
    """The ``Mirror`` rows and ``mirror_rules`` that make ``declaration`` true."""
    current, wanted = declaration.current, declaration.after
    problems = []
    tunnels = {}
    for name, tap in sorted(wanted.items()):
        collector = tap["collector"]
        tunnel = (collector["address"], collector["encapsulation"], collector["key"])
        if tunnel in tunnels:
            problems.append("taps %s and %s both send to %s in %s with key %d: a node cannot tell their tunnels "
                            "apart; give one another key" % (tunnels[tunnel], name, tunnel[0], tunnel[1], tunnel[2]))
        tunnels[tunnel] = name
    if problems:
        raise ValidationError(problems)
    mirrors = Plan(_Kind(), declaration.state)
    for name in sorted(set(current) | set(wanted)):
        before, after = current.get(name), wanted.get(name)
        result.record(name, before, after)
        row = view.lookup("Mirror", name) if before else None
        if after is None:
            mirrors.changes.append(Change("delete", name, before, None, [Op("delete", "Mirror", row)]))
            continue
        want, ops = _values(after), []
        if row is None:
            row = view.new_row("Mirror", want)
            ops.append(Op("insert", "Mirror", row, value=want))
        else:
            for column, value in sorted(want.items()):
                have = getattr(row, column)
                if (dict(have) if column == "external_ids" else have) != value:
                    ops.append(Op("update", "Mirror", row, column, value))
            old = _port(view, before["source"]) if before["source"] != after["source"] else None
            if old is not None and _points_at(old, row):
                ops.append(Op("mutate", "Logical_Switch_Port", old, "mirror_rules", [row], "delete"))
        source = _port(view, after["source"])
        if source is not None and (isinstance(row, NewRow) or not _points_at(source, row)):
            ops.append(Op("mutate", "Logical_Switch_Port", source, "mirror_rules", [row], "insert"))
        if ops:
            mirrors.changes.append(Change("update" if before else "create", name, before, after, ops))
    result.batch.add(mirrors)
