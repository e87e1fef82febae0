# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OVN's upgrade rules, as data: which ``ovn-northd`` and ``ovn-controller``
releases may run together (OVN's ``Documentation/intro/install/
ovn-upgrades.rst``; ``docs/docsite/rst/deployment.rst`` says how the roles
follow it).

* A rolling upgrade upgrades every ``ovn-controller`` first, then the
  databases and ``ovn-northd``. Its span is limited to long-term support
  releases: from an LTS (or a release after it) to the next LTS. The first
  LTS was 22.03; they come every two years, in March.
* Outside that span, the fail-safe upgrade pins every ``ovn-controller`` to
  the northd version (``external_ids:ovn-match-northd-version``): a pinned
  controller keeps its flows and processes nothing new until it runs the
  central's release.

So a controller older than northd is wrong unless pinned (and then it is
waiting), and a controller newer than northd is fine within the span and
not covered outside it. No I/O here: the node's audit reads the versions.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

FIRST_LTS = (22, 3)


def release(text):
    """``"23.03.1-20.27.0-70.6"`` or ``"ovn-controller 25.03.0"`` ->
    ``(23, 3)``: OVN's year and month; None when there is none."""
    match = re.search(r"(\d{2})\.(\d{2})(?:\.\d+)?", str(text or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def is_lts(rel):
    return rel >= FIRST_LTS and rel[1] == 3 and (rel[0] - FIRST_LTS[0]) % 2 == 0


def rolling_span(rel):
    """``(from, to)``: the LTS at or before ``rel`` and the one after it;
    a rolling upgrade from ``rel`` may go as far as ``to``."""
    year = rel[0] - (rel[0] - FIRST_LTS[0]) % 2
    start = (year, 3) if (year, 3) <= rel else (year - 2, 3)
    return start, (start[0] + 2, 3)


def skew(northd, controller, pinned):
    """The verdict on ``ovn-northd`` and ``ovn-controller`` versions running
    together: None (OVN's rules allow it), or ``(severity, why)``."""
    north, here = release(northd), release(controller)
    if north is None or here is None or north == here:
        return None
    shown = "%02d.%02d" % here, "%02d.%02d" % north
    if here < north:
        if pinned:
            return ("warning", "ovn-controller %s is pinned to ovn-northd's version (%s): it keeps its flows and "
                               "processes nothing new until it runs %s (a fail-safe upgrade, half done)" % (
                                   shown[0], shown[1], shown[1]))
        return ("error", "ovn-controller %s is older than ovn-northd %s: OVN upgrades ovn-controller first, and "
                         "an older one may not understand the flows northd writes" % shown)
    _start, end = rolling_span(north)
    if here <= end:
        return None
    return ("warning", "ovn-controller %s with ovn-northd %s is outside OVN's rolling upgrade span (from an LTS "
                       "to the next, here up to %02d.%02d); OVN's guide takes the fail-safe order for it" % (
                           shown[0], shown[1], end[0], end[1]))


# What each Debian release ships of OVN and OVS (the distribution's own
# packages, which the roles install): the upgrade plans from these, so that
# check mode can say the whole plan before any source or package changes.
DEBIAN = {
    "bookworm": {"version": 12, "ovn": (23, 3), "ovs": (3, 1)},
    "trixie": {"version": 13, "ovn": (25, 3), "ovs": (3, 5)},
}


def shown(rel):
    """``(23, 3)`` -> ``"23.03"``."""
    return "%02d.%02d" % rel if rel else "?"


def rolling_allows(northd, target):
    """Whether OVN's rolling order covers ``northd`` -> ``target`` (both
    ``(year, month)``): from an LTS, or a release after it, to the next
    LTS at most."""
    return target <= rolling_span(northd)[1]


def ovs_release(text):
    """``"3.1.0-2+deb12u1"`` or ``"ovs-vswitchd (Open vSwitch) 3.5.0"`` ->
    ``(3, 1)``: Open vSwitch's major and minor; None when there is none."""
    match = re.search(r"(?<![\d.])(\d+)\.(\d+)\.\d+", str(text or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def shown_ovs(rel):
    """``(3, 1)`` -> ``"3.1"``."""
    return "%d.%d" % rel if rel else "?"
