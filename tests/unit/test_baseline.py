"""The operator's baseline rules (cluster/baseline.py), without a database:
what a rule is once checked, every refusal naming its field, and the match
each rule becomes (ovn-controller reads these in test_policy_dataplane.py)."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import baseline
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError

NETWORKS = dict((n["name"], vn.complete(vn.check_network(n, n["name"]), None, False, "ovn", n["name"])) for n in (
    {"name": "net1", "subnet": "172.16.1.0/24", "subnet6": "fd00:1::/64"},
    {"name": "net2", "subnet": "172.16.2.0/24"}))


def match(**rule):
    return baseline.rule_match(baseline.check_rule(dict({"name": "r", "network": "net1"}, **rule), "c"),
                               NETWORKS, "c")


def test_a_rule_s_defaults():
    assert baseline.check_rule({"name": "r", "network": "net1"}, "c") == {
        "name": "r", "network": "net1", "direction": "ingress", "action": "deny", "priority": 5000,
        "peers": [], "except": [], "ports": [], "log": True}
    assert baseline.check_rule({"name": "r", "network": "net1", "action": "allow"}, "c")["log"] is False


def test_selectors_and_ports_are_kept_canonical():
    rule = baseline.check_rule({"name": "r", "network": "net1", "peers": [
        {"namespace_selector": {"matchLabels": {"b": "2", "a": "1"}}, "pod_selector": None}],
        "ports": [{"protocol": "UDP", "port": 5000, "end_port": 5010}, {"port": 80}]}, "c")
    assert rule["peers"] == [{"namespace_selector": {"matchLabels": {"a": "1", "b": "2"}}, "pod_selector": {}}]
    assert rule["ports"] == [{"protocol": "UDP", "port": 5000, "end_port": 5010}, {"protocol": "TCP", "port": 80}]


@pytest.mark.parametrize("rule, problems", [
    ({"name": "R"}, ["c.name: 'R'"]),
    ({"name": "r"}, ["c.network: the network the rule guards is required"]),
    ({"name": "r", "network": "n", "direction": "in", "action": "drop", "priority": 0},
     ["c.direction: 'in' is not ingress or egress", "c.action: 'drop' is not deny or allow",
      "c.priority: 0 is out of range 1-9999"]),
    ({"name": "r", "network": "n", "peers": [{"cidr": "10.0.0.1/8"}, {"network": "a", "cidr": "10.0.0.0/8"},
                                             {"pod_selector": {}}, "x"]},
     ["c.peers[0].cidr: '10.0.0.1/8' has host bits set", "c.peers[1]: give exactly one of",
      "c.peers[2]: give exactly one of", "c.peers[3]: 'x' is not a peer"]),
    ({"name": "r", "network": "n", "except": [{"namespace_selector": {}}]},
     ["c.except[0]: give exactly one of network, cidr"]),
    ({"name": "r", "network": "n", "ports": [{"port": "http"}, {"protocol": "ICMP"}, {"end_port": 9}]},
     ["c.ports[0].port: 'http' is a named port", "c.ports[1].protocol: 'ICMP' is not one of",
      "c.ports[2].end_port: 9 needs a numeric port"]),
    ({"name": "r", "network": "n", "log": "yes", "colour": 1}, ["c: unknown options colour"]),
])
def test_every_problem_is_named_by_its_field(rule, problems):
    with pytest.raises(ValidationError) as caught:
        baseline.check_rule(rule, "c")
    said = "; ".join(caught.value.problems)
    for problem in problems:
        assert problem in said, said


def test_matches_per_family_with_peers_excepts_and_ports():
    assert match() == "(ip4.dst == 172.16.1.0/24) || (ip6.dst == fd00:1::/64)", "everyone, both families"
    assert match(peers=[{"network": "net2"}], direction="egress") == \
        "ip4.src == 172.16.1.0/24 && ip4.dst == 172.16.2.0/24", "net2 has no IPv6: only net1's IPv4 side"
    assert match(peers=[{"cidr": "fd00:9::/64"}, {"cidr": "10.0.0.0/8"}, {"cidr": "192.0.2.0/24"}],
                 ports=[{"protocol": "TCP", "port": 22}]) == (
        "((ip4.dst == 172.16.1.0/24 && ip4.src == {10.0.0.0/8, 192.0.2.0/24}) || "
        "(ip6.dst == fd00:1::/64 && ip6.src == fd00:9::/64)) && tcp && tcp.dst == 22")
    assert match(**{"except": [{"network": "net1"}, {"cidr": "192.0.2.0/24"}]}) == (
        "(ip4.dst == 172.16.1.0/24 && ip4.src != {172.16.1.0/24, 192.0.2.0/24}) || "
        "(ip6.dst == fd00:1::/64 && ip6.src != fd00:1::/64)")
    selector = match(peers=[{"namespace_selector": {}}, {"cidr": "10.0.0.0/8"}])
    assert selector == ("(ip4.dst == 172.16.1.0/24 && (ip4.src == 10.0.0.0/8 || ip4.src == $%s)) || "
                        "(ip6.dst == fd00:1::/64 && ip6.src == $%s)" % (
                            baseline.address_set("r", 4), baseline.address_set("r", 6)))


def test_a_rule_with_no_peer_of_its_network_s_families_is_refused():
    with pytest.raises(ValidationError) as caught:
        baseline.rule_match(baseline.check_rule({"name": "r", "network": "net2", "peers": [
            {"cidr": "fd00:9::/64"}]}, "c"), NETWORKS, "c")
    assert "c.peers: no peer has an address of the IP families of network net2" in str(caught.value)


def test_address_set_names_are_identifiers_unique_per_rule():
    names = set(baseline.address_set(r, f) for r in ("a-b", "a-b-", "a" * 50) for f in (4, 6))
    assert len(names) == 6 and all(n.replace("_", "").isalnum() for n in names)


def test_on_a_stateless_network_an_allow_has_a_mirror_and_the_network_no_anchor():
    stateless = vn.complete(vn.check_network({"name": "net3", "subnet": "172.16.3.0/24", "policy_mode": "stateless"},
                                             "n"), None, False, "ovn", "n")
    rule = baseline.check_rule({"name": "r", "network": "net3", "action": "allow", "peers": [{"cidr": "10.0.0.0/8"}],
                                "ports": [{"port": 22}]}, "c")
    acls, _sets = baseline.rule_rows(rule, dict(NETWORKS, net3=stateless), "c")
    assert [(a["direction"], a["action"], a["match"]) for a in acls] == [
        ("to-lport", "allow-stateless", "ip4.dst == 172.16.3.0/24 && ip4.src == 10.0.0.0/8 && tcp && tcp.dst == 22"),
        ("from-lport", "allow-stateless", "ip4.src == 172.16.3.0/24 && ip4.dst == 10.0.0.0/8 && tcp && tcp.src == 22")]
    assert "ovn4nfv-baseline-spec" not in acls[1]["external_ids"], "the mirror is not a rule of its own"
    assert baseline.network_acls(stateless) == []
    assert [a["action"] for a in baseline.network_acls(NETWORKS["net2"])] == ["allow-related"]


def test_policy_mode_is_an_ovn_network_s():
    with pytest.raises(ValidationError) as caught:
        vn.check_network({"name": "n", "policy_mode": "lazy"}, "c")
    assert "c.policy_mode: 'lazy' is not one of stateful, stateless" in str(caught.value)
    with pytest.raises(ValidationError) as caught:
        vn.complete(vn.check_network({"name": "n", "subnet": "10.0.0.0/24", "policy_mode": "stateless"}, "c"),
                    None, False, "ovs", "c")
    assert "c.policy_mode: stateless applies to the ovn backend only" in str(caught.value)
