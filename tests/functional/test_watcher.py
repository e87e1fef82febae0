"""The watcher daemon, run as a process, against the stand-in API server and
a real NB with ovn-northd doing the dynamic allocation."""

import json

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.pod_addresses import AddressIndex
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import multus
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View
from tests.harness.annotation_cases import BAD  # the parser's catalogue, reused end to end
from tests.harness.watcher_env import ovn_network


def test_static_and_dynamic_interfaces(k8s):
    k8s.api.create_pod("default", "web", ovn_network(
        {"name": "net1", "interface": "net0"},
        {"name": "net2", "interface": "net1", "ip_address": "172.16.2.30", "mac_address": "0a:00:00:00:02:1e",
         "default_gateway": True}))
    entries = k8s.annotated("default", "web")
    assert [(e["interface"], e["ip_address"], e["default_gateway"]) for e in entries] == [
        ("net0", "172.16.1.10/24", False), ("net1", "172.16.2.30/24", True)]
    pod = k8s.api.pod("default", "web")
    assert pod["metadata"]["annotations"][ann.OVN_INTERFACES] == pod["metadata"]["annotations"][ann.IFACE_LIST]
    ports = dict((p["name"], p) for p in k8s.pod_ports())
    assert set(ports) == {"default_web_net0", "default_web_net1"}
    assert ports["default_web_net0"]["external_ids"]["ovn4nfv-pod-uid"] == pod["metadata"]["uid"]


def test_delete_frees_ports_and_address(k8s):
    k8s.api.create_pod("default", "a", ovn_network({"name": "net1", "interface": "net0"}))
    first = k8s.annotated("default", "a")[0]["ip_address"]
    k8s.api.delete_pod("default", "a")
    k8s.wait_ports_gone(["default_a_net0"])
    k8s.api.create_pod("default", "b", ovn_network({"name": "net1", "interface": "net0"}))
    assert k8s.annotated("default", "b")[0]["ip_address"] == first
    assert [p["name"] for p in k8s.pod_ports()] == ["default_b_net0"]


ALLOCATION_BAD = [
    ("unknown_network", ovn_network({"name": "nosuch", "interface": "net0"}), ["ovnNetwork[0].name", "nosuch"]),
    ("ip_outside_subnet", ovn_network({"name": "net1", "interface": "net0", "ip_address": "10.9.9.9"}),
     ["ovnNetwork[0].ip_address", "10.9.9.9"]),
    ("ip_is_gateway", ovn_network({"name": "net1", "interface": "net0", "ip_address": "172.16.1.1"}),
     ["ovnNetwork[0].ip_address", "gateway"]),
    ("ip_excluded", ovn_network({"name": "net1", "interface": "net0", "ip_address": "172.16.1.5"}),
     ["ovnNetwork[0].ip_address", "exclude_ips"]),
]
REASONS = {"unknown_network": "UnknownNetwork"}


def test_bad_annotations_yield_events_and_no_ports(k8s):
    cases = list(BAD) + ALLOCATION_BAD
    assert len(cases) >= 20
    for index, (_case_id, found, _expected) in enumerate(cases):
        k8s.api.create_pod("bad", "p%d" % index, found)
    k8s.api.wait(lambda api: len(set(e["involvedObject"]["name"] for e in api.events)) >= len(cases), 60)
    for index, (case_id, _found, expected) in enumerate(cases):
        events = k8s.events_for("p%d" % index)
        assert len(events) == 1, (case_id, events)
        assert events[0]["reason"] == REASONS.get(case_id, "InvalidNetworkRequest"), (case_id, events)
        assert events[0]["type"] == "Warning"
        for text in expected:
            assert text in events[0]["message"], (case_id, text, events[0]["message"])
        assert ann.IFACE_LIST not in k8s.api.pod("bad", "p%d" % index)["metadata"]["annotations"]
    assert k8s.pod_ports() == []
    assert "InvalidNetworkRequest: ovnNetwork[0].interface" in k8s.log_text(), "the log says what the Event says"


def test_duplicate_static_ip_names_the_holder(k8s):
    k8s.api.create_pod("ns1", "holder", ovn_network({"name": "net2", "interface": "net0", "ip_address": "172.16.2.50"}))
    k8s.annotated("ns1", "holder")
    k8s.api.create_pod("ns2", "late", ovn_network({"name": "net2", "interface": "net0", "ip_address": "172.16.2.50"}))
    k8s.api.wait(lambda api: k8s.events_for("late"), 30)
    assert "pod ns1/holder" in k8s.events_for("late")[0]["message"]


def test_corrected_input_is_handled(k8s):
    k8s.api.create_pod("default", "fixme", ovn_network({"name": "net1", "interface": "eth"}))
    k8s.api.wait(lambda api: k8s.events_for("fixme"), 30)
    k8s.api.set_annotations("default", "fixme", ovn_network({"name": "net1", "interface": "eth0"}))
    assert k8s.annotated("default", "fixme")[0]["interface"] == "eth0"


def test_web_and_web_1(k8s):
    for name in ("web", "web-1"):
        k8s.api.create_pod("default", name, ovn_network({"name": "net1", "interface": "net0"}))
        k8s.annotated("default", name)
    k8s.api.delete_pod("default", "web")
    k8s.wait_ports_gone(["default_web_net0"])
    assert sorted(p["name"] for p in k8s.pod_ports()) == ["default_web-1_net0"]


def test_legacy_and_nfn_forms(k8s):
    k8s.api.create_pod("default", "legacy", {ann.LEGACY: json.dumps({"ip_address": "10.240.0.20/16"})})
    entry = k8s.annotated("default", "legacy")[0]
    assert entry["interface"] == "eth0" and entry["ip_address"] == "10.240.0.20/16" and entry["default_gateway"]
    k8s.api.create_pod("default", "nfn", {ann.NFN_NETWORK: json.dumps({"type": "ovn4nfv", "interface": [
        {"name": "net2", "interface": "net3", "ipAddress": "172.16.2.77", "defaultGateway": "true"}]})})
    entry = k8s.annotated("default", "nfn")[0]
    assert entry["interface"] == "net3" and entry["ip_address"] == "172.16.2.77/24"


def test_expired_watch_is_listed_again(k8s):
    k8s.api.create_pod("default", "before", ovn_network({"name": "net1", "interface": "net0"}))
    k8s.annotated("default", "before")
    k8s.api.compact()
    k8s.api.create_pod("default", "after", ovn_network({"name": "net1", "interface": "net0"}))
    k8s.annotated("default", "after")
    assert "410 Gone" in k8s.log_text()
    assert_converged(k8s, "default", 2)


def test_dropped_watch_is_resumed(k8s):
    k8s.api.create_pod("default", "one", ovn_network({"name": "net1", "interface": "net0"}))
    k8s.annotated("default", "one")
    k8s.api.drop_watches()
    k8s.api.create_pod("default", "two", ovn_network({"name": "net1", "interface": "net0"}))
    k8s.annotated("default", "two")
    assert_converged(k8s, "default", 2)


def test_api_errors_are_retried(k8s):
    k8s.api.fail_next(15)
    k8s.api.create_pod("default", "patient", ovn_network({"name": "net2", "interface": "net0"}))
    k8s.annotated("default", "patient", timeout=60)
    assert "answered 500" in k8s.log_text()
    assert_converged(k8s, "default", 1)


def test_api_server_going_away_is_retried(k8s):
    k8s.api.create_pod("default", "first", ovn_network({"name": "net1", "interface": "net0"}))
    k8s.annotated("default", "first")
    k8s.api.go_away()
    k8s.api.create_pod("default", "meanwhile", ovn_network({"name": "net1", "interface": "net0"}))
    assert k8s.wait_log("unreachable", 30), "the watcher should notice and back off"
    k8s.api.come_back()
    k8s.annotated("default", "meanwhile", timeout=60)
    assert_converged(k8s, "default", 2)


MULTUS = ann.MULTUS_NETWORKS


def add_nads(k8s):
    k8s.api.add_nad("default", "ovnnet", {"cniVersion": "1.0.0", "type": "ovn4nfv"})
    k8s.api.add_nad("default", "macvlan", {"cniVersion": "1.0.0", "type": "macvlan", "master": "eth0",
                                           "ipam": {"type": "ovn4nfv-ipam", "provider": "macvlan.default"}})
    k8s.api.add_nad("default", "bridge", {"cniVersion": "1.0.0", "type": "bridge",
                                          "ipam": {"type": "host-local", "subnet": "10.1.0.0/24"}})


def test_multus_attachments_of_type_ovn4nfv(k8s):
    add_nads(k8s)
    k8s.api.create_pod("default", "m1", {MULTUS: "ovnnet", "ovnnet.default.ovn.kubernetes.io/ip_address": "172.16.2.40"})
    entry = k8s.annotated("default", "m1")[0]
    assert entry["interface"] == "net1" and entry["ip_address"] == "172.16.2.40/24"
    pool = {"ovnnet.default.ovn.kubernetes.io/ip_pool": "172.16.2.41,172.16.2.42"}
    for name in ("m2", "m3"):
        k8s.api.create_pod("default", name, dict(pool, **{MULTUS: json.dumps([{"name": "ovnnet", "interface": "net7"}])}))
        k8s.annotated("default", name)
    ips = sorted(json.loads(k8s.api.pod("default", n)["metadata"]["annotations"][ann.IFACE_LIST])[0]["ip_address"]
                 for n in ("m2", "m3"))
    assert ips == ["172.16.2.41/24", "172.16.2.42/24"], "each takes a free address of the pool"
    # Served again (its own patch is an event; so is any change), a pod keeps
    # the pool address its port holds: that one is its own, not taken. The
    # rule, on the live NB (Debian 12's CI run once caught m2 moving onto m3's).
    uids = dict((n, k8s.api.pod("default", n)["metadata"]["uid"]) for n in ("m2", "m3"))
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, ("Logical_Switch_Port",)) as db:
        index = AddressIndex().attach(db)
        attachments = multus.Attachments(None, db, index)
        pool_ips = ann.ip_pool(pool, "ovnnet.default.ovn", "m")
        chosen = dict((n, str(db.read(lambda idl, u=uid: attachments._pool_choice(View(idl), pool_ips, u))))
                      for n, uid in uids.items())
        nobody = db.read(lambda idl: attachments._pool_choice(View(idl), pool_ips, "another-uid"))
    held = dict((p["external_ids"]["ovn4nfv-pod-name"], p["addresses"]) for p in k8s.pod_ports()
                if p["external_ids"]["ovn4nfv-pod-name"] in ("m2", "m3"))
    assert chosen == {"m2": "172.16.2.41", "m3": "172.16.2.42"} and nobody is None, (chosen, held)
    assert "172.16.2.41" in str(held["m2"]) and "172.16.2.42" in str(held["m3"]), held


def test_macvlan_attachment_with_ovn4nfv_ipam(k8s):
    add_nads(k8s)
    k8s.api.create_pod("default", "mv1", {MULTUS: "macvlan,bridge"})
    k8s.annotated("default", "mv1")
    found = k8s.api.pod("default", "mv1")["metadata"]["annotations"]
    assert json.loads(found[ann.IFACE_LIST]) == [], "no OVN interface: macvlan makes it"
    assert found["macvlan.default.kubernetes.io/cidr"] == "172.16.30.0/24"
    assert found["macvlan.default.kubernetes.io/gateway"] == "172.16.30.1"
    assert found["macvlan.default.kubernetes.io/allocated"] == "true"
    first = found["macvlan.default.kubernetes.io/ip_address"]
    assert first.startswith("172.16.30.")
    reservation = [p for p in k8s.pod_ports() if p["external_ids"]["ovn4nfv-interface"] == "net1"]
    assert len(reservation) == 1, "the address is recorded in OVN"
    k8s.api.create_pod("default", "mv2", {MULTUS: "macvlan", "macvlan.default.kubernetes.io/ip_address": "172.16.30.77"})
    k8s.annotated("default", "mv2")
    assert k8s.api.pod("default", "mv2")["metadata"]["annotations"]["macvlan.default.kubernetes.io/ip_address"] == \
        "172.16.30.77"
    k8s.api.delete_pod("default", "mv1")
    k8s.wait_ports_gone(["default_mv1_net1"])
    k8s.api.create_pod("default", "mv3", {MULTUS: "macvlan"})
    k8s.annotated("default", "mv3")
    assert k8s.api.pod("default", "mv3")["metadata"]["annotations"]["macvlan.default.kubernetes.io/ip_address"] == \
        first, "deleting the pod freed its address"


def test_multus_selection_of_a_missing_nad(k8s):
    k8s.api.create_pod("default", "lost", {MULTUS: "nosuch"})
    k8s.api.wait(lambda api: k8s.events_for("lost"), 30)
    assert "NetworkAttachmentDefinition default/nosuch does not exist" in k8s.events_for("lost")[0]["message"]


def assert_converged(k8s, namespace, count, timeout=120):
    """Every pod of ``namespace`` annotated, and the product's pod ports
    exactly the live pods' interfaces, with no address handed out twice."""
    def all_annotated(api):
        pods = [p for (ns, _n), p in api.pods.items() if ns == namespace]
        return len(pods) == count and all(ann.IFACE_LIST in p["metadata"]["annotations"] for p in pods)
    assert k8s.api.wait(all_annotated, timeout), "not every pod was annotated:\n" + k8s.log_text()
    live = dict((p["metadata"]["uid"], p) for (ns, _n), p in k8s.api.pods.items())
    wanted = set((uid, "net0") for uid, p in live.items() if ann.OVN_NETWORK in p["metadata"]["annotations"])
    ports = [(p["external_ids"]["ovn4nfv-pod-uid"], p["external_ids"]["ovn4nfv-interface"])
             for p in k8s.pod_ports()]
    assert len(ports) == len(set(ports)), "duplicated ports"
    assert set(ports) == wanted, "leaked or missing ports"
    addresses = [json.loads(p["metadata"]["annotations"][ann.IFACE_LIST])[0]["ip_address"]
                 for p in live.values() if ann.IFACE_LIST in p["metadata"]["annotations"]]
    assert len(addresses) == len(set(addresses)), "an address was handed out twice"


def test_nb_restart_during_a_burst(k8s):
    for index in range(40):
        k8s.api.create_pod("burst", "p%d" % index, ovn_network({"name": "net1", "interface": "net0"}))
        if index == 15:
            k8s.box.restart_db("ovnnb_db")
    assert_converged(k8s, "burst", 40)


def test_sigkill_during_a_burst_then_restart(k8s):
    total = 200
    for index in range(total):
        k8s.api.create_pod("burst", "p%d" % index, ovn_network({"name": "net1", "interface": "net0"}))

    def some_done(api):
        return sum(1 for (ns, _n), p in api.pods.items()
                   if ns == "burst" and ann.IFACE_LIST in p["metadata"]["annotations"]) >= 20
    assert k8s.api.wait(some_done, 60)
    k8s.proc.kill()
    k8s.proc.wait(10)
    for index in range(0, total, 10):       # pods also go while it is down
        k8s.api.delete_pod("burst", "p%d" % index)
    k8s.start()
    assert_converged(k8s, "burst", total - total // 10)


def test_a_static_ipv6_address_is_refused_with_an_event_not_waited_for(tmp_path, collections_path):
    """On a dual-stack network an interface's IPv6 address follows from its
    MAC; a static IPv6 ``ip_address`` used to make a port holding only it,
    and the watcher then waited for an IPv4 address that never came."""
    from tests.harness.watcher_env import NETWORKS, Cluster
    env = Cluster(str(tmp_path), collections_path,
                  networks=NETWORKS + [{"name": "dual", "subnet": "172.16.40.0/24", "subnet6": "fd00:40::/64"}])
    try:
        env.api.create_pod("default", "six", ovn_network({"name": "dual", "interface": "net0",
                                                          "ip_address": "fd00:40::99"}))
        env.api.wait(lambda api: env.events_for("six"), 30)
        event = env.events_for("six")[0]
        assert event["reason"] == "InvalidNetworkRequest", event
        assert "ovnNetwork[0].ip_address" in event["message"] and "IPv6" in event["message"], event
        assert not [p for p in env.pod_ports() if p["external_ids"].get("ovn4nfv-pod") == "six"]
        # the same pod with a dynamic address on the same network is served, both families
        env.api.set_annotations("default", "six", ovn_network({"name": "dual", "interface": "net0"}))
        entry = env.annotated("default", "six")[0]
        assert entry["ip_address"].startswith("172.16.40.")
        assert "no address within" not in env.log_text(whole=True)
    finally:
        assert env.stop() == 0


def test_a_network_deleted_with_force_strands_its_pods_with_an_event_and_a_shorter_list(k8s):
    """Its ports go with it; the pods on it are told (an Event naming the
    network) and their interface lists keep only what remains."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
    k8s.api.create_pod("default", "stranded", ovn_network({"name": "net1", "interface": "net0"},
                                                          {"name": "net2", "interface": "net1"}))
    assert [e["interface"] for e in k8s.annotated("default", "stranded")] == ["net0", "net1"]
    with ovsdb.Database(k8s.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: vn.plan_networks(v, [("config[0]", {"name": "net2"})], "deleted", "ovn", force=True),
                write=True)
    k8s.api.wait(lambda api: [e for e in k8s.events_for("stranded") if e["reason"] == "UnknownNetwork"], 30)
    event = [e for e in k8s.events_for("stranded") if e["reason"] == "UnknownNetwork"][0]
    assert "net2" in event["message"] and "ovnNetwork[1]" in event["message"], event

    def shortened(api):
        text = api.pod("default", "stranded")["metadata"]["annotations"].get(ann.IFACE_LIST)
        return text and [e["interface"] for e in json.loads(text)] == ["net0"]
    assert k8s.api.wait(shortened, 30), k8s.log_text()
