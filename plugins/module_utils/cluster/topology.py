# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's shared OVN topology, as in the seed design.

* one distributed router (``DEFAULT_ROUTER``, ``ovn4nfv-master``, by default);
* a join switch whose subnet is configurable; its first host address is the
  distributed router's, the next ones go to the node gateways;
* per node, a gateway router bound to the node's chassis, with a port on the
  join switch and a port on an external switch whose localnet port reaches
  the node's external OVS bridge;
* the wiring between them, derived from the virtual networks and gateways
  that exist: routes to every network on each gateway router, a default
  route from the distributed router to every gateway (ECMP), and SNAT of
  every network to each gateway's external address.

Everything here is expressed as items of the building-block resources in
:mod:`.ovn_resources` and planned by :mod:`.reconcile`; the objects are
found again by their ``external_ids`` roles, never by name patterns.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import (
    DEFAULT_JOIN_SWITCH, DEFAULT_ROUTER, K_EXTERNAL_GATEWAY, K_EXTERNAL_IP, K_JOIN_IP, K_NODE, K_PHYSNET, K_VLAN,
    OWNER_KEY, OWNER_VALUE, ROLE, ROLE_GATEWAY, ROLE_JOIN, ROLE_ROUTER)
from ..common.naming import in_range, ovn_name, physnet_name
from ..resources.nb_dhcp import DHCPOptions
from ..resources.nb_routers import LogicalRouter, LogicalRouterPort, NAT, StaticRoute
from ..resources.nb_switches import LogicalSwitch, LogicalSwitchPort

DEFAULT_JOIN_SUBNET = "100.64.1.0/24"
DEFAULT_PHYSNET = "physnet-ext"

TABLES = ("Logical_Switch", "Logical_Switch_Port", "Logical_Router", "Logical_Router_Port",
          "Logical_Router_Static_Route", "NAT", "Gateway_Chassis", "DHCP_Options")

# Resource classes in the order a batch creates them (parents first);
# deletions run in the reverse order.
ORDER = (LogicalRouter, LogicalSwitch, LogicalRouterPort, LogicalSwitchPort, StaticRoute, NAT, DHCPOptions)


def role_of(row):
    ids = row.external_ids
    return ids.get(ROLE) if ids.get(OWNER_KEY) == OWNER_VALUE else None


def _rows_with_role(view, table, role):
    return [row for row in view.rows(table) if role_of(row) == role]


# --------------------------------------------------------------------------
# The topology: distributed router and join switch
# --------------------------------------------------------------------------

class Topology:
    """The distributed router and the join switch."""

    def __init__(self, router=DEFAULT_ROUTER, join_switch=DEFAULT_JOIN_SWITCH,
                 join_subnet=DEFAULT_JOIN_SUBNET):
        self.router = router
        self.join_switch = join_switch
        self.join_subnet = addressing.parse_cidr(join_subnet, "join_subnet", version=4)
        if self.join_subnet.size < 4:
            raise ValidationError("join_subnet: %s leaves no address for a gateway" % join_subnet)
        self.router_ip = addressing.host(self.join_subnet, 1)

    @property
    def router_port(self):
        return "rtoj-" + self.router

    def config(self):
        return {"router": self.router, "join_switch": self.join_switch,
                "join_subnet": str(self.join_subnet), "router_join_ip": str(self.router_ip)}

    def items(self):
        """Items per resource class that make up the topology."""
        role = {ROLE: ROLE_ROUTER}
        return {
            LogicalRouter: [{"name": self.router, "external_ids": role}],
            LogicalSwitch: [{"name": self.join_switch, "subnet": str(self.join_subnet),
                             "exclude_ips": [str(self.router_ip)],
                             "external_ids": {ROLE: ROLE_JOIN}}],
            LogicalRouterPort: [{"name": self.router_port, "router": self.router,
                                 "mac": addressing.mac_from_name(self.router_port),
                                 "networks": ["%s/%d" % (self.router_ip, self.join_subnet.prefixlen)],
                                 "external_ids": role}],
            LogicalSwitchPort: [{"name": "jtor-" + self.router, "switch": self.join_switch,
                                 "type": "router", "addresses": ["router"],
                                 "options": {"router-port": self.router_port},
                                 "external_ids": role}],
        }


def read_topology(view):
    """The topology in the database, or None. More than one is an error."""
    routers = _rows_with_role(view, "Logical_Router", ROLE_ROUTER)
    joins = _rows_with_role(view, "Logical_Switch", ROLE_JOIN)
    if len(routers) > 1 or len(joins) > 1:
        raise ValidationError("the database holds %d cluster routers and %d join switches; "
                              "expected one of each" % (len(routers), len(joins)))
    if not routers or not joins:
        return None
    return Topology(routers[0].name, joins[0].name, joins[0].other_config.get("subnet"))


def require_topology(view, where="config"):
    topology = read_topology(view)
    if topology is None:
        raise ValidationError("%s: the cluster router and join switch do not exist yet; "
                              "create them with ovn4nfv.k8s.cluster_topology first" % where)
    return topology


# --------------------------------------------------------------------------
# Node gateways
# --------------------------------------------------------------------------

class Gateway:
    """One node's gateway, in the operator's terms."""

    def __init__(self, node, external_ip, external_gateway, chassis=None, physnet=DEFAULT_PHYSNET,
                 join_ip=None, vlan=None, external_mac=None):
        self.node = node
        self.chassis = chassis or node
        self.external_ip, self.external_net = external_ip, None
        self.external_gateway = external_gateway
        self.physnet = physnet
        self.join_ip = join_ip
        self.vlan = vlan
        self.external_mac = external_mac

    # the names of its objects
    @property
    def router(self):
        return "gr-" + self.node

    @property
    def external_switch(self):
        return "ext-" + self.node

    def config(self):
        out = {"node": self.node, "chassis": self.chassis,
               "external_ip": "%s/%d" % (self.external_ip, self.external_net.prefixlen),
               "external_gateway": str(self.external_gateway), "physnet": self.physnet,
               "join_ip": str(self.join_ip) if self.join_ip is not None else None,
               "external_mac": self.external_mac or addressing.mac_from_name("gtoe-" + self.node)}
        if self.vlan:
            out["vlan"] = self.vlan
        return out

    def items(self, topology):
        marks = {ROLE: ROLE_GATEWAY, K_NODE: self.node,
                 K_EXTERNAL_IP: "%s/%d" % (self.external_ip, self.external_net.prefixlen),
                 K_EXTERNAL_GATEWAY: str(self.external_gateway),
                 K_PHYSNET: self.physnet, K_JOIN_IP: str(self.join_ip),
                 K_VLAN: str(self.vlan) if self.vlan else None}
        part = {ROLE: ROLE_GATEWAY, K_NODE: self.node}
        join, ext = "gtoj-" + self.node, "gtoe-" + self.node
        localnet = {"name": "ln-" + self.node, "switch": self.external_switch, "type": "localnet",
                    "addresses": ["unknown"], "options": {"network_name": self.physnet},
                    "external_ids": part}
        if self.vlan:
            localnet["tag"] = self.vlan
        return {
            # lb_force_snat_ip: traffic a Service's external address
            # balanced here leaves from the router's join address, so that
            # the backend's answer comes back through this gateway
            LogicalRouter: [{"name": self.router, "external_ids": marks,
                             "options": {"chassis": self.chassis, "lb_force_snat_ip": "router_ip"}}],
            LogicalSwitch: [{"name": self.external_switch, "external_ids": part}],
            LogicalRouterPort: [
                {"name": join, "router": self.router, "mac": addressing.mac_from_name(join),
                 "networks": ["%s/%d" % (self.join_ip, topology.join_subnet.prefixlen)],
                 "external_ids": part},
                {"name": ext, "router": self.router,
                 "mac": self.external_mac or addressing.mac_from_name(ext),
                 "networks": ["%s/%d" % (self.external_ip, self.external_net.prefixlen)],
                 "external_ids": part}],
            LogicalSwitchPort: [
                {"name": "jtog-" + self.node, "switch": topology.join_switch, "type": "router",
                 "addresses": ["router"], "options": {"router-port": join}, "external_ids": part},
                localnet,
                {"name": "etog-" + self.node, "switch": self.external_switch, "type": "router",
                 "addresses": ["router"], "options": {"router-port": ext}, "external_ids": part}],
        }

    def object_keys(self):
        """The keys of every object of this gateway, per resource class, for deletion."""
        return {
            LogicalRouter: [{"name": self.router}],
            LogicalSwitch: [{"name": self.external_switch}],
            LogicalSwitchPort: [{"name": "jtog-" + self.node}],
        }


def validate_gateway(item, where):
    """A checked :class:`Gateway` from one config item."""
    for option in ("node", "external_ip", "external_gateway"):
        if not item.get(option):
            raise ValidationError("%s.%s: is required" % (where, option))
    ovn_name(item["node"], where + ".node")
    if item.get("chassis"):
        ovn_name(item["chassis"], where + ".chassis")
    ip, net = addressing.parse_ip_interface(item["external_ip"], where + ".external_ip")
    if ip.version != 4 or ip in (net.network, net.broadcast) and net.size > 2:
        raise ValidationError("%s.external_ip: %r is not a host address of an IPv4 network" % (
            where, item["external_ip"]))
    nexthop = addressing.parse_ip(item["external_gateway"], where + ".external_gateway", 4)
    addressing.require_inside(nexthop, net.cidr, where + ".external_gateway", item["external_gateway"])
    if nexthop == ip:
        raise ValidationError("%s.external_gateway: %s is the gateway's own external_ip" % (
            where, nexthop))
    gateway = Gateway(item["node"], ip, nexthop, chassis=item.get("chassis"),
                      physnet=item.get("physnet") or DEFAULT_PHYSNET, vlan=item.get("vlan"),
                      external_mac=addressing.parse_mac(item["external_mac"], where + ".external_mac")
                      if item.get("external_mac") else None)
    gateway.external_net = net.cidr
    if item.get("vlan") is not None:
        in_range(item["vlan"], 1, 4094, where + ".vlan")
    physnet_name(gateway.physnet, where + ".physnet")
    if item.get("join_ip"):
        gateway.join_ip = addressing.parse_ip(item["join_ip"], where + ".join_ip", 4)
    return gateway


def read_gateways(view):
    """``{node: Gateway}`` from the gateway routers' own records."""
    found = {}
    for row in _rows_with_role(view, "Logical_Router", ROLE_GATEWAY):
        ids = row.external_ids
        try:
            ip, net = addressing.parse_ip_interface(ids[K_EXTERNAL_IP], "external_ip")
            gateway = Gateway(ids[K_NODE], ip, addressing.parse_ip(
                ids[K_EXTERNAL_GATEWAY], "external_gateway"),
                chassis=row.options.get("chassis"), physnet=ids.get(K_PHYSNET),
                join_ip=addressing.parse_ip(ids[K_JOIN_IP], "join_ip"),
                vlan=int(ids[K_VLAN]) if ids.get(K_VLAN) else None)
        except (KeyError, ValidationError, ValueError) as exc:
            raise ValidationError("gateway router %s has damaged ovn4nfv records (%s); delete it "
                                  "with ovn4nfv.k8s.node_gateway state=deleted" % (row.name, exc))
        gateway.external_net = net.cidr
        for port in row.ports:
            if port.name == "gtoe-" + gateway.node:
                gateway.external_mac = port.mac
        found[gateway.node] = gateway
    return found


def assign_join_ips(gateways, topology, current):
    """Give each gateway without a join address one: its current one if it
    has one, else the lowest free host after the router's. Deterministic."""
    problems = []
    used = {topology.router_ip: "the cluster router"}
    for gateway in gateways:
        if gateway.join_ip is None and gateway.node in current:
            gateway.join_ip = current[gateway.node].join_ip
    for gateway in gateways:
        if gateway.join_ip is None:
            continue
        if gateway.join_ip not in topology.join_subnet or gateway.join_ip in (
                topology.join_subnet.network, topology.join_subnet.broadcast):
            problems.append("node %s: join_ip %s is not a host of the join subnet %s" % (
                gateway.node, gateway.join_ip, topology.join_subnet))
        elif gateway.join_ip in used:
            problems.append("node %s: join_ip %s is already %s's" % (
                gateway.node, gateway.join_ip, used[gateway.join_ip]))
        else:
            used[gateway.join_ip] = "node %s" % gateway.node
    free = (ip for ip in addressing.ip_set(topology.join_subnet, []) if ip not in used)
    for gateway in gateways:
        if gateway.join_ip is None:
            gateway.join_ip = next(free, None)
            if gateway.join_ip is None:
                problems.append("node %s: the join subnet %s has no free address left" % (
                    gateway.node, topology.join_subnet))
            else:
                used[gateway.join_ip] = "node %s" % gateway.node
    if problems:
        raise ValidationError(problems)
