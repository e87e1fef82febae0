# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OVN load balancers as a reconcile resource: VIPs and their backends,
health checks, and the switches and routers a balancer is attached to.

A balancer's attachments live in the switches' and routers' own
``load_balancer`` columns; they are read back through one reverse index per
view and written as mutations of those rows, in the same transaction."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.naming import in_range, ovn_name
from ..ovsdb.connection import NB_SCHEMA
from ..ovsdb.fields import Field
from ..ovsdb.operations import Op
from ..ovsdb.resource import Resource
from .nb_common import check_maps, external_ids_field, required_name

PROTOCOLS = ("tcp", "udp", "sctp")
SELECTION_FIELDS = ("eth_src", "eth_dst", "ip_src", "ip_dst", "tp_src", "tp_dst")
HEALTH_OPTIONS = ("interval", "timeout", "success_count", "failure_count")
MAX_AFFINITY = 65535          # ovn-nb(5): the largest affinity_timeout OVN supports

_HC = ("Load_Balancer_Health_Check", "vip")
ATTACHMENTS = (("switches", "Logical_Switch", "switch"), ("routers", "Logical_Router", "router"))


class _Vips(Field):
    """``vips``: ``{vip: [backend, ...]}`` in the config, ``{vip: "b1,b2"}`` in OVN."""

    def __init__(self):
        super(_Vips, self).__init__("vips", kind="map")

    def read(self, cols, table):
        value = cols.get((table, "vips")) or {}
        return dict((vip, sorted(b for b in backends.split(",") if b))
                    for vip, backends in sorted(value.items()))

    def apply(self, cols, table, value, merge):
        current = cols.setdefault((table, "vips"), {})
        if not merge:
            current.clear()
        for vip, backends in (value or {}).items():
            if backends is None:
                current.pop(vip, None)
            else:
                current[vip] = ",".join(backends)


class _HealthChecks(Field):
    """``health_checks``: a list of ``{vip, interval, ...}``, kept as
    Load_Balancer_Health_Check rows referenced by the balancer."""

    def __init__(self):
        super(_HealthChecks, self).__init__("health_checks", column="vip",
                                            table="Load_Balancer_Health_Check", kind="map")

    def read(self, cols, table):
        value = cols.get(_HC) or {}
        out = []
        for vip, options in sorted(value.items()):
            check = {"vip": vip}
            check.update((k, int(v)) for k, v in sorted(options.items())
                         if k in HEALTH_OPTIONS and v.isdigit())
            out.append(check)
        return out

    def apply(self, cols, table, value, merge):
        if value is not None:
            cols[_HC] = dict((hc["vip"], dict((k, str(hc[k])) for k in HEALTH_OPTIONS if k in hc))
                             for hc in value)
        elif not merge:
            cols[_HC] = {}


def _vips(item, where):
    """Check and normalise ``vips``; backends sorted and unique, each with a
    port exactly when its VIP has one, and of the VIP's IP version."""
    vips = item.get("vips")
    if not isinstance(vips, dict):
        raise ValidationError("%s.vips: %r is not a mapping of VIP to backends" % (where, vips))
    out = {}
    for vip, backends in vips.items():
        field = "%s.vips[%r]" % (where, vip)
        ip, port = addressing.parse_endpoint(vip, field)
        text = addressing.format_endpoint(ip, port)
        if text in out:
            raise ValidationError("%s: the VIP is written twice" % field)
        if backends is None:
            out[text] = None
            continue
        if isinstance(backends, str):
            backends = [b for b in backends.split(",") if b.strip()]
        if not isinstance(backends, list):
            raise ValidationError("%s: %r is not a list of backends" % (field, backends))
        normal = set()
        for index, backend in enumerate(backends):
            bfield = "%s[%d]" % (field, index)
            bip, bport = addressing.parse_endpoint(backend, bfield)
            if (bport is None) != (port is None):
                raise ValidationError("%s: %r: a backend has a port exactly when its VIP %s has" % (
                    bfield, backend, text))
            if bip.version != ip.version:
                raise ValidationError("%s: %r is not IPv%d like its VIP" % (bfield, backend, ip.version))
            normal.add(addressing.format_endpoint(bip, bport))
        out[text] = sorted(normal)
    item["vips"] = out


def _health_checks(item, where):
    checks, seen = [], set()
    for index, hc in enumerate(item.get("health_checks") or []):
        field = "%s.health_checks[%d]" % (where, index)
        if not isinstance(hc, dict) or "vip" not in hc:
            raise ValidationError("%s: a health check needs its vip" % field)
        ip, port = addressing.parse_endpoint(hc["vip"], field + ".vip")
        if port is None:
            raise ValidationError("%s.vip: %r: OVN checks the health of a VIP with a port" % (
                field, hc["vip"]))
        vip = addressing.format_endpoint(ip, port)
        if vip in seen:
            raise ValidationError("%s.vip: %r has a health check already" % (field, vip))
        seen.add(vip)
        check = {"vip": vip}
        for option in HEALTH_OPTIONS:
            if hc.get(option) is not None:
                check[option] = in_range(hc[option], 1, 65535, "%s.%s" % (field, option))
        checks.append(check)
    item["health_checks"] = checks


class LoadBalancer(Resource):
    """A load balancer: VIPs to backends, and where it applies."""

    name = "load_balancer"
    schema = NB_SCHEMA
    table = "Load_Balancer"
    tables = ("Load_Balancer", "Load_Balancer_Health_Check", "Logical_Switch", "Logical_Router")
    fields = (
        Field("name", default=""),
        Field("protocol", kind="optional"),
        _Vips(),
        Field("selection_fields", kind="set"),
        Field("ip_port_mappings", kind="map"),
        Field("affinity_timeout", column="options", kind="mapkey", key="affinity_timeout",
              to_db=str, from_db=lambda v: int(v) if str(v).isdigit() else v),
        Field("options", kind="map", exclude_keys=("affinity_timeout",)),
        Field("switches", column="load_balancer", table="Logical_Switch", kind="set"),
        Field("routers", column="load_balancer", table="Logical_Router", kind="set"),
        _HealthChecks(),
        external_ids_field(),
    )

    def validate(self, item, where, state):
        required_name(item, where)
        check_maps(item, where, ("options", "external_ids", "ip_port_mappings"))
        if state == "deleted":
            return item
        if "protocol" in item and item["protocol"] not in PROTOCOLS:
            raise ValidationError("%s.protocol: %r is not one of %s" % (
                where, item["protocol"], ", ".join(PROTOCOLS)))
        if "vips" in item:
            _vips(item, where)
        if "health_checks" in item:
            _health_checks(item, where)
        for index, value in enumerate(item.get("selection_fields") or []):
            if value not in SELECTION_FIELDS:
                raise ValidationError("%s.selection_fields[%d]: %r is not one of %s" % (
                    where, index, value, ", ".join(SELECTION_FIELDS)))
        if "affinity_timeout" in item:
            in_range(item["affinity_timeout"], 1, MAX_AFFINITY, where + ".affinity_timeout")
        if "affinity_timeout" in (item.get("options") or {}):
            raise ValidationError("%s.options.affinity_timeout: set it with the affinity_timeout "
                                  "option" % where)
        for ip in (item.get("ip_port_mappings") or {}):
            addressing.parse_ip(ip, "%s.ip_port_mappings[%r]" % (where, ip))
        for option, _table, kind in ATTACHMENTS:
            names = item.get(option)
            if names is None:
                continue
            if not isinstance(names, list):
                raise ValidationError("%s.%s: %r is not a list of %s names" % (where, option, names, kind))
            for index, name in enumerate(names):
                ovn_name(name, "%s.%s[%d]" % (where, option, index))
                if name in names[:index]:
                    raise ValidationError("%s.%s[%d]: %r is listed twice" % (where, option, index, name))
        return item

    def check(self, item, where, view, current, state):
        if state == "deleted":
            return
        for option, table, kind in ATTACHMENTS:
            for index, name in enumerate(item.get(option) or []):
                view.one(table, name, "%s.%s[%d]" % (where, option, index), kind)
        if current is None and not item.get("vips"):
            raise ValidationError("%s: a new load balancer needs vips" % where)
        vips = {}
        if current is not None and state == "merged":
            vips = dict(current.cols.get((self.table, "vips")) or {})
        vips.update(item.get("vips") or {})
        for index, hc in enumerate(item.get("health_checks") or []):
            if not vips.get(hc["vip"]):
                raise ValidationError("%s.health_checks[%d].vip: %r is not one of the balancer's "
                                      "VIPs with backends" % (where, index, hc["vip"]))

    def make_current(self, row, parent_row, view):
        current = super(LoadBalancer, self).make_current(row, parent_row, view)
        for _option, table, _kind in ATTACHMENTS:
            holders = view.referrers(table, "load_balancer").get(row.uuid, [])
            current.cols[(table, "load_balancer")] = sorted(h.name for h in holders)
            current.rows[table] = dict((h.name, h) for h in holders)
        current.cols[_HC] = dict((hc.vip, dict(hc.options)) for hc in row.health_check)
        current.rows["Load_Balancer_Health_Check"] = dict((hc.vip, hc) for hc in row.health_check)
        return current

    def wanted_cols(self, item, current, state):
        cols = super(LoadBalancer, self).wanted_cols(item, current, state)
        # OVN reads an empty protocol as tcp; a new balancer says so.
        if not cols.get((self.table, "protocol")):
            cols[(self.table, "protocol")] = ["tcp"]
        return cols

    def to_config(self, cols):
        config = super(LoadBalancer, self).to_config(cols)
        config.setdefault("protocol", "tcp")
        return config

    @staticmethod
    def _split(cols):
        """The balancer's own columns, and the attachments and checks apart."""
        cols = dict(cols)
        attach = dict((table, cols.pop((table, "load_balancer"), []))
                      for _option, table, _kind in ATTACHMENTS)
        return cols, attach, cols.pop(_HC, {})

    @staticmethod
    def _insert_checks(checks, view):
        ops = []
        for vip, options in sorted(checks.items()):
            values = {"vip": vip, "options": options}
            ops.append(Op("insert", "Load_Balancer_Health_Check",
                          view.new_row("Load_Balancer_Health_Check", values), value=values))
        return ops

    def create_ops(self, item, cols, parent_row, view):
        cols, attach, checks = self._split(cols)
        ops = self._insert_checks(checks, view)
        lb_ops = super(LoadBalancer, self).create_ops(item, cols, parent_row, view)
        if ops:
            lb_ops[0].value["health_check"] = [op.row for op in ops]
        lb = lb_ops[0].row
        for table, names in sorted(attach.items()):
            for name in names:
                lb_ops.append(Op("mutate", table, view.lookup(table, name), "load_balancer",
                                 [lb], "insert"))
        return ops + lb_ops

    def update_ops(self, current, cols, view):
        cols, attach, want = self._split(cols)
        lb = current.rows[self.table]
        ops = super(LoadBalancer, self).update_ops(current, cols, view)
        for table, names in sorted(attach.items()):
            have = set(current.cols.get((table, "load_balancer")) or [])
            for name in sorted(have - set(names)):
                ops.append(Op("mutate", table, current.rows[table][name], "load_balancer",
                              [lb], "delete"))
            for name in sorted(set(names) - have):
                ops.append(Op("mutate", table, view.lookup(table, name), "load_balancer",
                              [lb], "insert"))
        have = current.cols.get(_HC) or {}
        rows = current.rows.get("Load_Balancer_Health_Check", {})
        for vip in sorted(set(have) - set(want)):
            ops.append(Op("mutate", self.table, lb, "health_check", [rows[vip]], "delete"))
        for vip in sorted(set(have) & set(want)):
            if have[vip] != want[vip]:
                ops.append(Op("update", "Load_Balancer_Health_Check", rows[vip], "options", want[vip]))
        added = dict((vip, o) for vip, o in want.items() if vip not in have)
        for insert in self._insert_checks(added, view):
            ops.append(insert)
            ops.append(Op("mutate", self.table, lb, "health_check", [insert.row], "insert"))
        return ops

    def delete_ops(self, current):
        lb = current.rows[self.table]
        ops = []
        for _option, table, _kind in ATTACHMENTS:
            for name in sorted(current.rows.get(table) or {}):
                ops.append(Op("mutate", table, current.rows[table][name], "load_balancer",
                              [lb], "delete"))
        ops.append(Op("delete", self.table, lb))
        return ops
