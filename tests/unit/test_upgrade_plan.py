"""The rolling upgrade's plan (cluster/upgrade.py) and one node's record
(node/upgrade.py): the orders OVN's rules allow, the refusals, resuming."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import releases
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.upgrade_plan import Refused, done, plan
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import upgrade_node as node_upgrade

BOOKWORM = {"debian": "bookworm", "installed": {"ovs": "3.1.0-2+deb12u1", "ovn": "23.03.1-1~deb12u2"},
            "running": {"ovs": "ovs-vswitchd (Open vSwitch) 3.1.0", "ovn_controller": "ovn-controller 23.03.1",
                        "northd": None}, "pinned": False, "record": None}
TRIXIE = {"debian": "trixie", "installed": {"ovs": "3.5.0-1+b1", "ovn": "25.03.0-1"},
          "running": {"ovs": "ovs-vswitchd (Open vSwitch) 3.5.0", "ovn_controller": "ovn-controller 25.03.0",
                      "northd": None}, "pinned": False, "record": {"to": "trixie", "finished": 5.0}}


def node(name, base, central=False, chassis=True, **changes):
    made = dict(base, name=name, central=central, chassis=chassis, **changes)
    made["running"] = dict(base["running"], **changes.get("running", {}))
    if central:
        made["running"]["northd"] = made["running"]["northd"] or made["running"]["ovn_controller"].replace(
            "controller", "northd")
    return made


def lab(*upgraded):
    """The lab's shape: a master (central and chassis), two workers."""
    return [node(name, TRIXIE if name in upgraded else BOOKWORM, central=(name == "master"))
            for name in ("master", "worker1", "worker2")]


def test_bookworm_to_trixie_needs_the_fail_safe_order():
    with pytest.raises(Refused) as refused:
        plan(lab(), "trixie", "rolling")
    assert "OVN 23.03 -> 25.03 is outside OVN's rolling upgrade span" in str(refused.value)
    assert "as far as 24.03" in str(refused.value) and "upgrade_order=fail-safe" in str(refused.value)
    assert isinstance(refused.value, ValidationError)


def test_fail_safe_pins_then_central_first_then_chassis_then_unpins():
    made = plan(lab(), "trixie", "fail-safe")
    assert made["nodes"] == ["master", "worker1", "worker2"]
    assert made["pin"] == ["master", "worker1", "worker2"] and made["unpin"] == made["pin"]
    lines = made["lines"]
    assert lines[0].startswith("upgrade to trixie (Debian 13), OVN 23.03 -> 25.03, in the fail-safe order: 3 of 3")
    assert lines[1] == "pin ovn-controller to northd's version on master, worker1, worker2"
    assert lines[2].startswith("1. master (central+chassis): packages bookworm -> trixie; Open vSwitch 3.1 -> 3.5")
    # fail-safe: the member's database and northd before its controller
    assert "; central member (NB, SB, ovn-northd) 23.03 -> 25.03, the cluster's quorum kept; ovn-controller" \
        in lines[2]
    assert "central member" not in lines[3] and lines[3].startswith("2. worker1 (chassis)")
    assert lines[-1] == "unpin ovn-controller on master, worker1, worker2"


def test_rolling_within_the_span_takes_the_chassis_first():
    lts = dict(BOOKWORM, installed={"ovs": "3.1.0", "ovn": "23.03.1"})
    nodes = [node("master", lts, central=True), node("worker1", lts)]
    # 23.03 may roll to the next LTS, 24.03: pretend Debian shipped it
    releases.DEBIAN["test-lts"] = {"version": 13, "ovn": (24, 3), "ovs": (3, 3)}
    try:
        made = plan(nodes, "test-lts", "rolling")
    finally:
        del releases.DEBIAN["test-lts"]
    assert made["nodes"] == ["worker1", "master"] and made["pin"] == [] and made["unpin"] == []
    # rolling: a member that is a chassis too takes its controller before its database and northd
    assert made["lines"][-1].startswith("2. master (central+chassis): packages")
    assert "; ovn-controller 23.03 -> 24.03, its flows kept until it has computed new ones " \
        "(ovn-ofctrl-wait-before-clear); central member (NB, SB, ovn-northd) 23.03 -> 24.03" in made["lines"][-1]


def test_nothing_to_do_once_every_node_runs_the_target():
    made = plan(lab("master", "worker1", "worker2"), "trixie", "fail-safe")
    assert made["nodes"] == [] and made["pin"] == [] and made["unpin"] == []
    assert made["lines"][-1] == "nothing to do: every node runs trixie"
    # and in the rolling order too: no span to check when nothing moves
    assert plan(lab("master", "worker1", "worker2"), "trixie", "rolling")["nodes"] == []


def test_a_run_that_stopped_half_way_resumes_where_it_stopped():
    nodes = lab("master")
    nodes[1] = node("worker1", TRIXIE, record={"to": "trixie", "finished": None, "steps": {"packages": [1, 2]}},
                    running={"ovn_controller": "ovn-controller 23.03.1"}, pinned=True)
    nodes[2]["pinned"] = True
    made = plan(nodes, "trixie", "fail-safe")
    assert made["nodes"] == ["worker1", "worker2"]
    assert "(resumed: the last run stopped on this node)" in made["lines"][2]
    assert made["lines"][2].startswith("1. worker1 (chassis): packages: at trixie already")
    assert made["unpin"] == ["worker1", "worker2"]
    # finishing it in the rolling order would run controllers older than northd
    with pytest.raises(Refused) as refused:
        plan(nodes, "trixie", "rolling")
    assert "outside OVN's rolling upgrade span" in str(refused.value)


def test_packages_upgraded_but_a_daemon_on_the_old_release_is_not_done():
    half = node("worker1", TRIXIE, running={"ovs": "ovs-vswitchd (Open vSwitch) 3.1.0"})
    assert not done(half, "trixie")
    assert done(node("worker1", TRIXIE), "trixie")
    assert not done(node("master", TRIXIE, central=True, running={"northd": "ovn-northd 23.03.1"}), "trixie")


@pytest.mark.parametrize("nodes, target, order, words", [
    (lambda: lab("master", "worker1", "worker2"), "bookworm", "fail-safe", "a downgrade"),
    (lambda: [node("master", dict(BOOKWORM, installed={"ovn": "25.09.0"}), central=True)], "trixie", "fail-safe",
     "OVN 25.09 installed, newer than trixie's 25.03"),
    (lab, "forky", "fail-safe", "the target 'forky' is no Debian release the plan knows"),
    (lambda: [dict(n, debian="sid") for n in lab()], "trixie", "fail-safe", "runs Debian 'sid'"),
    (lab, "trixie", "sideways", "upgrade_order must be one of rolling, fail-safe"),
    (lambda: [node("worker1", BOOKWORM)], "trixie", "fail-safe", "no node of the inventory is a central member"),
    (lambda: [node("master", dict(BOOKWORM, installed={"ovs": "3.6.0-1"}), central=True)], "trixie", "fail-safe",
     "Open vSwitch 3.6 installed, newer than trixie's 3.5"),
    (lambda: [node("master", dict(BOOKWORM, installed={"central": "25.09.1-1"}), central=True)], "trixie",
     "fail-safe", "OVN's central 25.09 installed, newer than trixie's 25.03"),
])
def test_refusals_name_what_is_wrong(nodes, target, order, words):
    with pytest.raises(Refused) as refused:
        plan(nodes(), target, order)
    assert words in str(refused.value)


def test_versions_as_the_daemons_and_dpkg_say_them():
    assert releases.ovs_release("ovs-vswitchd (Open vSwitch) 3.5.0") == (3, 5)
    assert releases.ovs_release("3.1.0-2+deb12u1") == (3, 1)
    assert releases.ovs_release(None) is None
    assert releases.release("ovn-northd 25.03.0\nSB DB Schema 20.41.0") == (25, 3)


def test_the_record_starts_times_each_step_and_resumes_unfinished():
    record = node_upgrade.updated_record(None, "started", source="bookworm", target="trixie", now=1.0)
    assert record == {"from": "bookworm", "to": "trixie", "started": 1.0, "finished": None, "steps": {},
                      "attempts": 1}
    record = node_upgrade.updated_record(record, "start", "packages", now=2.0)
    record = node_upgrade.updated_record(record, "end", "packages", now=3.5)
    assert record["steps"] == {"packages": [2.0, 3.5]}
    # a second start of an unfinished upgrade keeps what was done
    assert node_upgrade.updated_record(record, "started", source="trixie", target="trixie", now=9.0) == record
    finished = node_upgrade.updated_record(record, "finished", now=4.0)
    assert finished["finished"] == 4.0 and record["finished"] is None
    # a finished record is begun afresh by the next upgrade
    assert node_upgrade.updated_record(finished, "started", source="trixie", target="forky", now=5.0)["steps"] == {}
    with pytest.raises(ValidationError):
        node_upgrade.updated_record(record, "start", "kernel")
    with pytest.raises(ValidationError):
        node_upgrade.updated_record(None, "end", "packages")


def test_dpkg_status_and_os_release(tmp_path):
    status = tmp_path / "status"
    status.write_text("Package: ovn-host\nStatus: install ok installed\nVersion: 25.03.0-1\n\n"
                      "Package: ovn-central\nStatus: deinstall ok config-files\nVersion: 23.03.1-1\n\n"
                      "Package: openvswitch-switch\nStatus: install ok installed\nDescription: x\n y\n"
                      "Version: 3.5.0-1\n")
    assert node_upgrade.installed_versions(["ovn-host", "ovn-central", "openvswitch-switch", "zzz"], str(status)) \
        == {"ovn-host": "25.03.0-1", "openvswitch-switch": "3.5.0-1"}
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nVERSION_CODENAME=trixie\n')
    assert node_upgrade.os_codename(str(release)) == "trixie"
    assert node_upgrade.os_codename(str(tmp_path / "none")) is None
