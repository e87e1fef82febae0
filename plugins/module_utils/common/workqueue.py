# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A work queue of keys, with the semantics of client-go's workqueue.

* A key is queued once however often it is added (*dirty*); a key being
  worked on (*processing*) is never handed to a second worker: added
  meanwhile, it is queued again when the first worker calls :meth:`done`.
  So each key is handled by one worker at a time, and always with the
  newest state, which the worker reads from its own cache by the key:
  the queue never holds a copy of an object.
* :meth:`add_after` queues a key later; of several delays for one key the
  earliest wins. :meth:`add_rate_limited` is ``add_after`` with a per-key
  exponential backoff (``base * 2**failures``, capped), which
  :meth:`forget` resets after a success.
* :meth:`shutdown` wakes every worker: :meth:`get` then returns None.
* :meth:`hold` keeps keys queued without handing any out, until
  :meth:`release`: a standby replica's queue fills while it waits to lead.

Only the standard library; one timer thread serves every delayed key.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import heapq
import threading
import time


class Backoff:
    """Exponential backoff: ``base``, doubled on each :meth:`next`, capped
    at ``cap``; :meth:`reset` after a success."""

    def __init__(self, cap, base=0.2):
        self.cap = cap
        self.base = base
        self.delay = 0.0

    def next(self):
        self.delay = min(self.cap, max(self.base, self.delay * 2))
        return self.delay

    def reset(self):
        self.delay = 0.0


class WorkQueue:
    """Keys to work on. Thread-safe."""

    def __init__(self, base_delay=0.1, max_delay=30.0, name="workqueue"):
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._lock = threading.Condition()
        # the timer waits on its own condition of the same lock: a key
        # queued wakes one worker, not every worker and the timer
        self._timer_wake = threading.Condition(self._lock)
        self._queue = collections.deque()
        self._dirty = set()
        self._processing = set()
        self._backoffs = {}         # key -> its Backoff, while it keeps failing
        self._waiting = []          # heap of (ready_at, sequence, key)
        self._ready_at = {}         # key -> the earliest time it is waited for
        self._sequence = 0
        self._shutting_down = False
        self._held = False
        self._timer = threading.Thread(target=self._delayed, name=name + "-timer", daemon=True)
        self._timer.start()

    # -- adding ------------------------------------------------------------
    def add(self, key):
        """Queue ``key`` unless it is queued already."""
        with self._lock:
            self._add_locked(key)

    def _add_locked(self, key):
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._lock.notify()

    def add_after(self, key, delay):
        """Queue ``key`` once ``delay`` seconds have passed."""
        if delay <= 0:
            self.add(key)
            return
        with self._lock:
            if self._shutting_down:
                return
            ready_at = time.monotonic() + delay
            if self._ready_at.get(key, ready_at + 1) <= ready_at:
                return
            self._ready_at[key] = ready_at
            self._sequence += 1
            heapq.heappush(self._waiting, (ready_at, self._sequence, key))
            self._timer_wake.notify()

    def add_rate_limited(self, key):
        """Queue ``key`` after its backoff; each call doubles the next one."""
        self.add_after(key, self.when(key))

    def when(self, key):
        """The delay the next :meth:`add_rate_limited` of ``key`` waits."""
        with self._lock:
            backoff = self._backoffs.setdefault(key, Backoff(self.max_delay, self.base_delay))
            return backoff.next()

    def forget(self, key):
        """Reset ``key``'s backoff (after a success, or when it is gone)."""
        with self._lock:
            self._backoffs.pop(key, None)

    # -- working -----------------------------------------------------------
    def get(self, timeout=None):
        """The next key, now the caller's until :meth:`done`; None after
        :meth:`shutdown` (or when ``timeout`` passed with nothing queued)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while (self._held or not self._queue) and not self._shutting_down:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._lock.wait(remaining)
            if self._shutting_down:
                return None
            key = self._queue.popleft()
            self._processing.add(key)
            self._dirty.discard(key)
            return key

    def done(self, key):
        """The caller has finished with ``key``; if it was added meanwhile,
        it is queued again now."""
        with self._lock:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._lock.notify()

    def __len__(self):
        with self._lock:
            return len(self._queue)

    def pending(self):
        """How many keys are queued, worked on or waiting for a delay."""
        with self._lock:
            return len(self._dirty | self._processing | set(self._ready_at))

    def hold(self):
        """Hand out no key until :meth:`release`; keys are still queued."""
        with self._lock:
            self._held = True

    def release(self):
        with self._lock:
            self._held = False
            self._lock.notify_all()

    def shutdown(self):
        with self._lock:
            self._shutting_down = True
            self._lock.notify_all()
            self._timer_wake.notify_all()
        self._timer.join(5)

    # -- the timer ---------------------------------------------------------
    def _delayed(self):
        with self._lock:
            while not self._shutting_down:
                now = time.monotonic()
                while self._waiting and self._waiting[0][0] <= now:
                    ready_at, _sequence, key = heapq.heappop(self._waiting)
                    if self._ready_at.get(key) == ready_at:
                        del self._ready_at[key]
                        self._add_locked(key)
                self._timer_wake.wait(self._waiting[0][0] - now if self._waiting else None)


def serve(queue, handle, log, what, retry_on=()):
    """A worker: take keys from ``queue`` until it shuts down, and
    ``handle(key)`` each. An exception of ``retry_on`` is logged in a line
    and the key retried with backoff; any other is a bug, logged whole, and
    retried too, so that a worker never dies."""
    while True:
        key = queue.get()
        if key is None:
            return
        try:
            handle(key)
            queue.forget(key)
        except retry_on as exc:
            log.warning("%s %s: %s; retrying", what, key, exc)
            queue.add_rate_limited(key)
        except Exception:  # noqa: a bug must not kill the worker; it is logged whole
            log.exception("%s %s", what, key)
            queue.add_rate_limited(key)
        finally:
            queue.done(key)
