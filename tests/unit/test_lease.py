"""client-go's leader election decisions, on a fake clock: a record is
acquired at once when there is none or it is released, another's only a
full lease after this process last saw it change (never from its
renewTime), a leader renews its own and has lost the moment it names
someone else; transitions count holder changes only."""

import datetime

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import lease
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.lease import (
    ACQUIRE, LOST, RENEW, WAIT, Observation, Record, Timing, claim, decide, release_record)

TIMING = Timing(6, 4, 0.5)
WALL = datetime.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=datetime.timezone.utc)


class FakeClock:
    """A monotonic clock that moves only when told."""

    def __init__(self, now=1000.0):
        self.now = now

    def advance(self, seconds):
        self.now += seconds
        return self.now


def held_by(holder, renew_time="2020-01-01T00:00:00.000000Z", seconds=6, transitions=3):
    return Record(holder, seconds, "2020-01-01T00:00:00.000000Z", renew_time, transitions)


def test_no_lease_or_a_released_one_is_acquired_at_once():
    clock = FakeClock()
    assert decide(None, clock.now, clock.now, "me", TIMING) == ACQUIRE
    released = release_record(held_by("other"), WALL)
    assert decide(released, clock.now, clock.now, "me", TIMING) == ACQUIRE


def test_anothers_lease_expires_a_full_lease_after_it_was_seen_to_change():
    """Its renewTime is years old, yet a process that sees it now waits a
    full lease: another host's clock is never compared with ours."""
    clock, seen = FakeClock(), Observation()
    record = held_by("other")
    seen.see(record, clock.now)
    assert decide(seen.record, seen.at, clock.now, "me", TIMING) == WAIT
    clock.advance(5.9)
    seen.see(record, clock.now)                     # the same record again: no change, no new start
    assert decide(seen.record, seen.at, clock.now, "me", TIMING) == WAIT
    clock.advance(0.1)
    assert decide(seen.record, seen.at, clock.now, "me", TIMING) == ACQUIRE


def test_a_renewal_seen_starts_the_lease_again():
    clock, seen = FakeClock(), Observation()
    seen.see(held_by("other"), clock.now)
    clock.advance(5)
    seen.see(held_by("other", renew_time="2020-01-01T00:00:05.000000Z"), clock.now)
    clock.advance(5)
    assert decide(seen.record, seen.at, clock.now, "me", TIMING) == WAIT
    clock.advance(1)
    assert decide(seen.record, seen.at, clock.now, "me", TIMING) == ACQUIRE


def test_the_records_own_duration_is_the_one_waited():
    clock = FakeClock()
    short = held_by("other", seconds=2)
    assert decide(short, clock.now, clock.advance(1.9), "me", TIMING) == WAIT
    assert decide(short, clock.now - 1.9, clock.advance(0.1), "me", TIMING) == ACQUIRE
    unset = held_by("other", seconds=0)             # a record without one: ours
    assert decide(unset, clock.now, clock.now + 5.9, "me", TIMING) == WAIT
    assert decide(unset, clock.now, clock.now + 6, "me", TIMING) == ACQUIRE


def test_a_leader_renews_its_own_and_has_lost_when_it_names_another():
    clock = FakeClock()
    mine = held_by("me")
    assert decide(mine, clock.now, clock.now, "me", TIMING, leading=True) == RENEW
    assert decide(mine, clock.now, clock.now + 100, "me", TIMING, leading=True) == RENEW
    for record in (held_by("other"), release_record(mine, WALL), None):
        assert decide(record, clock.now, clock.now, "me", TIMING, leading=True) == LOST, record
    # not leading, yet named (a renewal whose answer was lost): renewing takes it back
    assert decide(mine, clock.now, clock.now, "me", TIMING) == RENEW


def test_transitions_count_only_changes_of_holder():
    first = claim(None, "a", TIMING, WALL)
    assert first == Record("a", 6, "2026-01-02T03:04:05.600000Z", "2026-01-02T03:04:05.600000Z", 0)
    later = WALL + datetime.timedelta(seconds=1)
    renewed = claim(first, "a", TIMING, later)
    assert (renewed.transitions, renewed.acquire_time, renewed.renew_time) == (
        0, first.acquire_time, "2026-01-02T03:04:06.600000Z")
    taken = claim(renewed, "b", TIMING, later)
    assert (taken.holder, taken.transitions, taken.acquire_time) == ("b", 1, taken.renew_time)
    released = release_record(taken, later)
    assert (released.holder, released.lease_seconds, released.transitions) == ("", 1, 1)
    assert claim(released, "b", TIMING, later).transitions == 2, "taking an empty holder is a change, as in client-go"


def test_records_read_and_write_the_lease_spec():
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 6, "acquireTime": "2026-01-02T03:04:05.600000Z",
            "renewTime": "2026-01-02T03:04:06.600000Z", "leaseTransitions": 2}
    assert Record.from_spec(spec).to_spec() == spec
    assert Record.from_spec({}) == Record("", 0, None, None, 0)
    assert Record.from_spec(None).to_spec() == {"holderIdentity": "", "leaseDurationSeconds": 0,
                                                "leaseTransitions": 0}
    local = datetime.datetime(2026, 1, 2, 4, 4, 5, 600000, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    assert lease.micro_time(local) == "2026-01-02T03:04:05.600000Z"


def test_an_observation_moves_only_on_a_change():
    seen = Observation()
    seen.see(None, 1.0)
    assert (seen.record, seen.at) == (None, 1.0)
    seen.see(None, 2.0)
    assert seen.at == 1.0
    seen.see(held_by("a"), 3.0)
    seen.see(held_by("a"), 4.0)
    assert seen.at == 3.0


def test_timing_is_checked_as_client_go_checks_it():
    assert TIMING.check() is TIMING
    assert Timing(2, 1.5, 0.25).check().duration == 2
    assert Timing(2.5, 1.5, 0.25).duration == 3, "whole seconds, rounded up"
    assert (TIMING.candidate_wait(0), TIMING.candidate_wait(0.5)) == (0.5, pytest.approx(0.8))
    assert lease.acting_until(10.0, TIMING) == 14.0
    for bad in (Timing(4, 4, 0.5), Timing(3, 4, 0.5), Timing(6, 0.6, 0.5), Timing(6, 4, 0), Timing(6, 4, "1"),
                Timing(6, 4, True)):
        with pytest.raises(ValidationError):
            bad.check()
