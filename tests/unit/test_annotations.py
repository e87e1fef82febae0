"""The pod annotation formats: what is accepted, and what each bad
annotation is refused with (naming the annotation and the field)."""

import json

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from tests.harness.annotation_cases import BAD, net


def test_seed_format_static_and_dynamic():
    source, reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([
        {"name": "ovn-ls-25", "interface": "net0"},
        {"name": "ovn-ls-26", "interface": "net1", "ip_address": "172.16.25.3",
         "mac_address": "0A:00:00:00:00:15"}])})
    assert source == ann.OVN_NETWORK
    assert [(r.network, r.interface, str(r.ip) if r.ip else None, r.mac) for r in reqs] == [
        ("ovn-ls-25", "net0", None, None), ("ovn-ls-26", "net1", "172.16.25.3", "0a:00:00:00:00:15")]


def test_ovn4nfv_camel_case_spelling():
    _source, reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([
        {"name": "n", "interface": "net0", "ipAddress": "10.0.0.5/24", "macAddress": "0a:00:00:00:00:01",
         "defaultGateway": "true"}])})
    assert str(reqs[0].ip) == "10.0.0.5" and reqs[0].default_gateway is True


def test_nfn_network_form():
    source, reqs = ann.parse_requests({ann.NFN_NETWORK: json.dumps({"type": "ovn4nfv", "interface": [
        {"name": "n1", "interface": "net2", "defaultGateway": "false"}]})})
    assert source == ann.NFN_NETWORK and reqs[0].interface == "net2" and not reqs[0].default_gateway


def test_legacy_form_only_without_ovn_network():
    source, reqs = ann.parse_requests({ann.LEGACY: json.dumps({"ip_address": "10.0.0.9/24"})},
                                      default_network="default")
    assert source == ann.LEGACY and reqs[0].network == "default" and reqs[0].interface == "eth0"
    source, reqs = ann.parse_requests({ann.LEGACY: "{}", ann.OVN_NETWORK: json.dumps(
        [{"name": "a", "interface": "net0"}])}, default_network="default")
    assert source == ann.OVN_NETWORK and [r.network for r in reqs] == ["a"]


def test_no_request():
    assert ann.parse_requests({"other": "x"}) == (None, [])


def test_output_is_json_from_a_library():
    _s, reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([
        {"name": "n", "interface": "net0", "default_gateway": True,
         "routes": [{"dst": "10.9.0.0/16"}]}])})
    entry = ann.interface_entry(reqs[0], '172.16.1.5/24', "0a:00:00:00:00:05", "172.16.1.1",
                                [{"dst": "10.8.0.0/16", "gw": "172.16.1.254"}])
    out = ann.output_annotations([entry])
    assert out[ann.IFACE_LIST] == out[ann.OVN_INTERFACES]
    assert ann.parse_iface_list(out[ann.IFACE_LIST]) == [{
        "interface": "net0", "ip_address": "172.16.1.5/24", "mac_address": "0a:00:00:00:00:05",
        "gateway_ip": "172.16.1.1", "default_gateway": True,
        "routes": [{"dst": "10.8.0.0/16", "gw": "172.16.1.254"}, {"dst": "10.9.0.0/16", "gw": "172.16.1.1"}]}]


@pytest.mark.parametrize("case_id,annotations,expected", BAD, ids=[b[0] for b in BAD])
def test_bad_annotation(case_id, annotations, expected):
    with pytest.raises(ValidationError) as err:
        ann.parse_requests(annotations, default_network="default")
    for text in expected:
        assert text in str(err.value), (text, str(err.value))


def test_ovn4nfv_network_routes_go_to_the_interface_dev_names():
    _s, reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([net(), net(name="m", interface="net1")]),
                                   ann.ROUTES: json.dumps([{"dst": "10.9.0.0/16", "gw": "172.16.44.1", "dev": "net1"},
                                                           {"dst": "10.8.0.0/16", "dev": "net1"}])})
    assert reqs[0].routes == []
    assert reqs[1].routes == [{"dst": "10.9.0.0/16", "gw": "172.16.44.1"}, {"dst": "10.8.0.0/16", "gw": None}]


def test_precedence_and_unused_forms():
    both = {ann.OVN_NETWORK: json.dumps([net()]), ann.NFN_NETWORK: json.dumps(
        {"type": "ovn4nfv", "interface": [net(name="other")]}), ann.LEGACY: "{}"}
    source, reqs = ann.parse_requests(both, default_network="default")
    assert source == ann.OVN_NETWORK and [r.network for r in reqs] == ["n"]
    assert ann.unused_forms(both) == [ann.NFN_NETWORK, ann.LEGACY]
    assert ann.unused_forms({ann.ROUTES: "[]"}) == [ann.ROUTES]
    assert ann.unused_forms({ann.OVN_NETWORK: "[]"}) == []


def test_prefix_is_kept_for_the_network_check():
    _s, reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([net(ip_address="172.16.1.5/24"), net(
        interface="net1", ip_address="172.16.2.5")])})
    assert [(str(r.ip), r.prefix) for r in reqs] == [("172.16.1.5", 24), ("172.16.2.5", None)]


def test_unknown_provider_key_names_the_known_one():
    with pytest.raises(ValidationError) as err:
        ann.check_provider_keys({"macvlan.default.kubernetes.io/ip_adress": "1.2.3.4",
                                 "macvlan.default.kubernetes.io/ip_address": "1.2.3.5",
                                 "other.kubernetes.io/whatever": "x"}, "macvlan.default")
    assert "unknown key 'ip_adress'" in str(err.value) and "did you mean 'ip_address'" in str(err.value)
    assert "whatever" not in str(err.value)


def test_multus_text_form_matches_in_full():
    with pytest.raises(ValidationError) as err:
        ann.parse_multus({ann.MULTUS_NETWORKS: "ns/nad\n@net1"}, "default")
    assert ann.MULTUS_NETWORKS + "[0]" in str(err.value)
    with pytest.raises(ValidationError) as err:
        ann.parse_multus({ann.MULTUS_NETWORKS: json.dumps([{"name": "nad", "interfce": "net1"}])}, "default")
    assert "did you mean 'interface'" in str(err.value)


def test_legacy_without_default_network():
    with pytest.raises(ValidationError) as err:
        ann.parse_requests({ann.LEGACY: "{}"})
    assert "default network" in str(err.value)


def test_an_interface_configured_by_dhcp():
    """``dhcp``: the interface's address and routes are its guest's to take
    from the network's DHCP; its entry says so, and carries no route."""
    _s, reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([
        net(), net(name="vmnet", interface="net1", dhcp=True, ip_address="10.60.0.9")])})
    assert [r.dhcp for r in reqs] == [False, True]
    entry = ann.interface_entry(reqs[1], "10.60.0.9/24", "0a:00:00:00:00:09", "10.60.0.1",
                                [{"dst": "192.168.70.0/24", "gw": "10.60.0.254"}])
    assert entry == {"interface": "net1", "ip_address": "10.60.0.9/24", "mac_address": "0a:00:00:00:00:09",
                     "gateway_ip": "10.60.0.1", "default_gateway": False, "routes": [], "dhcp": True}
    # an interface without it keeps the seed's entry, key for key
    assert "dhcp" not in ann.interface_entry(reqs[0], "172.16.44.5/24", "0a:00:00:00:00:05", "172.16.44.1")


def test_a_dhcp_interface_s_own_routes_and_default_route_are_kept_for_its_dhcp():
    _s, reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([
        net(dhcp=True, routes=[{"dst": "10.9.0.0/16"}], default_gateway=False), net(interface="net1", dhcp=True)]),
        ann.ROUTES: json.dumps([{"dst": "10.8.0.0/16", "gw": "172.16.44.9", "dev": "net0"}])})
    assert reqs[0].routes == [{"dst": "10.9.0.0/16", "gw": None}, {"dst": "10.8.0.0/16", "gw": "172.16.44.9"}]
    assert (reqs[0].default_gateway, reqs[0].default_given) == (False, True)
    assert (reqs[1].default_gateway, reqs[1].default_given) == (False, False)
    with pytest.raises(ValidationError) as err:
        ann.parse_requests({ann.OVN_NETWORK: json.dumps([net(dhcp="maybe")])})
    assert "ovnNetwork[0].dhcp: 'maybe' is not true or false" in str(err.value)


def test_a_dhcp_interface_counts_as_a_default_route_unless_it_says_false():
    two = [net(default_gateway=True), net(interface="net1", name="vmnet", dhcp=True)]
    with pytest.raises(ValidationError) as err:
        ann.parse_requests({ann.OVN_NETWORK: json.dumps(two)})
    assert "more than one default route (ovnNetwork[0].default_gateway, ovnNetwork[1].dhcp)" in str(err.value)
    two[1]["default_gateway"] = False
    assert [r.dhcp for r in ann.parse_requests({ann.OVN_NETWORK: json.dumps(two)})[1]] == [False, True]


def test_a_trunk_carries_its_vlans_as_nested_requests():
    _source, reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([
        {"name": "native", "interface": "trunk0", "vlans": [
            {"name": "prov-v100", "vlan": 10},
            {"name": "prov-v200", "vlan": 20, "ip_address": "192.168.200.7", "mac_address": "0a:00:00:00:c8:07"}]},
        {"name": "other", "interface": "net1"}])})
    assert [(r.network, r.interface, r.parent, r.vlan) for r in reqs] == [
        ("native", "trunk0", None, None), ("prov-v100", "trunk0.10", "trunk0", 10),
        ("prov-v200", "trunk0.20", "trunk0", 20), ("other", "net1", None, None)]
    assert str(reqs[2].ip) == "192.168.200.7" and reqs[2].mac == "0a:00:00:00:c8:07"
    assert reqs[1].shape() != reqs[2].shape()
    entry = ann.interface_entry(reqs[1], "192.168.100.5/24", "0a:00:00:00:64:05", "192.168.100.1")
    assert entry["parent"] == "trunk0" and entry["vlan"] == 10 and entry["interface"] == "trunk0.10"


def test_a_trunk_s_vlans_refused():
    def refused(entry, *words, **more):
        annotations = {ann.OVN_NETWORK: json.dumps([entry] + more.get("others", []))}
        with pytest.raises(ValidationError) as caught:
            ann.parse_requests(annotations)
        assert all(w in str(caught.value) for w in words), (entry, str(caught.value))
    trunk = {"name": "native", "interface": "trunk0"}
    refused(dict(trunk, vlans=[{"name": "a", "vlan": 10}, {"name": "b", "vlan": 10}]), "vlans[1].vlan", "10")
    for vid in (0, 4095, "10", True, 1.5, None):
        refused(dict(trunk, vlans=[{"name": "a", "vlan": vid}]), "vlans[0].vlan")
    refused(dict(trunk, vlans=[{"name": "a"}]), "vlans[0].vlan", "required")
    refused(dict(trunk, vlans=[{"name": "a", "vlan": 5, "routes": []}]), "unknown key", "routes")
    refused(dict(trunk, vlans=[{"name": "a", "vlan": 5, "default_gateway": True}]), "unknown key")
    refused({"name": "n", "interface": "abcdefghijklm0", "vlans": [{"name": "a", "vlan": 100}]},
            "longer than 15", "abcdefghijklm0.100")
    refused(dict(trunk, dhcp=True, vlans=[{"name": "a", "vlan": 5}]), "vlans", "DHCP")
    refused(dict(trunk, vlans=[{"name": "a", "vlan": v} for v in range(1, 10)]), "at most 8")
    # each VLAN counts as an interface of the pod
    refused(dict(trunk, vlans=[{"name": "a", "vlan": v} for v in range(1, 9)]), "11 interfaces asked for; at most 10",
            others=[{"name": "n", "interface": "net%d" % i} for i in range(1, 3)])
    refused(dict(trunk, vlans=[{"name": "a", "vlan": 5, "ip_address": "10.0.0.1\n"}]), "vlans[0].ip_address")
    # no route names a VLAN's interface: it has no device of the pod's
    with pytest.raises(ValidationError):
        ann.parse_requests({ann.OVN_NETWORK: json.dumps([dict(trunk, vlans=[{"name": "a", "vlan": 5}])]),
                            ann.ROUTES: json.dumps([{"dst": "10.9.0.0/16", "dev": "trunk0.5"}])})


def test_only_a_trunk_s_vlan_is_named_with_a_dot():
    """``<trunk>.<vid>`` is the name _requests makes for a VLAN; an entry or
    a Multus selection naming an interface so is refused as before."""
    with pytest.raises(ValidationError) as caught:
        ann.parse_requests({ann.OVN_NETWORK: json.dumps([{"name": "n", "interface": "eth1.5"}])})
    assert "ovnNetwork[0].interface" in str(caught.value)
    selection = {"name": "nad", "namespace": "default", "interface": "eth1.5", "ips": [], "mac": None,
                 "default_route": False, "where": "k8s.v1.cni.cncf.io/networks[0]"}
    with pytest.raises(ValidationError):
        ann.attachment_request(selection, "net1", "nad.default.ovn", False, {})


def test_a_vid_written_as_a_float_is_refused_on_its_own_field():
    with pytest.raises(ValidationError) as caught:
        ann.parse_requests({ann.OVN_NETWORK: json.dumps([
            {"name": "n", "interface": "t0", "vlans": [{"name": "a", "vlan": 10.0}]}])})
    assert "vlans[0].vlan" in str(caught.value) and "interface" not in str(caught.value)


def test_the_addresses_handed_to_other_plugins_are_those_the_watcher_marked_allocated():
    entry = {"ip_address": "172.16.40.2/24", "mac_address": "0a:58:ac:10:28:02", "gateway_ip": "172.16.40.1"}
    written = ann.provider_annotations("hostdev.default", entry, "172.16.40.0/24")
    assert ann.other_plugin_addresses(written) == {"172.16.40.2"}
    # a pod's own static request (no "allocated"), or an address not yet taken, hands nothing over
    assert ann.other_plugin_addresses({"mv.default.kubernetes.io/ip_address": "172.16.30.7"}) == set()
    assert ann.other_plugin_addresses(dict(written, **{"hostdev.default.kubernetes.io/allocated": "false"})) == set()
    assert ann.other_plugin_addresses({"x.kubernetes.io/allocated": "true"}) == set()
