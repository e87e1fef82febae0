"""network_policy (the operator's baseline) through ansible-playbook against
real daemons: check mode that writes nothing, create, a second run that
changes nothing, merged, replaced, overridden, deleted, gathered, rendered,
and refusals that name the field and write nothing."""

from tests.harness.playbook import run_playbook
from tests.harness.sandbox import rows_from_json, stable_dump

NETS = [{"name": "net1", "subnet": "172.16.1.0/24", "subnet6": "fd00:1::/64", "backend": "ovn"},
        {"name": "net2", "subnet": "172.16.2.0/24", "backend": "ovn"},
        {"name": "mgmt", "subnet": "172.16.9.0/24", "backend": "ovn"}]
APART = {"name": "net1-not-from-net2", "network": "net1", "peers": [{"network": "net2"}]}
MGMT = {"name": "mgmt-operators-only", "network": "mgmt", "except": [{"cidr": "192.0.2.0/24"}, {"network": "mgmt"}]}
SCRAPE = {"name": "monitoring", "network": "net1", "action": "allow", "priority": 6000,
          "peers": [{"namespace_selector": {"matchLabels": {"role": "monitoring"}}}],
          "ports": [{"protocol": "TCP", "port": 9100}, {"protocol": "UDP", "port": 5000, "end_port": 5010}]}
EGRESS = {"name": "net2-no-dns-out", "network": "net2", "direction": "egress", "peers": [{"cidr": "0.0.0.0/0"}],
          "except": [{"network": "net1"}], "ports": [{"protocol": "UDP", "port": 53}], "log": False}


def tasks(box):
    nb = box.nb_db

    def dump(name):
        return {"name": name, "ansible.builtin.command": {"argv": ["ovsdb-client", "dump", nb]},
                "changed_when": False}

    def table(name, what):
        return {"name": name, "ansible.builtin.command": {
            "argv": ["ovsdb-client", "-f", "json", "dump", nb, "OVN_Northbound", what]}, "changed_when": False}

    def rule(name, config, state="merged", check=False, fail=False):
        task = {"name": name, "ovn4nfv.k8s.network_policy": {"config": config, "state": state, "db": nb},
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
        rule("create_check", [APART, MGMT, SCRAPE, EGRESS], check=True),
        dump("dump1"),
        rule("create", [APART, MGMT, SCRAPE, EGRESS]),
        table("acls", "ACL"),
        table("sets", "Address_Set"),
        table("meters", "Meter"),
        rule("create_again", [APART, MGMT, SCRAPE, EGRESS]),
        rule("rendered", [dict(APART, priority=7000)], state="rendered"),
        rule("merge", [{"name": "net1-not-from-net2", "priority": 7000}]),
        rule("merge_again", [{"name": "net1-not-from-net2", "priority": 7000}]),
        rule("replace", [{"name": "net1-not-from-net2", "network": "net1", "peers": [{"cidr": "10.9.0.0/16"}]}],
             state="replaced"),
        table("acls_replaced", "ACL"),
        {"name": "gathered", "ovn4nfv.k8s.network_policy": {"state": "gathered", "db": nb}},
        dump("dump2"),
        rule("bad_network", [dict(APART, peers=[{"network": "nope"}])], fail=True),
        rule("bad_cidr", [dict(APART, peers=[{"cidr": "10.0.0.300/8"}], ports=[{"port": 90, "end_port": 80}])],
             fail=True),
        rule("bad_selector", [dict(SCRAPE, peers=[{"namespace_selector": {"matchExpressions": [
            {"key": "role", "operator": "Near"}]}}])], fail=True),
        rule("bad_peer", [dict(APART, peers=[{"network": "net2", "cidr": "10.0.0.0/8"}])], fail=True),
        rule("bad_priority_clash", [dict(APART, name="clash", priority=6000, peers=[])], fail=True),
        rule("bad_family", [dict(APART, name="v6-only", network="net2", peers=[{"cidr": "fd00:9::/64"}])],
             fail=True),
        dump("dump3"),
        rule("override", [MGMT], state="overridden"),
        table("acls_overridden", "ACL"),
        table("sets_overridden", "Address_Set"),
        rule("delete", [{"name": "mgmt-operators-only"}], state="deleted"),
        rule("delete_again", [{"name": "mgmt-operators-only"}], state="deleted"),
        table("acls_deleted", "ACL"),
    ]


def _acls(result):
    return dict((a["external_ids"]["ovn4nfv-baseline"], a) for a in rows_from_json(result["stdout"])
                if "ovn4nfv-baseline" in a["external_ids"])


def _anchors(result):
    """``{network: [(direction, priority, match, action)]}`` of the ACLs the
    baseline gives the networks it guards."""
    out = {}
    for a in rows_from_json(result["stdout"]):
        if a["external_ids"].get("ovn4nfv-role") == "baseline-network":
            out.setdefault(a["external_ids"]["ovn4nfv-network"], []).append(
                (a["direction"], a["priority"], a["match"], a["action"]))
    return dict((k, sorted(v)) for k, v in out.items())


def test_network_policy_lifecycle(sandbox, collections_path):
    results, proc = run_playbook(collections_path, tasks(sandbox))
    assert proc.returncode == 0, proc.stdout[-4000:]
    r = results
    assert r["create_check"]["changed"] is True and r["create_check"]["diff"]["after"]
    assert stable_dump(r["dump0"]["stdout"]) == stable_dump(r["dump1"]["stdout"]), "check mode wrote"
    assert r["create"]["changed"] is True
    acls = _acls(r["acls"])
    assert sorted(acls) == ["mgmt-operators-only", "monitoring", "net1-not-from-net2", "net2-no-dns-out"]
    assert _anchors(r["acls"]) == {
        "net1": [("from-lport", 30000, "nd", "allow"),
                 ("to-lport", 20000, "ip4.src == 172.16.1.1 || ip6.src == fd00:1::1", "allow-related"),
                 ("to-lport", 30000, "nd", "allow")],
        "net2": [("to-lport", 20000, "ip4.src == 172.16.2.1", "allow-related")],
        "mgmt": [("to-lport", 20000, "ip4.src == 172.16.9.1", "allow-related")]}, \
        "every guarded network is stateful; the dual-stack one has its neighbour discovery holes"
    apart = acls["net1-not-from-net2"]
    # the dual-stack net1, guarded from the IPv4-only net2: only its IPv4 side has a peer
    assert (apart["direction"], apart["priority"], apart["action"], apart["match"], apart["name"]) == (
        "to-lport", 25000, "drop", "ip4.dst == 172.16.1.0/24 && ip4.src == 172.16.2.0/24", "base:net1-not-from-net2")
    assert apart["log"] is True and apart["severity"] == "info" and apart["meter"] == "ovn4nfv-acl-log"
    assert acls["mgmt-operators-only"]["match"] == "ip4.dst == 172.16.9.0/24 && ip4.src != {172.16.9.0/24, 192.0.2.0/24}"
    scrape = acls["monitoring"]
    assert (scrape["action"], scrape["priority"], scrape["log"]) == ("allow-related", 26000, False)
    assert scrape["match"] == (
        "((ip4.dst == 172.16.1.0/24 && ip4.src == $ovn4nfv_base_monitoring_%(h)s_4) || "
        "(ip6.dst == fd00:1::/64 && ip6.src == $ovn4nfv_base_monitoring_%(h)s_6)) && "
        "((tcp && tcp.dst == 9100) || (udp && 5000 <= udp.dst <= 5010))" % {
            "h": scrape["match"].split("ovn4nfv_base_monitoring_")[1][:8]})
    egress = acls["net2-no-dns-out"]
    assert (egress["direction"], egress["options"], egress["log"]) == ("from-lport", {"apply-after-lb": "true"}, False)
    assert egress["match"] == ("ip4.src == 172.16.2.0/24 && ip4.dst == 0.0.0.0/0 && ip4.dst != 172.16.1.0/24 && "
                               "udp && udp.dst == 53")
    sets = rows_from_json(r["sets"]["stdout"])
    assert sorted(s["name"][-2:] for s in sets) == ["_4", "_6"] and all(
        s["external_ids"]["ovn4nfv-baseline"] == "monitoring" and s["addresses"] == [] for s in sets), \
        "the selector's address sets, empty until the watcher fills them"
    assert [m["name"] for m in rows_from_json(r["meters"]["stdout"])] == ["ovn4nfv-acl-log"]
    assert r["create_again"]["changed"] is False and r["create_again"]["operations"] == []
    assert r["rendered"]["changed"] is False and r["rendered"]["rendered"]
    assert r["merge"]["changed"] is True and r["merge_again"]["changed"] is False
    assert r["merge"]["after"][0]["priority"] == 7000 and r["merge"]["after"][0]["peers"] == [{"network": "net2"}]
    assert r["replace"]["changed"] is True
    replaced = _acls(r["acls_replaced"])["net1-not-from-net2"]
    assert (replaced["priority"], replaced["match"]) == (25000, "ip4.dst == 172.16.1.0/24 && ip4.src == 10.9.0.0/16"), \
        "replaced: the priority not given is the default again"
    assert sorted(c["name"] for c in r["gathered"]["gathered"]) == sorted(acls)
    for case, words in (
            ("bad_network", ["config[0].peers[0].network", "'nope' is not a virtual network"]),
            ("bad_cidr", ["config[0].peers[0].cidr", "10.0.0.300/8", "config[0].ports[0].end_port: 80 is below"]),
            ("bad_selector", ["config[0].peers[0].namespace_selector.matchExpressions[0].operator", "Near"]),
            ("bad_peer", ["config[0].peers[0]: give exactly one of"]),
            ("bad_priority_clash", ["config[0].priority: 6000 is rule monitoring's too, on network net1 ingress"]),
            ("bad_family", ["config[0].peers: no peer has an address of the IP families of network net2"])):
        assert r[case].get("failed") is True, case
        assert "Traceback" not in r[case]["msg"]
        for word in words:
            assert word in r[case]["msg"], (case, word, r[case]["msg"])
    assert stable_dump(r["dump2"]["stdout"]) == stable_dump(r["dump3"]["stdout"]), "a refusal wrote"
    assert r["override"]["changed"] is True
    assert sorted(_acls(r["acls_overridden"])) == ["mgmt-operators-only"]
    assert sorted(_anchors(r["acls_overridden"])) == ["mgmt"], "no rule guards net1 and net2 any more"
    assert rows_from_json(r["sets_overridden"]["stdout"]) == [], "the selector's sets went with their rule"
    assert r["delete"]["changed"] is True and r["delete_again"]["changed"] is False
    assert rows_from_json(r["acls_deleted"]["stdout"]) == []
