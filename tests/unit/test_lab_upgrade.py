"""The pure parts of ``lab upgrade`` (lab/upgrade.py, lab/flows.py,
lab/upgrade_repo.py): which lost probes were an upgraded node's doing,
the gaps and counts per window, the command's last line and the upgrade
repository's index. ``make lab-upgrade`` runs the whole thing."""

import os
import socket

import pytest

from lab import flows, upgrade, upgrade_repo

# upgrade.json of two nodes, one after the other (epoch seconds)
RECORDS = {
    "master": {"from": "bookworm", "to": "trixie", "started": 100.0, "finished": 150.0,
               "steps": {"packages": [101.0, 140.0], "central": [140.0, 149.0]}},
    "worker1": {"from": "bookworm", "to": "trixie", "started": 160.0, "finished": 200.0,
                "steps": {"packages": [160.0, 190.0], "ovs": [190.0, 195.0], "ovn-controller": [195.0, 199.0]}},
    "worker2": None,
}


def test_a_probe_lost_while_one_of_its_ends_was_upgraded_is_touched():
    windows = upgrade.node_windows(RECORDS, now=300.0)
    assert windows == {"master": (100.0, 150.0), "worker1": (160.0, 200.0)}
    # worker1 was being upgraded at 192: a worker1-worker2 flow's loss is its doing
    assert upgrade.untouched([192.0], ["worker1", "worker2"], windows) == []
    # the same moment, a flow between the master and worker2 was not touched
    assert upgrade.untouched([192.0], ["master", "worker2"], windows) == [192.0]


def test_a_probe_lost_while_nothing_was_upgraded_is_untouched():
    windows = upgrade.node_windows(RECORDS, now=300.0)
    # before, between and after the nodes' windows
    assert upgrade.untouched([50.0, 155.0, 250.0], ["worker1", "worker2"], windows) == [50.0, 155.0, 250.0]
    # the windows' edges belong to them
    assert upgrade.untouched([160.0, 200.0], ["worker1"], windows) == []


def test_an_unfinished_upgrade_lasts_until_the_end_of_the_measurement():
    records = {"worker2": {"started": 210.0, "finished": None, "steps": {"packages": [210.0, None]}}}
    windows = upgrade.node_windows(records, now=300.0)
    assert windows == {"worker2": (210.0, 300.0)}
    assert upgrade.step_windows(records, 300.0) == [("worker2", "packages", 210.0, 300.0)]
    assert upgrade.untouched([299.0], ["worker2"], windows) == []


def test_steps_come_in_the_order_they_started():
    steps = upgrade.step_windows(RECORDS, 300.0)
    assert [(n, s) for n, s, _a, _b in steps] == [
        ("master", "packages"), ("master", "central"), ("worker1", "packages"), ("worker1", "ovs"),
        ("worker1", "ovn-controller")]


def flow_result(sent_at, answered, ended=None):
    flow = flows.Flow({"name": "f", "proto": "tcp", "dst": "10.0.0.1", "port": 80})
    flow.sent_at = list(sent_at)
    flow.answered = bytearray(answered)
    return flow.result(ended if ended is not None else sent_at[-1])


def test_the_longest_gap_is_between_two_answered_probes():
    # probes every 10 ms; 3 to 7 lost: the gap runs from probe 2's send to probe 8's
    sent = [10.0 + i * 0.01 for i in range(12)]
    answered = [1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    result = flow_result(sent, answered)
    assert result["sent"] == 12 and result["lost"] == 5
    assert result["lost_at"] == [round(sent[i], 3) for i in range(3, 8)]
    assert result["max_gap_ms"] == pytest.approx(60.0, abs=0.2)
    assert result["gaps"] == [[round(sent[2], 3), round(sent[8], 3)]]


def test_an_outage_at_the_end_is_a_gap_too():
    # nothing answered after probe 1: the gap runs to the last probe sent
    sent = [10.0 + i * 0.01 for i in range(10)]
    result = flow_result(sent, [1, 1] + [0] * 8)
    assert result["max_gap_ms"] == pytest.approx(80.0, abs=0.2)
    assert result["lost"] == 8


def test_a_flow_with_nothing_lost_has_the_probes_interval_as_its_longest_gap():
    sent = [10.0 + i * 0.01 for i in range(50)]
    result = flow_result(sent, [1] * 50)
    assert result["lost"] == 0 and result["gaps"] == []
    assert result["max_gap_ms"] == pytest.approx(10.0, abs=0.2)
    assert sum(result["buckets"]["counts"]) == 50


def test_a_late_answer_is_a_lost_probe():
    flow = flows.Flow({"name": "f", "proto": "udp", "dst": "127.0.0.1", "port": 9})
    try:
        flow.sent_at, flow.answered = [10.0, 10.01], bytearray(2)
        flow.answer(0, "srv 10.0.0.2", 10.5)
        flow.answer(1, "srv 10.0.0.2", 10.01 + flows.LATE_S + 0.1)
        assert list(flow.answered) == [1, 0]
        assert flow.by == {"srv 10.0.0.2": 1}
    finally:
        flow.sock.close()


def test_an_echo_names_its_probe_and_who_answered():
    assert flows.parse_echo(b"42 1795.123456 web-w1 172.16.44.5\n") == (42, "web-w1 172.16.44.5")
    assert flows.parse_echo(b"seen 10.0.0.1 pod\n") is None
    assert flows.parse_echo(b"7 1.0\n") is None


def test_counts_and_gaps_per_window():
    measured = [flow_result([10.0 + i * 0.01 for i in range(300)], [1] * 100 + [0] * 50 + [1] * 150)]
    # the outage lies in [11.0, 11.5); the windows before and after it see no gap over 20 ms
    assert upgrade.tally(measured, 11.0, 11.5) == {"sent": 50, "lost": 50, "max_gap_ms": pytest.approx(510.0, abs=1)}
    assert upgrade.tally(measured, 10.0, 10.95)["lost"] == 0
    assert upgrade.tally(measured, 10.0, 10.95)["max_gap_ms"] == 0.0
    assert upgrade.tally(measured, 10.0, 13.0)["sent"] == 300


def test_a_window_shorter_than_a_bucket_gets_its_share_of_the_probes():
    buckets = {"start": 10.0, "width": 0.1, "counts": [10, 10, 10]}
    assert upgrade.sent_between(buckets, 10.0, 10.3) == 30
    assert upgrade.sent_between(buckets, 10.12, 10.14) == 2
    assert upgrade.sent_between(buckets, 10.05, 10.25) == 20
    assert upgrade.sent_between(buckets, 11.0, 12.0) == 0


def test_the_time_no_node_was_upgraded():
    windows = upgrade.node_windows(RECORDS, 300.0)
    assert upgrade.idle_spans(windows, 90.0, 210.0) == [(90.0, 100.0), (150.0, 160.0), (200.0, 210.0)]
    assert upgrade.idle_spans(windows, 120.0, 170.0) == [(150.0, 160.0)]


def test_phase_rows_name_each_node_its_steps_and_the_rest():
    measured = [flow_result([95.0 + i * 0.1 for i in range(1100)], [1] * 1100)]
    rows = upgrade.phase_rows(measured, RECORDS, 95.0, 205.0)
    assert [r[0] for r in rows] == ["master", "master:packages", "master:central", "worker1", "worker1:packages",
                                    "worker1:ovs", "worker1:ovn-controller", "no-upgrade"]
    assert dict((r[0], r[3]["sent"]) for r in rows)["no-upgrade"] == 50 + 100 + 50


def test_a_flow_to_the_external_host_ends_on_each_gateway_it_left_by():
    flow = {"name": "w1-ext", "ends": ["external", "worker1"], "kind": "external"}
    gateways = {"192.168.50.12": "worker1", "192.168.50.13": "worker2"}
    measured = {"answered_by": {"external 192.168.50.13": 7, "external 192.168.50.12": 0}}
    assert upgrade.ends(flow, measured, gateways) == ["external", "worker1", "worker2"]
    # a pod's flow keeps its two ends whoever answered
    assert upgrade.ends(dict(flow, kind="pod"), measured, gateways) == ["external", "worker1"]


def test_the_last_line():
    measured = [{"sent": 1000, "lost": 3, "max_gap_ms": 40.4}, {"sent": 500, "lost": 0, "max_gap_ms": 1234.6}]
    assert upgrade.last_line(3, measured, 0, True, (26, 26)) == (
        "upgrade: from=bookworm to=trixie nodes=3 sent=1500 lost=3 max_gap_ms=1235 untouched_lost=0 "
        "audit_clean=yes links_ok=26/26")
    assert upgrade.last_line(1, [], 2, False, (0, 4)).endswith("untouched_lost=2 audit_clean=no links_ok=0/4")


def test_ovsdb_json_rows():
    text = ('{"headings": ["_uuid", "name", "load_balancer", "external_ids"], "data": ['
            '[["uuid", "a1"], "GR_w1", ["set", [["uuid", "b1"], ["uuid", "b2"]]], ["map", [["ovn4nfv-node", "w1"]]]],'
            '[["uuid", "a2"], "GR_w2", ["uuid", "b3"], ["map", []]]]}')
    rows = upgrade.ovsdb_rows(text)
    assert rows[0] == {"_uuid": "a1", "name": "GR_w1", "load_balancer": ["b1", "b2"],
                       "external_ids": {"ovn4nfv-node": "w1"}}
    assert rows[1]["load_balancer"] == "b3" and rows[1]["external_ids"] == {}


INDEX = """Package: adduser
Version: 3.152
Filename: ./adduser_3.152_all.deb
Size: 5
Description: add and remove users and groups
 This package includes the 'adduser' and 'deluser' commands.
 .
 More.

Package: ovn-host
Version: 25.03.0-1
Filename: ./ovn-host_25.03.0-1_amd64.deb
Size: 3
"""


def test_the_repository_index_is_read_stanza_by_stanza():
    stanzas = upgrade_repo.read_index(INDEX)
    assert [s["Package"] for s in stanzas] == ["adduser", "ovn-host"]
    assert stanzas[0]["Description"].splitlines()[1:] == ["This package includes the 'adduser' and 'deluser' commands.",
                                                          ".", "More."]
    assert stanzas[1]["Filename"] == "./ovn-host_25.03.0-1_amd64.deb" and stanzas[1]["Size"] == "3"


def test_a_repository_is_whole_when_every_package_it_lists_is_there(tmp_path):
    assert upgrade_repo.check_index(str(tmp_path)) == ["no Packages in %s" % tmp_path]
    (tmp_path / "Packages").write_text(INDEX)
    (tmp_path / "adduser_3.152_all.deb").write_bytes(b"12345")
    wrong = upgrade_repo.check_index(str(tmp_path))
    assert wrong == ["ovn-host: ./ovn-host_25.03.0-1_amd64.deb is missing"]
    (tmp_path / "ovn-host_25.03.0-1_amd64.deb").write_bytes(b"1234")
    assert upgrade_repo.check_index(str(tmp_path)) == [
        "ovn-host: ./ovn-host_25.03.0-1_amd64.deb has 4 bytes, the index says 3"]
    (tmp_path / "ovn-host_25.03.0-1_amd64.deb").write_bytes(b"123")
    assert upgrade_repo.check_index(str(tmp_path)) == []
    assert upgrade_repo.built_from(str(tmp_path)) is None
    (tmp_path / upgrade_repo.STAMP).write_text("sha256:abc\n")
    assert upgrade_repo.built_from(str(tmp_path)) == "sha256:abc"


def test_the_nodes_source_is_the_flat_repository_they_see():
    text = upgrade_repo.node_sources("trixie")
    assert text == "Types: deb\nURIs: file:/srv/ovn4nfv-debs/trixie\nSuites: ./\nTrusted: yes\n"
    assert os.path.join(upgrade_repo.DEBS_MOUNT, "trixie") in text
    assert "Suites: trixie\n" in upgrade_repo.sources("trixie")


def test_each_tcp_probe_takes_its_own_source_port_in_turn():
    """No 4-tuple of a TCP probe comes back within a run (OVS 3.1's
    userspace conntrack aborts on a port taken again too soon)."""
    ports = flows.SourcePorts(first=40000, last=40003)
    assert [ports.take() for _n in range(5)] == [40000, 40001, 40002, 40000, 40001]
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        taken.bind(("0.0.0.0", 0))
        busy = taken.getsockname()[1]
        ports = flows.SourcePorts(first=busy, last=busy + 50)
        sock = flows.tcp_client(None, ports)        # the busy port is passed over
        try:
            assert busy < sock.getsockname()[1] < busy + 50
        finally:
            sock.close()
        with pytest.raises(OSError):
            flows.tcp_client(None, flows.SourcePorts(first=busy, last=busy + 1), tries=3)
    finally:
        taken.close()


OUTPUT = """PLAY [The plan, and every check before anything changes] ***

TASK [Plan by OVN's rules] *****************************************************
ok: [master]

TASK [Show it] *****************************************************************
ok: [master] => {
    "msg": [
        "upgrade to trixie (Debian 13), OVN 23.03 -> 25.03, in the fail-safe order: 1 of 3 nodes to do",
        "1. worker2 (chassis): packages: at trixie already (resumed: the last run stopped on this node)"
    ]
}

TASK [The node's other apt sources that name the old release] ******************
"""


def test_the_plan_and_the_refusal_as_upgrade_yml_prints_them():
    assert upgrade.shown_plan(OUTPUT) == [
        "upgrade to trixie (Debian 13), OVN 23.03 -> 25.03, in the fail-safe order: 1 of 3 nodes to do",
        "1. worker2 (chassis): packages: at trixie already (resumed: the last run stopped on this node)"]
    assert upgrade.shown_plan("PLAY [x] ***\n") == []
    said = ("OVN 23.03 -> 25.03 is outside OVN's rolling upgrade span (from 23.03 it goes as far as 24.03): "
            "run it in the fail-safe order")
    text = 'TASK [Plan by OVN\'s rules] ***\nfatal: [master]: FAILED! => {"changed": false, "msg": "%s"}\n' % said
    assert upgrade.refusal(text) == said
    assert upgrade.refusal(OUTPUT) is None
