# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a change to virtual networks would do to the ports on them: a
subnet that no longer holds their addresses, a gateway moved onto one, a
network deleted under them. ``virtual_network`` refuses such a change,
naming the ports, unless ``force`` (:class:`.networks.Networks`)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _stranded(ip, new, old):
    """Whether a port's address would fall outside the network's new subnets
    (an IPv6 one only where the network handed out IPv6 before)."""
    if ip.version == 4:
        return ip not in new.subnet
    if old.subnet6 is None:
        return False
    return new.subnet6 is None or ip not in new.subnet6


def stranded_ports(current, after, declared, deleting):
    """Changes that would strand ports; refused unless ``force``."""
    problems = []
    for name in declared:
        cur = current.get(name)
        if cur is None:
            continue
        new = after[name]
        outside = ["%s (%s)" % (port, ip) for ip, port in sorted(cur.used().items())
                   if _stranded(ip, new, cur.network)]
        if outside:
            problems.append("network %s: the subnet %s would leave ports outside it: %s; "
                            "set force: true to change it anyway" % (name, new.subnet, ", ".join(outside)))
        for gateway, old in ((new.gateway, cur.network.gateway), (new.gateway6, cur.network.gateway6)):
            holder = cur.used().get(gateway) if gateway is not None else None
            if holder and gateway != old:
                problems.append("network %s: the gateway %s is held by port %s; "
                                "set force: true to move it anyway" % (name, gateway, holder))
    for name in deleting:
        ports = [port for port, _a, _i in current[name].ports]
        if ports:
            problems.append("network %s still has ports: %s; delete them first, or set force: true" % (
                name, ", ".join(ports)))
    return problems
