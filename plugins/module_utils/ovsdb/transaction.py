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
            unfollowed = unfollow_created(idl, txn)
            status = self._commit_block(idl, txn, deadline)
            if status == txn.TRY_AGAIN:
                if unfollowed:
                    self._follow_again(idl, unfollowed, deadline)
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
        idl.ran.committing += 1
        try:
            while True:
                status = txn.commit()
                remaining = deadline - time.monotonic()
                if status != txn.INCOMPLETE or remaining <= 0:
                    return status
                idl.run()
                self._block(idl, remaining, txn)
        finally:
            idl.ran.committing -= 1

    def _block(self, idl, remaining, txn=None):
        """Sleep until the server says something, or ``remaining``
        seconds, with the connection's lock let go meanwhile."""
        lock = self.ovsdb_connection.lock
        idl.ran.drain()
        wake = poller.Poller()
        idl.wait(wake)
        if txn is not None:
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

    def _follow_again(self, idl, conditions, deadline):
        """Monitor again the rows :func:`unfollow_created` left out, and
        wait until the server has sent them, before the transaction is made
        anew: another client may have created them meanwhile."""
        for table, condition in conditions.items():
            idl.cond_change(table, condition)
        idl.ran.committing += 1
        try:
            while any(idl.tables[table].condition_state.acked != condition
                      for table, condition in conditions.items()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RuntimeError("the server did not answer a monitor change within %ss" % self.timeout)
                idl.run()
                self._block(idl, remaining)
        finally:
            idl.ran.committing -= 1


def unfollow_created(idl, txn):
    """Stop monitoring, from this transaction on, the rows ``txn`` creates
    in a table monitored by name (a narrowed monitor, :class:`~.connection.Database`
    ``where``); ``{table: the condition before}`` for those it changed.

    A task names the rows it reads, and monitors them whether they exist
    or not: without this, the server would send every row the task creates
    back to it (and ovn-northd's changes to them after), and python-ovs
    would parse them before the transaction's reply, which comes after
    them: for a task creating 1,000 ports, 15% of the module's CPU time
    (measured), all of it between the commit and its answer. Nothing
    reads them again: a task commits once and ends. The change is sent
    before the transaction, on the same connection, so the server applies
    it first. A transaction the server answers "try again" follows the rows
    again first (:meth:`Transaction._follow_again`)."""
    created = {}
    for row in list(txn._txn_rows.values()):    # python-ovs: the rows this transaction writes
        if row._data is None and row._changes is not None and "name" in row._changes:
            try:
                created.setdefault(row._table.name, set()).add(row.name)
            except (AttributeError, KeyError):
                continue
    before = {}
    for table, names in created.items():
        condition = idl.tables[table].condition_state.latest
        if condition in ([True], [False]):
            continue
        kept = [c for c in condition if not (
            isinstance(c, list) and len(c) == 3 and c[0] == "name" and c[1] == "==" and c[2] in names)]
        if len(kept) != len(condition):
            before[table] = condition
            idl.cond_change(table, kept)
    if before:
        idl.send_cond_change()
    return before


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
