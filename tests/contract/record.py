"""Record what the previous release of the product writes (issue 39).

Run by hand, as root, from the checkout's root, when
``tests.harness.contract.PREVIOUS_RELEASE`` moves on to a new release::

    .venv/bin/python -m tests.contract.record            # that release
    .venv/bin/python -m tests.contract.record --commit <commit> --out <dir>

It extracts the release's collection with ``git archive <commit>`` into a
temporary directory and makes, with THAT code, the small cluster
``tests/harness/contract.py`` defines, on real daemons: one node (a network
namespace with ``ovs-vswitchd`` and ``ovn-controller``, as
``tests.harness.dataplane.Node``), the NB and SB with ``ovn-northd``, and
the tests' Kubernetes API stand-in (the only stand-in; it applies the
release's own RBAC manifests). The release's code does all the product's
writing:

* its Ansible modules, through ``ansible-playbook`` with the release's tree
  as the collection: ``ovn_chassis`` (the node), ``cluster_topology``,
  ``node_gateway`` and ``virtual_network`` (two overlays, one with DHCP,
  port security allowances and a QoS cap, and a provider network);
* its watcher, as a process: the pods' ports (dynamic and static
  addresses, two interfaces on two networks, a QoS row, a relaxed port
  security), their interface lists, the Service's load balancer, the
  policy's port groups, ACLs and address sets, the leadership's term;
* its node agent, as a process, and its CNI plugin, executed as a runtime
  executes it (``tests.harness.cni_runtime``): every pod's veths, and
  their OVS ports with the agent's marks.

Then it saves, into ``tests/data/contract/<short commit>/``
(:mod:`tests.harness.contract` names the files): the NB, the SB and the
node's Open vSwitch database, each as ``ovsdb-client backup`` writes it
(one snapshot: no history, a few hundred KB at most), every object of the
API, each pod's CNI ADD (the runtime's request and the release's result),
and what it ran with. Pod and Service UIDs (so the pods' addresses,
MACs and veth names) and the chassis name are pinned; the row UUIDs,
timestamps, socket paths, the Lease's holder, the node's namespace names
and each pod's namespace identity are not, so a new recording of the same
commit differs in those only. Every daemon and namespace it started
is stopped and removed, also on failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from tests.harness import collection, contract  # first: it makes ansible_collections.ovn4nfv.k8s importable
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import marks
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from tests.harness.cni_runtime import call, install_plugin, runtime_args
from tests.harness.dataplane import Node
from tests.harness.kube_api_standin import NODE_AGENT, KubeAPIStandIn
from tests.harness.playbook import run_playbook
from tests.harness.watcher_env import Cluster

TIMEOUT = 60
# the network configuration the runtime passes (the cni role's conflist holds it)
CNI_CONFIG = {"cniVersion": "1.0.0", "name": "ovn", "type": "ovn4nfv"}
# what the recording says the configuration names (the cni role's default), not the run's own socket
DEFAULT_SOCKET = "/run/ovn4nfv/agent.sock"


def extract(commit, where):
    """The collection of ``commit`` (git archive), in ``where``; returns its root."""
    root = os.path.join(where, "release")
    os.makedirs(root)
    archive = subprocess.run(["git", "-C", collection.ROOT, "archive", "--format=tar", commit],
                             stdout=subprocess.PIPE, check=True).stdout
    subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
    return root


def modules(tree, box):
    """The release's modules make the node's chassis settings, the
    topology, the node's gateway and the networks."""
    tasks = [
        {"name": "chassis", "ovn4nfv.k8s.ovn_chassis": {"db": box.ovs_db, "config": {
            "system_id": contract.NODE, "ovn_remote": box.sb_db, "encap_type": ["geneve"],
            "encap_ip": "127.0.0.1", "bridge_datapath_type": "netdev"}}},
        {"name": "topology", "ovn4nfv.k8s.cluster_topology": {"db": box.nb_db,
                                                              "config": {"join_subnet": contract.JOIN_SUBNET}}},
        {"name": "gateway", "ovn4nfv.k8s.node_gateway": {"db": box.nb_db, "config": [contract.GATEWAY]}},
        {"name": "networks", "ovn4nfv.k8s.virtual_network": {"db": box.nb_db, "config": [
            dict(network, backend="ovn") for network in contract.NETWORKS]}},
    ]
    results, proc = run_playbook(tree, tasks, diff=False)
    failed = [name for name, result in results.items() if result.get("failed")]
    if failed or proc.returncode != 0:
        raise RuntimeError("the release's modules failed (%s):\n%s" % (failed, proc.stdout[-5000:]))


class Agent:
    """The release's node agent, as a process, and its CNI plugin."""

    def __init__(self, tmp, tree, node, api):
        self.tmp, self.node, self.api = tmp, node, api
        self.socket = os.path.join(tmp, "agent.sock")
        config = os.path.join(tmp, "agent.json")
        with open(config, "w") as handle:
            json.dump({"socket": self.socket, "ovs_db": node.box.ovs_db,
                       "kubeconfig": api.kubeconfig(os.path.join(tmp, "agent-kubeconfig"), NODE_AGENT),
                       "node_netns": "/var/run/netns/" + node.ns, "node_name": contract.NODE,
                       "annotation_seconds": 30, "install_seconds": 30}, handle)
        self.plugin = install_plugin(tmp, tree)
        self.log = open(os.path.join(tmp, "agent.log"), "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.node_agent",
             "--config", config], env=dict(os.environ, PYTHONPATH=tree), stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the release's node agent did not start:\n" + self.log_text())
            time.sleep(0.05)

    def add(self, namespace, name, uid):
        """CNI ADD of the pod's sandbox, as the runtime calls it; returns
        the request (its configuration, with the cni role's socket, and its
        CNI_* arguments) and the plugin's result."""
        netns = "o4n-%s-%s" % (self.node.tag, name)
        self.node._add_ns(netns)
        request = {"config": CNI_CONFIG, "netns": "/var/run/netns/" + netns, "ifname": "eth0",
                   "container_id": "ctr-%s-%s" % (namespace, name),
                   "args": runtime_args(namespace, name, "ctr-%s-%s" % (namespace, name), uid)}
        code, result, err = call(self.plugin, "ADD", dict(CNI_CONFIG, server_socket=self.socket),
                                 netns=request["netns"], ifname=request["ifname"],
                                 container_id=request["container_id"], args=request["args"], node=self.node.ns,
                                 extra_env={"CNI_PATH": self.tmp + ":/usr/lib/cni"})
        if code != 0:
            raise RuntimeError("ADD %s/%s failed: %s %s\n%s" % (namespace, name, result, err, self.log_text()))
        return {"request": dict(request, config=dict(CNI_CONFIG, server_socket=DEFAULT_SOCKET)), "result": result}

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as handle:
            return handle.read()[-6000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        return self.proc.returncode


def make_cluster(api, watcher, agent, box):
    """The pods, the Service and the policy, served by the release's
    watcher and set up on the node by its agent; the kubelet's part (the
    pod's status) as the stand-in's tests play it. Returns each pod's
    ADD, ``{namespace/name: {"request", "result"}}``."""
    added = {}
    api.create_node(contract.NODE, [contract.NODE_ADDRESS])
    api.create_namespace("nf", {"team": "nf"})
    # one at a time, so that each takes the same addresses at every recording
    for namespace, name, uid, labels, ports, requests in contract.PODS:
        annotations = dict((key, json.dumps(value)) for key, value in requests.items())
        api.create_pod(namespace, name, annotations, node=contract.NODE, labels=labels, ports=ports, uid=uid)
        watcher.annotated(namespace, name, TIMEOUT)
        added["%s/%s" % (namespace, name)] = agent.add(namespace, name, uid)
        address = added["%s/%s" % (namespace, name)]["result"]["ips"][0]["address"].split("/")[0]
        api.set_ready(namespace, name)
        api.patch_status(namespace, name, {"status": {"podIP": address, "podIPs": [{"ip": address}]}})
    namespace, name, uid, spec, annotations = contract.SERVICE
    api.create_service(namespace, name, spec, annotations, uid=uid)
    namespace, name, spec, annotations = contract.POLICY
    api.create_policy(namespace, name, spec, annotations)
    # what the watcher does for them, read from outside, woken by the NB's
    # updates: the balancer has both web pods behind its VIP, the policy's
    # group both, its peers' set the clients' addresses

    def served(idl):
        balanced = any(len([e for e in backends.split(",") if e]) == 2
                       for row in idl.tables["Load_Balancer"].rows.values() for backends in row.vips.values())
        grouped = any(len(row.ports) == 2 and row.external_ids.get(marks.K_POLICY)
                      for row in idl.tables["Port_Group"].rows.values())
        peers = any(row.addresses and row.external_ids.get(marks.K_POLICY)
                    for row in idl.tables["Address_Set"].rows.values())
        return balanced and grouped and peers
    with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, ("Load_Balancer", "Port_Group", "Address_Set",
                                                     "Logical_Switch_Port")) as db:
        if not db.wait_for(served, TIMEOUT):
            raise RuntimeError("the Service and the policy were not served:\n" + watcher.log_text())
    box.nbctl("--wait=hv", "--timeout=%d" % TIMEOUT, "sync")
    return added


def save(box, api, added, out, commit):
    """The three databases (one snapshot each), the API's objects, the
    pods' ADDs, and what they were made with."""
    os.makedirs(out, exist_ok=True)
    for name, remote, schema in ((contract.NB_FILE, box.nb_db, "OVN_Northbound"),
                                 (contract.SB_FILE, box.sb_db, "OVN_Southbound"),
                                 (contract.OVS_FILE, box.ovs_db, "Open_vSwitch")):
        with open(os.path.join(out, name), "w") as handle:
            subprocess.run(["ovsdb-client", "backup", remote, schema], stdout=handle, check=True, timeout=60)
    for name, value in ((contract.API_FILE, api.objects()), (contract.CNI_FILE, added)):
        with open(os.path.join(out, name), "w") as handle:
            json.dump(value, handle, indent=1, sort_keys=True)
            handle.write("\n")

    def first_line(*argv):
        return subprocess.run(argv, stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.splitlines()[0]
    meta = {"commit": commit, "ovs": first_line("ovsdb-server", "--version"), "ovn": first_line("ovn-northd", "--version"),
            "schemas": dict((name, first_line("ovsdb-tool", "db-version", os.path.join(out, name)))
                            for name in (contract.NB_FILE, contract.SB_FILE, contract.OVS_FILE)),
            "node": contract.NODE}
    with open(os.path.join(out, contract.META_FILE), "w") as handle:
        json.dump(meta, handle, indent=1, sort_keys=True)
        handle.write("\n")


def record(commit, out):
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-contract-")
    node = api = watcher = agent = None
    tree = os.path.join(tmp, "collections")
    try:
        release = extract(commit, tmp)
        collection.build(tree, target=release)
        node = Node(chassis=contract.NODE)
        box = node.box
        modules(tree, box)
        node.start_controller()
        box.run("ovs-vsctl", "--db=" + box.ovs_db, "--timeout=30", "wait-until", "bridge", "br-int")
        rbac = tuple(os.path.join(release, "roles", role, "files", "rbac.yaml") for role in ("watcher", "cni"))
        api = KubeAPIStandIn(rbac=rbac)
        watcher = Cluster(tmp, tree, api=api, box=box, sb=True, plan=False)
        agent = Agent(tmp, tree, node, api)
        added = make_cluster(api, watcher, agent, box)
        code = watcher.terminate()
        if code != 0:
            raise RuntimeError("the release's watcher exited %r:\n%s" % (code, watcher.log_text()))
        if agent.stop() != 0:
            raise RuntimeError("the release's node agent did not stop cleanly:\n" + agent.log_text())
        if api.denied:
            raise RuntimeError("the release asked for what its RBAC manifests do not grant: %s" % api.denied)
        save(box, api, added, out, commit)
    finally:
        if agent is not None:
            agent.stop()
        if watcher is not None:
            watcher.stop()
        if api is not None:
            api.stop()
        if node is not None:
            node.stop()
        collection.remove(tree)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.contract.record", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--commit", default=contract.PREVIOUS_RELEASE, help="the release to record")
    parser.add_argument("--out", help="where to save it (default: tests/data/contract/<short commit>)")
    args = parser.parse_args(argv)
    commit = subprocess.run(["git", "-C", collection.ROOT, "rev-parse", args.commit + "^{commit}"],
                            stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    out = args.out or contract.directory(commit)
    record(commit, out)
    for name in sorted(os.listdir(out)):
        print("%8d  %s" % (os.path.getsize(os.path.join(out, name)), os.path.join(out, name)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
