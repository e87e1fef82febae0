"""Requests that cannot work on the node are refused where they are read,
naming the field, before any port is made: a route's next hop off the
interface's network, the interface's own address as a next hop, a second
default route (issue 32). On the node they used to fail later, with a bare
errno ("Network is unreachable", "File exists")."""

import json
import subprocess

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View

from tests.harness.nb_env import nb_with_networks


@pytest.fixture(scope="module")
def nb():
    with nb_with_networks([{"name": "r1", "subnet": "172.19.1.0/24"},
                           {"name": "r2", "subnet": "172.19.2.0/24", "subnet6": "fd00:19::/64"}]) as env:
        yield env


def ports(box):
    out = subprocess.run(["ovn-nbctl", "--db=" + box.nb_db, "--bare", "--columns=name", "list",
                          "Logical_Switch_Port"], check=True, capture_output=True, text=True, timeout=30).stdout
    return [name for name in out.split() if name.startswith("default_")]


def parse(*entries, **extra):
    annotations = {ann.OVN_NETWORK: json.dumps(list(entries))}
    annotations.update((k, json.dumps(v)) for k, v in extra.items())
    return ann.parse_requests(annotations)[1]


@pytest.mark.parametrize("entry, words", [
    ({"name": "r1", "interface": "net0", "routes": [{"dst": "10.9.0.0/16", "gw": "172.19.2.1"}]},
     ["ovnNetwork[0].routes[0].gw", "172.19.2.1", "not on network r1"]),
    ({"name": "r1", "interface": "net0", "ip_address": "172.19.1.40",
      "routes": [{"dst": "10.9.0.0/16", "gw": "172.19.1.40"}]},
     ["ovnNetwork[0].routes[0].gw", "own address"]),
    ({"name": "r1", "interface": "net0", "routes": [{"dst": "10.9.0.0/16", "gw": "172.19.1.255"}]},
     ["ovnNetwork[0].routes[0].gw", "not a host address"]),
    ({"name": "r1", "interface": "net0", "routes": [{"dst": "fd00:99::/64", "gw": "172.19.1.9"}]},
     ["ovnNetwork[0].routes[0].gw", "same family"]),
    ({"name": "r1", "interface": "net0", "routes": [{"dst": "fd00:99::/64", "gw": "fd00:19::9"}]},
     ["ovnNetwork[0].routes[0].gw", "no IPv6 subnet"]),
    ({"name": "r1", "interface": "net0", "routes": [{"dst": "fd00:99::/64"}]},
     ["ovnNetwork[0].routes[0].gw", "IPv6 next hop"]),
], ids=["off-link", "own-address", "broadcast", "family", "no-subnet6", "v6-without-gw"])
def test_a_route_that_cannot_work_is_refused_naming_the_field(nb, entry, words):
    box, db = nb
    pod = pod_ports.Pod("default", "bad", "uid-bad")
    with pytest.raises(ValidationError) as err:
        execute(db, lambda v: pod_ports.plan_pod(v, pod, parse(entry)), write=True)
    assert err.value.reason == pod_ports.INVALID
    for word in words:
        assert word in str(err.value), str(err.value)
    assert ports(box) == [], "nothing of a refused pod is made"


def test_a_route_through_a_neighbour_on_the_network_is_served_and_never_gets_its_address(nb):
    box, db = nb
    pod = pod_ports.Pod("default", "good", "uid-good")
    # .2 would be the first free address: it is the route's next hop, so the pod gets another
    requests = parse({"name": "r1", "interface": "net0", "routes": [{"dst": "10.9.0.0/16", "gw": "172.19.1.2"}]},
                     {"name": "r2", "interface": "net1", "routes": [{"dst": "fd00:99::/64", "gw": "fd00:19::9"}]})
    try:
        execute(db, lambda v: pod_ports.plan_pod(v, pod, requests), write=True)
        entries = db.wait_for(lambda idl: pod_ports.interface_list(View(idl), pod, requests), 10)
        assert entries[0]["ip_address"] != "172.19.1.2/24", entries
        assert {"dst": "10.9.0.0/16", "gw": "172.19.1.2"} in entries[0]["routes"]
    finally:
        execute(db, lambda v: pod_ports.plan_delete(v, pod.uid), write=True)


@pytest.mark.parametrize("entries, extra, words", [
    ([{"name": "r1", "interface": "net0", "default_gateway": True},
      {"name": "r2", "interface": "net1", "routes": [{"dst": "0.0.0.0/0", "gw": "172.19.2.5"}]}], {},
     ["ovnNetwork[1].routes[0].dst", "ovnNetwork[0].default_gateway", "more than one default route"]),
    ([{"name": "r1", "interface": "net0", "routes": [{"dst": "0.0.0.0/0", "gw": "172.19.1.5"}]},
      {"name": "r2", "interface": "net1"}], {ann.ROUTES: [{"dev": "net1", "dst": "0.0.0.0/0", "gw": "172.19.2.5"}]},
     ["ovnNetworkRoutes[0].dst", "ovnNetwork[0].routes[0].dst"]),
], ids=["default-gateway-and-route", "two-routes"])
def test_a_second_default_route_is_refused_as_the_pod_is_read(entries, extra, words):
    with pytest.raises(ValidationError) as err:
        parse(*entries, **extra)
    for word in words:
        assert word in str(err.value), str(err.value)


def test_one_default_route_per_family_is_accepted():
    requests = parse({"name": "r1", "interface": "net0", "default_gateway": True},
                     {"name": "r2", "interface": "net1", "routes": [{"dst": "::/0", "gw": "fd00:19::1"}]})
    assert [r.interface for r in requests] == ["net0", "net1"]
