# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of the watcher's replicas acts: a Lease, and a term in the NB.

Any number of watchers may run (one per master). Each lists and watches
everything and keeps its caches and queues filled, but hands no key to a
worker (its queues are held) until it leads. Leading means holding the
Lease ``kube-system/ovn4nfv-watcher`` (:mod:`.election`, client-go's
algorithm) and having advanced the NB's term (:mod:`..ovsdb.fence`), so
that a deposed leader's transactions are refused by the NB itself. Then
its queues are released and it serves at once, from warm caches.

A watcher that loses the Lease (it could not renew within the renew
deadline, its NB was unusable for ``nb_grace_seconds``, or the NB refused
its term) ends with exit code 3; systemd starts it again as a standby. No
in-process demotion: nothing of the old term keeps running. On SIGTERM
the leader stops serving, lets its in-flight work end, and then releases
the Lease, so a standby takes over at its next try.

With ``leader_election: false`` there is no Lease and no fence: one
replica only (kept for measuring what election costs).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
import threading
import time

from ..common.errors import Fenced, ValidationError
from ..common.marks import WATCHER
from ..ovsdb import fence as nb_fence
from . import election, lease

LOG = logging.getLogger("ovn4nfv.watcher")
LOST = 3        # the exit code of a watcher that lost its leadership

DEFAULTS = {
    "leader_election": True,
    "lease_seconds": 6.0,          # how long a Lease not seen renewed is held (client-go's LeaseDuration)
    "renew_seconds": 4.0,          # a leader that could not renew for this long stops (RenewDeadline)
    "retry_seconds": 0.5,          # how often a candidate tries, and a leader renews (RetryPeriod)
    "nb_grace_seconds": 10.0,      # a leader whose NB is unusable this long gives the Lease up
    "nb_probe_ms": 2000,           # the NB connection's inactivity probe: a silent server is left
}


def check(config):
    """Refuse settings an election cannot run with."""
    if not isinstance(config.leader_election, bool):
        raise ValidationError("watcher config: leader_election: %r is not true or false" % (config.leader_election,))
    for key in ("nb_grace_seconds", "nb_probe_ms"):
        if not lease.positive(getattr(config, key)):
            raise ValidationError("watcher config: %s: %r is not a positive number" % (key, getattr(config, key)))
    timing(config).check()      # the Lease's three durations


def timing(config):
    return lease.Timing(config.lease_seconds, config.renew_seconds, config.retry_seconds)


class Leadership:
    """The watcher's side of the election. :meth:`hold` its queues once
    they exist, :meth:`start` once the NB is connected, :meth:`release`
    last on a clean stop."""

    def __init__(self, watcher):
        self.watcher = watcher
        self.config = watcher.config
        self.enabled = self.config.leader_election
        # this process's name in the Lease and the NB: a restarted replica
        # never inherits its predecessor's leadership
        self.identity = election.new_identity()
        self.fence = nb_fence.Fence(self.identity, self.acting, self._fenced) if self.enabled else None
        self.elector = None
        self.queues = []
        self.exit_code = 0
        self.lock = threading.RLock()      # the SIGTERM handler runs on the thread that may hold it
        self.released = False
        self.releasing = None       # the thread of release_after

    def hold(self, queues):
        self.queues = [queue for queue in queues if queue is not None]
        if self.enabled:
            for queue in self.queues:
                queue.hold()

    def start(self, api_client):
        with self.lock:
            if not self.enabled or self.released:
                return      # stopped before it could start (a SIGTERM while the NB connected): no campaign
        store = election.LeaseStore(api_client, election.NAMESPACE, WATCHER)
        self.elector = election.Elector(store, timing(self.config), self._healthy, self._take_over, self._lost,
                                        identity=self.identity, grace_seconds=self.config.nb_grace_seconds)
        LOG.info("standing by as %s until it leads (Lease %s/%s)", self.identity, election.NAMESPACE, WATCHER)
        self.elector.start()

    def acting(self):
        """Whether this replica may write now (always, without election)."""
        if not self.enabled:
            return True
        return self.elector is not None and self.elector.acting()

    def _healthy(self):
        """Whether this replica can serve: its lists are done and its NB
        connection follows the server. A candidate without it does not
        try; a leader without it for ``nb_grace_seconds`` releases the
        Lease and stops (the elector), so a replica with the NB takes
        over."""
        watcher = self.watcher
        return watcher.listed.is_set() and watcher.nb is not None and watcher.nb.healthy()

    def _take_over(self):
        """Now the Lease holder: take the next term in the NB (only while
        it still may act), then serve."""
        term = self.fence.advance(self.watcher.nb)
        if not self.acting():
            raise Fenced("leadership ended while it took term %d" % term)
        LOG.info("serving as the leader (term %d)", term)
        for queue in self.queues:
            queue.release()

    def _lost(self, reason):
        if self.exit_code == LOST:
            return
        self.exit_code = LOST
        LOG.error("leadership lost (%s): stopping, to start again as a standby", reason)
        self.watcher.stop()

    def _fenced(self, exc):
        # a standby's write before it took a term is refused and nothing
        # more; a leader's means another took over: it stops
        if self.fence.term is not None and self.elector is not None:
            self.elector.fenced(str(exc))

    def check_acting(self, what):
        """Raise :class:`Fenced` when this replica may not write ``what``
        to the API now."""
        if not self.acting():
            raise Fenced("%s not sent: this watcher does not lead" % what)

    def release_after(self, threads):
        """On a stop: release the Lease, in a thread of its own, once the
        workers among ``threads`` (not the watches, named ``watch-...``,
        which may take a watch request's length to end) have finished the
        keys they hold: a standby takes over a second or so after SIGTERM,
        not once every watch of this one has ended."""
        workers = [t for t in threads if not t.name.startswith("watch-")]

        def release():
            deadline = time.monotonic() + 2 * self.config.ovsdb_timeout
            for worker in workers:
                worker.join(max(0.0, deadline - time.monotonic()))
            if not any(worker.is_alive() for worker in workers):
                self.release()
        with self.lock:
            if self.releasing is not None:
                return
            thread = threading.Thread(target=release, name="release", daemon=True)
            thread.start()          # started before finish() can see it (joining one not started raises)
            self.releasing = thread

    def finish(self):
        """The end of ``run``: the early release done (a daemon thread still
        writing at the interpreter's exit aborts the process: exit -6), or
        this one."""
        releasing = self.releasing
        if releasing is not None:
            releasing.join(2 * self.config.ovsdb_timeout + 5)
        self.release()
        # a lost leadership stops the watcher from the elector's thread: it
        # ends too before the process does, for the same reason
        if self.elector is not None and self.elector.is_alive():
            self.elector.join(2 * self.config.ovsdb_timeout + 5)

    def release(self):
        """A clean stop: give the Lease up, so another takes over at once
        (once, whichever of the stop's thread and the end of ``run`` comes
        first)."""
        with self.lock:
            if self.released:
                return
            self.released = True
        if self.fence is not None:
            LOG.info("fence: %d transactions refused by the NB, %d stopped before they were sent",
                     self.fence.refused, self.fence.stopped)
        if self.elector is not None and self.exit_code != LOST:
            self.elector.release()
