# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Leader election on one ``coordination.k8s.io/v1`` Lease, as client-go's
``tools/leaderelection`` decides it: the decisions only, without I/O or a
clock of their own, so that a test drives them with a fake one.

Why expiry is judged from when *this* process saw the record change, not
from the ``renewTime`` in it: replicas' wall clocks may differ by any
offset, and a lease judged from another host's timestamp would expire early
or late by that offset. Observed locally (on the monotonic clock), only a
difference in clock *rate* matters, and the slack between the lease and the
renew deadline absorbs it. The cost: a candidate that has just started
waits a full lease before it may take over a record it has never seen
change, however old its ``renewTime``.

client-go does not fence (its doc says so: two clients may act as leader
for a moment); the NB's term does (``ovsdb/fence``), which is why short
durations are safe here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import datetime
import math

from ..common.errors import ValidationError

# What one try at the Lease decides.
ACQUIRE = "acquire"     # write a record naming me (create it, or take over an empty or expired one)
RENEW = "renew"         # write my record again with a new renewTime
WAIT = "wait"           # another holds it and it has not expired: try later
LOST = "lost"           # I was leading and the record no longer names me

# client-go's JitterFactor: candidates wait retry × (1 + 1.2 × U[0, 1)), and
# the renew deadline must exceed retry × 1.2 so that a leader gets more
# than one try within it.
JITTER = 1.2

MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
UTC = datetime.timezone.utc


def positive(value):
    """Whether ``value`` is a finite number above zero (not a boolean)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


class Timing(collections.namedtuple("Timing", "lease_seconds renew_seconds retry_seconds")):
    """The three durations, in seconds: ``lease_seconds`` (how long a
    standby waits, from when it saw the last change, before taking over),
    ``renew_seconds`` (how long a leader may go without a successful
    renewal before it stops acting) and ``retry_seconds`` (the period of
    tries)."""

    __slots__ = ()

    def check(self):
        """Refuse durations client-go would refuse (ValidationError): each
        above zero, lease > renew (a standby must not take over while the
        leader may still act) and renew > 1.2 × retry (more than one
        renewal try fits in the deadline)."""
        for name in self._fields:
            value = getattr(self, name)
            if not positive(value):
                raise ValidationError("leader election: %s must be a number above 0, not %r" % (name, value))
        if self.lease_seconds <= self.renew_seconds:
            raise ValidationError("leader election: lease_seconds (%s) must be greater than renew_seconds (%s)"
                                  % (self.lease_seconds, self.renew_seconds))
        if self.renew_seconds <= JITTER * self.retry_seconds:
            raise ValidationError("leader election: renew_seconds (%s) must be greater than %s × retry_seconds (%s)"
                                  % (self.renew_seconds, JITTER, self.retry_seconds))
        return self

    @property
    def duration(self):
        """The record's ``leaseDurationSeconds`` (whole seconds, as the API
        has it): the lease rounded up, so that no standby waits less."""
        return max(1, int(math.ceil(self.lease_seconds)))

    def candidate_wait(self, fraction):
        """How long a candidate waits between tries, for ``fraction`` drawn
        from [0, 1): client-go's jitter, so that candidates spread out."""
        return self.retry_seconds * (1.0 + JITTER * fraction)


class Record(collections.namedtuple("Record", "holder lease_seconds acquire_time renew_time transitions")):
    """A Lease's spec as leader election reads it: ``holder`` ("" when
    released), ``lease_seconds`` (the holder's promise of how long it
    stays without renewing), ``acquire_time`` and ``renew_time``
    (MicroTime text, for people: never used to judge expiry), and
    ``transitions`` (how many times the holder changed)."""

    __slots__ = ()

    @classmethod
    def from_spec(cls, spec):
        spec = spec or {}
        return cls(spec.get("holderIdentity") or "", spec.get("leaseDurationSeconds") or 0,
                   spec.get("acquireTime"), spec.get("renewTime"), spec.get("leaseTransitions") or 0)

    def to_spec(self):
        spec = {"holderIdentity": self.holder, "leaseDurationSeconds": self.lease_seconds,
                "leaseTransitions": self.transitions}
        for field, value in (("acquireTime", self.acquire_time), ("renewTime", self.renew_time)):
            if value is not None:
                spec[field] = value
        return spec


class Observation:
    """The record as this process last saw it, and when it saw it change
    (``at``, on the caller's monotonic clock): a record that comes back the
    same does not move ``at``, which is what lets it expire."""

    def __init__(self):
        self.record = None
        self.at = None

    def see(self, record, now):
        """Take ``record`` (None: there is no Lease) read at ``now``."""
        if self.at is None or record != self.record:
            self.record, self.at = record, now


def decide(observed, observed_at, now, me, timing, leading=False):
    """What a try does, given the record ``observed`` (None when there is no
    Lease) last seen to change at ``observed_at``, the time ``now`` (the
    same monotonic clock), the identity ``me``, the :class:`Timing`, and
    whether this process is ``leading``: one of :data:`ACQUIRE`,
    :data:`RENEW`, :data:`WAIT`, :data:`LOST`.

    A leader whose record names someone else, or is gone, has lost at once
    (client-go would keep trying until its deadline: nothing is gained by
    acting on a lease known to be another's). A released record (empty
    holder) is taken at once; another's is taken only a full lease after
    it was last seen to change: the record's ``leaseDurationSeconds``, or
    ours where the record has none."""
    if observed is not None and observed.holder == me:
        return RENEW
    if leading:
        return LOST
    if observed is None or not observed.holder:
        return ACQUIRE
    if now < observed_at + (observed.lease_seconds or timing.lease_seconds):
        return WAIT
    return ACQUIRE


def claim(observed, me, timing, wall):
    """The record to write for :data:`ACQUIRE` or :data:`RENEW` at the wall
    time ``wall`` (a timezone-aware datetime): my renewal keeps its
    acquireTime and transitions; taking it from anyone else (an empty
    holder too, as in client-go) counts one transition; a new Lease starts
    at zero."""
    stamp = micro_time(wall)
    if observed is not None and observed.holder == me:
        return observed._replace(lease_seconds=timing.duration, renew_time=stamp)
    transitions = observed.transitions + 1 if observed is not None else 0
    return Record(me, timing.duration, stamp, stamp, transitions)


def release_record(observed, wall):
    """The record a leader writes as it stops cleanly (client-go's
    ``ReleaseOnCancel``): no holder, a lease of 1 s, its transitions kept,
    so that a standby takes over at its next try instead of a full lease
    later."""
    stamp = micro_time(wall)
    return Record("", 1, stamp, stamp, observed.transitions if observed is not None else 0)


def acting_until(sent, timing):
    """Until when a leader may act after a renewal *sent* at ``sent`` (on
    its monotonic clock) succeeded: ``renew_seconds`` later. A standby
    takes over no earlier than ``lease_seconds`` after it *saw* that
    renewal, which it cannot see before it was sent: the difference is the
    margin for clock rate skew and delays."""
    return sent + timing.renew_seconds


def micro_time(wall):
    """A Kubernetes MicroTime: UTC, microseconds, ``Z``."""
    return wall.astimezone(UTC).strftime(MICRO_TIME)
