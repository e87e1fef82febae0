"""The watcher keeps a chain's next hops: function pods come, turn ready or
unready and go, on the API stand-in; the NB is read from outside."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import chains
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import marks
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from tests.harness.watcher_env import Cluster, ovn_network

CHAIN = {"name": "fw", "source_network": "net1", "destination_network": "net2",
         "source_selector": {"app": "client"},
         "functions": [{"selector": {"app": "fw"}, "left": {"interface": "eth1", "network": "net1"},
                        "right": {"interface": "eth2", "network": "net2"}}]}
FUNCTION = ovn_network({"name": "net1", "interface": "eth1"}, {"name": "net2", "interface": "eth2"})
WRONG = ovn_network({"name": "net2", "interface": "eth1"}, {"name": "net1", "interface": "eth2"})


@pytest.fixture(scope="module")
def k8s(tmp_path_factory, collections_path):
    env = Cluster(str(tmp_path_factory.mktemp("chains")), collections_path)
    try:
        yield env
    finally:
        code = env.stop()
    assert code == 0, "SIGTERM must stop the watcher cleanly (exit %r)" % code


def declare(env, config, state="merged"):
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, TABLES + chains.TABLES) as db:
        return execute(db, lambda v: chains.plan_chains(v, [("config[0]", config)], state), write=True)


def hops(idl):
    """``{hop: (action, next hops)}`` of chain fw, and its source set."""
    out = {}
    for row in idl.tables["Logical_Router_Policy"].rows.values():
        if row.external_ids.get(marks.K_CHAIN) == "fw":
            out[row.external_ids[marks.K_CHAIN_HOP]] = (row.action, sorted(row.nexthops))
    for row in idl.tables["Address_Set"].rows.values():
        if row.external_ids.get(marks.K_CHAIN) == "fw":
            out["source"] = sorted(row.addresses)
    return out


def wait_hops(env, expected, timeout=30):
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, TABLES + chains.TABLES) as db:
        found = db.wait_for(lambda idl: hops(idl) == expected, timeout)
        last = db.read(hops)
    assert found, "chain fw is %r, not %r; watcher log:\n%s" % (last, expected, env.log_text())


def addresses(env, name):
    return dict((e["interface"], e["ip_address"].split("/")[0]) for e in env.annotated("default", name))


def port_security(env, port):
    return [p["port_security"] for p in env.box.rows("nb", "Logical_Switch_Port") if p["name"] == port][0]


def test_the_watcher_keeps_a_chains_next_hops(k8s):
    declare(k8s, CHAIN)
    wait_hops(k8s, {"forward/0": ("drop", []), "reverse/0": ("drop", []), "source": []})

    k8s.api.create_pod("default", "client", ovn_network({"name": "net1", "interface": "eth1"}),
                       labels={"app": "client"})
    client = addresses(k8s, "client")["eth1"]
    k8s.api.set_ready("default", "client")
    k8s.api.create_pod("default", "fw-1", FUNCTION, labels={"app": "fw"})
    k8s.api.create_pod("default", "fw-2", FUNCTION, labels={"app": "fw"})
    one, two = addresses(k8s, "fw-1"), addresses(k8s, "fw-2")
    # not ready: not used yet
    wait_hops(k8s, {"forward/0": ("drop", []), "reverse/0": ("drop", []), "source": [client]})
    k8s.api.set_ready("default", "fw-1")
    k8s.api.set_ready("default", "fw-2")
    wait_hops(k8s, {"forward/0": ("reroute", sorted([one["eth1"], two["eth1"]])),
                    "reverse/0": ("reroute", sorted([one["eth2"], two["eth2"]])), "source": [client]})
    assert port_security(k8s, "default_fw-1_eth1") == port_security(k8s, "default_fw-1_eth1").split()[0], \
        "a function's chain interface has MAC-only port security"
    assert len(port_security(k8s, "default_client_eth1").split()) > 1, "others keep theirs"
    held = [p["external_ids"].get("ovn4nfv-chain-held") for p in k8s.box.rows("nb", "Logical_Switch_Port")
            if p["name"] == "default_fw-1_eth1"][0]
    assert held.split()[1] == one["eth1"], "the port security it replaced is kept, for the node agent"

    # a pod the selector picks, with its interfaces on the wrong networks
    k8s.api.create_pod("default", "fw-bad", WRONG, labels={"app": "fw"})
    addresses(k8s, "fw-bad")
    k8s.api.set_ready("default", "fw-bad")
    assert k8s.api.wait(lambda api: [e for e in k8s.events_for("fw-bad")
                                     if e["reason"] == "ChainInterfaceMismatch"], 30), k8s.log_text()
    [event] = [e for e in k8s.events_for("fw-bad") if e["reason"] == "ChainInterfaceMismatch"]
    assert "eth1" in event["message"] and "net1" in event["message"] and "fw" in event["message"]

    k8s.api.set_ready("default", "fw-2", ready=False)
    wait_hops(k8s, {"forward/0": ("reroute", [one["eth1"]]), "reverse/0": ("reroute", [one["eth2"]]),
                    "source": [client]})
    assert len(port_security(k8s, "default_fw-2_eth1").split()) > 1, "no longer a function: secured again"
    k8s.api.delete_pod("default", "fw-1")
    wait_hops(k8s, {"forward/0": ("drop", []), "reverse/0": ("drop", []), "source": [client]})

    k8s.api.set_ready("default", "fw-2")
    wait_hops(k8s, {"forward/0": ("reroute", [two["eth1"]]), "reverse/0": ("reroute", [two["eth2"]]),
                    "source": [client]})
    declare(k8s, {"name": "fw"}, state="deleted")
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, TABLES + chains.TABLES) as db:
        unmarked = db.wait_for(lambda idl: not any(
            r.external_ids.get("ovn4nfv-chains") for r in idl.tables["Logical_Switch_Port"].rows.values()), 30)
    assert unmarked, "the deleted chain's function ports keep its mark:\n" + k8s.log_text()
    assert not [p for p in k8s.box.rows("nb", "Logical_Switch_Port") if "ovn4nfv-chain-held" in p["external_ids"]]
    assert len(port_security(k8s, "default_fw-2_eth1").split()) > 1
