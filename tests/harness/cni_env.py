"""A CNI test node: ovs-vswitchd (netdev) and ovn-controller in the node's
namespace, networks in the NB, the API stand-in, the node agent as a
process, and the ovn4nfv plugins installed as a runtime would call them.
Pods get their interface lists written the way the watcher writes them,
with the same core functions."""

import contextlib
import json
import os
import subprocess
import sys
import time

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import vms
from tests.harness import collection
from tests.harness.cni_runtime import call, install_plugin, runtime_args
from tests.harness.dataplane import Node, ip
from tests.harness.kube_api_standin import NODE_AGENT, KubeAPIStandIn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View

NETWORKS = [{"name": "net1", "subnet": "172.16.1.0/24", "routes": [{"dst": "10.20.0.0/16"}]},
            {"name": "net2", "subnet": "172.16.2.0/24"},
            {"name": "macvlan-net", "subnet": "172.16.30.0/24", "provider": "macvlan.default"},
            # a network whose interfaces a guest may configure itself, by OVN's DHCP
            {"name": "vmnet", "subnet": "172.16.60.0/24", "mtu": 1400, "dhcp": {}}]


@contextlib.contextmanager
def running(tmp, collections, **agent_settings):
    """An :class:`Env` for a test module, stopped after it; the node agent
    must not have asked the API for anything its RBAC manifest withholds."""
    environment = Env(tmp, collections, **agent_settings)
    try:
        yield environment
    finally:
        environment.stop()
    assert environment.api.denied == [], "the agent asked for what its RBAC manifest does not grant"


class Env:
    def __init__(self, tmp, collections, **agent_settings):
        self.tmp = tmp
        self.collections = collections
        self.node = Node()
        self.api = KubeAPIStandIn()
        self.agent = None
        box = self.node.box
        self.node.join()
        box.run("ovs-vsctl", "--db=" + box.ovs_db, "--timeout=30", "wait-until", "bridge", "br-int")
        with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
            execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
            execute(db, lambda v: vn.plan_networks(
                v, [(n["name"], vn.check_network(n, n["name"])) for n in NETWORKS], "merged", "ovn"), write=True)
        self.socket = os.path.join(tmp, "agent.sock")
        self.config_path = os.path.join(tmp, "agent.json")
        with open(self.config_path, "w") as handle:
            json.dump({"socket": self.socket, "ovs_db": box.ovs_db,
                       "kubeconfig": self.api.kubeconfig(os.path.join(tmp, "kubeconfig"), NODE_AGENT),
                       "node_netns": "/var/run/netns/" + self.node.ns, "node_name": "node1",
                       "annotation_seconds": 3, "install_seconds": 20,
                       "ovs_bridges": {"o4nvlan": ["100", "200"]}, **agent_settings}, handle)
        self.log = open(os.path.join(tmp, "agent.log"), "w+")
        self.plugin = install_plugin(tmp, collections)
        install_plugin(tmp, collections, name="ovn4nfv-ipam")
        self.start_agent()

    def start_agent(self, faults=None):
        """The agent as a process; with ``faults``, through
        tests/harness/agent_faults.py, which injects them."""
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        module = ["tests.harness.agent_faults", json.dumps(faults)] if faults else [
            "ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.node_agent"]
        path = os.pathsep.join([self.collections, collection.ROOT])
        self.agent = subprocess.Popen(
            [sys.executable, "-m"] + module + ["--config", self.config_path], env=dict(os.environ, PYTHONPATH=path),
            stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            assert self.agent.poll() is None and time.monotonic() < deadline, self.log_text()
            time.sleep(0.05)

    def stop_agent(self):
        if self.agent and self.agent.poll() is None:
            self.agent.terminate()
            try:
                self.agent.wait(20)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(10)

    @contextlib.contextmanager
    def agent_variant(self, faults=None, **settings):
        """The agent restarted with ``settings`` over its configuration and
        ``faults`` injected; the usual agent again afterwards, whatever
        happened."""
        with open(self.config_path) as handle:
            original = handle.read()
        self.stop_agent()
        try:
            with open(self.config_path, "w") as handle:
                json.dump(dict(json.loads(original), **settings), handle)
            self.start_agent(faults)
            yield
        finally:
            self.stop_agent()
            with open(self.config_path, "w") as handle:
                handle.write(original)
            self.start_agent()

    def wait_log(self, text, timeout):
        """Whether ``text`` appears in the agent's log within ``timeout``
        seconds (the log is the agent's own record of what it finished)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log_text():
                return True
            time.sleep(0.1)
        return False

    def log_text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-5000:]

    def pod(self, name, *requests, ipam=None):
        """A pod object, its ports in OVN and its interface list written as
        the watcher writes it, and its network namespace. ``ipam`` is a
        list of (interface, provider, network, static IP or None) taken
        for another plugin (ovn4nfv-ipam)."""
        netns, patch = self.unannounced_pod(name, *requests, ipam=ipam)
        self.api.set_annotations("default", name, patch)
        return netns

    def unannounced_pod(self, name, *requests, ipam=None):
        """As :meth:`pod`, but the interface list is returned, not written:
        ``(netns path, annotations to write)``."""
        obj = self.create_pod(name, *requests)
        return self.watcher_ran(obj, *requests, ipam=ipam)

    def create_pod(self, name, *requests, annotations=None, labels=None, owners=None):
        """The pod object alone, asking for ``requests``, and its network
        namespace; ``annotations`` are on it from the start (its owner
        wrote them, say); ``labels`` and ``owners`` (ownerReferences) too."""
        self.node._add_ns("o4n-%s-%s" % (self.node.tag, name))
        return self.api.create_pod("default", name, dict(annotations or {}, **{
            ann.OVN_NETWORK: json.dumps(list(requests))}), labels=labels, owners=owners)

    def watcher_ran(self, obj, *requests, ipam=None):
        """What the watcher does for ``obj``: its ports in OVN, with the
        core functions; ``(netns path, annotations to write)``."""
        name = obj["metadata"]["name"]
        owner = vms.owner_of(obj["metadata"])     # the pod, or the VM it launches
        parsed = ann.parse_requests({ann.OVN_NETWORK: json.dumps(list(requests))})[1]
        for interface, provider, network, static in ipam or []:
            selection = {"name": provider.split(".")[0], "namespace": "default", "interface": interface,
                         "ips": [static] if static else [], "mac": None, "default_route": False,
                         "where": "ipam"}
            parsed.append(ann.attachment_request(selection, network, provider, True, {}))
        with ovsdb.Database(self.node.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
            execute(db, lambda v: pod_ports.plan_pod(v, owner, parsed), write=True)
            if vms.vm_of(owner.name):
                # the VM's key: this launcher is the one its node agent may attach the VM's ports for
                execute(db, lambda v: pod_ports.plan_binding(v, [
                    r for r in v.rows("Logical_Switch_Port") if r.external_ids.get("ovn4nfv-pod-uid") == owner.uid],
                    None, [obj["metadata"]["uid"]]), write=True)
            patch = db.wait_for(lambda idl: pod_ports.pod_annotations(View(idl), owner, parsed), 20)
            execute(db, lambda v: pod_ports.plan_port_security(v, owner, parsed), write=True)
        return "/var/run/netns/o4n-%s-%s" % (self.node.tag, name), patch

    def cni(self, command, name, netns, container_id, plugin=None, ifname="eth0", namespace="default", **config):
        conf = dict({"cniVersion": "1.0.0", "name": "ovn", "type": "ovn4nfv", "server_socket": self.socket},
                    **config)
        pod = self.api.pod(namespace, name)         # the runtime passes the UID of the pod it runs
        return call(plugin or self.plugin, command, conf, netns=netns, ifname=ifname, container_id=container_id,
                    args=runtime_args(namespace, name, container_id, pod and pod["metadata"]["uid"]),
                    node=self.node.ns, extra_env={"CNI_PATH": self.tmp + ":/usr/lib/cni"})

    def node_links(self):
        out = ip("ip", "-o", "link", netns=self.node.ns).stdout
        return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()]

    def stop(self):
        self.stop_agent()
        self.api.stop()
        self.node.stop()
        self.log.close()
