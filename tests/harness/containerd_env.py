"""A real container runtime in front of the CNI plugin: a private
``containerd`` (Debian's, its CRI plugin built in) started inside the CNI
test node's network namespace (:class:`tests.harness.cni_env.Env`: real
OVS and OVN, the API stand-in, the node agent), so that its CRI calls the
product's plugin as a kubelet makes it call it: ``RunPodSandbox`` runs
libcni's ADD, ``StopPodSandbox`` and ``RemovePodSandbox`` its DEL.

Everything of it lives in one temporary directory ``D``: its root, state
and sockets, the CRI's CNI configuration (``D/net.d``: the network
configuration :meth:`Env.cni` passes, as a ``.conf``) and plugin directory
(``D/bin``: the ovn4nfv plugin as ``cni_runtime.install_plugin`` writes
it, and Debian's ``loopback``, which the CRI runs for ``lo``). With
``record``, ``D/bin/ovn4nfv`` is a wrapper that writes down the
environment and stdin the runtime passed, then becomes the plugin
(``exec``), so that the runtime's signals and its wait reach the plugin.

containerd is entered into the node's network namespace alone (not a
mount namespace of its own), so the network namespaces it mounts under
``D/state`` are seen from outside, as on a node. Its libcni keeps results
where libcni does by default, ``/var/lib/cni/results/<network>-<sandbox
id>-<ifname>`` (containerd 1.6's CRI sets no cache directory):
:meth:`Containerd.cached` reads that real cache. Sandbox IDs are unique,
so parallel runs never share an entry.

:meth:`Containerd.stop` leaves nothing: every sandbox stopped and removed,
containerd and every shim whose command line names ``D`` killed, the
namespaces mounted under ``D`` unmounted, ``D`` and the sandboxes' cache
entries removed; also when a test or the start failed.
"""

import base64
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import grpc

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from tests.harness import cri
from tests.harness.cni_runtime import call, install_plugin
from tests.harness.sandbox import alive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SANDBOX_IMAGE = "localhost/ovn4nfv-sandbox:1"
CACHE = "/var/lib/cni/results"
IFNAME = "eth0"                     # the CRI's CNI_IFNAME
CONFIG = """version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[debug]
  address = "{d}/debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{image}"
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/bin"
    conf_dir = "{d}/net.d"
"""
# per call, in a calls directory: <time>-<pid>.env and .stdin; then what follows
RECORDING = """#!/bin/sh
at={calls}/$(date +%s%N)-$$
env > "$at.env"
cat > "$at.stdin"
{then}
"""


def _archive(directory):
    """The sandbox image's archive, in ``directory``, as the
    container_runtime role makes it: Debian's catatonit, waiting."""
    path = os.path.join(directory, "sandbox-image.tar")
    subprocess.run(["python3", os.path.join(ROOT, "roles/container_runtime/files/sandbox_image.py"), path,
                    SANDBOX_IMAGE, "/usr/bin/catatonit", "-P"], check=True, timeout=60)
    return path


def _recording(path, calls, then):
    """A program at ``path`` that writes down in ``calls`` what it is
    passed (environment, stdin), then runs the shell line ``then``."""
    with open(path, "w") as handle:
        handle.write(RECORDING.format(calls=calls, then=then))
    os.chmod(path, 0o755)
    return path


def recorder(directory, plugin, name="ovn4nfv", calls=None):
    """A wrapper in ``directory`` that writes down what it is passed (in
    ``calls``, by default ``directory``) and becomes ``plugin`` (``exec``,
    so that a caller's signals and its wait reach the plugin). Returns (its
    path, a function that reads the calls made so far, as
    :meth:`Containerd.calls`)."""
    calls = calls or directory
    return (_recording(os.path.join(directory, name), calls, 'exec %s < "$at.stdin"' % plugin),
            lambda: recorded(calls))


def catcher(directory, name="ovn4nfv"):
    """A program in a plugin's place that writes down what it was passed
    (environment, stdin) in ``directory`` and answers ``{}``: what a
    caller passes, without a plugin run. Returns (its path, a function
    that reads the calls made so far, as :meth:`Containerd.calls`)."""
    return _recording(os.path.join(directory, name), directory, "echo '{}'"), lambda: recorded(directory)


def recorded(directory):
    """What a recorder or a catcher wrote down, in order: [{"env", "stdin"}]."""
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "*.env"))):
        with open(path) as handle:
            env = dict(line.split("=", 1) for line in handle.read().splitlines() if "=" in line)
        try:
            with open(path[:-4] + ".stdin") as handle:
                stdin = json.loads(handle.read() or "null")
        except (FileNotFoundError, ValueError):
            stdin = None                # a call still being written down
        out.append({"env": env, "stdin": stdin})
    return out


def stand_in_config(env, directory):
    """The network configuration the stand-in passes (:meth:`Env.cni`), as
    a plugin reads it on stdin."""
    path, calls = catcher(directory, "catch")
    code, _out, err = env.cni("VERSION", "catch", "", "catch", plugin=path)
    assert code == 0, err
    config = calls()[0]["stdin"]
    for leftover in glob.glob(os.path.join(directory, "*.env")) + glob.glob(os.path.join(directory, "*.stdin")):
        os.unlink(leftover)
    os.unlink(path)
    return config


class Containerd:
    """containerd in ``env``'s node namespace, its CRI calling the ovn4nfv
    plugin that ``env``'s agent serves; ``network`` overrides fields of
    the network configuration."""

    def __init__(self, env, record=False, network=None):
        self.env = env
        self.dir = tempfile.mkdtemp(prefix="o4n-ctrd-")
        self.process = self.runtime = self.log = None
        self.sandboxes = set()          # every sandbox made, for the cleanup
        self.bin_dir, self.calls_dir = os.path.join(self.dir, "bin"), os.path.join(self.dir, "calls")
        try:
            self._prepare(record, network)
            self.start()
            subprocess.run(["ctr", "--address", self.socket, "-n", "k8s.io", "images", "import", "--snapshotter",
                            "native", _archive(self.dir)], check=True, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        except Exception:
            self.stop()
            raise

    @property
    def socket(self):
        return os.path.join(self.dir, "containerd.sock")

    def _prepare(self, record, network):
        conf_dir = os.path.join(self.dir, "net.d")
        for path in (self.bin_dir, conf_dir, self.calls_dir):
            os.makedirs(path)
        self.plugin = install_plugin(self.bin_dir, self.env.collections, socket_path=self.env.socket)
        if record:
            real = os.path.join(self.bin_dir, "ovn4nfv-real")
            os.rename(self.plugin, real)
            recorder(self.bin_dir, real, calls=self.calls_dir)
        os.symlink("/usr/lib/cni/loopback", os.path.join(self.bin_dir, "loopback"))
        self.network = dict(stand_in_config(self.env, self.calls_dir), **(network or {}))
        with open(os.path.join(conf_dir, "10-ovn4nfv.conf"), "w") as handle:
            json.dump(self.network, handle)
        with open(os.path.join(self.dir, "config.toml"), "w") as handle:
            handle.write(CONFIG.format(d=self.dir, image=SANDBOX_IMAGE))

    # -- the daemon --------------------------------------------------------
    def start(self, timeout=30):
        """containerd in the node's network namespace; returns once its CRI
        answers (bounded)."""
        self.log = open(os.path.join(self.dir, "containerd.log"), "a")
        self.process = subprocess.Popen(
            ["nsenter", "--net=/var/run/netns/" + self.env.node.ns, "containerd", "--config",
             os.path.join(self.dir, "config.toml")], stdout=self.log, stderr=self.log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            probe = cri.Runtime(self.socket, timeout=2)
            try:
                probe.version()
                break
            except grpc.RpcError as exc:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("containerd did not answer (%s): %s" % (exc.code(), self.log_text()))
                time.sleep(0.02)
            finally:
                probe.close()
        self.runtime = cri.Runtime(self.socket, timeout=120)

    def kill(self, timeout=20):
        """containerd alone stops (SIGTERM); its shims and sandboxes run on."""
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.log is not None:
            self.log.close()
            self.log = None

    def restart(self):
        self.kill()
        self.start()

    def log_text(self):
        with open(os.path.join(self.dir, "containerd.log"), errors="replace") as handle:
            return handle.read()[-5000:]

    # -- pods, as the kubelet runs them ------------------------------------------
    def create_pod(self, name, *requests, announce=True):
        """The pod on the API stand-in asking for ``requests``; with
        ``announce``, its ports in OVN and its interface list written as the
        watcher does (:meth:`Env.watcher_ran`). The pod object."""
        obj = self.env.api.create_pod("default", name, {"ovnNetwork": json.dumps(list(requests))})
        if announce:
            self.announce(obj, *requests)
        return obj

    def announce(self, obj, *requests):
        _netns, patch = self.env.watcher_ran(obj, *requests)
        self.env.api.set_annotations("default", obj["metadata"]["name"], patch)

    def delete_pod(self, obj):
        """The pod deleted from the API, and its ports released in OVN as
        the watcher releases them."""
        self.env.api.delete_pod("default", obj["metadata"]["name"])
        with ovsdb.Database(self.env.node.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
            execute(db, lambda view: pod_ports.plan_delete(view, obj["metadata"]["uid"]), write=True)

    def run_sandbox(self, obj, attempt=0, uid=None, timeout=None):
        """RunPodSandbox with the pod's metadata and the kubelet's labels
        (``uid``: another UID than the object's); the sandbox's id."""
        meta = obj["metadata"]
        uid = uid or meta["uid"]
        config = cri.sandbox_config(meta["name"], meta["namespace"], uid, attempt=attempt)
        runtime = cri.Runtime(self.socket, timeout=timeout) if timeout else self.runtime
        try:
            sandbox = runtime.run_pod_sandbox(config)
        finally:
            if timeout:
                runtime.close()
        self.sandboxes.add(sandbox)
        return sandbox

    def run_pod(self, name, *requests):
        """A pod made as a cluster makes it: (pod object, sandbox id)."""
        obj = self.create_pod(name, *requests)
        return obj, self.run_sandbox(obj)

    def of_pod(self, uid):
        """The pod's sandboxes, as the kubelet lists them: {id: state}."""
        return dict((s["id"], s.get("state", cri.SANDBOX_READY))
                    for s in self.runtime.list_pod_sandbox(labels={cri.POD_UID: uid}))

    def status(self, sandbox):
        """PodSandboxStatus: (status, info: pid, cniResult, runtimeSpec...)."""
        answer = self.runtime.pod_sandbox_status(sandbox)
        return answer["status"], json.loads(answer.get("info", {}).get("info", "{}"))

    def netns(self, sandbox):
        """The sandbox's network namespace, the path containerd passes as CNI_NETNS."""
        return cri.netns_path(self.runtime.pod_sandbox_status(sandbox))

    def stop_sandbox(self, sandbox):
        self.runtime.stop_pod_sandbox(sandbox)

    def remove_sandbox(self, sandbox):
        self.runtime.remove_pod_sandbox(sandbox)

    # -- what the runtime keeps and passed ---------------------------------------
    def cached(self, sandbox):
        """libcni's cache entries of ``sandbox`` for the product's network:
        {ifname: entry (kind, containerId, config in base64, ifName,
        networkName, cniArgs, capabilityArgs, result)}."""
        out = {}
        for path in glob.glob(os.path.join(CACHE, "%s-%s-*" % (self.network["name"], sandbox))):
            with open(path) as handle:
                entry = json.load(handle)
            out[entry["ifName"]] = entry
        return out

    def calls(self, sandbox=None, command=None):
        """What the runtime passed the plugin (with ``record``), in order,
        for ``sandbox`` and ``command`` when given: [{"env", "stdin"}]."""
        return [c for c in recorded(self.calls_dir) if sandbox in (None, c["env"].get("CNI_CONTAINERID"))
                and command in (None, c["env"].get("CNI_COMMAND"))]

    def libcni_check(self, sandbox):
        """CHECK as libcni makes it (``CheckNetworkList``; containerd's CRI
        exposes none): the cached entry's configuration with ``name``,
        ``cniVersion`` and the cached result as ``prevResult``, its
        CNI_ARGS, in the runtime's (the node's) namespace. (code, out, err)."""
        entry = self.cached(sandbox)[IFNAME]
        listed = json.loads(base64.b64decode(entry["config"]))
        config = dict(listed["plugins"][0], name=listed["name"], cniVersion=listed["cniVersion"],
                      prevResult=entry["result"])
        return call(self.plugin, "CHECK", config, netns=self.netns(sandbox), ifname=entry["ifName"],
                    container_id=entry["containerId"], args=";".join("%s=%s" % tuple(a) for a in entry["cniArgs"]),
                    node=self.env.node.ns, extra_env={"CNI_PATH": self.bin_dir})

    # -- the node, seen from outside ---------------------------------------------------
    def mounted(self):
        """The paths mounted under ``D``: the sandboxes' network namespaces."""
        with open("/proc/self/mounts") as handle:
            return [line.split()[1] for line in handle if line.split()[1].startswith(self.dir + "/")]

    def ovs_ports(self, name):
        """The node's OVS interfaces for pod default/``name``: {interface name: external_ids}."""
        rows = self.env.node.box.rows("ovs", "Interface")
        return dict((r["name"], r["external_ids"]) for r in rows
                    if r["external_ids"].get("ovn4nfv-pod") == "default/" + name)

    def nb_wait(self, name, interfaces, up):
        """Wait (bounded, on the databases) until the pod's logical ports
        are up, or bound to no chassis and down."""
        box = self.env.node.box
        for interface in interfaces:
            lsp = "default_%s_%s" % (name, interface)
            if not up:
                box.run("ovn-sbctl", "--db=" + box.sb_db, "--timeout=20", "wait-until", "Port_Binding", lsp,
                        "chassis=[]", timeout=30)
            box.run("ovn-nbctl", "--db=" + box.nb_db, "--timeout=20", "wait-until", "Logical_Switch_Port", lsp,
                    "up=%s" % ("true" if up else "false"), timeout=30)

    def node_veths(self):
        """The node's veths the agent marked: {name: alias (its container's mark)}."""
        out = subprocess.run(["ip", "netns", "exec", self.env.node.ns, "ip", "-j", "link"], check=True,
                             stdout=subprocess.PIPE, universal_newlines=True, timeout=30).stdout
        return dict((link["ifname"], link["ifalias"]) for link in json.loads(out)
                    if link.get("ifalias", "").startswith("ovn4nfv "))

    @staticmethod
    def pod_links(netns):
        """The interfaces in a namespace (by its path): {name: (mac, [address/prefix])}."""
        out = subprocess.run(["nsenter", "--net=" + netns, "ip", "-j", "addr"], check=True, stdout=subprocess.PIPE,
                             universal_newlines=True, timeout=30).stdout
        return dict((link["ifname"], (link.get("address"), ["%s/%s" % (a["local"], a["prefixlen"])
                                                            for a in link.get("addr_info", [])]))
                    for link in json.loads(out))

    # -- cleanup -----------------------------------------------------------
    def _processes(self):
        """containerd and the shims of ``D``: every process whose command line names it."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    with open("/proc/%s/cmdline" % entry, "rb") as handle:
                        argv = handle.read().decode(errors="replace")
                except OSError:
                    continue
                if self.dir in argv and alive(int(entry)):
                    found.append(int(entry))
        return found

    def stop(self):
        """Leave nothing, whatever state things are in; returns what the
        runtime refused on the way (the fixture's finaliser reports it)."""
        errors = []
        if self.runtime is not None and self.process is not None and self.process.poll() is None:
            for sandbox in self.sandboxes:
                try:
                    self.runtime.stop_pod_sandbox(sandbox)
                    self.runtime.remove_pod_sandbox(sandbox)
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.NOT_FOUND:
                        errors.append("%s: %s" % (sandbox, exc.details()))
        self.kill()
        deadline = time.monotonic() + 10
        while self._processes() and time.monotonic() < deadline:
            for pid in self._processes():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        for mount in sorted(self.mounted(), key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], check=False, timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)
        for sandbox in self.sandboxes:
            for path in glob.glob(os.path.join(CACHE, "*-%s-*" % sandbox)):
                os.unlink(path)
        return errors
