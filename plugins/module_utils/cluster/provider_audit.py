# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's view of provider networks on the nodes: a chassis that
binds a port of a provider network must map that network's physical
network to a bridge. ovn-controller copies a node's ``ovn-bridge-mappings``
into its southbound ``Chassis`` (``other_config``, ``external_ids`` before
OVN 20.06): without the mapping the port's frames go nowhere, and
ovn-controller only logs it once at INFO. The node agent refuses such a
pod's ADD; this finds what was bound before the mapping went, or by other
means. There is no repair from the databases: the mapping is the node's
(the ovn_controller role's ``ovn_controller_physnets``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..resources.ovs import MAPPINGS, parse_bridge_mappings
from . import networks as vn

PROVIDER_MAPPING = "provider_mapping_missing"
CLASSES = (PROVIDER_MAPPING,)
DEFAULT_MTU = 1500          # a provider network that sets no MTU: Ethernet's


def physnet_mtus(nb):
    """``{physnet: the largest MTU of the provider networks on it}`` (1500
    for one that sets none), for the nodes' audit: the NIC of each must
    carry it."""
    out = {}
    for network in vn.read_network_settings(nb).values():
        if network.physnet:
            out[network.physnet] = max(int(network.mtu or DEFAULT_MTU), out.get(network.physnet, 0))
    return out


def chassis_mappings(row):
    """``(physnet -> bridge, the text)`` a southbound chassis reports."""
    text = row.other_config.get(MAPPINGS) or row.external_ids.get(MAPPINGS) or ""
    return dict(parse_bridge_mappings(text)), text


def audit_provider_mappings(nb, sb, finding):
    """A finding per (chassis, provider network) whose bound ports the
    chassis cannot carry, naming the ports."""
    physnets = dict((name, network.physnet) for name, network in vn.read_network_settings(nb).items()
                    if network.physnet)
    network_of = dict((port.name, row.name) for row in nb.rows("Logical_Switch") if row.name in physnets
                      for port in row.ports if port.type == "")
    missing = {}
    for binding in sb.rows("Port_Binding"):
        network = network_of.get(binding.logical_port)
        where = binding.chassis[0] if isinstance(binding.chassis, list) and binding.chassis else binding.chassis
        if network is None or not where:
            continue
        mapped, text = chassis_mappings(where)
        if physnets[network] not in mapped:
            missing.setdefault((where.name, network), (text, []))[1].append(binding.logical_port)
    return [finding(PROVIDER_MAPPING, "error", "sb", [chassis, network],
                    "chassis %s binds %s of provider network %s but does not map its physical network %s (%s: %s); "
                    "set ovn_controller_physnets for that node" % (
                        chassis, ", ".join(sorted(ports)), network, physnets[network], MAPPINGS, text or "none"))
            for (chassis, network), (text, ports) in sorted(missing.items())]
