"""Which policies a pod's change concerns (``daemons/policy_watch.py``
``_concerns``): those that select the pod, and those whose selector peers
pick it, before or after; the watcher re-plans only those on a pod's
event, and every policy when a namespace's labels change."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import POLICY_FOR, check_policy
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.policy_watch import _checked, _concerns

NAMESPACES = {"tenant-a": {"team": "a"}, "tenant-b": {"team": "b"}}


def policy(spec, namespace="tenant-a"):
    return check_policy({"metadata": {"namespace": namespace, "name": "p", "annotations": {
        POLICY_FOR: "ovn4nfv.k8s/net1"}}, "spec": spec})


WEB_FROM_CLI = policy({"podSelector": {"matchLabels": {"app": "web"}},
                       "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}]}]})
FROM_TEAM_B = policy({"podSelector": {"matchLabels": {"app": "web"}},
                      "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "b"}},
                                             "podSelector": {"matchExpressions": [
                                                 {"key": "role", "operator": "Exists"}]}}]}]})
EGRESS_BLOCK = policy({"podSelector": {}, "policyTypes": ["Egress"],
                       "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]})


@pytest.mark.parametrize("checked, namespace, labels, expected", [
    # the pods it selects, in its own namespace only
    (WEB_FROM_CLI, "tenant-a", {"app": "web"}, True),
    (WEB_FROM_CLI, "tenant-b", {"app": "web"}, False),
    # a peer picked by its pod selector, in the policy's namespace only
    (WEB_FROM_CLI, "tenant-a", {"app": "cli"}, True),
    (WEB_FROM_CLI, "tenant-b", {"app": "cli"}, False),
    (WEB_FROM_CLI, "tenant-a", {"app": "other"}, False),
    (WEB_FROM_CLI, "tenant-a", None, False),
    # a namespace selector with a pod selector: both must pick
    (FROM_TEAM_B, "tenant-b", {"role": "x"}, True),
    (FROM_TEAM_B, "tenant-b", {"app": "cli"}, False),
    (FROM_TEAM_B, "tenant-a", {"role": "x"}, False),
    # a namespace not (yet) listed has only its name's label
    (FROM_TEAM_B, "tenant-c", {"role": "x"}, False),
    # an empty pod selector selects every pod of the namespace; an ipBlock picks no pod
    (EGRESS_BLOCK, "tenant-a", {"anything": "x"}, True),
    (EGRESS_BLOCK, "tenant-b", {"anything": "x"}, False),
])
def test_a_pod_concerns_the_policies_that_select_it_or_pick_it(checked, namespace, labels, expected):
    assert _concerns(checked, namespace, labels, NAMESPACES) is expected


def test_a_policy_that_does_not_check_keeps_its_refusal_so_that_every_pod_event_queues_it():
    refused = _checked({"metadata": {"namespace": "tenant-a", "name": "p"}, "spec": {"podSelector": 7}})
    assert isinstance(refused, ValidationError) and "podSelector" in str(refused)
    assert _checked({"metadata": {"namespace": "tenant-a", "name": "p", "annotations": {
        POLICY_FOR: "ovn4nfv.k8s/net1"}}, "spec": {"podSelector": {}}}).key == "tenant-a/p"
