"""The watcher's policies on the real data plane: a MultiNetworkPolicy
created, changed and deleted, and the client pod's label changed away
from a peer set and back, each obeyed by new TCP connections between two
pods bound by ovn-controller (``tests/harness/policy_env.py``;
``benchmarks/policy.py`` times the same transitions at 1,000 pods).
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import POLICY_FOR

from tests.harness.policy_env import ADMIT, ISOLATE, PROBE_NETWORK, PolicyNode


def test_a_label_change_moves_a_pod_out_of_a_peer_set_and_back(collections_path):
    with PolicyNode(collections_path) as lab:
        api = lab.api
        assert lab.obeys(True), "before any policy, the client reaches the server"
        # twice: the second time, every row of the policy is made again
        # under the names of the first
        for cycle in range(2):
            api.create_policy("probe", "iso", ISOLATE, {POLICY_FOR: PROBE_NETWORK})
            assert lab.obeys(False), "cycle %d: a policy with no ingress rule isolates the server" % cycle
            api.update_policy("probe", "iso", ADMIT)
            assert lab.obeys(True), "cycle %d: the client is admitted by its label" % cycle
            api.set_labels("probe", "cli", {"app": "other"})
            assert lab.obeys(False), "cycle %d: the client's label changed away takes it out" % cycle
            api.set_labels("probe", "cli", {"app": "cli"})
            assert lab.obeys(True), "cycle %d: its label back lets it in again" % cycle
            api.delete_policy("probe", "iso")
            assert lab.obeys(True), "cycle %d: the policy deleted, the server is open" % cycle
        assert lab.stop_watcher() in (0, None), "the watcher stops cleanly"
        assert lab.node.log_errors() == [], "the daemons logged errors"
