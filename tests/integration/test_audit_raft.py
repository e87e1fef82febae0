"""network_audit on a RAFT central: three real ovsdb-server processes
holding one clustered northbound on loopback. Healthy, the audit finds
nothing of the cluster; with a member stopped, that member is not part of
it; with two stopped, the last one loses its leadership (an event read
from its own _Server database) and the audit says the northbound has no
leader, and that it skipped the classes that needed it."""

import select
import subprocess
import time

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import servers

from tests.harness.playbook import run_playbook
from tests.harness.raft_env import Northbound


@pytest.fixture
def nb_cluster(tmp_path):
    """``(remotes, stop(i))``: the three members' client sockets, and a
    way to stop one; every server is stopped at the end."""
    with Northbound(3, base=str(tmp_path)) as nb:
        yield nb.remotes, nb.stop


def wait_alone(remote, timeout=30):
    """Follow ``remote``'s own _Server database (``ovsdb-client monitor``)
    and, at each update it sends, read that server's view again: True once
    it says it is neither the northbound's leader nor connected to a
    majority (a leader steps down first, and says it is cut off a moment
    later), within ``timeout`` seconds."""
    proc = subprocess.Popen(["ovsdb-client", "monitor", remote, "_Server", "Database", "name,leader,connected",
                             "--format=json"], stdout=subprocess.PIPE, universal_newlines=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            row = servers(remote, "OVN_Northbound", 5)[remote]
            if isinstance(row, dict) and not row["leader"] and not row["connected"]:
                return True
            ready, _w, _x = select.select([proc.stdout], [], [], max(deadline - time.monotonic(), 0))
            if not ready or not proc.stdout.readline():
                break
        return False
    finally:
        proc.kill()
        proc.wait(10)


def test_network_audit_judges_the_raft_members(nb_cluster, collections_path):
    remotes, stop = nb_cluster
    db = ",".join(remotes)

    def audit(name):
        return {"name": name, "ovn4nfv.k8s.network_audit": {"db": db, "sb_db": "", "timeout": 6}}

    r, proc = run_playbook(collections_path, [audit("healthy")])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert r["healthy"]["findings"] == []

    stop(2)
    r, proc = run_playbook(collections_path, [audit("one_down")])
    assert proc.returncode == 0, proc.stdout[-4000:]
    [down] = r["one_down"]["findings"]
    assert (down["class"], down["severity"], down["objects"]) == ("raft_member", "warning", [remotes[2]])
    assert "OVN_Northbound member %s does not answer" % remotes[2] in down["message"]

    stop(1)
    assert wait_alone(remotes[0]), "the last member never said it lost the others"
    r, proc = run_playbook(collections_path, [audit("no_quorum")])
    assert proc.returncode == 0, proc.stdout[-4000:]
    found = dict((f["class"] + ":" + f["objects"][0], f) for f in r["no_quorum"]["findings"])
    assert sorted(found) == sorted(["raft_member:" + remotes[0], "raft_member:" + remotes[1],
                                    "raft_member:" + remotes[2], "raft_leader:OVN_Northbound"])
    assert "is cut off from the other members" in found["raft_member:" + remotes[0]]["message"]
    assert found["raft_leader:OVN_Northbound"]["severity"] == "error"
    assert "leaked_port" in r["no_quorum"]["skipped"], "what needed the northbound is said skipped"
