# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's view of pod ports' port security against what their
networks allow (:mod:`.port_grants`): a port that may send from more than
its own MAC and IPs, its chain's MAC-only and what its network lets its
namespace have (a relaxed level, a virtual IP) is looser than allowed,
whoever made it so (a hand edit, a grant its network has since taken back
while the watcher was down). The repair makes its port security and its
marks the strictest its network allows for what it was granted."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.marks import K_CHAIN_FUNCTION, K_NAMESPACE, NETWORK_KEY
from ..ovsdb.execution import Batch
from ..ovsdb.plan import plan, validate_config
from ..ovsdb.view import cell
from ..resources.nb_switches import LogicalSwitchPort
from . import networks as vn, port_grants
from .pod_addresses import is_pod_port, port_security

LOOSER = "port_security_looser"
CLASSES = (LOOSER,)


def _allowed(network, row):
    """``(level, vips, port security)`` of the strictest grant its network
    allows ``row`` for what its marks say it was granted."""
    level, vips = port_grants.granted(row)
    ceiling = port_grants.allowed_level(network, cell(row, "external_ids").get(K_NAMESPACE))
    # a grant looser than its network now allows is none at all, as the watcher would grant it
    if level not in port_grants.ORDER or port_grants.ORDER.index(level) > port_grants.ORDER.index(ceiling):
        level = "full"
    held = port_grants.allowed_vips(network, cell(row, "external_ids").get(K_NAMESPACE))
    vips = [v for v in vips if v in held]
    mac_only = bool(cell(row, "external_ids").get(K_CHAIN_FUNCTION))
    return level, vips, port_security(row, mac_only=mac_only, grant=(level, vips))


def looser(actual, allowed):
    """Whether port security ``actual`` lets a port send as a MAC or IP
    that ``allowed`` does not."""
    if not allowed:
        return False        # no port security is allowed: nothing is looser
    if not actual:
        return True
    may = {}        # MAC -> the IPs it may send from, or None: any
    for text in allowed:
        words = text.split()
        may[words[0].lower()] = None if len(words) == 1 else set(words[1:])
    for text in actual:
        words = text.split()
        mac = words[0].lower() if words else ""
        if mac not in may:
            return True
        if may[mac] is not None and (len(words) == 1 or not set(words[1:]) <= may[mac]):
            return True
    return False


def _ports(nb, only=None):
    for switch in nb.rows("Logical_Switch"):
        if cell(switch, "external_ids").get(NETWORK_KEY) and only in (None, switch.name):
            network = vn.network_of(switch)
            for row in switch.ports:
                if is_pod_port(row):
                    yield switch, network, row


def audit_port_security(nb, finding, only=None):
    """A finding per pod port (of network ``only`` when given) whose port
    security is looser than allowed."""
    out = []
    for switch, network, row in _ports(nb, only):
        _level, _vips, wanted = _allowed(network, row)
        actual = list(cell(row, "port_security"))
        if wanted is not None and looser(actual, wanted):
            out.append(finding(LOOSER, "error", "nb", [row.name], "port %s of network %s may send as %s; its "
                               "network allows it %s" % (row.name, switch.name, " / ".join(actual) or "anything",
                                                         " / ".join(wanted) or "anything"),
                               "set port %s's port security to %s" % (row.name, " / ".join(wanted) or "none")))
    return out


def plan_security_repair(nb, findings, deleted=(), only=None):
    """The plan that tightens the ports the findings name, but for those
    the same repair deletes (``deleted``: a gone pod's); ``only``, the
    network they are all on when it is one."""
    named = set(o for f in findings if f["class"] == LOOSER and f["repair"] for o in f["objects"]) - set(deleted)
    items = []
    for switch, network, row in _ports(nb, only) if named else ():
        if row.name in named:
            level, vips, wanted = _allowed(network, row)
            if wanted is not None:
                items.append({"name": row.name, "switch": switch.name, "port_security": wanted,
                              "external_ids": port_grants.marks(level, vips)})
    batch = Batch()
    if items:
        resource = LogicalSwitchPort()
        batch.add(plan(resource, validate_config(resource, items, "merged"), "merged", nb))
    return batch


def plan_tighten(nb, network):
    """The plan that makes every port of ``network`` no looser than the
    network allows now: the watcher's, when an allowance is taken back
    (every pod's port at once, a VM's too, whatever the pods' own serving
    is doing meanwhile)."""
    def found(kind, severity, layer, objects, message, repair=None):
        return {"class": kind, "objects": sorted(objects), "repair": repair}
    return plan_security_repair(nb, audit_port_security(nb, found, network), only=network)
