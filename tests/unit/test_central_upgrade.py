"""A central member's upgrade (node/upgrade_node.py, node/ovs_control.py):
cluster/status as OVS 3.1's ovsdb-server prints it, the drop-in that keeps
a mixed cluster's file format, and the record that keeps its history."""

import os

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import UPGRADE_DROPIN
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import upgrade_node
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node.ovs_control import (
    cluster_status, is_clustered, not_connected)

# captured from tests/harness/raft_env.py's cluster (OVS 3.1.0): the leader
# with every member up, then once member 15fc was killed
LEADER = """2c8f
Name: OVN_Northbound
Cluster ID: 2cbc (2cbc84a6-31b0-4143-ba64-222a9b1ae166)
Server ID: 2c8f (2c8f568f-edee-459d-9605-caada132219b)
Address: tcp:127.0.0.1:41951
Status: cluster member
Role: leader
Term: 1
Leader: self
Vote: self

Last Election started 29 ms ago, reason: timeout
Last Election won: 29 ms ago
Election timer: 1000
Log: [2, 5]
Entries not yet committed: 0
Entries not yet applied: 0
Connections: <-8f3d ->8f3d <-15fc ->15fc
Disconnections: 0
Servers:
    8f3d (8f3d at tcp:127.0.0.1:47301) next_index=5 match_index=4 last msg 7 ms ago
    15fc (15fc at tcp:127.0.0.1:52995) next_index=5 match_index=4 last msg 7 ms ago
    2c8f (2c8f at tcp:127.0.0.1:41951) (self) next_index=2 match_index=4
"""
LEADER_ONE_DOWN = LEADER.replace("Connections: <-8f3d ->8f3d <-15fc ->15fc",
                                 "Connections: <-8f3d ->8f3d (->15fc)").replace("Disconnections: 0",
                                                                                "Disconnections: 1")
# a follower that joined the cluster through bda7, once bda7 was killed: the
# connection it joined with has no server's name (0000)
FOLLOWER_ONE_DOWN = """f3ba
Name: OVN_Northbound
Cluster ID: 6fa6 (6fa68b86-784f-4386-a9f1-ff2eb2afe829)
Server ID: f3ba (f3ba8b86-09d6-4c55-b492-4b4ab4737ad8)
Address: tcp:127.0.0.1:43707
Status: cluster member
Role: follower
Term: 1
Leader: bda7
Vote: unknown

Election timer: 1000
Log: [2, 5]
Entries not yet committed: 0
Entries not yet applied: 0
Connections: (->0000) <-2f91 ->2f91
Disconnections: 1
Servers:
    2f91 (2f91 at tcp:127.0.0.1:45971)
    bda7 (bda7 at tcp:127.0.0.1:57605) last msg 17 ms ago
    f3ba (f3ba at tcp:127.0.0.1:43707) (self)
"""


def test_cluster_status_of_a_leader_with_every_member_up():
    status = cluster_status(LEADER)
    assert status["status"] == "cluster member" and status["role"] == "leader" and status["leader"] == "self"
    assert status["servers"] == [
        {"name": "8f3d", "address": "tcp:127.0.0.1:47301", "self": False},
        {"name": "15fc", "address": "tcp:127.0.0.1:52995", "self": False},
        {"name": "2c8f", "address": "tcp:127.0.0.1:41951", "self": True}]
    assert status["connected"] == {"8f3d": True, "15fc": True}
    assert not_connected(status) == []


def test_a_member_down_is_in_parentheses_and_named():
    assert not_connected(cluster_status(LEADER_ONE_DOWN)) == ["15fc at tcp:127.0.0.1:52995"]
    follower = cluster_status(FOLLOWER_ONE_DOWN)
    assert follower["role"] == "follower" and follower["leader"] == "bda7"
    assert follower["connected"] == {"0000": False, "2f91": True}
    assert not_connected(follower) == ["bda7 at tcp:127.0.0.1:57605"]


def test_a_member_alone_sees_no_one():
    alone = LEADER.replace("Connections: <-8f3d ->8f3d <-15fc ->15fc", "Connections: (->8f3d) (->15fc)")
    assert not_connected(cluster_status(alone)) == ["8f3d at tcp:127.0.0.1:47301", "15fc at tcp:127.0.0.1:52995"]


def test_clustered_by_the_file_s_magic(tmp_path):
    clustered, standalone = tmp_path / "c.db", tmp_path / "s.db"
    clustered.write_bytes(b"OVSDB CLUSTER 14752 10ee8067cf8a6d868c74\n{}\n")
    standalone.write_bytes(b"OVSDB JSON 14445 3828b0e1ab6c26c0b08dec3\n{}\n")
    assert is_clustered(str(clustered)) and not is_clustered(str(standalone))
    assert not is_clustered(str(tmp_path / "none.db"))


def dbs(tmp_path, nb_clustered=True, sb_clustered=False):
    out = []
    for db, clustered in zip(upgrade_node.CENTRAL_DBS, (nb_clustered, sb_clustered)):
        path = tmp_path / os.path.basename(db["file"])
        path.write_bytes(b"OVSDB CLUSTER 1 x\n" if clustered else b"OVSDB JSON 1 x\n")
        out.append(dict(db, file=str(path), ctl=str(tmp_path / "none.ctl")))
    return out


def test_the_drop_in_only_for_a_clustered_database_on_ovs_3_2_or_later(tmp_path):
    unitdir = tmp_path / "system"
    assert upgrade_node.write_dropins("3.1.0-2+deb12u1", dbs(tmp_path, True, True), str(unitdir)) == []
    assert upgrade_node.write_dropins(None, dbs(tmp_path, True, True), str(unitdir)) == []
    assert not unitdir.exists()
    written = upgrade_node.write_dropins("3.5.0-1+b1", dbs(tmp_path, True, False), str(unitdir))
    path = unitdir / "ovn-ovsdb-server-nb.service.d" / UPGRADE_DROPIN
    assert written == [str(path)]
    assert path.read_text().endswith(
        "[Service]\nExecStart=\nExecStart=/usr/share/ovn/scripts/ovn-ctl run_nb_ovsdb $OVN_CTL_OPTS "
        "-- --disable-file-no-data-conversion\n")
    assert not (unitdir / "ovn-ovsdb-server-sb.service.d").exists()
    # written once: a second run (a resumed upgrade) changes nothing
    assert upgrade_node.write_dropins("3.5.0-1+b1", dbs(tmp_path, True, False), str(unitdir)) == []
    sb = upgrade_node.write_dropins("3.5.0-1+b1", dbs(tmp_path, True, True), str(unitdir))
    assert sb == [str(unitdir / "ovn-ovsdb-server-sb.service.d" / UPGRADE_DROPIN)]
    assert "run_sb_ovsdb $OVN_CTL_OPTS -- --disable" in open(sb[0]).read()


def test_settled_removes_the_drop_ins_once(tmp_path, monkeypatch):
    """No server answers here (the functional test has real ones): the
    drop-in goes, systemd reloads once, and a second run changes nothing."""
    reloads = []
    monkeypatch.setattr(upgrade_node, "systemctl", lambda *args: reloads.append(args))
    monkeypatch.setattr(upgrade_node, "OVN_RUNDIR", str(tmp_path / "run"))
    unitdir = str(tmp_path / "system")
    central = dbs(tmp_path, True, True)
    written = upgrade_node.write_dropins("3.5.0-1", central, unitdir)
    changed, done = upgrade_node.settle(True, central, unitdir)
    assert changed and done == {"enabled": [], "removed": written}
    assert all(os.path.exists(path) for path in written) and reloads == []
    changed, done = upgrade_node.settle(False, central, unitdir)
    assert changed and done["removed"] == written and reloads == [("daemon-reload",)]
    assert os.listdir(unitdir) == []
    unchanged = (False, {"enabled": [], "removed": []})
    assert upgrade_node.settle(False, central, unitdir) == unchanged
    assert reloads == [("daemon-reload",)]


def test_a_finished_node_planned_again_keeps_its_history():
    first = upgrade_node.updated_record(None, "started", source="bookworm", target="trixie", now=1.0)
    first = upgrade_node.updated_record(first, "start", "packages", now=2.0)
    first = upgrade_node.updated_record(first, "end", "packages", now=3.0)
    first = upgrade_node.updated_record(first, "finished", now=4.0)
    # the node was read with a daemon down: planned again, from trixie to trixie
    again = upgrade_node.updated_record(first, "started", source="trixie", target="trixie", now=10.0)
    assert again == {"from": "bookworm", "to": "trixie", "started": 1.0, "finished": None, "steps": {},
                     "attempts": 2, "previous": first}
    # resumed while unfinished: unchanged
    assert upgrade_node.updated_record(again, "started", source="trixie", target="trixie", now=11.0) == again
    third = upgrade_node.updated_record(upgrade_node.updated_record(again, "finished", now=12.0), "started",
                                        source="trixie", target="trixie", now=20.0)
    assert third["attempts"] == 3 and third["started"] == 1.0 and third["from"] == "bookworm"
    assert third["previous"]["finished"] == 12.0 and "previous" not in third["previous"]
    # the next upgrade begins afresh, the last one kept under previous
    forky = upgrade_node.updated_record(third, "started", source="trixie", target="forky", now=30.0)
    assert forky["from"] == "trixie" and forky["started"] == 30.0 and forky["attempts"] == 1
    assert forky["previous"]["to"] == "trixie" and "previous" not in forky["previous"]


def test_a_record_of_an_older_release_counts_one_attempt():
    old = {"from": "bookworm", "to": "trixie", "started": 1.0, "finished": 4.0, "steps": {}}
    assert upgrade_node.updated_record(old, "started", source="trixie", target="trixie", now=5.0)["attempts"] == 2


def test_prepared_writes_the_drop_ins_right_after_the_packages(tmp_path, monkeypatch):
    """state prepared: with OVS 3.5 installed, a clustered database's
    drop-in before its member's central step; check mode writes none; a
    second run changes nothing; on OVS 3.1 there is nothing to prepare."""
    reloads, installed = [], {"openvswitch-switch": "3.5.0-1+b1"}
    monkeypatch.setattr(upgrade_node, "systemctl", lambda *args: reloads.append(args))
    monkeypatch.setattr(upgrade_node, "installed_versions", lambda names: dict(installed))
    unitdir, central = str(tmp_path / "system"), dbs(tmp_path, True, True)
    wanted = [os.path.join(unitdir, unit + ".service.d", UPGRADE_DROPIN)
              for unit in ("ovn-ovsdb-server-nb", "ovn-ovsdb-server-sb")]
    assert upgrade_node.prepare(True, central, unitdir) == (True, wanted)
    assert not os.path.exists(unitdir) and reloads == []
    assert upgrade_node.prepare(False, central, unitdir) == (True, wanted)
    assert all(os.path.exists(p) for p in wanted) and reloads == [("daemon-reload",)]
    assert upgrade_node.prepare(True, central, unitdir) == (False, [])
    assert upgrade_node.prepare(False, central, unitdir) == (False, [])
    assert reloads == [("daemon-reload",)]
    installed["openvswitch-switch"] = "3.1.0-2+deb12u1"
    other = str(tmp_path / "other")
    assert upgrade_node.prepare(True, central, other) == (False, [])
    assert upgrade_node.prepare(False, central, other) == (False, []) and not os.path.exists(other)
