"""What a network function's interface is granted beyond full port
security, and only where its network allows it (issue 37):
cluster.port_grants, the request's keys, and the audit's judgement of a
port's port security (cluster.security_audit.looser)."""

import json

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann, port_grants
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.pod_addresses import security
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.security_audit import looser
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError

VIP = "10.50.0.250"


def network(relaxed=(), vips=()):
    return vn.complete(vn.check_network({"name": "vnf", "subnet": "10.50.0.0/24", "relaxed_port_security": list(
        relaxed), "virtual_ips": list(vips)}, "n"), None, False, "ovn", "n")


def request(**entry):
    return ann.parse_requests({ann.OVN_NETWORK: json.dumps([dict({"name": "vnf", "interface": "net0"}, **entry)])})[1][0]


def test_a_level_is_granted_up_to_the_namespace_s_allowance():
    net = network([{"namespace": "vnf", "level": "mac"}, {"namespace": "*", "level": "off"}])
    assert port_grants.allowed_level(net, "vnf") == "off", "the loosest of the namespace's and every namespace's"
    assert port_grants.grant(net, "other", request(port_security="off"))[:2] == ("off", [])
    strict = network([{"namespace": "vnf", "level": "mac"}])
    assert port_grants.grant(strict, "vnf", request(port_security="mac"))[:2] == ("mac", [])
    level, _vips, refused = port_grants.grant(strict, "vnf", request(port_security="off"))
    assert level == "full" and [r for r, _m in refused] == [port_grants.SECURITY_REFUSED], "more than allowed: none"
    level, _vips, refused = port_grants.grant(strict, "other", request(port_security="mac"))
    assert level == "full" and "namespace other" in refused[0][1]
    assert port_grants.grant(strict, "vnf", request()) == ("full", [], []), "an allowance is never a default"


def test_a_virtual_ip_is_granted_to_the_namespaces_it_names():
    net = network(vips=[{"address": VIP, "namespaces": ["vnf"]}])
    assert port_grants.grant(net, "vnf", request(virtual_ips=[VIP]))[:2] == ("full", [VIP])
    _level, vips, refused = port_grants.grant(net, "other", request(virtual_ips=[VIP, "10.50.0.9"]))
    assert vips == [] and [r for r, _m in refused] == [port_grants.VIP_REFUSED] * 2
    assert port_grants.grant(None, "vnf", request(virtual_ips=[VIP])) == ("full", [], []), "no network: nothing"


def test_the_grant_shapes_the_port_security():
    mac, ips = "0a:00:00:00:00:05", ["10.50.0.5"]
    assert security(mac, ips, "off") == [] and security(mac, ips, "mac") == [mac]
    assert security(mac, ips, "full", [VIP])[0].split()[:3] == [mac, "10.50.0.5", VIP]
    assert port_grants.marks("full", []) == {"ovn4nfv-port-security": None, "ovn4nfv-vips": None}


@pytest.mark.parametrize("entry", [{"port_security": "none"}, {"port_security": True},
                                   {"virtual_ips": ["fd00::1"]}, {"virtual_ips": ["10.50.0.300"]},
                                   {"virtual_ips": [VIP, VIP]}, {"virtual_ips": ["10.0.0.%d" % i for i in range(5)]},
                                   {"virtual_ips": [" 10.50.0.250"]}])
def test_bad_requests_are_refused_naming_the_field(entry):
    with pytest.raises(ValidationError) as caught:
        request(**entry)
    assert "port_security" in str(caught.value) or "virtual_ips" in str(caught.value)


@pytest.mark.parametrize("relaxed, vips", [([{"namespace": "Bad", "level": "mac"}], []),
                                           ([{"namespace": "vnf", "level": "all"}], []),
                                           ([{"namespace": "vnf", "level": "mac"}] * 2, []),
                                           ([], [{"address": VIP, "namespaces": []}]),
                                           ([], [{"address": "10.50.0.1", "namespaces": ["vnf"]}]),
                                           ([], [{"address": "10.9.0.1", "namespaces": ["vnf"]}])])
def test_bad_network_settings_are_refused(relaxed, vips):
    with pytest.raises(ValidationError):
        network(relaxed, vips)


def test_what_the_audit_calls_looser():
    strict = ["0a:00:00:00:00:05 10.50.0.5 fe80::1"]
    assert not looser(strict, strict) and not looser(["0a:00:00:00:00:05 10.50.0.5"], strict)
    assert looser([], strict), "none at all"
    assert looser(["0a:00:00:00:00:05"], strict), "its MAC alone"
    assert looser(["0a:00:00:00:00:05 10.50.0.5 " + VIP], strict), "a virtual IP not granted"
    assert looser(["0a:00:00:00:00:06 10.50.0.5"], strict), "another MAC"
    assert not looser(["0a:00:00:00:00:05 10.50.0.7"], ["0a:00:00:00:00:05"]), "within MAC-only"
    assert not looser([], []), "off where off is allowed"


def test_a_port_stricter_than_an_allowed_off_is_not_looser():
    assert not looser(["0a:00:00:00:00:05 10.50.0.5"], []), "off allowed: anything stricter is within it"
