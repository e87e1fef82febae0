# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit on one node: the integration bridge's interfaces against the
northbound's logical ports (handed down by the cluster's audit) and
against the devices that exist.

* ``stray_interface``: an interface whose ``iface-id`` names no logical
  port; the product's own (the node agent's mark) is deleted by the repair
  when its pod is gone from the API, another's is reported only;
* ``dead_interface``: one of the product's interfaces whose device is gone
  (its pod's namespace went without a CNI DEL): OVS holds a port for
  nothing, and the repair deletes it, as the node agent's sweep does.

The repair is one transaction on the node's Open vSwitch database.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..cluster.audit import finding
from ..cluster.pod_addresses import K_CONTAINER, K_UID
from ..ovsdb.execution import Batch
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


def audit_node(view, node, known_ports=None, bridge="br-int", devices=None, live_pods=None):
    """The node's findings; ``known_ports``, the northbound's logical port
    names (None: the stray class is not looked at); ``devices``, the names
    of the network devices the node has (None: only what OVS says counts).
    A device gone is not always an error in OVS at once: the userspace
    datapath keeps the port's number until it reconfigures. ``live_pods``,
    the UIDs of the pods the API has: the product's stray interface is
    deleted only when its pod is known to be gone (a live pod's logical
    port is made again by the watcher)."""
    out = []
    known = set(known_ports) if known_ports is not None else None
    for port, iface in sorted(_interfaces(view, bridge), key=lambda pair: pair[0].name):
        ours = bool(iface.external_ids.get(K_CONTAINER))
        iface_id = iface.external_ids.get("iface-id")
        ofport = iface.ofport[0] if isinstance(iface.ofport, list) and iface.ofport else iface.ofport
        gone = iface.type in ("", "system") and devices is not None and iface.name not in devices
        if ours and (ofport == -1 or gone):
            out.append(finding(DEAD, "warning", "ovs", [port.name],
                               "%s: interface %s of %s has no device (%s)" % (
                                   node, iface.name, iface_id, (iface.error or ["gone"])[0] if isinstance(
                                       iface.error, list) else iface.error or "gone"),
                               "delete the OVS port %s on %s" % (port.name, node)))
        elif known is not None and iface_id and iface_id not in known and iface.type in ("", "internal", "system"):
            uid = iface.external_ids.get(K_UID)
            gone_pod = ours and live_pods is not None and uid not in live_pods
            out.append(finding(STRAY, "warning", "ovs", [port.name],
                               "%s: interface %s names logical port %s, which the northbound does not have%s" % (
                                   node, iface.name, iface_id,
                                   "; its pod is alive, the watcher makes the port again" if ours and live_pods
                                   is not None and not gone_pod else ""),
                               ("delete the OVS port %s on %s" % (port.name, node)) if gone_pod else None))
    return out


def plan_node_repair(view, findings, bridge="br-int"):
    """Delete the product's ports the findings name, in one transaction."""
    names = sorted(set(name for f in findings if f["repair"] for name in f["objects"]))
    if not names:
        return Batch()      # (``deleted`` without items would mean every port the product owns)
    resource = Port()
    items = [{"name": name, "bridge": bridge} for name in names]
    return plan(resource, validate_config(resource, items, "deleted"), "deleted", view)
