"""The watcher keeps Services' load balancers: the watcher as a process,
the API stand-in's Services, EndpointSlices and pod readiness, and a real
NB read from outside the watcher."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn, services
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES, read_gateways
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_gateways
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import addressing, marks
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View
from tests.harness.watcher_env import NETWORKS, Cluster, ovn_network

NET = {services.NETWORK_ANNOTATION: "net1"}
HTTP = [{"name": "http", "containerPort": 8080}]
EXTERNAL_IP = "192.168.50.120"
# a provider network (issue 35): its own switch balances its Services
PROVIDER = {"name": "prov-net", "subnet": "192.168.100.0/24", "physnet": "physnet-ext", "vlan": 100}


@pytest.fixture(scope="module")
def k8s(tmp_path_factory, collections_path):
    env = Cluster(str(tmp_path_factory.mktemp("services")), collections_path, networks=NETWORKS + [PROVIDER])
    try:
        yield env
    finally:
        code = env.stop()
    assert code == 0, "SIGTERM must stop the watcher cleanly (exit %r)" % code


def balancers(env):
    """``{name: row}`` of the NB's load balancers, read from outside."""
    return dict((lb["name"], lb) for lb in env.box.rows("nb", "Load_Balancer"))


def wait_nb(env, predicate, timeout=30):
    """Block until ``predicate(idl)`` holds on the NB, woken by its updates."""
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, TABLES + services.TABLES) as db:
        found = db.wait_for(predicate, timeout)
    assert found, "the NB never got there; watcher log:\n%s" % env.log_text()


def vips_of(name):
    def read(idl):
        for row in idl.tables["Load_Balancer"].rows.values():
            if row.name == name:
                return dict((v, sorted(b for b in bs.split(",") if b)) for v, bs in row.vips.items())
        return None
    return read


def wait_vips(env, name, expected, timeout=30):
    wait_nb(env, lambda idl: vips_of(name)(idl) == expected, timeout)


def pod_ip(env, name):
    return env.annotated("default", name)[0]["ip_address"].split("/")[0]


def backend_pods(env, names, labels):
    for name in names:
        env.api.create_pod("default", name, ovn_network({"name": "net1", "interface": "eth1"}),
                           labels=labels, ports=HTTP)
    return dict((name, pod_ip(env, name)) for name in names)


def test_a_service_follows_its_ready_pods(k8s):
    ips = backend_pods(k8s, ["web-1", "web-2"], {"app": "web"})
    k8s.api.create_pod("default", "other", ovn_network({"name": "net1", "interface": "eth1"}),
                       labels={"app": "db"}, ports=HTTP)
    service = k8s.api.create_service("default", "web", {
        "selector": {"app": "web"}, "sessionAffinity": "ClientIP",
        "ports": [{"name": "http", "port": 80, "targetPort": "http"},
                  {"name": "alt", "port": 8000, "targetPort": 8081}]}, NET)
    vip = service["spec"]["clusterIP"]
    name = "svc_default_web_tcp"
    # not ready yet: the VIPs exist and reject
    wait_vips(k8s, name, {vip + ":80": [], vip + ":8000": []})
    for pod in ips:
        k8s.api.set_ready("default", pod)
    wait_vips(k8s, name, {vip + ":80": sorted(ip + ":8080" for ip in ips.values()),
                          vip + ":8000": sorted(ip + ":8081" for ip in ips.values())})
    lb = balancers(k8s)[name]
    assert lb["options"] == {"affinity_timeout": "10800", "reject": "true"}
    assert lb["external_ids"][marks.K_SERVICE] == "default/web"
    assert lb["external_ids"][marks.K_SERVICE_UID] == service["metadata"]["uid"]
    assert switches_of(k8s, name) == ["default-net", "macvlan-net", "net1", "net2", "tiny"], \
        "a pod on any overlay network reaches the VIP; a provider network has no router to the backends"

    k8s.api.set_ready("default", "web-2", ready=False)
    wait_vips(k8s, name, {vip + ":80": [ips["web-1"] + ":8080"], vip + ":8000": [ips["web-1"] + ":8081"]})
    k8s.api.delete_pod("default", "web-1")
    wait_vips(k8s, name, {vip + ":80": [], vip + ":8000": []})
    k8s.api.set_ready("default", "web-2")
    wait_vips(k8s, name, {vip + ":80": [ips["web-2"] + ":8080"], vip + ":8000": [ips["web-2"] + ":8081"]})

    k8s.api.delete_service("default", "web")
    wait_nb(k8s, lambda idl: vips_of(name)(idl) is None)
    assert not [e for e in k8s.api.events if e["involvedObject"]["kind"] == "Service"]


def test_a_service_without_selector_takes_its_endpointslices(k8s):
    service = k8s.api.create_service("default", "ext", {
        "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}, NET)
    vip = service["spec"]["clusterIP"]
    k8s.api.create_endpointslice("default", "ext-abc", "ext", ["172.16.1.50", "10.9.9.9"],
                                 [{"name": "dns", "port": 5353, "protocol": "UDP"}])
    k8s.api.create_endpointslice("default", "ext-def", "ext", ["172.16.1.51"],
                                 [{"name": "dns", "port": 5353, "protocol": "UDP"}], ready=False)
    # 10.9.9.9 is not on net1: not a backend there; the unready one waits
    wait_vips(k8s, "svc_default_ext_udp", {vip + ":53": ["172.16.1.50:5353"]})
    assert balancers(k8s)["svc_default_ext_udp"]["protocol"] == "udp"
    k8s.api.delete_endpointslice("default", "ext-abc")
    wait_vips(k8s, "svc_default_ext_udp", {vip + ":53": []})
    k8s.api.delete_service("default", "ext")
    wait_nb(k8s, lambda idl: vips_of("svc_default_ext_udp")(idl) is None)


BAD_SERVICES = [
    # (name, annotations, spec, reason, words in the message)
    ("nonet", {services.NETWORK_ANNOTATION: "nosuch"}, {}, services.UNKNOWN_NETWORK, ["nosuch"]),
    ("inpodnet", NET, {"externalIPs": ["172.16.1.77"]}, services.INVALID, ["172.16.1.77", "net1"]),
    ("injoin", NET, {"externalIPs": ["100.64.1.9"]}, services.INVALID, ["100.64.1.9", "join subnet"]),
    ("gwaddr", NET, {"externalIPs": ["192.168.50.12"]}, services.INVALID, ["192.168.50.12", "gateway"]),
    ("vipinnet", dict(NET, **{services.VIP_ANNOTATION: "172.16.2.40"}), {}, services.INVALID, ["172.16.2.40", "net2"]),
    ("badvip", dict(NET, **{services.VIP_ANNOTATION: "10.96.300.1"}), {}, services.INVALID, ["10.96.300.1"]),
    ("taken", dict(NET, **{services.VIP_ANNOTATION: "10.99.0.1"}), {}, services.VIP_CONFLICT,
     ["10.99.0.1", "default/holder"]),
    ("badext", NET, {"externalIPs": ["not-an-ip"]}, services.INVALID, ["not-an-ip"]),
    # addresses no gateway can answer for (issue 32)
    ("upstream", NET, {"externalIPs": ["192.168.50.1"]}, services.INVALID, ["192.168.50.1", "upstream router"]),
    ("bcast", NET, {"externalIPs": ["192.168.50.255"]}, services.INVALID, ["192.168.50.255", "broadcast"]),
    ("netaddr", NET, {"externalIPs": ["192.168.50.0"]}, services.INVALID, ["192.168.50.0", "network address"]),
    ("mapped", NET, {"externalIPs": ["::ffff:192.168.50.77"]}, services.INVALID,
     ["::ffff:192.168.50.77", "give 192.168.50.77"]),
    ("mcast", NET, {"externalIPs": ["239.1.1.1"]}, services.INVALID, ["239.1.1.1", "special-purpose"]),
    ("loop", NET, {"externalIPs": ["127.0.0.9"]}, services.INVALID, ["127.0.0.9", "special-purpose"]),
    ("limited", NET, {"externalIPs": ["255.255.255.255"]}, services.INVALID, ["255.255.255.255", "special-purpose"]),
    # a provider network has no OVN router to carry a balanced packet (issue 35)
    ("provnet", {services.NETWORK_ANNOTATION: "prov-net"}, {}, services.INVALID,
     ["provider network", "prov-net", "physnet-ext", "overlay"]),
]


def test_bad_services_are_warning_events_and_write_nothing(k8s):
    gateway(k8s, "gw-a", "192.168.50.12")
    k8s.api.create_service("default", "holder", {"ports": [{"port": 80}]},
                           dict(NET, **{services.VIP_ANNOTATION: "10.99.0.1"}))
    wait_nb(k8s, lambda idl: vips_of("svc_default_holder_tcp")(idl) is not None)
    before = balancers(k8s)
    for name, annotations, spec, _reason, _words in BAD_SERVICES:
        k8s.api.create_service("default", name, dict({"ports": [{"port": 80}]}, **spec), annotations)
    k8s.api.wait(lambda api: len(set(e["involvedObject"]["name"] for e in api.events
                                     if e["involvedObject"]["kind"] == "Service")) >= len(BAD_SERVICES), 30)
    for name, _annotations, _spec, reason, words in BAD_SERVICES:
        events = [e for e in k8s.api.events if e["involvedObject"]["name"] == name]
        assert len(events) == 1, (name, events)
        assert events[0]["type"] == "Warning" and events[0]["reason"] == reason, (name, events)
        assert events[0]["involvedObject"]["kind"] == "Service"
        for word in words:
            assert word in events[0]["message"], (name, word, events[0]["message"])
    assert balancers(k8s) == before, "a refused Service wrote nothing"
    # one not the product's business: no annotation, no balancer, no Event
    k8s.api.create_service("default", "plain", {"ports": [{"port": 80}]})
    k8s.api.delete_service("default", "holder")
    wait_nb(k8s, lambda idl: vips_of("svc_default_holder_tcp")(idl) is None)
    assert not [n for n in balancers(k8s) if "plain" in n]
    assert not [e for e in k8s.api.events if e["involvedObject"]["name"] == "plain"]
    for name, *_rest in BAD_SERVICES:
        k8s.api.delete_service("default", name)
    k8s.api.delete_service("default", "plain")


def gateway(env, node, ip, state="merged"):
    with ovsdb.Database(env.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: plan_gateways(v, [("config[0]", {
            "node": node, "external_ip": ip + "/24", "external_gateway": "192.168.50.1"})], state),
            write=True)


def attached_router(idl, name):
    for row in idl.tables["Logical_Router"].rows.values():
        if any(lb.name == name for lb in row.load_balancer):
            return row.name
    return None


def test_one_gateway_answers_for_an_external_ip_and_another_takes_over(k8s):
    gateway(k8s, "gw-a", "192.168.50.12")
    gateway(k8s, "gw-b", "192.168.50.13")
    ips = backend_pods(k8s, ["shop-1"], {"app": "shop"})
    k8s.api.set_ready("default", "shop-1")
    k8s.api.create_service("default", "shop", {
        "selector": {"app": "shop"}, "externalIPs": [EXTERNAL_IP],
        "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}, NET)
    name = "svcx_default_shop_tcp_" + EXTERNAL_IP
    wait_vips(k8s, name, {EXTERNAL_IP + ":80": [ips["shop-1"] + ":8080"]})
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, TABLES + services.TABLES) as db:
        owner = db.read(lambda idl: services.gateway_for(addressing.parse_ip(EXTERNAL_IP, "ip"),
                                                         read_gateways(View(idl)).values()))
        wait_nb(k8s, lambda idl: attached_router(idl, name) == owner.router)
    gateways = dict((r["name"], r) for r in k8s.box.rows("nb", "Logical_Router"))
    assert gateways[owner.router]["options"]["lb_force_snat_ip"] == "router_ip"
    # that gateway goes: the other answers, nobody else held it meanwhile
    gateway(k8s, owner.node, str(owner.external_ip), state="deleted")
    other = "gr-gw-b" if owner.node == "gw-a" else "gr-gw-a"
    wait_nb(k8s, lambda idl: attached_router(idl, name) == other)
    k8s.api.delete_service("default", "shop")
    wait_nb(k8s, lambda idl: vips_of(name)(idl) is None)


def test_a_service_deleted_while_the_watcher_was_down_loses_its_balancers(k8s):
    k8s.api.create_service("default", "gone", {"ports": [{"port": 80}]}, NET)
    k8s.api.create_service("default", "kept", {"ports": [{"port": 80}]}, NET)
    wait_nb(k8s, lambda idl: vips_of("svc_default_gone_tcp")(idl) is not None
            and vips_of("svc_default_kept_tcp")(idl) is not None)
    assert k8s.terminate() == 0
    k8s.api.delete_service("default", "gone")
    k8s.start()
    wait_nb(k8s, lambda idl: vips_of("svc_default_gone_tcp")(idl) is None)
    assert "svc_default_kept_tcp" in balancers(k8s), "the list at start keeps what is still there"
    k8s.api.delete_service("default", "kept")
    wait_nb(k8s, lambda idl: vips_of("svc_default_kept_tcp")(idl) is None)


def test_ports_out_of_range_are_refused_by_the_core_too(k8s):
    """The API server refuses them, but the core does not rely on it."""
    service = services.Service("default", "raw", "uid-raw", NET, cluster_ip="10.96.50.1",
                               ports=[services.Port("a", "TCP", 70000, 80)])
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, TABLES + services.TABLES) as db:
        for ports, words in (([services.Port("a", "TCP", 70000, 80)], "spec.ports[0].port"),
                             ([services.Port("a", "TCP", 80, 0x10000)], "spec.ports[0].targetPort"),
                             ([services.Port("a", "ICMP", 80, 80)], "spec.ports[0].protocol"),
                             ([], "spec.ports is empty")):
            service.ports = ports
            with pytest.raises(ValidationError) as err:
                execute(db, lambda view: services.plan_service(view, service, [], None), write=True)
            assert words in str(err.value)
    assert not [n for n in balancers(k8s) if "raw" in n]


def switches_of(env, name):
    lb = balancers(env)[name]
    return sorted(s["name"] for s in env.box.rows("nb", "Logical_Switch") if lb["_uuid"] in (
        s["load_balancer"] if isinstance(s["load_balancer"], list) else [s["load_balancer"]]))


def test_a_served_service_that_turns_invalid_loses_its_balancers(k8s):
    """A Service refused as it is now (its VIP moved inside a network) is a
    Warning Event, and what it was served with goes: a balancer of its old
    form would otherwise go on answering."""
    k8s.api.create_service("default", "turns", {"ports": [{"port": 80}]},
                           dict(NET, **{services.VIP_ANNOTATION: "10.99.0.7"}))
    wait_nb(k8s, lambda idl: vips_of("svc_default_turns_tcp")(idl) == {"10.99.0.7:80": []})
    k8s.api.set_service_annotations("default", "turns", {services.VIP_ANNOTATION: "172.16.2.41"})
    wait_nb(k8s, lambda idl: vips_of("svc_default_turns_tcp")(idl) is None)
    events = [e for e in k8s.api.events if e["involvedObject"]["name"] == "turns"]
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", services.INVALID)], events
    assert "172.16.2.41" in events[0]["message"]
    k8s.api.delete_service("default", "turns")


def test_a_network_that_becomes_a_provider_network_loses_every_service_s_vip(k8s):
    """An overlay turned into a provider network (no pod on it) no longer
    takes the Services' VIPs, even when the watcher restarted since it last
    saw that switch change (its first sight of a network's switch plans the
    Services again); and back; and a new overlay takes them."""
    def plan(item, state="merged"):
        with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
            execute(db, lambda v: vn.plan_networks(v, [("n", vn.check_network(item, "n"))], state, "ovn"),
                    write=True)

    def attached(name):
        return lambda idl: sorted(s.name for s in idl.tables["Logical_Switch"].rows.values()
                                  if any(lb.name == name for lb in s.load_balancer))

    k8s.api.create_service("default", "everywhere", {"ports": [{"port": 80}]},
                           dict(NET, **{services.VIP_ANNOTATION: "10.99.0.8"}))
    wait_nb(k8s, lambda idl: "tiny" in attached("svc_default_everywhere_tcp")(idl))
    assert k8s.terminate() == 0
    k8s.start()
    try:
        plan({"name": "tiny", "physnet": "physnet-tiny", "vlan": 5})
        wait_nb(k8s, lambda idl: attached("svc_default_everywhere_tcp")(idl) == [
            "default-net", "macvlan-net", "net1", "net2"])
    finally:
        plan({"name": "tiny", "physnet": ""})
    wait_nb(k8s, lambda idl: "tiny" in attached("svc_default_everywhere_tcp")(idl))
    plan({"name": "late", "subnet": "172.16.77.0/24"})
    try:
        wait_nb(k8s, lambda idl: "late" in attached("svc_default_everywhere_tcp")(idl))
    finally:
        k8s.api.delete_service("default", "everywhere")
        plan({"name": "late"}, "deleted")
