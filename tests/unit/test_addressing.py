"""Addressing rules, names and remotes: pure logic, no daemons."""

import random

import netaddr
import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import addressing
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import naming
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import (
    format_bridge_mappings, parse_bridge_mappings)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import describe_delta


@pytest.mark.parametrize("text,expected", [
    ("10.0.0.0/24", "10.0.0.0/24"), ("172.16.0.0/12", "172.16.0.0/12"), ("10.1.2.3/32", "10.1.2.3/32"),
])
def test_parse_cidr_accepts_networks(text, expected):
    assert str(addressing.parse_cidr(text, "f")) == expected


@pytest.mark.parametrize("text,fragment", [
    ("10.0.0.5/24", "host bits"), ("10.0.0.0/33", "not a valid CIDR"), ("10.0.0.0", "not a valid CIDR"),
    ("x/24", "not a valid CIDR"), ("fd00::/64", "not an IPv4"),
])
def test_parse_cidr_refuses(text, fragment):
    with pytest.raises(ValidationError) as err:
        addressing.parse_cidr(text, "config[0].subnet", version=4)
    assert fragment in str(err.value) and "config[0].subnet" in str(err.value) and text in str(err.value)


def test_parse_mac_canonical_and_unicast():
    assert addressing.parse_mac("0A-00-00-00-00-15", "m") == "0a:00:00:00:00:15"
    for bad in ("01:00:5e:00:00:01", "ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00", "0a:00:00:00:00", "zz"):
        with pytest.raises(ValidationError) as err:
            addressing.parse_mac(bad, "mac")
        assert "mac" in str(err.value) and bad in str(err.value)


def test_generated_macs_are_locally_administered_unicast():
    rng = random.Random(7)
    macs = [addressing.generate_mac(rng) for _i in range(2000)]
    for mac in macs:
        first = int(mac.split(":")[0], 16)
        assert first & 0x02 and not first & 0x01, mac
        assert addressing.parse_mac(mac, "m") == mac
    assert len(set(macs)) > 1990


def test_exclude_ranges():
    subnet = addressing.parse_cidr("10.0.0.0/24", "s")
    assert addressing.parse_exclude_ips([" 10.0.0.1", "10.0.0.10..10.0.0.20"], subnet, "x") == \
        ["10.0.0.1", "10.0.0.10..10.0.0.20"]
    assert addressing.exclude_ips_from_ovn("10.0.0.1 10.0.0.10..10.0.0.20") == \
        ["10.0.0.1", "10.0.0.10..10.0.0.20"]
    hosts = addressing.ip_set(subnet, ["10.0.0.1", "10.0.0.10..10.0.0.20"])
    assert hosts.size == 254 - 12
    assert netaddr.IPAddress("10.0.0.15") not in hosts
    for bad, fragment in ((["10.0.0.20..10.0.0.10"], "inverted"), (["10.0.1.1"], "outside"),
                          (["10.0.0.1..10.0.1.1"], "outside"), (["nope"], "not a valid IP")):
        with pytest.raises(ValidationError) as err:
            addressing.parse_exclude_ips(bad, subnet, "exclude_ips")
        assert fragment in str(err.value) and "exclude_ips[0]" in str(err.value)


@pytest.mark.parametrize("remote", [
    "unix:/var/run/ovn/ovnnb_db.sock", "tcp:192.168.33.11:6641", "ssl:[fd00::1]:6641",
    "tcp:10.0.0.1:6641,tcp:10.0.0.2:6641,tcp:10.0.0.3:6641",
])
def test_remotes_accepted(remote):
    assert ",".join(ovsdb.parse_remote(remote)) == remote


@pytest.mark.parametrize("remote", ["", "unix:relative.sock", "tcp:host", "tcp:h:70000", "http://h:1",
                                    "ptcp:6641"])
def test_remotes_refused(remote):
    with pytest.raises(ValidationError):
        ovsdb.parse_remote(remote)


def test_names():
    assert naming.ovn_name("ovn-ls-25", "n") == "ovn-ls-25"
    assert naming.interface_name("veth0123456789a", "n")
    for bad in ("veth0123456789ab", "a/b", "a b", ""):
        with pytest.raises(ValidationError):
            naming.interface_name(bad, "n")
    with pytest.raises(ValidationError):
        naming.in_range(True, 0, 10, "tag")


def test_bridge_mappings_round_trip():
    text = "physnet1:br-ex,physnet2:br-vlan"
    assert format_bridge_mappings(parse_bridge_mappings(text)) == text
    assert parse_bridge_mappings("") == []


def test_readable_delta():
    lines = describe_delta({"a": 1, "m": {"x": "1", "y": "2"}, "gone": [1]},
                           {"a": 2, "m": {"x": "1", "z": "3"}, "new": "v"})
    assert lines == ["a 1 -> 2", "gone removed (was [1])", "m.y removed (was '2')", "m.z='3'",
                     "new='v'"]


def test_gateway_with_the_subnets_prefix_is_stored_without_it():
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
    out = vn.check_network({"name": "ovn-net", "subnet": "10.1.20.0/24", "gateway": "10.1.20.1/24"}, "config[0]")
    assert str(out["gateway"]) == "10.1.20.1"
    for gateway, text in (("10.1.20.1/16", "says /16, but the network 10.1.20.0/24 is a /24"),
                          ("10.1.20.1/x", "prefix length 'x'"), ("10.1.20.1/24\n", "prefix length")):
        with pytest.raises(ValidationError) as err:
            vn.check_network({"name": "n", "subnet": "10.1.20.0/24", "gateway": gateway}, "config[0]")
        assert "config[0].gateway" in str(err.value) and text in str(err.value), str(err.value)
