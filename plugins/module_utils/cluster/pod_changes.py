# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A running pod follows its request: the ports of interfaces it no longer
asks for go, and so do those of interfaces it asks for anew.

An interface whose network, static IP, static MAC, ``dhcp`` or trunk
nesting (``parent``, ``vlan``) changes is **replaced**: its port is
deleted (with its addresses in the policies' sets and its DHCP rows, as
when its pod goes) in a transaction of its own, then made anew by
:func:`.pod_ports.plan_pod` (a port made again under the same name on
another switch cannot share the transaction that deletes it: the engine
would find it still there). Routes, the default route and the MTU change
in place: the port stays. So does ``qos``: its QoS row follows the request
(:mod:`.port_qos`), and until it does the pod is not served (``secured``).

A change is all or nothing: one the watcher refuses drops nothing. It
refuses, besides what :func:`.pod_ports.plan_pod` refuses (bad input, an
unknown network, an address another holds), removing or replacing the
pod's **primary** interface, the one whose address the runtime holds:
``status.podIP`` if set, else the first addressed entry of the served
``ovnIfaceList`` (not one configured by DHCP, nor a trunk's VLAN; an
address for another CNI plugin is never in it). The Event reason is
:data:`REFUSED`.

A VM's ports are not followed here: a migrating VM has two launchers, and
its ports go by :func:`.pod_ports.plan_drop`'s rule (``K_VMI``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import K_INTERFACE, K_UID
from ..ovsdb.execution import Batch
from ..ovsdb.operations import NewRow
from ..ovsdb.view import cell
from . import annotations, pod_ports
from .pod_addresses import held_addresses

REFUSED = "InterfaceChangeRefused"


def served(found):
    """The entries of the ``ovnIfaceList`` in ``found`` (a pod's
    annotations), in order; ``[]`` when there is none, or it does not
    parse (then nothing is known of what the pod was told)."""
    try:
        entries = annotations.parse_iface_list(found.get(annotations.IFACE_LIST) or "[]")
    except (ValueError, TypeError, ValidationError):
        return []
    return [entry for entry in entries if isinstance(entry, dict)]


def _one(value):
    """An optional column's value (the atom, or a list of none or one) as
    the atom or None."""
    if isinstance(value, (list, tuple, set)):
        return next(iter(value), None)
    return value if value not in ("", None) else None


def why_replaced(view, pod, row, request, entry=None):
    """Why ``pod``'s port ``row`` cannot serve ``request`` (the interface
    is to be replaced), or None when it can. ``entry``: the interface's
    entry in the served list, if any (whether it is configured by DHCP is
    known from there alone). A request on an unknown network is no
    replacement: :func:`.pod_ports.plan_pod` refuses it, and nothing goes."""
    switch = view.lookup("Logical_Switch", request.network)
    if switch is None or isinstance(switch, (list, NewRow)):
        return None
    if not view.holds(switch, "ports", row.uuid):
        return "its network is now %s" % request.network
    mac, ips = held_addresses(row)
    if request.ip is not None and request.ip not in ips:
        return "its address is now %s, not %s" % (request.ip, ", ".join(str(ip) for ip in ips) or "none")
    if request.mac is not None and str(request.mac).lower() != str(mac or "").lower():
        return "its MAC is now %s, not %s" % (request.mac, mac)
    nesting = (pod.port_name(request.parent), request.vlan) if request.parent else (None, None)
    held = (_one(cell(row, "parent_name")), _one(cell(row, "tag")))
    if nesting != held:
        return "it is now %s, not %s" % (_nesting(nesting), _nesting(held))
    if entry is not None and bool(entry.get("dhcp")) != bool(request.dhcp):
        return "it is now %s" % ("configured by DHCP" if request.dhcp else "no longer configured by DHCP")
    return None


def _nesting(pair):
    return "VLAN %s of %s" % (pair[1], pair[0]) if pair[0] else "no trunk's VLAN"


def changes(view, pod, requests, found, addresses):
    """What ``pod``'s ports (its UID's, found through ``addresses``, an
    :class:`~.pod_addresses.AddressIndex`, without a scan) lack to follow
    ``requests``: ``(dropped, replaced)``, ``{interface: row}`` of the
    ports of interfaces no longer asked for and ``{interface: (row,
    why)}`` of those asked for anew (:func:`why_replaced`). ``found``:
    the pod's annotations, with the list it was served."""
    asked = dict((request.interface, request) for request in requests)
    entries = dict((entry.get("interface"), entry) for entry in served(found))
    dropped, replaced = {}, {}
    for row in addresses.ports_of(view, pod.namespace, pod.name):
        ids = cell(row, "external_ids")
        if ids.get(K_UID) != pod.uid:
            continue        # an earlier pod's of that name: plan_release's
        interface = ids.get(K_INTERFACE)
        request = asked.get(interface)
        if request is None:
            dropped[interface] = row
            continue
        why = why_replaced(view, pod, row, request, entries.get(interface))
        if why:
            replaced[interface] = (row, why)
    return dropped, replaced


def describe(dropped, replaced):
    """``"net1 removed, net2 replaced (its network is now b)"``, or ``""``."""
    said = ["%s removed" % interface for interface in sorted(dropped)]
    said += ["%s replaced (%s)" % (interface, why) for interface, (_row, why) in sorted(replaced.items())]
    return ", ".join(said)


def primary(entries, pod_ip=None):
    """The interface of the served list ``entries`` whose address the
    runtime holds: the one with ``pod_ip`` (``status.podIP``) when it is
    known (None when none of them has it: another plugin gave it), else
    the first with an address the pod configures itself (not by DHCP, not
    a trunk's VLAN); None when there is none."""
    def address(entry):
        return str(entry.get("ip_address") or "").partition("/")[0]
    if pod_ip:
        return next((e.get("interface") for e in entries if address(e) == str(pod_ip)), None)
    return next((e.get("interface") for e in entries if address(e) and not e.get("dhcp") and not e.get("parent")),
                None)


def refusal(found, pod_ip, dropped, replaced):
    """Why the change (``dropped``, ``replaced``: :func:`changes`) is
    refused, or None: it removes or replaces the primary interface
    (:func:`primary` of the list in ``found``)."""
    interface = primary(served(found), pod_ip)
    if interface is None or (interface not in dropped and interface not in replaced):
        return None
    what = "removed" if interface in dropped else "replaced (%s)" % replaced[interface][1]
    return ("interface %s: the pod's primary interface, whose address the runtime holds (%s), cannot be %s on a "
            "running pod; it keeps its interfaces as they are until the request leaves %s as it was, or the pod "
            "is made again" % (interface, "status.podIP %s" % pod_ip if pod_ip else "the first addressed entry of "
                               "its %s" % annotations.IFACE_LIST, what, interface))


def plan_changes(view, pod, requests, found, addresses, pod_ip=None):
    """Delete the ports of ``pod``'s interfaces that ``requests`` no longer
    asks for, or asks for anew (:func:`changes`), with what they hold
    (:func:`.pod_ports.plan_drop_rows`): the transaction before the one
    that makes the new ports. Nothing when nothing changed. A change is
    checked whole first, as if they were gone: a refused one
    (:func:`refusal`, reason :data:`REFUSED`; or what
    :func:`.pod_ports.plan_pod` refuses) raises ValidationError and drops
    nothing."""
    dropped, replaced = changes(view, pod, requests, found, addresses)
    if not dropped and not replaced:
        return Batch()
    refused = refusal(found, pod_ip, dropped, replaced)
    if refused:
        raise ValidationError(refused, reason=REFUSED)
    pod_ports.plan_pod(view, pod, pinned(view, pod, requests, found), addresses, replaced=set(replaced))
    return pod_ports.plan_drop_rows(view, list(dropped.values()) + [row for row, _why in replaced.values()])


def state(view, pod, requests, found, addresses=None):
    """How ``pod``'s ports stand against ``requests``: ``(patch, right,
    secured, changes)``, what to write on the pod (None while an address
    is not there), whether its ports honour the request, whether they have
    their port security (and the QoS rows their requests ask for), and
    what it no longer asks for, or asks for anew
    (:func:`describe`; with ``addresses`` only, as a VM's ports are not
    followed): a pod is served when there is nothing of that."""
    said = describe(*changes(view, pod, requests, found, addresses)) if addresses is not None else ""
    entries = pod_ports.interface_list(view, pod, requests)
    if not entries:
        return None, False, False, said
    return (pod_ports.pod_annotations(view, pod, requests, entries), pod_ports.matches_requests(entries, requests),
            pod_ports.secured(view, pod, requests), said)


def pinned(view, pod, requests, found):
    """``requests`` held to the addresses ``pod`` was told (the
    ``ovnIfaceList`` in ``found``, its annotations) where its port is
    missing: a port made again for a running pod must keep them, as its
    interfaces carry them already. A request whose port is there, without
    an entry, or for another CNI plugin, is as it was; so is one whose
    entry it no longer fits (:func:`fits`: the interface is replaced, and
    made anew, not with its old address); an
    entry that does not parse pins nothing (it is checked as a static
    request would be, so it grants no more than ``ovnNetwork`` does)."""
    try:
        entries = dict((e.get("interface"), e) for e in annotations.parse_iface_list(
            found.get(annotations.IFACE_LIST) or "[]") if isinstance(e, dict))
        out, mine = [], pod_ports._own_ports(view, pod, requests)
        for request in requests:
            entry = entries.get(request.interface)
            if entry is None or request.ipam or request.interface in mine:
                out.append(request)
                continue
            ip, prefix = addressing.parse_ip_prefix(entry.get("ip_address"), "ovnIfaceList.ip_address")
            mac = addressing.parse_mac(entry.get("mac_address"), "ovnIfaceList.mac_address")
            if not fits(request, pod_ports._network(view, request.network), entry, ip, mac):
                out.append(request)
                continue
            held = copy.copy(request)       # all it asked, but the addresses it was told
            held.ip, held.prefix, held.mac = ip, prefix, mac
            out.append(held)
        return out
    except (ValueError, TypeError, AttributeError, ValidationError):
        return list(requests)


def fits(request, network, entry, ip, mac):
    """Whether the interface ``entry`` of a served list (its address
    ``ip``, its ``mac``) is still what ``request`` asks for: on its
    network (``ip`` inside the subnet of ``network``, the request's), with
    its static IP and MAC where it gives them, configured the same way
    (``dhcp``) and nested the same way (a trunk's VLAN: ``parent``,
    ``vlan``)."""
    if network is None or network.subnet is None or ip not in network.subnet:
        return False
    if (request.ip is not None and request.ip != ip) or \
            (request.mac is not None and str(request.mac).lower() != str(mac).lower()):
        return False
    return bool(entry.get("dhcp")) == bool(request.dhcp) and \
        (entry.get("parent"), entry.get("vlan") if entry.get("parent") else None) == \
        (request.parent, request.vlan if request.parent else None)
