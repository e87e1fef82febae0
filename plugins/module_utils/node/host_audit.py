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
  nothing, and the repair deletes it, as the node agent's sweep does;
* ``mtu_mismatch``: one of the product's interfaces whose MTU differs from
  its network's (the cluster's audit hands the networks' MTUs down); the
  repair asks Open vSwitch for the network's (``mtu_request``);
* ``tunnel_down``: the device that holds the node's encapsulation IP is
  down, or none holds it: every tunnel to and from the node carries
  nothing. The repair brings it up when it is one of this database's
  interfaces (the uplink bridge the product made), over netlink;
* ``provider_bridge_unwired``: a physical network the node maps
  (``ovn-bridge-mappings``: a provider network's, a gateway's) to a bridge
  that does not exist or holds no NIC: its frames go nowhere; reported
  only, the mend is the role's (``ovn_controller_physnets``, the gateway);
* ``provider_mtu_mismatch``: a mapped physical network's NIC whose MTU is
  less than the largest of its provider networks' (handed down by the
  cluster's audit): full-size frames are dropped on the wire; reported
  only (jumbo frames need every hop);
* ``version_skew``: the node's ``ovn-controller`` and the central's
  ``ovn-northd`` (handed down by the cluster's audit) are releases OVN's
  upgrade rules say must not run together (:mod:`..cluster.releases`);
  reported only: the mend is an upgrade.

The repair is one transaction on the node's Open vSwitch database, and the
links it brings up.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket

from ..cluster import releases
from ..cluster.audit import audit_and_mend, audit_result, finding
from ..common.marks import K_CONTAINER, K_UID
from ..ovsdb.connection import DEFAULT_OVS_DB, OVS_SCHEMA
from ..ovsdb.execution import Batch
from ..ovsdb.operations import Op
from ..ovsdb.plan import Change, Plan, plan, validate_config
from ..ovsdb.task_databases import opened
from ..ovsdb.view import View
from ..resources.ovs import MAPPINGS, Port, parse_bridge_mappings
from .upgrade_node import daemon_version, is_pinned

TABLES = ("Open_vSwitch", "Bridge", "Port", "Interface")
STRAY = "stray_interface"
DEAD = "dead_interface"
MTU = "mtu_mismatch"
TUNNEL = "tunnel_down"
VERSION = "version_skew"
UNWIRED = "provider_bridge_unwired"
PHYSNET_MTU = "provider_mtu_mismatch"
IFF_UP = 0x1


def _first(value):
    return value[0] if isinstance(value, list) and value else (None if isinstance(value, list) else value)


def encap_ips(view):
    """The node's encapsulation IPs (``ovn-encap-ip``, comma-separated)."""
    rows = view.rows("Open_vSwitch")
    text = rows[0].external_ids.get("ovn-encap-ip", "") if rows else ""
    return [ip.strip() for ip in text.split(",") if ip.strip()]


def encap_links(ips):
    """``[(ip, device or None, up)]``: which device holds each IP, from
    netlink (this host's)."""
    from pyroute2 import IPRoute
    out = []
    with IPRoute() as ipr:
        held = dict((a.get_attr("IFA_ADDRESS"), a["index"]) for a in ipr.get_addr())
        for ip in ips:
            link = ipr.get_links(held[ip])[0] if ip in held else None
            out.append((ip, link.get_attr("IFLA_IFNAME") if link else None, bool(link and link["flags"] & IFF_UP)))
    return out


def controller_version(rundir="/var/run/ovn"):
    """The running ``ovn-controller``'s version, asked over its control
    socket; None when none runs."""
    return daemon_version(rundir, "ovn-controller")


def audit_versions(view, node, northd, controller):
    """``northd``, the central's ``northd_internal_version``; ``controller``,
    :func:`controller_version`."""
    rows = view.rows("Open_vSwitch")
    pinned = bool(rows) and is_pinned(rows[0].external_ids)
    verdict = releases.skew(northd, controller, pinned)
    if verdict is None:
        return []
    return [finding(VERSION, verdict[0], "node", [node], "%s: %s" % (node, verdict[1]))]


def bring_up(names, write):
    """The repair's netlink part: bring the links ``names`` up."""
    if write and names:
        from pyroute2 import IPRoute
        with IPRoute() as ipr:
            for name in names:
                ipr.link("set", index=ipr.link_lookup(ifname=name)[0], state="up")
    return LinkRepair(names)


class LinkRepair:
    """What :func:`bring_up` did (or would do), as a plan says it."""

    def __init__(self, names):
        self.names = sorted(names)
        self.changed = bool(self.names)

    def operations(self):
        return ["set link %s up" % name for name in self.names]


def audit_tunnels(node, links, ours):
    """``links``, :func:`encap_links` of the node's encapsulation IPs;
    ``ours``, the names of this Open vSwitch's interfaces (the only ones
    the repair brings up)."""
    out = []
    for ip, device, up in links:
        if device is None:
            out.append(finding(TUNNEL, "error", "node", [ip], "%s: no device holds the encapsulation IP %s; "
                               "tunnels to and from %s carry nothing" % (node, ip, node)))
        elif not up:
            out.append(finding(TUNNEL, "error", "node", [device], "%s: %s, which holds the encapsulation IP %s, "
                               "is down; tunnels to and from %s carry nothing" % (node, device, ip, node),
                               ("bring %s up on %s" % (device, node)) if device in ours else None))
    return out


def _interfaces(view, bridge):
    row = view.lookup("Bridge", bridge)
    if row is None or isinstance(row, list):
        return []
    return [(port, iface) for port in row.ports for iface in port.interfaces if port.name != bridge]


def audit_node(view, node, known_ports=None, bridge="br-int", devices=None, live_pods=None, port_mtus=None):
    """The node's findings; ``known_ports``, the northbound's logical port
    names (None: the stray class is not looked at); ``devices``, the names
    of the network devices the node has (None: only what OVS says counts).
    A device gone is not always an error in OVS at once: the userspace
    datapath keeps the port's number until it reconfigures. ``live_pods``,
    the UIDs of the pods the API has: the product's stray interface is
    deleted only when its pod is known to be gone (a live pod's logical
    port is made again by the watcher). ``port_mtus``, ``{logical port:
    its network's MTU}`` for the networks that have one."""
    out = []
    mtus = port_mtus or {}
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
        elif ours and iface_id in mtus and _first(iface.mtu) not in (None, int(mtus[iface_id])):
            out.append(finding(MTU, "error", "ovs", [port.name], "%s: interface %s of %s has MTU %s, its "
                               "network's is %s" % (node, iface.name, iface_id, _first(iface.mtu), mtus[iface_id]),
                               "set the MTU of %s to %s on %s" % (iface.name, mtus[iface_id], node)))
        elif known is not None and iface_id and iface_id not in known and iface.type in ("", "internal", "system"):
            uid = iface.external_ids.get(K_UID)
            gone_pod = ours and live_pods is not None and uid not in live_pods
            out.append(finding(STRAY, "warning", "ovs", [port.name],
                               "%s: interface %s names logical port %s, which the northbound does not have%s" % (
                                   node, iface.name, iface_id,
                                   "; its pod is alive: the cluster's repair (or the watcher) makes the port again" if ours and live_pods
                                   is not None and not gone_pod else ""),
                               ("delete the OVS port %s on %s" % (port.name, node)) if gone_pod else None))
    return out


def audit_physnets(view, node, physnet_mtus=None):
    """Each mapped physical network's bridge exists and holds a NIC (a
    port of a system device: not the bridge's own interface, not a patch
    port ovn-controller made); with ``physnet_mtus`` (``{physnet: MTU its
    networks need}``), the NIC carries that MTU."""
    out = []
    for row in view.rows("Open_vSwitch"):
        for physnet, bridge in parse_bridge_mappings(row.external_ids.get(MAPPINGS)):
            found = view.lookup("Bridge", bridge)
            nics = [] if found is None or isinstance(found, list) else [
                iface for port, iface in _interfaces(view, bridge) if iface.type in ("", "system")]
            # a NIC whose device is gone keeps its port, with no number and an error
            working = [iface for iface in nics if _first(iface.ofport) not in (None, -1) and not _first(iface.error)]
            if found is None or not working:
                why = "does not exist" if found is None else "holds no working NIC%s" % (
                    "" if not nics else " (%s)" % ", ".join("%s: %s" % (i.name, _first(i.error) or "no port number")
                                                            for i in nics))
                out.append(finding(UNWIRED, "error", "ovs", [physnet], "%s: physical network %s maps to bridge %s, "
                                   "which %s: its frames go nowhere" % (node, physnet, bridge, why)))
                continue
            needed = (physnet_mtus or {}).get(physnet)
            short = [iface for iface in working if needed and _first(iface.mtu) and _first(iface.mtu) < int(needed)]
            for iface in short:
                out.append(finding(PHYSNET_MTU, "error", "ovs", [physnet], "%s: NIC %s of physical network %s has "
                                   "MTU %s, less than the %s its provider networks need" % (
                                       node, iface.name, physnet, _first(iface.mtu), needed)))
    return out


def mtus_applied(view, bridge="br-int"):
    """Whether Open vSwitch has given every interface on ``bridge`` the MTU
    asked of it (``mtu_request``): the repair asks, vswitchd applies a
    moment later, and the audit made again after it waits for that."""
    return all(_first(iface.mtu) == _first(iface.mtu_request) for _port, iface in _interfaces(view, bridge)
               if _first(iface.mtu_request) is not None)


class _Interface:
    """What the MTU repair's changes are said of."""
    name, identity = "interface", ()


def plan_node_repair(view, findings, bridge="br-int", port_mtus=None):
    """Delete the product's ports the findings name, and ask for their
    networks' MTU where it differs, in one transaction."""
    batch = Batch()
    names = sorted(set(name for f in findings if f["repair"] and f["class"] in (STRAY, DEAD)
                       for name in f["objects"]))
    if names:       # (``deleted`` without items would mean every port the product owns)
        resource = Port()
        items = [{"name": name, "bridge": bridge} for name in names]
        batch.add(plan(resource, validate_config(resource, items, "deleted"), "deleted", view))
    wrong = set(name for f in findings if f["repair"] and f["class"] == MTU for name in f["objects"])
    resize = Plan(_Interface, "merged")
    for port, iface in sorted(_interfaces(view, bridge), key=lambda pair: pair[0].name):
        mtu = (port_mtus or {}).get(iface.external_ids.get("iface-id"))
        if port.name in wrong and mtu:
            resize.changes.append(Change("update", iface.name, {"mtu": _first(iface.mtu)}, {"mtu": int(mtu)},
                                         [Op("update", "Interface", iface, "mtu_request", [int(mtu)])]))
    batch.add(resize)
    return batch


def run_host_audit(params, check_mode=False):
    """The audit of the node a task runs on (``network_audit`` with
    ``layer: node``), as a result dict. ``params``: ``db`` (this node's
    Open vSwitch database), ``node`` (its name; by default the host's),
    ``bridge``, and what the cluster's run handed down: ``known_ports``,
    ``live_pods``, ``port_mtus``, ``northd_version`` (each missing one
    skips its class), ``ovn_rundir``, ``state`` (``repaired``: mended,
    unless ``check_mode``). The tunnel and version classes look at this
    host, so they run only against the local database."""
    params = dict(params, db=params["db"] or DEFAULT_OVS_DB)
    write = params["state"] == "repaired" and not check_mode
    node, bridge, mtus = params["node"] or socket.gethostname(), params["bridge"], params["port_mtus"]
    physnet_mtus = params.get("physnet_mtus")
    with opened(params, TABLES, OVS_SCHEMA) as ovs:
        devices = set(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") and \
            params["db"] == DEFAULT_OVS_DB else None     # this host's devices are the database's
        running = controller_version(params["ovn_rundir"]) if devices is not None else None
        versions = bool(params["northd_version"] and running)

        def read(idl):
            view = View(idl)
            found = audit_node(view, node, params["known_ports"], bridge, devices, params["live_pods"], mtus)
            links = encap_links(encap_ips(view)) if devices is not None else []
            ours = set(iface.name for iface in view.rows("Interface"))
            found += audit_versions(view, node, params["northd_version"], running) if versions else []
            found += audit_physnets(view, node, physnet_mtus)
            return (found + audit_tunnels(node, links, ours),)
        (findings,), repair, left = audit_and_mend(lambda: ovs.read(read), [
            (ovs, lambda view, found: plan_node_repair(view, found, bridge, mtus)),
            (None, lambda found: bring_up(set(
                o for f in found if f["class"] == TUNNEL and f["repair"] for o in f["objects"]), write))],
            params["state"], write, settle=lambda: ovs.wait_for(lambda idl: mtus_applied(View(idl), bridge),
                                                                ovs.timeout))
    skipped = ([] if params["known_ports"] is not None else [STRAY]) + ([] if mtus is not None else [MTU]) + \
        ([] if devices is not None else [TUNNEL]) + ([] if versions else [VERSION]) + \
        ([] if physnet_mtus is not None else [PHYSNET_MTU])
    return audit_result(findings, skipped, [], [], repair, left)
