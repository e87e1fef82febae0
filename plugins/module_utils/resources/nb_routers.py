# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OVN logical routers, their ports, static routes and NAT as reconcile
resources, described once here and used by the modules and the daemons."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.naming import in_range, ovn_name
from ..ovsdb.connection import NB_SCHEMA
from ..ovsdb.fields import Field
from ..ovsdb.operations import Op
from ..ovsdb.resource import Parent, Resource
from .nb_common import check_maps, external_ids_field, required_name


class LogicalRouter(Resource):
    """A logical router; a gateway router carries ``options.chassis``."""

    name = "logical_router"
    schema = NB_SCHEMA
    table = "Logical_Router"
    tables = ("Logical_Router",)
    narrow = True
    fields = (
        Field("name", default=""),
        Field("options", kind="map"),
        external_ids_field(),
    )

    def validate(self, item, where, state):
        required_name(item, where)
        check_maps(item, where, ("options", "external_ids"))
        return item


_GC = ("Gateway_Chassis", "gateway_chassis")


class _GatewayChassis(Field):
    """``gateway_chassis``: a list of ``{chassis_name, priority}``, kept as
    Gateway_Chassis rows referenced by the router port."""

    def __init__(self):
        super(_GatewayChassis, self).__init__("gateway_chassis", column="gateway_chassis",
                                              table="Gateway_Chassis", kind="map")

    def read(self, cols, table):
        value = cols.get(_GC) or {}
        return [{"chassis_name": name, "priority": prio}
                for name, prio in sorted(value.items(), key=lambda kv: (-kv[1], kv[0]))]

    def apply(self, cols, table, value, merge):
        if value is not None:
            cols[_GC] = dict((gc["chassis_name"], gc.get("priority") or 0) for gc in value)
        elif not merge:
            cols[_GC] = {}


class LogicalRouterPort(Resource):
    """A router port with its MAC, networks, peer and gateway chassis."""

    name = "logical_router_port"
    schema = NB_SCHEMA
    table = "Logical_Router_Port"
    tables = ("Logical_Router", "Logical_Router_Port", "Gateway_Chassis")
    narrow = True
    parent = Parent("router", "Logical_Router", "ports", "router", ovn_name)
    fields = (
        Field("name", default=""),
        Field("mac", default=""),
        Field("networks", kind="set"),
        Field("peer", kind="optional"),
        _GatewayChassis(),
        Field("options", kind="map"),
        external_ids_field(),
    )

    def validate(self, item, where, state):
        required_name(item, where)
        check_maps(item, where, ("options", "external_ids"))
        if state == "deleted":
            return item
        if "mac" in item:
            item["mac"] = addressing.parse_mac(item["mac"], where + ".mac")
        if "networks" in item:
            networks = []
            for index, value in enumerate(item["networks"]):
                ip, net = addressing.parse_ip_interface(value, "%s.networks[%d]" % (where, index))
                networks.append("%s/%d" % (ip, net.prefixlen))
            item["networks"] = networks
        if "peer" in item:
            ovn_name(item["peer"], where + ".peer")
        chassis = set()
        for index, gc in enumerate(item.get("gateway_chassis") or []):
            field = "%s.gateway_chassis[%d]" % (where, index)
            ovn_name(gc.get("chassis_name"), field + ".chassis_name")
            in_range(gc.get("priority") or 0, 0, 32767, field + ".priority")
            if gc["chassis_name"] in chassis:
                raise ValidationError("%s.chassis_name: %r is listed twice" % (
                    field, gc["chassis_name"]))
            chassis.add(gc["chassis_name"])
        return item

    def check(self, item, where, view, current, state):
        if state == "deleted":
            return
        if current is None:
            missing = [o for o in ("mac", "networks") if not item.get(o)]
            if missing:
                raise ValidationError("%s: a new router port needs %s" % (
                    where, " and ".join(missing)))

    def make_current(self, row, parent_row, view):
        current = super(LogicalRouterPort, self).make_current(row, parent_row, view)
        chassis = dict((gc.chassis_name, gc.priority) for gc in row.gateway_chassis)
        current.cols[_GC] = chassis
        current.rows["Gateway_Chassis"] = dict((gc.chassis_name, gc) for gc in row.gateway_chassis)
        return current

    @staticmethod
    def _insert_gateway_chassis(port_name, chassis, view):
        """Insert ops for ``{chassis_name: priority}``, named as ovn-nbctl names them."""
        ops = []
        for name, prio in sorted(chassis.items()):
            values = {"name": "%s-%s" % (port_name, name), "chassis_name": name, "priority": prio}
            ops.append(Op("insert", "Gateway_Chassis", view.new_row("Gateway_Chassis", values),
                          value=values))
        return ops

    def create_ops(self, item, cols, parent_row, view):
        cols = dict(cols)
        chassis = cols.pop(_GC, {})
        ops = self._insert_gateway_chassis(item["name"], chassis, view)
        port_ops = super(LogicalRouterPort, self).create_ops(item, cols, parent_row, view)
        if ops:
            port_ops[0].value["gateway_chassis"] = [op.row for op in ops]
        return ops + port_ops

    def update_ops(self, current, cols, view):
        cols = dict(cols)
        want = cols.pop(_GC, {})
        have = current.cols.get(_GC, {})
        port = current.rows[self.table]
        ops = super(LogicalRouterPort, self).update_ops(current, cols, view)
        rows = current.rows.get("Gateway_Chassis", {})
        for name in sorted(set(have) - set(want)):
            ops.append(Op("mutate", self.table, port, "gateway_chassis", [rows[name]], "delete"))
            ops.append(Op("delete", "Gateway_Chassis", rows[name]))
        for name in sorted(set(have) & set(want)):
            if have[name] != want[name]:
                ops.append(Op("update", "Gateway_Chassis", rows[name], "priority", want[name]))
        added = dict((n, p) for n, p in want.items() if n not in have)
        for insert in self._insert_gateway_chassis(port.name, added, view):
            ops.append(insert)
            ops.append(Op("mutate", self.table, port, "gateway_chassis", [insert.row], "insert"))
        return ops


def _prefix(value, field):
    """A route prefix: a CIDR, or a single address."""
    if "/" in str(value):
        return str(addressing.parse_cidr(value, field))
    return str(addressing.parse_ip(value, field))


class StaticRoute(Resource):
    """A static route of a logical router, known by prefix, next hop and policy."""

    name = "static_route"
    schema = NB_SCHEMA
    table = "Logical_Router_Static_Route"
    tables = ("Logical_Router", "Logical_Router_Port", "Logical_Router_Static_Route")
    identity = ("router", "ip_prefix", "nexthop", "policy")
    parent = Parent("router", "Logical_Router", "static_routes", "router", ovn_name)
    fields = (
        Field("ip_prefix", default=""),
        Field("nexthop", default=""),
        Field("policy", kind="optional", from_db=lambda v: v),
        Field("output_port", kind="optional"),
        external_ids_field(),
    )

    def key(self, item):
        return (item.get("router"), item.get("ip_prefix"), item.get("nexthop"),
                item.get("policy") or "dst-ip")

    def to_config(self, cols):
        config = super(StaticRoute, self).to_config(cols)
        config.setdefault("policy", "dst-ip")
        return config

    def wanted_cols(self, item, current, state):
        cols = super(StaticRoute, self).wanted_cols(item, current, state)
        # OVN reads an empty policy as dst-ip; keep rows as ovn-nbctl writes them.
        if cols.get((self.table, "policy")) == ["dst-ip"]:
            cols[(self.table, "policy")] = []
        return cols

    def validate(self, item, where, state):
        for option in ("router", "ip_prefix", "nexthop"):
            if option not in item:
                raise ValidationError("%s.%s: is required" % (where, option))
        check_maps(item, where, ("external_ids",))
        ovn_name(item["router"], where + ".router")
        item["ip_prefix"] = _prefix(item["ip_prefix"], where + ".ip_prefix")
        if item["nexthop"] != "discard":
            item["nexthop"] = str(addressing.parse_ip(item["nexthop"], where + ".nexthop"))
        item.setdefault("policy", "dst-ip")
        return item

    def check(self, item, where, view, current, state):
        if state == "deleted":
            return
        router = view.lookup("Logical_Router", item["router"])
        port = item.get("output_port")
        if port and port not in set(p.name for p in router.ports):
            raise ValidationError("%s.output_port: %r is not a port of router %r" % (
                where, port, item["router"]))


_NAT_TYPES = ("snat", "dnat", "dnat_and_snat")


class NAT(Resource):
    """A NAT rule of a logical router.

    As in ``ovn-nbctl lr-nat-add``, an ``snat`` rule is known by its logical
    IP and the others by their external IP.
    """

    name = "nat"
    schema = NB_SCHEMA
    table = "NAT"
    tables = ("Logical_Router", "Logical_Switch_Port", "NAT")
    identity = ("router", "type", "external_ip", "logical_ip")
    parent = Parent("router", "Logical_Router", "nat", "router", ovn_name)
    fields = (
        Field("type", default=""),
        Field("external_ip", default=""),
        Field("logical_ip", default=""),
        Field("logical_port", kind="optional"),
        Field("external_mac", kind="optional"),
        external_ids_field(),
    )

    def key(self, item):
        if item.get("type") == "snat":
            return (item.get("router"), "snat", None, item.get("logical_ip"))
        return (item.get("router"), item.get("type"), item.get("external_ip"), None)

    def validate(self, item, where, state):
        for option in ("router", "type"):
            if option not in item:
                raise ValidationError("%s.%s: is required" % (where, option))
        ovn_name(item["router"], where + ".router")
        check_maps(item, where, ("external_ids",))
        kind = item["type"]
        if kind not in _NAT_TYPES:
            raise ValidationError("%s.type: %r is not one of %s" % (
                where, kind, ", ".join(_NAT_TYPES)))
        needed = ["logical_ip"] if kind == "snat" else ["external_ip"]
        if state != "deleted":
            needed = ["external_ip", "logical_ip"]
        for option in needed:
            if option not in item:
                raise ValidationError("%s.%s: a %s rule needs it" % (where, option, kind))
        if "external_ip" in item:
            item["external_ip"] = str(addressing.parse_ip(item["external_ip"],
                                                          where + ".external_ip"))
        if "logical_ip" in item:
            if kind == "snat":
                item["logical_ip"] = _prefix(item["logical_ip"], where + ".logical_ip")
            else:
                item["logical_ip"] = str(addressing.parse_ip(item["logical_ip"],
                                                             where + ".logical_ip"))
        if state == "deleted":
            return item
        if ("logical_port" in item or "external_mac" in item) and kind != "dnat_and_snat":
            raise ValidationError("%s.logical_port: only a dnat_and_snat rule takes a "
                                  "logical_port or an external_mac (type is %r)" % (where, kind))
        if "external_mac" in item and "logical_port" not in item:
            raise ValidationError("%s.external_mac: %r needs a logical_port too" % (
                where, item["external_mac"]))
        if "logical_port" in item and "external_mac" not in item:
            raise ValidationError("%s.logical_port: %r needs an external_mac too" % (
                where, item["logical_port"]))
        if "external_mac" in item:
            item["external_mac"] = addressing.parse_mac(item["external_mac"],
                                                        where + ".external_mac")
        return item

    def check(self, item, where, view, current, state):
        if state == "deleted":
            return
        if item.get("logical_port"):
            view.one("Logical_Switch_Port", item["logical_port"], where + ".logical_port",
                     "switch port")
