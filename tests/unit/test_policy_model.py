"""A tenant's MultiNetworkPolicy, checked (``cluster/policy_model.py``):
NetworkPolicy's semantics made explicit (policyTypes defaulted, peers and
ports as the API means them), the networks it is for in both forms, and
every piece of bad input refused by its field, all at once."""

import copy

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import (
    EGRESS, INGRESS, INVALID, NetworkRef, POLICY_FOR, check_policy, parse_policy_for)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError


def policy(spec=None, networks="blue-nad", namespace="tenant-a", name="web-in", **meta):
    metadata = {"namespace": namespace, "name": name, "uid": "u-1", "generation": 3,
                "annotations": {POLICY_FOR: networks} if networks is not None else {}}
    metadata.update(meta)
    return {"apiVersion": "k8s.cni.cncf.io/v1beta1", "kind": "MultiNetworkPolicy", "metadata": metadata,
            "spec": {"podSelector": {"matchLabels": {"app": "web"}}} if spec is None else spec}


def refused(obj):
    with pytest.raises(ValidationError) as caught:
        check_policy(obj)
    assert caught.value.reason == INVALID
    return caught.value.problems


# -- the networks ----------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("blue-nad", ["tenant-a/blue-nad"]),
    ("other/blue-nad", ["other/blue-nad"]),
    ("ovn4nfv.k8s/ovn-net1", ["ovn4nfv.k8s/ovn-net1"]),
    (" blue-nad , other/red.v1,ovn4nfv.k8s/ovn-net1 ", ["tenant-a/blue-nad", "other/red.v1", "ovn4nfv.k8s/ovn-net1"]),
    ("blue-nad,tenant-a/blue-nad", ["tenant-a/blue-nad"]),
])
def test_policy_for_names_attachments_and_virtual_networks(text, expected):
    refs = parse_policy_for(text, "tenant-a", "f")
    assert [str(r) for r in refs] == expected
    assert [r.is_attachment for r in refs] == [not e.startswith("ovn4nfv.k8s/") for e in expected]


def test_a_virtual_network_is_not_a_namespace():
    ref, = parse_policy_for("ovn4nfv.k8s/net1", "tenant-a", "f")
    assert ref == NetworkRef(None, "net1") and ref.namespace is None


@pytest.mark.parametrize("text, problem", [
    ("", "f: '' names no network"),
    ("a,,b", "f[1]: '' is not a network attachment's name (a DNS-1123 subdomain)"),
    ("Blue", "f[0]: 'Blue' is not a network attachment's name (a DNS-1123 subdomain)"),
    ("Tenant/blue", "f[0]: 'Tenant/blue' is not <namespace>/<name>, <name> or ovn4nfv.k8s/<network>"),
    ("a/b/c", "f[0]: 'a/b/c' is not <namespace>/<name>, <name> or ovn4nfv.k8s/<network>"),
    ("ovn4nfv.k8s/bad name", "f[0]: 'bad name' is not a valid name"),
])
def test_policy_for_refusals(text, problem):
    with pytest.raises(ValidationError) as caught:
        parse_policy_for(text, "tenant-a", "f")
    assert caught.value.problems[0].startswith(problem)


# -- semantics ---------------------------------------------------------------

def test_policy_types_default_as_networkpolicy_s():
    only_ingress = check_policy(policy({"podSelector": {}}))
    assert only_ingress.types == {INGRESS} and only_ingress.rules(INGRESS) == ()
    with_egress = check_policy(policy({"podSelector": {}, "egress": [{"to": [{"podSelector": {}}]}]}))
    assert with_egress.types == {INGRESS, EGRESS}
    # an empty egress list is no egress section
    assert check_policy(policy({"podSelector": {}, "egress": []})).types == {INGRESS}
    explicit = check_policy(policy({"podSelector": {}, "policyTypes": ["Egress"], "ingress": [{}]}))
    assert explicit.types == {EGRESS}
    assert explicit.rules(INGRESS) == (), "rules of a direction the policy does not isolate admit nothing more"


def test_peers_as_the_api_means_them():
    checked = check_policy(policy({"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [{"from": [
        {"podSelector": {"matchLabels": {"app": "cli"}}},
        {"namespaceSelector": {"matchLabels": {"team": "a"}}},
        {"namespaceSelector": {}, "podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}},
        {"ipBlock": {"cidr": "10.1.2.3/16", "except": ["10.1.5.0/24", "10.1.4.0/24", "10.1.5.0/24"]}},
    ]}]}))
    own, spaces, both, block = checked.ingress[0].peers
    assert own.namespace == "tenant-a" and own.namespace_selector is None and own.pod_selector.matches({"app": "cli"})
    assert spaces.namespace is None and spaces.pod_selector is None and spaces.namespace_selector.matches({"team": "a"})
    assert both.namespace is None and both.namespace_selector.empty and not both.pod_selector.matches({})
    # host bits allowed as the API allows them; excepts sorted, each once
    assert block.is_block and str(block.cidr) == "10.1.0.0/16"
    assert [str(c) for c in block.excepted] == ["10.1.4.0/24", "10.1.5.0/24"]


def test_a_rule_without_peers_or_ports_admits_everything_and_an_empty_list_of_rules_nothing():
    allow_all = check_policy(policy({"podSelector": {}, "ingress": [{}]}))
    assert len(allow_all.ingress) == 1 and allow_all.ingress[0].peers == () and allow_all.ingress[0].ports == ()
    deny_all = check_policy(policy({"podSelector": {}, "ingress": []}))
    assert deny_all.ingress == () and deny_all.types == {INGRESS}


def test_ports():
    checked = check_policy(policy({"podSelector": {}, "ingress": [{"ports": [
        {"port": 80}, {"protocol": "UDP", "port": 1000, "endPort": 2000}, {"protocol": "SCTP"},
        {"protocol": "TCP", "port": 443, "endPort": 443}]}]}))
    assert [p.to_dict() for p in checked.ingress[0].ports] == [
        {"protocol": "TCP", "port": 80}, {"protocol": "UDP", "port": 1000, "endPort": 2000},
        {"protocol": "SCTP"}, {"protocol": "TCP", "port": 443, "endPort": 443}]


def test_the_canonical_form_ignores_how_it_was_written():
    one = policy({"podSelector": {"matchLabels": {"b": "2", "a": "1"}}, "ingress": [{"from": [
        {"ipBlock": {"cidr": "10.0.0.0/8"}}, {"podSelector": {}}], "ports": [{"port": 80}, {"port": 22}]}]})
    two = copy.deepcopy(one)
    two["spec"]["podSelector"] = {"matchLabels": {"a": "1", "b": "2"}}
    two["spec"]["ingress"][0]["from"].reverse()
    two["spec"]["ingress"][0]["ports"] = [{"protocol": "TCP", "port": 22}, {"port": 80}]
    two["spec"]["policyTypes"] = ["Ingress"]
    assert check_policy(one).spec_text() == check_policy(two).spec_text()
    three = copy.deepcopy(one)
    three["spec"]["ingress"][0]["ports"][0]["port"] = 81
    assert check_policy(three).spec_text() != check_policy(one).spec_text()
    assert check_policy(one).key == "tenant-a/web-in"


# -- the bad-input catalogue ---------------------------------------------------

@pytest.mark.parametrize("spec, problems", [
    ({}, ["spec.podSelector: required ({} selects every pod of the namespace)"]),
    ({"podSelector": "app=web"}, ["spec.podSelector: 'app=web' is not a label selector (a mapping)"]),
    ({"podSelector": {}, "policyTypes": ["Ingress", "Both"]},
     ["spec.policyTypes[1]: 'Both' is not Ingress or Egress"]),
    ({"podSelector": {}, "policyTypes": ["Egress", "Egress"]}, ["spec.policyTypes[1]: 'Egress' is given twice"]),
    ({"podSelector": {}, "policyTypes": []}, ["spec.policyTypes: [] is not a non-empty list of Ingress and Egress"]),
    ({"podSelector": {}, "ingress": {"from": []}}, ["spec.ingress: {'from': []} is not a list of rules"]),
    ({"podSelector": {}, "ingress": [{"from": {}}]}, ["spec.ingress[0].from: {} is not a list"]),
    ({"podSelector": {}, "ingress": [{"from": [{}]}]},
     ["spec.ingress[0].from[0]: a peer needs a podSelector, a namespaceSelector or an ipBlock"]),
    ({"podSelector": {}, "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]},
     ["spec.egress[0].to[0]: an ipBlock stands alone, without podSelector or namespaceSelector"]),
    ({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0"}}]}]},
     ["spec.ingress[0].from[0].ipBlock.cidr: '10.0.0.0' is not a valid IP/prefix (no prefix length)"]),
    ({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]},
     ["spec.ingress[0].from[0].ipBlock.cidr: '10.0.0.0/33' is not a valid IP/prefix"]),
    ({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": [
        "10.0.0.0/8", "11.0.0.0/16", "fd00::/64", "10.1.0.0/16"]}}]}]},
     ["spec.ingress[0].from[0].ipBlock.except[0]: '10.0.0.0/8' is not strictly inside the cidr 10.0.0.0/8",
      "spec.ingress[0].from[0].ipBlock.except[1]: '11.0.0.0/16' is not strictly inside the cidr 10.0.0.0/8",
      "spec.ingress[0].from[0].ipBlock.except[2]: 'fd00::/64' is not strictly inside the cidr 10.0.0.0/8"]),
    ({"podSelector": {}, "ingress": [{"ports": [{"protocol": "ICMP"}]}]},
     ["spec.ingress[0].ports[0].protocol: 'ICMP' is not one of TCP, UDP, SCTP"]),
    ({"podSelector": {}, "ingress": [{"ports": [{"port": "http"}]}]},
     ["spec.ingress[0].ports[0].port: 'http' is a named port; give its number (named ports resolve per pod, "
      "which this product does not track)"]),
    ({"podSelector": {}, "ingress": [{"ports": [{"port": 0}]}]},
     ["spec.ingress[0].ports[0].port: 0 is not a port number (1-65535)"]),
    ({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "endPort": 70000}]}]},
     ["spec.ingress[0].ports[0].endPort: 70000 is not a port number (1-65535)"]),
    ({"podSelector": {}, "ingress": [{"ports": [{"endPort": 90}]}]},
     ["spec.ingress[0].ports[0].endPort: 90 needs a numeric port to start the range"]),
    ({"podSelector": {}, "ingress": [{"ports": [{"port": 90, "endPort": 80}]}]},
     ["spec.ingress[0].ports[0].endPort: 80 is below the port 90; the range is port..endPort"]),
    ({"podSelector": {}, "ingress": [{"ports": [{"port": True}]}]},
     ["spec.ingress[0].ports[0].port: True is not a port number (1-65535)"]),
    ({"podSelector": {}, "ingress": ["all"]}, ["spec.ingress[0]: 'all' is not a rule"]),
    ({"podSelector": {}, "egress": [{"to": [{"namespaceSelector": {"matchExpressions": [
        {"key": "team", "operator": "In"}]}}]}]},
     ["spec.egress[0].to[0].namespaceSelector.matchExpressions[0].values: In needs at least one value"]),
    ("everything", ["spec: 'everything' is not a policy's spec"]),
])
def test_each_bad_input_is_named_by_its_field(spec, problems):
    found = refused(policy(spec))
    assert len(found) == len(problems), found
    for got, want in zip(found, problems):
        assert got.startswith(want), (got, want)


def test_every_problem_of_a_policy_is_reported_at_once():
    found = refused(policy({"podSelector": {"matchLabels": {"a": "-"}}, "policyTypes": ["Sideways"],
                            "ingress": [{"ports": [{"port": 99999}]}, {"from": [{}]}],
                            "egress": [{"to": [{"ipBlock": {"cidr": "nope/8"}}]}]},
                           networks="Bad Name"))
    assert [p.split(":")[0] for p in found] == [
        "metadata.annotations[k8s.v1.cni.cncf.io/policy-for][0]", "spec.podSelector.matchLabels.a",
        "spec.ingress[0].ports[0].port", "spec.ingress[1].from[0]", "spec.egress[0].to[0].ipBlock.cidr",
        "spec.policyTypes[0]"]


@pytest.mark.parametrize("obj, problem", [
    (policy(networks=None), "metadata.annotations[k8s.v1.cni.cncf.io/policy-for]: None names no network"),
    (policy(namespace="Tenant"), "metadata.namespace: 'Tenant' is not a namespace"),
    (policy(name="web in"), "metadata.name: 'web in' is not a policy's name"),
    (["not", "an", "object"], "['not', 'an', 'object'] is not a MultiNetworkPolicy"),
])
def test_the_object_itself(obj, problem):
    assert refused(obj) == [problem]
