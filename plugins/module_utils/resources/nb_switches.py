# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OVN logical switches and their ports as reconcile resources, described
once here and used by the modules and the daemons alike."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.naming import in_range, ovn_name
from ..ovsdb.connection import NB_SCHEMA
from ..ovsdb.fields import Field
from ..ovsdb.resource import Parent, Resource
from ..ovsdb.view import cell
from .nb_common import check_maps, external_ids_field, required_name


class LogicalSwitch(Resource):
    """A logical switch; ``subnet`` and ``exclude_ips`` live in ``other_config``."""

    name = "logical_switch"
    schema = NB_SCHEMA
    table = "Logical_Switch"
    tables = ("Logical_Switch",)
    narrow = True
    fields = (
        Field("name", default=""),
        Field("subnet", column="other_config", kind="mapkey", key="subnet"),
        Field("exclude_ips", column="other_config", kind="mapkey", key="exclude_ips",
              to_db=addressing.exclude_ips_to_ovn, from_db=addressing.exclude_ips_from_ovn),
        Field("ipv6_prefix", column="other_config", kind="mapkey", key="ipv6_prefix"),
        Field("other_config", kind="map", exclude_keys=("subnet", "exclude_ips", "ipv6_prefix")),
        external_ids_field(),
    )

    def validate(self, item, where, state):
        required_name(item, where)
        check_maps(item, where, ("other_config", "external_ids"))
        if state == "deleted":
            return item
        for reserved in ("subnet", "exclude_ips", "ipv6_prefix"):
            if reserved in (item.get("other_config") or {}):
                raise ValidationError(
                    "%s.other_config: set %r with the %s option, not in other_config" % (
                        where, reserved, reserved))
        subnet = None
        if "subnet" in item:
            subnet = addressing.parse_cidr(item["subnet"], where + ".subnet", version=4)
            item["subnet"] = str(subnet)
        if "exclude_ips" in item:
            item["exclude_ips"] = addressing.parse_exclude_ips(
                item["exclude_ips"], subnet, where + ".exclude_ips")
        if "ipv6_prefix" in item:
            item["ipv6_prefix"] = addressing.ipv6_prefix(item["ipv6_prefix"], where + ".ipv6_prefix")
        return item

    def check(self, item, where, view, current, state):
        # Exclude ranges given without a subnet are checked against the one
        # the switch keeps under merged.
        if state == "merged" and current is not None and "exclude_ips" in item \
                and "subnet" not in item:
            subnet = current.cols[(self.table, "other_config")].get("subnet")
            if subnet:
                addressing.parse_exclude_ips(item["exclude_ips"],
                                             addressing.parse_cidr(subnet, "subnet"),
                                             where + ".exclude_ips")


_LSP_TYPES = {"normal": "", "router": "router", "localnet": "localnet"}


def parse_lsp_address(value, where):
    """``dynamic``, ``router``, ``unknown``, ``MAC``, ``MAC IP...`` or ``MAC dynamic``.

    Returns ``(canonical string, [IPAddress ...])``.
    """
    text = " ".join(str(value).split())
    if text in ("dynamic", "router", "unknown"):
        return text, []
    words = text.split(" ")
    mac = addressing.parse_mac(words[0], where)
    ips = []
    rest = []
    for word in words[1:]:
        if word == "dynamic" and len(words) == 2:
            rest.append(word)
            continue
        ips.append(addressing.parse_ip(word, where))
        rest.append(str(ips[-1]))
    return " ".join([mac] + rest), ips


class LogicalSwitchPort(Resource):
    """A port of a logical switch. Port names are unique across the NB."""

    name = "logical_switch_port"
    schema = NB_SCHEMA
    table = "Logical_Switch_Port"
    tables = ("Logical_Switch", "Logical_Switch_Port")
    narrow = True
    parent = Parent("switch", "Logical_Switch", "ports", "switch", ovn_name)
    fields = (
        Field("name", default=""),
        Field("addresses", kind="set"),
        Field("port_security", kind="set"),
        Field("type", default="", to_db=lambda v: _LSP_TYPES.get(v, v),
              from_db=lambda v: v or "normal"),
        Field("options", kind="map"),
        Field("tag", kind="optional"),
        # a nested port: its frames ride its parent's interface with ``tag``
        Field("parent_name", kind="optional"),
        external_ids_field(),
    )

    def validate(self, item, where, state):
        required_name(item, where)
        check_maps(item, where, ("options", "external_ids"))
        if state == "deleted":
            return item
        addresses, static = [], []
        for index, value in enumerate(item.get("addresses") or []):
            text, ips = parse_lsp_address(value, "%s.addresses[%d]" % (where, index))
            addresses.append(text)
            static.extend(("%s.addresses[%d]" % (where, index), value, ip) for ip in ips)
        if "addresses" in item:
            item["addresses"] = addresses
        item["_static_ips"] = static
        if "port_security" in item:
            secured = []
            for index, value in enumerate(item["port_security"]):
                field = "%s.port_security[%d]" % (where, index)
                words = str(value).split()
                if not words:
                    raise ValidationError("%s: %r is empty" % (field, value))
                parts = [addressing.parse_mac(words[0], field)]
                for word in words[1:]:
                    if "/" in word:
                        ip, net = addressing.parse_ip_interface(word, field)
                        parts.append("%s/%d" % (ip, net.prefixlen))
                    else:
                        parts.append(str(addressing.parse_ip(word, field)))
                secured.append(" ".join(parts))
            item["port_security"] = secured
        if "tag" in item:
            in_range(item["tag"], 1, 4095, where + ".tag")
        if item.get("parent_name") and not item.get("tag"):
            raise ValidationError("%s.tag: a nested port (parent_name) needs the VLAN its frames carry" % where)
        kind = item.get("type")
        options = item.get("options") or {}
        if kind == "router" and not options.get("router-port"):
            raise ValidationError("%s.options: a router port needs options.router-port" % where)
        if kind == "localnet" and not options.get("network_name"):
            raise ValidationError("%s.options: a localnet port needs options.network_name" % where)
        return item

    def check(self, item, where, view, current, state):
        if state == "deleted":
            return
        switch = view.one("Logical_Switch", item["switch"], where + ".switch", "switch")
        if not item.get("_static_ips"):
            return
        subnet = cell(switch, "other_config").get("subnet")
        if subnet:
            net = addressing.parse_cidr(subnet, "switch subnet")
            for field, value, ip in item["_static_ips"]:
                if ip.version == 4:
                    addressing.require_inside(ip, net, field, "%r (IP %s of switch %s)" % (
                        value, ip, item["switch"]))
