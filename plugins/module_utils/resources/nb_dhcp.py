# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OVN's ``DHCP_Options`` as a reconcile resource: the DHCP (v4 or v6)
that OVN answers itself for the ports that point at a row through their
``dhcpv4_options`` or ``dhcpv6_options``.

**Identity.** ``DHCP_Options`` has no name column: a row is its ``cidr``,
its ``options`` and its ``external_ids``, and nothing in the schema stops
two rows from having the same ``cidr``. The product serves DHCP per virtual
network, so an object here is known by the network it serves and its
``cidr``: ``(network, cidr)``. The network is recorded in ``external_ids``
under :data:`~..common.marks.NETWORK_KEY`, the key that already names a
network on its switch and ports; the ``cidr`` is the column itself, in
canonical form. Both are needed: a dual-stack network has one row per
address family (an IPv4 and an IPv6 ``cidr``), and two networks may use
the same ``cidr`` (isolated networks with overlapping subnets) while each
needs a row of its own, since a port points at exactly one row. ``cidr``
alone would merge those; the network alone could not tell v4 from v6.
A row made for one pod port (its routes or default route its own, see
:mod:`..cluster.dhcp`) is known by that port too (``port``, under
``K_DHCP_PORT``): ``(network, cidr, port)``, the network's own row having
no port.

Rows made by others (``ovn-nbctl dhcp-options-create``, Neutron, another
controller) carry no network mark: they read with ``network`` unset, so no
declaration can name them, and without the owner mark ``overridden`` and a
bare ``deleted`` never remove them.

**Validation.** ``network`` is an OVN name and ``cidr`` an IPv4 or IPv6
network address (host bits refused); ``options`` and ``external_ids`` are
maps of strings (numbers and booleans are written as strings, as OVSDB
holds them). The options whose form OVN fixes are checked and written in
canonical form, so that a second run finds them equal: for IPv4
``server_id`` and ``router`` are IPv4 addresses, ``server_mac`` a MAC and
``lease_time`` a number of seconds; for IPv6 ``server_id`` is a MAC (OVN's
DHCPv6 server identifier is an Ethernet address). Other options are OVN's
to judge: they are written as given. The owner mark and the network mark
may not be written through ``external_ids``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import K_DHCP_OVERRIDE, K_DHCP_PORT, NETWORK_KEY, OWNER_KEY
from ..ovsdb.connection import NB_SCHEMA
from ..ovsdb.fields import Field
from ..ovsdb.resource import Resource
from .nb_common import check_maps, required_name

# seconds: DHCPv4's lease time is an unsigned 32-bit number (RFC 2132)
_MAX_LEASE = 0xFFFFFFFF


def _ipv4(value, where):
    return str(addressing.parse_ip(value, where, version=4))


def _lease(value, where):
    text = str(value).strip()
    if not text.isdigit() or int(text) > _MAX_LEASE:
        raise ValidationError("%s: %r is not a lease time in seconds (0-%d)" % (where, value, _MAX_LEASE))
    return str(int(text))


# the options whose form OVN fixes, per IP version: {key: canonical form}
CHECKED_OPTIONS = {
    4: {"server_id": _ipv4, "router": _ipv4, "server_mac": addressing.parse_mac, "lease_time": _lease},
    6: {"server_id": addressing.parse_mac},
}


class DHCPOptions(Resource):
    """One ``DHCP_Options`` row, known by ``(network, cidr, port)`` (see the
    module's docstring for why)."""

    name = "dhcp_options"
    schema = NB_SCHEMA
    table = "DHCP_Options"
    tables = ("DHCP_Options",)
    identity = ("network", "cidr", "port")
    fields = (
        Field("network", column="external_ids", kind="mapkey", key=NETWORK_KEY),
        Field("cidr", default=""),
        # a row made for one pod port (cluster/dhcp.py), and what its pod asked
        Field("port", column="external_ids", kind="mapkey", key=K_DHCP_PORT),
        Field("override", column="external_ids", kind="mapkey", key=K_DHCP_OVERRIDE),
        Field("options", kind="map"),
        Field("external_ids", kind="map", exclude_keys=(OWNER_KEY, NETWORK_KEY, K_DHCP_PORT, K_DHCP_OVERRIDE)),
    )

    def validate(self, item, where, state):
        required_name(item, where, "network")
        if item.get("cidr") in (None, ""):
            raise ValidationError("%s.cidr: is required" % where)
        cidr = addressing.parse_cidr(item["cidr"], where + ".cidr")
        item["cidr"] = str(cidr)
        check_maps(item, where, ("options", "external_ids"))
        for key, option in ((NETWORK_KEY, "network"), (K_DHCP_PORT, "port"), (K_DHCP_OVERRIDE, "override")):
            if key in (item.get("external_ids") or {}):
                raise ValidationError("%s.external_ids: the key %r is set with the %s option" % (
                    where, key, option))
        if item.get("port") is not None:
            required_name(item, where, "port")
        if state == "deleted":
            return item
        options = item.get("options") or {}
        for key, canonical in sorted(CHECKED_OPTIONS[cidr.version].items()):
            if options.get(key) is not None:
                options[key] = canonical(options[key], "%s.options.%s" % (where, key))
        return item
