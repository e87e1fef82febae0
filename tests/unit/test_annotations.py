"""The pod annotation formats: what is accepted, and what each bad
annotation is refused with (naming the annotation and the field)."""

import json

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError


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


def net(**fields):
    entry = {"name": "n", "interface": "net0"}
    entry.update(fields)
    return entry


BAD = [
    ("not_json", {ann.OVN_NETWORK: "[{"}, ["ovnNetwork", "JSON"]),
    ("not_a_list", {ann.OVN_NETWORK: json.dumps({"name": "n"})}, ["ovnNetwork", "not a list"]),
    ("entry_not_object", {ann.OVN_NETWORK: json.dumps(["n"])}, ["ovnNetwork[0]", "not an object"]),
    ("no_network_name", {ann.OVN_NETWORK: json.dumps([{"interface": "net0"}])}, ["ovnNetwork[0].name"]),
    ("bad_network_name", {ann.OVN_NETWORK: json.dumps([net(name="a b")])}, ["ovnNetwork[0].name", "a b"]),
    ("no_interface", {ann.OVN_NETWORK: json.dumps([{"name": "n"}])}, ["ovnNetwork[0].interface"]),
    ("interface_not_ending_in_digit", {ann.OVN_NETWORK: json.dumps([net(interface="neta")])},
     ["ovnNetwork[0].interface", "neta"]),
    ("interface_with_dash", {ann.OVN_NETWORK: json.dumps([net(interface="net-0")])},
     ["ovnNetwork[0].interface", "net-0"]),
    ("interface_too_long", {ann.OVN_NETWORK: json.dumps([net(interface="a" * 15 + "0")])},
     ["ovnNetwork[0].interface"]),
    ("duplicate_interface", {ann.OVN_NETWORK: json.dumps([net(), net(name="m")])},
     ["ovnNetwork[1].interface", "net0", "ovnNetwork[0]"]),
    ("eleven_interfaces", {ann.OVN_NETWORK: json.dumps([net(interface="net%d" % i) for i in range(11)])},
     ["ovnNetwork", "11", "at most 10"]),
    ("two_default_gateways", {ann.OVN_NETWORK: json.dumps([net(default_gateway=True),
                                                           net(interface="net1", defaultGateway="true")])},
     ["more than one default gateway", "ovnNetwork[0]", "ovnNetwork[1]"]),
    ("bad_default_flag", {ann.OVN_NETWORK: json.dumps([net(defaultGateway="maybe")])},
     ["ovnNetwork[0].defaultGateway", "maybe"]),
    ("bad_ip", {ann.OVN_NETWORK: json.dumps([net(ip_address="10.0.0.300")])},
     ["ovnNetwork[0].ip_address", "10.0.0.300"]),
    ("bad_mac", {ann.OVN_NETWORK: json.dumps([net(mac_address="0a:00:00:00:00")])},
     ["ovnNetwork[0].mac_address", "0a:00:00:00:00"]),
    ("multicast_mac", {ann.OVN_NETWORK: json.dumps([net(macAddress="01:00:5e:00:00:01")])},
     ["ovnNetwork[0].mac_address", "multicast"]),
    ("route_without_dst", {ann.OVN_NETWORK: json.dumps([net(routes=[{"gw": "10.0.0.1"}])])},
     ["ovnNetwork[0].routes[0]", "dst"]),
    ("route_bad_dst", {ann.OVN_NETWORK: json.dumps([net(routes=[{"dst": "10.0.0.1/40"}])])},
     ["ovnNetwork[0].routes[0].dst", "10.0.0.1/40"]),
    ("nfn_wrong_type", {ann.NFN_NETWORK: json.dumps({"type": "sriov", "interface": []})},
     [ann.NFN_NETWORK, "sriov"]),
    ("nfn_interface_not_list", {ann.NFN_NETWORK: json.dumps({"type": "ovn4nfv", "interface": "net0"})},
     [ann.NFN_NETWORK + ".interface"]),
    ("nfn_bad_entry", {ann.NFN_NETWORK: json.dumps({"type": "ovn4nfv", "interface": [{"name": "n"}]})},
     [ann.NFN_NETWORK + ".interface[0].interface"]),
    ("legacy_not_object", {ann.LEGACY: json.dumps(["x"])}, ["ovn", "not an object"]),
    ("legacy_bad_ip", {ann.LEGACY: json.dumps({"ip_address": "x"})}, ["ovn.ip_address", "'x'"]),
    # hostile input (issue 11): each of these was accepted or crashed the parser before
    ("deeply_nested", {ann.OVN_NETWORK: "[" * 5000 + "]" * 5000}, ["ovnNetwork", "nested more than"]),
    ("too_large", {ann.OVN_NETWORK: json.dumps([net(pad="x" * 20000)])}, ["ovnNetwork", "characters; at most"]),
    ("interface_trailing_newline", {ann.OVN_NETWORK: json.dumps([net(interface="net0\n")])},
     ["ovnNetwork[0].interface", "net0\\n"]),
    ("ip_garbage_prefix", {ann.OVN_NETWORK: json.dumps([net(ip_address="172.16.1.5/abc")])},
     ["ovnNetwork[0].ip_address", "abc"]),
    ("ip_prefix_too_long", {ann.OVN_NETWORK: json.dumps([net(ip_address="172.16.1.5/33")])},
     ["ovnNetwork[0].ip_address", "33"]),
    ("ip_trailing_space", {ann.OVN_NETWORK: json.dumps([net(ip_address="172.16.1.5 ")])},
     ["ovnNetwork[0].ip_address"]),
    ("unknown_key_typo", {ann.OVN_NETWORK: json.dumps([net(ipAdress="172.16.1.5")])},
     ["ovnNetwork[0]", "unknown key 'ipAdress'", "did you mean 'ipAddress'"]),
    ("nfn_unknown_key", {ann.NFN_NETWORK: json.dumps({"type": "ovn4nfv", "interfaces": []})},
     [ann.NFN_NETWORK, "'interfaces'", "did you mean 'interface'"]),
    ("routes_dev_names_no_interface", {ann.OVN_NETWORK: json.dumps([net()]), ann.ROUTES: json.dumps(
        [{"dst": "10.9.0.0/16", "gw": "172.16.1.1", "dev": "net7"}])},
     ["ovnNetworkRoutes[0].dev", "net7", "net0"]),
    ("routes_not_a_list", {ann.OVN_NETWORK: json.dumps([net()]), ann.ROUTES: json.dumps({"dst": "x"})},
     ["ovnNetworkRoutes", "not a list"]),
    ("routes_bad_dst", {ann.OVN_NETWORK: json.dumps([net()]), ann.ROUTES: json.dumps(
        [{"dst": "10.9.0.1/16", "dev": "net0"}])}, ["ovnNetworkRoutes[0].dst", "host bits"]),
    ("string_number", {ann.OVN_NETWORK: json.dumps([net(name=5)])}, ["ovnNetwork[0].name", "5 is not text"]),
]


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
