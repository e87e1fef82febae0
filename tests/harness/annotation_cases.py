"""Bad pod annotations and what each is refused with: the parser's
catalogue (``tests/unit/test_annotations.py``), which the watcher's
functional tests reuse end to end (``tests/functional/test_watcher.py``).
Each case is ``(id, annotations, words the message must contain)``."""

import json

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann


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
