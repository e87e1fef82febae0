# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's own addresses on VLANs of a physical network (issue 35).

Nodus gives a node ``eth0.<vid>``, a kernel VLAN device on the NIC. Here the
NIC is a port of its physical network's OVS bridge (:mod:`.uplink`), so a
kernel VLAN device on it would see only what the datapath hands back to the
kernel (on the userspace datapath, everything; on the kernel datapath,
nothing), and these kernels have no 8021q module at all. The node's address
on VLAN <vid> therefore sits on an OVS *internal port* of that bridge with
``tag: <vid>``: the bridge strips the tag of what the NIC receives on that
VLAN and hands it to the port's device, and tags what the device sends.
It reaches the fabric's hosts on that VLAN, and the provider networks' pods
on it (their localnet port is a patch port of the same bridge).

Each port carries :data:`~..common.marks.K_VLAN_INTERFACE` (its VLAN) in its
interface's ``external_ids``: the wanted list of a bridge is exact for the
ports so marked, and a marked port no longer wanted is deleted, its address
with it; a port without the mark is never touched, and a wanted name that
another port (or a kernel link) already has is refused before anything
changes. Open vSwitch makes the device again at every start with the MAC of
``Interface.mac`` (derived from the NIC's MAC and the VLAN: stable across
reboots, distinct per node), but the address is kernel state: the boot unit
of the uplink (:mod:`..daemons.uplinks`) puts it back with :func:`apply`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.addressing import mac_from_name, parse_ip_interface
from ..common.errors import Ovn4nfvError, ValidationError
from ..common.marks import K_VLAN_INTERFACE
from ..common.naming import in_range, interface_name
from ..ovsdb.execution import Batch, execute
from ..ovsdb.plan import plan, validate_config
from ..ovsdb.view import View
from ..resources.ovs import Bridge, Port
from . import uplink as uplinks

KEYS = ("vlan", "address", "name", "mtu")


class VlanInterface:
    """One wanted VLAN interface of ``bridge``."""

    def __init__(self, bridge, vlan, address, name=None, mtu=None, where="vlan_interfaces[0]"):
        self.vlan = in_range(vlan, 1, 4094, where + ".vlan")
        self.name = interface_name("%s.%d" % (bridge, vlan) if name is None else name, where + (
            ".name" if name is not None else ".name (by default <bridge>.<vlan>)"))
        _ip, net = parse_ip_interface(address, where + ".address")
        self.address = "%s/%d" % (net.ip, net.prefixlen)
        self.mtu = None if mtu is None else in_range(mtu, 68, 65535, where + ".mtu")


def parse(uplink, values, where="vlan_interfaces"):
    """The VLAN interfaces ``values`` (dicts of :data:`KEYS`) ask of the
    uplink's bridge; each VLAN and each name once, none named as the bridge
    or its NIC. Every problem is reported at once."""
    problems, wanted = [], []
    for index, value in enumerate(values or []):
        here = "%s[%d]" % (where, index)
        if not isinstance(value, dict) or not set(value) <= set(KEYS) or "vlan" not in value \
                or "address" not in value:
            problems.append("%s: a dict of vlan, address and optionally name and mtu, not %r" % (here, value))
            continue
        try:
            wanted.append(VlanInterface(uplink.bridge, value["vlan"], value["address"], value.get("name"),
                                        value.get("mtu"), here))
        except ValidationError as exc:
            problems.extend(exc.problems)
    for attribute in ("vlan", "name"):
        seen = [getattr(w, attribute) for w in wanted]
        problems.extend("%s: %s %s is asked for twice" % (where, attribute, v)
                        for v in sorted(set(v for v in seen if seen.count(v) > 1)))
    problems.extend("%s: %s is the bridge's or its NIC's name" % (where, w.name) for w in wanted
                    if w.name in (uplink.bridge, uplink.interface))
    if problems:
        raise ValidationError(problems)
    return wanted


def vlan_mac(nic_mac, vlan):
    """The MAC of the node's interface on ``vlan``: the same for the same
    NIC and VLAN (a reboot changes nothing the fabric learned), another on
    another node or VLAN."""
    return mac_from_name("%s/vlan/%d" % (nic_mac, vlan))


def _ours(view, bridge):
    """``{name: VLAN}`` of the product's VLAN ports on ``bridge``."""
    found = view.lookup("Bridge", bridge)
    if found is None or isinstance(found, list) or not hasattr(found, "ports"):
        return {}
    return dict((iface.name, iface.external_ids[K_VLAN_INTERFACE]) for port in found.ports
                for iface in port.interfaces if iface.name == port.name and K_VLAN_INTERFACE in iface.external_ids)


def check(ipr, view, uplink, wanted):
    """Refuse, before anything changes, a wanted name that another OVS port
    or a kernel link already has."""
    ours = _ours(view, uplink.bridge)
    problems = []
    for vlan in wanted:
        if vlan.name in ours:
            continue
        if view.lookup("Port", vlan.name) is not None:
            problems.append("vlan_interfaces: port %s exists in Open vSwitch and is not a VLAN interface of the "
                            "product's; choose another name" % vlan.name)
        elif ipr.link_lookup(ifname=vlan.name):
            problems.append("vlan_interfaces: a link named %s exists on this host; choose another name" % vlan.name)
    if problems:
        raise ValidationError(problems)


def plan_ports(view, uplink, nic_mac, wanted):
    """The ports: each wanted one exactly as declared (``replaced``), each of
    ours no longer wanted deleted. Returns the ports' :class:`Batch`; a
    bridge not made yet (check mode, before the uplink) is planned first, in
    a batch of its own that is not returned."""
    if view.lookup("Bridge", uplink.bridge) is None:
        bridge = {"name": uplink.bridge, "datapath_type": uplink.datapath_type}
        plan(Bridge(), validate_config(Bridge(), [bridge], "merged"), "merged", view)
    resource, batch = Port(), Batch()
    items = [{"name": v.name, "bridge": uplink.bridge, "type": "internal", "tag": v.vlan,
              "mac": vlan_mac(nic_mac, v.vlan), "mtu_request": v.mtu,
              "external_ids": {K_VLAN_INTERFACE: str(v.vlan)}} for v in wanted]
    if items:
        batch.add(plan(resource, validate_config(resource, items, "replaced"), "replaced", view))
    stale = sorted(set(_ours(view, uplink.bridge)) - set(v.name for v in wanted))
    if stale:       # (``deleted`` without items would mean every port the product owns)
        items = [{"name": name, "bridge": uplink.bridge} for name in stale]
        batch.add(plan(resource, validate_config(resource, items, "deleted"), "deleted", view))
    return batch


def _link_state(ipr, name):
    """``(addresses, up)`` of a link, ``([], False)`` when it is not there."""
    found = ipr.link_lookup(ifname=name)
    if not found:
        return [], False
    return uplinks._addresses(ipr, found[0]), bool(ipr.get_links(found[0])[0]["flags"] & 1)   # IFF_UP


def summary(view, ipr, uplink):
    """The product's VLAN interfaces on the bridge, as a reviewer reads them."""
    return [{"name": name, "vlan": int(vlan), "addresses": _link_state(ipr, name)[0]}
            for name, vlan in sorted(_ours(view, uplink.bridge).items())]


def apply(ipr, database, uplink, wanted, check_mode, timeout):
    """Bring the bridge's VLAN interfaces to ``wanted``: the OVS ports in one
    transaction, then each one's address once its device has its MAC (see
    :func:`.uplink.wait_link`). Returns ``(changed, before, after,
    operations)``; ``before`` and ``after`` are lists of :func:`summary`."""
    nic_mac = database.read(lambda idl: uplinks.read_state(ipr, idl, uplink)["mac"])
    database.read(lambda idl: check(ipr, View(idl), uplink, wanted))
    before = database.read(lambda idl: summary(View(idl), ipr, uplink))
    operations = database.read(lambda idl: plan_ports(View(idl), uplink, nic_mac, wanted)).operations()
    for vlan in wanted:
        addresses, up = _link_state(ipr, vlan.name)
        operations.extend("remove %s from %s" % (a, vlan.name) for a in addresses if a != vlan.address)
        if vlan.address not in addresses:
            operations.append("add %s to %s" % (vlan.address, vlan.name))
        if not up:
            operations.append("set %s up" % vlan.name)
    after = [{"name": v.name, "vlan": v.vlan, "addresses": [v.address]} for v in sorted(wanted, key=lambda v: v.name)]
    if not operations or check_mode:
        return bool(operations), before, after if operations else before, operations
    doing = "write the VLAN interfaces of %s in OVSDB" % uplink.bridge
    try:
        execute(database, lambda view: plan_ports(view, uplink, nic_mac, wanted), write=True)
        for vlan in wanted:
            doing = "wait for %s" % vlan.name
            index = uplinks.wait_link(ipr, vlan.name, timeout, mac=vlan_mac(nic_mac, vlan.vlan))
            doing = "put %s on %s" % (vlan.address, vlan.name)
            for address in uplinks._addresses(ipr, index):
                if address != vlan.address:
                    uplinks._address(ipr, "del", index, address)
            ipr.link("set", index=index, state="up")
            uplinks._put_on(ipr, index, vlan.name, [vlan.address], [])
    except (Ovn4nfvError, uplinks.NetlinkError, OSError) as exc:
        raise Ovn4nfvError("%s: %s" % (doing, exc))
    return True, before, database.read(lambda idl: summary(View(idl), ipr, uplink)), operations


def apply_with_uplink(ipr, database, uplink, wanted, check_mode, timeout):
    """:func:`.uplink.apply_uplink`, then, unless ``wanted`` is None, the
    bridge's VLAN interfaces: what ``ovs_uplink`` and the boot unit run.
    A refused VLAN interface stops both before anything changes."""
    if wanted is not None:
        database.read(lambda idl: check(ipr, View(idl), uplink, wanted))
    changed, before, after, operations = uplinks.apply_uplink(ipr, database, uplink, check_mode, timeout)
    if wanted is None:
        return changed, before, after, operations
    more, vlans_before, vlans_after, vlan_operations = apply(ipr, database, uplink, wanted, check_mode, timeout)
    before, after = dict(before, vlan_interfaces=vlans_before), dict(after, vlan_interfaces=vlans_after)
    return changed or more, before, after, operations + vlan_operations
