# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running netlink work inside another network namespace."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import ctypes
import errno
import os
import threading

from .. import cni

try:
    from pyroute2 import IPRoute
    from pyroute2.ethtool import Ethtool
    HAS_NETLINK = True
except ImportError:  # pragma: no cover - only the node agent calls these
    IPRoute = Ethtool = None
    HAS_NETLINK = False


@contextlib.contextmanager
def step(what):
    """One netlink step, named: its failure is a CNI error that says which
    interface, address or route and the cause in words ("interface net0:
    the route to 10.9.0.0/16 via 172.16.1.9: Network is unreachable"), the
    errno kept as detail, never a bare ``(101, 'Network is unreachable')``."""
    try:
        yield
    except cni.CNIError:
        raise
    except Exception as exc:  # noqa: pyroute2's NetlinkError, or an OSError of the kernel's
        code = getattr(exc, "code", None) or getattr(exc, "errno", None)
        code = code if isinstance(code, int) and code > 0 else None
        # pyroute2's NetlinkError carries (code, words); an OSError its strerror
        words = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], str) else getattr(exc, "strerror", None)
        cause = words or (os.strerror(code) if code else str(exc))
        detail = "errno %s (%s)" % (code, errno.errorcode.get(code, "?")) if code else ""
        raise cni.CNIError(cni.IO_FAILURE, "%s: %s" % (what, cause), detail)


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


def netlink(path, function):
    """``function(ipr)`` with a netlink handle (pyroute2's ``IPRoute``) in
    the network namespace at ``path`` (None: the process's own); returns
    its result. One thread makes the handle and does all the work with it:
    setns moves only the calling thread, and pyroute2 0.9 opens a socket
    per thread that uses a handle. pyroute2's ``NetNS`` forks a process
    for each handle instead (measured: 9 ms on 0.7, 9-12 ms on 0.9, against
    about 1 ms here), several times in each CNI ADD."""
    def work():
        ipr = IPRoute()
        try:
            return function(ipr)
        finally:
            ipr.close()
    return work() if path is None else in_netns(path, work)


def tx_off(ifname):
    """``ethtool -K <ifname> tx off`` in the calling thread's namespace."""
    tool = Ethtool()
    try:
        features = tool.get_features(ifname)
        for name, feature in features.features.items():
            if name.startswith("tx-checksum") and feature.enable:
                feature.enable = False
        tool.set_features(ifname, features)
    finally:
        tool.close()


def tx_offload_off(netns, ifname):
    """``ethtool -K <ifname> tx off`` inside ``netns``."""
    in_netns(netns, lambda: tx_off(ifname))
