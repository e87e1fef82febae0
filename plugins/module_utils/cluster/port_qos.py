# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""QoS per pod interface: a rate, a burst and a DSCP mark on what the pod
sends, from its request, within its network's cap; realised with OVN's
``QoS`` table.

**The request.** An interface's entry may carry ``qos: {"rate": kbit/s,
"burst": kbit, "dscp": 0-63}`` (its schema is :mod:`.request_schema`'s;
:func:`asked` holds it to the rest): at least one of ``rate`` and
``dscp``, and ``burst`` only beside a ``rate``. It applies to the traffic
the pod **sends** on that interface: OVN's ``from-lport`` direction,
matched on ``inport == "<port>"``. What it sends above the rate is dropped
(a policer: OVS's meter, no queue); what it sends carries the DSCP. A
change of ``qos`` on a running pod is made in place: the port stays.

**The cap.** ``virtual_network``'s ``qos_max: {rate, burst}`` is the most
an interface on the network may ask for, recorded on its switch
(``K_QOS_MAX_RATE``, ``K_QOS_MAX_BURST``; :func:`check_cap`,
:func:`cap_records`, :func:`cap_of`). A request above it is served at it,
never refused, and its pod gets a Warning Event :data:`CAPPED` naming what
it asked for and what it got (:func:`capped`); a rate asked for without a
burst gets the cap's burst. An interface that asks for nothing is not
limited: the cap bounds requests, it is no default.

**The rows.** One ``QoS`` row per port whose request asks, in its
network's switch's ``qos_rules``: priority :data:`PRIORITY`,
``from-lport``, ``bandwidth`` ``{rate, burst}`` and/or ``action``
``{dscp}``, marked with the pod's marks, ``ROLE`` ``ROLE_POD_QOS`` and the
port's name (``K_QOS_PORT``). The watcher makes and mends them with the
port's security (:func:`plan_qos`, from
:func:`.pod_ports.plan_port_security`: a port whose row differs from its
request is not served yet) and deletes them with the port
(:func:`plan_forget`, from :func:`.pod_ports.plan_drop_rows`); a row
changed or deleted by hand brings the watcher back to its pod
(:func:`is_pod_qos`). Where the view does not monitor the ``QoS`` table
(a caller that never serves QoS) nothing here plans anything.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ..common.errors import ValidationError
from ..common.marks import (
    K_QOS_MAX_BURST, K_QOS_MAX_RATE, K_QOS_PORT, K_UID, OWNER_KEY, OWNER_VALUE, ROLE, ROLE_POD_QOS)
from ..common.naming import in_range
from ..ovsdb.operations import NewRow, Op
from ..ovsdb.plan import Change, Plan
from ..ovsdb.view import cell
from .request_schema import MAX_BURST, MAX_RATE

TABLE = "QoS"
TABLES = (TABLE,)
CAPPED = "QoSCapped"            # the Warning Event of a request above its network's cap
DRIFT = "qos_drift"             # the audit's finding: a port's row is not what its request asks
CLASSES = (DRIFT,)
# OVN's QoS priority (0-32767); one row per port, and the rows' matches
# (one inport each) never overlap
PRIORITY = 2000
DIRECTION = "from-lport"
_UNITS = (("rate", "kbit/s"), ("burst", "kbit"), ("dscp", ""))


def asked(value, where):
    """A request entry's ``qos`` (its schema passed) as ``{rate?, burst?,
    dscp?}`` of whole numbers, or None when the entry has none."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not an object" % (where, value))
    out = {}
    for key, low, high in (("rate", 1, MAX_RATE), ("burst", 1, MAX_BURST), ("dscp", 0, 63)):
        number = value.get(key)
        if number is None:
            continue
        if isinstance(number, bool) or not isinstance(number, int):     # 10.0 passes JSON Schema's "integer"
            raise ValidationError("%s.%s: %r is not a whole number" % (where, key, number))
        out[key] = in_range(number, low, high, "%s.%s" % (where, key))
    if "rate" not in out and "dscp" not in out:
        raise ValidationError("%s: asks for neither a rate nor a dscp" % where)
    if "burst" in out and "rate" not in out:
        raise ValidationError("%s.burst: a burst needs a rate beside it" % where)
    return out


def check_cap(value, where):
    """virtual_network's ``qos_max``: ``{rate[, burst]}``, None when not
    given, or False when given empty (under ``merged``: the cap goes)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not a dict" % (where, value))
    unknown = sorted(set(value) - {"rate", "burst"})
    if unknown:
        raise ValidationError("%s: unknown option(s) %s (known: rate, burst)" % (where, ", ".join(unknown)))
    given = dict((k, v) for k, v in value.items() if v is not None)
    if not given:
        return False
    if "rate" not in given:
        raise ValidationError("%s.rate: a cap needs a rate (kbit/s); give an empty qos_max to remove it" % where)
    out = {"rate": in_range(given["rate"], 1, MAX_RATE, where + ".rate")}
    if "burst" in given:
        out["burst"] = in_range(given["burst"], 1, MAX_BURST, where + ".burst")
    return out


def cap_records(cap):
    """A network's cap as the switch's ``external_ids`` (None removes a key)."""
    cap = cap or {}
    return {K_QOS_MAX_RATE: str(cap["rate"]) if cap.get("rate") else None,
            K_QOS_MAX_BURST: str(cap["burst"]) if cap.get("burst") else None}


def cap_of(ids):
    """The cap a switch's ``external_ids`` record, or None. A record that
    is not a number (written by hand) is no cap."""
    text = str(ids.get(K_QOS_MAX_RATE) or "")
    if not text.isdigit() or not int(text):
        return None
    out = {"rate": int(text)}
    burst = str(ids.get(K_QOS_MAX_BURST) or "")
    if burst.isdigit() and int(burst):
        out["burst"] = int(burst)
    return out


def applied(qos, cap):
    """``(what is applied, [the keys that were above the cap])`` for a
    request's ``qos`` on a network whose cap is ``cap`` (None: none)."""
    got, over = dict(qos), []
    if cap and "rate" in qos:
        if qos["rate"] > cap["rate"]:
            got["rate"] = cap["rate"]
            over.append("rate")
        if cap.get("burst") and qos.get("burst", 0) > cap["burst"]:
            got["burst"] = cap["burst"]
            over.append("burst")
        elif cap.get("burst") and "burst" not in qos:
            got["burst"] = cap["burst"]
    return got, over


def said(qos):
    """``rate 10000 kbit/s, burst 1000 kbit, dscp 46``."""
    return ", ".join(("%s %s %s" % (key, qos[key], unit)).strip() for key, unit in _UNITS if key in qos)


def is_pod_qos(row):
    """Whether ``row`` is a pod port's QoS row (what :func:`plan_qos` makes)."""
    try:
        ids = cell(row, "external_ids") or {}
    except AttributeError:      # a row the IDL notifies of may lack columns
        return False
    return ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(ROLE) == ROLE_POD_QOS


def _monitored(view):
    return view.idl is not None and TABLE in view.idl.tables


def _switch(view, name):
    switch = view.lookup("Logical_Switch", name)
    return None if switch is None or isinstance(switch, (list, NewRow)) else switch


def _rows_of(view, ports):
    """``{port name: [rows]}`` of the pod QoS rows of ``ports`` (names),
    found by their ``match`` through an index: what a pod's serving and
    its ports' deletion read, without a scan of the table. A row whose
    match was changed by hand is not found so: the audit's scan
    (:func:`_rows_by_port`) finds it."""
    out = {}
    for port in ports:
        rows = [r for r in view.equal(TABLE, "match", "inport == %s" % json.dumps(port))
                if is_pod_qos(r) and cell(r, "external_ids").get(K_QOS_PORT) == port]
        if rows:
            out[port] = sorted(rows, key=lambda r: str(r.uuid))
    return out


def _rows_by_port(view):
    """``{port name: [rows]}`` of the pod ports' QoS rows, once a view (the
    audit's: every row, whatever its match)."""
    def build():
        out = {}
        for row in view.rows(TABLE):
            if is_pod_qos(row) and cell(row, "external_ids").get(K_QOS_PORT):
                out.setdefault(cell(row, "external_ids")[K_QOS_PORT], []).append(row)
        return dict((port, sorted(rows, key=lambda r: str(r.uuid))) for port, rows in out.items())
    return view.cached(("pod-qos",), build)


def capped(view, requests):
    """The Event lines of ``requests`` whose ``qos`` is above their
    network's cap: what each asked for, the cap, and what it got."""
    out = []
    for request in requests:
        switch = _switch(view, request.network) if request.qos else None
        cap = cap_of(cell(switch, "external_ids")) if switch is not None else None
        got, over = applied(request.qos, cap) if cap else (None, None)
        if over:
            out.append("interface %s (%s.qos) asked for %s; network %s allows at most %s: it gets %s" % (
                request.interface, request.where, said(request.qos), request.network, said(cap), said(got)))
    return out


class _Rows:
    """What :func:`plan_qos`'s and :func:`plan_forget`'s changes are said of."""

    name = "pod_qos"
    identity = ("port",)


def _config(row):
    """A QoS row in the request's terms."""
    out = dict((k, v) for k, v in cell(row, "bandwidth").items() if k in ("rate", "burst"))
    out.update((k, v) for k, v in cell(row, "action").items() if k == "dscp")
    return out


def _values(pod, request, port, qos):
    """The columns of ``port``'s row, applying ``qos``."""
    return {"priority": PRIORITY, "direction": DIRECTION, "match": "inport == %s" % json.dumps(port),
            "bandwidth": dict((k, qos[k]) for k in ("rate", "burst") if k in qos),
            "action": {"dscp": qos["dscp"]} if "dscp" in qos else {},
            "external_ids": dict(pod.marks(request.interface),
                                 **{OWNER_KEY: OWNER_VALUE, ROLE: ROLE_POD_QOS, K_QOS_PORT: port})}


def _dropped(view, port, row):
    """The :class:`Change` that deletes ``port``'s QoS ``row``: out of every
    switch that holds it (a row no switch holds is gone with it)."""
    holders = view.referrers("Logical_Switch", "qos_rules").get(row.uuid, [])
    ops = [Op("mutate", "Logical_Switch", switch, "qos_rules", [row], "delete") for switch in holders]
    return Change("delete", "qos of port %s" % port, dict(_config(row), port=port), None,
                  ops or [Op("delete", TABLE, row)])


def plan_qos(view, pod, requests, ports):
    """A :class:`Plan` giving each of ``pod``'s ports (``ports``,
    ``{interface: row}``) the QoS row its request asks for, within its
    network's cap, and no row where it asks for none: a missing row made,
    a row that differs mended, a row on another switch or a second one
    deleted."""
    result = Plan(_Rows(), "merged")
    if not _monitored(view):
        return result
    held = _rows_of(view, [cell(p, "name") for p in ports.values()])
    for request in requests:
        port, switch = ports.get(request.interface), _switch(view, request.network)
        if port is None or switch is None:
            continue
        name = cell(port, "name")
        want = None
        if request.qos:
            want = _values(pod, request, name, applied(request.qos, cap_of(cell(switch, "external_ids")))[0])
        rows = held.get(name, [])
        keep = next((r for r in rows if view.holds(switch, "qos_rules", r.uuid)), None) if want else None
        result.changes.extend(_dropped(view, name, row) for row in rows if row is not keep)
        if want is None:
            continue
        after = dict(_config_of(want), port=name)
        if keep is None:
            row = view.new_row(TABLE, want)
            result.changes.append(Change("create", "qos of port %s" % name, None, after, [
                Op("insert", TABLE, row, value=want), Op("mutate", "Logical_Switch", switch, "qos_rules", [row], "insert")]))
            continue
        ops = [Op("update", TABLE, keep, column, want[column]) for column in ("priority", "direction", "match",
                                                                              "bandwidth", "action")
               if _plain(cell(keep, column)) != want[column]]
        ids = dict(cell(keep, "external_ids"))
        if any(ids.get(k) != v for k, v in want["external_ids"].items()):
            ops.append(Op("update", TABLE, keep, "external_ids", dict(ids, **want["external_ids"])))
        if ops:
            result.changes.append(Change("update", "qos of port %s" % name, dict(_config(keep), port=name), after, ops))
    return result


def _config_of(values):
    out = dict(values["bandwidth"])
    out.update(values["action"])
    return out


def _plain(value):
    """A column's value as :func:`_values` writes it (an optional integer
    reads as itself; maps as dicts)."""
    return dict(value) if isinstance(value, dict) else value


def plan_capped(view, network):
    """A :class:`Plan` bringing every pod QoS row of ``network`` (a name)
    within its cap as it is now: the watcher's at once when the cap is
    lowered, whatever the pods' serving is doing meanwhile (their next
    serving writes what their requests get under it)."""
    result = Plan(_Rows(), "merged")
    switch = _switch(view, network) if _monitored(view) else None
    cap = cap_of(cell(switch, "external_ids")) if switch is not None else None
    for row in (switch.qos_rules if cap else ()):
        if is_pod_qos(row) and cell(row, "bandwidth").get("rate"):
            got, over = applied(dict(cell(row, "bandwidth")), cap)
            if over:
                port = cell(row, "external_ids").get(K_QOS_PORT)
                result.changes.append(Change("update", "qos of port %s" % port, dict(_config(row), port=port),
                                             dict(_config(row), port=port, **got),
                                             [Op("update", TABLE, row, "bandwidth", got)]))
    return result


def plan_forget(view, ports):
    """A :class:`Plan` deleting the QoS rows of ``ports`` (names), which go."""
    result = Plan(_Rows(), "deleted")
    if not _monitored(view):
        return result
    held = _rows_of(view, set(ports))
    for port in sorted(set(ports)):
        result.changes.extend(_dropped(view, port, row) for row in held.get(port, []))
    return result


def audit(view, pod, requests, finding):
    """The audit's findings for ``pod`` (its requests parsed): each port of
    it whose QoS row is missing, differs from its request (within its
    network's cap), or is there unasked. The watcher mends them (a row
    changed by hand at once, one it missed while it was away at its start),
    so none carries a repair."""
    ports = {}
    for request in requests:
        row = view.lookup("Logical_Switch_Port", pod.port_name(request.interface))
        if row is not None and not isinstance(row, (list, NewRow)) and cell(row, "external_ids").get(K_UID) == pod.uid:
            ports[request.interface] = row
    out = []
    for change in plan_qos(view, pod, requests, ports).changes:
        port = change.label.rsplit(" ", 1)[-1]
        if change.action == "create":
            what = "has no QoS row; its request asks for %s" % said(change.after)
        elif change.action == "delete":
            what = "has a QoS row (%s) its request does not ask for" % said(change.before)
        else:
            what = "has a QoS row (%s) that is not what its request asks for (%s, within its network's cap)" % (
                said(change.before), said(change.after))
        out.append(finding(DRIFT, "error", "nb", [port], "port %s of pod %s %s" % (port, pod, what)))
    return out
