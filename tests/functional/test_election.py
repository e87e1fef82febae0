"""The watchers' elector against the API stand-in over HTTPS, with the
watcher's service account and its manifest's Role: one of several replicas
leads; a release hands over at a standby's next try; a leader cut from the
API (gone, or stalled) loses and stops acting; an unhealthy candidate never
takes the Lease; a stale write is a lost race; a failed takeover releases.

Short durations (lease 2 s, renew 1.5 s, retry 0.25 s) keep it quick; the
times it takes are printed, never asserted: every wait is on an event,
bounded."""

import logging
import threading
import time

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import settings
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.election import Elector, LeaseStore
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.lease import Timing
from tests.harness.kube_api_standin import WATCHER, KubeAPIStandIn

TIMING = Timing(2, 1.5, 0.25)
NAMESPACE, NAME = "kube-system", "ovn4nfv-watcher"
LEASE_PATH = "/leases/" + NAME
WAIT = 30           # the bound of every wait, far above what any takes


class Replica:
    """One elector as a watcher runs it, recording what it is told (when,
    on the monotonic clock) and notifying ``changed``."""

    def __init__(self, kubeconfig, changed, healthy=True, on_acquire=None, timeout=0.5, grace_seconds=None):
        self.changed = changed
        self.is_healthy = healthy
        self.asked = 0                  # how often healthy() was asked
        self.acquired_at = None
        self.lost = []                  # (reason, when)
        self.store = LeaseStore(settings.kubernetes_api_client(kubeconfig), timeout=timeout)
        self.taking_over = on_acquire
        self.elector = Elector(self.store, TIMING, self.healthy, self.on_acquire, self.on_lost,
                               grace_seconds=grace_seconds)

    def healthy(self):
        with self.changed:
            self.asked += 1
            self.changed.notify_all()
            return self.is_healthy

    def on_acquire(self):
        with self.changed:
            self.acquired_at = time.monotonic()
            self.changed.notify_all()
        if self.taking_over:
            self.taking_over()

    def on_lost(self, reason):
        with self.changed:
            self.lost.append((reason, time.monotonic()))
            self.changed.notify_all()

    @property
    def identity(self):
        return self.elector.identity


@pytest.fixture
def cluster(tmp_path):
    """The stand-in with the product's RBAC, and a maker of replicas that
    run as the watcher's service account; every replica released at the
    end."""
    api = KubeAPIStandIn()
    kubeconfig = api.kubeconfig(str(tmp_path / "kc"), WATCHER)
    changed = threading.Condition()
    replicas = []

    def replica(**options):
        made = Replica(kubeconfig, changed, **options)
        replicas.append(made)
        return made
    try:
        yield api, replica, changed
    finally:
        api.hold_matching("GET", LEASE_PATH, 0)
        api.hold_matching("PUT", LEASE_PATH, 0)
        for made in replicas:
            made.elector.release()
            made.store.close()
        api.stop()
    assert not [d for d in api.denied if d["resource"] == "leases"], "the Role grants what the elector does"


def until(changed, predicate, timeout=WAIT):
    """Wait on ``changed`` until ``predicate()``; its last value."""
    deadline = time.monotonic() + timeout
    with changed:
        while True:
            value = predicate()
            remaining = deadline - time.monotonic()
            if value or remaining <= 0:
                return value
            changed.wait(remaining)


def holder(api):
    lease = api.lease(NAMESPACE, NAME)
    return None if lease is None else lease["spec"].get("holderIdentity", "")


def cut_api(api, cut, on):
    """The API gone (``go_away``: connections refused) or stalled on the
    Lease (``hold``: requests held unanswered), or back."""
    if cut == "go_away":
        (api.go_away if on else api.come_back)()
        return
    for method in ("GET", "PUT"):
        api.hold_matching(method, LEASE_PATH, 3600 if on else 0)


def start(*replicas):
    for replica in replicas:
        replica.elector.start()


def leaders(replicas):
    return [r for r in replicas if r.acquired_at is not None and not r.lost]


def test_one_of_three_leads_and_its_release_hands_over(cluster):
    api, replica, changed = cluster
    three = [replica() for _index in range(3)]
    started = time.monotonic()
    start(*three)
    assert until(changed, lambda: leaders(three)), "nobody leads"
    first = leaders(three)[0]
    print("election: first_leader_s=%.2f" % (first.acquired_at - started))
    assert holder(api) == first.identity and first.elector.acting() and first.elector.leading()
    assert [r for r in three if r.elector.leading()] == [first]
    assert api.lease(NAMESPACE, NAME)["spec"]["leaseTransitions"] == 0
    others = [r for r in three if r is not first]
    assert not [r for r in others if r.elector.acting()]
    released_at = time.monotonic()
    assert first.elector.release() is True
    assert not first.elector.acting() and not first.lost, "a release is no loss"
    assert until(changed, lambda: leaders(others)), "nobody took over"
    second = leaders(others)[0]
    print("election: release_handover_s=%.2f (a standby's next try: retry %.2f s, jitter 1.2)" % (
        second.acquired_at - released_at, TIMING.retry_seconds))
    lease = api.lease(NAMESPACE, NAME)
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == (second.identity, 1)
    assert [r for r in three if r.elector.acting()] == [second]
    first.elector.join(WAIT)
    assert not first.elector.is_alive()


@pytest.mark.parametrize("cut", ["go_away", "hold"])
def test_a_leader_cut_from_the_api_loses_and_stops_acting(cluster, cut):
    """``go_away``: the API is gone (connections refused); ``hold``: it
    stalls every Lease request without answering. Either way the leader
    stops acting once its renew deadline passes, and says so once; a
    standby leads once the API is back and the lease has run out."""
    api, replica, changed = cluster
    pair = [replica(), replica()]
    start(*pair)
    assert until(changed, lambda: leaders(pair))
    leader = leaders(pair)[0]
    standby = [r for r in pair if r is not leader][0]
    assert until(changed, lambda: holder(api) == leader.identity and leader.elector.acting())
    cut_at = time.monotonic()
    cut_api(api, cut, True)
    assert until(changed, lambda: leader.lost), "the leader never lost"
    reason, lost_at = leader.lost[0]
    assert "no renewal succeeded" in reason and not leader.elector.acting()
    print("election: %s lost_s=%.2f (renew deadline %.1f s)" % (cut, lost_at - cut_at, TIMING.renew_seconds))
    back_at = time.monotonic()
    cut_api(api, cut, False)
    assert until(changed, lambda: standby.acquired_at), "the standby never led"
    print("election: %s takeover_s=%.2f after the cut, %.2f after the API came back" % (
        cut, standby.acquired_at - cut_at, standby.acquired_at - back_at))
    assert holder(api) == standby.identity
    assert len(leader.lost) == 1 and not leader.elector.acting() and not leader.elector.leading()
    leader.elector.join(WAIT)
    assert not leader.elector.is_alive(), "a lost elector stops for good"


def test_an_unhealthy_candidate_never_takes_the_lease(cluster):
    api, replica, changed = cluster
    sick = replica(healthy=False)
    start(sick)
    assert until(changed, lambda: sick.asked >= 3)
    assert holder(api) is None, "no Lease was even created"
    well = replica()
    start(well)
    assert until(changed, lambda: well.acquired_at)
    assert well.elector.release()
    asked = sick.asked
    assert until(changed, lambda: sick.asked >= asked + 3), "the candidate stopped asking"
    assert holder(api) == "" and not sick.elector.leading(), "released, and still not taken"
    with changed:
        sick.is_healthy = True
    assert until(changed, lambda: sick.acquired_at), "healthy again, it takes the released lease"
    assert holder(api) == sick.identity


def test_a_stale_write_is_a_lost_race_and_transitions_are_counted(cluster, caplog):
    """A candidate reads a released Lease, and its write is held at the
    server while another writer takes the Lease: the write carries a stale
    resourceVersion, the server answers 409, and the candidate goes on as
    a candidate, taking the Lease once the other's lease runs out."""
    api, replica, changed = cluster
    api.set_lease(NAMESPACE, NAME, {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 4})
    api.hold_matching("PUT", LEASE_PATH, 3600)
    candidate = replica(timeout=WAIT)          # its write waits for the server, however long it holds it
    caplog.set_level(logging.INFO, logger="ovn4nfv.election")
    start(candidate)
    assert api.wait(lambda a: a.held >= 1, WAIT)
    api.set_lease(NAMESPACE, NAME, {"holderIdentity": "other", "leaseDurationSeconds": 2, "leaseTransitions": 5})
    taken_at = time.monotonic()
    api.hold_matching("PUT", LEASE_PATH, 0)
    assert until(changed, lambda: candidate.acquired_at), "the candidate never led"
    assert [r for r in caplog.records if "race lost" in r.getMessage()], "the stale write was refused (409)"
    assert not candidate.lost and candidate.elector.is_alive()
    print("election: expired_takeover_s=%.2f (lease %d s, from the other's write)" % (
        candidate.acquired_at - taken_at, TIMING.lease_seconds))
    lease = api.lease(NAMESPACE, NAME)
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == (candidate.identity, 6)
    renewed = lease["metadata"]["resourceVersion"]
    assert api.wait(lambda a: a.lease(NAMESPACE, NAME)["metadata"]["resourceVersion"] != renewed, WAIT)
    assert api.lease(NAMESPACE, NAME)["spec"]["leaseTransitions"] == 6, "a renewal is no transition"


def test_a_failed_takeover_releases_and_a_fenced_leader_lets_go(cluster):
    api, replica, changed = cluster

    def refuse():
        raise RuntimeError("the NB term could not be advanced")
    failing = replica(on_acquire=refuse)
    start(failing)
    assert until(changed, lambda: failing.lost)
    assert "taking over failed" in failing.lost[0][0] and not failing.elector.acting()
    assert holder(api) == "", "released: the next candidate need not wait a lease"
    fenced = replica()
    start(fenced)
    assert until(changed, lambda: fenced.acquired_at)
    assert api.lease(NAMESPACE, NAME)["spec"]["leaseTransitions"] == 1, "from the released record: one change"
    fenced.elector.fenced("the NB term is 7, not 6")
    assert [reason for reason, _when in fenced.lost] == ["fenced: the NB term is 7, not 6"]
    assert not fenced.elector.acting()
    assert holder(api) == fenced.identity, "no release: the Lease is another's to take"
    fenced.elector.fenced("again")
    assert len(fenced.lost) == 1, "told once"


def test_a_leader_that_cannot_serve_past_its_grace_releases_the_lease(cluster):
    """A leader whose NB became unusable (healthy() says no) keeps the
    Lease for its grace, then releases it and stops: a replica that can
    serve takes over at its next try, without waiting for the lease to
    lapse (Kube-OVN #7497: a leader hung for 54 minutes)."""
    api, replica, changed = cluster
    leader = replica(grace_seconds=1.0)
    start(leader)
    assert until(changed, lambda: leader.acquired_at)
    with changed:
        leader.is_healthy = False
    sick_at = time.monotonic()
    assert until(changed, lambda: leader.lost), "the leader kept the Lease without serving"
    assert not leader.elector.acting()
    assert "could not serve" in leader.lost[0][0]
    assert leader.lost[0][1] - sick_at >= 1.0 - TIMING.retry_seconds, "it gave up before its grace"
    assert holder(api) == "", "it released the Lease as it stopped"
    standby = replica()
    start(standby)
    assert until(changed, lambda: standby.acquired_at)
    print("\ngrace: lost %.2f s after it could not serve; the standby took over %.2f s after that" % (
        leader.lost[0][1] - sick_at, standby.acquired_at - leader.lost[0][1]))
