"""A pod scheduled where its provider network is not (issue 35): the
watcher, as a process, reads the chassis' bridge mappings from a real SB
and says so with a ``PhysicalNetworkMissing`` Event on the pod, read from
the API stand-in. The chassis are rows ovn-sbctl writes, as ovn-controller
would on each node."""

import pytest

from tests.harness.watcher_env import NETWORKS, Cluster, ovn_network

MISSING = "PhysicalNetworkMissing"
PROVIDER = {"name": "prov-net", "subnet": "192.168.100.0/24", "physnet": "physnet-ext", "vlan": 100}


@pytest.fixture(scope="module")
def k8s(tmp_path_factory, collections_path):
    env = Cluster(str(tmp_path_factory.mktemp("physnets")), collections_path, networks=NETWORKS + [PROVIDER],
                  sb=True)
    try:
        yield env
    finally:
        code = env.stop()
    assert code == 0, "SIGTERM must stop the watcher cleanly (exit %r)" % code


def chassis(env, name, hostname, mappings):
    """A node's chassis, as its ovn-controller reports it."""
    # an encap address of its own (the SB indexes them); never sent to
    env.box.sbctl("--may-exist", "chassis-add", name, "geneve", "127.0.0.%s" % name[-1])
    env.box.sbctl("set", "chassis", name, "hostname=%s" % hostname,
                  'other_config:ovn-bridge-mappings="%s"' % mappings)


def missing_events(env, name, count=1, timeout=30):
    """The pod's PhysicalNetworkMissing Events, once there are ``count``."""
    def found(api):
        events = [e for e in env.events_for(name) if e["reason"] == MISSING]
        return events if len(events) >= count else None
    events = env.api.wait(found, timeout)
    assert events, "no %s Event on %s; watcher log:\n%s" % (MISSING, name, env.log_text())
    return events


def said(env, name):
    return [e["message"] for e in env.events_for(name) if e["reason"] == MISSING]


def test_pod_on_a_node_without_the_mapping_is_told(k8s):
    chassis(k8s, "ch-w1", "worker1", "physnet-other:br-other")
    chassis(k8s, "ch-w2", "worker2", "physnet-ext:br-ext")
    request = ovn_network({"name": "prov-net", "interface": "eth1"}, {"name": "net1", "interface": "eth2"})
    # in this order: the watcher's one physnets worker takes them in turn, so
    # once the last is told, the two before it were judged
    k8s.api.create_pod("default", "on-w2", request, node="worker2")
    k8s.api.create_pod("default", "overlay-w1", ovn_network({"name": "net1", "interface": "eth1"}), node="worker1")
    k8s.api.create_pod("default", "on-w1", request, node="worker1")
    message = missing_events(k8s, "on-w1")[0]["message"]
    assert "node worker1" in message and "physical network physnet-ext of network prov-net" in message, message
    assert "physnet-other:br-other" in message and "ovn_controller_physnets" in message, message
    assert said(k8s, "on-w2") == [] and said(k8s, "overlay-w1") == []
    # the ports are made all the same: the mapping may come before the pod starts
    assert [e["interface"] for e in k8s.annotated("default", "on-w1")] == ["eth1", "eth2"]

    # worker1 maps it now; worker2 loses it: the chassis' change is the
    # trigger, each node's pods are judged again
    chassis(k8s, "ch-w1", "worker1", "physnet-other:br-other,physnet-ext:br-ext")
    chassis(k8s, "ch-w2", "worker2", "")
    message = missing_events(k8s, "on-w2")[0]["message"]
    assert "node worker2" in message and "(ovn-bridge-mappings: none)" in message, message
    assert len(said(k8s, "on-w1")) == 1, "told again after its node mapped the network: %s" % said(k8s, "on-w1")

    # gone again from worker1: said again, since it was mapped meanwhile
    chassis(k8s, "ch-w1", "worker1", "physnet-other:br-other")
    assert len(missing_events(k8s, "on-w1", count=2)) == 2


def test_a_node_s_chassis_is_known_by_its_name_or_its_host_s_in_any_case(k8s):
    """The ovn_controller role names a chassis after its inventory host
    (system-id), ovn-controller writes the host's own name, which a kubelet
    lower-cases for the node: either finds the node's chassis."""
    chassis(k8s, "worker3", "host-three", "physnet-other:br-other")
    chassis(k8s, "ch-w4", "Worker4", "")
    request = ovn_network({"name": "prov-net", "interface": "eth1"})
    for node in ("worker3", "worker4"):
        k8s.api.create_pod("default", "on-" + node, request, node=node)
        assert "node %s" % node in missing_events(k8s, "on-" + node)[0]["message"]
