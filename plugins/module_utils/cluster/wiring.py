# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planning the cluster topology and the node gateways, and the wiring
derived from them and from the virtual networks that will exist: routes to
every network on each gateway router, a default route from the distributed
router to every gateway (ECMP), and SNAT of every network to each gateway's
external address. The model these plans start from is :mod:`.topology`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import (
    DEFAULT_JOIN_SWITCH, DEFAULT_ROUTER, K_PHYSNET, K_VLAN, NETWORK_KEY, OWNER_KEY, OWNER_VALUE, ROLE, ROLE_WIRING)
from ..ovsdb.declared import CompositeKind, plan_declared
from ..ovsdb.execution import Batch, CompositePlan
from ..ovsdb.plan import plan, validate_config
from ..resources.nb_routers import LogicalRouter, NAT, StaticRoute
from ..resources.nb_switches import LogicalSwitch
from .topology import (
    DEFAULT_JOIN_SUBNET, ORDER, Topology,
    assign_join_ips, read_gateways, read_topology, require_topology, validate_gateway)


# --------------------------------------------------------------------------
# Wiring: derived from the networks and gateways that will exist
# --------------------------------------------------------------------------

def wiring_items(topology, networks, gateways):
    """Routes and SNAT that join ``networks`` ({name: subnet}) to the
    outside through ``gateways`` ({node: Gateway})."""
    mark = {ROLE: ROLE_WIRING}
    routes, nat = [], []
    for node, gateway in sorted(gateways.items()):
        routes.append({"router": gateway.router, "ip_prefix": "0.0.0.0/0",
                       "nexthop": str(gateway.external_gateway), "external_ids": mark})
        routes.append({"router": topology.router, "ip_prefix": "0.0.0.0/0",
                       "nexthop": str(gateway.join_ip), "external_ids": mark})
        for name, subnet in sorted(networks.items()):
            routes.append({"router": gateway.router, "ip_prefix": str(subnet),
                           "nexthop": str(topology.router_ip), "external_ids": mark})
            nat.append({"router": gateway.router, "type": "snat",
                        "external_ip": str(gateway.external_ip), "logical_ip": str(subnet),
                        "external_ids": mark})
    return {StaticRoute: routes, NAT: nat}


def _wiring_scope(resource):
    column = (resource.table, "external_ids")
    return lambda current: current.cols.get(column, {}).get(ROLE) == ROLE_WIRING


def read_network_subnets(view, routed=True):
    """``{network name: subnet}`` of the OVN virtual networks in the
    database: those the distributed router serves (a provider network's
    router is its fabric's), or with ``routed`` false every one (what
    overlaps are checked against)."""
    out = {}
    for row in view.rows("Logical_Switch"):
        if row.external_ids.get(NETWORK_KEY) and row.external_ids.get(OWNER_KEY) == OWNER_VALUE \
                and not (routed and row.external_ids.get(K_PHYSNET)):
            subnet = row.other_config.get("subnet")
            if subnet:
                out[row.name] = addressing.parse_cidr(subnet, "subnet of " + row.name)
    return out


def external_networks(gateways):
    """(description, subnet) of each distinct external network: the nodes'
    gateways normally share one, which is no overlap."""
    seen = {}
    for node, gateway in sorted(gateways.items()):
        seen.setdefault(gateway.external_net, node)
    return [("the external network of node %s" % node, net) for net, node in seen.items()]


def check_no_overlap(named_subnets):
    """``named_subnets`` is a list of (description, IPNetwork). Every pair
    that overlaps is reported, naming both."""
    problems = []
    for index, (name_a, net_a) in enumerate(named_subnets):
        for name_b, net_b in named_subnets[index + 1:]:
            if net_a.version == net_b.version and net_a.first <= net_b.last and net_b.first <= net_a.last:
                problems.append("%s (%s) overlaps %s (%s)" % (name_a, net_a, name_b, net_b))
    if problems:
        raise ValidationError(problems)


def cross_checks(after, topology, gateways):
    """Overlaps and clashes among the networks that will exist (``after``,
    ``{name: Network}``), the join subnet and the external networks; each
    names both sides."""
    problems = []
    named = [("network " + name, net.subnet) for name, net in sorted(after.items())]
    named += [("network %s (IPv6)" % name, net.subnet6) for name, net in sorted(after.items())
              if net.subnet6 is not None]
    if topology is not None:
        named.append(("the join subnet of %s" % topology.join_switch, topology.join_subnet))
        named.extend(external_networks(gateways))
    try:
        check_no_overlap(named)
    except ValidationError as exc:
        problems.extend(exc.problems)
    gateway_segments = dict(((g.physnet, g.vlan), node) for node, g in sorted((gateways or {}).items()))
    segments = {}
    providers = {}
    for name, net in sorted(after.items()):
        if net.physnet:
            segments.setdefault((net.physnet, net.vlan), []).append(name)
        if net.provider:
            if net.provider in providers:
                problems.append("network %s: provider %s is already network %s's" % (
                    name, net.provider, providers[net.provider]))
            providers[net.provider] = name
    # one switch per segment: two localnet ports on one physnet and tag
    # would each take every frame of it, on every node
    for (physnet, vlan), names in sorted(segments.items(), key=lambda item: (item[0][0], item[0][1] or 0)):
        where = "physnet %s %s" % (physnet, "VLAN %d" % vlan if vlan else "untagged")
        if len(names) > 1:
            problems.append("networks %s are all on %s: one network per physical segment" % (", ".join(names), where))
        if (physnet, vlan) in gateway_segments:
            problems.append("network %s: %s is node %s's gateway's external network" % (
                names[0], where, gateway_segments[(physnet, vlan)]))
    return problems


def build_batch(view, upserts, deletes, topology, networks, gateways, wire=True):
    """One batch: upserts parents first, then the wiring (unless ``wire`` is
    false, for a caller that wires once at the end), then deletions children
    first. ``upserts``/``deletes`` map resource classes to items."""
    batch = Batch()
    for resource_class in ORDER:
        items = upserts.get(resource_class) or []
        # a localnet port (a gateway's, a provider network's) exactly as
        # declared: a VLAN dropped from its owner untags it
        for state, chosen in (("merged", [i for i in items if i.get("type") != "localnet"]),
                              ("replaced", [i for i in items if i.get("type") == "localnet"])):
            if chosen:
                batch.add(plan(resource_class(), _validated(resource_class, chosen, state), state, view))
    if topology is not None and wire:
        for resource_class, items in wiring_items(topology, networks, gateways).items():
            resource = resource_class()
            batch.add(plan(resource, _validated(resource_class, items, "overridden"), "overridden",
                           view, scope=_wiring_scope(resource)))
    for resource_class in reversed(ORDER):
        items = deletes.get(resource_class)
        if items:
            batch.add(plan(resource_class(), _validated(resource_class, items, "deleted"),
                           "deleted", view))
    return batch


def _validated(resource_class, items, state):
    return validate_config(resource_class(), items, state)


# --------------------------------------------------------------------------
# Planning the topology and the gateways
# --------------------------------------------------------------------------

def provider_segments(view):
    """``{(physnet, VLAN or None): network}`` of the provider networks."""
    return dict(((row.external_ids[K_PHYSNET], int(row.external_ids[K_VLAN]) if row.external_ids.get(K_VLAN)
                  else None), row.name) for row in view.rows("Logical_Switch")
                if row.external_ids.get(NETWORK_KEY) and row.external_ids.get(K_PHYSNET))


def _attached(view, topology):
    """Networks (provider networks too: their module needs the topology)
    and gateways that hang off the topology, by name."""
    names = ["network " + n for n in sorted(read_network_subnets(view, routed=False))]
    names += ["node gateway " + n for n in sorted(read_gateways(view))]
    return names


def plan_topology(view, item, state, force=False, wire=True):
    """Plan the distributed router and join switch (one object). The plan's
    ``topology`` is the topology as it will be."""
    result = CompositePlan("cluster_topology")
    current = read_topology(view)
    result.topology = current
    if state == "gathered":
        result.gathered = [current.config()] if current else []
        return result
    if state == "deleted":
        if current is None:
            return result
        attached = _attached(view, current)
        if attached and not force:
            raise ValidationError("the cluster topology still carries %s; delete them first, or "
                                  "set force: true" % ", ".join(attached))
        keys = {LogicalRouter: [{"name": current.router}],
                LogicalSwitch: [{"name": current.join_switch}]}
        result.batch = build_batch(view, {}, keys, None, {}, {})
        result.record("cluster", current.config(), None)
        return result
    merge = state == "merged" and current is not None
    base = current.config() if merge else {}
    topology = Topology(item.get("router") or base.get("router") or DEFAULT_ROUTER,
                        item.get("join_switch") or base.get("join_switch") or DEFAULT_JOIN_SWITCH,
                        item.get("join_subnet") or base.get("join_subnet") or DEFAULT_JOIN_SUBNET)
    deletes = {}
    if current is not None and current.config() != topology.config():
        attached = _attached(view, current)
        if attached:
            raise ValidationError(
                "config: the cluster topology %s cannot become %s while it carries %s" % (
                    current.config(), topology.config(), ", ".join(attached)))
        if current.router != topology.router:
            deletes[LogicalRouter] = [{"name": current.router}]
        if current.join_switch != topology.join_switch:
            deletes[LogicalSwitch] = [{"name": current.join_switch}]
    result.batch = build_batch(view, topology.items(), deletes, topology, read_network_subnets(view),
                               read_gateways(view), wire)
    result.record("cluster", current.config() if current else None, topology.config())
    result.topology = topology
    return result


GATEWAY_OPTIONS = ("node", "chassis", "external_ip", "external_gateway", "physnet", "join_ip",
                   "vlan", "external_mac")


class Gateways(CompositeKind):
    """Node gateways, by node. A caller that plans the topology in the same
    batch passes it; ``wire`` false leaves the routes and SNAT to it."""

    name = "node_gateway"
    noun = "gateway"
    key = "node"

    def __init__(self, topology=None, wire=True):
        self.topology = topology
        self.wire = wire

    def read(self, view):
        return read_gateways(view)

    def gather(self, current):
        return current.config()

    def complete(self, item, current, merge, where, view):
        raw = dict(item)
        if merge and current is not None:
            # merged: the options not given, as they are (the join address
            # is assigned again below when it is not given)
            for option, value in current.config().items():
                if raw.get(option) is None and option != "join_ip":
                    raw[option] = value
        return validate_gateway(raw, where)

    def realise(self, view, declaration, result):
        topology = self.topology or require_topology(view)
        current, deleting = declaration.current, declaration.deleting
        declared = dict((node, gateway) for node, (_w, gateway) in declaration.declared.items())
        after = declaration.after
        assign_join_ips([after[n] for n in sorted(after)], topology, current)
        networks = read_network_subnets(view)
        named = [("network " + n, net) for n, net in sorted(read_network_subnets(view, routed=False).items())]
        named.append(("the join subnet of %s" % topology.join_switch, topology.join_subnet))
        named.extend(external_networks(after))
        problems, owners, segments = [], {}, provider_segments(view)
        for node, gateway in sorted(after.items()):
            if (gateway.physnet, gateway.vlan) in segments:
                problems.append("node %s: its external network, physnet %s %s, is provider network %s's" % (
                    node, gateway.physnet, "VLAN %d" % gateway.vlan if gateway.vlan else "untagged",
                    segments[(gateway.physnet, gateway.vlan)]))
            if gateway.external_ip in owners:
                problems.append("node %s: external_ip %s is already node %s's" % (
                    node, gateway.external_ip, owners[gateway.external_ip]))
            owners[gateway.external_ip] = node
        try:
            check_no_overlap(named)
        except ValidationError as exc:
            problems.extend(exc.problems)
        if problems:
            raise ValidationError(problems)
        upserts, deletes = {}, {}
        for node in sorted(declared):
            for resource_class, objs in after[node].items(topology).items():
                upserts.setdefault(resource_class, []).extend(objs)
        for node in deleting:
            for resource_class, objs in current[node].object_keys().items():
                deletes.setdefault(resource_class, []).extend(objs)
        result.batch = build_batch(view, upserts, deletes, topology, networks, after, self.wire)
        result.gateways = after
        for node in sorted(declared):
            result.record(node, current[node].config() if node in current else None, after[node].config())
        for node in deleting:
            result.record(node, current[node].config(), None)


def plan_gateways(view, items, state, topology=None, wire=True):
    """Plan node gateways (:class:`Gateways`); ``items`` are (where, raw
    item) pairs. The plan's ``gateways`` are the gateways as they will be."""
    result = plan_declared(Gateways(topology, wire), view, items, state)
    if not hasattr(result, "gateways"):
        result.gateways = read_gateways(view)
    return result
