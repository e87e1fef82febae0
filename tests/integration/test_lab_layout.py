"""The lab's machines come from an inventory (lab/layout.py): what it reads
from the example and the three-worker inventory, and the clear error for an
inventory it cannot stand up. ``make lab INVENTORY=...`` runs them for real
(the note of issue 17 has the three-worker lab's figures)."""

import json
import os
import textwrap

import pytest
import yaml

from lab import containers, layout, workload

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

THREE = os.path.join(ROOT, "playbooks", "inventory", "three-workers.yml")
HA = os.path.join(ROOT, "playbooks", "inventory", "ha.yml")


def test_the_example_is_the_seed_lab_and_its_connection_inventory():
    lay = layout.Layout()
    assert lay.networks == [("ovn4nfv-underlay", "192.168.33.0/24"), ("ovn4nfv-external", "192.168.50.0/24")]
    assert lay.nodes == {
        "ovn4nfv-api": ("api", [("ovn4nfv-underlay", "192.168.33.10")]),
        "ovn4nfv-master": ("master", [("ovn4nfv-underlay", "192.168.33.11")]),
        "ovn4nfv-worker1": ("worker1", [("ovn4nfv-underlay", "192.168.33.12"), ("ovn4nfv-external", "192.168.50.12")]),
        "ovn4nfv-worker2": ("worker2", [("ovn4nfv-underlay", "192.168.33.13"), ("ovn4nfv-external", "192.168.50.13")]),
        "ovn4nfv-external": ("external", [("ovn4nfv-external", "192.168.50.100")])}
    assert lay.kube == ["ovn4nfv-master", "ovn4nfv-worker1", "ovn4nfv-worker2"]
    assert lay.external_address(120) == "192.168.50.120"
    # lab/inventory.lab.yml (the molecule topology scenario's) says what the
    # generated one says for the example
    with open(os.path.join(ROOT, "lab", "inventory.lab.yml")) as handle:
        static = yaml.safe_load(handle)["all"]
    made = lay.connection_inventory("/unused")["all"]
    # both reach the containers through the lab's own connection, pipelined
    assert static["vars"]["ansible_connection"] == made["vars"]["ansible_connection"] == "podman_nsenter"
    assert static["vars"]["ansible_pipelining"] is made["vars"]["ansible_pipelining"] is True
    assert static["vars"]["lab_api"] == made["vars"]["lab_api"] == "https://192.168.33.10:6443"
    assert static["vars"]["ovn4nfv_container_runtime"] is made["vars"]["ovn4nfv_container_runtime"] is True
    # verify.yml's matrix is the default namespace's pods, in the lab and in molecule's topology scenario
    assert static["vars"]["ovn4nfv_verify_namespaces"] == made["vars"]["ovn4nfv_verify_namespaces"] == ["default"]
    hosts = {}
    for group in static["children"].values():
        for host, values in (group.get("hosts") or {}).items():
            if values:
                hosts[host] = values
    assert hosts == made["hosts"]


def test_three_workers_on_other_subnets():
    lay = layout.Layout(THREE)
    assert lay.networks == [("ovn4nfv-underlay", "192.168.70.0/24"), ("ovn4nfv-external", "192.168.80.0/24")]
    assert lay.workers == ["worker1", "worker2", "worker3"]
    assert lay.nodes["ovn4nfv-worker3"] == ("worker3", [("ovn4nfv-underlay", "192.168.70.23"),
                                                        ("ovn4nfv-external", "192.168.80.23")])
    assert lay.api_address == "192.168.70.10"
    assert lay.underlay_address(99) == "192.168.70.99"
    placed = dict((pod, node) for node, pod, _n, _l, _ns in lay.pods())
    assert placed["pod-w3a"] == "worker3" and placed["fwd-w2"] == "worker2" and placed["chain-src"] == "worker1"
    assert set(placed.values()) == {"worker1", "worker2", "worker3"}
    assert lay.pod_subnets == ("172.20.1.0/24", "172.20.2.0/24")


def test_the_ha_inventory_has_three_masters_each_a_central_member():
    lay = layout.Layout(HA)
    assert lay.masters == lay.central == ["master1", "master2", "master3"]
    assert lay.workers == ["worker1", "worker2"] and lay.externals == ["external"]
    assert lay.networks == [("ovn4nfv-underlay", "192.168.90.0/24"), ("ovn4nfv-external", "192.168.91.0/24")]
    assert lay.nodes["ovn4nfv-master3"] == ("master3", [("ovn4nfv-underlay", "192.168.90.13")])
    assert lay.nodes["ovn4nfv-external"] == ("external", [("ovn4nfv-external", "192.168.91.100")])
    assert lay.api_address == "192.168.90.10"
    assert lay.kube == ["ovn4nfv-master1", "ovn4nfv-master2", "ovn4nfv-master3", "ovn4nfv-worker1",
                        "ovn4nfv-worker2"]
    assert lay.pod_subnets == ("172.21.1.0/24", "172.21.2.0/24")


def inventory(tmp_path, text):
    path = tmp_path / "inventory.yml"
    path.write_text(textwrap.dedent(text))
    return str(path)


BASE = """\
all:
  vars:
    ovn4nfv_networks: [{name: ovn-net1, subnet: 10.1.0.0/24}, {name: ovn-net2, subnet: 10.2.0.0/24}]
  children:
    ovn_central: {hosts: {m: }}
    masters: {hosts: {m: {node_underlay_address: 192.168.90.11/24}}}
    workers:
      hosts:
        a: {node_underlay_address: 192.168.90.12/24, node_gateway_external_ip: 192.168.91.12/24}
        %s
"""


# a second worker the lab takes
WORKER_B = "b: {node_underlay_address: 192.168.90.13/24, node_gateway_external_ip: 192.168.91.13/24}"


def refusal(tmp_path, text):
    """What Layout says in refusing the inventory ``text``."""
    with pytest.raises(layout.LayoutError) as raised:
        layout.Layout(inventory(tmp_path, text))
    return str(raised.value)


@pytest.mark.parametrize("second, words", [
    ("", "at least two workers"),
    ("b: {node_gateway_external_ip: 192.168.91.13/24}", "b has no node_underlay_address"),
    ("b: {node_underlay_address: 192.168.92.13/24, node_gateway_external_ip: 192.168.91.13/24}",
     "on 2 subnets"),
    ("b: {node_underlay_address: '{{ x }}', node_gateway_external_ip: 192.168.91.13/24}", "is a template"),
    ("b: {node_underlay_address: 192.168.90.300/24, node_gateway_external_ip: 192.168.91.13/24}",
     "is not an address"),
])
def test_an_inventory_the_lab_cannot_stand_up_is_refused_by_name(tmp_path, second, words):
    assert words in refusal(tmp_path, BASE % second)


def test_the_lab_needs_two_networks(tmp_path):
    text = (BASE % WORKER_B).replace(", {name: ovn-net2, subnet: 10.2.0.0/24}", "")
    assert "need two networks in ovn4nfv_networks, which declares 1" in refusal(tmp_path, text)
    good = layout.Layout(inventory(tmp_path, BASE % WORKER_B))
    assert good.kube == ["ovn4nfv-m", "ovn4nfv-a", "ovn4nfv-b"] and good.api_address == "192.168.90.10"


OTHER = """\
all:
  vars:
    ovn4nfv_networks:
      - {name: blue, subnet: 10.77.0.0/16}
      - {name: red-side, subnet: 172.30.5.0/24}
      - {name: ovn-net1, subnet: 10.1.0.0/24}
  children:
    ovn_central: {hosts: {c: {node_underlay_address: 10.250.0.5/24}}}
    masters: {hosts: {c: }}
    workers:
      hosts:
        alpha: {node_underlay_address: 10.250.0.6/24, node_gateway_external_ip: 10.251.0.6/24}
        beta: {node_underlay_address: 10.250.0.7/24, node_gateway_external_ip: 10.251.0.7/24}
    external_hosts: {hosts: {outside: {external_address: 10.251.0.100/24}}}
"""


def interfaces(request):
    return [(item["name"], item["interface"]) for item in json.loads(request)]


def test_the_workloads_go_on_the_inventorys_first_two_networks_whatever_their_names(tmp_path):
    """An inventory whose networks are not the example's (other names, other
    subnets, a third network): every pod, the Service, the chain and the tap
    are on its first two networks, blue and red-side, none on another."""
    session = containers.Session(inventory=inventory(tmp_path, OTHER), state=str(tmp_path / "state"))
    lay = session.layout
    assert lay.pod_networks == ("blue", "red-side")
    placed = dict((pod, (node, interfaces(request), labels)) for node, pod, request, labels, _ns in lay.pods())
    assert placed["pod-w1a"] == ("alpha", [("blue", "eth0"), ("red-side", "net1")], {})
    assert placed["fwd-w2"] == ("beta", [("blue", "eth0"), ("red-side", "net1")], {"app": "fwd"})
    assert placed["web-w1"] == ("alpha", [("blue", "eth0")], {"app": "web"})
    assert placed["cli-w1"] == ("alpha", [("red-side", "eth0")], {})
    assert placed["chain-dst"][1] == [("red-side", "eth0")]
    asked = set(name for _node, _pod, request, _l, _ns in lay.pods() for name, _i in interfaces(request))
    assert asked == {"blue", "red-side"}
    # the first interface is the default gateway, as the seed's pods have it
    assert all(json.loads(request)[0]["defaultGateway"] == "true" for _n, _p, request, _l, _ns in lay.pods())
    # the Service on the first network, its external IP on the inventory's external subnet
    svc = workload.service(session)
    assert svc["metadata"]["annotations"]["k8s.plugin.opnfv.org/service-network"] == "blue"
    assert svc["spec"]["externalIPs"] == ["10.251.0.120"]
    # what verify.yml is told: the chain to the second network, the tap's target on the first
    told = json.loads(workload.verify_vars(session)[1])
    assert told["verify_chains"][0]["destination"]["network"] == "red-side"
    assert told["verify_chains"][0]["function"] == {"node": "beta", "pod": "fwd-w2", "interfaces": ["eth0", "net1"]}
    assert told["verify_taps"][0]["target"]["network"] == "blue"
    assert told["verify_services"][0]["external_ips"] == ["10.251.0.120"]
    assert lay.networks == [("ovn4nfv-underlay", "10.250.0.0/24"), ("ovn4nfv-external", "10.251.0.0/24")]
    # the tenants' policy is for the first network and admits the second one's subnet, probed on the first
    policy = workload.tenancy(session)["policies"][0]
    assert policy["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/policy-for": "ovn4nfv.k8s/blue"}
    assert policy["spec"]["ingress"][0]["from"][2] == {"ipBlock": {"cidr": "172.30.5.0/24"}}
    assert set(row["network"] for row in told["verify_policies"]) == {"blue"}


def test_workloads_yml_declares_the_chain_on_the_networks_it_is_given():
    """workloads.yml's chain names no network of its own: every network in
    it is one of ``lab_networks``, which the lab passes it."""
    with open(os.path.join(ROOT, "lab", "workloads.yml")) as handle:
        plays = yaml.safe_load(handle)
    chain = plays[0]["tasks"][0]["ovn4nfv.k8s.network_chain"]["config"][0]
    function = chain["functions"][0]
    assert (chain["source_network"], function["left"]["network"]) == ("{{ lab_pod_networks[0] }}",) * 2
    assert (chain["destination_network"], function["right"]["network"]) == ("{{ lab_pod_networks[1] }}",) * 2
    assert "lab_networks" in plays[0]["vars"]["lab_pod_networks"]
    assert "ovn-net" not in yaml.safe_dump(plays)


def test_the_provider_pods_sit_on_the_inventorys_provider_networks_out_of_the_matrix():
    """The example's provider networks (on the gateways' physnet-ext, VLANs
    100 and 200) are the fabric's; their pods: one on each worker on the
    first, one on the second, one on both and the first overlay, in the
    namespace ``provider``, which the matrix leaves out."""
    lay = layout.Layout()
    assert [(n["name"], n["vlan"], n["gateway"], n["subnet"]) for n in lay.provider_networks] == [
        ("prov-v100", 100, "192.168.100.1", "192.168.100.0/24"), ("prov-v200", 200, "192.168.200.1", "192.168.200.0/24")]
    placed = dict((pod, (node, interfaces(request), ns)) for node, pod, request, _l, ns in lay.pods()
                  if ns == layout.PROVIDER_NAMESPACE)
    assert placed == {"prov-w1": ("worker1", [("prov-v100", "eth0")], "provider"),
                      "prov-w2": ("worker2", [("prov-v100", "eth0")], "provider"),
                      "prov-v2": ("worker2", [("prov-v200", "eth0")], "provider"),
                      "prov-multi": ("worker1", [("prov-v100", "eth0"), ("prov-v200", "eth1"), ("ovn-net1", "eth2")],
                                     "provider"),
                      # a VNF's trunk: the second provider network untagged, the first as VID 10
                      "prov-trunk": ("worker1", [("prov-v200", "eth0")], "provider")}
    trunk = next(json.loads(r) for _n, pod, r, _l, _ns in lay.pods() if pod == layout.TRUNK_POD)
    assert trunk[0]["vlans"] == [{"name": "prov-v100", "vlan": 10}]
    assert layout.PROVIDER_NAMESPACE not in layout.MATRIX_NAMESPACES


def test_the_policys_pods_sit_apart_in_labelled_namespaces_out_of_the_matrix():
    """The policy's server and the client its labels admit are on
    different workers (the policy proven across the overlay), the other
    tenant's pod beside the server; all three on the first network only, in
    namespaces of their own that the matrix leaves out."""
    lay = layout.Layout()
    placed = dict((pod, (node, interfaces(request), labels, ns)) for node, pod, request, labels, ns in lay.pods())
    assert placed["pol-srv"] == ("worker2", [("ovn-net1", "eth0")], {"app": "srv"}, "tenant-a")
    assert placed["pol-cli"] == ("worker1", [("ovn-net1", "eth0")], {"app": "cli"}, "tenant-a")
    assert placed["pol-b"] == ("worker2", [("ovn-net1", "eth0")], {}, "tenant-b")
    # every other pod is the matrix's, as before: in default, whose pods it covers (the provider
    # networks' pods have a namespace of their own: test_the_provider_pods_...)
    assert sorted(p for p, (_n, _i, _l, ns) in placed.items() if ns not in ("default", layout.PROVIDER_NAMESPACE)) \
        == ["pol-b", "pol-cli", "pol-srv"]
    assert layout.MATRIX_NAMESPACES == ["default"] and len(placed) == 14 + len(layout.PROVIDER_PODS) + 1
    assert layout.TENANTS == {"tenant-a": {"team": "a"}, "tenant-b": {"team": "b"}}


def test_a_lab_network_without_an_ipv4_subnet_is_refused(tmp_path):
    text = (BASE % WORKER_B).replace("subnet: 10.2.0.0/24", "subnet: 10.2.0.1/24")
    assert "the lab's network ovn-net2 needs an IPv4 subnet, not '10.2.0.1/24'" in refusal(tmp_path, text)


def test_the_policy_rows_are_the_policys_and_the_baselines_cases():
    """verify.yml is told, for srv-in, TCP to pol-srv from: the client its
    labels admit, the other tenant's pod (namespace), a default pod that no
    peer names, and cli-w1 on the second network (the ipBlock, through the
    router), on both policed ports where the baseline decides."""
    session = containers.Session()
    rows = workload.verify_policies(session)
    said = [(r["client"], r["port"], r["expect"]) for r in rows]
    assert said == [("pol-cli", 7777, "allowed"), ("pol-cli", 7778, "allowed"), ("pol-b", 7777, "allowed"),
                    ("pod-w1a", 7777, "denied"), ("cli-w1", 7777, "allowed"), ("cli-w1", 7778, "denied")]
    assert set((r["policy"], r["server"], r["network"]) for r in rows) == {("srv-in", "pol-srv", "ovn-net1")}
    spec = workload.tenancy(session)
    assert spec["namespaces"] == [{"name": "tenant-a", "labels": {"team": "a"}},
                                  {"name": "tenant-b", "labels": {"team": "b"}}]
    policy = spec["policies"][0]
    assert (policy["metadata"]["name"], policy["metadata"]["namespace"]) == ("srv-in", "tenant-a")
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app": "srv"}}
    assert policy["spec"]["ingress"] == [{
        "from": [{"podSelector": {"matchLabels": {"app": "cli"}}}, {"namespaceSelector": {"matchLabels": {"team": "b"}}},
                 {"ipBlock": {"cidr": "172.16.44.0/24"}}],
        "ports": [{"protocol": "TCP", "port": 7777}, {"protocol": "TCP", "port": 7778}]}]
    # every row's client is a pod of the lab, and every port one the policy names
    pods = set(pod for _node, pod, _r, _l, _ns in session.layout.pods())
    assert set(r["client"] for r in rows) <= pods and "pol-srv" in pods
    assert set(r["port"] for r in rows) == set(p["port"] for p in policy["spec"]["ingress"][0]["ports"])


def test_workloads_yml_declares_the_baseline_on_the_lab_networks_and_port():
    """The operator's baseline denies the second network the first one's
    BASELINE_PORT, and nothing else: the Service and the chain cross on
    other ports."""
    with open(os.path.join(ROOT, "lab", "workloads.yml")) as handle:
        plays = yaml.safe_load(handle)
    tasks = [t for t in plays[0]["tasks"] if "ovn4nfv.k8s.network_policy" in t]
    assert len(tasks) == 1
    rule, = tasks[0]["ovn4nfv.k8s.network_policy"]["config"]
    assert rule["network"] == "{{ lab_pod_networks[0] }}" and rule["peers"] == [{"network": "{{ lab_pod_networks[1] }}"}]
    assert (rule["direction"], rule["action"]) == ("ingress", "deny")
    assert rule["ports"] == [{"protocol": "TCP", "port": workload.BASELINE_PORT}]
    assert workload.BASELINE_PORT != workload.VERIFY_PORT
