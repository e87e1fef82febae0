# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a network function may have beyond full port security, and only
where its network's operator allows it (issue 37).

Every pod port holds full port security by default: its MAC and IPs, so
that OVN drops a packet from any other source. A network function asks for
exceptions in its request entry, and each is granted only where the
network (``virtual_network``, kept on its switch) allows it for the pod's
namespace; anything else is refused with a Warning Event and the interface
keeps full port security:

* ``port_security: mac`` (its MAC alone: a virtual router, a firewall that
  forwards others' packets) or ``off`` (none: a bridge), where the
  network's ``relaxed_port_security`` allows that level (``K_RELAXED``);
* ``virtual_ips: [VIP]``, a VRRP address the pod may answer for in turn
  with others, where the network declares it (``virtual_ips``, each an OVN
  ``virtual`` port) for the pod's namespace: the address joins the port's
  security, and the port joins the virtual port's ``virtual-parents``, so
  that OVN binds the address to whichever holder announces it.

Why the operator declares and the pod asks, both: a pod is untrusted input,
so nothing it writes can loosen what OVN enforces; and a relaxation nobody
asked for is not given either (the allowance is a ceiling, not a default).
The grant is kept on the port (``K_SECURITY``, ``K_VIPS``) for what reads
it: the port security itself (:func:`.pod_addresses.port_security`), the
node agent's check against the southbound, the virtual ports' parents
(:func:`plan_parents`) and the audit.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.marks import K_SECURITY, K_VIPS, NETWORK_KEY
from ..ovsdb.plan import plan, validate_config
from ..ovsdb.view import cell
from ..resources.nb_switches import LogicalSwitchPort
from . import networks as vn

SECURITY_REFUSED = "PortSecurityRefused"
VIP_REFUSED = "VirtualIPRefused"
ORDER = ("full", "mac", "off")      # strictest first


def allowed_level(network, namespace):
    """The loosest port security ``network`` lets ``namespace``'s pods
    have: ``full`` where it allows nothing."""
    levels = [network.relaxed.get(n) for n in (namespace, "*")]
    return max([level for level in levels if level in ORDER] + ["full"], key=ORDER.index)


def allowed_vips(network, namespace):
    """The virtual IPs of ``network`` that ``namespace``'s pods may hold."""
    return [v["address"] for v in network.virtual_ips
            if namespace in v.get("namespaces", ()) or "*" in v.get("namespaces", ())]


def grant(network, namespace, request):
    """``(level, vips, refusals)``: what ``request`` (an
    :class:`~.annotations.InterfaceRequest` of a pod in ``namespace``) is
    granted on ``network`` (None: unknown, nothing granted), and why the
    rest is not, as ``(reason, message)``."""
    if network is None:
        return "full", [], []
    refusals, level = [], request.security
    allowed = allowed_level(network, namespace)
    if ORDER.index(level) > ORDER.index(allowed):
        refusals.append((SECURITY_REFUSED, "%s.port_security: %s is not allowed for namespace %s on network %s "
                                           "(it allows %s); the interface keeps full port security" % (
                                               request.where, level, namespace, network.name, allowed)))
        level = "full"
    vips, held = [], allowed_vips(network, namespace)
    for vip in request.vips:
        if vip in held:
            vips.append(vip)
        else:
            refusals.append((VIP_REFUSED, "%s.virtual_ips: %s is not a virtual IP of network %s that namespace %s "
                                          "may hold; the interface does not answer for it" % (
                                              request.where, vip, network.name, namespace)))
    return level, vips, refusals


def marks(level, vips):
    """The grant as the port's ``external_ids`` (None removes a key)."""
    return {K_SECURITY: None if level == "full" else level, K_VIPS: ",".join(vips) or None}


def granted(row):
    """``(level, vips)`` a port's marks say it was granted."""
    ids = cell(row, "external_ids")
    return ids.get(K_SECURITY) or "full", [v for v in (ids.get(K_VIPS) or "").split(",") if v]


def refusals(view, pod, requests):
    """Every ``(reason, message)`` refused to ``pod``'s ``requests``."""
    return [r for request in requests if request.security != "full" or request.vips
            for r in grant(vn.read_network(view, request.network), pod.namespace, request)[2]]


def virtual_ports(view, switch):
    """``{VIP: row}`` of the virtual ports the network of ``switch`` made."""
    return dict((cell(p, "options").get("virtual-ip"), p) for p in switch.ports
                if p.type == "virtual" and cell(p, "external_ids").get(NETWORK_KEY) == switch.name)


def plan_parents(view, name):
    """Make each virtual port of network ``name`` list as its parents
    exactly the ports of its switch granted its address: a pod's port
    granted it joins, one gone or no longer granted leaves."""
    switch = view.lookup("Logical_Switch", name)
    items = []
    if switch is not None and not isinstance(switch, list):
        holders = {}
        for port in switch.ports:
            for vip in granted(port)[1] if port.type == "" else ():
                holders.setdefault(vip, []).append(port.name)
        for vip, row in sorted(virtual_ports(view, switch).items()):
            wanted = ",".join(sorted(holders.get(vip, []))) or None
            if cell(row, "options").get("virtual-parents") != wanted:
                items.append({"name": row.name, "switch": name, "options": {"virtual-parents": wanted}})
    resource = LogicalSwitchPort()
    return plan(resource, validate_config(resource, items, "merged"), "merged", view)
