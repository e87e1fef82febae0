# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A whole cluster network in one transaction: the topology, the node
gateways, the virtual networks and ports reserved on them.

Composes :func:`plan_topology`, :func:`plan_gateways` and
:func:`virtual_network.plan_networks` on one view, passing each what the
others plan, and wires gateways and networks once at the end.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import NETWORK_KEY
from ..ovsdb.execution import CompositePlan
from ..ovsdb.plan import plan, validate_config
from ..resources.nb_switches import LogicalSwitchPort
from . import networks as vn
from .topology import read_gateways, read_topology
from .wiring import plan_gateways, plan_topology


def port_items(network, ports, where):
    """Switch-port items for ports reserved on ``network``: a given IP (and
    MAC) makes a static address; otherwise OVN assigns one."""
    items = []
    for index, port in enumerate(ports or []):
        field = "%s.ports[%d]" % (where, index)
        if not port.get("name"):
            raise ValidationError("%s.name: a name is required" % field)
        mac = port.get("mac")
        if port.get("ip") or mac:
            mac = addressing.parse_mac(mac, field + ".mac") if mac else addressing.mac_from_name(port["name"])
            address = "%s %s" % (mac, port["ip"]) if port.get("ip") else "%s dynamic" % mac
        else:
            address = "dynamic"
        items.append({"name": port["name"], "switch": network, "addresses": [address],
                      "external_ids": {NETWORK_KEY: network}})
    return items


def plan_cluster_network(view, topology_item, gateway_items, network_items, state, underlay_mtu=None):
    """Plan everything with ``merged`` semantics, or gather it."""
    result = CompositePlan("cluster_network")
    if state == "gathered":
        topology = read_topology(view)
        result.gathered = [{
            "topology": topology.config() if topology else {},
            "gateways": [g.config() for _n, g in sorted(read_gateways(view).items())],
            "networks": [vn.status(cur) for _n, cur in sorted(vn.read_networks(view).items())],
        }]
        return result
    problems, ports = [], []
    networks = []
    for where, item in network_items:
        item = dict(item)
        try:
            ports.extend(port_items(item.get("name"), item.pop("ports", None), where))
            networks.append((where, vn.check_network(item, where)))
        except ValidationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ValidationError(problems)
    topology = plan_topology(view, topology_item, "merged", wire=False)
    gateways = plan_gateways(view, gateway_items, "merged", topology=topology.topology, wire=False)
    networks_plan = vn.plan_networks(view, networks, "merged", "ovn", underlay_mtu=underlay_mtu,
                                     topology=topology.topology, gateways=gateways.gateways)
    for part in (topology, gateways, networks_plan):
        result.batch.plans.extend(part.batch.plans)
        result.changes.extend(part.changes)
    if ports:
        resource = LogicalSwitchPort()
        result.batch.add(plan(resource, validate_config(resource, ports, "merged"), "merged", view))
    return result
