"""A churn soak with faults, for tests/functional/test_churn.py (short) and
benchmarks/churn.py (long): one code path, two lengths.

A real node (ovs-vswitchd netdev, ovn-controller, NB/SB with ovn-northd),
the node agent and the watcher as processes, the API stand-in. This module
plays the rest of Kubernetes: it creates, changes and deletes pods at
random on several networks (``tiny`` fills up), changes their labels and
five MultiNetworkPolicies (created, changed, deleted), and, as the kubelet, runs
the CNI plugin for the pods the watcher has served (ADD) and for the pods
that go (DEL, now and then never sent). Between operations it injects
faults: two watcher replicas run, and the leading one is killed with
SIGKILL (restarted as a standby) or paused with SIGSTOP until the other
took over (woken, it must exit 3, and is restarted as systemd would), the
NB ovsdb-server restarted, the API answering 500 and 410, a delete landing
while a pod's work waits for a retry, the node agent killed and restarted.

At the end it waits for convergence and compares, from outside the
product, the NB's pod ports and the node's OVS ports with the live pods'
requests, and the NB's history of port creations with the deletions; and
that no policy's address set holds an address no live pod's port holds
(a gone pod's, which the next pod given it would inherit what it was
allowed). The NB's own history (its database file, read by
tests/harness/nb_history.py) says whether any transaction was committed
under a deposed leader's term, and whether a pod interface ever had two
ports at once.
"""

import json
import os
import random
import re
import signal
import time

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import POLICY_FOR
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from tests.harness import nb_history
from tests.harness.cni_env import Env
from tests.harness.dataplane import ip
from tests.harness.watcher_env import Cluster, PortLog

TINY = {"name": "tiny", "subnet": "172.16.9.0/29"}      # 5 addresses
NETWORKS = ("net1", "net2", "tiny")
FAULTS = ("leader_sigkill", "leader_sigstop", "nb_restart", "api_500", "api_410", "delete_during_retry", "agent_restart")
NAMESPACE = "churn"
APPS = ("a", "b", "c")
POLICIES = 5


class Churn:
    def __init__(self, tmp, collections, seed=11, replicas=2):
        self.rng = random.Random(seed)
        self.env = Env(tmp, collections, sweep_seconds=5)
        self.replicas = []
        self.ports = None
        self.exits = []         # the exit codes of the replicas that ended on their own
        self.exit_logs = []     # the log of a woken leader that did not exit 3
        try:
            box = self.env.node.box
            with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
                execute(db, lambda v: vn.plan_networks(v, [("tiny", vn.check_network(TINY, "tiny"))], "merged", "ovn"),
                        write=True)
            self.ports = PortLog(box.nb_db)
            for index in range(replicas):
                home = os.path.join(tmp, "watcher-%d" % index)
                os.mkdir(home)
                self.replicas.append(Cluster(home, collections, networks=[TINY], workers=4, api=self.env.api,
                                             box=box, resync_seconds=20, address_seconds=5, max_backoff_seconds=2))
        except Exception:
            self.stop()
            raise
        self.api = self.env.api
        self.pods = {}          # name -> {"netns", "container", "added", "uid"}
        self.deleted = {}       # uid -> monotonic time of the API delete
        self.ops = self.faults = self.hot_changes = 0
        self.last_fault = time.monotonic()
        self.serial = 0
        self.policies = set()

    # -- operations ----------------------------------------------------------
    def create(self):
        self.serial += 1
        name = "p%d" % self.serial
        network = self.rng.choice(NETWORKS)
        entries = [{"name": network, "interface": "net0"}]
        if network != "tiny" and self.rng.random() < 0.3:
            entries.append({"name": "net2" if network == "net1" else "net1", "interface": "net1"})
        pod = self.api.create_pod(NAMESPACE, name, {ann.OVN_NETWORK: json.dumps(entries)},
                                  labels={"app": self.rng.choice(APPS)})
        self.pods[name] = {"uid": pod["metadata"]["uid"], "netns": None, "added": False,
                           "container": "ctr-%s" % pod["metadata"]["uid"][:12]}
        return name

    def delete(self, name=None, send_del=True):
        name = name or self.rng.choice(sorted(self.pods))
        pod = self.pods.pop(name)
        if pod["added"] and send_del:
            self.env.cni("DEL", name, pod["netns"], pod["container"], namespace=NAMESPACE)
        if pod["netns"]:
            ip("ip", "netns", "delete", os.path.basename(pod["netns"]), check=False)
            self.env.node.namespaces.remove(os.path.basename(pod["netns"]))
        # taken before the API is told: the watcher may remove the port before delete_pod returns
        self.deleted[pod["uid"]] = time.monotonic()
        self.api.delete_pod(NAMESPACE, name)

    def change(self):
        name = self.rng.choice(sorted(self.pods))
        self.api.set_annotations(NAMESPACE, name, {"churn/touched": str(self.ops)})

    def hot(self):
        """A running pod's request gains a second interface, or loses it
        (issue 36): the watcher and the node agent's follower make the pod
        follow it."""
        def running():
            # tiny's pods stay as they are: a second interface there would only wait for an address
            return sorted(n for n, p in self.pods.items() if p["added"] and json.loads(
                self.api.pod(NAMESPACE, n)["metadata"]["annotations"][ann.OVN_NETWORK])[0]["name"] != "tiny")
        added = running()
        if not added:
            self.kubelet()      # the pods served since its last round start first
            added = running()
        if not added:
            return self.change()
        name = self.rng.choice(added)
        entries = json.loads(self.api.pod(NAMESPACE, name)["metadata"]["annotations"][ann.OVN_NETWORK])
        if len(entries) == 1:
            entries.append({"name": "net2" if entries[0]["name"] == "net1" else "net1", "interface": "net1"})
        else:
            entries = entries[:1]
        self.api.set_annotations(NAMESPACE, name, {ann.OVN_NETWORK: json.dumps(entries)})
        self.hot_changes += 1
        return None

    def label(self):
        name = self.rng.choice(sorted(self.pods))
        self.api.set_labels(NAMESPACE, name, {"app": self.rng.choice(APPS)})

    def policy(self):
        """One of five policies created, changed or deleted."""
        name = "pol%d" % self.rng.randrange(POLICIES)
        if name in self.policies and self.rng.random() < 0.3:
            self.api.delete_policy(NAMESPACE, name)
            self.policies.discard(name)
            return
        peer = self.rng.choice([{"podSelector": {"matchLabels": {"app": self.rng.choice(APPS)}}},
                                {"namespaceSelector": {}}, {"ipBlock": {"cidr": "172.16.0.0/16"}}])
        spec = {"podSelector": {"matchLabels": {"app": self.rng.choice(APPS)}},
                "ingress": [{"from": [peer], "ports": [{"port": self.rng.randint(1, 1000)}]}]}
        if self.rng.random() < 0.3:
            spec["egress"] = [{"to": [peer]}]
        networks = {POLICY_FOR: "ovn4nfv.k8s/" + self.rng.choice(["net1", "net2"])}
        if name in self.policies:
            self.api.update_policy(NAMESPACE, name, spec, networks)
        else:
            self.api.create_policy(NAMESPACE, name, spec, networks)
            self.policies.add(name)

    def kubelet(self):
        """CNI ADD for every pod the watcher has served and no ADD yet."""
        for name, pod in sorted(self.pods.items()):
            if pod["added"]:
                continue
            found = (self.api.pod(NAMESPACE, name) or {}).get("metadata", {}).get("annotations", {})
            if ann.IFACE_LIST not in found:
                continue
            if pod["netns"] is None:
                netns = "o4n-%s-%s" % (self.env.node.tag, name)
                self.env.node._add_ns(netns)
                pod["netns"] = "/var/run/netns/" + netns
            code, _out, _err = self.env.cni("ADD", name, pod["netns"], pod["container"], namespace=NAMESPACE)
            if code == 0:
                pod["added"] = True
            else:           # e.g. the agent is restarting: a kubelet retries the sandbox
                self.env.cni("DEL", name, pod["netns"], pod["container"], namespace=NAMESPACE)

    def step(self):
        roll = self.rng.random()
        if roll < 0.4 or len(self.pods) < 5:
            self.create()
        elif roll < 0.7:
            self.delete(send_del=self.rng.random() > 0.1)       # now and then the DEL never comes
        elif roll < 0.73:
            self.change()
        elif roll < 0.8:
            self.hot()          # a change when no pod runs yet: more of them than of plain changes
        elif roll < 0.9:
            self.label()
        else:
            self.policy()
        self.ops += 1

    # -- faults --------------------------------------------------------------
    def fault(self, kind):
        if kind == "leader_sigkill":
            leader = self.leader()
            leader.proc.kill()
            leader.proc.wait(10)
            self.step()
            self.step()
            leader.start()          # as systemd would: a standby now
        elif kind == "leader_sigstop":
            leader = self.leader()
            before = _identity(leader)
            leader.proc.send_signal(signal.SIGSTOP)
            try:
                deadline = time.monotonic() + 30
                while self._holder() in (before, None) and time.monotonic() < deadline:
                    self.step()         # pods keep coming while it sleeps
                    self.api.wait(lambda api: self._holder() not in (before, None), 0.2)
            finally:
                leader.proc.send_signal(signal.SIGCONT)
            try:
                self.exits.append(leader.proc.wait(30))
            except Exception:  # noqa: it did not end: counted as such, and stopped
                self.exits.append(None)
                leader.proc.kill()
                leader.proc.wait(10)
            if self.exits[-1] != 3:     # what the woken one said, for the verdict's message
                self.exit_logs.append(leader.log_text(this_process=True)[-4000:])
            leader.start()
        elif kind == "nb_restart":
            self.env.node.box.restart_db("ovnnb_db")
        elif kind == "api_500":
            self.api.fail_next(self.rng.randint(5, 20))
        elif kind == "api_410":
            self.api.compact()
        elif kind == "delete_during_retry":
            name = self.create()
            self.api.fail_matching("PATCH", "/pods/" + name, 1000)
            self.api.wait(lambda api: api.targeted_failed > 0 and api.pod(NAMESPACE, name) is not None, 10)
            self.delete(name)
            self.api.fail_matching("PATCH", "/pods/" + name, 0)
        elif kind == "agent_restart":
            self.env.agent.kill()
            self.env.agent.wait(10)
            self.env.start_agent()
        self.faults += 1
        self.last_fault = time.monotonic()

    def run(self, ops, faults):
        every = max(1, ops // max(1, faults))
        kinds = list(FAULTS)
        self.leader()           # as a cluster is before its churn: one replica serves
        due = every
        while self.ops < ops or self.faults < faults:
            # a fault may take operations of its own (a paused leader's wait): the next is due
            # an interval after it, and those still due at the end come before the verdict
            self.step()
            if self.ops % 5 == 0:
                self.kubelet()
            if self.faults < faults and self.ops >= due:
                self.fault(kinds[self.faults % len(kinds)])
                due = self.ops + every
            self.revive()
        return self.converge()

    # -- the verdict, from outside ---------------------------------------------
    def wanted(self):
        """``{(uid, interface)}`` the live pods ask for, less the pods the
        watcher reported as waiting for a full network."""
        out = set()
        waiting = set(e["involvedObject"]["uid"] for e in self.api.events
                      if e["reason"] == "AddressPoolExhausted")
        for name, pod in self.pods.items():
            found = self.api.pod(NAMESPACE, name)["metadata"]["annotations"]
            entries = json.loads(found[ann.OVN_NETWORK])
            if ann.IFACE_LIST not in found and pod["uid"] in waiting:
                continue
            out.update((pod["uid"], e["interface"]) for e in entries)
        return out

    def nb_ports(self):
        return [(r["external_ids"]["ovn4nfv-pod-uid"], r["external_ids"]["ovn4nfv-interface"], r)
                for r in self.env.node.box.rows("nb", "Logical_Switch_Port")
                if r["external_ids"].get("ovn4nfv-role") == "pod-port"]

    def node_ports(self):
        return [(r["external_ids"]["ovn4nfv-pod-uid"], r["external_ids"]["ovn4nfv-interface"])
                for r in self.env.node.box.rows("ovs", "Interface")
                if r["external_ids"].get("ovn4nfv-pod-uid")]

    def _nb_settled(self, deadline):
        """Wait until the NB's pod ports, as ovsdb-client dumps them, are
        what the live pods want; woken by the NB's update stream (the
        PortLog's), each wait bounded, the whole by ``deadline``."""
        while True:
            seen = len(self.ports.events)
            if set((uid, iface) for uid, iface, _r in self.nb_ports()) == self.wanted():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.ports.wait_for(lambda log: len(log.events) != seen, min(2.0, remaining))

    def converge(self, timeout=120):
        deadline = time.monotonic() + timeout
        self.api.fail_next(0)
        for name in sorted(self.pods):          # what stays waiting on tiny is fine; the rest is served
            found = json.loads(self.api.pod(NAMESPACE, name)["metadata"]["annotations"][ann.OVN_NETWORK])
            if found[0]["name"] != "tiny":
                self.api.wait(lambda api, n=name: ann.IFACE_LIST in api.pod(NAMESPACE, n)["metadata"]["annotations"],
                              max(0.1, deadline - time.monotonic()))
        self.stages = {"annotated": time.monotonic() - self.last_fault}
        self._nb_settled(deadline)
        self.stages["nb"] = time.monotonic() - self.last_fault
        # the kubelet's own catch-up (sequential CNI ADDs of the pods served
        # meanwhile) is not the product's convergence: timed apart
        started = time.monotonic()
        self.kubelet()
        self.stages["kubelet_adds"] = time.monotonic() - started
        added = set((p["uid"], e["interface"]) for name, p in self.pods.items() if p["added"]
                    for e in json.loads(self.api.pod(NAMESPACE, name)["metadata"]["annotations"][ann.IFACE_LIST]))
        with ovsdb.Database(self.env.node.box.ovs_db, ovsdb.OVS_SCHEMA, ("Interface",)) as db:
            db.wait_for(lambda idl: set((i.external_ids.get("ovn4nfv-pod-uid"), i.external_ids.get("ovn4nfv-interface"))
                                        for i in idl.tables["Interface"].rows.values()
                                        if i.external_ids.get("ovn4nfv-pod-uid")) == added,
                        max(0.1, deadline - time.monotonic()))
        self.stages["node"] = time.monotonic() - self.last_fault
        converge_s = self.stages["node"] - self.stages["kubelet_adds"]
        return self.verdict(added, converge_s)

    def verdict(self, added, converge_s):
        wanted = self.wanted()
        nb = self.nb_ports()
        have = set((uid, iface) for uid, iface, _r in nb)
        node = set(self.node_ports())
        leaked = len(have - wanted) + len(node - added)
        missing = len(wanted - have) + len(added - node)
        ips = {}
        for _uid, _iface, row in nb:
            for word in _held(row):
                ips.setdefault(word, set()).add(row["name"])
        duplicated = sum(1 for holders in ips.values() if len(holders) > 1)
        resurrections = []
        with self.ports.lock:
            history = list(self.ports.events)
        seen_delete = set()
        for event, name, uid, when in history:
            gone_at = self.deleted.get(uid)
            if gone_at is None or when < gone_at:
                continue        # a live pod's ports come and go with its request (hot changes)
            if event == "delete":
                seen_delete.add(uid)
            elif uid in seen_delete:
                # made again after its pod was deleted and, since, its port removed; a
                # port made in the moment before the watcher heard of the deletion, and
                # removed once it did, is the watch's lag, not a resurrection
                resurrections.append((name, uid, round(when - gone_at, 3)))
        resurrected = len(resurrections)
        uids = set(p["uid"] for p in self.pods.values())
        live = set(word for uid, _iface, row in nb if uid in uids for word in _held(row))
        stale = sorted((r["name"], a) for r in self.env.node.box.rows("nb", "Address_Set")
                       if r["external_ids"].get("ovn4nfv-policy") for a in _set(r["addresses"]) if a not in live)
        groups = [r for r in self.env.node.box.rows("nb", "Port_Group")
                  if r["external_ids"].get("ovn4nfv-policy")]
        return dict(self.history(), **{
            "ops": self.ops, "faults": self.faults, "hot_changes": self.hot_changes, "leaked": leaked,
            "resurrected": resurrected, "duplicated_ips": duplicated, "missing": missing, "converge_s": converge_s,
            "pods": len(self.pods), "stale_policy_addresses": stale, "policies": len(groups),
            "exits": list(self.exits), "resurrections": resurrections})

    # -- the replicas ----------------------------------------------------------
    @property
    def cluster(self):
        """The leading replica (its log, when a test fails), else the first."""
        return self._leading() or self.replicas[0]

    def _holder(self):
        lease = self.api.lease("kube-system", "ovn4nfv-watcher")
        return lease and lease["spec"].get("holderIdentity")

    def _leading(self):
        holder = self._holder()
        return next((r for r in self.replicas if holder and r.proc is not None and r.proc.poll() is None
                     and _identity(r) == holder
                     and "serving as the leader" in r.log_text(whole=True, this_process=True)), None)

    def leader(self, timeout=30):
        """The replica that holds the Lease and serves now, waited for."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self._leading()
            if found is not None:
                return found
            self.api.wait(lambda api: self._leading() is not None, 0.2)
        raise AssertionError("no watcher replica leads:\n" + "\n".join(r.log_text() for r in self.replicas))

    def revive(self):
        """Start again, as systemd would, a replica that ended on its own."""
        for replica in self.replicas:
            if replica.proc is not None and replica.proc.poll() is not None:
                self.exits.append(replica.proc.returncode)
                replica.start()

    def history(self):
        """What the NB's database file says of the watchers' writes."""
        records = nb_history.read(os.path.join(self.env.node.box.dir, "ovnnb_db.db"))
        return {"stale_writes": len(nb_history.stale_writes(records)) + len(nb_history.unattributed(records)),
                "live_twice": len(nb_history.live_twice(records)),
                "takeovers": len(nb_history.takeovers(records))}

    def stop(self):
        for replica in self.replicas:
            replica.stop()
        if self.ports is not None:
            self.ports.close()
        self.env.stop()


def _set(value):
    """A set column as ovsdb-client prints it: one member bare, more as a list."""
    return [value] if isinstance(value, str) else list(value or [])


def _held(row):
    """The IP addresses a switch port row (ovsdb-client's) holds."""
    return [word for text in _set(row.get("dynamic_addresses")) + _set(row["addresses"])
            for word in text.split()[1:] if word != "dynamic"]


def _identity(replica):
    """A replica's identity in the Lease, as its process running now said
    it (a restart is a new process, with a new one; None until it said)."""
    found = re.findall(r"standing by as (\S+) ", replica.log_text(whole=True, this_process=True))
    return found[-1] if found else None


def line(result):
    return ("churn: ops={ops} faults={faults} leaked={leaked} resurrected={resurrected} "
            "duplicated_ips={duplicated_ips} missing={missing} stale_writes={stale_writes} "
            "live_twice={live_twice} takeovers={takeovers} converge_s={converge_s:.1f}").format(**result)
