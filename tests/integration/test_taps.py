"""traffic_tap through ansible-playbook against a real Open vSwitch: check
mode that writes nothing, create, a second run that changes nothing,
gathered, rendered, refusals that name the part and write nothing, and a
delete that leaves nothing. (Its copies on a real data plane:
tests/functional/test_dataplane.py.)"""

import shlex

from playbook import run_playbook
from sandbox import rows_from_json, stable_dump

TAP = {"name": "web-tap", "source": {"pod": "web", "interface": "net0"},
       "collector": {"port": "default_col_eth1"}, "direction": "egress"}


def tasks(box):
    dump = " && ".join(" ".join(shlex.quote(a) for a in cmd) for cmd in box.dump_commands("ovs"))

    def snapshot(name):
        return {"name": name, "ansible.builtin.shell": dump, "changed_when": False}

    def tap(name, config, state="merged", check=False, fail=False):
        task = {"name": name, "ovn4nfv.k8s.traffic_tap": {"config": config, "state": state, "db": box.ovs_db},
                "diff": True}
        if check:
            task["check_mode"] = True
        if fail:
            task["ignore_errors"] = True
        return task

    return [
        snapshot("dump0"),
        tap("create_check", [TAP], check=True),
        snapshot("dump1"),
        tap("create", [TAP]),
        tap("create_again", [TAP]),
        {"name": "mirrors", "ansible.builtin.command": {
            "argv": ["ovsdb-client", "-f", "json", "dump", box.ovs_db, "Open_vSwitch", "Mirror"]},
            "changed_when": False},
        tap("rendered", [dict(TAP, direction="both")], state="rendered"),
        {"name": "gathered", "ovn4nfv.k8s.traffic_tap": {"state": "gathered", "db": box.ovs_db}},
        snapshot("dump2"),
        tap("bad_direction", [dict(TAP, direction="sideways")], fail=True),
        tap("bad_same_ends", [dict(TAP, collector={"pod": "web", "interface": "net0"})], fail=True),
        tap("bad_both_forms", [dict(TAP, source={"pod": "web", "interface": "net0", "port": "x"})], fail=True),
        tap("bad_name", [dict(TAP, name="Web_Tap")], fail=True),
        snapshot("dump3"),
        tap("delete", [{"name": "web-tap"}], state="deleted"),
        tap("delete_again", [{"name": "web-tap"}], state="deleted"),
    ]


def test_traffic_tap_lifecycle(sandbox, collections_path):
    box = sandbox
    box.vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev")
    for port, iface_id in (("veth-web", "default_web_net0"), ("veth-col", "default_col_eth1")):
        box.vsctl("add-port", "br-int", port, "--", "set", "interface", port, "type=internal",
                  "external_ids:iface-id=" + iface_id)
    results, proc = run_playbook(collections_path, tasks(box))
    assert proc.returncode == 0, proc.stdout[-4000:]
    r = results
    assert r["create_check"]["changed"] is True and r["create_check"]["diff"]["after"]
    assert stable_dump(r["dump0"]["stdout"]) == stable_dump(r["dump1"]["stdout"]), "check mode wrote"
    assert r["create"]["changed"] is True
    assert r["create"]["after"] == [{"name": "web-tap", "source": "default_web_net0",
                                     "collector": "default_col_eth1", "direction": "egress"}]
    assert r["create_again"]["changed"] is False and r["create_again"]["operations"] == []
    assert r["rendered"]["changed"] is False and r["rendered"]["rendered"]
    assert [t["name"] for t in r["gathered"]["gathered"]] == ["web-tap"]
    ports = dict((p["_uuid"], p["name"]) for p in box.rows("ovs", "Port"))
    [mirror] = rows_from_json(r["mirrors"]["stdout"])
    assert ports[mirror["select_src_port"]] == "veth-web" and mirror["select_dst_port"] == []
    assert ports[mirror["output_port"]] == "veth-col"
    for case, words in (("bad_direction", ["direction", "sideways"]),
                        ("bad_same_ends", ["config[0].collector", "source too"]),
                        ("bad_both_forms", ["config[0].source", "not both"]),
                        ("bad_name", ["config[0].name", "Web_Tap"])):
        assert r[case].get("failed") is True, case
        for word in words:
            assert word in r[case]["msg"], (case, word, r[case]["msg"])
    assert stable_dump(r["dump2"]["stdout"]) == stable_dump(r["dump3"]["stdout"]), "a refusal wrote"
    assert r["delete"]["changed"] is True and r["delete_again"]["changed"] is False
    assert box.rows("ovs", "Mirror") == []
    assert not [k for k in box.rows("ovs", "Open_vSwitch")[0]["external_ids"] if k.startswith("ovn4nfv-tap")]
