# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watchers' elector: one replica leads, through a ``coordination.k8s.io/v1``
Lease (``kube-system/ovn4nfv-watcher``) tried, renewed and released as
client-go's leader election does (the decisions are ``lease``'s).

What a caller may rely on: :meth:`Elector.acting` is True only while this
process leads and less than ``renew_seconds`` have passed since it *sent*
its last successful renewal; a standby takes over no earlier than
``lease_seconds`` after it *saw* that renewal, so the two never act at once
unless a clock runs faster than the margin allows (and then the NB's fence
refuses the stale one). Leadership ends for good: ``on_lost`` is called
once and the elector stops; the watcher exits and starts again as a
standby, with a new identity.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import datetime
import json
import logging
import random
import secrets
import socket
import threading
import time

from ..common.marks import WATCHER
from . import lease
from .kube import ApiException, k8s_client
from .lease import ACQUIRE, LOST, RENEW, Observation, Record

LOG = logging.getLogger("ovn4nfv.election")
NAMESPACE = "kube-system"
API_VERSION = "coordination.k8s.io/v1"


def new_identity():
    """``<hostname>_<8 random hex>``: the host for people, the random part
    so that a restarted replica never inherits its predecessor's lease
    (it waits for it to expire, as any standby does)."""
    return "%s_%s" % (socket.gethostname(), secrets.token_hex(4))


def _wall():
    return datetime.datetime.now(datetime.timezone.utc)


def _without_retries(api_client):
    """A client of the same server and credentials whose requests are
    never retried by urllib3 (which retries an idempotent request that
    timed out, three times by default): a Lease request must end within
    its own timeout, or a hung API would hold the elector past its
    deadline. Its own connection pool, too: the elector never queues
    behind the watcher's workers."""
    configuration = copy.deepcopy(api_client.configuration)
    configuration.retries = False
    return k8s_client.ApiClient(configuration)


class LeaseStore:
    """One Lease, read and written as the API's JSON (no model building),
    each request bounded by ``timeout`` seconds (or the one a call gives).
    Errors are the client's: :class:`ApiException` (a 409 is a lost race)
    or a connection error of urllib3's."""

    def __init__(self, api_client, namespace=NAMESPACE, name=WATCHER, timeout=1.0):
        self.namespace = namespace
        self.name = name
        self.timeout = timeout
        self.client = _without_retries(api_client)
        self.api = k8s_client.CoordinationV1Api(self.client)

    def _bound(self, timeout):
        """The client's ``_request_timeout``: a (connect, read) pair, which
        every client generation applies. Debian's 22.6 and 30.1 apply a
        bare number only when it is an int, and ignore a float: a Lease
        request to a stalled API then never ended (measured in Debian 13's
        core tests)."""
        seconds = timeout or self.timeout
        return (seconds, seconds)

    def get(self, timeout=None):
        """The Lease, or None when there is none."""
        try:
            response = self.api.read_namespaced_lease(self.name, self.namespace, _preload_content=False,
                                                      _request_timeout=self._bound(timeout))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return json.loads(response.data)

    def create(self, record, timeout=None):
        """Create the Lease with ``record`` (a :class:`lease.Record`)."""
        body = {"apiVersion": API_VERSION, "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": record.to_spec()}
        return json.loads(self.api.create_namespaced_lease(
            self.namespace, body, _preload_content=False, _request_timeout=self._bound(timeout)).data)

    def replace(self, current, record, timeout=None):
        """Write ``record`` over ``current`` (the Lease as read), on the
        condition that nobody wrote it since: the read resourceVersion goes
        with it, and the server answers 409 otherwise."""
        body = {"apiVersion": API_VERSION, "kind": "Lease", "metadata": current["metadata"],
                "spec": record.to_spec()}
        return json.loads(self.api.replace_namespaced_lease(
            self.name, self.namespace, body, _preload_content=False, _request_timeout=self._bound(timeout)).data)

    def holder(self, timeout=None):
        """Who holds the Lease now: its holderIdentity, "" when released,
        None when there is no Lease. For tests and operators' tools."""
        current = self.get(timeout)
        return None if current is None else Record.from_spec(current.get("spec")).holder

    def close(self):
        self.client.close()


class Elector(threading.Thread):
    """Campaign for the Lease of ``store`` (a :class:`LeaseStore`) with the
    durations of ``timing`` (a :class:`lease.Timing`), as ``identity``.

    A candidate tries every ``retry_seconds`` × [1, 2.2) (client-go's
    jitter), only while ``healthy()`` says it could serve. Once it holds
    the Lease it calls ``on_acquire()`` in a thread of its own (the
    watcher's takeover: advancing the NB term takes time, and renewals must
    go on meanwhile; if it raises, the Lease is released and leadership
    lost), and renews every ``retry_seconds``. Leadership is lost when the
    record names someone else, when no renewal succeeded within
    ``renew_seconds`` of the last successful one being sent, or when the
    fence says so (:meth:`fenced`); ``on_lost(reason)`` is then called
    once, and the elector stops. :meth:`release` ends it cleanly."""

    def __init__(self, store, timing, healthy, on_acquire, on_lost, identity=None, grace_seconds=None):
        super().__init__(name="elector", daemon=True)
        self.store = store
        self.timing = timing.check()
        self.identity = identity or new_identity()
        self.healthy = healthy
        self.on_acquire = on_acquire
        self.on_lost = on_lost
        # a leader that has not been healthy for this long gives the Lease
        # up (a replica that can serve takes over); None: never
        self.grace_seconds = grace_seconds
        self._unhealthy_since = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._leading = False       # ever acquired (and not released): the renew loop runs
        self._until = 0.0           # acting ends then: the last successful renewal sent + renew_seconds
        self._ended = None          # why leadership (or candidacy) ended, once it has
        self._seen = Observation()
        self._failing = False       # whether the last request failed: logs say each change once

    # -- what the watcher asks ---------------------------------------------------
    def acting(self):
        """Whether this process may act as the leader now."""
        with self._lock:
            return self._leading and self._ended is None and time.monotonic() < self._until

    def leading(self):
        """Whether this process holds the Lease and has not lost it (it may
        not act for all that: see :meth:`acting`)."""
        with self._lock:
            return self._leading and self._ended is None

    def fenced(self, reason):
        """The NB refused a write of this process's term: another leads.
        Leadership is lost (no release: the Lease is another's)."""
        self._lose("fenced: %s" % reason)

    def release(self):
        """End cleanly (client-go's ``ReleaseOnCancel``): stop trying and
        renewing, then, if the Lease still names this process, write the
        release record so that a standby takes over at its next try.
        The caller has stopped the work the lease protects first. Returns
        whether a release was written; ``on_lost`` is not called."""
        with self._lock:
            if self._ended is None:
                self._ended = "released"
        self._stop_loop()
        # whether it leads is read from the Lease itself, after the loop has
        # stopped: a try in flight may have just won it
        return self._write_release() if self.ident is not None else False

    # -- the loop ----------------------------------------------------------------
    def run(self):
        try:
            sent = self._campaign()
            if sent is not None:
                self._hold(sent)
        except Exception as exc:  # noqa: a bug here must end leadership, not leave a leader unaware
            LOG.exception("the elector failed")
            self._lose("the elector failed: %s" % exc)

    def _campaign(self):
        """Try until the Lease is won (returns when the winning write was
        sent) or the elector is stopped (None)."""
        while not self._stopping.is_set():
            if self.healthy():
                action, sent = self._try(leading=False)
                if action in (ACQUIRE, RENEW) and sent is not None:
                    return sent
            self._stopping.wait(self.timing.candidate_wait(random.random()))
        return None

    def _hold(self, sent):
        with self._lock:
            if self._ended is not None:
                return
            self._leading = True
            self._until = lease.acting_until(sent, self.timing)
        LOG.info("leading as %s", self.identity)
        threading.Thread(target=self._take_over, name="elector-takeover", daemon=True).start()
        while True:
            with self._lock:
                until = self._until
            if self._stopping.wait(max(0.0, min(self.timing.retry_seconds, until - time.monotonic()))):
                return
            if time.monotonic() >= until:
                self._lose("no renewal succeeded within %ss of the last one" % self.timing.renew_seconds)
                return
            if self._unhealthy_for_too_long():
                self._lose("it could not serve for %ss" % self.grace_seconds, release=True)
                return
            action, sent = self._try(leading=True, deadline=until)
            if action == LOST:
                self._lose("the Lease names %r now" % (self._seen.record.holder if self._seen.record else None))
                return
            if sent is not None:
                with self._lock:
                    self._until = lease.acting_until(sent, self.timing)

    def _unhealthy_for_too_long(self):
        """Whether ``healthy()`` has said no, each time it was asked, for
        ``grace_seconds`` (the #7497 lesson: a leader that cannot reach its
        database must not hold the Lease)."""
        if self.grace_seconds is None:
            return False
        now = time.monotonic()
        if self.healthy():
            self._unhealthy_since = None
            return False
        if self._unhealthy_since is None:
            self._unhealthy_since = now
        return now - self._unhealthy_since >= self.grace_seconds

    def _try(self, leading, deadline=None):
        """One try: read the Lease, decide, write. Returns the decision and,
        when a write succeeded, when it was sent (monotonic); a failed
        request, or a write that lost a race (409), is ``(None, None)``."""
        try:
            current = self.store.get(self._timeout(deadline))
        except Exception as exc:  # noqa: unreachable, timed out, refused: tried again later
            return self._failed("read", exc)
        record = Record.from_spec(current.get("spec")) if current is not None else None
        self._seen.see(record, time.monotonic())
        action = lease.decide(record, self._seen.at, time.monotonic(), self.identity, self.timing, leading)
        if action not in (ACQUIRE, RENEW):
            self._recovered()
            return action, None
        wanted = lease.claim(record, self.identity, self.timing, _wall())
        sent = time.monotonic()
        try:
            if current is None:
                written = self.store.create(wanted, self._timeout(deadline))
            else:
                written = self.store.replace(current, wanted, self._timeout(deadline))
        except Exception as exc:  # noqa: as above; a 409 is another's write first
            return self._failed("write", exc)
        self._seen.see(Record.from_spec(written.get("spec")), time.monotonic())
        self._recovered()
        if action == ACQUIRE:
            LOG.info("%s took the Lease (transitions %d)", self.identity, wanted.transitions)
        return action, sent

    def _timeout(self, deadline):
        """A request's timeout: the store's, cut at ``deadline`` (when the
        leader stops acting anyway)."""
        if deadline is None:
            return self.store.timeout
        return max(0.05, min(self.store.timeout, deadline - time.monotonic()))

    def _failed(self, what, exc):
        if isinstance(exc, ApiException) and exc.status in (404, 409):
            LOG.info("%s: the Lease changed before the %s (%s): a race lost", self.identity, what, exc.status)
        elif not self._failing:
            self._failing = True
            LOG.warning("%s: the Lease %s failed: %s", self.identity, what,
                        "HTTP %s" % exc.status if isinstance(exc, ApiException) else exc)
        return None, None

    def _recovered(self):
        if self._failing:
            self._failing = False
            LOG.info("%s: the Lease is reachable again", self.identity)

    def _take_over(self):
        try:
            self.on_acquire()
        except Exception as exc:  # noqa: whatever failed, this replica cannot lead
            LOG.exception("taking over failed")
            self._lose("taking over failed: %s" % exc, release=True)

    def _lose(self, reason, release=False):
        """End leadership (or candidacy) once: stop the loop, release the
        Lease if asked, tell ``on_lost``."""
        with self._lock:
            if self._ended is not None:
                return
            self._ended = reason
            held = self._leading
        LOG.warning("%s: leadership lost: %s", self.identity, reason)
        self._stop_loop()
        if release and held:
            self._write_release()
        try:
            self.on_lost(reason)
        except Exception:  # noqa: the caller's; nothing more to do here
            LOG.exception("on_lost failed")

    def _stop_loop(self):
        """End the loop, waiting for a try in flight (bounded: two requests
        and a period), so that no renewal lands after a release."""
        self._stopping.set()
        if self.is_alive() and threading.current_thread() is not self:
            # a try is a GET and a PUT, each up to a connect and a read timeout
            self.join(self.timing.retry_seconds + 5 * self.store.timeout)

    def _write_release(self):
        try:
            current = self.store.get()
            record = Record.from_spec(current.get("spec")) if current is not None else None
            if record is None or record.holder != self.identity:
                return False
            self.store.replace(current, lease.release_record(record, _wall()))
        except Exception as exc:  # noqa: the lease then expires on its own
            LOG.warning("%s: the Lease was not released: %s", self.identity, exc)
            return False
        LOG.info("%s released the Lease", self.identity)
        return True
