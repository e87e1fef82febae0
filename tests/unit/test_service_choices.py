"""Services as load balancers: which gateway answers for an external
address, and which backend port a Service port reaches."""

import netaddr

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import services
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import Gateway


def gateways(*nodes, net="192.168.50.0/24"):
    out = []
    for index, node in enumerate(nodes):
        gateway = Gateway(node, netaddr.IPAddress("192.168.50.%d" % (10 + index)),
                          netaddr.IPAddress("192.168.50.1"))
        gateway.external_net = netaddr.IPNetwork(net)
        out.append(gateway)
    return out


ADDRESSES = [netaddr.IPAddress("192.168.50.%d" % i) for i in range(100, 160)]


def owners(gws):
    return dict((ip, services.gateway_for(ip, gws).node) for ip in ADDRESSES)


def test_every_watcher_picks_the_same_gateway_whatever_the_order():
    gws = gateways("w1", "w2", "w3")
    assert owners(gws) == owners(list(reversed(gws)))
    assert set(owners(gws).values()) == {"w1", "w2", "w3"}, "addresses spread over the gateways"


def test_a_gateway_gone_moves_only_its_own_addresses():
    before = owners(gateways("w1", "w2", "w3"))
    after = owners(gateways("w1", "w3"))
    moved = [ip for ip in ADDRESSES if before[ip] != after[ip]]
    assert moved and all(before[ip] == "w2" for ip in moved)


def test_a_gateway_on_the_addresss_own_network_is_preferred():
    gws = gateways("w1", "w2") + gateways("far", net="10.0.0.0/24")
    assert "far" not in owners(gws).values()
    assert services.gateway_for(netaddr.IPAddress("172.31.0.5"), gws) is not None, "routed to any gateway"
    assert services.gateway_for(netaddr.IPAddress("172.31.0.5"), []) is None


def test_target_ports_by_number_and_by_name():
    by_name = services.Port("http", "TCP", 80, "web")
    by_number = services.Port("http", "TCP", 80, 8080)
    default = services.Port("", "TCP", 80, None)
    pod = services.Endpoint(True, {"web": 9090}, pod="p", uid="u")
    nameless = services.Endpoint(True, {}, pod="q", uid="v")
    assert services._resolve(by_name, pod) == 9090
    assert services._resolve(by_name, nameless) is None, "a pod without the named port is no backend"
    assert services._resolve(by_number, nameless) == 8080
    assert services._resolve(default, nameless) == 80, "targetPort defaults to the port"
    sliced = services.Endpoint(True, {"http": 5353}, ip="172.16.1.5")
    assert services._resolve(by_name, sliced) == 5353, "a slice names its ports by the Service port's name"
