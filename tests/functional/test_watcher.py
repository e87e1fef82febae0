"""The watcher daemon, run as a process, against the stand-in API server and
a real NB with ovn-northd doing the dynamic allocation."""

import json
import os
import signal
import subprocess
import sys

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils import (
    annotations as ann, cluster, ovsdb, reconcile, virtual_network as vn)
from conftest import COLLECTIONS
from kube_api_standin import KubeAPIStandIn
from sandbox import Sandbox

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "unit"))
from test_annotations import BAD  # noqa: E402  (the parser's catalogue, reused end to end)

NETWORKS = [{"name": "net1", "subnet": "172.16.1.0/24", "exclude_ips": ["172.16.1.2..172.16.1.9"]},
            {"name": "net2", "subnet": "172.16.2.0/24"},
            {"name": "default-net", "subnet": "10.240.0.0/16"}]


class Cluster:
    """NB + northd, the API stand-in, and the watcher process."""

    def __init__(self, tmp):
        self.box = Sandbox(ovs=False)
        self.api = KubeAPIStandIn()
        with ovsdb.Database(self.box.nb_db, ovsdb.NB_SCHEMA, cluster.TABLES) as db:
            reconcile.execute(db, lambda v: cluster.plan_topology(v, {}, "merged"), write=True)
            reconcile.execute(db, lambda v: vn.plan_networks(
                v, [(n["name"], vn.check_format(n, n["name"])) for n in NETWORKS], "merged", "ovn"), write=True)
        self.config = os.path.join(tmp, "watcher.json")
        with open(self.config, "w") as handle:
            json.dump({"kubeconfig": self.api.kubeconfig(os.path.join(tmp, "kubeconfig")),
                       "nb_db": self.box.nb_db, "default_network": "default-net", "workers": 2,
                       "watch_seconds": 2, "address_seconds": 10, "max_backoff_seconds": 1}, handle)
        self.log = open(os.path.join(tmp, "watcher.log"), "w+")
        self.proc = None
        self.start()

    def start(self):
        env = dict(os.environ, PYTHONPATH=COLLECTIONS)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ansible_collections.ovn4nfv.k8s.plugins.module_utils.watcher",
             "--config", self.config], env=env, stdout=self.log, stderr=self.log)

    def terminate(self, timeout=30):
        """SIGTERM; return the exit code (None if it did not stop in time)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return None

    def annotated(self, namespace, name, timeout=30):
        def done(api):
            pod = api.pod(namespace, name)
            return pod and pod["metadata"]["annotations"].get(ann.IFACE_LIST)
        text = self.api.wait(done, timeout)
        assert text, "pod %s/%s not annotated; watcher log:\n%s" % (namespace, name, self.log_text())
        return json.loads(text)

    def events_for(self, name):
        return [e for e in self.api.events if e["involvedObject"]["name"] == name]

    def pod_ports(self):
        return [p for p in self.box.rows("nb", "Logical_Switch_Port")
                if p["external_ids"].get("ovn4nfv-role") == "pod-port"]

    def log_text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-6000:]

    def stop(self):
        code = self.terminate()
        self.api.stop()
        self.box.stop()
        self.log.close()
        return code


@pytest.fixture
def k8s(tmp_path):
    env = Cluster(str(tmp_path))
    try:
        yield env
    finally:
        code = env.stop()
    assert code == 0, "SIGTERM must stop the watcher cleanly (exit %r)" % code


def ovn_network(*entries):
    return {ann.OVN_NETWORK: json.dumps(list(entries))}


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
    assert k8s.box.run("ovn-nbctl", "--db=" + k8s.box.nb_db, "--wait=sb", "sync") is not None
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
     ["ovnNetwork[0].ip_address", "excluded"]),
]


def test_bad_annotations_yield_events_and_no_ports(k8s):
    cases = [(case_id, found, expected) for case_id, found, expected in BAD] + ALLOCATION_BAD
    assert len(cases) >= 20
    for index, (_case_id, found, _expected) in enumerate(cases):
        k8s.api.create_pod("bad", "p%d" % index, found)
    k8s.api.wait(lambda api: len(set(e["involvedObject"]["name"] for e in api.events)) >= len(cases), 60)
    for index, (case_id, _found, expected) in enumerate(cases):
        events = k8s.events_for("p%d" % index)
        assert len(events) == 1, (case_id, events)
        assert events[0]["reason"] == "InvalidNetworkRequest" and events[0]["type"] == "Warning"
        for text in expected:
            assert text in events[0]["message"], (case_id, text, events[0]["message"])
        assert ann.IFACE_LIST not in k8s.api.pod("bad", "p%d" % index)["metadata"]["annotations"]
    assert k8s.pod_ports() == []
    assert "InvalidNetworkRequest" not in k8s.log_text() and "ovnNetwork[0].interface" in k8s.log_text()


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
    k8s.api.create_pod("default", "sentinel", ovn_network({"name": "net2", "interface": "net0"}))
    k8s.annotated("default", "sentinel")        # the deletion before it has been handled
    assert sorted(p["name"] for p in k8s.pod_ports()) == ["default_sentinel_net0", "default_web-1_net0"]


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


def test_api_errors_are_retried(k8s):
    k8s.api.fail_next(15)
    k8s.api.create_pod("default", "patient", ovn_network({"name": "net2", "interface": "net0"}))
    k8s.annotated("default", "patient", timeout=60)
    assert "answered 500" in k8s.log_text()
