# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Addressing rules: CIDRs, addresses inside subnets, MACs, exclude ranges.

Every function takes the name of the field it checks, so that the error it
raises names both the field and the value.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import random
import re

from .errors import ValidationError

try:
    import netaddr
    HAS_NETADDR = True
    NETADDR_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - exercised by ansible-test
    HAS_NETADDR = False
    NETADDR_IMPORT_ERROR = exc


def _with_prefix(value, field, what):
    """``value`` as an ``IPNetwork``; the prefix length must be written."""
    text = str(value).strip()
    try:
        if "/" not in text:
            raise ValueError("no prefix length")
        return netaddr.IPNetwork(text)
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        raise ValidationError("%s: %r is not a valid %s (%s)" % (field, value, what, exc))


def parse_cidr(value, field, version=None):
    """Return ``value`` as an ``IPNetwork`` in canonical form.

    The value must be a network address with a prefix length
    (``10.0.0.0/24``); host bits set (``10.0.0.5/24``) are refused, since
    an operator who writes them almost always meant something else.
    """
    net = _with_prefix(value, field, "CIDR")
    if version and net.version != version:
        raise ValidationError("%s: %r is not an IPv%d CIDR" % (field, value, version))
    if net.ip != net.network:
        raise ValidationError(
            "%s: %r has host bits set; the network is %s" % (field, value, net.cidr))
    return net.cidr


def ipv6_prefix(value, field):
    """OVN's ``ipv6_prefix`` (``fd00:1::``) from a /64 written either way.

    OVN builds each port's IPv6 address from the prefix and the port's MAC
    (EUI-64), so only a /64 works.
    """
    text = str(value).strip()
    net = parse_cidr(text if "/" in text else text + "/64", field, version=6)
    if net.prefixlen != 64:
        raise ValidationError("%s: %r is a /%d; OVN assigns IPv6 addresses in a /64 only" % (
            field, value, net.prefixlen))
    return str(net.network)


def parse_ip(value, field, version=None):
    """Return ``value`` as an ``IPAddress``; a prefix is not allowed."""
    try:
        ip = netaddr.IPAddress(str(value).strip())
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        raise ValidationError("%s: %r is not a valid IP address (%s)" % (field, value, exc))
    if version and ip.version != version:
        raise ValidationError("%s: %r is not an IPv%d address" % (field, value, version))
    return ip


def parse_endpoint(value, field):
    """``ip:port``, ``[ipv6]:port`` or a bare address, as OVN writes a load
    balancer's VIPs and backends: returns ``(IPAddress, port or None)``."""
    text = str(value).strip()
    port = None
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValidationError("%s: %r is not [IPv6]:port" % (field, value))
        port = rest[1:] if rest else None
        if port is None or host.count(":") < 2:
            raise ValidationError("%s: %r: write an IPv6 address in brackets with a port, "
                                  "or bare without one" % (field, value))
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host = text
    ip = parse_ip(host, field)
    if port is not None:
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValidationError("%s: %r: the port must be 1-65535" % (field, value))
        port = int(port)
    return ip, port


def format_endpoint(ip, port):
    """The canonical text of an endpoint: ``ip:port``, ``[ipv6]:port`` or ``ip``."""
    if port is None:
        return str(ip)
    return ("[%s]:%d" if ip.version == 6 else "%s:%d") % (ip, port)


def parse_ip_prefix(value, field, version=None):
    """``IP`` or ``IP/len`` as ``(IPAddress, len or None)``: the form
    OVN4NFV's definitions and pods wrote. The length must be a plain
    integer in range; whether it is the right one is the caller's to say
    (it must equal the network's)."""
    text = str(value)
    address, slash, length = text.partition("/")
    ip = parse_ip(address, field, version)
    if not slash:
        return ip, None
    longest = 32 if ip.version == 4 else 128
    if not re.match(r"[0-9]{1,3}\Z", length) or int(length) > longest:
        raise ValidationError("%s: %r has a prefix length %r that is not a number from 0 to %d" % (
            field, value, length, longest))
    return ip, int(length)


def require_prefix(length, subnet, field, value):
    """Refuse a prefix length written beside an address unless it is the
    network's own."""
    if length is not None and length != subnet.prefixlen:
        raise ValidationError("%s: %r says /%d, but the network %s is a /%d" % (
            field, value, length, subnet, subnet.prefixlen))


def parse_ip_interface(value, field):
    """Parse ``IP/len`` as used by router port ``networks``.

    Returns ``(IPAddress, IPNetwork)``; unlike :func:`parse_cidr` the host
    bits are the point here.
    """
    net = _with_prefix(value, field, "IP/prefix")
    return net.ip, net


def require_inside(ip, subnet, field, value=None):
    """Refuse ``ip`` unless it lies inside ``subnet``."""
    if ip not in subnet:
        raise ValidationError("%s: %s is outside the subnet %s" % (
            field, value if value is not None else ip, subnet))


def parse_mac(value, field):
    """Return a canonical lower-case ``aa:bb:cc:dd:ee:ff`` unicast MAC."""
    text = str(value).strip()
    try:
        mac = netaddr.EUI(text, version=48)
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        raise ValidationError("%s: %r is not a valid MAC address (%s)" % (field, value, exc))
    if mac.words[0] & 0x01:
        raise ValidationError("%s: %r is a multicast MAC address; a port needs a unicast one" % (
            field, value))
    if int(mac) == 0:
        raise ValidationError("%s: %r is the all-zero MAC address" % (field, value))
    mac.dialect = netaddr.mac_unix_expanded
    return str(mac).lower()


def is_mac(value):
    """True when ``value`` parses as a 48-bit MAC (any kind)."""
    try:
        netaddr.EUI(str(value), version=48)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return False
    return ":" in str(value) or "-" in str(value)


def generate_mac(rng=None):
    """A random locally administered, unicast MAC (first octet ``x2/x6/xA/xE``).

    Not the ``00:00:00`` Xerox prefix OVN4NFV used.
    """
    rng = rng or random.SystemRandom()
    octets = [rng.randint(0, 255) for _unused in range(6)]
    octets[0] = (octets[0] & 0xFC) | 0x02
    return ":".join("%02x" % o for o in octets)


def mac_from_name(name):
    """A locally administered, unicast MAC derived from ``name``: the same
    name always gets the same MAC, so re-runs change nothing."""
    digest = bytearray(hashlib.sha256(name.encode("utf-8")).digest()[:6])
    digest[0] = (digest[0] & 0xFC) | 0x02
    return ":".join("%02x" % o for o in digest)


def mac_from_ip(ip):
    """A locally administered, unicast MAC derived from ``ip``: ``0a:58``
    and the address's last four bytes, as ovn-kubernetes derives a pod's.
    A pod made again on the same address has the same MAC, so its peers'
    neighbour entries for that address stay right."""
    value = int(ip) & 0xFFFFFFFF
    return "0a:58:" + ":".join("%02x" % ((value >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def link_local(mac):
    """The IPv6 link-local address a kernel derives from ``mac`` (EUI-64)."""
    return str(netaddr.EUI(mac).ipv6_link_local())


def eui64(subnet6, mac):
    """The address of ``mac`` in the /64 ``subnet6`` by its modified
    EUI-64, as ovn-northd and SLAAC make it."""
    return netaddr.EUI(mac).ipv6(subnet6.first)


def pool_order(subnet, pool, after=None):
    """The addresses of ``pool`` (an ``IPSet`` inside ``subnet``), from the
    one after ``after`` (an int; the start when None) upwards, wrapping
    round once."""
    first, size = subnet.first, subnet.size
    start = after - first if after is not None else -1
    for step in range(1, size + 1):
        ip = netaddr.IPAddress(first + (start + step) % size, subnet.version)
        if ip in pool:
            yield ip


def host(subnet, index):
    """The ``index``-th host address of ``subnet`` (1 is the first)."""
    return subnet.network + index


def parse_exclude_ips(values, subnet, field):
    """Validate ``exclude_ips`` against ``subnet``.

    ``values`` is a list of single addresses and ``a..b`` ranges (OVN's own
    notation). Returns the list in canonical form, in the given order.
    """
    canonical = []
    for index, item in enumerate(values or []):
        where = "%s[%d]" % (field, index)
        text = str(item).strip()
        if ".." in text:
            low_text, _sep, high_text = text.partition("..")
            low = parse_ip(low_text, where, version=4)
            high = parse_ip(high_text, where, version=4)
            if low > high:
                raise ValidationError(
                    "%s: %r is an inverted range; its start %s is above its end %s" % (
                        where, item, low, high))
            for ip in (low, high):
                if subnet is not None:
                    require_inside(ip, subnet, where, "%r (%s)" % (item, ip))
            canonical.append("%s..%s" % (low, high))
        else:
            ip = parse_ip(text, where, version=4)
            if subnet is not None:
                require_inside(ip, subnet, where, repr(item))
            canonical.append(str(ip))
    return canonical


def exclude_ips_to_ovn(values):
    """Join canonical exclude entries into OVN's space-separated string."""
    return " ".join(values)


def exclude_ips_from_ovn(text):
    """Split OVN's ``other_config:exclude_ips`` string into a list."""
    return [part for part in (text or "").split() if part]


def ip_set(subnet, exclude):
    """An ``IPSet`` of the subnet's host addresses not excluded (the network
    and broadcast addresses are never hosts)."""
    hosts = netaddr.IPSet(subnet)
    if subnet.size > 2:
        hosts.remove(subnet.network)
        hosts.remove(subnet.broadcast)
    for entry in exclude or []:
        low, _sep, high = entry.partition("..")
        hosts.remove(netaddr.IPRange(low, high or low))
    return hosts
