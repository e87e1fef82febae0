# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pod annotations the product reads and writes, in one place.

Read (the operator's guide is ``docs/docsite/rst/watcher.rst``):

* ``ovnNetwork``: the seed format, a JSON list of ``{name, interface,
  ip_address?, mac_address?, default_gateway?, routes?, dhcp?, qos?}``
  (``dhcp``: the interface is configured inside, by its network's DHCP;
  ``qos``: what it sends, limited and marked, :mod:`.port_qos`); OVN4NFV's own
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

from ..common import addressing
from ..common.errors import ValidationError
from ..common.naming import ovn_name
from . import request_schema
from . import port_qos

OVN_NETWORK = "ovnNetwork"
NFN_NETWORK = "k8s.plugin.opnfv.org/nfn-network"
LEGACY = "ovn"
ROUTES = "ovnNetworkRoutes"
IFACE_LIST = "ovnIfaceList"
OVN_INTERFACES = "k8s.plugin.opnfv.org/ovnInterfaces"
MULTUS_NETWORKS = "k8s.v1.cni.cncf.io/networks"

MAX_INTERFACES = request_schema.MAX_INTERFACES
LEGACY_INTERFACE = "eth0"
# alphanumeric, the last character a digit (the seed design), and a kernel
# interface name
_INTERFACE = re.compile(request_schema.INTERFACE)
_VLAN_INTERFACE = re.compile(request_schema.INTERFACE[:-2] + r"\.[0-9]{1,4}\Z")
_TRUE = (True, "true", "True", "TRUE", "yes")
_FALSE = (False, None, "false", "False", "FALSE", "no", "")


class InterfaceRequest:
    """One interface a pod asks for, checked for form; whether its
    addresses fit the network is checked when the network is known."""

    def __init__(self, network, interface, ip=None, mac=None, default_gateway=False, routes=(),
                 where="", provider=None, ipam=False, prefix=None, dhcp=False, parent=None, vlan=None):
        self.network = network
        self.interface = interface
        self.ip = ip                  # IPAddress, or None for dynamic
        self.prefix = prefix          # the prefix length written beside ip, or None
        self.mac = mac                # canonical MAC, or None for dynamic
        self.default_gateway = default_gateway
        self.routes = list(routes)    # [{"dst": CIDR, "gw": IP}]
        self.route_fields = ["%s.routes[%d]" % (where, i) for i in range(len(self.routes))]
        self.where = where            # e.g. "ovnNetwork[1]", for messages
        self.provider = provider      # the Multus provider, for attachments
        self.ipam = ipam              # an address only, for another CNI (ovn4nfv-ipam)
        # configured inside the pod (a VM's guest, a DHCP client) by its
        # network's DHCP: the CNI plugin writes no address or route
        self.dhcp = dhcp
        # whether the request said default_gateway (true or false) at all
        self.default_given = default_gateway
        # a VLAN of a trunk (OVN's nested port): the trunk's interface, and
        # the VID its frames carry there; the pod makes no device of it
        self.parent = parent
        self.vlan = vlan
        # what it asks beyond full port security (:mod:`.port_grants`):
        # changed in place, never a new port, so not part of its shape
        self.security = "full"
        self.vips = []
        # what it sends, limited and marked ({rate?, burst?, dscp?}; None: as
        # it comes), changed in place: no part of shape()
        self.qos = None

    def shape(self):
        """What two requests must share to be served the same port: its
        network, name, static addresses, routes, default route and how it
        is configured."""
        return (self.network, self.interface, str(self.ip), str(self.mac), self.prefix, self.default_gateway,
                repr(self.routes), self.dhcp, self.provider, self.ipam, self.parent, self.vlan)

    def __repr__(self):
        return "InterfaceRequest(%s, %s, ip=%s, mac=%s)" % (self.network, self.interface, self.ip,
                                                            self.mac)


def _json(annotations, key):
    return request_schema.load(key, annotations[key])


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


def _exact(value, field):
    """A value with no surrounding whitespace (``"10.0.0.5\\n"`` is not an
    address, whatever a lenient parser makes of it)."""
    if not isinstance(value, str) or value != value.strip() or not value:
        raise ValidationError("%s: %r is not an address" % (field, value))
    return value


def _requests(entry, where):
    """The :class:`InterfaceRequest` of one entry its schema has passed,
    followed by one per VLAN it carries (a trunk's: ``vlans``), named
    ``<interface>.<vid>`` as the pod's own VLAN device would be."""
    request = _request(entry, where)
    vlans = entry.get("vlans") or []
    if vlans and (request.dhcp or request.provider):
        raise ValidationError("%s.vlans: a trunk's interface is the pod's, not %s" % (
            where, "a DHCP client's" if request.dhcp else "another plugin's"))
    out, seen = [request], {}
    for index, item in enumerate(vlans):
        field = "%s.vlans[%d]" % (where, index)
        vid = item.get("vlan") if isinstance(item, dict) else None
        if isinstance(vid, bool) or not isinstance(vid, int):   # 10.0 passes JSON Schema's "integer"
            raise ValidationError("%s.vlan: %r is not a VLAN ID (a whole number, 1-4094)" % (field, vid))
        if vid in seen:
            raise ValidationError("%s.vlan: %r is %s's too; each VLAN of a trunk is one network" % (
                field, vid, seen[vid]))
        seen[vid] = field
        name = "%s.%s" % (request.interface, vid)
        if len(name) > 15:
            raise ValidationError("%s.vlan: %s, the VLAN's interface, is longer than 15 characters; name the "
                                  "trunk shorter" % (field, name))
        child = _request(dict((k, v) for k, v in item.items() if k != "vlan"),
                         field, interface=name)
        child.parent, child.vlan = request.interface, vid
        out.append(child)
    return out


def _request(entry, where, interface=None):
    """An :class:`InterfaceRequest` from one entry its schema has passed
    (``interface``: a trunk VLAN's, which its entry does not name)."""
    if not isinstance(entry, dict):
        raise ValidationError("%s: %r is not an object" % (where, entry))
    network = entry.get("name")
    if not network:
        raise ValidationError("%s.name: the network's name is required" % where)
    ovn_name(network, where + ".name")
    # a trunk VLAN's name (``interface``, made by _requests) has its own form
    pattern = _VLAN_INTERFACE if interface else _INTERFACE
    interface = interface or entry.get("interface")
    if not isinstance(interface, str) or not pattern.match(interface):
        raise ValidationError(
            "%s.interface: %r must be alphanumeric, end in a digit and be at most 15 "
            "characters" % (where, interface))
    ip, prefix = None, None
    text = _first(entry, "ip_address", "ipAddress")
    if text not in (None, ""):
        ip, prefix = addressing.parse_ip_prefix(_exact(text, where + ".ip_address"), where + ".ip_address")
    mac = _first(entry, "mac_address", "macAddress")
    mac = addressing.parse_mac(_exact(mac, where + ".mac_address"), where + ".mac_address") \
        if mac not in (None, "") else None
    default_text = _first(entry, "default_gateway", "defaultGateway")
    default = _flag(default_text, where + ".default_gateway")
    dhcp = _flag(entry.get("dhcp"), where + ".dhcp")
    request = InterfaceRequest(network, interface, ip, mac, default, (), where, prefix=prefix, dhcp=dhcp)
    request.qos = port_qos.asked(entry.get("qos"), where + ".qos")
    # said, not left out: an interface configured by DHCP carries the
    # default route unless its request says false
    request.default_given = default_text not in (None, "")
    for index, route in enumerate(_first(entry, "routes") or []):
        _add_route(request, route, "%s.routes[%d]" % (where, index))
    request.security = entry.get("port_security") or "full"
    for index, text in enumerate(entry.get("virtual_ips") or []):
        field = "%s.virtual_ips[%d]" % (where, index)
        vip = str(addressing.parse_ip(_exact(text, field), field, version=4))
        if vip in request.vips or (ip is not None and vip == str(ip)):
            raise ValidationError("%s: %s is named twice for this interface" % (field, vip))
        request.vips.append(vip)
    return request


def _add_route(request, route, field):
    if not isinstance(route, dict) or not route.get("dst"):
        raise ValidationError("%s: %r needs a dst" % (field, route))
    dst = addressing.parse_cidr(_exact(route["dst"], field + ".dst"), field + ".dst")
    gw = addressing.parse_ip(_exact(route["gw"], field + ".gw"), field + ".gw") if route.get("gw") else None
    request.routes.append({"dst": str(dst), "gw": str(gw) if gw else None})
    request.route_fields.append(field)


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


# The forms a pod may ask with, in precedence order: the first present is
# used; any other present is reported (Warning Event IgnoredAnnotation).
FORMS = (OVN_NETWORK, NFN_NETWORK, LEGACY)


def request_forms(annotations):
    """``{annotation: value, or None when absent}`` of every request form
    (the pod's own and Multus'): what a list written for it was derived
    from, an absent form included (one added since changes the request)."""
    found = annotations or {}
    return dict((key, found.get(key)) for key in FORMS + (MULTUS_NETWORKS,))


def _entries(annotations, source, default_network):
    if source == OVN_NETWORK:
        return [r for i, e in enumerate(_json(annotations, source)) for r in _requests(e, "%s[%d]" % (OVN_NETWORK, i))]
    if source == NFN_NETWORK:
        entries = _json(annotations, source)["interface"]
        return [r for i, e in enumerate(entries) for r in _requests(e, "%s.interface[%d]" % (NFN_NETWORK, i))]
    if not default_network:
        raise ValidationError("%s: the legacy annotation needs a default network, and the "
                              "watcher has none configured" % LEGACY)
    doc = _json(annotations, LEGACY) if annotations[LEGACY] else {}
    doc = dict(doc, name=default_network, interface=LEGACY_INTERFACE, default_gateway=True)
    return [_request(doc, LEGACY)]


def parse_requests(annotations, default_network=None):
    """The interfaces a pod asks for, from its annotations, as
    ``(source annotation, [InterfaceRequest])``; ``(None, [])`` when it asks
    for none. The first of :data:`FORMS` present is used; OVN4NFV's
    ``ovnNetworkRoutes`` adds routes to the interfaces its ``dev`` names.
    Raises ValidationError naming the annotation and field."""
    annotations = annotations or {}
    source = next((form for form in FORMS if form in annotations), None)
    if source is None:
        return None, []
    requests = _check_set(_entries(annotations, source, default_network), source)
    if ROUTES in annotations:
        by_interface = dict((r.interface, r) for r in requests)
        for index, route in enumerate(_json(annotations, ROUTES)):
            field = "%s[%d]" % (ROUTES, index)
            if route["dev"] not in by_interface:
                raise ValidationError("%s.dev: %r names no interface of the pod (it has %s)" % (
                    field, route["dev"], ", ".join(sorted(by_interface))))
            _add_route(by_interface[route["dev"]], route, field)
    _check_default_routes(requests, source)
    return source, requests


def _check_default_routes(requests, source):
    """One default route per family: the interface that carries the default
    gateway, or one route to ``0.0.0.0/0`` (``::/0``); a second would fail
    on the node ("File exists")."""
    for version, everything in ((4, "0.0.0.0/0"), (6, "::/0")):
        holders = [r.where + ".default_gateway" for r in requests if r.default_gateway and version == 4]
        # an interface configured by DHCP carries its network's default route
        # unless its request says default_gateway: false
        holders += [r.where + ".dhcp" for r in requests
                    if r.dhcp and not r.default_given and not r.default_gateway and version == 4]
        for request in requests:
            holders += [f + ".dst" for route, f in zip(request.routes, request.route_fields)
                        if route["dst"] == everything]
        if len(holders) > 1:
            raise ValidationError("%s: %s: more than one default route (%s); a pod has one per family" % (
                holders[1], everything, ", ".join(holders)))


def unused_forms(annotations):
    """The request annotations present but not used: every form after the
    first of :data:`FORMS`, and ``ovnNetworkRoutes`` without any form."""
    present = [form for form in FORMS if form in (annotations or {})]
    unused = present[1:]
    if ROUTES in (annotations or {}) and not present:
        unused.append(ROUTES)
    return unused


_SELECTION = re.compile(r"(?:(?P<ns>[a-z0-9-]{1,63})/)?(?P<name>[a-z0-9.-]{1,253})(?:@(?P<iface>[^@/\s]{1,15}))?\Z")


def parse_multus(annotations, namespace):
    """Multus's selections, as ``[{name, namespace, interface, ips, mac,
    default_route, where}]``, from either of its forms: ``"a,ns/b@net5"`` or
    a JSON list. An attachment without an interface gets ``net<position>``,
    as Multus names them."""
    text = (annotations or {}).get(MULTUS_NETWORKS)
    if not text:
        return []
    if len(text) > request_schema.MAX_TEXT:
        raise ValidationError("%s: %d characters; at most %d are read" % (
            MULTUS_NETWORKS, len(text), request_schema.MAX_TEXT))
    selections = []
    if text.strip().startswith("["):
        items = _json(annotations, MULTUS_NETWORKS)
        for index, item in enumerate(items):
            where = "%s[%d]" % (MULTUS_NETWORKS, index)
            if not isinstance(item, dict) or not item.get("name"):
                raise ValidationError("%s.name: %r names no NetworkAttachmentDefinition" % (where, item))
            selections.append({"name": item["name"], "namespace": item.get("namespace") or namespace,
                               "interface": item.get("interface"), "ips": item.get("ips") or [],
                               "mac": item.get("mac"), "default_route": bool(item.get("default-route")),
                               "where": where})
    else:
        parts = [p.strip() for p in text.split(",")]
        if len(parts) > MAX_INTERFACES * 3:
            raise ValidationError("%s: %d selections; at most %d" % (MULTUS_NETWORKS, len(parts), MAX_INTERFACES * 3))
        for index, part in enumerate(parts):
            where = "%s[%d]" % (MULTUS_NETWORKS, index)
            match = _SELECTION.match(part)
            if not match:
                raise ValidationError("%s: %r is not [namespace/]name[@interface]" % (where, part))
            selections.append({"name": match.group("name"), "namespace": match.group("ns") or namespace,
                               "interface": match.group("iface"), "ips": [], "mac": None,
                               "default_route": False, "where": where})
    for position, selection in enumerate(selections, start=1):
        selection["interface"] = selection["interface"] or "net%d" % position
    return selections


def attachment_request(selection, network, provider, ipam, annotations, pool_choice=None, dhcp=None):
    """An :class:`InterfaceRequest` for one Multus attachment. Static values
    come, as in Kube-OVN, from ``<provider>.kubernetes.io/ip_address`` and
    ``mac_address`` (or the selection's ``ips`` and ``mac``), or from the
    address ``pool_choice`` picked from ``ip_pool``; ``dhcp``, the
    NetworkAttachmentDefinition's own word that its interfaces are
    configured inside (a VM's guest, by the network's DHCP)."""
    where = selection["where"]
    entry = {"name": network, "interface": selection["interface"],
             "ip_address": annotations.get(provider + ".kubernetes.io/ip_address") or pool_choice
             or (selection["ips"][0] if selection["ips"] else None),
             "mac_address": annotations.get(provider + ".kubernetes.io/mac_address") or selection["mac"],
             "default_gateway": selection["default_route"]}
    if dhcp is not None:
        entry["dhcp"] = dhcp
    request = _request(entry, where)
    request.provider, request.ipam = provider, ipam
    return request


def check_provider_keys(annotations, provider):
    """Refuse an unknown ``<provider>.kubernetes.io/<key>`` of one of the
    product's providers, naming the known key it resembles."""
    prefix = provider + ".kubernetes.io/"
    problems = [request_schema.unknown_key(key, key[len(prefix):], request_schema.PROVIDER_KEYS)
                for key in sorted(annotations or {}) if key.startswith(prefix)
                and key[len(prefix):] not in request_schema.PROVIDER_KEYS]
    if problems:
        raise ValidationError(problems)


def ip_pool(annotations, provider, where):
    """The addresses of ``<provider>.kubernetes.io/ip_pool``, checked."""
    text = annotations.get(provider + ".kubernetes.io/ip_pool")
    if not text:
        return []
    field = "%s.%s.kubernetes.io/ip_pool" % (where, provider)
    parts = [part for part in re.split(r"[,;\s]+", text[:request_schema.MAX_TEXT].strip()) if part]
    if len(parts) > 256:
        raise ValidationError("%s: %d addresses; at most 256" % (field, len(parts)))
    return [addressing.parse_ip(part, field) for part in parts]


def check_interfaces(requests, source):
    """The rules that span a pod's interfaces: at most 10, names unique, at
    most one default gateway."""
    return _check_set(requests, source)


def provider_annotations(provider, entry, subnet):
    """Kube-OVN-style per-provider annotations for an ovn4nfv-ipam
    attachment; what the IPAM plugin hands to the other CNI plugin."""
    prefix = provider + ".kubernetes.io/"
    return {prefix + "ip_address": entry["ip_address"].split("/")[0], prefix + "mac_address": entry["mac_address"],
            prefix + "cidr": str(subnet), prefix + "gateway": entry["gateway_ip"], prefix + "allocated": "true"}


def other_plugin_addresses(annotations):
    """The addresses a pod's annotations hand to other CNI plugins (what
    :func:`provider_annotations` wrote): the ``ip_address`` of each
    provider marked ``allocated``."""
    tail = ".kubernetes.io/allocated"
    return set(annotations.get(key[:-len("allocated")] + "ip_address") for key, value in (annotations or {}).items()
               if key.endswith(tail) and value == "true") - set([None])


def interface_entry(request, ip_cidr, mac, gateway, network_routes=(), mtu=None):
    """One ``ovnIfaceList`` entry (the seed's output format); ``mtu``, the
    network's when it declares one, which the CNI plugin gives the
    interface (and its DHCP the guest)."""
    routes = [dict(r) for r in network_routes] + list(request.routes)
    for route in routes:
        route["gw"] = route.get("gw") or gateway
    entry = {"interface": request.interface, "ip_address": ip_cidr, "mac_address": mac,
             "gateway_ip": gateway, "default_gateway": request.default_gateway,
             "routes": routes}
    if mtu:
        entry["mtu"] = int(mtu)
    if request.parent:
        entry.update(parent=request.parent, vlan=request.vlan)
    if request.dhcp:
        # the address its DHCP answers with; the guest writes it, and the
        # routes and default route its DHCP gives (cluster/dhcp.py)
        entry.update(dhcp=True, routes=[])
    return entry


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
