# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One transaction: a function of (idl, txn), run and committed in the
calling thread, that lets readers in while it waits for the server.

ovsdbapp hands each transaction to its connection thread and waits for
the answer on a queue, and that thread holds the connection's lock from
the moment it starts the transaction until the server's reply is in. So
a transaction costs two thread hand-offs, and every read of the cache
(:meth:`.connection.Database.read`) waits a whole round trip behind it.
Under a burst the watcher's committer measured 7 ms of a 23 ms round in
the hand-off alone, and the rounds stayed small behind the readers.

Here the caller runs the transaction itself, under the same lock, which
is all python-ovs asks of the threads that touch one IDL. The lock is let
go only while the caller sleeps until the server answers: python-ovs has
sent the transaction and put its rows back as the server holds them,
and whichever thread wakes first takes the reply into the cache under the
lock. The wait for the lock and the wait for the server are both bounded
by the transaction's timeout.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import time


def _version_without_pkg_resources():
    """Let pbr read ovsdbapp's version with the standard library.

    ovsdbapp's ``__init__`` asks pbr for its own version, and pbr, without
    the ``importlib_metadata`` backport (Debian 12 has none), imports
    ``pkg_resources``, which scans every installed distribution: 60-90 ms
    of every module run here, a tenth of a no-change task's time, before it
    has done anything. ``importlib.metadata`` has the two names pbr uses
    (``distribution`` and ``PackageNotFoundError``) and gives the same
    version. Nothing changes where ovsdbapp is already imported or where pbr
    found the backport."""
    if "ovsdbapp" in sys.modules:
        return
    try:
        from importlib import metadata
        from pbr import version as pbr_version
    except ImportError:
        return
    if not getattr(pbr_version, "use_importlib", True):
        pbr_version.importlib_metadata = metadata
        pbr_version.use_importlib = True


_version_without_pkg_resources()

try:
    from ovs import poller
    from ovs.db import idl as ovs_idl
    from ovsdbapp import exceptions as ovsdbapp_exceptions
    from ovsdbapp.backend.ovs_idl import command as ovsdbapp_command
    from ovsdbapp.backend.ovs_idl import idlutils
    from ovsdbapp.backend.ovs_idl import transaction as ovsdbapp_transaction
    _CommandBase = ovsdbapp_command.BaseCommand
    _TransactionBase = ovsdbapp_transaction.Transaction
except ImportError:  # pragma: no cover - connection.py reports the missing library
    _CommandBase = _TransactionBase = object


class FunctionCommand(_CommandBase):
    """An ovsdbapp command whose work is a function of (idl, txn)."""

    def __init__(self, api, function):
        super(FunctionCommand, self).__init__(api)
        self.function = function

    def run_idl(self, txn):
        self.result = self.function(self.api.idl, txn)

    def __str__(self):
        return "reconcile"


class Transaction(_TransactionBase):
    """ovsdbapp's transaction, committed in the caller's thread without
    holding readers out during the server's round trip. A transaction the
    server answers "try again" (the cache was stale) is made anew once the
    cache changed."""

    def commit(self):
        """Run and commit in this thread; the results of the commands.
        Raises ovsdbapp's TimeoutException when the connection's lock is
        not free within the timeout, and RuntimeError for what the server
        refused, as ovsdbapp's commit does with ``check_error``."""
        lock = self.ovsdb_connection.lock
        if not lock.acquire(timeout=self.timeout):
            raise ovsdbapp_exceptions.TimeoutException(commands=self.commands, timeout=self.timeout,
                                                       cause="the connection's lock was held")
        try:
            return self.do_commit()
        finally:
            lock.release()

    def do_commit(self):
        idl = self.api.idl
        deadline = time.monotonic() + self.timeout
        while True:
            seqno = idl.change_seqno
            txn = ovs_idl.Transaction(idl)
            try:
                for command in self.commands:
                    command.run_idl(txn)
            except Exception:
                txn.abort()
                raise
            status = self._commit_block(idl, txn, deadline)
            if status == txn.TRY_AGAIN:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RuntimeError("the server asked to try again until the timeout")
                idlutils.wait_for_change(idl, remaining, seqno)
                continue
            if status == txn.ERROR:
                raise RuntimeError(txn.get_error())
            if status == txn.NOT_LOCKED:
                raise RuntimeError("the database lock this connection needs is not held")
            if status == txn.INCOMPLETE:
                raise RuntimeError("no answer from the server within %ss" % self.timeout)
            self.post_commit(txn)
            return [command.result for command in self.commands]

    def _commit_block(self, idl, txn, deadline):
        lock = self.ovsdb_connection.lock
        idl.ran.committing += 1
        try:
            while True:
                status = txn.commit()
                remaining = deadline - time.monotonic()
                if status != txn.INCOMPLETE or remaining <= 0:
                    return status
                idl.run()
                idl.ran.drain()
                wake = poller.Poller()
                idl.wait(wake)
                txn.wait(wake)
                # the connection's thread may take the reply in once the
                # lock is free: its run signals, and this wakes
                wake.fd_wait(idl.ran.fd, poller.POLLIN)
                wake.timer_wait(int(remaining * 1000) + 1)
                lock.release()
                try:
                    wake.block()
                finally:
                    lock.acquire()
        finally:
            idl.ran.committing -= 1


class RunSignal:
    """A pipe that gets a byte each time the IDL runs while a thread
    commits (``committing``): what wakes a committing thread whose reply
    another thread took in, as its socket will not."""

    def __init__(self):
        self.committing = 0
        self.fd, self._write = os.pipe()
        os.set_blocking(self.fd, False)
        os.set_blocking(self._write, False)

    def signal(self):
        if self.committing:
            try:
                os.write(self._write, b".")
            except OSError:     # full: the committing thread has its wake already
                pass

    def drain(self):
        try:
            while os.read(self.fd, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            os.close(self._write)
            self.fd = self._write = None
