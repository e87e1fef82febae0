# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Virtual networks: the seed design's CreateVL, UpdateVL, DeleteVL, QueryVL.

A network is declared in the operator's terms (subnet, gateway, exclude
ranges, MTU, DNS, routes, provider) and realised by a backend:

* ``ovn``: a logical switch with ``other_config:subnet`` and
  ``exclude_ips`` (OVN allocates addresses), attached to the cluster's
  distributed router through a router port that holds the gateway;
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
    K_BACKEND, K_DHCP, K_DNS, K_EXCLUDE, K_GATEWAY, K_GATEWAY6, K_MTU, K_POLICY_MODE, K_PROVIDER, K_ROUTES, K_SUBNET,
    K_SUBNET6, K_VLAN, NETWORK_KEY, OWNER_KEY, OWNER_VALUE)
from ..common.naming import in_range, interface_name, ovn_name
from ..ovsdb.declared import CompositeKind, plan_declared
from ..ovsdb.view import cell
from ..ovsdb.plan import plan, validate_config
from ..resources.nb_dhcp import DHCPOptions
from ..resources.nb_routers import LogicalRouterPort
from ..resources.nb_switches import LogicalSwitch, LogicalSwitchPort
from ..resources.ovs import Bridge
from . import dhcp as dhcp_service, network_safety
from .topology import read_gateways, require_topology
from .wiring import build_batch, cross_checks

BACKENDS = ("ovn", "ovs")
# Outer IPv4 (20) + UDP (8) + Geneve (8) + OVN's option (8) + inner Ethernet (14).
GENEVE_OVERHEAD = 58
_PROVIDER = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.ovn)?\Z")
OPTIONS = ("name", "subnet", "gateway", "subnet6", "gateway6", "exclude_ips", "mtu", "dns",
           "routes", "provider", "backend", "bridge", "vlan", "policy_mode", "dhcp")
# how a network's policies keep state: stateful (conntrack: replies and
# related ICMP pass, Services are balanced) or stateless (no conntrack)
POLICY_MODES = ("stateful", "stateless")


class Network:
    """A complete, checked network."""

    def __init__(self, name, subnet, gateway, backend, exclude_ips=(), mtu=None, dns=(),
                 routes=(), provider=None, bridge=None, vlan=None, subnet6=None, gateway6=None,
                 policy_mode="stateful", dhcp=None):
        self.name = name
        self.subnet = subnet
        self.gateway = gateway
        self.subnet6 = subnet6      # an IPv6 /64, or None for an IPv4-only network
        self.gateway6 = gateway6
        self.backend = backend
        self.exclude_ips = list(exclude_ips)
        self.mtu = mtu
        self.dns = list(dns)
        self.routes = list(routes)
        self.provider = provider
        self.bridge = bridge
        self.vlan = vlan
        self.policy_mode = policy_mode or "stateful"
        self.dhcp = dhcp            # dhcp.check's form, or None: OVN serves no DHCP here

    @property
    def stateful(self):
        """Whether the network's policies keep connection state."""
        return self.policy_mode != "stateless"

    def config(self):
        out = {"name": self.name, "subnet": str(self.subnet), "gateway": str(self.gateway),
               "backend": self.backend}
        if self.subnet6 is not None:
            out.update(subnet6=str(self.subnet6), gateway6=str(self.gateway6))
        for option in ("exclude_ips", "mtu", "dns", "routes", "provider", "bridge", "vlan"):
            value = getattr(self, option)
            if value not in (None, [], ()):
                out[option] = value
        if not self.stateful:
            out["policy_mode"] = self.policy_mode
        if self.dhcp is not None:
            out["dhcp"] = dict(self.dhcp)
        return out

    @property
    def gateway_cidr(self):
        return "%s/%d" % (self.gateway, self.subnet.prefixlen)

    @property
    def gateway6_cidr(self):
        return "%s/%d" % (self.gateway6, self.subnet6.prefixlen) if self.subnet6 is not None else None

    @property
    def router_port(self):
        return "rtos-" + self.name

    @property
    def switch_port(self):
        return "stor-" + self.name

    def records(self):
        """The network's settings as ``external_ids``; None removes a key."""
        return {
            NETWORK_KEY: self.name,
            K_BACKEND: self.backend,
            K_GATEWAY: self.gateway_cidr,
            K_GATEWAY6: self.gateway6_cidr,
            K_EXCLUDE: " ".join(self.exclude_ips) or None,
            K_MTU: str(self.mtu) if self.mtu else None,
            K_DNS: ",".join(self.dns) or None,
            K_ROUTES: json.dumps(self.routes, sort_keys=True) if self.routes else None,
            K_PROVIDER: self.provider,
            K_POLICY_MODE: None if self.stateful else self.policy_mode,
            K_DHCP: json.dumps(self.dhcp, sort_keys=True) if self.dhcp is not None else None,
        }

    def ovn_items(self, topology):
        mark = {NETWORK_KEY: self.name}
        return {
            LogicalSwitch: [{"name": self.name, "subnet": str(self.subnet),
                             "exclude_ips": self.exclude_ips + [str(self.gateway)],
                             "ipv6_prefix": str(self.subnet6.network) if self.subnet6 is not None else None,
                             "external_ids": self.records()}],
            LogicalRouterPort: [{"name": self.router_port, "router": topology.router,
                                 "mac": addressing.mac_from_name(self.router_port),
                                 "networks": [n for n in (self.gateway_cidr, self.gateway6_cidr) if n],
                                 "external_ids": mark}],
            LogicalSwitchPort: [{"name": self.switch_port, "switch": self.name, "type": "router",
                                 "addresses": ["router"],
                                 "options": {"router-port": self.router_port},
                                 "external_ids": mark}],
        }

    def ovn_keys(self):
        return {LogicalSwitch: [{"name": self.name}],
                LogicalRouterPort: [{"name": self.router_port}],
                LogicalSwitchPort: [{"name": self.switch_port}]}

    def ovs_item(self, datapath_type):
        records = self.records()
        records.update({K_SUBNET: str(self.subnet), K_VLAN: str(self.vlan) if self.vlan else None,
                        K_SUBNET6: str(self.subnet6) if self.subnet6 is not None else None})
        return {"name": self.bridge, "datapath_type": datapath_type, "external_ids": records}


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
    if "policy_mode" in out and out["policy_mode"] not in POLICY_MODES:
        raise ValidationError("%s.policy_mode: %r is not one of %s" % (
            where, out["policy_mode"], ", ".join(POLICY_MODES)))
    if "dhcp" in out:
        # False: turned off (a merged task that says nothing keeps it)
        out["dhcp"] = dhcp_service.check(out["dhcp"], where + ".dhcp") or False
    return out


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
    if underlay_mtu and cfg.get("mtu") and backend == "ovn" and \
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
    if backend == "ovn" and cfg.get("vlan"):
        raise ValidationError("%s.vlan: %r applies to the ovs backend only" % (where, cfg["vlan"]))
    if backend == "ovs" and cfg.get("policy_mode") == "stateless":
        raise ValidationError("%s.policy_mode: stateless applies to the ovn backend only (an ovs network has "
                              "no OVN ACLs)" % where)
    if backend == "ovs" and cfg.get("dhcp"):
        raise ValidationError("%s.dhcp: OVN's DHCP applies to the ovn backend only" % where)
    bridge = None
    if backend == "ovs":
        bridge = cfg.get("bridge") or ("br-" + cfg["name"])[:15]
        interface_name(bridge, where + ".bridge")
    return Network(cfg["name"], subnet, gateway, backend, excludes, cfg.get("mtu"),
                   [str(addressing.parse_ip(d, "dns")) for d in cfg.get("dns") or []], routes,
                   cfg.get("provider"), bridge, cfg.get("vlan"), subnet6, gateway6, cfg.get("policy_mode"),
                   cfg.get("dhcp") or None)


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
        json.loads(ids[K_DHCP]) if ids.get(K_DHCP) else None)


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
                 if p.name != network.switch_port]
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
    free.remove(network.gateway)
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
        if problems:
            raise ValidationError(problems)
        upserts, deletes = {}, {}
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
            subnets = dict((n, net.subnet) for n, net in after.items())
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
