# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An OVS or OVN daemon's control socket, as ``ovs-appctl`` talks to it
but bounded in time, and what a clustered ovsdb-server says of its
cluster: the parts of :mod:`node.upgrade_node` that read a daemon, with no
systemd in them.

* :func:`unixctl`: a command over ``<rundir>/<name>.<pid>.ctl`` (or a
  socket named), answered within a timeout or an error.
* :func:`cluster_status`: ``cluster/status <DB>``'s answer parsed, as OVS's
  ``raft_unixctl_status`` prints it (OVS 3.1 and later alike), and
  :func:`not_connected`: the other servers a member does not see.
* :func:`is_clustered`: whether a database file is clustered, by its magic.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import time

# no answer over a control socket within this many seconds is an error
UNIXCTL_TIMEOUT = 10.0


def unixctl(rundir, name, command, args=(), target=None, timeout=UNIXCTL_TIMEOUT):
    """``(error, answer)`` of ``command`` sent to the daemon ``name`` over
    its control socket (``<rundir>/<name>.<pid>.ctl``, or ``target``), as
    ``ovs-appctl`` asks (python-ovs's stream and JSON-RPC), waiting at most
    ``timeout`` seconds in all: a daemon that does not answer by then (hung,
    stopped) is an error like any other. python-ovs's UnixctlClient blocks
    without a bound, so this is its loop with a deadline."""
    import ovs.jsonrpc
    import ovs.poller
    import ovs.stream
    path = target
    if path is None:
        try:
            with open(os.path.join(rundir, "%s.pid" % name)) as handle:
                path = os.path.join(rundir, "%s.%d.ctl" % (name, int(handle.read().strip())))
        except (IOError, OSError, ValueError) as exc:
            return str(exc), None
    deadline = time.monotonic() + timeout
    error, stream = ovs.stream.Stream.open_block(ovs.stream.Stream.open("unix:" + path), int(timeout * 1000))
    if error:
        return "%s: %s" % (path, os.strerror(error)), None
    conn = ovs.jsonrpc.Connection(stream)
    try:
        request = ovs.jsonrpc.Message.create_request(command, list(args))
        error = conn.send(request)
        while not error:
            error, reply = conn.recv()
            if error == errno.EAGAIN:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "%s: no answer to %s within %g s" % (path, command, timeout), None
                conn.run()
                poller = ovs.poller.Poller()
                conn.wait(poller)
                conn.recv_wait(poller)
                poller.timer_wait(int(left * 1000) + 1)
                poller.block()
                error = 0
            elif not error and reply.type in (reply.T_REPLY, reply.T_ERROR) and reply.id == request.id:
                if reply.error is not None:
                    return str(reply.error), None
                return None, str(reply.result)
        return "%s: %s" % (path, os.strerror(error)), None
    finally:
        conn.close()


def cluster_status(text):
    """``cluster/status <DB>``'s answer (OVS's ``raft_unixctl_status``)
    parsed: ``{"status", "role", "leader", "servers": [{"name", "address",
    "self"}], "connected": {name: bool}}``. ``Connections:`` lists each
    connection as ``<-name`` (incoming) or ``->name`` (outgoing), in
    parentheses while not connected; a server is connected when one of its
    connections is. A connection opened while this member was joining is
    named ``0000`` (the server's id unknown then), so it names no server;
    every live peer's own connection to this member (``<-name``) does. ``Servers:`` lists ``name (sid at address)``, then
    ``(self)`` for this member."""
    fields, servers, connected, in_servers = {}, [], {}, False
    for line in text.splitlines():
        if in_servers:
            match = re.match(r"^\s+(\S+) \((\S+) at (\S+)\)( \(self\))?", line)
            if match:
                servers.append({"name": match.group(1), "address": match.group(3), "self": bool(match.group(4))})
                continue
            in_servers = False
        key, sep, value = line.partition(":")
        if not sep:
            continue
        if key == "Servers":
            in_servers = True
        elif key == "Connections":
            for word in value.split():
                up = not (word.startswith("(") and word.endswith(")"))
                peer = word.strip("()")[2:]
                connected[peer] = connected.get(peer, False) or up
        else:
            fields[key.strip()] = value.strip()
    return {"status": fields.get("Status"), "role": fields.get("Role"), "leader": fields.get("Leader"),
            "servers": servers, "connected": connected}


def not_connected(status):
    """The other servers of the cluster that the member whose ``status``
    (:func:`cluster_status`) this is does not see connected, as ``name at
    address``."""
    return ["%s at %s" % (server["name"], server["address"]) for server in status["servers"]
            if not server["self"] and not status["connected"].get(server["name"])]


def is_clustered(path):
    """Whether the database file ``path`` is clustered (its first line:
    ``OVSDB CLUSTER <length> <sha1>``; a standalone one's: ``OVSDB JSON``)."""
    try:
        with open(path, "rb") as handle:
            return handle.readline(64).startswith(b"OVSDB CLUSTER ")
    except (IOError, OSError):
        return False
