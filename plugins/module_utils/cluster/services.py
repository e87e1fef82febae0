# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes Services on virtual networks, as OVN load balancers.

A Service is the product's business when it carries the annotation
``k8s.plugin.opnfv.org/service-network`` naming a virtual network. Its
endpoints are the addresses, on that network, of the ready pods its
selector matches (or, without a selector, the addresses its EndpointSlices
list). For each protocol it uses, the product keeps two load balancers,
marked with the Service's key and UID like a pod's ports:

* ``svc_<namespace>_<name>_<protocol>``: the Service's VIP on the virtual
  networks (``k8s.plugin.opnfv.org/service-vip``, else ``spec.clusterIP``),
  attached to every overlay network's switch, so that a pod on any of them
  reaches it; the switch of the client balances, the distributed router
  carries the packet to the backend's network (a provider network has no
  router: its switch takes no VIP, and a Service on it is refused);
* ``svcx_<namespace>_<name>_<protocol>``: its ``spec.externalIPs``, attached
  to exactly one gateway router per address, so that exactly one gateway
  answers ARP for it on the external network (see :func:`gateway_for`).

A Service with no ready endpoint keeps its VIPs, with OVN's ``reject``: a
client gets a TCP reset or an ICMP unreachable at once rather than a
timeout, as kube-proxy gives it. Everything here is plain data in and a
plan out; :mod:`..daemons.service_watch` feeds it from the API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import K_SERVICE, K_SERVICE_PART, K_SERVICE_UID, K_UID, OWNER_KEY, OWNER_VALUE
from ..ovsdb.plan import plan, validate_config
from ..resources.nb_balancers import LoadBalancer
from . import networks as vn
from .pod_addresses import held_addresses
from .topology import read_gateways, read_topology

NETWORK_ANNOTATION = "k8s.plugin.opnfv.org/service-network"
VIP_ANNOTATION = "k8s.plugin.opnfv.org/service-vip"
PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}
DEFAULT_AFFINITY = 10800          # Kubernetes' default sessionAffinityConfig.clientIP.timeoutSeconds
TABLES = ("Load_Balancer", "Load_Balancer_Health_Check")

# Event reasons on the Service
INVALID = "InvalidService"
UNKNOWN_NETWORK = "UnknownNetwork"
VIP_CONFLICT = "VIPConflict"


class Port:
    """One port of a Service: its name, protocol, port and target port (a
    number, or the name of a container port)."""

    def __init__(self, name, protocol, port, target):
        self.name = name or ""
        self.protocol = protocol or "TCP"
        self.port = port
        self.target = port if target in (None, "", 0) else target


class Service:
    """What the product reads of a Service, as plain data."""

    def __init__(self, namespace, name, uid, annotations, cluster_ip=None, external_ips=(),
                 ports=(), selector=None, affinity_timeout=None, publish_not_ready=False):
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.annotations = dict(annotations or {})
        self.cluster_ip = cluster_ip
        self.external_ips = list(external_ips or ())
        self.ports = list(ports)
        self.selector = selector
        self.affinity_timeout = affinity_timeout
        self.publish_not_ready = publish_not_ready

    @property
    def key(self):
        return "%s/%s" % (self.namespace, self.name)

    @property
    def network(self):
        return self.annotations.get(NETWORK_ANNOTATION)

    def selects(self, labels):
        """Whether the selector matches ``labels``; a Service without one
        (or with an empty one) selects no pod, as in Kubernetes."""
        if not self.selector:
            return False
        labels = labels or {}
        return all(labels.get(k) == v for k, v in self.selector.items())


class Endpoint:
    """A backend candidate: a selected pod (``uid``, its named container
    ports, readiness) or an EndpointSlice address (``ip``, its slice's
    named ports)."""

    def __init__(self, ready, named_ports=None, pod=None, uid=None, ip=None):
        self.ready = ready
        self.named_ports = dict(named_ports or {})
        self.pod = pod
        self.uid = uid
        self.ip = ip


def is_ours(service):
    return bool(service.network)


def lb_name(service, protocol, external=False):
    """``svc_<namespace>_<name>_<tcp|udp|sctp>`` (``svcx_`` for external
    addresses): ``_`` is in no Kubernetes name, so no two Services share one."""
    return "%s_%s_%s_%s" % ("svcx" if external else "svc", service.namespace, service.name,
                            PROTOCOLS[protocol])


def _owned_by(current, key):
    ids = current.cols.get(("Load_Balancer", "external_ids")) or {}
    return ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(K_SERVICE) == key


def service_vips(view):
    """``{ip: service key}`` of every VIP the product's balancers hold."""
    out = {}
    for row in view.rows("Load_Balancer"):
        ids = row.external_ids
        if ids.get(OWNER_KEY) != OWNER_VALUE or not ids.get(K_SERVICE):
            continue
        for vip in row.vips:
            ip, _port = addressing.parse_endpoint(vip, "vip")
            out.setdefault(str(ip), ids[K_SERVICE])
    return out


def owned_services(view):
    """``{service key: uid}`` of every Service the product has balancers for."""
    return dict((row.external_ids[K_SERVICE], row.external_ids.get(K_SERVICE_UID))
                for row in view.rows("Load_Balancer")
                if row.external_ids.get(OWNER_KEY) == OWNER_VALUE and row.external_ids.get(K_SERVICE))


def gateway_for(ip, gateways):
    """The gateway that answers for external address ``ip``: among the
    gateways whose external network holds it (else all), the one with the
    highest rendezvous hash of address and node. Every watcher computes the
    same owner; when that gateway is removed, the next highest takes the
    address, and the others keep theirs."""
    near = [g for g in gateways if g.external_net is not None and ip in g.external_net]
    candidates = near or list(gateways)
    if not candidates:
        return None
    return max(candidates, key=lambda g: hashlib.sha256(
        ("%s|%s" % (ip, g.node)).encode()).hexdigest())


# Addresses no gateway can answer for: "this network", and what IANA keeps
# for the future with the limited broadcast in it.
_NOT_SERVABLE_V4 = ("0.0.0.0/8", "240.0.0.0/4")


def _check_address(ip, field, networks, topology, gateways):
    """Whether a gateway can answer for ``ip`` on the external network:
    a unicast address of its own family that no network, join subnet,
    gateway or upstream router holds."""
    if ip.is_loopback() or ip.is_multicast() or ip.is_link_local() or ip.value == 0 or \
            (ip.version == 4 and any(ip in addressing.parse_cidr(c, "special") for c in _NOT_SERVABLE_V4)):
        raise ValidationError("%s: %s is a special-purpose address (loopback, multicast, link-local, "
                              "unspecified, reserved or broadcast): no gateway can answer for it" % (field, ip))
    if ip.version == 6 and (ip.is_ipv4_mapped() or ip.is_ipv4_compat()):
        raise ValidationError("%s: %s is an IPv4 address written as IPv6; give %s" % (field, ip, ip.ipv4()))
    for network in networks.values():
        if ip in network.subnet or (network.subnet6 is not None and ip in network.subnet6):
            raise ValidationError("%s: %s is inside virtual network %s (%s)" % (
                field, ip, network.name, network.subnet))
    if topology is not None and ip in topology.join_subnet:
        raise ValidationError("%s: %s is inside the join subnet %s" % (field, ip, topology.join_subnet))
    for gateway in gateways:
        if ip == gateway.external_ip:
            raise ValidationError("%s: %s is gateway %s's own external address" % (
                field, ip, gateway.node))
        if ip == gateway.external_gateway:
            raise ValidationError("%s: %s is the upstream router of gateway %s" % (field, ip, gateway.node))
        net = gateway.external_net
        if net is not None and net.version == ip.version and net.size > 2 and ip in (net.network, net.broadcast):
            raise ValidationError("%s: %s is the %s address of gateway %s's external network %s" % (
                field, ip, "network" if ip == net.network else "broadcast", gateway.node, net))


def _resolve(port, endpoint):
    """The backend port of ``endpoint`` for service ``port``, or None."""
    if isinstance(port.target, int):
        if endpoint.ip is not None:     # a slice says its ports by the service port's name
            return endpoint.named_ports.get(port.name, port.target)
        return port.target
    return endpoint.named_ports.get(port.target if endpoint.ip is None else port.name)


def _backend_ips(view, service, network, endpoints, addresses):
    """``[(ip, endpoint)]`` of the endpoints that serve now."""
    out = []
    for endpoint in endpoints:
        if not endpoint.ready and not service.publish_not_ready:
            continue
        if endpoint.ip is not None:
            ip = addressing.parse_ip(endpoint.ip, "endpoint")
            if ip in network.subnet:
                out.append((ip, endpoint))
            continue
        for row in addresses.ports_of(view, service.namespace, endpoint.pod):
            if row.external_ids.get(K_UID) != endpoint.uid:
                continue
            _mac, ips = held_addresses(row)
            for ip in ips:
                if ip in network.subnet:
                    out.append((ip, endpoint))
    return out


def desired(view, service, endpoints, addresses):
    """The config items of the Service's balancers. Raises
    ValidationError, whose ``reason`` is the Event's, for bad input."""
    where = "service %s" % service.key
    networks = vn.read_network_settings(view)
    network = networks.get(service.network)
    if network is None:
        raise ValidationError("%s: %s names network %r, which does not exist" % (
            where, NETWORK_ANNOTATION, service.network), reason=UNKNOWN_NETWORK)
    topology = read_topology(view)
    gateways = list(read_gateways(view).values())
    vip = service.annotations.get(VIP_ANNOTATION) or service.cluster_ip
    if vip in ("None", ""):
        vip = None
    vip = addressing.parse_ip(vip, where + ": " + VIP_ANNOTATION) if vip else None
    if vip is not None:
        _check_address(vip, where + ": the VIP", networks, topology, gateways)
    if network.physnet:
        # a client sends to the VIP through its gateway, the fabric's
        # router: once balanced on the switch, the packet still goes to that
        # router's MAC and leaves OVN (kube-ovn #5395); nothing would answer
        raise ValidationError("%s: network %s is a provider network (physnet %s): its gateway is the fabric's "
                              "router, so a VIP balanced by OVN would leave for that router and be lost; put the "
                              "Service on an overlay network" % (where, network.name, network.physnet),
                              reason=INVALID)
    external = []
    for index, text in enumerate(service.external_ips):
        ip = addressing.parse_ip(text, "%s: spec.externalIPs[%d]" % (where, index))
        _check_address(ip, "%s: spec.externalIPs[%d]" % (where, index), networks, topology, gateways)
        external.append(ip)
    taken = service_vips(view)
    for ip in ([vip] if vip is not None else []) + external:
        other = taken.get(str(ip))
        if other is not None and other != service.key:
            raise ValidationError("%s: %s is already a VIP of service %s" % (where, ip, other),
                                  reason=VIP_CONFLICT)
    if not service.ports:
        raise ValidationError("%s: spec.ports is empty" % where)
    for index, port in enumerate(service.ports):
        field = "%s: spec.ports[%d]" % (where, index)
        if port.protocol not in PROTOCOLS:
            raise ValidationError("%s.protocol: %r is not one of %s" % (
                field, port.protocol, ", ".join(sorted(PROTOCOLS))))
        if isinstance(port.port, bool) or not isinstance(port.port, int) or not 1 <= port.port <= 65535:
            raise ValidationError("%s.port: %r is out of range 1-65535" % (field, port.port))
        if isinstance(port.target, int) and not 1 <= port.target <= 65535:
            raise ValidationError("%s.targetPort: %r is out of range 1-65535" % (field, port.target))
    backends = _backend_ips(view, service, network, endpoints, addresses)
    marks = {K_SERVICE: service.key, K_SERVICE_UID: service.uid}
    # the overlays' switches: their pods reach the backends through the
    # router (a provider network's switch has none)
    switches = sorted(n for n, net in networks.items() if not net.physnet)
    items = []
    for protocol in sorted(set(p.protocol for p in service.ports)):
        vips, outside = {}, {}
        for port in (p for p in service.ports if p.protocol == protocol):
            chosen = sorted(set(addressing.format_endpoint(ip, _resolve(port, endpoint))
                                for ip, endpoint in backends if _resolve(port, endpoint)))
            if vip is not None:
                vips[addressing.format_endpoint(vip, port.port)] = chosen
            for ip in external:
                outside[addressing.format_endpoint(ip, port.port)] = chosen
        common = {"protocol": PROTOCOLS[protocol], "options": {"reject": "true"}}
        if service.affinity_timeout:
            common["affinity_timeout"] = service.affinity_timeout
        if vips:
            items.append(dict(common, name=lb_name(service, protocol), vips=vips, switches=switches,
                              external_ids=dict(marks, **{K_SERVICE_PART: "cluster"})))
        for ip in external:
            owner = gateway_for(ip, gateways)
            if owner is None:
                continue
            these = dict((v, b) for v, b in outside.items()
                         if addressing.parse_endpoint(v, "vip")[0] == ip)
            items.append(dict(common, name="%s_%s" % (lb_name(service, protocol, True), ip),
                              vips=these, routers=[owner.router],
                              external_ids=dict(marks, **{K_SERVICE_PART: "external"})))
    return items


def plan_service(view, service, endpoints, addresses):
    """The plan that makes the Service's balancers exactly :func:`desired`'s,
    and removes its others (a protocol or an external address it no longer
    has): one transaction."""
    items = desired(view, service, endpoints, addresses) if is_ours(service) else []
    return plan_items(view, service.key, items)


def plan_items(view, key, items):
    resource = LoadBalancer()
    checked = validate_config(resource, items, "replaced")
    return plan(resource, checked, "overridden", view, scope=lambda cur: _owned_by(cur, key))


def plan_remove(view, key):
    """The plan that removes every balancer of the Service ``key``."""
    return plan_items(view, key, [])
