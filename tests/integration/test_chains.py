"""network_chain through ansible-playbook against real daemons: check mode
that writes nothing, create, a second run that changes nothing, merged,
replaced, overridden, deleted, gathered, rendered, and refusals that name
the part and write nothing."""

from tests.harness.playbook import run_playbook
from tests.harness.sandbox import rows_from_json, stable_dump

NETS = [{"name": "left", "subnet": "172.16.1.0/24", "backend": "ovn"},
        {"name": "right", "subnet": "172.16.2.0/24", "backend": "ovn"},
        {"name": "mid", "subnet": "172.16.3.0/24", "backend": "ovn"}]
FW = {"selector": {"app": "fw"}, "left": {"interface": "net0", "network": "left"},
      "right": {"interface": "net1", "network": "mid"}}
IDS = {"selector": {"app": "ids"}, "left": {"interface": "net0", "network": "mid"},
       "right": {"interface": "net1", "network": "right"}}
CHAIN = {"name": "two-step", "source_network": "left", "destination_network": "right", "functions": [FW, IDS]}
OTHER = {"name": "other", "source_network": "right", "destination_network": "left", "priority": 900,
         "source_selector": {"app": "client"}, "destination_prefixes": ["172.16.1.0/25"],
         "functions": [{"selector": {"app": "nat"}, "left": {"interface": "net0", "network": "right"},
                        "right": {"interface": "net1", "network": "left"}}]}


def tasks(box):
    nb = box.nb_db

    def dump(name):
        return {"name": name, "ansible.builtin.command": {"argv": ["ovsdb-client", "dump", nb]},
                "changed_when": False}

    def policies(name):
        return {"name": name, "ansible.builtin.command": {
            "argv": ["ovsdb-client", "-f", "json", "dump", nb, "OVN_Northbound", "Logical_Router_Policy"]},
            "changed_when": False}

    def chain(name, config, state="merged", check=False, fail=False):
        task = {"name": name, "ovn4nfv.k8s.network_chain": {"config": config, "state": state, "db": nb},
                "diff": True}
        if check:
            task["check_mode"] = True
        if fail:
            task["ignore_errors"] = True
        return task

    return [
        {"name": "topo", "ovn4nfv.k8s.cluster_topology": {"config": {}, "db": nb}},
        {"name": "nets", "ovn4nfv.k8s.virtual_network": {"config": NETS, "db": nb}},
        dump("dump0"),
        chain("create_check", [CHAIN, OTHER], check=True),
        dump("dump1"),
        chain("create", [CHAIN, OTHER]),
        policies("after_create"),
        chain("create_again", [CHAIN, OTHER]),
        chain("rendered", [dict(CHAIN, fail_open=True)], state="rendered"),
        chain("merge", [{"name": "two-step", "fail_open": True}]),
        chain("merge_again", [{"name": "two-step", "fail_open": True}]),
        chain("replace", [dict(CHAIN, fail_open=True,
                               functions=[dict(FW, right={"interface": "net1", "network": "right"})])],
              state="replaced"),
        policies("after_replace"),
        {"name": "gathered", "ovn4nfv.k8s.network_chain": {"state": "gathered", "db": nb}},
        dump("dump2"),
        chain("bad_network", [dict(CHAIN, functions=[dict(FW, right={"interface": "net1", "network": "nope"})])],
              fail=True),
        chain("bad_name", [dict(CHAIN, name="Two_Step")], fail=True),
        chain("bad_same_networks", [dict(CHAIN, destination_network="left")], fail=True),
        chain("bad_selector", [dict(CHAIN, functions=[dict(FW, selector={})])], fail=True),
        dump("dump3"),
        chain("override", [OTHER], state="overridden"),
        policies("after_override"),
        chain("delete", [{"name": "other"}], state="deleted"),
        chain("delete_again", [{"name": "other"}], state="deleted"),
        policies("after_delete"),
        {"name": "address_sets", "ansible.builtin.command": {
            "argv": ["ovsdb-client", "-f", "json", "dump", nb, "OVN_Northbound", "Address_Set"]},
            "changed_when": False},
    ]


def test_network_chain_lifecycle(sandbox, collections_path):
    results, proc = run_playbook(collections_path, tasks(sandbox))
    assert proc.returncode == 0, proc.stdout[-4000:]
    r = results
    assert r["create_check"]["changed"] is True and r["create_check"]["diff"]["after"]
    assert stable_dump(r["dump0"]["stdout"]) == stable_dump(r["dump1"]["stdout"]), "check mode wrote"
    assert r["create"]["changed"] is True
    created = rows_from_json(r["after_create"]["stdout"])
    assert len(created) == 2 * 2 + 2 * 1, "a forward and a reverse policy per function"
    two = sorted((p["external_ids"]["ovn4nfv-chain-hop"], p["match"], p["action"]) for p in created
                 if p["external_ids"]["ovn4nfv-chain"] == "two-step")
    assert two == [
        ("forward/0", 'inport == "rtos-left" && ip4.src == 172.16.1.0/24 && ip4.dst == {172.16.2.0/24}', "drop"),
        ("forward/1", 'inport == "rtos-mid" && ip4.src == 172.16.1.0/24 && ip4.dst == {172.16.2.0/24}', "drop"),
        ("reverse/0", 'inport == "rtos-right" && ip4.src == {172.16.2.0/24} && ip4.dst == 172.16.1.0/24', "drop"),
        ("reverse/1", 'inport == "rtos-mid" && ip4.src == {172.16.2.0/24} && ip4.dst == 172.16.1.0/24', "drop")]
    other = [p for p in created if p["external_ids"]["ovn4nfv-chain"] == "other"]
    assert all("$ovn4nfv_chain_other" in p["match"] and p["priority"] == 900 for p in other)
    assert r["create_again"]["changed"] is False and r["create_again"]["operations"] == []
    assert r["rendered"]["changed"] is False and r["rendered"]["rendered"]
    assert r["merge"]["changed"] is True and r["merge_again"]["changed"] is False
    assert r["merge"]["after"][0]["fail_open"] is True and r["merge"]["after"][0]["functions"] == [FW, IDS]
    assert r["replace"]["changed"] is True
    replaced = [p for p in rows_from_json(r["after_replace"]["stdout"])
                if p["external_ids"]["ovn4nfv-chain"] == "two-step"]
    assert len(replaced) == 2 and all(p["action"] == "allow" for p in replaced), \
        "open, with no next hop yet: every policy allows, the one kept too"
    assert sorted(c["name"] for c in r["gathered"]["gathered"]) == ["other", "two-step"]
    for case, words in (("bad_network", ["config[0].functions[0].right.network", "'nope' does not exist"]),
                        ("bad_name", ["config[0].name", "Two_Step"]),
                        ("bad_same_networks", ["config[0].destination_network", "source network too"]),
                        ("bad_selector", ["config[0].functions[0].selector"])):
        assert r[case].get("failed") is True, case
        assert "Traceback" not in r[case]["msg"]
        for word in words:
            assert word in r[case]["msg"], (case, word, r[case]["msg"])
    assert stable_dump(r["dump2"]["stdout"]) == stable_dump(r["dump3"]["stdout"]), "a refusal wrote"
    assert r["override"]["changed"] is True
    assert set(p["external_ids"]["ovn4nfv-chain"] for p in rows_from_json(r["after_override"]["stdout"])) == {"other"}
    assert r["delete"]["changed"] is True and r["delete_again"]["changed"] is False
    assert rows_from_json(r["after_delete"]["stdout"]) == []
    assert rows_from_json(r["address_sets"]["stdout"]) == [], "the source selector's set went with its chain"
