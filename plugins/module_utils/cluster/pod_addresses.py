# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who a pod port belongs to, and which addresses it holds.

A pod's ports carry ``external_ids`` naming its namespace, name, UID and
interface (:class:`Pod` marks them). :class:`AddressIndex` follows the NB's
update stream to say which port holds an IP or MAC, and which ports a pod
name has, without scanning; the pool functions say how many addresses a
network has left; :func:`port_security` is what a port may send as.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import (
    K_CHAIN_FUNCTION, K_CHAIN_HELD, K_INTERFACE, K_LAUNCHERS, K_NAMESPACE, K_POD, K_SECURITY, K_UID, K_VIPS, OWNER_KEY,
    OWNER_VALUE, ROLE, ROLE_POD)
from ..ovsdb.view import cell


class Pod:
    """The identity of a pod."""

    def __init__(self, namespace, name, uid, extra=None):
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.extra = dict(extra or {})      # more marks its ports carry (a VM's: its VMI)

    def __repr__(self):
        return "%s/%s" % (self.namespace, self.name)

    def port_name(self, interface):
        """The seed design's ``<namespace>_<pod>_<interface>``."""
        return "%s_%s_%s" % (self.namespace, self.name, interface)

    def marks(self, interface):
        return dict(self.extra, **{ROLE: ROLE_POD, K_NAMESPACE: self.namespace, K_POD: self.name,
                                   K_UID: self.uid, K_INTERFACE: interface})


def is_pod_port(row):
    # a row the IDL notifies of may lack columns (a delete after a
    # reconnect): it is then not known to be anyone's
    try:
        ids = cell(row, "external_ids") or {}
    except AttributeError:
        return False
    return ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(ROLE) == ROLE_POD


def held_addresses(row):
    """(MAC, [IPAddress]) a port holds, static or assigned."""
    texts = [a for a in cell(row, "addresses") if a not in ("dynamic", "router", "unknown")]
    texts += list(cell(row, "dynamic_addresses") or [])
    mac, ips = None, []
    for text in texts:
        words_mac, words_ips = _parsed(text)
        mac = mac or words_mac
        ips.extend(words_ips)
    return mac, ips


_PARSED = {}


def _parsed(text):
    """(MAC or None, (IPAddress, ...)) of one ``MAC IP...`` text, parsed
    once: every port's texts are read again and again (its updates, each
    pod pass, the port security) and netaddr's parse is the cost."""
    found = _PARSED.get(text)
    if found is None:
        words = text.split()
        mac = words[0].lower() if words and words[0] != "dynamic" and addressing.is_mac(words[0]) else None
        ips = []
        for word in words[1:]:
            try:
                ips.append(addressing.parse_ip(word, "address"))
            except ValidationError:
                continue
        if len(_PARSED) > 200000:
            _PARSED.clear()
        found = _PARSED[text] = (mac, tuple(ips))
    return found


class AddressIndex:
    """Which switch port holds which IP and MAC, kept current from the NB's
    update stream, so that checking a static address is a lookup rather
    than a scan of every port. Subnets of virtual networks never overlap,
    so one map serves every network."""

    def __init__(self):
        self.by_ip, self.by_mac, self.of_row, self.by_pod, self.uid_of = {}, {}, {}, {}, {}
        self.cursors = {}           # subnet -> an address (int) at and below which all are held

    def attach(self, database):
        """Follow ``database`` from now on, starting from what it holds."""
        database.add_listener(self.notify)
        database.read(self._rebuild)
        return self

    def _rebuild(self, idl):
        self.by_ip, self.by_mac, self.of_row, self.by_pod, self.uid_of = {}, {}, {}, {}, {}
        for row in idl.tables["Logical_Switch_Port"].rows.values():
            self._add(row)

    def notify(self, event, row):
        if row._table.name != "Logical_Switch_Port":
            return
        self._remove(row.uuid)
        if event != "delete":
            self._add(row)

    def _add(self, row):
        mac, ips = held_addresses(row)
        pod = None
        if is_pod_port(row):
            ids = cell(row, "external_ids")
            pod = (ids.get(K_NAMESPACE), ids.get(K_POD))
            self.by_pod.setdefault(pod, set()).add(row.uuid)
            self.uid_of[row.uuid] = ids.get(K_UID)
        self.of_row[row.uuid] = (mac, ips, pod)
        if mac:
            self.by_mac[mac] = row.uuid
        for ip in ips:
            self.by_ip[ip] = row.uuid

    def _remove(self, uuid):
        mac, ips, pod = self.of_row.pop(uuid, (None, [], None))
        self.uid_of.pop(uuid, None)
        if pod is not None:
            self.by_pod.get(pod, set()).discard(uuid)
            if not self.by_pod.get(pod, True):
                del self.by_pod[pod]
        if mac and self.by_mac.get(mac) == uuid:
            del self.by_mac[mac]
        for ip in ips:
            if self.by_ip.get(ip) == uuid:
                del self.by_ip[ip]
                for subnet, cursor in self.cursors.items():
                    if ip in subnet and int(ip) <= cursor:
                        self.cursors[subnet] = int(ip) - 1     # freed: the next search starts there

    def holder(self, view, kind, value):
        """The port holding ``value`` (``kind`` ``ip`` or ``mac``), or None."""
        uuid = (self.by_ip if kind == "ip" else self.by_mac).get(value)
        if uuid is None:
            return None
        return view.idl.tables["Logical_Switch_Port"].rows.get(uuid)

    def holds_others(self, namespace, name, keep):
        """Whether a port of a pod named ``namespace/name`` is another UID's
        than ``keep`` (all of them, when ``keep`` is None): what
        ``plan_release`` would delete. Read it under the database's read
        lock, as the update stream changes the index in its own thread."""
        return any(self.uid_of.get(uuid) != keep for uuid in self.by_pod.get((namespace, name), ()))

    def ports_of(self, view, namespace, name):
        """The pod ports of every pod ever named ``namespace/name``."""
        table = view.idl.tables["Logical_Switch_Port"].rows
        return [table[u] for u in self.by_pod.get((namespace, name), ()) if u in table]


def scan_holder(view, kind, value, uid, switch=None):
    """The port holding ``value``, found by scanning (without an index)."""
    rows = switch.ports if switch is not None else view.rows("Logical_Switch_Port")
    for row in rows:
        if cell(row, "external_ids").get(K_UID) == uid:
            continue
        mac, ips = held_addresses(row)
        if (kind == "ip" and value in ips) or (kind == "mac" and mac == value):
            return row
    return None


def pool_size(network):
    """How many IPv4 addresses OVN may hand out on ``network``: its host
    addresses, less the excluded ones and the gateway."""
    return pool(network).size


def _held(view, switch):
    """How many addresses of the pool the ports of ``switch`` hold (the
    router port holds the gateway, which is not in the pool)."""
    held = 0
    for row in (switch.ports if switch is not None else []):
        if row.type == "router":
            continue
        _mac, ips = held_addresses(row)
        held += 1 if any(ip.version == 4 for ip in ips) or "dynamic" in cell(row, "addresses") else 0
    return held


def free_addresses(view, network, switch):
    """How many addresses are free on ``network``; cheap while the switch
    has fewer ports than the pool has addresses."""
    size = pool_size(network)
    if switch is None or view.size(switch, "ports") < size:
        return size
    return size - _held(view, switch)


def pool_usage(view, network, switch):
    """``"a /28 of 11 addresses, 11 held"``: for the exhaustion Event."""
    return "%s holds %d addresses, %d held" % (network.subnet, pool_size(network), _held(view, switch))


def port_security(row, mac_only=None, grant=None):
    """What a pod port may send as: its MAC with its IPs, the virtual IPs
    it was granted (``K_VIPS``) and the IPv6 link-local address the kernel
    derives from that MAC; OVN drops any other source MAC, source IP or
    ARP/ND claim. Looser where it was granted so (``K_SECURITY``: its MAC
    alone, or nothing), and its MAC alone where it is a network function's
    interface in a chain (marked ``K_CHAIN_FUNCTION``, or ``mac_only``),
    which forwards others' traffic. ``grant``, ``(level, vips)``, in place
    of the row's marks: what the watcher is about to grant. None while OVN
    has not assigned the port an address yet."""
    mac, ips = held_addresses(row)
    if not mac or not any(ip.version == 4 for ip in ips):
        return None
    ids = cell(row, "external_ids", None) or {}
    if grant is None:
        grant = (ids.get(K_SECURITY) or "full", [v for v in (ids.get(K_VIPS) or "").split(",") if v])
    if mac_only is None:
        mac_only = bool(ids.get(K_CHAIN_FUNCTION))
    level = "mac" if mac_only and grant[0] == "full" else grant[0]
    return security(mac, ips, level, grant[1])


def security(mac, ips, level="full", vips=()):
    """The port security of a port holding ``mac`` and ``ips`` (and the
    virtual IPs ``vips``) at ``level``: ``full``, ``mac`` (its MAC alone)
    or ``off`` (none)."""
    if level == "off":
        return []
    if level == "mac":
        return [mac]
    return ["%s %s %s" % (mac, " ".join([str(ip) for ip in ips] + list(vips)), _link_local(mac))]


_LINK_LOCAL = {}


def _link_local(mac):
    if mac not in _LINK_LOCAL:
        if len(_LINK_LOCAL) > 100000:
            _LINK_LOCAL.clear()
        _LINK_LOCAL[mac] = addressing.link_local(mac)
    return _LINK_LOCAL[mac]


_POOLS = {}


def pool(network):
    """The addresses of ``network`` a port may get, as an ``IPSet`` (made
    once per subnet, exclusions and gateway): never to be changed."""
    vips = tuple(v["address"] for v in network.virtual_ips)
    key = (str(network.subnet), tuple(network.exclude_ips), str(network.gateway), vips)
    if key not in _POOLS:
        hosts = addressing.ip_set(network.subnet, network.exclude_ips)
        for taken in (str(network.gateway),) + vips:        # its own: never a pod's
            if addressing.parse_ip(taken, "address") in hosts:
                hosts.remove(taken)
        if len(_POOLS) > 256:
            _POOLS.clear()
        _POOLS[key] = hosts
    return _POOLS[key]


def allocate(view, network, switch, index=None, taken=()):
    """The lowest free IPv4 address of ``network`` for a new port, as
    ovn-northd would hand it out, or None when the pool has none: one that
    no port holds, static or assigned by OVN, that no port planned in this
    view's batch takes, and that is not in ``taken`` (the addresses, as
    strings, the pod's other interfaces take). With ``index`` (an :class:`AddressIndex`) it
    is a lookup from where the last search stopped (below it every address
    is held, until a port frees one); without, the switch's ports are
    scanned, once a view.

    The watcher chooses the address rather than asking ovn-northd for a
    dynamic one: the pod is served on its own transaction, without waiting
    for northd's next run."""
    held = index.by_ip if index is not None else view.cached(("held", network.name), lambda: set(
        ip for row in (switch.ports if switch is not None else []) for ip in held_addresses(row)[1]))
    planned = set(word for values in view.planned("Logical_Switch_Port")
                  for text in values.get("addresses") or () for word in text.split()[1:])
    cursors = index.cursors if index is not None else {}
    advancing = True
    for ip in addressing.pool_order(network.subnet, pool(network), cursors.get(network.subnet)):
        if ip in held:
            if advancing:
                cursors[network.subnet] = int(ip)
        elif str(ip) in planned or str(ip) in taken:
            advancing = False
        else:
            return ip
    return None


def binding_verdict(pod, entries, bindings, macs=True, launcher=None):
    """Whether OVN's southbound ``Port_Binding`` rows (``bindings``: dicts
    of ``logical_port``, ``mac``, ``port_security`` and ``external_ids``,
    sets as lists) hold what a pod's interface list says (``entries``, each
    an ``interface``, ``mac_address`` and ``ip_address``): ``[]`` when
    every entry is confirmed, a list of differences when a binding of this
    pod (its UID) with its addresses in place says otherwise, and None
    while some binding is not there yet (absent, of an older pod of the
    same name, or without port security). ``macs=False`` compares the
    IPs alone (an address kept for another CNI plugin). ``launcher``, the
    UID of the pod that asks when ``pod`` is its VM (:mod:`.vms`): each
    binding must name it among the VM's launchers (``K_LAUNCHERS``, which
    only the watcher writes), or it is not there yet."""
    by_name = dict((row.get("logical_port"), row) for row in bindings)
    wrong, waiting = [], False
    for entry in entries:
        row = by_name.get(pod.port_name(entry["interface"]))
        ids = (row or {}).get("external_ids") or {}
        # a port granted no port security (K_SECURITY off) is confirmed by its addresses alone
        if row is None or ids.get(K_UID) != pod.uid or \
                not (as_strings(row.get("port_security")) or ids.get(K_SECURITY) == "off") or \
                (launcher is not None and launcher not in (ids.get(K_LAUNCHERS) or "").split(",")):
            waiting = True
            continue
        nesting = _nesting(pod, entry, row)
        if nesting:
            wrong.append(nesting)
            continue
        sets = binding_entries(row.get("mac"), row.get("port_security"), row.get("external_ids"))
        mac = (entry.get("mac_address") or "").lower()
        ip = (entry.get("ip_address") or "").partition("/")[0]
        if ip in (ids.get(K_VIPS) or "").split(","):
            ip = None       # a virtual IP it may answer for is not its own address
        if not any((mac == words[0].lower() or not macs) and ip in words[1:] for words in (t.split() for t in sets) if words):
            wrong.append("%s has %s %s, but OVN's port %s holds %s" % (
                entry["interface"], entry.get("mac_address"), entry.get("ip_address"), row["logical_port"],
                " / ".join(sets)))
    if wrong:
        return wrong
    return None if waiting else []


def _nesting(pod, entry, row):
    """What differs between a trunk VLAN's entry (``parent``, ``vlan``) and
    the port OVN holds (``parent_port``, ``tag``): the node makes no device
    for a nested port and a veth for any other, so the list must not say
    one is the other. None when they agree."""
    said = (pod.port_name(entry["parent"]), entry.get("vlan")) if entry.get("parent") else (None, None)
    held = (next(iter(_optional(row.get("parent_port"))), None), next(iter(_optional(row.get("tag"))), None))
    if said == held:
        return None
    return "%s is %s, but OVN's port %s is %s" % (
        entry["interface"], "VLAN %s of %s" % (said[1], said[0]) if said[0] else "no trunk's VLAN",
        row["logical_port"], "VLAN %s of %s" % (held[1], held[0]) if held[0] else "no trunk's VLAN")


def _optional(value):
    """An optional column's value, as a plain row gives it (the atom, or
    an empty list), as a list."""
    return list(value) if isinstance(value, list) else [] if value in (None, "") else [value]


def binding_entries(mac, port_security, external_ids):
    """The ``MAC IP...`` texts a southbound ``Port_Binding`` holds for a
    port: its port security, its ``mac`` entries but for ``dynamic``,
    ``router`` and ``unknown`` (the southbound keeps a dynamic port's as
    ``dynamic``), and what a chain function's port gave up
    (``K_CHAIN_HELD``)."""
    entries = as_strings(port_security)
    entries += [t for t in as_strings(mac) if t.split()[:1] not in (["dynamic"], ["router"], ["unknown"])]
    held = (external_ids or {}).get(K_CHAIN_HELD)
    if held:
        entries.append(held)
    return entries


def as_strings(value):
    """A set of strings as OVSDB's wire format gives it (a one-element set
    as its element) as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
