"""The lab's machines come from an inventory (lab/layout.py): what it reads
from the example and the three-worker inventory, and the clear error for an
inventory it cannot stand up. ``make lab INVENTORY=...`` runs them for real
(the note of issue 17 has the three-worker lab's figures)."""

import os
import sys
import textwrap

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "lab"))

import layout  # noqa: E402  (lab/ on the path above)

THREE = os.path.join(ROOT, "playbooks", "inventory", "three-workers.yml")


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
    assert static["vars"]["lab_api"] == made["vars"]["lab_api"] == "https://192.168.33.10:6443"
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
    placed = dict((pod, node) for node, pod, _n, _l in lay.pods())
    assert placed["pod-w3a"] == "worker3" and placed["fwd-w2"] == "worker2" and placed["chain-src"] == "worker1"
    assert set(placed.values()) == {"worker1", "worker2", "worker3"}


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
    with pytest.raises(layout.LayoutError) as raised:
        layout.Layout(inventory(tmp_path, BASE % second))
    assert words in str(raised.value)


def test_the_pods_networks_must_be_declared(tmp_path):
    text = (BASE % "b: {node_underlay_address: 192.168.90.13/24, node_gateway_external_ip: 192.168.91.13/24}"
            ).replace("{name: ovn-net2, subnet: 10.2.0.0/24}", "{name: other, subnet: 10.2.0.0/24}")
    with pytest.raises(layout.LayoutError) as raised:
        layout.Layout(inventory(tmp_path, text))
    assert "lacks ovn-net2" in str(raised.value)
    good = layout.Layout(inventory(tmp_path, BASE % (
        "b: {node_underlay_address: 192.168.90.13/24, node_gateway_external_ip: 192.168.91.13/24}")))
    assert good.kube == ["ovn4nfv-m", "ovn4nfv-a", "ovn4nfv-b"] and good.api_address == "192.168.90.10"
