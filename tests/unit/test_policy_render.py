"""A checked policy as OVN matches (``cluster/policy_render.py``): names
OVN takes as identifiers and an operator can read, the priority bands, and
matches whose meaning is pinned down here one form at a time."""

import re

import pytest
from hypothesis import given, strategies as st

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import policy_render as render
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import (
    EGRESS, INGRESS, POLICY_FOR, check_policy)

IDENTIFIER = re.compile(r"^[A-Za-z_.][A-Za-z_.0-9]*\Z")


def checked(spec, key="tenant-a/web-in"):
    namespace, name = key.split("/")
    return check_policy({"metadata": {"namespace": namespace, "name": name,
                                      "annotations": {POLICY_FOR: "blue-nad"}}, "spec": spec})


# -- names ---------------------------------------------------------------------

def test_group_names_are_identifiers_readable_and_unique():
    group = render.policy_group("tenant-a/web-in")
    assert re.match(r"^ovn4nfv_mnp_tenant_a_web_in_[0-9a-f]{8}\Z", group)
    # the readable part is the same for these two; the digest tells them apart
    assert render.policy_group("a-b/c") != render.policy_group("a_b/c")
    long_key = "%s/%s" % ("n" * 63, "p" * 253)
    for name in (render.policy_group(long_key), render.deny_group("ovn-net1", INGRESS),
                 render.deny_group("x" * 200, EGRESS), render.peer_set(render.policy_group(long_key), EGRESS, 99, 6)):
        assert IDENTIFIER.match(name) and len(name) <= 63, name
    assert render.deny_group("ovn-net1", INGRESS).startswith("ovn4nfv_deny_in_ovn_net1_")
    assert render.deny_group("ovn-net1", EGRESS).startswith("ovn4nfv_deny_eg_ovn_net1_")
    assert render.peer_set("G", INGRESS, 0, 4) == "G_i0_4" and render.peer_set("G", EGRESS, 2, 6) == "G_e2_6"


def test_acl_names_fit_ovn_s_63_and_stay_unique_when_cut():
    assert render.acl_name("mnp:tenant-a/web-in:in0") == "mnp:tenant-a/web-in:in0"
    one, two = render.acl_name("mnp:%s:in0" % ("x" * 80)), render.acl_name("mnp:%s:in1" % ("x" * 80))
    assert len(one) == len(two) == 63 and one != two and one.startswith("mnp:xxx")


# -- ports ------------------------------------------------------------------------

@pytest.mark.parametrize("ports, expected", [
    ([], None),
    ([{"port": 80}], "tcp && tcp.dst == 80"),
    ([{"port": 443}, {"port": 80}, {"port": 80}], "tcp && tcp.dst == {80, 443}"),
    ([{"port": 1000, "endPort": 2000}], "tcp && 1000 <= tcp.dst <= 2000"),
    ([{"port": 8080, "endPort": 8080}], "tcp && tcp.dst == 8080"),
    ([{"port": 80}, {"port": 1000, "endPort": 2000}], "tcp && (tcp.dst == 80 || 1000 <= tcp.dst <= 2000)"),
    ([{"protocol": "UDP"}], "udp"),
    ([{"protocol": "UDP", "port": 53}, {"protocol": "UDP"}], "udp"),
    ([{"protocol": "SCTP", "port": 3868}, {"port": 22}, {"protocol": "UDP", "port": 53}],
     "(tcp && tcp.dst == 22) || (udp && udp.dst == 53) || (sctp && sctp.dst == 3868)"),
])
def test_ports(ports, expected):
    rule = checked({"podSelector": {}, "ingress": [{"ports": ports}]}).ingress[0]
    assert render.ports_match(rule.ports, INGRESS) == expected


# -- whole rules ---------------------------------------------------------------------

def test_a_rule_is_one_acl_with_its_peers_in_address_sets_and_blocks_inline():
    policy = checked({"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [{
        "from": [{"podSelector": {"matchLabels": {"app": "cli"}}},
                 {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "10.2.0.0/16"]}},
                 {"ipBlock": {"cidr": "fd00:9::/64"}}],
        "ports": [{"port": 80}]}]})
    group = render.policy_group(policy.key)
    acls = render.policy_acls(policy)
    assert len(acls) == 1
    assert acls[0] == {
        "direction": "to-lport", "priority": render.TENANT_ALLOW, "action": "allow-related",
        "name": "mnp:tenant-a/web-in:in0", "options": {}, "rule": "ingress/0",
        "match": "outport == @%s && (ip4.src == $%s_i0_4 || ip6.src == $%s_i0_6 || "
                 "(ip4.src == 10.0.0.0/8 && ip4.src != {10.1.0.0/16, 10.2.0.0/16}) || ip6.src == fd00:9::/64) "
                 "&& tcp && tcp.dst == 80" % (group, group, group)}


def test_egress_is_from_the_subject_after_the_load_balancer():
    policy = checked({"podSelector": {}, "policyTypes": ["Egress"], "egress": [
        {"to": [{"ipBlock": {"cidr": "192.168.0.0/16"}}], "ports": [{"protocol": "UDP", "port": 53}]}, {}]})
    group = render.policy_group(policy.key)
    first, second = render.policy_acls(policy)
    assert first["direction"] == second["direction"] == "from-lport"
    assert first["options"] == {"apply-after-lb": "true"} and first["action"] == "allow-related"
    assert first["match"] == "inport == @%s && ip4.dst == 192.168.0.0/16 && udp && udp.dst == 53" % group
    assert second["match"] == "inport == @%s && ip" % group, "a rule of no peers and no ports admits all"
    assert (first["name"], second["name"]) == ("mnp:tenant-a/web-in:eg0", "mnp:tenant-a/web-in:eg1")


def test_a_stateless_network_s_rules_are_stateless_each_with_a_mirror_for_its_replies():
    policy = checked({"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [
        {"from": [{"podSelector": {}}], "ports": [{"port": 8000, "endPort": 8080}, {"protocol": "UDP", "port": 53}]}],
        "egress": [{"to": [{"ipBlock": {"cidr": "192.168.0.0/16"}}]}]})
    group = render.policy_group(policy.key)
    acls = render.policy_acls(policy, stateful=False)
    assert [(a["rule"], a["direction"], a["action"], a["options"]) for a in acls] == [
        ("ingress/0", "to-lport", "allow-stateless", {}),
        ("ingress/0/reply", "from-lport", "allow-stateless", {"apply-after-lb": "true"}),
        ("egress/0", "from-lport", "allow-stateless", {"apply-after-lb": "true"}),
        ("egress/0/reply", "to-lport", "allow-stateless", {})]
    assert acls[1]["match"] == (
        "inport == @%(g)s && (ip4.dst == $%(g)s_i0_4 || ip6.dst == $%(g)s_i0_6) && "
        "((tcp && 8000 <= tcp.src <= 8080) || (udp && udp.src == 53))" % {"g": group}), \
        "from the subject back to the peers, from the ports the peers were reached on"
    assert acls[3]["match"] == "outport == @%s && ip4.src == 192.168.0.0/16" % group
    assert acls[1]["name"] == "mnp:tenant-a/web-in:in0:reply"


def test_a_deny_all_has_no_acl_of_its_own():
    """Isolation is membership of the network's default-deny group, not an
    ACL of the policy: a policy that allows nothing has none."""
    assert render.policy_acls(checked({"podSelector": {}, "ingress": []})) == []


def test_the_default_deny_drops_all_but_neighbour_discovery_and_the_anchor_opens_conntrack():
    holes, deny = render.deny_acls("ovn-net1", INGRESS)
    group = render.deny_group("ovn-net1", INGRESS)
    assert (holes["priority"], holes["action"], holes["match"]) == (
        render.DENY_HOLES, "allow", "outport == @%s && (arp || nd)" % group)
    assert (deny["priority"], deny["action"], deny["match"]) == (render.DEFAULT_DENY, "drop", "outport == @%s" % group)
    _holes, egress = render.deny_acls("ovn-net1", EGRESS)
    assert egress["direction"] == "from-lport" and egress["options"] == {"apply-after-lb": "true"}
    anchor = render.anchor_acl("ovn-net1", "172.16.1.1", "fd00:1::1")
    assert (anchor["direction"], anchor["action"], anchor["match"]) == (
        "to-lport", "allow-related", "ip4.src == 172.16.1.1 || ip6.src == fd00:1::1")
    assert render.anchor_acl("ovn-net1") is None


def test_the_bands_keep_their_order():
    assert render.BASELINE_TOP > render.BASELINE_BOTTOM > render.TENANT_ALLOW > render.DENY_HOLES > \
        render.DEFAULT_DENY >= 10000


SELECTOR = st.fixed_dictionaries({"matchLabels": st.dictionaries(st.sampled_from(["app", "tier"]),
                                                                 st.sampled_from(["a", "b"]), max_size=2)})
PEER = st.one_of(st.builds(lambda s: {"podSelector": s}, SELECTOR),
                 st.builds(lambda s: {"namespaceSelector": s}, SELECTOR),
                 st.sampled_from([{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.9.0.0/16"]}},
                                  {"ipBlock": {"cidr": "fd00::/48"}}]))
PORT = st.one_of(st.builds(lambda p: {"port": p}, st.integers(1, 65535)),
                 st.builds(lambda p, n: {"protocol": "UDP", "port": p, "endPort": p + n},
                           st.integers(1, 60000), st.integers(0, 5000)),
                 st.just({"protocol": "SCTP"}))
RULE = st.fixed_dictionaries({}, optional={"from": st.lists(PEER, max_size=3), "ports": st.lists(PORT, max_size=3)})


@given(st.lists(RULE, max_size=4), st.lists(RULE, max_size=4), st.booleans())
def test_one_acl_per_rule_or_two_and_every_name_valid(ingress, egress, stateful):
    spec = {"podSelector": {}, "ingress": ingress,
            "egress": [dict(("to" if k == "from" else k, v) for k, v in r.items()) for r in egress]}
    policy = checked(spec)
    acls = render.policy_acls(policy, stateful)
    assert len(acls) == (len(policy.rules(INGRESS)) + len(policy.rules(EGRESS))) * (1 if stateful else 2), \
        "one per rule; on a stateless network, and its mirror"
    assert len(set(a["name"] for a in acls)) == len(acls)
    for acl in acls:
        assert acl["priority"] == render.TENANT_ALLOW and len(acl["name"]) <= 63
        assert acl["match"].count("(") == acl["match"].count(")")
        for name in re.findall(r"[@$]([^ )]+)", acl["match"]):
            assert IDENTIFIER.match(name) and len(name) <= 63, name
