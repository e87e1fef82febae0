"""The churn soak of benchmarks/churn.py, shorter: pods created, changed,
relabelled, given a second interface and relieved of it while they run
(issue 36), and deleted at random on three networks (one fills up), and
policies created, changed and deleted, while every kind of fault is
injected once (two watcher replicas: the leader killed, and paused until
the other took over); then, read from outside the product, no port leaked, none
came back after its pod was deleted, no address is held twice, nothing a
live pod needs is missing, in the NB or on the node, and no policy's
address set holds an address no live pod's port holds."""

from tests.harness.churn_env import FAULTS, Churn, line


def test_churn_with_every_fault_converges_clean(tmp_path, collections_path):
    churn = Churn(str(tmp_path), collections_path, seed=7)
    try:
        result = churn.run(ops=150, faults=len(FAULTS))
        print(line(result), churn.stages, result["resurrections"])
        assert result["faults"] == len(FAULTS)
        assert (result["leaked"], result["resurrected"], result["duplicated_ips"], result["missing"]) == \
            (0, 0, 0, 0), (line(result), result["resurrections"], churn.cluster.log_text(), churn.env.log_text())
        # two replicas: the leader killed, then paused and woken fenced (exit 3); the NB's
        # file shows no write under a deposed leader's term, and no interface with two ports
        assert (result["stale_writes"], result["live_twice"]) == (0, 0), line(result)
        assert result["takeovers"] >= 3 and 3 in result["exits"], (line(result), result["exits"], churn.exit_logs)
        assert result["pods"] > 0
        assert result["hot_changes"] > 0, "running pods gained and lost interfaces (issue 36)"
        assert result["policies"] > 0, "some policies were made"
        assert result["stale_policy_addresses"] == [], ("a gone pod's address stayed admitted", result, churn.cluster.log_text()[-6000:])
        assert churn.api.denied == [], "a component asked for what its RBAC manifest does not grant"
    finally:
        churn.stop()
