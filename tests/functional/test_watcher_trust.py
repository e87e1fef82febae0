"""Issue 11's defects, each shown end to end: the watcher as a process,
a real NB with ovn-northd allocating, the API stand-in. What a test claims
it reads from outside the watcher: the NB (through a client of its own),
the stand-in's pods and Events, the watcher's log."""

import json

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from tests.harness.watcher_env import Cluster, ovn_network


def test_pod_deleted_during_a_retry_does_not_come_back(k8s):
    """Its patch fails, so its work waits for a retry; it is deleted
    meanwhile. The retry must find it gone: ports removed once, never
    created again, and the address free for the next pod."""
    ports = k8s.port_log()
    try:
        k8s.api.fail_matching("PATCH", "/pods/doomed", 1000)
        pod = k8s.api.create_pod("default", "doomed", ovn_network({"name": "net1", "interface": "net0"}))
        uid = pod["metadata"]["uid"]
        # two failed patches: the key is in its backoff, its ports made
        assert k8s.api.wait(lambda api: api.targeted_failed >= 2, 30), k8s.log_text()
        assert ports.of(uid) == ["create"]
        k8s.api.delete_pod("default", "doomed")
        assert ports.wait_for(lambda log: log.of(uid) == ["create", "delete"], 30), k8s.log_text()
        # a retry scheduled before the delete fires within max_backoff_seconds
        # (1 s here); the old watcher re-created the port within that second
        assert not ports.wait_for(lambda log: len(log.of(uid)) > 2, 3), \
            "the deleted pod's port came back: %s" % ports.of(uid)
        k8s.api.create_pod("default", "next", ovn_network({"name": "net1", "interface": "net0"}))
        assert k8s.annotated("default", "next")[0]["ip_address"] == "172.16.1.10/24", "the address was freed"
        assert [p["name"] for p in k8s.pod_ports()] == ["default_next_net0"]
    finally:
        ports.close()


def test_full_network_is_an_event_and_holds_no_worker(tmp_path, collections_path):
    """With 2 workers and OVN's answer awaited for up to 10 minutes, pods
    on a full network must neither hold a worker nor get a half-made
    port; healthy pods are served meanwhile, and a waiting pod is served
    as soon as an address frees."""
    env = Cluster(str(tmp_path), collections_path, workers=2, address_seconds=600)
    try:
        for index in range(5):
            env.api.create_pod("fill", "f%d" % index, ovn_network({"name": "tiny", "interface": "net0"}))
        for index in range(5):
            env.annotated("fill", "f%d" % index)
        for index in range(2):
            env.api.create_pod("starved", "s%d" % index, ovn_network({"name": "tiny", "interface": "net0"}))
        for index in range(8):
            env.api.create_pod("healthy", "h%d" % index, ovn_network({"name": "net2", "interface": "net0"}))
        for index in range(8):
            env.annotated("healthy", "h%d" % index, timeout=60)
        assert env.api.wait(lambda api: all(env.events_for("s%d" % i) for i in range(2)), 30), env.log_text()
        for index in range(2):
            events = env.events_for("s%d" % index)
            assert [e["reason"] for e in events] == ["AddressPoolExhausted"], events
            message = events[0]["message"]
            assert "tiny" in message and "172.16.9.0/29 holds 5 addresses, 5 held" in message, message
            assert ann.IFACE_LIST not in env.api.pod("starved", "s%d" % index)["metadata"]["annotations"]
        assert not [p for p in env.pod_ports() if p["external_ids"]["ovn4nfv-pod-namespace"] == "starved"], \
            "nothing half-made for a pod on a full network"
        assert "AddressPoolExhausted: ovnNetwork[0].name: network tiny has no free address" in env.log_text()
        freed = json.loads(env.api.pod("fill", "f2")["metadata"]["annotations"][ann.IFACE_LIST])[0]["ip_address"]
        env.api.delete_pod("fill", "f2")

        def one_served(api):
            return [n for n in ("s0", "s1") if ann.IFACE_LIST in api.pod("starved", n)["metadata"]["annotations"]]
        served = env.api.wait(one_served, 30)
        assert len(served) == 1, env.log_text()
        entry = json.loads(env.api.pod("starved", served[0])["metadata"]["annotations"][ann.IFACE_LIST])[0]
        assert entry["ip_address"] == freed
    finally:
        assert env.stop() == 0


def test_hostile_annotation_is_reported_once_and_forgotten_with_the_pod(k8s):
    hostile = {ann.OVN_NETWORK: "[" * 5000 + "]" * 5000}
    k8s.api.create_pod("default", "deep", hostile)
    k8s.api.wait(lambda api: k8s.events_for("deep"), 30)
    k8s.api.delete_pod("default", "deep")
    k8s.api.create_pod("default", "after", ovn_network({"name": "net1", "interface": "net0"}))
    k8s.annotated("default", "after")
    assert [e["reason"] for e in k8s.events_for("deep")] == ["InvalidNetworkRequest"]
    assert "nested more than 8 levels" in k8s.events_for("deep")[0]["message"]
    log = k8s.log_text()
    assert "Traceback" not in log and "retrying" not in log, log


def test_unknown_key_names_the_known_one_and_makes_nothing(k8s):
    k8s.api.create_pod("default", "typo", ovn_network({"name": "net1", "interface": "net0",
                                                       "ipAdress": "172.16.1.30"}))
    k8s.api.wait(lambda api: k8s.events_for("typo"), 30)
    message = k8s.events_for("typo")[0]["message"]
    assert "unknown key 'ipAdress'" in message and "did you mean 'ipAddress'" in message
    assert k8s.pod_ports() == []


ADDRESS_CASES = [
    ("prefix_contradicts", "172.16.1.20/16", "says /16, but the network 172.16.1.0/24 is a /24"),
    ("network_address", "172.16.1.0", "network net1's network address"),
    ("broadcast_address", "172.16.1.255", "network net1's broadcast address"),
    ("excluded", "172.16.1.5", "in network net1's exclude_ips (172.16.1.2..172.16.1.9)"),
]


def test_static_addresses_are_refused_for_what_they_are(k8s):
    for case, address, _text in ADDRESS_CASES:
        k8s.api.create_pod("default", case.replace("_", "-"), ovn_network(
            {"name": "net1", "interface": "net0", "ip_address": address}))
    k8s.api.create_pod("default", "right-prefix", ovn_network(
        {"name": "net1", "interface": "net0", "ip_address": "172.16.1.20/24"}))
    assert k8s.annotated("default", "right-prefix")[0]["ip_address"] == "172.16.1.20/24"
    k8s.api.wait(lambda api: all(k8s.events_for(c[0].replace("_", "-")) for c in ADDRESS_CASES), 30)
    for case, _address, text in ADDRESS_CASES:
        event = k8s.events_for(case.replace("_", "-"))[0]
        assert event["reason"] == "InvalidNetworkRequest" and text in event["message"], (case, event)
    assert [p["name"] for p in k8s.pod_ports()] == ["default_right-prefix_net0"]


def test_ovn4nfv_routes_annotation_reaches_the_interface_list(k8s):
    k8s.api.create_pod("default", "routed", ovn_network(
        {"name": "net1", "interface": "net0"}, {"name": "net2", "interface": "net1"},
        ovnNetworkRoutes=json.dumps([{"dst": "10.30.0.0/16", "gw": "172.16.2.254", "dev": "net1"},
                                     {"dst": "10.31.0.0/16", "dev": "net1"}])))
    entries = dict((e["interface"], e) for e in k8s.annotated("default", "routed"))
    assert entries["net0"]["routes"] == []
    assert entries["net1"]["routes"] == [{"dst": "10.30.0.0/16", "gw": "172.16.2.254"},
                                         {"dst": "10.31.0.0/16", "gw": "172.16.2.1"}]


def test_two_forms_use_the_first_and_warn_of_the_other(k8s):
    k8s.api.create_pod("default", "both", ovn_network(
        {"name": "net1", "interface": "net0"},
        **{ann.NFN_NETWORK: json.dumps({"type": "ovn4nfv", "interface": [{"name": "net2", "interface": "net5"}]})}))
    assert [e["interface"] for e in k8s.annotated("default", "both")] == ["net0"]
    k8s.api.wait(lambda api: k8s.events_for("both"), 30)
    line = "pod default/both: IgnoredAnnotation"
    before = k8s.log_text(whole=True).count(line)
    k8s.api.set_annotations("default", "both", {"touched": "1"})
    # handled again once touched (each handling logs the line): said once
    assert k8s.wait_log(line, 30, count=before + 1), k8s.log_text()
    assert len(k8s.events_for("both")) == 1, k8s.events_for("both")
    event = k8s.events_for("both")[0]
    assert event["reason"] == "IgnoredAnnotation" and event["type"] == "Warning"
    assert ann.NFN_NETWORK in event["message"] and "ovnNetwork takes precedence" in event["message"]


def test_unknown_provider_key_is_refused_before_anything_is_made(k8s):
    k8s.api.add_nad("default", "macvlan", {"cniVersion": "1.0.0", "type": "macvlan", "master": "eth0",
                                           "ipam": {"type": "ovn4nfv-ipam", "provider": "macvlan.default"}})
    k8s.api.create_pod("default", "mvtypo", {ann.MULTUS_NETWORKS: "macvlan",
                                             "macvlan.default.kubernetes.io/ip_adress": "172.16.30.70"})
    k8s.api.wait(lambda api: k8s.events_for("mvtypo"), 30)
    event = k8s.events_for("mvtypo")[0]
    assert event["reason"] == "InvalidNetworkRequest"
    assert "unknown key 'ip_adress'" in event["message"] and "did you mean 'ip_address'" in event["message"]
    assert k8s.pod_ports() == []


def test_ipam_address_is_freed_after_the_watcher_missed_the_delete(k8s):
    """ovn4nfv-ipam's path: the pod goes while the watcher is down; the
    restarted watcher's first resync frees the address."""
    k8s.api.add_nad("default", "macvlan", {"cniVersion": "1.0.0", "type": "macvlan", "master": "eth0",
                                           "ipam": {"type": "ovn4nfv-ipam", "provider": "macvlan.default"}})
    k8s.api.create_pod("default", "mv", {ann.MULTUS_NETWORKS: "macvlan"})
    k8s.annotated("default", "mv")
    first = k8s.api.pod("default", "mv")["metadata"]["annotations"]["macvlan.default.kubernetes.io/ip_address"]
    k8s.proc.kill()
    k8s.proc.wait(10)
    k8s.api.delete_pod("default", "mv")
    k8s.start()
    k8s.wait_ports_gone(["default_mv_net1"])
    k8s.api.create_pod("default", "mv2", {ann.MULTUS_NETWORKS: "macvlan"})
    k8s.annotated("default", "mv2")
    assert k8s.api.pod("default", "mv2")["metadata"]["annotations"][
        "macvlan.default.kubernetes.io/ip_address"] == first
