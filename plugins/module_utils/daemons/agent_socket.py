# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node agent's socket, bounded so that no client can starve it.

A thread per connection (``socketserver``'s way) let 1,100 idle
connections take every descriptor the agent had, and the next ADD timed
out. Here:

- **one reader** thread takes every connection and reads requests with a
  selector, so an idle connection costs a descriptor and a few bytes, never
  a thread;
- **a cap** on connections still sending their request
  (``max_connections``): one more pushes out the one that has waited
  longest, which is answered at once with a CNI "try again" error and
  closed, so that a flood of idle connections cannot keep out a client
  that sends its request at once (the plugin does);
- **a deadline** (``request_seconds``) for a connection to send its whole
  request, after which it is closed;
- **a cap** on requests being answered (``max_connections`` too): one more
  is answered "try again";
- **a fixed pool** of ``workers`` threads answers complete requests, ADDs
  that wait for their pod included;
- **one log line** per refused, expired or abandoned request, never a
  traceback.

A refusal is written, then the socket is only shut for writing and kept
until the client closes it (or a short grace passes), so that a client
still sending its request reads the refusal rather than a broken pipe.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import logging
import os
import queue
import selectors
import socket
import threading
import time

from .. import cni

LOG = logging.getLogger("ovn4nfv.node_agent")

# how long a refused connection is kept for its client to read the refusal
REFUSAL_GRACE = 2.0


class _Pending:
    """A connection whose request has not arrived whole yet."""

    __slots__ = ("data", "fds", "deadline")

    def __init__(self, deadline):
        self.data = b""
        self.fds = []
        self.deadline = deadline


class BoundedServer:
    """Serve ``answer(data, fds) -> reply`` on the unix socket ``path``;
    ``abandoned(data, reply)`` is told when a client left before its reply
    could be sent."""

    def __init__(self, path, answer, abandoned, workers=64, max_connections=512, request_seconds=10):
        self.path = path
        self.answer = answer
        self.abandoned = abandoned
        self.max_connections = max_connections
        self.request_seconds = request_seconds
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.in_flight = 0              # requests handed to the pool, not yet answered
        self.refused = 0                # how many connections were refused, in all
        self.jobs = queue.Queue()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        os.chmod(path, 0o600)
        self.listener.listen(128)       # a node starts many pods at once
        self.listener.setblocking(False)
        self.workers = [threading.Thread(target=self._work, name="cni-%d" % i, daemon=True) for i in range(workers)]

    # -- the reader --------------------------------------------------------------
    def serve(self):
        """Read and dispatch until :meth:`stop`."""
        for worker in self.workers:
            worker.start()
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ, None)
        pending, draining = {}, {}
        try:
            while not self.stopping.is_set():
                for key, _mask in selector.select(timeout=0.5):
                    if key.data is None:
                        self._accept(selector, pending, draining)
                    elif key.data == "draining":
                        self._forget(selector, key.fileobj, draining)
                    else:
                        self._read(selector, key.fileobj, pending, draining)
                self._expire(selector, pending, draining)
        finally:
            for sock in list(pending) + list(draining):
                self._close(selector, sock, pending.pop(sock, None))
            selector.close()
            self.listener.close()
            for _worker in self.workers:
                self.jobs.put(None)

    def stop(self):
        self.stopping.set()

    def _accept(self, selector, pending, draining):
        for _attempt in range(64):                 # then the others get their turn
            try:
                sock, _address = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:                 # EMFILE: no descriptor left, even for the refusal
                LOG.warning("cannot take a connection: %s", exc.strerror or exc)
                return
            sock.setblocking(False)
            if len(pending) >= self.max_connections:
                oldest = next(iter(pending))
                self._close(selector, oldest, pending.pop(oldest), keep_fd=True)
                self._refuse(selector, oldest, draining, "%d connections are waiting to send their requests, "
                             "the most it keeps; the longest waiting was pushed out" % self.max_connections)
            pending[sock] = _Pending(time.monotonic() + self.request_seconds)
            selector.register(sock, selectors.EVENT_READ, pending[sock])

    def _refuse(self, selector, sock, draining, why):
        self.refused += 1
        LOG.warning("refused a connection: %s (%d refused so far)", why, self.refused)
        error = cni.CNIError(cni.TRY_AGAIN, "the node agent is busy: %s; try again" % why)
        try:
            sock.send(json.dumps({"error": error.to_json(cni.SPEC_VERSION)}).encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        if len(draining) >= self.max_connections:
            sock.close()                           # no room to wait for it: closed at once
            return
        draining[sock] = time.monotonic() + REFUSAL_GRACE
        selector.register(sock, selectors.EVENT_READ, "draining")

    def _forget(self, selector, sock, draining):
        """A refused client that sent more, or closed: closed when it closed."""
        try:
            if sock.recv(65536):
                return
        except OSError:
            pass
        draining.pop(sock, None)
        selector.unregister(sock)
        sock.close()

    def _read(self, selector, sock, pending, draining):
        request = pending[sock]
        try:
            chunk, fds, _flags, _address = socket.recv_fds(sock, 65536, 4)
        except BlockingIOError:
            return
        except OSError as exc:
            LOG.warning("a connection failed before its request was read: %s", exc.strerror or exc)
            self._close(selector, sock, pending.pop(sock))
            return
        request.fds.extend(fds)
        request.data += chunk
        if request.data.endswith(b"\n"):
            selector.unregister(sock)
            del pending[sock]
            with self.lock:
                busy = self.in_flight >= self.max_connections
                self.in_flight += 0 if busy else 1
            if busy:
                for fd in request.fds:
                    os.close(fd)
                self._refuse(selector, sock, draining, "%d requests are being answered, the most it takes" %
                             self.max_connections)
                return
            self.jobs.put((sock, request.data, request.fds))
        elif not chunk or len(request.data) > 2 * cni.MAX_STDIN:
            LOG.warning("a connection %s before its request was whole (%d bytes); closed",
                        "closed" if not chunk else "sent too much", len(request.data))
            self._close(selector, sock, pending.pop(sock))

    def _expire(self, selector, pending, draining):
        now = time.monotonic()
        for sock, request in list(pending.items()):
            if now > request.deadline:
                LOG.warning("a connection sent no whole request within %ss (%d bytes); closed",
                            self.request_seconds, len(request.data))
                self._close(selector, sock, pending.pop(sock))
        for sock, until in list(draining.items()):
            if now > until:
                del draining[sock]
                selector.unregister(sock)
                sock.close()

    @staticmethod
    def _close(selector, sock, request, keep_fd=False):
        """Forget a pending connection: its descriptors closed, and the
        socket too unless ``keep_fd`` (it is refused next)."""
        try:
            selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        for fd in (request.fds if request is not None else ()):
            os.close(fd)
        if not keep_fd:
            sock.close()

    # -- the pool --------------------------------------------------------------
    def _work(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            sock, data, fds = job
            try:
                reply = self.answer(data, fds)
                try:
                    sock.setblocking(True)
                    sock.settimeout(self.request_seconds)
                    sock.sendall(json.dumps(reply).encode() + b"\n")
                except OSError:
                    self.abandoned(data, reply)
            finally:
                for fd in fds:
                    os.close(fd)
                sock.close()
                with self.lock:
                    self.in_flight -= 1
