"""The watcher's environment for tests and benchmarks: an NB with
ovn-northd and virtual networks, the API stand-in, and the watcher daemon
running as a process against both."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from tests.harness.kube_api_standin import WATCHER, KubeAPIStandIn
from tests.harness.sandbox import Sandbox
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute

NETWORKS = [{"name": "net1", "subnet": "172.16.1.0/24", "exclude_ips": ["172.16.1.2..172.16.1.9"]},
            {"name": "net2", "subnet": "172.16.2.0/24", "provider": "ovnnet.default.ovn"},
            {"name": "macvlan-net", "subnet": "172.16.30.0/24", "provider": "macvlan.default"},
            {"name": "default-net", "subnet": "10.240.0.0/16"},
            # small enough to fill: hosts .1-.6, the gateway .1, so 5 addresses
            {"name": "tiny", "subnet": "172.16.9.0/29"}]


def ovn_network(*entries, **extra):
    """A pod's annotations asking for ``entries`` in the seed format, with
    ``extra`` annotations beside."""
    out = {ann.OVN_NETWORK: json.dumps(list(entries))}
    out.update(extra)
    return out


class Cluster:
    """NB + northd, the API stand-in, and the watcher process."""

    def __init__(self, tmp, collections, networks=None, workers=2, api=None, box=None, sb=False, plan=True,
                 **settings):
        """A watcher against ``api`` and ``box``'s NB when given (they stay
        the caller's to stop), else against its own; with ``sb``, it reads
        the chassis from the box's SB too. ``plan``: make the topology and
        ``networks`` in the NB first, with this checkout's core (False: the
        NB holds what it needs already, made by the caller, or by another
        release of the product). ``collections``: the tree the watcher is
        run from (another release's, for one)."""
        self.collections = collections
        self.owned = (api is None, box is None)
        self.box = box if box is not None else Sandbox(ovs=False)
        self.api = api
        self.log = None
        self.proc = None
        try:
            if self.api is None:
                self.api = KubeAPIStandIn()
            if plan:
                with ovsdb.Database(self.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
                    execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
                    execute(db, lambda v: vn.plan_networks(
                        v, [(n["name"], vn.check_network(n, n["name"])) for n in networks or NETWORKS], "merged",
                        "ovn"), write=True)
            self.config = os.path.join(tmp, "watcher.json")
            with open(self.config, "w") as handle:
                json.dump(dict({"kubeconfig": self.api.kubeconfig(os.path.join(tmp, "watcher-kubeconfig"), WATCHER),
                                "nb_db": self.box.nb_db, "default_network": "default-net", "workers": workers,
                                "watch_seconds": 2, "address_seconds": 10, "max_backoff_seconds": 1,
                                # the election at test durations: a killed leader's Lease lapses in 4 s; a
                                # renew deadline of 3 s, as a loaded CI machine (2 cores, 2 pytest workers)
                                # missed 1.5 s and a lone watcher then stopped serving for good
                                "lease_seconds": 4, "renew_seconds": 3, "retry_seconds": 0.25},
                               **dict({"sb_db": self.box.sb_db} if sb else {}, **settings)), handle)
            self.log = open(os.path.join(tmp, "watcher.log"), "a+")     # O_APPEND: a restart writes after the last
            self.start()
        except Exception:
            self.stop()
            raise

    def start(self):
        # The watcher says READY=1 on this socket (as to systemd) once it
        # serves: SIGTERM before that would find no handler yet.
        self.ready = False
        if getattr(self, "notify", None) is not None:
            self.notify.close()         # a restart's: the old process's socket
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        name = "ovn4nfv-test-notify-" + uuid.uuid4().hex
        self.notify.bind("\0" + name)
        env = dict(os.environ, PYTHONPATH=self.collections, NOTIFY_SOCKET="@" + name)
        self.started = time.monotonic()     # when the watcher's process was started
        self.log.flush()
        self.log_start = os.path.getsize(self.log.name)     # where this process's lines begin
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.watcher",
             "--config", self.config], env=env, stdout=self.log, stderr=self.log)

    def wait_ready(self, timeout=30):
        """Whether the watcher said it serves within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.ready and self.proc.poll() is None and time.monotonic() < deadline:
            self.notify.settimeout(min(1.0, max(0.01, deadline - time.monotonic())))
            try:
                self.ready = self.notify.recv(64) == b"READY=1"
            except socket.timeout:
                continue
        return self.ready

    def terminate(self, timeout=30):
        """SIGTERM once the watcher serves; return the exit code (None if it
        did not stop in time)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.wait_ready(timeout)
        self.notify.close()
        if self.proc.poll() is not None:
            return self.proc.returncode
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

    def wait_ports_gone(self, names, timeout=30):
        """Block until none of the switch ports ``names`` exists, woken by
        the NB's update stream."""
        with ovsdb.Database(self.box.nb_db, ovsdb.NB_SCHEMA, ("Logical_Switch_Port",)) as db:
            gone = db.wait_for(lambda idl: not any(
                r.name in names for r in idl.tables["Logical_Switch_Port"].rows.values()), timeout)
        assert gone, "ports %s still exist; watcher log:\n%s" % (names, self.log_text())

    def port_log(self):
        """A :class:`PortLog` of this NB, to be closed by the caller."""
        return PortLog(self.box.nb_db)

    def wait_log(self, text, timeout, count=1):
        """Whether ``text`` appears (``count`` times) in the watcher's log
        within ``timeout`` seconds (the log is the watcher's own record of
        the event)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log_text(whole=True).count(text) >= count:
                return True
            time.sleep(0.1)
        return False

    def log_text(self, whole=False, this_process=False):
        """The watcher's log: its last 6000 characters, for a message;
        ``this_process``: what the process running now wrote."""
        # read through a handle of its own: the watcher writes through the
        # same open file as self.log, so seeking that one would move where
        # the watcher writes next, over lines already written
        self.log.flush()
        with open(self.log.name) as handle:
            handle.seek(self.log_start if this_process else 0)
            text = handle.read()
        return text if whole else text[-6000:]

    def stop(self):
        """Stop the watcher, the stand-in and the sandbox (also what a
        constructor that failed half-way had started)."""
        code = self.terminate()
        if self.api is not None and self.owned[0]:
            self.api.stop()
        if self.owned[1]:
            self.box.stop()
        if self.log is not None:
            self.log.close()
        return code


class PortLog:
    """Every create and delete of a product pod port, as the NB's update
    stream tells a client of its own: ``[(event, port name, pod uid, when)]``.
    How a test sees from outside whether a port came back."""

    def __init__(self, remote):
        import threading
        self.events = []
        self.live = {}          # port name: pod uid, as this log has seen them
        self.lock = threading.Lock()
        self.db = ovsdb.Database(remote, ovsdb.NB_SCHEMA, ("Logical_Switch_Port",))
        self.db.add_listener(self._notify)

    def _notify(self, event, row):
        ids = getattr(row, "external_ids", None) or {}
        if ids.get("ovn4nfv-role") != "pod-port" or event not in ("create", "delete"):
            return
        uid = ids.get("ovn4nfv-pod-uid")
        with self.lock:
            if event == "create" and self.live.get(row.name) == uid:
                # not a new port: the server restarted, and the IDL (which
                # drops its rows without deletes) loaded the table again
                return
            if event == "create":
                self.live[row.name] = uid
            else:
                self.live.pop(row.name, None)
            self.events.append((event, row.name, uid, time.monotonic()))

    def of(self, uid):
        with self.lock:
            return [e for e, _n, u, _t in self.events if u == uid]

    def wait_for(self, predicate, timeout):
        """Block, woken by the NB's updates, until ``predicate(self)``."""
        return self.db.wait_for(lambda _idl: predicate(self), timeout)

    def close(self):
        self.db.close()
