# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Traffic taps on a node: copies of a pod interface's traffic delivered to
a collector pod's interface on the same node, as an Open vSwitch mirror on
the integration bridge.

A tap is declared by its source and collector *logical ports* (a pod's
``<namespace>_<pod>_<interface>``), not by OVS ports: the declaration is
kept in ``Open_vSwitch:external_ids`` (``K_TAP_PREFIX`` + name), and the
mirror is made from the OVS ports whose ``iface-id`` are those logical
ports, whenever both are on the node. When a pod is made again (a new veth,
the same logical port), the node agent makes the mirror again from the
declaration (:func:`plan_follow`), so the tap follows the pod; while either
end is away there is no mirror; deleted, nothing of it is left.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ..common.errors import ValidationError
from ..cluster.remote_mirrors import DIRECTIONS, tap_end
from ..common.marks import K_TAP, K_TAP_PREFIX, OWNER_KEY, OWNER_VALUE, TAP_MIRROR_PREFIX
from ..ovsdb.declared import CompositeKind, plan_declared
from ..ovsdb.operations import Op
from ..ovsdb.plan import Change, Plan

TABLES = ("Open_vSwitch", "Bridge", "Port", "Interface", "Mirror")
DEFAULT_BRIDGE = "br-int"
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?\Z")


class _Kind:
    name = "mirror"
    identity = ("name",)


def check_port_tap(item, where):
    """A tap to a pod on the node as the operator wrote it -> its config form."""
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError("%s.name: %r: lower-case letters, digits and '-', at most 50" % (where, name))
    direction = item.get("direction") or "both"
    if direction not in DIRECTIONS:
        raise ValidationError("%s.direction: %r is not one of %s" % (where, direction, ", ".join(DIRECTIONS)))
    tap = {"name": name, "direction": direction,
           "source": tap_end(item.get("source"), where + ".source"),
           "collector": tap_end(item.get("collector"), where + ".collector")}
    if tap["source"] == tap["collector"]:
        raise ValidationError("%s.collector: %r is the source too" % (where, tap["collector"]))
    return tap


def read_taps(view):
    """``{name: tap}`` as declared on this node."""
    rows = view.rows("Open_vSwitch")
    out = {}
    for key, value in (rows[0].external_ids if rows else {}).items():
        if key.startswith(K_TAP_PREFIX):
            try:
                out[key[len(K_TAP_PREFIX):]] = json.loads(value)
            except ValueError:
                raise ValidationError("tap %s has a damaged record; delete it" % key[len(K_TAP_PREFIX):])
    return out


def _ports_by_iface_id(view, bridge):
    found = {}
    for port in bridge.ports:
        for iface in port.interfaces:
            iface_id = iface.external_ids.get("iface-id")
            if iface_id:
                found[iface_id] = port
    return found


def _mirror_plan(view, taps, bridge_name):
    """The plan that makes the bridge's product mirrors exactly those of
    ``taps`` whose ends are both on it."""
    result = Plan(_Kind(), "overridden")
    bridge = view.lookup("Bridge", bridge_name)
    if bridge is None or isinstance(bridge, list):
        return result
    ports = _ports_by_iface_id(view, bridge)
    current = dict((m.external_ids.get(K_TAP), m) for m in bridge.mirrors
                   if m.external_ids.get(OWNER_KEY) == OWNER_VALUE and m.external_ids.get(K_TAP))
    for name in sorted(set(current) | set(taps)):
        tap, mirror = taps.get(name), current.get(name)
        source = ports.get(tap["source"]) if tap else None
        collector = ports.get(tap["collector"]) if tap else None
        if source is None or collector is None:
            if mirror is not None:
                result.changes.append(Change("delete", name, {"name": name}, None, [
                    Op("mutate", "Bridge", bridge, "mirrors", [mirror], "delete")]))
            continue
        want = {"name": TAP_MIRROR_PREFIX + name,
                "select_src_port": [source] if tap["direction"] in ("egress", "both") else [],
                "select_dst_port": [source] if tap["direction"] in ("ingress", "both") else [],
                "output_port": [collector],
                "external_ids": {OWNER_KEY: OWNER_VALUE, K_TAP: name}}
        after = {"name": name, "source": source.name, "collector": collector.name,
                 "direction": tap["direction"]}
        if mirror is None:
            new = view.new_row("Mirror", want)
            result.changes.append(Change("create", name, None, after, [
                Op("insert", "Mirror", new, value=want),
                Op("mutate", "Bridge", bridge, "mirrors", [new], "insert")]))
            continue
        ops = []
        for column, value in sorted(want.items()):
            have = getattr(mirror, column)
            if isinstance(value, list):
                if sorted(r.uuid for r in have) != sorted(r.uuid for r in value):
                    ops.append(Op("update", "Mirror", mirror, column, value))
            elif (dict(have) != value) if isinstance(value, dict) else (have != value):
                ops.append(Op("update", "Mirror", mirror, column, value))
        if ops:
            result.changes.append(Change("update", name, None, after, ops))
    return result


class PortTaps(CompositeKind):
    """Taps to a collector pod on this node, by name: declared in
    ``Open_vSwitch:external_ids``, and made OVS mirrors whenever both ends
    are on ``bridge``."""

    name = "traffic_tap"
    noun = "tap"

    def __init__(self, bridge=DEFAULT_BRIDGE):
        self.bridge = bridge

    def read(self, view):
        return read_taps(view)

    def complete(self, item, current, merge, where, view):
        return check_port_tap(item, where)

    def realise(self, view, declaration, result):
        _realise_declarations(view, declaration, result, self.bridge)


def plan_taps(view, items, state, bridge=DEFAULT_BRIDGE):
    """``traffic_tap``'s :class:`~..ovsdb.execution.CompositePlan` for
    collectors on the node (:class:`PortTaps`)."""
    return plan_declared(PortTaps(bridge), view, items, state)


def _realise_declarations(view, declaration, result, bridge):
    """The declarations as ``Open_vSwitch:external_ids`` keys, and the
    mirrors they make now."""
    current, wanted, state = declaration.current, declaration.after, declaration.state
    for name in sorted(set(current) | set(wanted)):
        result.record(name, current.get(name), wanted.get(name))
    root = view.rows("Open_vSwitch")[0]
    removed = dict((K_TAP_PREFIX + n, json.dumps(t, sort_keys=True)) for n, t in current.items()
                   if wanted.get(n) != t)
    added = dict((K_TAP_PREFIX + n, json.dumps(t, sort_keys=True)) for n, t in wanted.items()
                 if current.get(n) != t)
    records = Plan(_Kind(), state)
    ops = []
    if removed:
        ops.append(Op("mutate", "Open_vSwitch", root, "external_ids", removed, "delete"))
    if added:
        ops.append(Op("mutate", "Open_vSwitch", root, "external_ids", added, "insert"))
    if ops:
        records.changes.append(Change("update", "declarations", None, None, ops))
    result.batch.add(records)
    result.batch.add(_mirror_plan(view, wanted, bridge))


def plan_follow(view, bridge=DEFAULT_BRIDGE):
    """The node agent's: make the mirrors what the declarations say, with
    the ports on the bridge now (a pod made again, or gone)."""
    return _mirror_plan(view, read_taps(view), bridge)
