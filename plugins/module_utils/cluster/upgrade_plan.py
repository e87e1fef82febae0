# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling upgrade's plan: from what every node runs (the
``node_upgrade`` module's facts), the order OVN's rules allow
(:mod:`releases`), the nodes still to do, and each one's steps. No I/O:
``upgrade_plan`` calls :func:`plan`, ``playbooks/upgrade.yml`` follows it.

A node is a dict: ``name``; ``central`` and ``chassis`` (its roles);
``debian`` (the codename it runs); ``installed`` ``{"ovs", "ovn"}`` (the
packages' versions); ``running`` ``{"ovs", "ovn_controller", "northd"}``
(the daemons' own versions, None for one that does not run); ``pinned``
(``ovn-match-northd-version``); ``record`` (what the upgrade wrote on it
last, or None).

The orders (OVN's ``Documentation/intro/install/ovn-upgrades.rst``):

* ``rolling``: the chassis that are no central member first, then the
  central members one by one (a member that is also a chassis takes its
  controller before its database and northd). Only within OVN's rolling
  span (an LTS, or a release after it, to the next LTS).
* ``fail-safe``: every chassis still to do is pinned to northd's version
  first; then the central members one by one (a member that is also a
  chassis takes its own controller with it, which then matches northd);
  then the other chassis; the pins are removed at the end.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from . import releases
from ..common.errors import ValidationError

ORDERS = ("rolling", "fail-safe")


class Refused(ValidationError):
    """The plan refuses this upgrade (before anything changed); the message
    says why and what to do."""


def _known(node):
    known = releases.DEBIAN.get(node.get("debian"))
    if known is None:
        raise Refused("%s runs Debian %r, which the plan knows nothing of (it knows %s)" % (
            node["name"], node.get("debian"), ", ".join(sorted(releases.DEBIAN))))
    return known


def behind(node, target):
    """What of ``node`` does not run ``target`` (a DEBIAN entry's codename)
    yet: ``debian``, ``ovs``, ``ovn-controller`` (a chassis), ``northd`` (a
    central member); empty once it all does."""
    want = releases.DEBIAN[target]
    running = node.get("running") or {}
    out = [] if node.get("debian") == target else ["debian"]
    if releases.ovs_release(running.get("ovs")) != want["ovs"]:
        out.append("ovs")
    if node.get("chassis") and releases.release(running.get("ovn_controller")) != want["ovn"]:
        out.append("ovn-controller")
    if node.get("central") and releases.release(running.get("northd")) != want["ovn"]:
        out.append("northd")
    return out


def done(node, target):
    """Whether ``node`` runs everything of ``target`` already, and no
    upgrade of it was left half-way."""
    record = node.get("record") or {}
    return not behind(node, target) and not (record and not record.get("finished"))


def steps_of(node, target, order="fail-safe"):
    """What upgrading ``node`` does, as the plan prints it."""
    want, have = releases.DEBIAN[target], _known(node)
    running = node.get("running") or {}
    out = ["packages %s -> %s" % (node.get("debian"), target) if node.get("debian") != target
           else "packages: at %s already" % target]
    out.append("Open vSwitch %s -> %s, its flows kept (flow-restore-wait)" % (
        releases.shown_ovs(releases.ovs_release(running.get("ovs")) or have["ovs"]),
        releases.shown_ovs(want["ovs"])))
    controller = ["ovn-controller %s -> %s, its flows kept until it has computed new ones "
                  "(ovn-ofctrl-wait-before-clear)" % (
                      releases.shown(releases.release(running.get("ovn_controller")) or have["ovn"]),
                      releases.shown(want["ovn"]))] if node.get("chassis") else []
    central = ["central member (NB, SB, ovn-northd) %s -> %s, the cluster's quorum kept" % (
        releases.shown(releases.release(running.get("northd")) or have["ovn"]),
        releases.shown(want["ovn"]))] if node.get("central") else []
    # rolling: controllers before the central, on a node that is both too
    out += controller + central if order == "rolling" else central + controller
    out.append("the product's daemons restarted on the new release (a watcher hands its leadership over)")
    if node.get("record") and not node["record"].get("finished"):
        out[0] += " (resumed: the last run stopped on this node)"
    return out


def _northd(nodes):
    """The oldest OVN release the central runs (northd's own version where
    it runs, else the installed package's)."""
    found = [releases.release((n.get("running") or {}).get("northd")) or releases.release((n.get("installed") or {}).get("ovn"))
             for n in nodes if n.get("central")]
    found = [r for r in found if r]
    return min(found) if found else None


def plan(nodes, target, order):
    """``{"order", "span", "nodes" (to upgrade, in order), "pin" (chassis
    to pin first), "unpin" (chassis to unpin at the end), "lines"}``, or
    :class:`Refused`."""
    if order not in ORDERS:
        raise Refused("upgrade_order must be one of %s, not %r" % (", ".join(ORDERS), order))
    want = releases.DEBIAN.get(target)
    if want is None:
        raise Refused("the target %r is no Debian release the plan knows (it knows %s)" % (
            target, ", ".join(sorted(releases.DEBIAN))))
    unnamed = [str(index) for index, n in enumerate(nodes) if not isinstance(n, dict) or not n.get("name")]
    if unnamed:
        raise Refused("nodes[%s]: each node needs its name, as node_upgrade gathered it" % ", ".join(unnamed))
    if not any(n.get("central") for n in nodes):
        raise Refused("no node of the inventory is a central member (group ovn_central): the plan needs northd's")
    for node in nodes:
        have = _known(node)
        if have["version"] > want["version"]:
            raise Refused("%s runs Debian %d (%s) and the target is Debian %d (%s): a downgrade, which the "
                          "upgrade refuses (OVN's databases and flows do not go back)" % (
                              node["name"], have["version"], node["debian"], want["version"], target))
        installed = node.get("installed") or {}
        for key, parse, shown, wanted, what in (
                ("ovn", releases.release, releases.shown, want["ovn"], "OVN"),
                ("central", releases.release, releases.shown, want["ovn"], "OVN's central"),
                ("ovs", releases.ovs_release, releases.shown_ovs, want["ovs"], "Open vSwitch")):
            found = parse(installed.get(key))
            if found and found > wanted:
                raise Refused("%s has %s %s installed, newer than %s's %s: a downgrade, which the upgrade "
                              "refuses" % (node["name"], what, shown(found), target, shown(wanted)))
    todo = [n for n in nodes if not done(n, target)]
    northd = _northd(nodes)
    controllers = [releases.release((n.get("running") or {}).get("ovn_controller")) for n in nodes if n.get("chassis")]
    oldest = min([r for r in controllers + [northd] if r] or [want["ovn"]])
    span = "OVN %s -> %s" % (releases.shown(oldest), releases.shown(want["ovn"]))
    if order == "rolling" and todo:
        if not releases.rolling_allows(oldest, want["ovn"]):
            furthest = releases.shown(releases.rolling_span(oldest)[1])
            raise Refused("%s is outside OVN's rolling upgrade span (from %s it goes as far as %s): run it in the "
                          "fail-safe order (-e upgrade_order=fail-safe), which pins every chassis to northd's "
                          "version first" % (span, releases.shown(oldest), furthest))
        late = [n["name"] for n in nodes if n.get("chassis") and northd and releases.release(
            (n.get("running") or {}).get("ovn_controller")) and releases.release(n["running"]["ovn_controller"]) < northd]
        if late:
            raise Refused("the central already runs OVN %s and %s an older ovn-controller: a fail-safe upgrade "
                          "stopped half-way; finish it in that order (-e upgrade_order=fail-safe)" % (
                              releases.shown(northd), ", ".join(late) + (" run" if len(late) > 1 else " runs")))
    central = [n for n in todo if n.get("central")]
    others = [n for n in todo if not n.get("central")]
    ordered = others + central if order == "rolling" else central + others
    pin = [n["name"] for n in todo if n.get("chassis") and order == "fail-safe"
           and releases.release((n.get("running") or {}).get("ovn_controller")) != want["ovn"]]
    unpin = [n["name"] for n in nodes if n.get("chassis") and (n.get("pinned") or n["name"] in pin)]
    lines = ["upgrade to %s (Debian %d), %s, in the %s order: %d of %d nodes to do" % (
        target, want["version"], span, order, len(ordered), len(nodes))]
    if pin:
        lines.append("pin ovn-controller to northd's version on %s" % ", ".join(pin))
    for index, node in enumerate(ordered, 1):
        roles = "+".join(r for r in ("central", "chassis") if node.get(r))
        lines.append("%d. %s (%s): %s" % (index, node["name"], roles, "; ".join(steps_of(node, target, order))))
    if unpin:
        lines.append("unpin ovn-controller on %s" % ", ".join(unpin))
    if not ordered and not unpin:
        lines.append("nothing to do: every node runs %s" % target)
    return {"order": order, "span": span, "nodes": [n["name"] for n in ordered], "pin": pin, "unpin": unpin,
            "lines": lines}


def task(params, _check_mode):
    """The ``upgrade_plan`` module's work: the plan, which changes nothing."""
    return dict(plan(params["nodes"], params["to"], params["order"]), changed=False)
