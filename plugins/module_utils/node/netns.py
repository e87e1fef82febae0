# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running netlink work inside another network namespace."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import os
import threading

try:
    from pyroute2.ethtool import Ethtool
except ImportError:  # pragma: no cover - only the node agent calls tx_offload_off
    Ethtool = None


def in_netns(path, function):
    """Run ``function()`` inside the network namespace at ``path``, in a
    thread of its own (setns changes only the calling thread), and return
    its result."""
    libc = ctypes.CDLL(None, use_errno=True)
    outcome = {}

    def target():
        handle = os.open(path, os.O_RDONLY)
        try:
            if libc.setns(handle, 0x40000000) != 0:
                outcome["error"] = OSError(ctypes.get_errno(), "setns into %s failed" % path)
                return
        finally:
            os.close(handle)
        try:
            outcome["value"] = function()
        except Exception as exc:  # noqa: handed back to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def tx_offload_off(netns, ifname):
    """``ethtool -K <ifname> tx off`` inside ``netns``."""
    def switch_off():
        tool = Ethtool()
        try:
            features = tool.get_features(ifname)
            for name, feature in features.features.items():
                if name.startswith("tx-checksum") and feature.enable:
                    feature.enable = False
            tool.set_features(ifname, features)
        finally:
            tool.close()
    in_netns(netns, switch_off)
