"""A central member's upgrade against real daemons: the check before a
member restarts on raft_env's RAFT northbound (three ovsdb-server
processes), and a control socket that never answers."""

import os
import signal
import time

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import upgrade_node
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node.ovs_control import cluster_status, unixctl
from tests.harness.raft_env import Northbound


def member(nb, index):
    return {"name": "OVN_Northbound", "unit": "ovn-ovsdb-server-nb", "command": "run_nb_ovsdb",
            "file": os.path.join(nb.dir, "m%d.db" % index), "ctl": os.path.join(nb.dir, "m%d.ctl" % index)}


@pytest.fixture
def cluster():
    nb = Northbound(3)
    try:
        yield nb
    finally:
        nb.close()


def refusal(dbs, timeout=30):
    """The UpgradeFailed that central_ready raises once the member sees
    the killed one gone (its connection's end is an event the member
    notices on its next poll): at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            upgrade_node.central_ready(dbs)
        except upgrade_node.UpgradeFailed as exc:
            return str(exc)
        time.sleep(0.05)
    raise AssertionError("still ready %d s after a member was killed" % timeout)


def test_every_member_up_then_one_killed_is_refused_naming_it(cluster, tmp_path, monkeypatch):
    assert upgrade_node.central_ready([member(cluster, 0)]) == {"OVN_Northbound": "3 of 3 servers connected"}
    # what the central step waits for after its restart: a member of a cluster with a leader
    assert upgrade_node._cluster_ok((member(cluster, 1)["ctl"], "OVN_Northbound"))() is True
    error, answer = unixctl(None, None, "cluster/status", ["OVN_Northbound"], target=member(cluster, 2)["ctl"])
    assert error is None
    own = cluster_status(answer)
    killed = [s for s in own["servers"] if s["self"]][0]
    cluster.stop(2)
    message = refusal([member(cluster, 0)])
    assert "%s at %s" % (killed["name"], killed["address"]) in message
    assert "OVN_Northbound: this member does not see" in message
    # and restart_central restarts nothing: no systemctl, no drop-in
    ran = []
    monkeypatch.setattr(upgrade_node, "systemctl", lambda *args: ran.append(args))
    with pytest.raises(upgrade_node.UpgradeFailed):
        upgrade_node.restart_central(5, dbs=[member(cluster, 1)], unitdir=str(tmp_path))
    assert ran == [] and os.listdir(str(tmp_path)) == []


def test_a_standalone_database_and_a_member_not_running_pass():
    single = Northbound(1)
    try:
        db = member(single, 0)
        assert upgrade_node.central_ready([db]) == {"OVN_Northbound": "standalone"}
        assert upgrade_node._cluster_ok((db["ctl"], "OVN_Northbound"))() is True
        assert not upgrade_node.is_clustered(db["file"])
        single.stop(0)
        found = upgrade_node.central_ready([db])["OVN_Northbound"]
        assert found.startswith("not answering")
    finally:
        single.close()


def test_a_hung_daemon_is_an_error_within_the_timeout(cluster):
    ctl = member(cluster, 0)["ctl"]
    assert upgrade_node.is_clustered(member(cluster, 0)["file"])
    os.kill(cluster.pids[0], signal.SIGSTOP)
    try:
        began = time.monotonic()
        error, answer = unixctl(None, None, "version", target=ctl, timeout=1.0)
        took = time.monotonic() - began
    finally:
        os.kill(cluster.pids[0], signal.SIGCONT)
    assert answer is None and "no answer to version within 1 s" in error and 0.9 < took < 5
    error, answer = unixctl(None, None, "version", target=ctl, timeout=5.0)
    assert error is None and answer.startswith("ovsdb-server (Open vSwitch)")
