"""Watcher replicas (daemons/leadership.py): two watcher processes on one
API stand-in and one NB, each a real process. One leads and serves, the
other stands by; when the leader is killed, paused or stopped, the other
takes over and serves. Judged from outside: the Lease on the API, the
NB's term, and the NB's own transaction history (its database file:
tests/harness/nb_history.py), which names the writer of every
transaction: nothing was written under a stale term, no pod port twice.

Times are printed, never asserted (test durations: a 2 s Lease)."""

import os
import re
import signal
import time

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import marks
from tests.harness import nb_history
from tests.harness.kube_api_standin import KubeAPIStandIn
from tests.harness.sandbox import Sandbox
from tests.harness.watcher_env import Cluster, ovn_network

LEADING = re.compile(r"serving as the leader \(term (\d+)\)")
STANDING = re.compile(r"standing by as (\S+) ")


@pytest.fixture
def pair(tmp_path, collections_path):
    box, api, replicas = Sandbox(ovs=False), KubeAPIStandIn(), []
    try:
        for name in ("a", "b"):
            os.mkdir(str(tmp_path / name))
            replicas.append(Cluster(str(tmp_path / name), collections_path, api=api, box=box))
        for replica in replicas:
            assert replica.wait_ready(30), replica.log_text()
        yield api, box, replicas
    finally:
        for replica in replicas:
            replica.stop()
        api.stop()
        box.stop()


def identity(replica):
    found = STANDING.search(replica.log_text(whole=True))
    assert found, replica.log_text()
    return found.group(1)


def holder(api):
    lease = api.lease("kube-system", marks.WATCHER)
    return lease and lease["spec"].get("holderIdentity")


def leader(api, replicas, timeout=30):
    """The replica that holds the Lease and has taken the NB's term."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for replica in replicas:
            if replica.proc.poll() is None and holder(api) == identity(replica) and \
                    LEADING.search(replica.log_text(whole=True)):
                return replica
        time.sleep(0.05)
    raise AssertionError("no replica leads: " + "\n".join(r.log_text() for r in replicas))


def create(api, name):
    api.create_pod("ha", name, ovn_network({"name": "net1", "interface": "net0"}))


def judge(box, replicas):
    """What the NB's file says: the terms taken, in order; nothing under
    a stale term; each pod interface's port inserted once."""
    records = nb_history.read(os.path.join(box.dir, "ovnnb_db.db"))
    assert nb_history.stale_writes(records) == []
    assert nb_history.unattributed(records) == [], "a pod port written without a watcher's term"
    counts, terms = nb_history.port_inserts(records)
    assert counts and set(counts.values()) == {1}, dict((k, (v, terms[k])) for k, v in counts.items() if v != 1)
    return nb_history.takeovers(records)


def test_a_killed_leader_is_replaced(pair):
    api, box, replicas = pair
    first = leader(api, replicas)
    other = next(r for r in replicas if r is not first)
    create(api, "before")
    first.annotated("ha", "before")
    assert "serving as the leader" not in other.log_text(whole=True)       # the standby served nothing
    assert "pod ha/before" not in other.log_text(whole=True)
    killed = time.monotonic()
    first.proc.kill()
    create(api, "after")
    other.annotated("ha", "after", timeout=30)
    print("\nkill: first pod served by the new leader %.2f s after the kill" % (time.monotonic() - killed))
    assert leader(api, replicas) is other
    assert judge(box, replicas) == [(1, identity(first)), (2, identity(other))]


def test_a_paused_leader_wakes_fenced_and_exits(pair):
    """SIGSTOP the leader while pods arrive: the other takes over and
    serves them all; the paused one, woken, writes nothing under its old
    term and ends with exit code 3 (systemd would start it as a standby)."""
    api, box, replicas = pair
    first = leader(api, replicas)
    other = next(r for r in replicas if r is not first)
    names = ["burst-%d" % i for i in range(20)]
    for name in names[:10]:
        create(api, name)
    paused = time.monotonic()
    first.proc.send_signal(signal.SIGSTOP)
    try:
        for name in names[10:]:
            create(api, name)
        for name in names:
            other.annotated("ha", name, timeout=30)
        print("\nstop: every pod served %.2f s after the pause" % (time.monotonic() - paused))
        assert holder(api) == identity(other)
    finally:
        first.proc.send_signal(signal.SIGCONT)
    assert first.proc.wait(30) == 3, first.log_text()
    assert "leadership lost" in first.log_text(whole=True)
    takeovers = judge(box, replicas)
    assert takeovers == [(1, identity(first)), (2, identity(other))]
    # each pod was told one list, never rewritten by the woken one
    assert [len(api.iface_lists[("ha", n)]) for n in names] == [1] * len(names), api.iface_lists


def test_a_stopped_leader_hands_over_at_once(pair):
    api, box, replicas = pair
    first = leader(api, replicas)
    other = next(r for r in replicas if r is not first)
    stopped = time.monotonic()
    assert first.terminate() == 0, first.log_text()
    assert not holder(api) or holder(api) == identity(other)      # released: empty, or taken already
    create(api, "handed-over")
    other.annotated("ha", "handed-over", timeout=30)
    print("\nrelease: first pod served by the new leader %.2f s after SIGTERM" % (time.monotonic() - stopped))
    assert judge(box, replicas) == [(1, identity(first)), (2, identity(other))]
