# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DHCP and router advertisements OVN serves on a virtual network.

A network declared with ``dhcp`` gets, from ``virtual_network``:

* a ``DHCP_Options`` row for its IPv4 subnet (:func:`options_v4`): the
  gateway as router and server, the router port's MAC as the server's, the
  lease time, the MTU, the DNS servers and domain, and the network's routes
  as classless static routes (RFC 3442), the default route last, since a
  client that takes classless routes ignores the router option);
* on a dual-stack network, router advertisements from its router port
  (``ipv6_ra_configs``, :func:`ra_configs`: SLAAC, or the M/O flags of
  DHCPv6 stateful and stateless) and, for DHCPv6, a ``DHCP_Options`` row
  for the /64 (:func:`options_v6`);
* every pod port of the network pointing at those rows
  (``dhcpv4_options``, ``dhcpv6_options``): OVN answers only ports that do.

A pod whose request gives an interface configured by DHCP routes of its
own, or says it carries no default route (``default_gateway: false``),
gets a DHCPv4 row of its port's own (:func:`override_of`,
:func:`port_item`): the network's options with those routes added, and
without the router option and the default route where it said false. The
row is known by the port (``K_DHCP_PORT``) and records what the pod asked
(``K_DHCP_OVERRIDE``), so that ``virtual_network`` makes its options
again when the network changes; it goes with its port
(:func:`plan_forget`), and one whose port is gone is removed by the next
run of the network or the audit's repair.

OVN answers with the address the port holds (its ``addresses``): the
product's allocation stays the one truth, and port security stays on, so a
client with another MAC gets nothing. The rows are the network's
(``NETWORK_KEY``, :mod:`..resources.nb_dhcp`); the audit compares them, the
references and the advertisements with the network's records, as for the
rest of a network (``network_drift``). The watcher points a new pod port at
its network's rows in the transaction that makes it (:func:`port_ops`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import K_DHCP_OVERRIDE, K_DHCP_PORT, NETWORK_KEY, OWNER_KEY, OWNER_VALUE
from ..ovsdb.operations import NewRow, Op
from ..ovsdb.plan import Change, Plan
from ..ovsdb.view import cell

TABLE = "DHCP_Options"
MODES = ("slaac", "dhcpv6_stateless", "dhcpv6_stateful")
DEFAULT_LEASE = 3600
# a lease shorter than a minute renews faster than anything should; DHCPv4's
# lease time is an unsigned 32-bit number (RFC 2132)
MIN_LEASE, MAX_LEASE = 60, 0xFFFFFFFF
# a DNS domain: labels of letters, digits and hyphens (RFC 1123)
_DOMAIN = re.compile(r"^(?=.{1,253}\Z)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*\Z")
_COLUMNS = {4: "dhcpv4_options", 6: "dhcpv6_options"}


def check(value, where):
    """The ``dhcp`` option of a network, normalised: ``None`` when off, else
    ``{lease_time, ipv6_address_mode[, domain]}``. Raises ValidationError."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not a dict" % (where, value))
    unknown = sorted(set(value) - {"enabled", "lease_time", "domain", "ipv6_address_mode"})
    if unknown:
        raise ValidationError("%s: unknown option(s) %s" % (where, ", ".join(unknown)))
    if value.get("enabled") is False:
        return None
    if value.get("enabled") not in (None, True):
        raise ValidationError("%s.enabled: %r is not a boolean" % (where, value["enabled"]))
    lease = value.get("lease_time")
    lease = DEFAULT_LEASE if lease is None else lease
    if isinstance(lease, bool) or not isinstance(lease, int) or not MIN_LEASE <= lease <= MAX_LEASE:
        raise ValidationError("%s.lease_time: %r is not a number of seconds from %d to %d" % (
            where, lease, MIN_LEASE, MAX_LEASE))
    mode = value.get("ipv6_address_mode") or "slaac"
    if mode not in MODES:
        raise ValidationError("%s.ipv6_address_mode: %r is not one of %s" % (where, mode, ", ".join(MODES)))
    out = {"lease_time": lease, "ipv6_address_mode": mode}
    domain = value.get("domain")
    if domain not in (None, ""):
        text = str(domain).lower().rstrip(".")
        if not _DOMAIN.match(text):
            raise ValidationError("%s.domain: %r is not a DNS domain name" % (where, domain))
        out["domain"] = text
    return out


def server_mac(network):
    """The MAC the network's DHCP server answers from: its router port's."""
    return addressing.mac_from_name(network.router_port)


def _dns(network, version):
    """The network's DNS servers of one IP version."""
    return [d for d in network.dns if addressing.parse_ip(d, "dns").version == version]


def _set(values):
    return "{%s}" % ", ".join(values)


def override_of(request):
    """What a pod's request asks of its interface's DHCPv4 beyond what its
    network gives (``{"routes", "default_route"}``), or None: routes of its
    own, or ``default_gateway: false`` said."""
    if not request.dhcp:
        return None
    default_route = request.default_gateway or not request.default_given
    if not request.routes and default_route:
        return None
    return {"routes": [{"dst": r["dst"], "gw": r.get("gw")} for r in request.routes], "default_route": default_route}


def options_v4(network, override=None):
    """The ``options`` of the network's IPv4 ``DHCP_Options`` row, or of a
    port's own row with its pod's ``override``."""
    gateway = str(network.gateway)
    options = {"server_id": gateway, "server_mac": server_mac(network), "router": gateway,
               "lease_time": str(network.dhcp["lease_time"])}
    if network.mtu:
        options["mtu"] = str(network.mtu)
    dns = _dns(network, 4)
    if dns:
        options["dns_server"] = _set(dns)
    if network.dhcp.get("domain"):
        options["domain_name"] = '"%s"' % network.dhcp["domain"]
    routes = [dict(route) for route in network.routes]
    default_route = True
    if override is not None:
        routes += [{"dst": r["dst"], "gw": r.get("gw") or gateway} for r in override["routes"]]
        default_route = override["default_route"]
    if not default_route:
        options.pop("router")
        routes = [route for route in routes if route["dst"] != "0.0.0.0/0"]
    if routes:
        hops = ["%s,%s" % (route["dst"], route["gw"]) for route in routes]
        # a client that takes classless routes ignores the router option (RFC 3442)
        if default_route and not any(route["dst"] == "0.0.0.0/0" for route in routes):
            hops.append("0.0.0.0/0,%s" % gateway)
        options["classless_static_route"] = "{%s}" % ",".join(hops)
    return options


def options_v6(network):
    """The ``options`` of the network's DHCPv6 row, or None: a network
    without IPv6, or whose hosts take SLAAC addresses, has none."""
    if network.subnet6 is None or network.dhcp["ipv6_address_mode"] == "slaac":
        return None
    options = {"server_id": server_mac(network)}
    if network.dhcp["ipv6_address_mode"] == "dhcpv6_stateless":
        options["dhcpv6_stateless"] = "true"
    dns = _dns(network, 6)
    if dns:
        options["dns_server"] = _set(dns)
    if network.dhcp.get("domain"):
        options["domain_search"] = '"%s"' % network.dhcp["domain"]
    return options


def ra_configs(network):
    """The router port's ``ipv6_ra_configs``: empty unless the network
    serves DHCP and has IPv6."""
    if network.dhcp is None or network.subnet6 is None:
        return {}
    out = {"address_mode": network.dhcp["ipv6_address_mode"], "send_periodic": "true"}
    if network.mtu:
        out["mtu"] = str(network.mtu)
    dns = _dns(network, 6)
    if dns:
        out["rdnss"] = dns[0]
    if network.dhcp.get("domain"):
        out["dnssl"] = network.dhcp["domain"]
    return out


def items(network):
    """The network's ``DHCP_Options`` rows as items of
    :class:`~..resources.nb_dhcp.DHCPOptions`."""
    if network.dhcp is None:
        return []
    out = [{"network": network.name, "cidr": str(network.subnet), "options": options_v4(network)}]
    v6 = options_v6(network)
    if v6 is not None:
        out.append({"network": network.name, "cidr": str(network.subnet6), "options": v6})
    return out


def port_item(network, port, override):
    """A port's own DHCPv4 row (see the module's docstring), as an item of
    :class:`~..resources.nb_dhcp.DHCPOptions`."""
    return {"network": network.name, "cidr": str(network.subnet), "port": port,
            "override": json.dumps(override, sort_keys=True), "options": options_v4(network, override)}


def _owned(view, name):
    return [row for row in view.rows(TABLE) if cell(row, "external_ids").get(NETWORK_KEY) == name
            and cell(row, "external_ids").get(OWNER_KEY) == OWNER_VALUE]


def owned_rows(view, name):
    """``{cidr: row}`` of network ``name``'s own ``DHCP_Options`` rows (not
    its ports')."""
    return dict((cell(row, "cidr"), row) for row in _owned(view, name)
                if cell(row, "external_ids").get(K_DHCP_PORT) is None)


def port_rows(view, name):
    """``{port name: [rows]}`` of the rows made for the ports of network
    ``name`` (one each, unless a port deleted by hand left one behind and
    a new port of its name was made)."""
    out = {}
    for row in _owned(view, name):
        port = cell(row, "external_ids").get(K_DHCP_PORT)
        if port is not None:
            out.setdefault(port, []).append(row)
    return dict((port, sorted(rows, key=lambda r: str(r.uuid))) for port, rows in out.items())


def network_keys(view, name):
    """The identities of network ``name``'s own rows: what deleting the
    network deletes through the resource (its ports' rows go by
    :func:`plan_drop_ports`)."""
    return [{"network": name, "cidr": cidr} for cidr in sorted(owned_rows(view, name))]


def stale_keys(view, network):
    """Identities of the network's own rows it no longer wants (DHCP
    turned off, a subnet moved): for ``deleted``."""
    wanted = set(item["cidr"] for item in items(network))
    return [{"network": network.name, "cidr": cidr} for cidr in sorted(owned_rows(view, network.name))
            if cidr not in wanted]


def plan_drop_ports(view, names):
    """A :class:`Plan` deleting the rows made for the ports of the networks
    ``names`` (DHCP turned off, or the network deleted)."""
    result = Plan(_Attachments(), "deleted")
    for name in names:
        for port, rows in sorted(port_rows(view, name).items()):
            result.changes.append(_dropped(port, rows))
    return result


def targets(view, network, ops=()):
    """``{4: row, 6: row}``: what the network's ports should point at, each
    the row the view holds or the one ``ops`` (a batch's) inserts; None for
    a family the network serves no DHCP on."""
    wanted = dict((addressing.parse_cidr(item["cidr"], "cidr").version, item["cidr"]) for item in items(network))
    found = owned_rows(view, network.name)
    for op in ops:
        ids = (op.value.get("external_ids") or {}) if op.op == "insert" and op.table == TABLE else {}
        if ids.get(NETWORK_KEY) == network.name and ids.get(K_DHCP_PORT) is None:
            found[op.value.get("cidr")] = op.row
    return dict((family, found.get(wanted.get(family))) for family in (4, 6))


def port_ops(row, want):
    """The ops that point the port ``row`` at ``want`` (:func:`targets`)."""
    ops = []
    for family, column in sorted(_COLUMNS.items()):
        target = want.get(family)
        have = list(cell(row, column) or []) if not isinstance(row, NewRow) else []
        if _refs(have) != _refs([target] if target is not None else []):
            ops.append(Op("update", "Logical_Switch_Port", row, column, [target] if target is not None else []))
    return ops


def _refs(rows):
    return [r.uuid_name if isinstance(r, NewRow) else r.uuid for r in rows]


def _dropped(port, rows):
    """The :class:`Change` that deletes ``rows``, made for ``port``."""
    return Change("delete", "dhcp_options of port %s" % port, None, None, [Op("delete", TABLE, row) for row in rows])


class _Attachments:
    """What :func:`plan_attachments` reports as (``operations`` lines)."""

    name = "dhcp_attachment"
    identity = ("name",)


def plan_attachments(view, networks, ops):
    """A :class:`Plan` pointing every pod port of ``networks`` (declared,
    complete networks) at its network's rows, and setting each router
    port's advertisements; ``ops`` are the batch's so far (rows it makes)."""
    result = Plan(_Attachments(), "merged")
    for network in networks:
        want = targets(view, network, ops)
        switch = view.lookup("Logical_Switch", network.name)
        ports = [] if switch is None or isinstance(switch, (list, NewRow)) else list(cell(switch, "ports"))
        if network.dhcp is None:
            # no rows to point at; references to rows this batch deletes clear
            # themselves (weak references): a network of thousands of ports
            # without DHCP costs nothing here
            ports = []
        own = port_rows(view, network.name) if network.dhcp is not None else {}
        for name, rows in sorted(own.items()):
            if len(rows) > 1:       # one a port deleted by hand left, and its successor's
                result.changes.append(_dropped(name, rows[1:]))
        own = dict((name, rows[0]) for name, rows in own.items())
        for port in sorted(ports, key=lambda p: cell(p, "name")):
            if cell(port, "type") not in ("", None):
                continue        # the router's port, a localnet: OVN answers no DHCP there
            name = cell(port, "name")
            row = own.pop(name, None)
            if row is not None:
                # the port's own row, made again from the network and what its pod asked
                item = port_item(network, name, json.loads(cell(row, "external_ids").get(K_DHCP_OVERRIDE) or "{}"))
                for column in ("cidr", "options"):
                    if cell(row, column) != item[column]:
                        result.changes.append(Change("update", "dhcp_options of port %s" % name, None,
                                                     {column: item[column]},
                                                     [Op("update", TABLE, row, column, item[column])]))
            port_want = dict(want)
            if row is not None:
                port_want[4] = row
            port_changes = port_ops(port, port_want)
            if port_changes:
                result.changes.append(Change("update", "port %s" % name, None,
                                             {"network": network.name}, port_changes))
        for name, row in sorted(own.items()):
            # its port is gone (deleted by hand, or while the watcher was away)
            result.changes.append(_dropped(name, [row]))
        # the network's router port, made in this batch or before (a
        # provider network has none: one it had as an overlay goes in this batch)
        router_port = None if network.physnet else view.lookup("Logical_Router_Port", network.router_port)
        if router_port is not None and not isinstance(router_port, list):
            wanted_ra = ra_configs(network)
            if dict(cell(router_port, "ipv6_ra_configs") or {}) != wanted_ra:
                result.changes.append(Change("update", "router port %s" % network.router_port, None,
                                             {"ipv6_ra_configs": wanted_ra}, [
                                                 Op("update", "Logical_Router_Port", router_port,
                                                    "ipv6_ra_configs", wanted_ra)]))
    return result


def port_row_ops(view, network, port, override):
    """``(ops, row)``: the insert of port ``port``'s own row (a
    :class:`NewRow`), for a new port whose pod asked ``override``; a row
    an earlier port of that name left (deleted by hand) goes."""
    item = port_item(network, port, override)
    values = {"cidr": item["cidr"], "options": item["options"],
              "external_ids": {OWNER_KEY: OWNER_VALUE, NETWORK_KEY: network.name, K_DHCP_PORT: port,
                               K_DHCP_OVERRIDE: item["override"]}}
    row = view.new_row(TABLE, values)
    left = port_rows(view, network.name).get(port, [])
    return [Op("delete", TABLE, old) for old in left] + [Op("insert", TABLE, row, value=values)], row


def plan_forget(view, ports):
    """A :class:`Plan` deleting the rows made for ``ports`` (names), which go."""
    result = Plan(_Attachments(), "deleted")
    going = set(ports)
    for row in view.rows(TABLE):
        port = cell(row, "external_ids").get(K_DHCP_PORT)
        if port in going and cell(row, "external_ids").get(OWNER_KEY) == OWNER_VALUE:
            result.changes.append(_dropped(port, [row]))
    return result
