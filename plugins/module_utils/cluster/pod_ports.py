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

from ..common import addressing
from ..common.errors import ValidationError
from ..common.naming import OWNER_KEY, OWNER_VALUE
from ..ovsdb.execution import Batch
from ..ovsdb.operations import NewRow, Op
from ..ovsdb.plan import plan, validate_config
from ..resources.nb_switches import LogicalSwitchPort
from . import annotations, networks as vn
from .topology import ROLE

K_NAMESPACE = "ovn4nfv-pod-namespace"
K_POD = "ovn4nfv-pod-name"
K_UID = "ovn4nfv-pod-uid"
K_INTERFACE = "ovn4nfv-interface"
ROLE_POD = "pod-port"
# Why a request was refused: the Event reasons, gravest first.
INVALID = "InvalidNetworkRequest"
UNKNOWN_NETWORK = "UnknownNetwork"
CONFLICT = "AddressConflict"
EXHAUSTED = "AddressPoolExhausted"
REASONS = (INVALID, UNKNOWN_NETWORK, CONFLICT, EXHAUSTED)
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
        return {ROLE: ROLE_POD, K_NAMESPACE: self.namespace, K_POD: self.name,
                K_UID: self.uid, K_INTERFACE: interface}


def is_pod_port(row):
    # a row the IDL notifies of may lack columns (a delete after a
    # reconnect): it is then not known to be anyone's
    ids = getattr(row, "external_ids", None) or {}
    return ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(ROLE) == ROLE_POD


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


class AddressIndex:
    """Which switch port holds which IP and MAC, kept current from the NB's
    update stream, so that checking a static address is a lookup rather
    than a scan of every port. Subnets of virtual networks never overlap,
    so one map serves every network."""

    def __init__(self):
        self.by_ip, self.by_mac, self.of_row, self.by_pod = {}, {}, {}, {}

    def attach(self, database):
        """Follow ``database`` from now on, starting from what it holds."""
        database.add_listener(self.notify)
        database.read(self._rebuild)
        return self

    def _rebuild(self, idl):
        self.by_ip, self.by_mac, self.of_row, self.by_pod = {}, {}, {}, {}
        for row in idl.tables["Logical_Switch_Port"].rows.values():
            self._add(row)

    def notify(self, event, row):
        if row._table.name != "Logical_Switch_Port":
            return
        self._remove(row.uuid)
        if event != "delete":
            self._add(row)

    def _add(self, row):
        mac, ips = _addresses(row)
        pod = None
        if is_pod_port(row):
            pod = (row.external_ids.get(K_NAMESPACE), row.external_ids.get(K_POD))
            self.by_pod.setdefault(pod, set()).add(row.uuid)
        self.of_row[row.uuid] = (mac, ips, pod)
        if mac:
            self.by_mac[mac] = row.uuid
        for ip in ips:
            self.by_ip[ip] = row.uuid

    def _remove(self, uuid):
        mac, ips, pod = self.of_row.pop(uuid, (None, [], None))
        if pod is not None:
            self.by_pod.get(pod, set()).discard(uuid)
            if not self.by_pod.get(pod, True):
                del self.by_pod[pod]
        if mac and self.by_mac.get(mac) == uuid:
            del self.by_mac[mac]
        for ip in ips:
            if self.by_ip.get(ip) == uuid:
                del self.by_ip[ip]

    def holder(self, view, kind, value):
        """The port holding ``value`` (``kind`` ``ip`` or ``mac``), or None."""
        uuid = (self.by_ip if kind == "ip" else self.by_mac).get(value)
        if uuid is None:
            return None
        return view.idl.tables["Logical_Switch_Port"].rows.get(uuid)

    def ports_of(self, view, namespace, name):
        """The pod ports of every pod ever named ``namespace/name``."""
        table = view.idl.tables["Logical_Switch_Port"].rows
        return [table[u] for u in self.by_pod.get((namespace, name), ()) if u in table]


def _scan_holder(view, kind, value, uid, switch=None):
    """The port holding ``value``, found by scanning (without an index)."""
    rows = switch.ports if switch is not None else view.rows("Logical_Switch_Port")
    for row in rows:
        if row.external_ids.get(K_UID) == uid:
            continue
        mac, ips = _addresses(row)
        if (kind == "ip" and value in ips) or (kind == "mac" and mac == value):
            return row
    return None


def _holder(row):
    ids = row.external_ids
    if ids.get(K_POD):
        return "pod %s/%s (port %s)" % (ids.get(K_NAMESPACE), ids.get(K_POD), row.name)
    return "port %s" % row.name


def _own_ports(view, pod, requests):
    """``{interface: row}`` of the pod's ports for ``requests``, by name."""
    out = {}
    for request in requests:
        row = view.lookup("Logical_Switch_Port", pod.port_name(request.interface))
        if row is not None and not isinstance(row, (list, NewRow)) and \
                row.external_ids.get(K_UID) == pod.uid:
            out[request.interface] = row
    return out


def plan_pod(view, pod, requests, addresses=None):
    """Plan the ports of ``pod`` for ``requests`` (InterfaceRequest list):
    create the missing ones and leave the right ones. (Interfaces dropped
    from a running pod's annotation stay until the pod goes: changing a
    running pod's networks is not supported.)

    Every request is checked against its network first; a static IP or MAC
    that another pod holds is refused, naming the holder. Each network that
    receives a static address is verified at commit: if another writer
    added a port meanwhile, the server answers "try again" and this plan is
    made anew against the new state. ``addresses``, an
    :class:`AddressIndex`, makes the checks lookups instead of scans.
    """
    def holder(kind, value, switch=None):
        if addresses is not None:
            row = addresses.holder(view, kind, value)
            return row if row is not None and row.external_ids.get(K_UID) != pod.uid else None
        return _scan_holder(view, kind, value, pod.uid, switch)

    problems, items, verify, wanted = [], [], {}, {}
    networks = {}
    for request in requests:
        if request.network not in networks:
            networks[request.network] = vn.read_network(view, request.network)
        network = networks[request.network]
        if network is None:
            problems.append((UNKNOWN_NETWORK, "%s.name: network %r does not exist" % (
                request.where, request.network)))
            continue
        name = pod.port_name(request.interface)
        existing = view.lookup("Logical_Switch_Port", name)
        if existing is not None and not isinstance(existing, (list, NewRow)) and \
                existing.external_ids.get(K_UID) != pod.uid:
            problems.append((CONFLICT, "%s: port %s already exists for %s; delete it first (plan_stale)" % (
                request.where, name, _holder(existing))))
            continue
        switch = view.lookup("Logical_Switch", network.name)
        if request.ip is not None:
            try:
                _check_static_ip(request, network)
            except ValidationError as exc:
                problems.extend((INVALID, p) for p in exc.problems)
                continue
            port = holder("ip", request.ip, switch)
            if port is not None:
                problems.append((CONFLICT, "%s.ip_address: %s is already held by %s" % (
                    request.where, request.ip, _holder(port))))
                continue
            verify[network.name] = switch
        if request.mac is not None:
            port = holder("mac", request.mac)
            if port is not None:
                problems.append((CONFLICT, "%s.mac_address: %s is already held by %s" % (
                    request.where, request.mac, _holder(port))))
                continue
        if request.ip is None and existing is None:
            wanted[network.name] = wanted.get(network.name, 0) + 1
            if free_addresses(view, network, switch) < wanted[network.name]:
                problems.append((EXHAUSTED, "%s.name: network %s has no free address (%s)" % (
                    request.where, network.name, pool_usage(view, network, switch))))
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
        # the Event's reason: the gravest kind among the problems
        reason = min((p[0] for p in problems), key=REASONS.index)
        raise ValidationError([p[1] for p in problems], reason=reason)
    batch = Batch()
    if items:
        resource = LogicalSwitchPort()
        result = batch.add(plan(resource, validate_config(resource, items, "replaced"), "replaced", view))
        if result.changed:
            first = next(c for c in result.changes if c.ops)
            first.ops[:0] = [Op("verify", "Logical_Switch", switch, "ports")
                             for _name, switch in sorted(verify.items())]
    return batch


def _check_static_ip(request, network):
    """Whether a static address fits its network: inside the subnet, with
    the network's own prefix length if one was written, not its gateway,
    network or broadcast address, and not excluded."""
    field = request.where + ".ip_address"
    subnet = network.subnet if request.ip.version == 4 else network.subnet6
    if subnet is None or request.ip not in subnet:
        raise ValidationError("%s: %s is outside network %s (%s)" % (field, request.ip, network.name, subnet))
    addressing.require_prefix(getattr(request, "prefix", None), subnet, field, "%s/%s" % (
        request.ip, getattr(request, "prefix", None)))
    if request.ip in (network.gateway, network.gateway6):
        raise ValidationError("%s: %s is network %s's gateway" % (field, request.ip, network.name))
    if request.ip.version != 4:
        return
    if request.ip == subnet.network:
        raise ValidationError("%s: %s is network %s's network address" % (field, request.ip, network.name))
    if request.ip == subnet.broadcast:
        raise ValidationError("%s: %s is network %s's broadcast address" % (field, request.ip, network.name))
    if request.ip not in addressing.ip_set(subnet, network.exclude_ips):
        raise ValidationError("%s: %s is in network %s's exclude_ips (%s)" % (
            field, request.ip, network.name, " ".join(network.exclude_ips)))


def pool_size(network):
    """How many IPv4 addresses OVN may hand out on ``network``: its host
    addresses, less the excluded ones and the gateway."""
    hosts = addressing.ip_set(network.subnet, network.exclude_ips)
    return hosts.size - (1 if network.gateway in hosts else 0)


def _held(view, switch):
    """How many addresses of the pool the ports of ``switch`` hold (the
    router port holds the gateway, which is not in the pool)."""
    held = 0
    for row in (switch.ports if switch is not None else []):
        if row.type == "router":
            continue
        _mac, ips = _addresses(row)
        held += 1 if any(ip.version == 4 for ip in ips) or "dynamic" in row.addresses else 0
    return held


def free_addresses(view, network, switch):
    """How many addresses are free on ``network``; cheap while the switch
    has fewer ports than the pool has addresses."""
    size = pool_size(network)
    if switch is None or len(switch.ports) < size:
        return size
    return size - _held(view, switch)


def pool_usage(view, network, switch):
    """``"a /28 of 11 addresses, 11 held"``: for the exhaustion Event."""
    return "%s holds %d addresses, %d held" % (network.subnet, pool_size(network), _held(view, switch))


def plan_stale(view, pod, requests):
    """Delete the pod ports that an earlier pod of the same name left under
    the names ``pod`` needs (a pod deleted and created again before its
    ports were cleaned up). Run, as its own transaction, before plan_pod."""
    keys = []
    for request in requests:
        row = view.lookup("Logical_Switch_Port", pod.port_name(request.interface))
        if row is not None and not isinstance(row, (list, NewRow)) and is_pod_port(row) \
                and row.external_ids.get(K_UID) != pod.uid:
            keys.append({"name": row.name})
    batch = Batch()
    if keys:
        resource = LogicalSwitchPort()
        batch.add(plan(resource, validate_config(resource, keys, "deleted"), "deleted", view))
    return batch


def plan_release(view, namespace, name, keep=None, addresses=None):
    """Delete the ports of pods named ``namespace/name`` except those of
    UID ``keep``: of a pod that is gone (``keep`` None), or of an earlier
    pod of the same name. ``addresses``, an :class:`AddressIndex`, finds
    them without a scan."""
    if addresses is not None:
        rows = addresses.ports_of(view, namespace, name)
    else:
        rows = [row for row in view.rows("Logical_Switch_Port") if is_pod_port(row)
                and row.external_ids.get(K_NAMESPACE) == namespace and row.external_ids.get(K_POD) == name]
    keys = [{"name": n} for n in sorted(r.name for r in rows if r.external_ids.get(K_UID) != keep)]
    batch = Batch()
    if keys:
        resource = LogicalSwitchPort()
        batch.add(plan(resource, validate_config(resource, keys, "deleted"), "deleted", view))
    return batch


def starved(view, pod, requests):
    """Why ``pod`` cannot be served now, or None: a port of it waits on
    OVN for a dynamic address that northd found no room for (it assigned
    a MAC and no IP, as when two pods raced for the last address)."""
    mine = _own_ports(view, pod, requests)
    for request in requests:
        row = mine.get(request.interface)
        if row is None or request.ip is not None or not row.dynamic_addresses:
            continue
        _mac, ips = _addresses(row)
        if not any(ip.version == 4 for ip in ips):
            network = vn.read_network(view, request.network)
            switch = view.lookup("Logical_Switch", request.network)
            return "%s.name: network %s has no free address (%s)" % (
                request.where, request.network, pool_usage(view, network, switch) if network else "gone")
    return None


def plan_delete(view, uid):
    """Delete exactly the ports whose ``external_ids`` carry ``uid``."""
    resource = LogicalSwitchPort()
    keys = [{"name": row.name} for _i, row in sorted(pod_ports(view, uid).items())]
    batch = Batch()
    if keys:
        batch.add(plan(resource, validate_config(resource, keys, "deleted"), "deleted", view))
    return batch


def matches_requests(entries, requests):
    """Whether an interface list still honours the static values asked for."""
    for entry, request in zip(entries, requests):
        if request.ip is not None and entry["ip_address"].split("/")[0] != str(request.ip):
            return False
        if request.mac is not None and entry["mac_address"] != request.mac:
            return False
    return len(entries) == len(requests)


def interface_list(view, pod, requests):
    """The pod's ``ovnIfaceList`` entries, or None while OVN has not yet
    assigned an address a request waits for."""
    mine = _own_ports(view, pod, requests)
    entries = []
    for request in requests:
        row = mine.get(request.interface)
        network = vn.read_network(view, request.network)
        if row is None or network is None:
            return None
        mac, ips = _addresses(row)
        ipv4 = [ip for ip in ips if ip.version == 4]
        if not mac or not ipv4:
            return None
        entries.append(annotations.interface_entry(
            request, "%s/%d" % (ipv4[0], network.subnet.prefixlen), mac, str(network.gateway),
            network.routes))
    return entries


def pod_annotations(view, pod, requests, entries=None):
    """Everything the watcher writes on the pod, or None while OVN has not
    yet assigned an address: ``ovnIfaceList`` (and its twin) for the OVN
    interfaces, and ``<provider>.kubernetes.io/*`` for each address taken
    for another CNI plugin (ovn4nfv-ipam). ``entries``, the pod's
    :func:`interface_list` when the caller has it already."""
    if entries is None:
        entries = interface_list(view, pod, requests)
    if entries is None:
        return None
    out = annotations.output_annotations([e for e, r in zip(entries, requests) if not r.ipam])
    for entry, request in zip(entries, requests):
        if request.ipam:
            network = vn.read_network(view, request.network)
            out.update(annotations.provider_annotations(request.provider, entry, network.subnet))
    return out
