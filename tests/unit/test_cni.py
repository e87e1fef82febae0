"""The CNI helpers the node agent uses: names, result formats, selection."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils import cni

ENTRIES = [
    {"interface": "net0", "ip_address": "172.16.1.10/24", "mac_address": "0a:00:00:00:01:0a",
     "gateway_ip": "172.16.1.1", "default_gateway": False, "routes": [{"dst": "10.20.0.0/16", "gw": None}]},
    {"interface": "net1", "ip_address": "172.16.2.10/24", "mac_address": "0a:00:00:00:02:0a",
     "gateway_ip": "172.16.2.1", "default_gateway": True, "routes": []},
]


def test_host_names_are_short_stable_and_distinct():
    names = set()
    for uid in ("uid-a", "uid-b"):
        for interface in ("net0", "net1", "eth0"):
            name = cni.host_ifname(uid, interface)
            assert len(name) <= 15 and name == cni.host_ifname(uid, interface)
            names.add(name)
    assert len(names) == 6


def test_result_1_0_0():
    out = cni.result("1.0.0", ENTRIES, "/var/run/netns/p", [("o4nabc", "0a:00:00:00:00:99")])
    assert out["interfaces"][:2] == [
        {"name": "net0", "mac": "0a:00:00:00:01:0a", "sandbox": "/var/run/netns/p"},
        {"name": "net1", "mac": "0a:00:00:00:02:0a", "sandbox": "/var/run/netns/p"}]
    assert out["interfaces"][2] == {"name": "o4nabc", "mac": "0a:00:00:00:00:99"}
    assert out["ips"] == [{"address": "172.16.1.10/24", "gateway": "172.16.1.1", "interface": 0},
                          {"address": "172.16.2.10/24", "gateway": "172.16.2.1", "interface": 1}]
    assert out["routes"] == [{"dst": "10.20.0.0/16", "gw": "172.16.1.1"}, {"dst": "0.0.0.0/0", "gw": "172.16.2.1"}]


def test_result_gives_the_runtime_an_address_for_its_ifname():
    """containerd takes the pod's IP from CNI_IFNAME's addresses and refuses
    a sandbox without one: when no interface has that name, the first
    interface's address carries no index (a runtime counts it as
    CNI_IFNAME's); otherwise every address keeps its index."""
    out = cni.result("1.0.0", ENTRIES, "/x", [("o4nabc", "0a:00:00:00:00:99")], ifname="eth0")
    assert out["ips"] == [{"address": "172.16.1.10/24", "gateway": "172.16.1.1"},
                          {"address": "172.16.2.10/24", "gateway": "172.16.2.1", "interface": 1}]
    assert [i["name"] for i in out["interfaces"]] == ["net0", "net1", "o4nabc"]
    named = cni.result("1.0.0", ENTRIES, "/x", ifname="net1")
    assert [ip["interface"] for ip in named["ips"]] == [0, 1]


def test_result_0_4_0_carries_ip_versions():
    assert [ip["version"] for ip in cni.result("0.4.0", ENTRIES, "/x")["ips"]] == ["4", "4"]


def test_select_entries():
    assert cni.select_entries(ENTRIES, "eth0", per_attachment=False) == ENTRIES
    assert cni.select_entries(ENTRIES, "net1", per_attachment=True) == ENTRIES[1:]
    with pytest.raises(cni.CNIError) as err:
        cni.select_entries(ENTRIES, "net7", per_attachment=True)
    assert err.value.code == cni.INVALID_CONFIG and "net7" in err.value.msg and "net0, net1" in err.value.msg


def test_cni_args():
    assert cni.parse_cni_args("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web") == {
        "IgnoreUnknown": "1", "K8S_POD_NAMESPACE": "default", "K8S_POD_NAME": "web"}


def test_an_interface_configured_by_dhcp_is_listed_without_an_address():
    """Its guest takes the address by DHCP: the pod does not hold it, so the
    runtime is not told it does; the runtime's unindexed address is the
    first interface's that has one."""
    entries = [dict(ENTRIES[0], dhcp=True, routes=[], default_gateway=False)] + ENTRIES[1:]
    out = cni.result("1.0.0", entries, "/x", ifname="eth0")
    assert [i["name"] for i in out["interfaces"]] == ["net0", "net1"]
    assert out["ips"] == [{"address": "172.16.2.10/24", "gateway": "172.16.2.1"}]
    assert out["routes"] == [{"dst": "0.0.0.0/0", "gw": "172.16.2.1"}]


def test_a_pod_of_dhcp_interfaces_only_gives_the_runtime_its_guest_s_address():
    """containerd refuses a sandbox without an address for CNI_IFNAME: a VM's
    launcher whose interfaces all take their address inside still starts,
    with the first one's address (the one its guest is given), unindexed."""
    guests = [dict(e, dhcp=True, routes=[], default_gateway=False) for e in ENTRIES]
    out = cni.result("1.0.0", guests, "/x", ifname="eth0")
    assert out["ips"] == [{"address": "172.16.1.10/24", "gateway": "172.16.1.1"}] and out["routes"] == []
    assert cni.result("1.0.0", guests, "/x")["ips"] == [], "per attachment (Multus): no address to report"
