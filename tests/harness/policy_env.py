"""Tenants' policies served by the watcher, judged on a real data plane:
one node (ovs-vswitchd and ovn-controller, ``dataplane.Node``), the
watcher and the API stand-in (``watcher_env.Cluster``) on its NB, bulk pods
on two networks, and two real pods in the namespace ``probe``: a server
(``srv``, app=srv) and a client (``cli``, app=cli) on ``net-a``, bound by
ovn-controller, with a :class:`~tests.harness.dataplane.Prober` between
them. ``benchmarks/policy.py`` times it at scale; the functional tests
use it small.
"""

import json
import shutil
import tempfile

from tests.harness.dataplane import Node, Prober
from tests.harness.watcher_env import Cluster

NAMESPACES = 10
APPS = 50
PORT = 8080
NETWORKS = [{"name": "net-a", "subnet": "10.1.0.0/16"}, {"name": "net-b", "subnet": "10.2.0.0/16"},
            {"name": "default-net", "subnet": "10.240.0.0/16"}]
PROBE_NETWORK = "ovn4nfv.k8s/net-a"
# the probe's policy: isolating the server; admitting the client by label
ISOLATE = {"podSelector": {"matchLabels": {"app": "srv"}}, "ingress": []}
ADMIT = {"podSelector": {"matchLabels": {"app": "srv"}},
         "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}], "ports": [{"port": PORT}]}]}
HOLD = 3        # a verdict holds for this many probes in a row


def pod_network(index):
    return "net-a" if index % 2 == 0 else "net-b"


class PolicyNode:
    """The node, the watcher and the pods (``pods`` bulk pods, app=a<i % 50>
    in namespaces bench-<i % 10>, and the probe's two). Stop it with
    :meth:`stop` (or as a context)."""

    def __init__(self, collections, pods=0, annotate_seconds=900):
        self.tmp = tempfile.mkdtemp(prefix="ovn4nfv-policy-node-")
        self.node, self.env, self.prober = Node(), None, None
        try:
            self.node.join()
            self.env = Cluster(self.tmp, collections, networks=NETWORKS, box=self.node.box)
            api = self.api = self.env.api
            for n in range(NAMESPACES if pods else 0):
                api.create_namespace("bench-%d" % n, {"team": "t%d" % n})
            api.create_namespace("probe", {"team": "probe"})
            for i in range(pods):
                api.create_pod("bench-%d" % (i % NAMESPACES), "pod%d" % i,
                               {"ovnNetwork": json.dumps([{"name": pod_network(i), "interface": "eth0"}])},
                               labels={"app": "a%d" % (i % APPS)})
            for name in ("srv", "cli"):
                api.create_pod("probe", name, {"ovnNetwork": json.dumps([{"name": "net-a", "interface": "eth0"}])},
                               labels={"app": name})
            done = api.wait(lambda a: len(a.annotated_at) >= pods + 2, annotate_seconds)
            assert done, "not every pod was annotated:\n" + self.env.log_text()
            self.ports = dict(((p["external_ids"].get("ovn4nfv-pod-namespace"),
                                p["external_ids"].get("ovn4nfv-pod-name")), p["name"]) for p in self.env.pod_ports())
            netns, self.address = {}, {}
            for name in ("srv", "cli"):
                entry, = self.env.annotated("probe", name)
                self.address[name] = entry["ip_address"].split("/")[0]
                netns[name] = self.node.attach(name, "br-int", entry["mac_address"], entry["ip_address"],
                                               gateway="10.1.0.1", iface_id=self.ports[("probe", name)])
            self.node.wait_hv()
            self.prober = Prober(netns["srv"], netns["cli"], self.address["srv"], PORT)
        except Exception:
            self.stop()
            raise

    def obeys(self, expected, deadline=30.0):
        """Whether new connections from the client come to ``expected``
        (answered or not) within ``deadline`` seconds, HOLD probes in a
        row (``Prober.settle``)."""
        return self.prober.settle(expected, deadline, HOLD) is not None

    def stop_watcher(self):
        """Stop the watcher (its rows stay); its exit code."""
        env, self.env = self.env, None
        return env.stop() if env is not None else None

    def log_text(self):
        return self.env.log_text() if self.env is not None else ""

    def stop(self):
        try:
            if self.prober is not None:
                self.prober.stop()
            if self.env is not None:
                self.env.stop()
        finally:
            self.node.stop()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()
