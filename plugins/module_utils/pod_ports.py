# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pod's interfaces as OVN logical switch ports.

A pod's ports carry ``external_ids`` naming its namespace, name, UID and
interface, and they are found by those, exactly: never by a substring of a
port name (OVN4NFV's substring match deleted ``web-1``'s ports when ``web``
went away). Dynamic addresses come from OVN's own allocation
(``addresses: dynamic`` on a switch with ``other_config:subnet``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from . import addressing, annotations, cluster, virtual_network as vn
from .errors import ValidationError
from .ovn_resources import LogicalSwitchPort
from .reconcile import OWNER_KEY, OWNER_VALUE, Batch, plan, validate_config

K_NAMESPACE = "ovn4nfv-pod-namespace"
K_POD = "ovn4nfv-pod-name"
K_UID = "ovn4nfv-pod-uid"
K_INTERFACE = "ovn4nfv-interface"
ROLE_POD = "pod-port"
TABLES = ("Logical_Switch", "Logical_Switch_Port")


class Pod:
    """The identity of a pod."""

    def __init__(self, namespace, name, uid):
        self.namespace = namespace
        self.name = name
        self.uid = uid

    def __repr__(self):
        return "%s/%s" % (self.namespace, self.name)

    def port_name(self, interface):
        """The seed design's ``<namespace>_<pod>_<interface>``."""
        return "%s_%s_%s" % (self.namespace, self.name, interface)

    def marks(self, interface):
        return {cluster.ROLE: ROLE_POD, K_NAMESPACE: self.namespace, K_POD: self.name,
                K_UID: self.uid, K_INTERFACE: interface}


def is_pod_port(row):
    ids = row.external_ids
    return ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(cluster.ROLE) == ROLE_POD


def pod_ports(view, uid):
    """The ports of the pod with ``uid``: ``{interface: row}``."""
    return dict((row.external_ids.get(K_INTERFACE), row) for row in view.rows("Logical_Switch_Port")
                if is_pod_port(row) and row.external_ids.get(K_UID) == uid)


def owned_pods(view):
    """``{uid: Pod}`` of every pod that has ports the product owns."""
    out = {}
    for row in view.rows("Logical_Switch_Port"):
        if is_pod_port(row):
            ids = row.external_ids
            out[ids[K_UID]] = Pod(ids.get(K_NAMESPACE), ids.get(K_POD), ids[K_UID])
    return out


def _addresses(row):
    """(MAC, [IPAddress]) a port holds, static or assigned."""
    texts = [a for a in row.addresses if a not in ("dynamic", "router", "unknown")]
    texts += list(row.dynamic_addresses or [])
    mac, ips = None, []
    for text in texts:
        words = text.split()
        if words and words[0] != "dynamic" and addressing.is_mac(words[0]):
            mac = mac or words[0].lower()
        for word in words[1:]:
            try:
                ips.append(addressing.parse_ip(word, "address"))
            except ValidationError:
                continue
    return mac, ips


def _holder(row):
    ids = row.external_ids
    if ids.get(K_POD):
        return "pod %s/%s (port %s)" % (ids.get(K_NAMESPACE), ids.get(K_POD), row.name)
    return "port %s" % row.name


def plan_pod(view, pod, requests):
    """Plan the ports of ``pod`` for ``requests`` (InterfaceRequest list):
    create the missing, leave the right ones, delete the pod's ports no
    longer asked for.

    Every request is checked against its network first; a static IP or MAC
    that another pod holds is refused, naming the holder.
    """
    networks = vn.read_networks(view)
    mine = pod_ports(view, pod.uid)
    problems, items = [], []
    taken_ips, taken_macs = {}, {}
    for row in view.rows("Logical_Switch_Port"):
        if row.external_ids.get(K_UID) == pod.uid:
            continue
        mac, ips = _addresses(row)
        if mac:
            taken_macs[mac] = row
        for ip in ips:
            taken_ips[ip] = row
    by_name = view.by_name("Logical_Switch_Port")
    for request in requests:
        state = networks.get(request.network)
        if state is None:
            problems.append("%s.name: network %r does not exist" % (request.where, request.network))
            continue
        network = state.network
        name = pod.port_name(request.interface)
        existing = by_name.get(name)
        if existing is not None and not isinstance(existing, list) and \
                existing.external_ids.get(K_UID) != pod.uid:
            problems.append("%s: port %s already exists for %s; delete it first (plan_stale)" % (
                request.where, name, _holder(existing)))
            continue
        if request.ip is not None:
            field = request.where + ".ip_address"
            try:
                subnet = network.subnet if request.ip.version == 4 else network.subnet6
                if subnet is None or request.ip not in subnet:
                    raise ValidationError("%s: %s is outside network %s (%s)" % (
                        field, request.ip, network.name, subnet))
                if request.ip in (network.gateway, network.gateway6):
                    raise ValidationError("%s: %s is network %s's gateway" % (field, request.ip, network.name))
                if request.ip.version == 4 and request.ip not in addressing.ip_set(subnet, network.exclude_ips):
                    raise ValidationError("%s: %s is excluded in network %s" % (field, request.ip, network.name))
                holder = taken_ips.get(request.ip)
                if holder is not None:
                    raise ValidationError("%s: %s is already held by %s" % (field, request.ip, _holder(holder)))
            except ValidationError as exc:
                problems.extend(exc.problems)
                continue
        if request.mac is not None:
            holder = taken_macs.get(request.mac)
            if holder is not None:
                problems.append("%s.mac_address: %s is already held by %s" % (
                    request.where, request.mac, _holder(holder)))
                continue
        if request.ip is not None:
            mac = request.mac or addressing.mac_from_name(pod.uid + "/" + request.interface)
            address = "%s %s" % (mac, request.ip)
        elif request.mac is not None:
            address = "%s dynamic" % request.mac
        else:
            address = "dynamic"
        items.append({"name": name, "switch": network.name, "addresses": [address],
                      "external_ids": pod.marks(request.interface)})
    if problems:
        raise ValidationError(problems)
    wanted = set(r.interface for r in requests)
    deletes = [{"name": row.name} for interface, row in sorted(mine.items()) if interface not in wanted]
    batch = Batch()
    resource = LogicalSwitchPort()
    if deletes:
        batch.add(plan(resource, validate_config(resource, deletes, "deleted"), "deleted", view))
    if items:
        batch.add(plan(resource, validate_config(resource, items, "replaced"), "replaced", view))
    return batch


def plan_stale(view, pod, requests):
    """Delete the pod ports that an earlier pod of the same name left under
    the names ``pod`` needs (a pod deleted and created again before its
    ports were cleaned up). Run, as its own transaction, before plan_pod."""
    by_name = view.by_name("Logical_Switch_Port")
    keys = []
    for request in requests:
        row = by_name.get(pod.port_name(request.interface))
        if row is not None and not isinstance(row, list) and is_pod_port(row) \
                and row.external_ids.get(K_UID) != pod.uid:
            keys.append({"name": row.name})
    batch = Batch()
    if keys:
        resource = LogicalSwitchPort()
        batch.add(plan(resource, validate_config(resource, keys, "deleted"), "deleted", view))
    return batch


def plan_delete(view, uid):
    """Delete exactly the ports whose ``external_ids`` carry ``uid``."""
    resource = LogicalSwitchPort()
    keys = [{"name": row.name} for _i, row in sorted(pod_ports(view, uid).items())]
    batch = Batch()
    if keys:
        batch.add(plan(resource, validate_config(resource, keys, "deleted"), "deleted", view))
    return batch


def interface_list(view, pod, requests):
    """The pod's ``ovnIfaceList`` entries, or None while OVN has not yet
    assigned an address a request waits for."""
    networks = vn.read_networks(view)
    mine = pod_ports(view, pod.uid)
    entries = []
    for request in requests:
        row = mine.get(request.interface)
        state = networks.get(request.network)
        if row is None or state is None:
            return None
        mac, ips = _addresses(row)
        ipv4 = [ip for ip in ips if ip.version == 4]
        if not mac or not ipv4:
            return None
        network = state.network
        entries.append(annotations.interface_entry(
            request, "%s/%d" % (ipv4[0], network.subnet.prefixlen), mac, str(network.gateway),
            network.routes))
    return entries
