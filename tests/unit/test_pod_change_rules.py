"""What a running pod's changed request drops, replaces and refuses
(cluster.pod_changes), and which served entry a missing port is pinned to
(cluster.pod_changes.fits), on rows and views made by hand."""

import json
from types import SimpleNamespace

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_changes
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.pod_addresses import Pod
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import addressing
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import K_NAMESPACE, K_POD, K_UID

POD = Pod("ns", "web", "uid-1")


class FakeView:
    """Switches by name, each with the uuids of its ports."""

    def __init__(self, switches):
        self.switches = dict((name, SimpleNamespace(name=name, uuid="sw-" + name, ports=set(ports)))
                             for name, ports in switches.items())

    def lookup(self, table, name):
        assert table == "Logical_Switch"
        return self.switches.get(name)

    def holds(self, row, column, uuid):
        return uuid in row.ports


class FakeIndex:
    def __init__(self, rows):
        self.rows = rows

    def ports_of(self, _view, namespace, name):
        return [r for r in self.rows if (r.external_ids[K_NAMESPACE], r.external_ids[K_POD]) == (namespace, name)]


def port(interface, address, uid="uid-1", parent=None, tag=None):
    ids = dict(POD.marks(interface), **{K_UID: uid})
    return SimpleNamespace(uuid="lsp-" + interface + "-" + uid, name=POD.port_name(interface), external_ids=ids,
                           addresses=[address], dynamic_addresses=[], parent_name=[parent] if parent else [],
                           tag=[tag] if tag else [])


def request(network, interface, **kwargs):
    entry = dict({"name": network, "interface": interface}, **kwargs)
    return ann._requests(entry, "ovnNetwork[0]")


def listed(*entries):
    return ann.output_annotations(list(entries))


def entry(interface, ip, mac="0a:58:ac:10:01:0a", **extra):
    return dict({"interface": interface, "ip_address": ip, "mac_address": mac, "gateway_ip": "172.16.1.1",
                 "default_gateway": False, "routes": []}, **extra)


NET0 = port("net0", "0a:58:ac:10:01:0a 172.16.1.10")
NET1 = port("net1", "0a:58:ac:10:02:0a 172.16.2.10")
VIEW = FakeView({"a": [NET0.uuid], "b": [NET1.uuid], "c": []})
SERVED = listed(entry("net0", "172.16.1.10/24"), entry("net1", "172.16.2.10/24", mac="0a:58:ac:10:02:0a"))


def changes(requests, rows=(NET0, NET1), found=None, view=VIEW):
    found = SERVED if found is None else found
    dropped, replaced = pod_changes.changes(view, POD, requests, found, FakeIndex(list(rows)))
    return sorted(dropped), dict((i, why) for i, (_row, why) in replaced.items())


def test_unchanged_added_and_in_place_changes_drop_nothing():
    assert changes(request("a", "net0") + request("b", "net1")) == ([], {})
    assert changes(request("a", "net0") + request("b", "net1") + request("c", "net2")) == ([], {})
    # routes, the default route: in place
    assert changes(request("a", "net0", default_gateway=True, routes=[{"dst": "10.9.0.0/16", "gw": "172.16.1.1"}])
                   + request("b", "net1")) == ([], {})
    # the static address it holds already, said or not said
    assert changes(request("a", "net0", ip_address="172.16.1.10", mac_address="0a:58:ac:10:01:0a")
                   + request("b", "net1")) == ([], {})


def test_an_interface_no_longer_asked_for_is_dropped():
    assert changes(request("a", "net0")) == (["net1"], {})
    # renamed: the old name goes, the new one is made
    assert changes(request("a", "net0") + request("b", "net5")) == (["net1"], {})


def test_an_earlier_pod_s_ports_are_not_this_pod_s_changes():
    old = port("net9", "0a:58:ac:10:01:0b 172.16.1.11", uid="uid-0")
    assert changes(request("a", "net0") + request("b", "net1"), rows=(NET0, NET1, old)) == ([], {})


@pytest.mark.parametrize("asked, text", [
    (dict(network="c"), "its network is now c"),
    (dict(ip_address="172.16.2.50"), "its address is now 172.16.2.50"),
    (dict(mac_address="0a:00:00:00:00:99"), "its MAC is now 0a:00:00:00:00:99"),
    (dict(dhcp=True), "configured by DHCP"),
])
def test_a_changed_identity_is_replaced(asked, text):
    network = asked.pop("network", "b")
    dropped, replaced = changes(request("a", "net0") + request(network, "net1", **asked))
    assert dropped == [] and list(replaced) == ["net1"] and text in replaced["net1"]


def test_a_changed_trunk_nesting_is_replaced():
    trunk = port("net0", "0a:58:ac:10:01:0a 172.16.1.10")
    vlan = port("net0.10", "0a:58:ac:10:02:0b 172.16.2.11", parent=POD.port_name("net0"), tag=10)
    view = FakeView({"a": [trunk.uuid], "b": [vlan.uuid]})
    asked = request("a", "net0", vlans=[{"vlan": 10, "name": "b"}])
    assert changes(asked, rows=(trunk, vlan), found={}, view=view) == ([], {})
    moved = request("a", "net0", vlans=[{"vlan": 20, "name": "b"}])     # another VID: another interface name
    assert changes(moved, rows=(trunk, vlan), found={}, view=view) == (["net0.10"], {})
    renested = SimpleNamespace(**dict(vars(vlan), tag=[30]))
    dropped, replaced = changes(asked, rows=(trunk, renested), found={}, view=view)
    assert dropped == [] and "VLAN 10 of ns_web_net0" in replaced["net0.10"]
    # a trunk's VLAN made a plain interface of its own (no request parses so: made by hand)
    plain = request("a", "net0") + [ann.InterfaceRequest("b", "net0.10", where="ovnNetwork[1]")]
    dropped, replaced = changes(plain, rows=(trunk, vlan), found={}, view=view)
    assert dropped == [] and "no trunk's VLAN" in replaced["net0.10"]


def test_a_request_on_an_unknown_network_replaces_nothing():
    """It is refused as UnknownNetwork by plan_pod, and nothing goes."""
    assert changes(request("a", "net0") + request("nosuch", "net1")) == ([], {})


def test_dhcp_is_judged_by_the_served_entry_alone():
    assert changes(request("a", "net0") + request("b", "net1", dhcp=True), found={}) == ([], {})


def test_primary_by_pod_ip_else_first_addressed_entry():
    entries = pod_changes.served(listed(
        entry("net0", "172.16.1.10/24", dhcp=True), entry("net1", "172.16.2.10/24", parent="net9", vlan=5),
        entry("net2", "172.16.3.10/24"), entry("net3", "172.16.4.10/24")))
    assert pod_changes.primary(entries) == "net2"
    assert pod_changes.primary(entries, "172.16.4.10") == "net3"
    assert pod_changes.primary(entries, "10.244.0.5") is None, "another plugin's address: none of ours"
    assert pod_changes.primary([]) is None
    assert pod_changes.served({ann.IFACE_LIST: "{not json"}) == []
    assert pod_changes.served({ann.IFACE_LIST: json.dumps({"a": 1})}) == []


def test_removing_or_replacing_the_primary_is_refused():
    row = NET0
    said = pod_changes.refusal(SERVED, None, {"net0": row}, {})
    assert "interface net0" in said and "removed" in said and "primary" in said
    said = pod_changes.refusal(SERVED, "172.16.1.10", {}, {"net0": (row, "its network is now c")})
    assert "replaced (its network is now c)" in said and "status.podIP 172.16.1.10" in said
    assert pod_changes.refusal(SERVED, None, {"net1": NET1}, {}) is None
    assert pod_changes.refusal(SERVED, "172.16.2.10", {"net0": row}, {}) is None, "net1 holds podIP"
    assert pod_changes.refusal({}, None, {"net0": row}, {}) is None, "never served: nothing to keep"


def test_plan_changes_refuses_the_primary_before_planning_anything():
    with pytest.raises(ValidationError) as caught:
        pod_changes.plan_changes(VIEW, POD, request("b", "net1"), SERVED, FakeIndex([NET0, NET1]))
    assert caught.value.reason == pod_changes.REFUSED


def test_describe():
    assert pod_changes.describe({}, {}) == ""
    assert pod_changes.describe({"net2": None, "net1": None}, {"net3": (None, "its MAC is now x")}) == \
        "net1 removed, net2 removed, net3 replaced (its MAC is now x)"


NETWORK = SimpleNamespace(subnet=addressing.parse_cidr("172.16.1.0/24", "t"))


@pytest.mark.parametrize("asked, served, fits", [
    (dict(), entry("net0", "172.16.1.10/24"), True),
    (dict(ip_address="172.16.1.10"), entry("net0", "172.16.1.10/24"), True),
    (dict(ip_address="172.16.1.11"), entry("net0", "172.16.1.10/24"), False),
    (dict(mac_address="0a:58:ac:10:01:0a"), entry("net0", "172.16.1.10/24"), True),
    (dict(mac_address="0a:58:ac:10:01:0b"), entry("net0", "172.16.1.10/24"), False),
    (dict(), entry("net0", "172.16.2.10/24"), False),           # another network's address
    (dict(dhcp=True), entry("net0", "172.16.1.10/24"), False),
    (dict(), entry("net0", "172.16.1.10/24", dhcp=True), False),
])
def test_a_served_entry_pins_only_what_still_fits(asked, served, fits):
    wanted = request("a", "net0", **asked)[0]
    ip, _prefix = addressing.parse_ip_prefix(served["ip_address"], "t")
    mac = addressing.parse_mac(served["mac_address"], "t")
    assert pod_changes.fits(wanted, NETWORK, served, ip, mac) is fits
    assert pod_changes.fits(wanted, None, served, ip, mac) is False
