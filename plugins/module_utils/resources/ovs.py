# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local Open vSwitch database as reconcile resources: bridges, ports
and the chassis settings OVN reads from ``Open_vSwitch.external_ids``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import K_OWNED_PHYSNETS, OWNER_KEY
from ..common.naming import in_range, interface_name, ovn_name, physnet_name
from ..ovsdb.connection import OVS_SCHEMA, parse_remote
from ..ovsdb.fields import Field, map_options
from ..ovsdb.operations import Op
from ..ovsdb.resource import Parent, Resource
from ..ovsdb.view import Current, column_value

# What a connection to the local OVS database monitors for these resources.
OVS_TABLES = ("Open_vSwitch", "Bridge", "Port", "Interface")

# OVS writes "" for the defaults the operator calls "system".
_system_to_db = {"system": ""}


def _from_system(value):
    return value or "system"


def _to_system(value):
    return _system_to_db.get(value, value)


class Bridge(Resource):
    """An OVS bridge, created as ``ovs-vsctl add-br`` does: with its local
    internal port and interface."""

    name = "bridge"
    schema = OVS_SCHEMA
    table = "Bridge"
    tables = OVS_TABLES
    parent = Parent(None, "Open_vSwitch", "bridges", "database")
    fields = (
        Field("name", default=""),
        Field("datapath_type", default="", to_db=_to_system, from_db=_from_system),
        Field("fail_mode", kind="optional"),
        Field("protocols", kind="set"),
        Field("other_config", kind="map"),
        Field("external_ids", kind="map", exclude_keys=(OWNER_KEY,)),
    )

    def validate(self, item, where, state):
        if "name" not in item:
            raise ValidationError("%s.name: a name is required" % where)
        interface_name(item["name"], where + ".name")
        map_options(item, where, ("other_config", "external_ids"))
        if OWNER_KEY in (item.get("external_ids") or {}):
            raise ValidationError("%s.external_ids: the key %r is reserved for the product" % (
                where, OWNER_KEY))
        if "other_config" in item and "hwaddr" in item["other_config"]:
            item["other_config"]["hwaddr"] = addressing.parse_mac(
                item["other_config"]["hwaddr"], where + ".other_config.hwaddr")
        return item

    def create_ops(self, item, cols, parent_row, view):
        iface_values = {"name": item["name"], "type": "internal"}
        iface = view.new_row("Interface", iface_values)
        port_values = {"name": item["name"], "interfaces": [iface]}
        port = view.new_row("Port", port_values)
        ops = [Op("insert", "Interface", iface, value=iface_values),
               Op("insert", "Port", port, value=port_values)]
        bridge_ops = super(Bridge, self).create_ops(item, cols, parent_row, view)
        bridge_ops[0].value["ports"] = [port]
        return ops + bridge_ops


class Port(Resource):
    """An OVS port with its one interface (bonds are out of scope).

    ``type``, ``options``, ``external_ids``, ``mtu_request`` and ``mac`` (an
    internal interface's Ethernet address) belong to the interface; ``tag``
    and ``trunks`` to the port. The product's ownership
    mark sits in the port's own ``external_ids``.
    """

    name = "port"
    schema = OVS_SCHEMA
    table = "Port"
    tables = OVS_TABLES
    parent = Parent("bridge", "Bridge", "ports", "bridge", interface_name)
    fields = (
        Field("name", default=""),
        Field("type", table="Interface", default="", to_db=_to_system, from_db=_from_system),
        Field("options", table="Interface", kind="map"),
        Field("tag", kind="optional"),
        Field("trunks", kind="set"),
        Field("external_ids", table="Interface", kind="map"),
        Field("mtu_request", table="Interface", kind="optional"),
        Field("mac", table="Interface", kind="optional"),
    )

    def extra_rows(self, row):
        for iface in row.interfaces:
            if iface.name == row.name:
                return {"Interface": iface}
        return {}

    def make_current(self, row, parent_row, view):
        # A bridge's own local port belongs to the bridge, not to ovs_port.
        if row.name == parent_row.name or len(row.interfaces) != 1:
            return None
        return super(Port, self).make_current(row, parent_row, view)

    def validate(self, item, where, state):
        if "name" not in item:
            raise ValidationError("%s.name: a name is required" % where)
        interface_name(item["name"], where + ".name")
        map_options(item, where, ("options", "external_ids"))
        if state == "deleted":
            return item
        if item["bridge"] == item["name"]:
            raise ValidationError("%s.name: %r is the bridge's own local port; manage it with "
                                  "ovs_bridge" % (where, item["name"]))
        if "tag" in item:
            in_range(item["tag"], 0, 4095, where + ".tag")
        for index, vlan in enumerate(item.get("trunks") or []):
            in_range(vlan, 0, 4095, "%s.trunks[%d]" % (where, index))
        if "mtu_request" in item:
            in_range(item["mtu_request"], 68, 65535, where + ".mtu_request")
        if "mac" in item:
            if item.get("type", "internal") != "internal":
                raise ValidationError("%s.mac: only an internal interface's MAC can be set" % where)
            item["mac"] = addressing.parse_mac(item["mac"], where + ".mac")
        options = item.get("options") or {}
        kind = item.get("type")
        if kind == "patch" and not options.get("peer"):
            raise ValidationError("%s.options: a patch port needs options.peer" % where)
        if kind == "patch" and options.get("peer") == item["name"]:
            raise ValidationError("%s.options.peer: %r is the port itself" % (where, options["peer"]))
        if kind in ("vxlan", "geneve"):
            remote = options.get("remote_ip")
            if not remote:
                raise ValidationError("%s.options: a %s port needs options.remote_ip" % (
                    where, kind))
            if remote != "flow":
                addressing.parse_ip(remote, where + ".options.remote_ip")
        if "key" in options and options["key"] != "flow":
            try:
                in_range(int(options["key"]), 0, 2 ** 32 - 1, where + ".options.key")
            except ValueError:
                raise ValidationError("%s.options.key: %r is not a number or 'flow'" % (
                    where, options["key"]))
        return item

    def create_ops(self, item, cols, parent_row, view):
        values = dict((column, value) for (table, column), value in cols.items()
                      if table == "Interface" and value not in (None, [], {}))
        values["name"] = item["name"]
        iface = view.new_row("Interface", values)
        port_ops = super(Port, self).create_ops(item, cols, parent_row, view)
        port_ops[0].value["interfaces"] = [iface]
        return [Op("insert", "Interface", iface, value=values)] + port_ops


# ovn_chassis: option -> Open_vSwitch external_ids key
CHASSIS_KEYS = (
    ("system_id", "system-id"),
    ("ovn_remote", "ovn-remote"),
    ("encap_type", "ovn-encap-type"),
    ("encap_ip", "ovn-encap-ip"),
    ("bridge_mappings", "ovn-bridge-mappings"),
    ("bridge_datapath_type", "ovn-bridge-datapath-type"),
    ("cms_options", "ovn-cms-options"),
    ("match_northd_version", "ovn-match-northd-version"),
    ("ofctrl_wait_before_clear", "ovn-ofctrl-wait-before-clear"),
)
_ENCAP_TYPES = ("geneve", "vxlan")
MAPPINGS = "ovn-bridge-mappings"
# options that are not one key of their own
OWNED = (("owned_bridge_mappings", K_OWNED_PHYSNETS),)


def parse_bridge_mappings(text):
    """``physnet1:br-ex,physnet2:br-vlan`` as an ordered list of pairs."""
    pairs = []
    for part in (text or "").split(","):
        if part.strip():
            physnet, _sep, bridge = part.strip().partition(":")
            pairs.append((physnet, bridge))
    return pairs


def format_bridge_mappings(pairs):
    return ",".join("%s:%s" % pair for pair in pairs)


def set_mappings(pairs, wanted):
    """``pairs`` with each ``{physnet: bridge}`` of ``wanted`` set where it
    stands (a new one last), or removed where its bridge is None: the order
    of the others is kept, so that two writers of different physnets never
    undo each other's order."""
    out = list(pairs)
    for physnet, bridge in sorted(wanted.items()):
        at = [i for i, pair in enumerate(out) if pair[0] == physnet]
        if bridge is None:
            out = [pair for pair in out if pair[0] != physnet]
        elif at:
            out[at[0]] = (physnet, bridge)
            out = [pair for i, pair in enumerate(out) if pair[0] != physnet or i == at[0]]
        else:
            out.append((physnet, bridge))
    return out


class _BridgeMappings(Field):
    """``ovn-bridge-mappings`` as a ``{physnet: bridge}`` dict, merged
    mapping by mapping; ``null`` removes a mapping under ``merged``."""

    def __init__(self):
        super(_BridgeMappings, self).__init__("bridge_mappings", column="external_ids",
                                              kind="mapkey", key="ovn-bridge-mappings")

    def read(self, cols, table):
        text = (cols.get((table, "external_ids")) or {}).get(self.key)
        return dict(parse_bridge_mappings(text)) if text else None

    def apply(self, cols, table, value, merge):
        ids = cols.setdefault((table, "external_ids"), {})
        pairs = set_mappings(parse_bridge_mappings(ids.get(self.key)) if merge else [], value or {})
        if pairs:
            ids[self.key] = format_bridge_mappings(pairs)
        else:
            ids.pop(self.key, None)


class _OwnedBridgeMappings(Field):
    """The product's own ``ovn-bridge-mappings`` (the inventory's provider
    networks on this node), recorded by physnet in ``K_OWNED_PHYSNETS``:
    exactly these are set; one the product set before and no longer lists
    is removed; a mapping another tool made is never touched."""

    def __init__(self):
        super(_OwnedBridgeMappings, self).__init__("owned_bridge_mappings", column="external_ids", kind="mapkey",
                                                   key=MAPPINGS)

    def read(self, cols, table):
        ids = cols.get((table, "external_ids")) or {}
        if K_OWNED_PHYSNETS not in ids:
            return None
        owned = set(_uncsv(ids[K_OWNED_PHYSNETS]))
        return dict(p for p in parse_bridge_mappings(ids.get(MAPPINGS)) if p[0] in owned)

    def apply(self, cols, table, value, merge):
        if value is None:
            return
        ids = cols.setdefault((table, "external_ids"), {})
        gone = set(_uncsv(ids.get(K_OWNED_PHYSNETS, ""))) - set(value)
        pairs = set_mappings(parse_bridge_mappings(ids.get(MAPPINGS)), dict(value, **dict.fromkeys(gone)))
        if pairs:
            ids[MAPPINGS] = format_bridge_mappings(pairs)
        else:
            ids.pop(MAPPINGS, None)
        if value:
            ids[K_OWNED_PHYSNETS] = ",".join(sorted(value))
        else:
            ids.pop(K_OWNED_PHYSNETS, None)


def _csv(values):
    return ",".join(values) if isinstance(values, list) else values


def _uncsv(text):
    return [v for v in text.split(",") if v]


def _to_bool_text(value):
    return None if value is None else ("true" if value else "false")


def _from_bool_text(text):
    return text == "true"


def _to_int_text(value):
    return None if value is None else str(int(value))


def _from_int_text(text):
    return int(text) if text.isdigit() else text


# options whose value is not a string: (to the database, from it)
_CONVERT = {"encap_type": (_csv, _uncsv), "cms_options": (_csv, _uncsv),
            "match_northd_version": (_to_bool_text, _from_bool_text),
            "ofctrl_wait_before_clear": (_to_int_text, _from_int_text)}


class Chassis(Resource):
    """The OVN chassis keys of ``Open_vSwitch.external_ids``: one object,
    and no other key of that map is ever touched."""

    name = "chassis"
    schema = OVS_SCHEMA
    table = "Open_vSwitch"
    tables = ("Open_vSwitch",)
    identity = ()
    deletes_object = False
    fields = tuple(
        _BridgeMappings() if option == "bridge_mappings" else
        Field(option, column="external_ids", kind="mapkey", key=key,
              to_db=_CONVERT.get(option, (None, None))[0], from_db=_CONVERT.get(option, (None, None))[1])
        for option, key in CHASSIS_KEYS) + (_OwnedBridgeMappings(),)

    def key(self, item):
        return ()

    def label(self, key):
        return "open_vswitch"

    def read(self, view):
        rows = view.rows(self.table)
        if len(rows) != 1:
            raise ValidationError("the Open_vSwitch database has %d Open_vSwitch rows, not one" %
                                  len(rows))
        row = rows[0]
        cols = {(self.table, "external_ids"): column_value(row, "external_ids")}
        return {(): Current((), {self.table: row}, cols)}, set()

    def is_owned(self, current):
        return False

    def wanted_cols(self, item, current, state):
        cols = {(self.table, "external_ids"): dict(current.cols[(self.table, "external_ids")])}
        if state == "deleted":
            ids = cols[(self.table, "external_ids")]
            named = [option for option, _key in CHASSIS_KEYS + OWNED if option in item]
            if "owned_bridge_mappings" in named or not named:
                _OwnedBridgeMappings().apply(cols, self.table, {}, True)
            for option, key in CHASSIS_KEYS:
                if option in named or not named:
                    ids.pop(key, None)
            return cols
        merge = state == "merged"
        for field in self.fields:
            field.apply(cols, self.table, item.get(field.option), merge)
        return cols

    def check(self, item, where, view, current, state):
        owned = item.get("owned_bridge_mappings")
        if owned is None or state == "deleted" or current is None:
            return
        ids = current.cols.get((self.table, "external_ids")) or {}
        ours = set(_uncsv(ids.get(K_OWNED_PHYSNETS, "")))
        theirs = dict((physnet, bridge) for physnet, bridge in parse_bridge_mappings(ids.get(MAPPINGS))
                      if physnet in owned and physnet not in ours)
        if theirs:
            # another tool's (or node_gateway's): taken over, the next run of
            # that tool and this one would take it back in turn
            raise ValidationError(["config.owned_bridge_mappings.%s: physnet %s is mapped already (to %s), not by "
                                   "the product's owned mappings (node_gateway's, or another tool's); map another "
                                   "physnet, or drop that mapping first" % (p, p, b) for p, b in sorted(theirs.items())])

    def update_ops(self, current, cols, view):
        ops = super(Chassis, self).update_ops(current, cols, view)
        where = (self.table, "external_ids")
        if (current.cols.get(where) or {}).get(MAPPINGS) != (cols.get(where) or {}).get(MAPPINGS):
            # the mappings are one string, read, changed and written back:
            # the commit fails (and is planned again) if another writer
            # changed the map meanwhile, whose mapping would else be lost
            ops.insert(0, Op("verify", self.table, current.rows[self.table], "external_ids"))
        return ops

    def validate(self, item, where, state):
        where = "config"
        if state == "deleted":
            return item
        if "bridge_mappings" in item and "owned_bridge_mappings" in item:
            raise ValidationError("%s: give bridge_mappings (merged one by one) or owned_bridge_mappings (the "
                                  "product's own, exactly), not both" % where)
        if "system_id" in item:
            ovn_name(item["system_id"], where + ".system_id")
        if "ovn_remote" in item:
            parse_remote(item["ovn_remote"], where + ".ovn_remote")
        if "encap_type" in item:
            for index, kind in enumerate(item["encap_type"]):
                if kind not in _ENCAP_TYPES:
                    raise ValidationError("%s.encap_type[%d]: %r is not one of %s" % (
                        where, index, kind, ", ".join(_ENCAP_TYPES)))
        if "encap_ip" in item:
            item["encap_ip"] = str(addressing.parse_ip(item["encap_ip"], where + ".encap_ip"))
        for option in ("bridge_mappings", "owned_bridge_mappings"):
            for physnet, bridge in (item.get(option) or {}).items():
                field = "%s.%s.%s" % (where, option, physnet)
                physnet_name(physnet, field)
                if bridge is not None or option == "owned_bridge_mappings":
                    interface_name(bridge, field)
        for index, option in enumerate(item.get("cms_options") or []):
            if "," in option or not option:
                raise ValidationError("%s.cms_options[%d]: %r may not be empty or hold ','" % (
                    where, index, option))
        wait = item.get("ofctrl_wait_before_clear")
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= 600000):
            raise ValidationError("%s.ofctrl_wait_before_clear: %r must be whole milliseconds from 0 to 600000" % (
                where, wait))
        return item
