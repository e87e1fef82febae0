# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One transaction: a function of (idl, txn), run and committed in the
IDL's thread, that lets readers in while it waits for the server.

ovsdbapp's connection thread holds the connection's lock from the moment
it starts a transaction until the server's reply is in, so every read of
the cache (:meth:`.connection.Database.read`) waits a whole round trip
behind each transaction. A daemon that commits while its workers read
(the watcher's committer, under a burst) then spends its rounds with the
workers held still, and the rounds stay small. Here the lock is let go
only while the thread sleeps until the server answers: python-ovs has sent
the transaction and put its rows back as the server holds them, and only
this thread changes the cache, under the lock, when it wakes. The wait is
bounded by the transaction's timeout.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

try:
    from ovs import poller
    from ovs.db import idl as ovs_idl
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
    """ovsdbapp's transaction, committed without holding readers out
    during the server's round trip. A transaction the server answers "try
    again" (the cache was stale) is made anew once the cache changed."""

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
        while True:
            status = txn.commit()
            remaining = deadline - time.monotonic()
            if status != txn.INCOMPLETE or remaining <= 0:
                return status
            idl.run()
            wake = poller.Poller()
            idl.wait(wake)
            txn.wait(wake)
            wake.timer_wait(int(remaining * 1000) + 1)
            lock.release()
            try:
                wake.block()
            finally:
                lock.acquire()
