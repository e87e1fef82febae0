# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit on one node: the integration bridge's interfaces against the
northbound's logical ports (handed down by the cluster's audit) and
against the devices that exist.

* ``stray_interface``: an interface whose ``iface-id`` names no logical
  port; the product's own (the node agent's mark) is deleted by the repair,
  another's is reported only;
* ``dead_interface``: one of the product's interfaces whose device is gone
  (its pod's namespace went without a CNI DEL): OVS holds a port for
  nothing, and the repair deletes it, as the node agent's sweep does.

The repair is one transaction on the node's Open vSwitch database.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..cluster.audit import finding
from ..cluster.pod_addresses import K_CONTAINER
from ..ovsdb.plan import plan, validate_config
from ..resources.ovs import Port

TABLES = ("Bridge", "Port", "Interface")
STRAY = "stray_interface"
DEAD = "dead_interface"


def _interfaces(view, bridge):
    row = view.lookup("Bridge", bridge)
    if row is None or isinstance(row, list):
        return []
    return [(port, iface) for port in row.ports for iface in port.interfaces if port.name != bridge]


def audit_node(view, node, known_ports=None, bridge="br-int"):
    """The node's findings; ``known_ports``, the northbound's logical port
    names (None: the stray class is not looked at)."""
    out = []
    known = set(known_ports) if known_ports is not None else None
    for port, iface in sorted(_interfaces(view, bridge), key=lambda pair: pair[0].name):
        ours = bool(iface.external_ids.get(K_CONTAINER))
        iface_id = iface.external_ids.get("iface-id")
        ofport = iface.ofport[0] if isinstance(iface.ofport, list) and iface.ofport else iface.ofport
        if ours and ofport == -1:
            out.append(finding(DEAD, "warning", "ovs", [port.name],
                               "%s: interface %s of %s has no device (%s)" % (
                                   node, iface.name, iface_id, (iface.error or ["gone"])[0] if isinstance(
                                       iface.error, list) else iface.error or "gone"),
                               "delete the OVS port %s on %s" % (port.name, node)))
        elif known is not None and iface_id and iface_id not in known and iface.type in ("", "internal", "system"):
            out.append(finding(STRAY, "warning", "ovs", [port.name],
                               "%s: interface %s names logical port %s, which the northbound does not have" % (
                                   node, iface.name, iface_id),
                               ("delete the OVS port %s on %s" % (port.name, node)) if ours else None))
    return out


def plan_node_repair(view, findings, bridge="br-int"):
    """Delete the product's ports the findings name, in one transaction."""
    names = sorted(set(name for f in findings if f["repair"] for name in f["objects"]))
    resource = Port()
    items = [{"name": name, "bridge": bridge} for name in names]
    return plan(resource, validate_config(resource, items, "deleted"), "deleted", view)
