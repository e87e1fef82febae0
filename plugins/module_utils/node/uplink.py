# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host NIC moved onto an OVS bridge: the uplink of a node.

On the userspace (netdev) datapath, Geneve packets leave through a netdev
bridge that owns the node's underlay address (OVS's "userspace tunneling"):
the NIC becomes a port of ``br-phy``, and its addresses and routes move to
the bridge's internal interface, which takes the NIC's MAC. An external NIC
for a node gateway goes onto ``br-ext`` the same way, but gives its addresses
up: the gateway router answers for the external address.

The order matters. If the kernel still sends from the NIC (an address, an
IPv6 link-local address, neighbour discovery) once the NIC is a bridge port,
the bridge sees frames with its own MAC arrive on the NIC port and learns
its own MAC there; the node then cannot reach its peers until that entry
ages out. So the NIC is silenced first (IPv6 off, addresses removed), then
joins the bridge in one OVSDB transaction, and only then do the addresses
appear on the bridge.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import select
import time

from ..common.addressing import parse_ip_interface
from ..common.errors import Ovn4nfvError, ValidationError
from ..common.marks import K_UPLINK
from ..common.naming import interface_name
from ..ovsdb.execution import Batch, execute, reconcile
from ..ovsdb.plan import plan, validate_config
from ..ovsdb.view import View
from ..resources.ovs import Bridge, Port

try:
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError
    HAS_PYROUTE2 = True
    PYROUTE2_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - reported by the module
    NetlinkError = Ovn4nfvError
    HAS_PYROUTE2 = False
    PYROUTE2_IMPORT_ERROR = exc


def netlink():
    """A netlink socket in this network namespace, for the ``with`` block."""
    return IPRoute()


def _sysctl_path(ifname):
    return "/proc/sys/net/ipv6/conf/%s/disable_ipv6" % ifname


def _ipv6_disabled(ifname):
    try:
        with open(_sysctl_path(ifname)) as handle:
            return handle.read().strip() == "1"
    except OSError:
        return True     # no IPv6 on this host


def _set_ipv6_disabled(ifname, disabled):
    path = _sysctl_path(ifname)
    if os.path.exists(path):
        with open(path, "w") as handle:
            handle.write("1" if disabled else "0")


def _address(ipr, command, index, address):
    """Add or delete one ``IP/prefix`` on a link."""
    ip, _sep, prefix = address.partition("/")
    ipr.addr(command, index=index, address=ip, prefixlen=int(prefix))


def _addresses(ipr, index):
    """Global addresses of a link, as sorted ``IP/prefix`` strings."""
    out = []
    for msg in ipr.get_addr(index=index):
        if msg.get("scope", 0) != 0:      # only global scope moves
            continue
        out.append("%s/%d" % (msg.get_attr("IFA_ADDRESS"), msg["prefixlen"]))
    return sorted(out)


def _mac(ipr, index):
    return ipr.get_links(index)[0].get_attr("IFLA_ADDRESS")


def _put_on(ipr, index, ifname, addresses, routes):
    """Add to link ``index`` (``ifname``) those of ``addresses`` it lacks,
    and ``routes``; a refusal names the address or route."""
    present = set(_addresses(ipr, index))
    for address in addresses:
        if address not in present:
            try:
                _address(ipr, "add", index, address)
            except NetlinkError as exc:
                raise Ovn4nfvError("add %s to %s: %s" % (address, ifname, exc))
    for route in routes:
        try:
            ipr.route("replace", dst=route["dst"], gateway=route["gateway"], oif=index)
        except NetlinkError as exc:
            raise Ovn4nfvError("route %s via %s on %s: %s" % (
                route["dst"], route["gateway"], ifname, exc))


def _gateway_routes(ipr, index):
    """Routes through a link with a next hop (the kernel drops them with
    the link's addresses): ``[{dst, gateway}]``."""
    out = []
    for family in (2, 10):
        for msg in ipr.get_routes(family=family, oif=index, table=254):
            gateway = msg.get_attr("RTA_GATEWAY")
            if not gateway:
                continue
            dst = msg.get_attr("RTA_DST")
            default = "0.0.0.0/0" if family == 2 else "::/0"
            out.append({"dst": "%s/%d" % (dst, msg["dst_len"]) if dst else default,
                        "gateway": gateway})
    return sorted(out, key=lambda r: (r["dst"], r["gateway"]))


class Uplink:
    """The wanted uplink: ``interface`` on ``bridge``."""

    def __init__(self, interface, bridge, datapath_type="netdev", move_addresses=True,
                 addresses=(), where="uplink"):
        self.interface = interface_name(interface, where + ".interface")
        self.bridge = interface_name(bridge, where + ".bridge")
        if self.interface == self.bridge:
            raise ValidationError("%s: the interface and the bridge must differ (%s)" % (
                where, self.interface))
        if datapath_type not in ("system", "netdev"):
            raise ValidationError("%s.datapath_type: %r is not system or netdev" % (
                where, datapath_type))
        self.datapath_type = datapath_type
        self.move_addresses = move_addresses
        self.addresses = sorted(set(
            "%s/%d" % (net.ip, net.prefixlen) for _ip, net in
            (parse_ip_interface(a, "%s.addresses[%d]" % (where, i)) for i, a in enumerate(addresses))))


def read_state(ipr, idl, uplink):
    """What the host and OVS hold now, in the module's terms."""
    nic = ipr.link_lookup(ifname=uplink.interface)
    if not nic:
        raise ValidationError("interface: %s does not exist on this host" % uplink.interface)
    nic = nic[0]
    mac = _mac(ipr, nic)
    bridge_link = ipr.link_lookup(ifname=uplink.bridge)
    in_bridge = any(p.name == uplink.interface for row in idl.tables["Bridge"].rows.values()
                    if row.name == uplink.bridge for p in row.ports)
    return {
        "interface": uplink.interface, "bridge": uplink.bridge, "mac": mac,
        "interface_addresses": _addresses(ipr, nic),
        "interface_ipv6": not _ipv6_disabled(uplink.interface),
        "bridge_addresses": _addresses(ipr, bridge_link[0]) if bridge_link else [],
        "in_bridge": in_bridge,
        "routes": _gateway_routes(ipr, nic),
        "bridge_routes": _gateway_routes(ipr, bridge_link[0]) if bridge_link else [],
    }


def summary(state):
    """The part of the state a reviewer reads in the diff."""
    keys = ("interface", "bridge", "in_bridge", "interface_addresses", "interface_ipv6",
            "bridge_addresses")
    return dict((k, state[k]) for k in keys)


def plan_ovs(view, uplink, mac):
    """The OVSDB part: the bridge (with the NIC's MAC) and the NIC's port."""
    bridge = {"name": uplink.bridge, "datapath_type": uplink.datapath_type,
              "other_config": {"hwaddr": mac}}
    port = {"name": uplink.interface, "bridge": uplink.bridge,
            "external_ids": {K_UPLINK: "true"}}
    batch = Batch()
    batch.add(plan(Bridge(), validate_config(Bridge(), [bridge], "merged"), "merged", view))
    batch.add(plan(Port(), validate_config(Port(), [port], "merged"), "merged", view))
    return batch


def wait_link(ipr, ifname, timeout, mac=None):
    """Wait for ``ifname`` to appear and, when ``mac`` is given, to carry
    that MAC, woken by netlink link events; return its index.

    On the userspace datapath a bridge's interface is a tap, and
    ovs-vswitchd brings a tap *down* to set its MAC, then up again. A link
    that goes down loses every route through it, and a route added while it
    is down fails with ENETUNREACH. So nothing is put on the bridge until
    its MAC is the one ``other_config:hwaddr`` asks for.

    The events come on a socket of their own: pyroute2 0.9 binds a socket
    on its first request and cannot bind it again."""
    deadline = time.monotonic() + timeout
    with netlink() as events:
        events.bind()
        while True:
            found = ipr.link_lookup(ifname=ifname)
            if found and (mac is None or _mac(ipr, found[0]) == mac):
                return found[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if found:
                    raise Ovn4nfvError("%s did not take the MAC %s within %ss; see ovs-vswitchd's log" % (
                        ifname, mac, timeout))
                raise Ovn4nfvError("%s did not appear within %ss; is ovs-vswitchd running?" % (
                    ifname, timeout))
            ready, _w, _x = select.select([events.fileno()], [], [], min(remaining, 1.0))
            if ready:
                events.get()        # drain; the lookup above decides


def apply_uplink(ipr, database, uplink, check_mode, timeout):
    """Bring the host to the wanted uplink; return ``(changed, before,
    after, operations)``."""
    before = database.read(lambda idl: read_state(ipr, idl, uplink))
    moving = before["interface_addresses"] if uplink.move_addresses else []
    routes = before["routes"] if uplink.move_addresses else []
    # The NIC's addresses while it still holds them; ``addresses`` also once
    # it is a port, so that a bridge that lost its address gets it back.
    adding = [a for a in sorted(set(moving) | set(uplink.addresses))
              if a not in before["bridge_addresses"]]
    wanted_bridge_addresses = sorted(set(before["bridge_addresses"]) | set(adding))
    operations = []
    if before["interface_ipv6"]:
        operations.append("disable IPv6 on %s" % uplink.interface)
    for address in before["interface_addresses"]:
        operations.append("remove %s from %s" % (address, uplink.interface))
    batch = database.read(lambda idl: plan_ovs(View(idl), uplink, before["mac"]))
    operations.extend(batch.operations())
    for address in adding:
        operations.append("add %s to %s" % (address, uplink.bridge))
    for route in routes:
        operations.append("route %s via %s on %s" % (route["dst"], route["gateway"], uplink.bridge))
    after = dict(before, interface_addresses=[], interface_ipv6=False, in_bridge=True,
                 bridge_addresses=wanted_bridge_addresses)
    if not operations and _is_down(ipr, uplink.bridge):
        operations.append("set %s up" % uplink.bridge)
    if not operations or check_mode:
        return bool(operations), summary(before), summary(after), operations

    doing = "disable IPv6 on %s" % uplink.interface
    try:
        # 1. silence the NIC, so the bridge never sees its own MAC arrive on it
        _set_ipv6_disabled(uplink.interface, True)
        nic = ipr.link_lookup(ifname=uplink.interface)[0]
        for address in before["interface_addresses"]:
            doing = "remove %s from %s" % (address, uplink.interface)
            _address(ipr, "del", nic, address)
        # 2. the bridge and the port, in one transaction
        doing = "put %s on %s in OVSDB" % (uplink.interface, uplink.bridge)
        execute(database, lambda view: plan_ovs(view, uplink, before["mac"]), write=True)
        # 3. the addresses and routes, on the bridge's own interface, once
        # it has the NIC's MAC (see wait_link)
        doing = "wait for %s" % uplink.bridge
        index = wait_link(ipr, uplink.bridge, timeout, mac=before["mac"])
        doing = "set %s up" % uplink.bridge
        ipr.link("set", index=index, state="up")
        doing = "put the addresses and routes on %s" % uplink.bridge
        _put_on(ipr, index, uplink.bridge, adding, routes)
        doing = "check %s" % uplink.bridge
        final = database.read(lambda idl: read_state(ipr, idl, uplink))
        _check_bridge(final, uplink.bridge, adding, routes)
    except (Ovn4nfvError, NetlinkError, OSError) as exc:
        raise Ovn4nfvError(_undo(ipr, database, uplink, before, adding, "%s: %s" % (doing, exc)))
    return True, summary(before), summary(final), operations


def _undo(ipr, database, uplink, before, adding, failure):
    """After a failed ``apply_uplink``, leave the NIC as it was found; return
    the message that says what failed and what the host holds now."""
    try:
        _give_back(ipr, database, uplink, drop=adding, take_port_off=not before["in_bridge"],
                   addresses=before["interface_addresses"], routes=before["routes"],
                   ipv6=before["interface_ipv6"])
    except (Ovn4nfvError, NetlinkError, OSError) as exc:
        return "%s; giving %s back its addresses failed too (%s): check the host" % (
            failure, uplink.interface, exc)
    if before["in_bridge"]:
        return "%s; the addresses added to %s were taken off again" % (failure, uplink.bridge)
    return "%s; %s was taken off %s and given back its addresses and routes" % (
        failure, uplink.interface, uplink.bridge)


def _give_back(ipr, database, uplink, drop, take_port_off, addresses, routes, ipv6):
    """Take ``drop`` off the bridge and, with ``take_port_off``, the NIC off
    the bridge; then put ``addresses`` and ``routes`` on the NIC, with its
    IPv6 on when ``ipv6``. Each step is skipped when already so."""
    bridge = ipr.link_lookup(ifname=uplink.bridge)
    if bridge:
        present = set(_addresses(ipr, bridge[0]))
        for address in drop:
            if address in present:
                _address(ipr, "del", bridge[0], address)
    if take_port_off:
        reconcile(Port(), [{"name": uplink.interface}], "deleted", database)
    if ipv6:
        _set_ipv6_disabled(uplink.interface, False)
    _put_on(ipr, ipr.link_lookup(ifname=uplink.interface)[0], uplink.interface, addresses, routes)


def _check_bridge(state, bridge, addresses, routes):
    """Fail, naming what is missing, unless the bridge holds every address
    and route just put on it: a link that went down meanwhile drops them
    without a word."""
    missing = ["address %s" % a for a in addresses if a not in state["bridge_addresses"]]
    missing.extend("route %s via %s" % (r["dst"], r["gateway"]) for r in routes
                   if r not in state["bridge_routes"])
    if missing:
        raise Ovn4nfvError("%s lost %s right after they were added; was the link taken down?" % (
            bridge, ", ".join(missing)))


def _is_down(ipr, ifname):
    """Whether ``ifname`` exists and is administratively down."""
    found = ipr.link_lookup(ifname=ifname)
    return bool(found) and not ipr.get_links(found[0])[0]["flags"] & 1     # IFF_UP


def remove_uplink(ipr, database, uplink, check_mode, timeout):
    """Give the NIC back its addresses and routes and take it off the
    bridge (the bridge itself stays); return ``(changed, before, after,
    operations)``."""
    before = database.read(lambda idl: read_state(ipr, idl, uplink))
    operations = []
    if before["in_bridge"]:
        operations.append("remove port %s from %s" % (uplink.interface, uplink.bridge))
    moving = before["bridge_addresses"] if uplink.move_addresses else []
    for address in moving:
        operations.append("move %s from %s to %s" % (address, uplink.bridge, uplink.interface))
    if not before["interface_ipv6"] and os.path.exists(_sysctl_path(uplink.interface)):
        operations.append("enable IPv6 on %s" % uplink.interface)
    after = dict(before, in_bridge=False, bridge_addresses=[] if moving else before["bridge_addresses"],
                 interface_addresses=sorted(set(before["interface_addresses"]) | set(moving)),
                 interface_ipv6=True)
    if not operations or check_mode:
        return bool(operations), summary(before), summary(after), operations
    routes = before["bridge_routes"] if uplink.move_addresses else []
    _give_back(ipr, database, uplink, drop=moving, take_port_off=before["in_bridge"],
               addresses=moving, routes=routes, ipv6=True)
    final = database.read(lambda idl: read_state(ipr, idl, uplink))
    return True, summary(before), summary(final), operations
