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
from ..common.marks import K_INTERFACE, K_LAUNCHERS, K_NAMESPACE, K_POD, K_UID, K_VMI, OWNER_KEY
from ..ovsdb.execution import Batch
from ..ovsdb.operations import NewRow, Op
from ..ovsdb.plan import plan, validate_config
from ..ovsdb.view import cell
from ..resources.nb_switches import LogicalSwitchPort
from . import annotations, dhcp, multi_policies, networks as vn, port_grants, port_qos, remote_mirrors, vms
from .pod_addresses import (
    Pod, allocate, held_addresses, scan_holder,
    free_addresses, is_pod_port, pool, pool_usage, port_security, security as port_security_of)

# Why a request was refused: the Event reasons, gravest first.
INVALID = "InvalidNetworkRequest"
UNKNOWN_NETWORK = "UnknownNetwork"
CONFLICT = "AddressConflict"
EXHAUSTED = "AddressPoolExhausted"
REASONS = (INVALID, UNKNOWN_NETWORK, CONFLICT, EXHAUSTED)
TABLES = ("Logical_Switch", "Logical_Switch_Port")


def pod_ports(view, uid):
    """The ports of the pod with ``uid``: ``{interface: row}``."""
    return dict((cell(row, "external_ids").get(K_INTERFACE), row) for row in view.rows("Logical_Switch_Port")
                if is_pod_port(row) and cell(row, "external_ids").get(K_UID) == uid)


def owned_pods(view):
    """``{uid: Pod}`` of every pod that has ports the product owns."""
    out = {}
    for row in view.rows("Logical_Switch_Port"):
        if is_pod_port(row):
            ids = cell(row, "external_ids")
            out[ids[K_UID]] = Pod(ids.get(K_NAMESPACE), ids.get(K_POD), ids[K_UID])
    return out


def _network(view, name):
    """The network ``name`` as :func:`.networks.read_network` reads it,
    once a view: a round of pods plans many ports on few networks."""
    return view.cached(("network", name), lambda: vn.read_network(view, name))


def _holder(row):
    ids = cell(row, "external_ids")
    if vms.vm_of(ids.get(K_POD)):
        return "VM %s/%s (port %s)" % (ids.get(K_NAMESPACE), vms.vm_of(ids.get(K_POD)), row.name)
    if ids.get(K_POD):
        return "pod %s/%s (port %s)" % (ids.get(K_NAMESPACE), ids.get(K_POD), row.name)
    return "port %s" % row.name


def _own_ports(view, pod, requests):
    """``{interface: row}`` of the pod's ports for ``requests``, by name."""
    out = {}
    for request in requests:
        row = view.lookup("Logical_Switch_Port", pod.port_name(request.interface))
        if row is not None and not isinstance(row, (list, NewRow)) and \
                cell(row, "external_ids").get(K_UID) == pod.uid:
            out[request.interface] = row
    return out


def plan_pod(view, pod, requests, addresses=None, labels=None, replaced=None):
    """Plan the ports of ``pod`` for ``requests`` (InterfaceRequest list):
    create the missing ones and leave the right ones. (The ports of
    interfaces a running pod no longer asks for, or asks for anew, go
    before, in a transaction of their own: :mod:`.pod_changes`.) With
    ``replaced``, the interfaces whose ports are to go first, it only
    checks: it raises what would be refused once they went, and plans
    nothing (a refused change drops nothing).

    Every request is checked against its network first; a static IP or MAC
    that another pod holds is refused, naming the holder. A request without
    an IP gets the network's lowest free address (:func:`allocate`, and on
    a dual-stack network the IPv6 address ovn-northd would give its MAC); a
    request without a MAC gets one derived from its IP (:func:`_mac_for`);
    and every new port carries its port security from the start.
    ``addresses``, an :class:`AddressIndex`, makes the checks lookups
    instead of scans. With the pod's ``labels``, a new port joins the
    port groups of the policies that select it in the same transaction
    (:func:`~.multi_policies.groups_for`).

    The checks see the NB as the view holds it, the previous transaction of
    the watcher's committer included (the server sends a transaction's
    updates before its reply), and the addresses the view's batch plans.
    Nothing is verified at commit against the switch's whole port set: that
    costs a copy of every port's UUID a transaction, and grew with the
    network. A port with the same address that another writer adds in the
    same instant is what ``network_audit`` reports as a duplicate.
    """
    def holder(kind, value, switch=None):
        if addresses is not None:
            row = addresses.holder(view, kind, value)
            return row if row is not None and cell(row, "external_ids").get(K_UID) != pod.uid else None
        return scan_holder(view, kind, value, pod.uid, switch)

    problems, items, wanted = [], [], {}
    overrides = {}      # port name: what its pod asks of its DHCP beyond its network's
    # What this pod's own interfaces take, so that no two of them share an
    # address: the static ones first (a dynamic choice must not take an
    # address a later interface asks for), then each one chosen or kept.
    taken_ips, taken_macs = set(), set()
    for kind, values in (("ip_address", [r for r in requests if r.ip is not None]),
                         ("mac_address", [r for r in requests if r.mac is not None])):
        first = {}
        for request in values:
            value = str(request.ip if kind == "ip_address" else request.mac)
            if value in first:
                problems.append((INVALID, "%s.%s: %s is asked for by %s too; each interface needs its own" % (
                    request.where, kind, value, first[value])))
            first.setdefault(value, request.where)
        (taken_ips if kind == "ip_address" else taken_macs).update(first)
    # a route's next hop is never the pod's own address
    taken_ips.update(route["gw"] for r in requests for route in r.routes if route.get("gw"))
    for request in requests:
        network = _network(view, request.network)
        if network is None:
            problems.append((UNKNOWN_NETWORK, "%s.name: network %r does not exist" % (
                request.where, request.network)))
            continue
        name = pod.port_name(request.interface)
        existing = None if request.interface in (replaced or ()) else view.lookup("Logical_Switch_Port", name)
        if existing is not None and not isinstance(existing, (list, NewRow)) and \
                cell(existing, "external_ids").get(K_UID) != pod.uid:
            problems.append((CONFLICT, "%s: port %s already exists for %s; it is released first" % (
                request.where, name, _holder(existing))))
            continue
        switch = view.lookup("Logical_Switch", network.name)
        refused = _trunk_refusal(view, pod, request, network, requests)
        if refused:
            problems.append((INVALID, refused))
            continue
        if request.dhcp and network.dhcp is None:
            problems.append((INVALID, "%s.dhcp: network %s serves no DHCP (virtual_network's dhcp option)" % (
                request.where, network.name)))
            continue
        v6 = [f for route, f in zip(request.routes, request.route_fields) if ":" in route["dst"]] if request.dhcp else []
        if v6:
            problems.append((INVALID, "%s.dst: DHCPv4 carries IPv4 routes only; an interface configured by DHCP "
                                      "takes its IPv6 routes from the router advertisements" % v6[0]))
            continue
        try:
            _check_routes(request, network)
        except ValidationError as exc:
            problems.extend((INVALID, p) for p in exc.problems)
            continue
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
        if request.mac is not None:
            port = holder("mac", request.mac)
            if port is not None:
                problems.append((CONFLICT, "%s.mac_address: %s is already held by %s" % (
                    request.where, request.mac, _holder(port))))
                continue
        mine = existing if existing is not None and not isinstance(existing, (list, NewRow)) else None
        if mine is not None and cell(mine, "addresses") and request.mac in (None, held_addresses(mine)[0]) and \
                (request.ip is None or request.ip in held_addresses(mine)[1]):
            # the pod's port holds its address (chosen here, or by ovn-northd
            # for a port of an earlier version; its static one): it keeps it, and its MAC
            texts, security = list(cell(mine, "addresses")), list(cell(mine, "port_security"))
            held_mac, held_ips = held_addresses(mine)
            if held_mac:
                taken_macs.add(str(held_mac))
            taken_ips.update(str(ip) for ip in held_ips)
        else:
            ip = request.ip
            if ip is None:
                wanted[network.name] = wanted.get(network.name, 0) + 1
                if free_addresses(view, network, switch) >= wanted[network.name]:
                    ip = allocate(view, network, switch, addresses, taken_ips)
                if ip is None:
                    problems.append((EXHAUSTED, "%s.name: network %s has no free address (%s)" % (
                        request.where, network.name, pool_usage(view, network, switch))))
                    continue
                taken_ips.add(str(ip))
            mac = request.mac or _mac_for(view, pod, request, ip, holder, taken_macs)
            taken_macs.add(str(mac))
            ips = [ip]
            if request.ip is None and network.subnet6 is not None:
                ips.append(addressing.eui64(network.subnet6, mac))
            texts, security = ["%s %s" % (mac, " ".join(str(i) for i in ips))], None
        # what the network lets it have beyond full port security (the refusals: the watcher's Events),
        # in the same transaction as its marks; a kept port's as its grant makes it now
        level, vips, _refused = port_grants.grant(network, pod.namespace, request)
        if security is None:
            security = port_security_of(mac, ips, level, vips)
        elif mine is not None and port_grants.granted(mine) != (level, vips):
            security = port_security(mine, grant=(level, vips)) or security
        # what others keep on it stays: its VM's launchers (vms.binding), a chain's marks (chains)
        ids = dict((k, v) for k, v in cell(mine, "external_ids").items() if k != OWNER_KEY) if mine is not None else {}
        ids.update(pod.marks(request.interface), **port_grants.marks(level, vips))
        item = {"name": name, "switch": network.name, "addresses": texts,
                "external_ids": dict((k, v) for k, v in ids.items() if v is not None)}
        if request.parent:
            # a trunk's VLAN: OVN's nested port, its frames on the trunk's port with this tag
            item.update(parent_name=pod.port_name(request.parent), tag=request.vlan)
        if mine is not None:
            # where its VM's launchers bind it stays (vms.binding)
            item["options"] = dict(cell(mine, "options"))
        override = dhcp.override_of(request)
        if override is not None:
            overrides[name] = override
        if security is not None:
            item["port_security"] = security
        items.append(item)
    if problems:
        # the Event's reason: the gravest kind among the problems
        reason = min((p[0] for p in problems), key=REASONS.index)
        raise ValidationError([p[1] for p in problems], reason=reason)
    if replaced is not None:
        return None
    batch = _port_batch(view, items, "replaced")
    if batch.changed:
        _new_ports(view, batch, None if labels is None else
                   lambda switch: multi_policies.groups_for(view, pod.namespace, labels, switch), overrides)
    return batch


def _trunk_refusal(view, pod, request, network, requests):
    """Why a trunk's VLAN cannot be served, or None: a VM's (a live
    migration announces the NIC's own MAC, untagged, so its VLANs would
    stay where they were), or one whose network's MTU outgrows its trunk's
    (a VLAN device cannot be larger than its parent, and the trunk's veth
    carries the frames)."""
    if not request.parent:
        return None
    if vms.vm_of(pod.name):
        return "%s: a VM's interface is no trunk; its guest's VLANs are not offered" % request.where
    parent = next((r for r in requests if r.interface == request.parent), None)
    trunk = _network(view, parent.network) if parent is not None else None
    if trunk is not None and trunk.mtu and network.mtu and int(network.mtu) > int(trunk.mtu):
        return "%s.name: network %s's MTU %s is more than its trunk's network %s's, %s" % (
            request.where, network.name, network.mtu, trunk.name, trunk.mtu)
    return None


def _mac_for(view, pod, request, ip, holder, taken=()):
    """The MAC of a port that asked for none: derived from its address, so
    that a pod made again on the same address keeps it; from the pod's
    UID and interface should another port hold that one already, a port
    this batch plans, or another interface of the pod (``taken``)."""
    mac = addressing.mac_from_ip(ip)
    planned = set(text.split()[0] for values in view.planned("Logical_Switch_Port")
                  for text in values.get("addresses") or () if text.split())
    if holder("mac", mac) is not None or mac in planned or str(mac) in taken:
        return addressing.mac_from_name(pod.uid + "/" + request.interface)
    return mac


def _new_ports(view, batch, joins=None, overrides=None):
    """What a port made anew carries in the transaction that makes it:
    the remote taps whose source it is (the tap follows the pod), its
    network's DHCP (:func:`.dhcp.port_ops`; a row of its own where its pod
    asked more of it, ``overrides``), the port groups ``joins(switch)`` names (a policy's, isolating it from its first
    packet), and ``up=false``. ovn-northd sets ``up`` on every port that lacks it, false
    until a chassis binds it: for new ports, an NB transaction of its own
    after each of ours, which every client takes in as an update and which
    ovn-northd 23.03 takes as a change to compute all over again. Born
    down, as ovn-northd would say, a port gives it nothing to write
    (measured under a burst of 500 pods: a fifth less CPU for ovn-northd
    and for the watcher)."""
    for change in batch.plans[0].changes:
        for op in list(change.ops):
            if op.op == "insert" and op.table == "Logical_Switch_Port":
                change.ops.append(Op("update", "Logical_Switch_Port", op.row, "up", False))
                switch = next((o.row for o in change.ops if o.op == "mutate" and o.table == "Logical_Switch"
                               and op.row in o.value), None)
                network = _network(view, cell(switch, "name")) if switch is not None else None
                if network is not None and network.dhcp is not None:
                    # OVN answers its DHCP from the first request on
                    want = dhcp.targets(view, network)
                    override = (overrides or {}).get(op.value.get("name"))
                    if override is not None:
                        own_ops, want[4] = dhcp.port_row_ops(view, network, op.value["name"], override)
                        change.ops[:0] = own_ops        # inserted before the port points at it
                    change.ops.extend(dhcp.port_ops(op.row, want))
                if joins is not None:
                    for group in joins(cell(switch, "name")) if switch is not None else ():
                        change.ops.append(Op("mutate", "Port_Group", group, "ports", [op.row], "insert"))
                mirrors = remote_mirrors.mirrors_for(view, op.value.get("name"))
                if mirrors:
                    change.ops.append(Op("update", "Logical_Switch_Port", op.row, "mirror_rules", mirrors))


def _port_batch(view, items, state):
    """The :class:`Batch` that brings the switch ports ``items`` to
    ``state``: empty when there are none."""
    batch = Batch()
    if items:
        resource = LogicalSwitchPort()
        batch.add(plan(resource, validate_config(resource, items, state), state, view))
    return batch


def _check_routes(request, network):
    """Whether the node can install each of the interface's routes: a next
    hop of the route's family, a host address on the interface's network
    (else "Network is unreachable"), and not the interface's own address."""
    for route, field in zip(request.routes, request.route_fields):
        dst = addressing.parse_cidr(route["dst"], field + ".dst")
        if not route.get("gw"):
            if dst.version != 4:
                raise ValidationError("%s.gw: a route to %s needs an IPv6 next hop (the network's gateway %s is "
                                      "IPv4)" % (field, dst, network.gateway))
            continue
        gw = addressing.parse_ip(route["gw"], field + ".gw")
        if gw.version != dst.version:
            raise ValidationError("%s.gw: %s cannot be the next hop of %s: not the same family" % (field, gw, dst))
        subnet = network.subnet if gw.version == 4 else network.subnet6
        if subnet is None or gw not in subnet:
            raise ValidationError("%s.gw: %s is not on network %s (%s): the interface could not reach it" % (
                field, gw, network.name, subnet or "it has no IPv6 subnet"))
        if gw == subnet.network or (gw.version == 4 and gw == subnet.broadcast):
            raise ValidationError("%s.gw: %s is not a host address of network %s (%s)" % (
                field, gw, network.name, subnet))
        if request.ip is not None and gw == request.ip:
            raise ValidationError("%s.gw: %s is the interface's own address" % (field, gw))


def _check_static_ip(request, network):
    """Whether a static address fits its network: inside the subnet, with
    the network's own prefix length if one was written, not its gateway,
    network or broadcast address, and not excluded."""
    field = request.where + ".ip_address"
    if request.ip.version != 4:
        # An interface's IPv6 address on a dual-stack network is derived
        # from its MAC (the network's /64 and the MAC's EUI-64), as OVN
        # derives it: a static one would leave the port without the IPv4
        # address every interface is told, and the pod waiting for it.
        raise ValidationError("%s: %s is an IPv6 address; ip_address is the interface's IPv4 address, and its "
                              "IPv6 address on a dual-stack network follows from its MAC: give a mac_address "
                              "instead" % (field, request.ip))
    subnet = network.subnet
    if subnet is None or request.ip not in subnet:
        raise ValidationError("%s: %s is outside network %s (%s)" % (field, request.ip, network.name, subnet))
    addressing.require_prefix(request.prefix, subnet, field, "%s/%s" % (request.ip, request.prefix))
    if request.ip == network.gateway:
        raise ValidationError("%s: %s is network %s's gateway" % (field, request.ip, network.name))
    if request.ip == subnet.network:
        raise ValidationError("%s: %s is network %s's network address" % (field, request.ip, network.name))
    if request.ip == subnet.broadcast:
        raise ValidationError("%s: %s is network %s's broadcast address" % (field, request.ip, network.name))
    if str(request.ip) in [v["address"] for v in network.virtual_ips]:
        raise ValidationError("%s: %s is a virtual IP of network %s: ask for it in virtual_ips" % (
            field, request.ip, network.name))
    if request.ip not in pool(network):
        raise ValidationError("%s: %s is in network %s's exclude_ips (%s)" % (
            field, request.ip, network.name, " ".join(network.exclude_ips)))


def plan_port_security(view, pod, requests):
    """Set port security (and a trunk VLAN's nesting) on each of ``pod``'s
    ports that has its addresses (static ones at once; dynamic ones once
    OVN assigned them), before
    the pod is told its interfaces. Address-only ports kept for another
    CNI plugin (ovn4nfv-ipam) carry no traffic through OVN, but get it too:
    it is how a node reads from the southbound which address is the pod's.
    Each port's QoS row follows its request too (:func:`.port_qos.plan_qos`),
    so that a pod whose ``qos`` changed is not served until it does."""
    mine = _own_ports(view, pod, requests)
    items = []
    for request in requests:
        row = mine.get(request.interface)
        if row is None:
            continue
        item = {"name": row.name, "switch": request.network}
        level, vips, _refused = port_grants.grant(_network(view, request.network), pod.namespace, request)
        if port_grants.granted(row) != (level, vips):
            item["external_ids"] = port_grants.marks(level, vips)
        wanted = port_security(row, grant=(level, vips))
        if wanted is not None and sorted(cell(row, "port_security")) != sorted(wanted):
            item["port_security"] = wanted
        # a trunk's VLAN keeps its nesting: the tag is what keeps the VLANs apart
        nesting = (pod.port_name(request.parent), request.vlan) if request.parent else None
        if nesting and (list(cell(row, "parent_name")), list(cell(row, "tag"))) != ([nesting[0]], [nesting[1]]):
            item.update(parent_name=nesting[0], tag=nesting[1])
        if len(item) > 2:
            items.append(item)
    batch = _port_batch(view, items, "merged")
    qos = port_qos.plan_qos(view, pod, requests, mine)
    if qos.changed:
        batch.add(qos)
    return batch


def plan_binding(view, rows, options, launchers):
    """Set ``options`` (a key whose value is None is removed; None: leave
    them) on the ports ``rows`` of a VM, and record ``launchers``, the UIDs
    of the pods a node agent may attach to them: where the VM's ports are
    bound (:func:`.vms.binding`), and by whom."""
    listed = ",".join(sorted(launchers))
    switches = multi_policies.port_switches(view)
    items = []
    for row in rows:
        if row.name not in switches:
            continue
        item = {"name": row.name, "switch": switches[row.name]}
        if options and any(cell(row, "options").get(key) != value for key, value in options.items()):
            item["options"] = dict(options)
        if cell(row, "external_ids").get(K_LAUNCHERS) != listed:
            item["external_ids"] = {K_LAUNCHERS: listed}
        if len(item) > 2:
            items.append(item)
    return _port_batch(view, items, "merged")


def secured(view, pod, requests):
    """Whether every port of ``pod`` that should have port security has
    the right one, and every trunk VLAN's port its nesting."""
    return not plan_port_security(view, pod, requests).changed


def plan_release(view, namespace, name, keep=None, addresses=None):
    """Delete the ports of pods named ``namespace/name`` except those of
    UID ``keep``: of a pod that is gone (``keep`` None), or of an earlier
    pod of the same name. ``addresses``, an :class:`AddressIndex`, finds
    them without a scan."""
    if addresses is not None:
        rows = addresses.ports_of(view, namespace, name)
    else:
        rows = [row for row in view.rows("Logical_Switch_Port") if is_pod_port(row)
                and cell(row, "external_ids").get(K_NAMESPACE) == namespace and cell(row, "external_ids").get(K_POD) == name]
    return plan_drop_rows(view, [row for row in rows if cell(row, "external_ids").get(K_UID) != keep])


def plan_drop(view, owner, interfaces, addresses):
    """Delete ``owner``'s ports of interfaces other than ``interfaces`` that
    an earlier VMI's launcher made (``K_VMI``): a VM's that it no longer
    has since it restarted with fewer. A running guest's stay (a migrating
    VM has two launchers); a pod's go as its request changes
    (:mod:`.pod_changes`)."""
    vmi = owner.extra.get(K_VMI)
    return plan_drop_rows(view, [row for row in addresses.ports_of(view, owner.namespace, owner.name)
                                 if vmi and cell(row, "external_ids").get(K_UID) == owner.uid
                                 and cell(row, "external_ids").get(K_INTERFACE) not in interfaces
                                 and cell(row, "external_ids").get(K_VMI) != vmi])


def plan_drop_rows(view, rows):
    """Delete the ports ``rows``, with what they hold elsewhere
    (:func:`_forget`)."""
    rows = sorted(rows, key=lambda row: row.name)
    return _forget(view, _port_batch(view, [{"name": row.name} for row in rows], "deleted"), rows)


def _forget(view, batch, rows):
    """``batch``, which deletes ``rows``, also takes their addresses out of
    the policies' address sets, and deletes the DHCP and QoS rows made for
    them."""
    gone = multi_policies.plan_forget_addresses(view, [str(ip) for row in rows for ip in held_addresses(row)[1]])
    if gone.changed:
        batch.add(gone)
    own = dhcp.plan_forget(view, [row.name for row in rows])
    if own.changed:
        batch.add(own)
    qos = port_qos.plan_forget(view, [row.name for row in rows])
    if qos.changed:
        batch.add(qos)
    return batch


def starved(view, pod, requests):
    """Why ``pod`` cannot be served now, or None: a port of it waits on
    OVN for a dynamic address that northd found no room for (it assigned
    a MAC and no IP, as when two pods raced for the last address)."""
    mine = _own_ports(view, pod, requests)
    for request in requests:
        row = mine.get(request.interface)
        if row is None or request.ip is not None or not cell(row, "dynamic_addresses"):
            continue
        _mac, ips = held_addresses(row)
        if not any(ip.version == 4 for ip in ips):
            network = _network(view, request.network)
            switch = view.lookup("Logical_Switch", request.network)
            return "%s.name: network %s has no free address (%s)" % (
                request.where, request.network, pool_usage(view, network, switch) if network else "gone")
    return None


def claims(plan):
    """What the ports a plan creates hold that no other port may:
    ``("mac", MAC)`` and ``("ip", IP)`` of each static address (for a
    :class:`~..ovsdb.batching.Committer`, which lets one plan of a round
    claim each)."""
    for op in plan.ops:
        if op.op != "insert" or op.table != "Logical_Switch_Port":
            continue
        for address in op.value.get("addresses") or ():
            words = address.split()
            if words and words[0] not in ("dynamic", "router", "unknown"):
                yield ("mac", words[0])
                for word in words[1:]:
                    if word != "dynamic":
                        yield ("ip", word)


def plan_delete(view, uid):
    """Delete exactly the ports whose ``external_ids`` carry ``uid``."""
    return plan_drop_rows(view, pod_ports(view, uid).values())


def matches_requests(entries, requests):
    """Whether an interface list still honours the static values asked for."""
    for entry, request in zip(entries, requests):
        if request.ip is not None and entry["ip_address"].split("/")[0] != str(request.ip):
            return False
        if request.mac is not None and entry["mac_address"] != request.mac:
            return False
    return len(entries) == len(requests)


def surviving_entries(view, pod, requests, entries):
    """The interface list ``entries`` less the interfaces whose network is
    gone (deleted with ``force``) and their ports with it: what a pod
    stranded by it still has. (An interface asked for on an unknown
    network whose port is still there is a refused change: it stays.)"""
    mine = _own_ports(view, pod, requests)
    gone = set(r.interface for r in requests if _network(view, r.network) is None and r.interface not in mine)
    return [e for e in entries if isinstance(e, dict) and e.get("interface") not in gone]


def interface_list(view, pod, requests):
    """The pod's ``ovnIfaceList`` entries, or None while OVN has not yet
    assigned an address a request waits for."""
    mine = _own_ports(view, pod, requests)
    entries = []
    for request in requests:
        row = mine.get(request.interface)
        network = _network(view, request.network)
        if row is None or network is None:
            return None
        mac, ips = held_addresses(row)
        ipv4 = [ip for ip in ips if ip.version == 4]
        if not mac or not ipv4:
            return None
        entries.append(annotations.interface_entry(
            request, "%s/%d" % (ipv4[0], network.subnet.prefixlen), mac, str(network.gateway),
            network.routes, network.mtu))
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
            network = _network(view, request.network)
            out.update(annotations.provider_annotations(request.provider, entry, network.subnet))
    return out
