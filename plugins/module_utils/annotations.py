# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pod annotations the product reads and writes, in one place.

Read (see ``ARCHITECTURE.md``):

* ``ovnNetwork``: the seed format, a JSON list of ``{name, interface,
  ip_address?, mac_address?, default_gateway?, routes?}``; OVN4NFV's own
  spelling ``ipAddress``/``macAddress``/``defaultGateway`` (``"true"``) is
  accepted too;
* ``k8s.plugin.opnfv.org/nfn-network``: ``{"type": "ovn4nfv", "interface":
  [...]}`` with the camelCase fields;
* ``ovn``: the legacy single interface, on the default network, honoured
  only when neither of the above is present.

Written: ``ovnIfaceList`` and ``k8s.plugin.opnfv.org/ovnInterfaces``, built
with a JSON library. Every problem names the annotation and the field.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from . import addressing
from .errors import ValidationError
from .naming import ovn_name

OVN_NETWORK = "ovnNetwork"
NFN_NETWORK = "k8s.plugin.opnfv.org/nfn-network"
LEGACY = "ovn"
IFACE_LIST = "ovnIfaceList"
OVN_INTERFACES = "k8s.plugin.opnfv.org/ovnInterfaces"
MULTUS_NETWORKS = "k8s.v1.cni.cncf.io/networks"

MAX_INTERFACES = 10
LEGACY_INTERFACE = "eth0"
# alphanumeric, the last character a digit (the seed design), and a kernel
# interface name
_INTERFACE = re.compile(r"^[A-Za-z0-9]{0,14}[0-9]$")
_TRUE = (True, "true", "True", "TRUE", "yes")
_FALSE = (False, None, "false", "False", "FALSE", "no", "")


class InterfaceRequest:
    """One interface a pod asks for, checked for form; whether its
    addresses fit the network is checked when the network is known."""

    def __init__(self, network, interface, ip=None, mac=None, default_gateway=False, routes=(),
                 where=""):
        self.network = network
        self.interface = interface
        self.ip = ip                  # IPAddress, or None for dynamic
        self.mac = mac                # canonical MAC, or None for dynamic
        self.default_gateway = default_gateway
        self.routes = list(routes)    # [{"dst": CIDR, "gw": IP}]
        self.where = where            # e.g. "ovnNetwork[1]", for messages

    def __repr__(self):
        return "InterfaceRequest(%s, %s, ip=%s, mac=%s)" % (self.network, self.interface, self.ip,
                                                            self.mac)


def _json(annotations, key):
    text = annotations[key]
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValidationError("%s: not valid JSON (%s)" % (key, exc))


def _first(entry, *names):
    for name in names:
        if name in entry:
            return entry[name]
    return None


def _flag(value, field):
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValidationError("%s: %r is not true or false" % (field, value))


def _request(entry, where):
    if not isinstance(entry, dict):
        raise ValidationError("%s: %r is not an object" % (where, entry))
    network = entry.get("name")
    if not network:
        raise ValidationError("%s.name: the network's name is required" % where)
    ovn_name(network, where + ".name")
    interface = entry.get("interface")
    if not isinstance(interface, str) or not _INTERFACE.match(interface):
        raise ValidationError(
            "%s.interface: %r must be alphanumeric, end in a digit and be at most 15 "
            "characters" % (where, interface))
    ip = _first(entry, "ip_address", "ipAddress")
    if ip not in (None, ""):
        ip = addressing.parse_ip(str(ip).split("/")[0], where + ".ip_address")
    else:
        ip = None
    mac = _first(entry, "mac_address", "macAddress")
    mac = addressing.parse_mac(mac, where + ".mac_address") if mac not in (None, "") else None
    default = _flag(_first(entry, "default_gateway", "defaultGateway"), where + ".default_gateway")
    routes = []
    for index, route in enumerate(_first(entry, "routes") or []):
        field = "%s.routes[%d]" % (where, index)
        if not isinstance(route, dict) or not route.get("dst"):
            raise ValidationError("%s: %r needs a dst" % (field, route))
        dst = addressing.parse_cidr(route["dst"], field + ".dst")
        gw = addressing.parse_ip(route["gw"], field + ".gw") if route.get("gw") else None
        routes.append({"dst": str(dst), "gw": str(gw) if gw else None})
    return InterfaceRequest(network, interface, ip, mac, default, routes, where)


def _check_set(requests, source):
    if len(requests) > MAX_INTERFACES:
        raise ValidationError("%s: %d interfaces asked for; at most %d" % (
            source, len(requests), MAX_INTERFACES))
    seen, defaults = {}, []
    for request in requests:
        if request.interface in seen:
            raise ValidationError("%s.interface: %r is also %s's" % (
                request.where, request.interface, seen[request.interface]))
        seen[request.interface] = request.where
        if request.default_gateway:
            defaults.append(request.where)
    if len(defaults) > 1:
        raise ValidationError("%s: more than one default gateway (%s)" % (source, ", ".join(defaults)))
    return requests


def parse_requests(annotations, default_network=None):
    """The interfaces a pod asks for, from its annotations, as
    ``(source annotation, [InterfaceRequest])``; ``(None, [])`` when it asks
    for none. Raises ValidationError naming the annotation and field."""
    annotations = annotations or {}
    if OVN_NETWORK in annotations:
        entries = _json(annotations, OVN_NETWORK)
        if not isinstance(entries, list):
            raise ValidationError("%s: %r is not a list" % (OVN_NETWORK, entries))
        return OVN_NETWORK, _check_set([_request(e, "%s[%d]" % (OVN_NETWORK, i))
                                        for i, e in enumerate(entries)], OVN_NETWORK)
    if NFN_NETWORK in annotations:
        doc = _json(annotations, NFN_NETWORK)
        if not isinstance(doc, dict) or doc.get("type") != "ovn4nfv":
            raise ValidationError('%s: expected {"type": "ovn4nfv", "interface": [...]}, got %r' % (
                NFN_NETWORK, doc))
        entries = doc.get("interface")
        if not isinstance(entries, list):
            raise ValidationError("%s.interface: %r is not a list" % (NFN_NETWORK, entries))
        return NFN_NETWORK, _check_set([_request(e, "%s.interface[%d]" % (NFN_NETWORK, i))
                                        for i, e in enumerate(entries)], NFN_NETWORK)
    if LEGACY in annotations:
        if not default_network:
            raise ValidationError("%s: the legacy annotation needs a default network, and the "
                                  "watcher has none configured" % LEGACY)
        doc = _json(annotations, LEGACY) if annotations[LEGACY] else {}
        if not isinstance(doc, dict):
            raise ValidationError("%s: %r is not an object" % (LEGACY, doc))
        doc = dict(doc, name=default_network, interface=LEGACY_INTERFACE, default_gateway=True)
        return LEGACY, [_request(doc, LEGACY)]
    return None, []


def interface_entry(request, ip_cidr, mac, gateway, network_routes=()):
    """One ``ovnIfaceList`` entry (the seed's output format)."""
    routes = [dict(r) for r in network_routes] + [r for r in request.routes]
    for route in routes:
        route["gw"] = route.get("gw") or gateway
    return {"interface": request.interface, "ip_address": ip_cidr, "mac_address": mac,
            "gateway_ip": gateway, "default_gateway": request.default_gateway,
            "routes": routes}


def output_annotations(entries):
    """The annotations to write: the list under both keys, as JSON text."""
    text = json.dumps(entries, sort_keys=True, separators=(",", ":"))
    return {IFACE_LIST: text, OVN_INTERFACES: text}


def parse_iface_list(text):
    """``ovnIfaceList`` back into entries (for the CNI side)."""
    entries = json.loads(text)
    if not isinstance(entries, list):
        raise ValidationError("%s: %r is not a list" % (IFACE_LIST, entries))
    return entries
