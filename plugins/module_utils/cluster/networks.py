# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Virtual networks: the seed design's CreateVL, UpdateVL, DeleteVL, QueryVL.

A network is declared in the operator's terms (subnet, gateway, exclude
ranges, MTU, DNS, routes, provider) and realised by a backend:

* ``ovn``: a logical switch with ``other_config:subnet`` and
  ``exclude_ips`` (OVN allocates addresses), attached to the cluster's
  distributed router through a router port that holds the gateway; or,
  for a *provider network* (``physnet``), on the operator's own L2
  instead: a localnet port ``lnet-<network>`` on the physical network
  (``options:network_name``), with the network's ``vlan`` as its access
  tag, no router port, no route and no SNAT: the gateway is the fabric's
  router, and frames between nodes cross the wire, not the tunnels;
* ``ovs``: a plain OVS bridge on the node (the ovs-cni style), with the
  network's record in the bridge's ``external_ids``.

The network's own settings are recorded in ``external_ids`` so that the
watcher and the IPAM plugin can read them back (see :func:`read_networks`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json
import re

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import (
    K_DHCP, K_DNS, K_EXCLUDE, K_GATEWAY, K_GATEWAY6, K_MTU, K_PHYSNET, K_POLICY_MODE, K_PROVIDER, K_RELAXED,
    K_ROUTES, K_SUBNET, K_SUBNET6, K_VIRTUAL_IPS, K_VLAN, NETWORK_KEY, OWNER_KEY, OWNER_VALUE)
from ..common.naming import in_range, interface_name, ovn_name, physnet_name
from ..ovsdb.declared import CompositeKind, plan_declared
from ..ovsdb.view import cell
from ..ovsdb.plan import plan, validate_config
from ..resources.nb_dhcp import DHCPOptions
from ..resources.nb_switches import LogicalSwitch, LogicalSwitchPort
from ..resources.ovs import Bridge
from . import dhcp as dhcp_service, network_safety
from . import port_qos
from .network_model import Network
from .topology import read_gateways, require_topology
from .wiring import build_batch, cross_checks

BACKENDS = ("ovn", "ovs")
# Outer IPv4 (20) + UDP (8) + Geneve (8) + OVN's option (8) + inner Ethernet (14).
GENEVE_OVERHEAD = 58
_PROVIDER = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.ovn)?\Z")
OPTIONS = ("name", "subnet", "gateway", "subnet6", "gateway6", "exclude_ips", "mtu", "dns",
           "routes", "provider", "backend", "bridge", "vlan", "policy_mode", "dhcp", "physnet",
           "relaxed_port_security", "virtual_ips")
# how a network's policies keep state: stateful (conntrack: replies and
# related ICMP pass, Services are balanced) or stateless (no conntrack)
POLICY_MODES = ("stateful", "stateless")


def check_network(item, where):
    """Formats of the options given; completeness is checked later, after
    merging with what exists."""
    out = dict((k, v) for k, v in item.items() if v is not None)
    if "name" not in out:
        raise ValidationError("%s.name: a name is required" % where)
    ovn_name(out["name"], where + ".name")
    if out.get("backend") not in (None, "auto") + BACKENDS:
        raise ValidationError("%s.backend: %r is not one of ovn, ovs, auto" % (where, out["backend"]))
    if "subnet" in out:
        out["subnet"] = addressing.parse_cidr(out["subnet"], where + ".subnet", version=4)
    if "gateway" in out:
        # OVN4NFV's definitions wrote the gateway with the subnet's prefix
        # ("10.1.20.1/24"): accepted when it is the subnet's, kept without
        gateway, length = addressing.parse_ip_prefix(out["gateway"], where + ".gateway", version=4)
        if length is not None:
            if "subnet" not in out:
                raise ValidationError("%s.gateway: %r has a prefix length; give the subnet beside it" % (
                    where, item["gateway"]))
            addressing.require_prefix(length, out["subnet"], where + ".gateway", item["gateway"])
        out["gateway"] = gateway
    if "subnet6" in out:
        out["subnet6"] = addressing.parse_cidr(
            addressing.ipv6_prefix(out["subnet6"], where + ".subnet6") + "/64", where + ".subnet6")
    if "gateway6" in out:
        out["gateway6"] = addressing.parse_ip(out["gateway6"], where + ".gateway6", version=6)
    if "mtu" in out:
        in_range(out["mtu"], 576, 9216, where + ".mtu")
    for index, server in enumerate(out.get("dns") or []):
        addressing.parse_ip(server, "%s.dns[%d]" % (where, index))
    if "provider" in out and not _PROVIDER.match(out["provider"]):
        raise ValidationError("%s.provider: %r is not <nad>.<namespace> or <nad>.<namespace>.ovn" % (
            where, out["provider"]))
    if "bridge" in out:
        interface_name(out["bridge"], where + ".bridge")
    if "vlan" in out:
        in_range(out["vlan"], 1, 4094, where + ".vlan")
    if out.get("physnet") not in (None, ""):
        physnet_name(out["physnet"], where + ".physnet")
    if "policy_mode" in out and out["policy_mode"] not in POLICY_MODES:
        raise ValidationError("%s.policy_mode: %r is not one of %s" % (
            where, out["policy_mode"], ", ".join(POLICY_MODES)))
    if "dhcp" in out:
        # False: turned off (a merged task that says nothing keeps it)
        out["dhcp"] = dhcp_service.check(out["dhcp"], where + ".dhcp") or False
    if "relaxed_port_security" in out:
        out["relaxed_port_security"] = _check_relaxed(out["relaxed_port_security"], where + ".relaxed_port_security")
    if "virtual_ips" in out:
        out["virtual_ips"] = _check_virtual_ips(out["virtual_ips"], where + ".virtual_ips")
    if "qos_max" in out:
        # False: removed (a merged task that says nothing keeps it)
        out["qos_max"] = port_qos.check_cap(out["qos_max"], where + ".qos_max") or False
    return out


_NAMESPACE = re.compile(r"^(\*|[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\Z")


def _namespace(value, field):
    if not isinstance(value, str) or not _NAMESPACE.match(value):
        raise ValidationError("%s: %r is not a namespace's name (or *, every namespace)" % (field, value))
    return value


def _check_relaxed(items, where):
    """``[{namespace, level}]`` as ``{namespace: level}``; a namespace
    once."""
    out = {}
    for index, item in enumerate(items or []):
        field = "%s[%d]" % (where, index)
        namespace = _namespace((item or {}).get("namespace"), field + ".namespace")
        if item.get("level") not in ("mac", "off"):
            raise ValidationError("%s.level: %r is not mac or off" % (field, item.get("level")))
        if namespace in out:
            raise ValidationError("%s.namespace: %s is named twice" % (field, namespace))
        out[namespace] = item["level"]
    return out


def _check_virtual_ips(items, where):
    """``[{address, namespaces}]``, each address once, namespaces sorted."""
    out, seen = [], set()
    for index, item in enumerate(items or []):
        field = "%s[%d]" % (where, index)
        address = str(addressing.parse_ip((item or {}).get("address"), field + ".address", version=4))
        if address in seen:
            raise ValidationError("%s.address: %s is named twice" % (field, address))
        seen.add(address)
        namespaces = item.get("namespaces")
        if not isinstance(namespaces, list) or not namespaces:
            raise ValidationError("%s.namespaces: the namespaces whose pods may hold %s are required" % (
                field, address))
        out.append({"address": address, "namespaces": sorted(set(
            _namespace(n, "%s.namespaces[%d]" % (field, i)) for i, n in enumerate(namespaces)))})
    return sorted(out, key=lambda v: addressing.parse_ip(v["address"], "address"))


def complete(given, current, merge, backend, where, underlay_mtu=None):
    """A :class:`Network` from the options ``given``, merged with the
    ``current`` network under ``merged``; every rule checked."""
    base = current.config() if (merge and current is not None) else {}
    cfg = dict(base)
    cfg.update(given)
    for subnet_key, gateway_key in (("subnet", "gateway"), ("subnet6", "gateway6")):
        # a gateway the new subnet does not hold follows the subnet to its default
        if current is not None and merge and subnet_key in given and gateway_key not in given \
                and base.get(gateway_key):
            old_gateway = addressing.parse_ip(base[gateway_key], gateway_key)
            if old_gateway not in given[subnet_key]:
                cfg.pop(gateway_key)
    if "subnet" not in cfg:
        raise ValidationError("%s.subnet: a new network needs a subnet" % where)
    subnet = addressing.parse_cidr(cfg["subnet"], where + ".subnet", version=4)
    if subnet.size < 4:
        raise ValidationError("%s.subnet: %s has no room for a gateway and a port" % (where, subnet))
    gateway = addressing.parse_ip(cfg.get("gateway") or addressing.host(subnet, 1),
                                  where + ".gateway", version=4)
    if gateway not in subnet or gateway in (subnet.network, subnet.broadcast):
        raise ValidationError("%s.gateway: %s is not a host address of the subnet %s" % (
            where, gateway, subnet))
    excludes = addressing.parse_exclude_ips(cfg.get("exclude_ips") or [], subnet,
                                            where + ".exclude_ips")
    if gateway not in addressing.ip_set(subnet, excludes):
        raise ValidationError("%s.gateway: %s lies inside exclude_ips %s" % (
            where, gateway, " ".join(excludes)))
    backend = cfg.get("backend") if cfg.get("backend") in BACKENDS else backend
    physnet = cfg.get("physnet") or None
    if not physnet and "physnet" in given and "vlan" not in given and backend == "ovn":
        cfg.pop("vlan", None)       # a provider network's tag goes with its physnet
    # a provider network's frames cross the wire untunnelled: its MTU is
    # the physical NIC's to fit (the roles' preflight), not the underlay's
    if underlay_mtu and cfg.get("mtu") and backend == "ovn" and not physnet and \
            cfg["mtu"] > underlay_mtu - GENEVE_OVERHEAD:
        raise ValidationError(
            "%s.mtu: %d does not fit the underlay MTU %d minus %d bytes of Geneve overhead (max %d)" % (
                where, cfg["mtu"], underlay_mtu, GENEVE_OVERHEAD, underlay_mtu - GENEVE_OVERHEAD))
    routes = []
    for index, route in enumerate(cfg.get("routes") or []):
        field = "%s.routes[%d]" % (where, index)
        dst = addressing.parse_cidr(route.get("dst"), field + ".dst", version=4)
        hop = addressing.parse_ip(route.get("gw") or gateway, field + ".gw", version=4)
        addressing.require_inside(hop, subnet, field + ".gw", route.get("gw"))
        routes.append({"dst": str(dst), "gw": str(hop)})
    subnet6 = gateway6 = None
    if cfg.get("subnet6"):
        subnet6 = addressing.parse_cidr(cfg["subnet6"], where + ".subnet6", version=6)
        gateway6 = addressing.parse_ip(cfg.get("gateway6") or addressing.host(subnet6, 1),
                                       where + ".gateway6", version=6)
        if gateway6 not in subnet6 or gateway6 == subnet6.network:
            raise ValidationError("%s.gateway6: %s is not a host address of the subnet %s" % (
                where, gateway6, subnet6))
    elif cfg.get("gateway6"):
        raise ValidationError("%s.gateway6: %s needs a subnet6" % (where, cfg["gateway6"]))
    if backend == "ovn" and cfg.get("vlan") and not physnet:
        raise ValidationError("%s.vlan: %r is a provider network's access tag: give its physnet too (an overlay "
                              "network has no VLAN)" % (where, cfg["vlan"]))
    if backend == "ovs" and physnet:
        raise ValidationError("%s.physnet: %r applies to the ovn backend only (an ovs network is its bridge)" % (
            where, physnet))
    if physnet and cfg.get("dhcp") and cfg.get("subnet6"):
        raise ValidationError("%s.dhcp: a provider network's IPv6 router advertisements are its fabric's router's; "
                              "OVN's DHCP serves it IPv4 only: drop subnet6 or dhcp" % where)
    if backend == "ovs" and cfg.get("policy_mode") == "stateless":
        raise ValidationError("%s.policy_mode: stateless applies to the ovn backend only (an ovs network has "
                              "no OVN ACLs)" % where)
    if backend == "ovs" and cfg.get("dhcp"):
        raise ValidationError("%s.dhcp: OVN's DHCP applies to the ovn backend only" % where)
    if backend == "ovs" and cfg.get("qos_max"):
        raise ValidationError("%s.qos_max: OVN's QoS applies to the ovn backend only" % where)
    bridge = None
    if backend == "ovs":
        bridge = cfg.get("bridge") or ("br-" + cfg["name"])[:15]
        interface_name(bridge, where + ".bridge")
    relaxed, vips = _relaxed_of(cfg), _virtual_ips_of(cfg)
    if backend == "ovs" and (relaxed or vips):
        raise ValidationError("%s.%s: applies to the ovn backend only (OVN's port security)" % (
            where, "relaxed_port_security" if relaxed else "virtual_ips"))
    for index, vip in enumerate(vips):
        address = addressing.parse_ip(vip["address"], "address")
        if address not in subnet or address in (subnet.network, subnet.broadcast, gateway):
            raise ValidationError("%s.virtual_ips[%d].address: %s is not a host address of the subnet %s other "
                                  "than its gateway" % (where, index, address, subnet))
    return Network(cfg["name"], subnet, gateway, backend, excludes, cfg.get("mtu"),
                   [str(addressing.parse_ip(d, "dns")) for d in cfg.get("dns") or []], routes,
                   cfg.get("provider"), bridge, cfg.get("vlan"), subnet6, gateway6, cfg.get("policy_mode"),
                   cfg.get("dhcp") or None, physnet, relaxed, vips, qos_max=cfg.get("qos_max") or None)


def _relaxed_of(cfg):
    """The relaxations of a merged config: the current network's config
    form (a list) or a checked item's (a dict)."""
    value = cfg.get("relaxed_port_security") or {}
    return _check_relaxed(value, "relaxed_port_security") if isinstance(value, list) else value


def _virtual_ips_of(cfg):
    return list(cfg.get("virtual_ips") or [])


def _from_records(name, ids, subnet, backend, bridge=None, subnet6=None):
    gateway = (ids.get(K_GATEWAY) or "").split("/")[0] or None
    gateway6 = (ids.get(K_GATEWAY6) or "").split("/")[0] or None
    if subnet6 is not None:
        gateway6 = addressing.parse_ip(gateway6, name + " gateway6") if gateway6 else \
            addressing.host(subnet6, 1)
    return Network(
        name, subnet, addressing.parse_ip(gateway, name + " gateway") if gateway else
        addressing.host(subnet, 1), backend, (ids.get(K_EXCLUDE) or "").split(),
        int(ids[K_MTU]) if ids.get(K_MTU) else None,
        [d for d in (ids.get(K_DNS) or "").split(",") if d],
        json.loads(ids[K_ROUTES]) if ids.get(K_ROUTES) else [], ids.get(K_PROVIDER), bridge,
        int(ids[K_VLAN]) if ids.get(K_VLAN) else None, subnet6, gateway6, ids.get(K_POLICY_MODE),
        json.loads(ids[K_DHCP]) if ids.get(K_DHCP) else None, ids.get(K_PHYSNET) if backend == "ovn" else None,
        json.loads(ids[K_RELAXED]) if ids.get(K_RELAXED) else None,
        json.loads(ids[K_VIRTUAL_IPS]) if ids.get(K_VIRTUAL_IPS) else (),
        qos_max=port_qos.cap_of(ids) if backend == "ovn" else None)


class NetworkState:
    """A network as it is: its settings, and the ports on it."""

    def __init__(self, network, ports, owned):
        self.network = network
        self.ports = ports      # [(port name, [addresses as written], [IPAddress in use])]
        self.owned = owned

    def used(self):
        return dict((ip, name) for name, _addresses, ips in self.ports for ip in ips)


def _port_ips(port):
    ips = []
    texts = list(port.addresses) + list(port.dynamic_addresses or [])
    for text in texts:
        for word in text.split()[1:]:
            try:
                ips.append(addressing.parse_ip(word, "address"))
            except ValidationError:
                continue
    return ips


def read_network(view, name):
    """The OVN network ``name`` (settings only, no ports), or None."""
    row = view.lookup("Logical_Switch", name)
    if row is None or isinstance(row, list) or not cell(row, "external_ids").get(NETWORK_KEY):
        return None
    return network_of(row)


def network_by_provider(view, provider):
    """The name of the OVN network that serves the Multus ``provider``
    (``<nad>.<namespace>`` or ``<nad>.<namespace>.ovn``), or None."""
    for row in view.rows("Logical_Switch"):
        if cell(row, "external_ids").get(NETWORK_KEY) and cell(row, "external_ids").get(K_PROVIDER) == provider:
            return row.name
    return None


def network_of(row, recorded=False):
    """The OVN network of switch ``row``; with ``recorded``, at the subnets
    its records say it was declared with, not the switch's ``other_config``
    now: what the audit compares the switch with. Kept by what it is read
    from, as every check of a pod reads its networks: shared, never changed."""
    return _network_of(cell(row, "name"), frozenset(cell(row, "external_ids").items()),
                       frozenset(cell(row, "other_config").items()), recorded)


@functools.lru_cache(maxsize=1024)
def _network_of(name, ids, other_config, recorded):
    ids, other_config = dict(ids), dict(other_config)
    subnet = (recorded and ids.get(K_SUBNET)) or other_config.get("subnet")
    subnet = addressing.parse_cidr(subnet, "subnet of " + name)
    prefix = other_config.get("ipv6_prefix")
    subnet6 = addressing.parse_cidr(addressing.ipv6_prefix(prefix, "ipv6_prefix of " + name)
                                    + "/64", "ipv6_prefix of " + name) if prefix else None
    if recorded and ids.get(K_SUBNET6):
        subnet6 = addressing.parse_cidr(ids[K_SUBNET6], "subnet6 of " + name)
    return _from_records(name, ids, subnet, "ovn", subnet6=subnet6)


def read_network_settings(view):
    """``{name: Network}`` of the OVN networks in the NB, settings only
    (:func:`read_networks` without the ports, so without their cost)."""
    return dict((row.name, network_of(row)) for row in view.rows("Logical_Switch")
                if cell(row, "external_ids").get(NETWORK_KEY))


def read_networks(view):
    """``{name: NetworkState}`` of the OVN networks in the NB."""
    out = {}
    for row in view.rows("Logical_Switch"):
        ids = cell(row, "external_ids")
        if not ids.get(NETWORK_KEY):
            continue
        network = network_of(row)
        ports = [(p.name, list(p.addresses), _port_ips(p)) for p in row.ports
                 if p.name not in network.own_ports()]
        out[row.name] = NetworkState(network, sorted(ports), ids.get(OWNER_KEY) == OWNER_VALUE)
    return out


def read_ovs_networks(view):
    """``{name: NetworkState}`` of the OVS-backend networks on this node."""
    out = {}
    for row in view.rows("Bridge"):
        ids = cell(row, "external_ids")
        if not ids.get(NETWORK_KEY):
            continue
        name = ids[NETWORK_KEY]
        subnet = addressing.parse_cidr(ids.get(K_SUBNET), "subnet of " + name)
        subnet6 = addressing.parse_cidr(ids[K_SUBNET6], "subnet6 of " + name) if ids.get(K_SUBNET6) else None
        network = _from_records(name, ids, subnet, "ovs", bridge=row.name, subnet6=subnet6)
        ports = [(p.name, ["vlan %s" % p.tag[0]] if p.tag else [], []) for p in row.ports
                 if p.name != row.name]
        out[name] = NetworkState(network, sorted(ports), ids.get(OWNER_KEY) == OWNER_VALUE)
    return out


def status(current):
    """The query view of a network: settings, usage and ports."""
    network = current.network
    out = network.config()
    free = addressing.ip_set(network.subnet, network.exclude_ips)
    for taken in [network.gateway] + [v["address"] for v in network.virtual_ips]:
        if addressing.parse_ip(taken, "address") in free:
            free.remove(taken)
    used = set(ip for ip in current.used() if ip in network.subnet)
    out["addresses_in_use"] = len(used)
    out["addresses_free"] = free.size - len([ip for ip in used if ip in free])
    out["ports"] = [{"name": name, "addresses": addresses} for name, addresses, _ips in current.ports]
    return out


class Networks(CompositeKind):
    """Virtual networks of one backend: ``ovn`` (the view is the NB) or
    ``ovs`` (the local OVS database). A caller that plans the topology or
    gateways in the same batch passes them."""

    name = "virtual_network"
    noun = "network"

    def __init__(self, backend, force=False, underlay_mtu=None, datapath_type="system",
                 topology=None, gateways=None):
        self.backend = backend
        self.force = force
        self.underlay_mtu = underlay_mtu
        self.datapath_type = datapath_type
        self.topology = topology
        self.gateways = gateways

    def read(self, view):
        return read_networks(view) if self.backend == "ovn" else read_ovs_networks(view)

    def owned(self, current):
        return current.owned

    def gather(self, current):
        return status(current)

    def complete(self, item, current, merge, where, view):
        return complete(item, current.network if current else None, merge, self.backend, where,
                        self.underlay_mtu)

    def realise(self, view, declaration, result):
        ovn = self.backend == "ovn"
        topology = gateways = None
        if ovn:
            topology = self.topology or require_topology(view)
            gateways = read_gateways(view) if self.gateways is None else self.gateways
        current = declaration.current
        declared = list(declaration.declared)
        deleting = declaration.deleting
        after = dict((n, cur.network) for n, cur in current.items() if n not in deleting)
        after.update((n, net) for n, (_w, net) in declaration.declared.items())
        problems = cross_checks(after, topology, gateways)
        if not self.force:
            problems.extend(network_safety.stranded_ports(current, after, declared, deleting))
        for name in declared:
            # a virtual IP is never a pod's own address (one it already had is excluded from its pool)
            held = current[name].used() if name in current else {}
            had = [v["address"] for v in current[name].network.virtual_ips] if name in current else []
            problems.extend("network %s: virtual IP %s is held by port %s" % (name, v["address"], held[ip])
                            for v in after[name].virtual_ips for ip in [addressing.parse_ip(v["address"], "vip")]
                            if ip in held and v["address"] not in had)
        upserts, deletes = {}, {}
        for name in declared:
            old = current[name].network if name in current else None
            if ovn and old is not None and old.physnet and after[name].physnet and current[name].ports \
                    and not self.force and (old.physnet, old.vlan) != (after[name].physnet, after[name].vlan):
                problems.append("network %s: it cannot move from physnet %s VLAN %s to physnet %s VLAN %s while %d "
                                "port(s) are on it (%s); move them first, or set force: true" % (
                                    name, old.physnet, old.vlan or "none", after[name].physnet,
                                    after[name].vlan or "none", len(current[name].ports),
                                    ", ".join(p for p, _a, _i in current[name].ports[:3])))
            if ovn and old is not None and bool(old.physnet) != bool(after[name].physnet):
                # an overlay becoming a provider network, or back: its way
                # out changes, and every pod on it would lose its path
                if current[name].ports and not self.force:
                    problems.append("network %s: it cannot become %s while %d port(s) are on it (%s); move "
                                    "them first, or set force: true" % (
                                        name, "a provider network" if after[name].physnet else "an overlay",
                                        len(current[name].ports), ", ".join(p for p, _a, _i in current[name].ports[:3])))
                for resource_class, objs in old.ovn_keys().items():
                    if resource_class not in (LogicalSwitch, LogicalSwitchPort):
                        deletes.setdefault(resource_class, []).extend(objs)
            if ovn and old is not None:
                # its own ports it no longer has: a virtual IP dropped, the router's port or localnet's
                deletes.setdefault(LogicalSwitchPort, []).extend(
                    {"name": port} for port in old.own_ports() if port not in after[name].own_ports())
        if problems:
            raise ValidationError(problems)
        for name in declared:
            network = after[name]
            objects = network.ovn_items(topology) if ovn else {Bridge: [network.ovs_item(self.datapath_type)]}
            for resource_class, objs in objects.items():
                upserts.setdefault(resource_class, []).extend(objs)
            if ovn:
                # DHCP turned off, or a subnet moved: the rows it served go
                deletes.setdefault(DHCPOptions, []).extend(dhcp_service.stale_keys(view, network))
        for name in deleting:
            keys = current[name].network.ovn_keys() if ovn else {Bridge: [{"name": current[name].network.bridge}]}
            if ovn:
                keys[DHCPOptions] = dhcp_service.network_keys(view, name)
            for resource_class, objs in keys.items():
                deletes.setdefault(resource_class, []).extend(objs)
        if ovn:
            # a provider network is routed by its fabric: no route, no SNAT
            subnets = dict((n, net.subnet) for n, net in after.items() if not net.physnet)
            result.batch = build_batch(view, upserts, deletes, topology, subnets, gateways)
            # the network's DHCP rows as they should be, options whole: a key
            # the network no longer sets (dhcpv6_stateless, a route) goes
            rows = [item for n in declared for item in dhcp_service.items(after[n])]
            if rows:
                result.batch.add(plan(DHCPOptions(), validate_config(DHCPOptions(), rows, "replaced"), "replaced", view))
            attachments = dhcp_service.plan_attachments(view, [after[n] for n in declared], result.batch.ops)
            if attachments.changed:
                result.batch.add(attachments)
            dropped = dhcp_service.plan_drop_ports(view, sorted(deleting) + [
                n for n in declared if after[n].dhcp is None])
            if dropped.changed:
                result.batch.add(dropped)
        else:
            for state_, table in (("merged", upserts), ("deleted", deletes)):
                if table.get(Bridge):
                    result.batch.add(plan(Bridge(), validate_config(Bridge(), table[Bridge], state_),
                                          state_, view))
        result.networks = after
        for name in declared + deleting:
            result.record(name, current[name].network.config() if name in current else None,
                          after[name].config() if name in after else None)


def plan_networks(view, items, state, backend, force=False, underlay_mtu=None,
                  datapath_type="system", topology=None, gateways=None):
    """Plan ``items`` (from :func:`check_network`) of one backend against
    ``view`` (see :class:`Networks`). Raises ValidationError naming every
    problem; nothing is written before that."""
    kind = Networks(backend, force, underlay_mtu, datapath_type, topology, gateways)
    return plan_declared(kind, view, items, state)
