"""traffic_tap through ansible-playbook against a real Open vSwitch: check
mode that writes nothing, create, a second run that changes nothing,
gathered, rendered, refusals that name the part and write nothing, and a
delete that leaves nothing. (Its copies on a real data plane:
tests/functional/test_dataplane.py.)"""

import json
import shlex

from tests.harness.playbook import run_playbook
from test_examples import examples
from tests.harness.sandbox import rows_from_json, stable_dump

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


REMOTE = {"name": "web-gre", "source": {"pod": "web", "interface": "net0"},
          "collector": {"address": "10.20.0.9", "encapsulation": "gre", "key": 7}, "direction": "egress"}


def remote_tasks(box, both_supported):
    dump = " && ".join(" ".join(shlex.quote(a) for a in cmd) for cmd in box.dump_commands("nb"))

    def snapshot(name):
        return {"name": name, "ansible.builtin.shell": dump, "changed_when": False}

    def tap(name, config, state="merged", check=False, fail=False, kind="remote"):
        task = {"name": name, "ovn4nfv.k8s.traffic_tap": {
            "kind": kind, "config": config, "state": state,
            "db": box.nb_db if kind == "remote" else box.ovs_db}, "diff": True}
        if check:
            task["check_mode"] = True
        if fail:
            task["ignore_errors"] = True
        return task

    erspan = dict(REMOTE, collector={"address": "10.20.0.9", "encapsulation": "erspan", "key": 7})
    # the module's own remote example, as written, but for its database
    example = [dict(t) for t in examples("traffic_tap") if t["ovn4nfv.k8s.traffic_tap"].get("kind") == "remote"][0]
    example["ovn4nfv.k8s.traffic_tap"] = dict(example["ovn4nfv.k8s.traffic_tap"], db=box.nb_db)
    return [
        snapshot("dump0"),
        tap("create_check", [REMOTE], check=True),
        snapshot("dump1"),
        tap("create", [REMOTE]),
        tap("create_again", [REMOTE]),
        {"name": "gathered", "ovn4nfv.k8s.traffic_tap": {"kind": "remote", "state": "gathered", "db": box.nb_db}},
        tap("rendered", [dict(REMOTE, direction="ingress")], state="rendered"),
        snapshot("dump2"),
        tap("bad_long_name", [dict(REMOTE, name="web-gre-tap-12")], fail=True),
        tap("bad_loopback", [dict(REMOTE, collector={"address": "127.0.0.1"})], fail=True),
        tap("bad_erspan_key", [dict(erspan, collector=dict(erspan["collector"], key=2000))], fail=True),
        tap("bad_pod_collector", [dict(REMOTE, collector={"pod": "col", "interface": "eth1"})], fail=True),
        tap("bad_address_on_node", [dict(REMOTE, collector={"address": "10.20.0.9"})], fail=True, kind="node"),
        tap("both", [dict(REMOTE, name="web-both", direction="both")], fail=not both_supported),
        tap("delete_both", [{"name": "web-both"}], state="deleted"),
        snapshot("dump3"),
        tap("bad_same_key", [dict(REMOTE, name="web-gre2", source={"port": "default_web_net1"})], fail=True),
        tap("to_erspan", [dict(erspan, source={"port": "default_web_net1"},
                               collector=dict(erspan["collector"], key=8))]),
        dict(example, name="example"),
        {"name": "mirrors", "ansible.builtin.command": {
            "argv": ["ovsdb-client", "-f", "json", "dump", box.nb_db, "OVN_Northbound", "Mirror"]},
            "changed_when": False},
        {"name": "ports", "ansible.builtin.command": {
            "argv": ["ovsdb-client", "-f", "json", "dump", box.nb_db, "OVN_Northbound", "Logical_Switch_Port"]},
            "changed_when": False},
        tap("delete", [{"name": "web-gre"}, {"name": "web-erspan"}], state="deleted"),
        tap("delete_again", [{"name": "web-gre"}, {"name": "web-erspan"}], state="deleted"),
    ]


def test_traffic_tap_to_a_remote_collector_lifecycle(sandbox, collections_path):
    """A remote tap is an OVN Mirror and its source port's mirror_rules:
    check mode, create, idempotence, gathered, rendered, refusals that write
    nothing, a change of encapsulation and source that moves the rule, the
    module's example, and a delete that leaves nothing."""
    box = sandbox
    box.nbctl("ls-add", "ovn-net1")
    for port in ("default_web_net0", "default_web_net1"):
        box.nbctl("lsp-add", "ovn-net1", port)
    schema = json.loads(box.run("ovsdb-client", "get-schema", box.nb_db, "OVN_Northbound"))
    both = "both" in schema["tables"]["Mirror"]["columns"]["filter"]["type"]["key"]["enum"][1]
    results, proc = run_playbook(collections_path, remote_tasks(box, both))
    assert proc.returncode == 0, proc.stdout[-4000:]
    r = results
    assert r["create_check"]["changed"] is True and r["create_check"]["diff"]["after"]
    assert stable_dump(r["dump0"]["stdout"]) == stable_dump(r["dump1"]["stdout"]), "check mode wrote"
    assert r["create"]["changed"] is True
    assert r["create"]["after"] == [{"name": "web-gre", "source": "default_web_net0", "direction": "egress",
                                     "collector": {"address": "10.20.0.9", "encapsulation": "gre", "key": 7}}]
    assert r["create_again"]["changed"] is False and r["create_again"]["operations"] == []
    assert r["gathered"]["gathered"] == r["create"]["after"]
    assert r["rendered"]["changed"] is False and r["rendered"]["rendered"]
    for case, words in (("bad_long_name", ["config[0].name", "at most 11"]),
                        ("bad_loopback", ["config[0].collector.address", "127.0.0.1"]),
                        ("bad_erspan_key", ["config[0].collector.key", "2000", "0-1023"]),
                        ("bad_pod_collector", ["config[0].collector", "address"]),
                        ("bad_address_on_node", ["config[0].collector", "kind: remote"])):
        assert r[case].get("failed") is True, case
        for word in words:
            assert word in r[case]["msg"], (case, word, r[case]["msg"])
    if both:
        assert r["both"]["changed"] is True and r["delete_both"]["changed"] is True
    else:
        assert r["both"].get("failed") is True and "OVN 24.03" in r["both"]["msg"]
        assert r["delete_both"]["changed"] is False
    assert stable_dump(r["dump2"]["stdout"]) == stable_dump(r["dump3"]["stdout"]), "a refusal wrote"

    assert r["bad_same_key"].get("failed") is True
    assert "web-gre" in r["bad_same_key"]["msg"] and "key 7" in r["bad_same_key"]["msg"]
    assert r["to_erspan"]["changed"] is True and r["example"]["changed"] is True
    mirrors = dict((m["name"], m) for m in rows_from_json(r["mirrors"]["stdout"]))
    assert (mirrors["web-gre"]["type"], mirrors["web-gre"]["sink"], mirrors["web-gre"]["index"],
            mirrors["web-gre"]["filter"]) == ("erspan", "10.20.0.9", 8, "from-lport")
    assert (mirrors["web-erspan"]["filter"], mirrors["web-erspan"]["index"]) == ("to-lport", 7)
    ports = dict((p["name"], p) for p in rows_from_json(r["ports"]["stdout"]))
    # (a set of one is the bare value in OVSDB's JSON)
    assert ports["default_web_net0"]["mirror_rules"] == mirrors["web-erspan"]["_uuid"], "moved off, example on"
    assert ports["default_web_net1"]["mirror_rules"] == mirrors["web-gre"]["_uuid"]

    assert r["delete"]["changed"] is True and r["delete_again"]["changed"] is False
    assert box.rows("nb", "Mirror") == []
    assert all(p["mirror_rules"] == [] for p in box.rows("nb", "Logical_Switch_Port"))
