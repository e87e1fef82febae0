# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher: pod annotations become OVN ports and an interface list.

Run as ``python -m <package>.daemons.watcher --config FILE``. It lists every pod,
then watches for changes from that resourceVersion, keeping the newest
object of each pod in a cache and its key (``namespace/name``) in a work
queue with client-go's semantics (:mod:`..common.workqueue`): one entry per
key, one worker per key at a time, per-key exponential backoff, and a
retry that reads the pod anew from the cache. A deleted pod's UID is
tombstoned, so nothing creates its ports again.

For each key a worker makes OVN hold exactly the ports the cached pod asks
for: it removes the ports of any other pod of that name (gone, or an
earlier one), checks the request (:mod:`..cluster.annotations`, against
:mod:`..cluster.request_schema`), deletes the ports of a running pod's
interfaces it no longer asks for or asks for anew, or refuses the change
(:mod:`..cluster.pod_changes`), creates the ports (:mod:`..cluster.pod_ports`)
and, once OVN has assigned the dynamic addresses, writes ``ovnIfaceList``
and ``k8s.plugin.opnfv.org/ovnInterfaces`` with a merge patch. Waiting for
OVN holds no worker: the NB's update stream queues the key again. A full
network is an ``AddressPoolExhausted`` Event, with no port made, and the
pod is served when an address frees. Bad input creates nothing and is an
Event whose reason says what was wrong, with the same line in the log.

It re-lists (resync) at start, whenever the watch has expired (410 Gone),
and every ``resync_seconds``: every pod that should have ports gets them,
and ports the product owns whose pod is gone are removed. The API server
going away is retried with backoff; an NB restart is a reconnect of the
IDL; SIGTERM stops it cleanly. It uses the official Kubernetes Python
client, the one the Kubernetes project maintains.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
import threading
import time

from ..cluster import (
    annotations, chains, multi_policies, pod_addresses, pod_changes, pod_ports, port_qos, remote_mirrors, services, vms)
from ..cluster.topology import TABLES
from ..common.errors import Ovn4nfvError, ValidationError
from ..common.marks import K_BASELINE, K_NAMESPACE, K_POD, WATCHER
from ..common.workqueue import Backoff, WorkQueue, serve
from ..ovsdb import connection as ovsdb
from ..ovsdb.batching import Committer
from ..ovsdb.view import View, cell
from ..ovsdb import fence as nb_fence
from . import (chain_hops, grant_watch, kube, leadership, multus, physnet_watch, policy_watch, service_watch,
               settings as daemon, vm_watch)
from .watcher_settings import Config

try:
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException
    HAS_KUBERNETES = True
except ImportError:  # pragma: no cover - the daemon needs it; modules do not
    HAS_KUBERNETES = False

    class ApiException(Exception):
        """Stands for the client's exception where the client is missing."""
        status = None

LOG = logging.getLogger("ovn4nfv.watcher")
# Event reasons, besides pod_ports' (InvalidNetworkRequest, UnknownNetwork,
# AddressConflict, AddressPoolExhausted) and pod_changes' (InterfaceChangeRefused)
IGNORED = "IgnoredAnnotation"


def key_of(namespace, name):
    """A pod's key in the queue and the cache: ``namespace/name``."""
    return "%s/%s" % (namespace, name)


def pod_key(pod):
    return key_of(pod.metadata.namespace, pod.metadata.name)


class Watcher:
    """The daemon. :meth:`run` blocks until :meth:`stop`.

    Events and lists update :attr:`cache` (the newest object of each pod,
    by key) and queue the key; workers take keys from one
    :class:`~..common.workqueue.WorkQueue` and make OVN match what the cache
    says of that key at that moment. A deleted pod's UID is remembered
    (a tombstone) so that no stale word of it, from a retry, an old list
    or a late event, creates its ports again.
    """

    def __init__(self, config, api_client=None):
        if not HAS_KUBERNETES:
            raise Ovn4nfvError("the watcher needs the kubernetes Python client")
        self.config = config
        self.stopping = threading.Event()
        if api_client is None:
            # the workers, and the watches, Services' and chains' threads
            api_client = daemon.kubernetes_api_client(config.kubeconfig, config.workers + 8)
        self.core = k8s_client.CoreV1Api(api_client)
        self.writer = kube.PodWriter(self.core, WATCHER)
        self.custom = k8s_client.CustomObjectsApi(api_client)
        self.nb = None
        self.committer = None       # the pods' NB writes, several pods a transaction
        self.addresses = None
        self.multus = None
        self.queue = WorkQueue(base_delay=0.2, max_delay=config.max_backoff_seconds, name="pods")
        self.lock = threading.Lock()
        self.cache = {}             # key -> the newest pod object seen
        self.tombstones = {}        # uid -> when its pod was seen deleted (monotonic)
        self.reported = kube.Said()     # key -> {reason: (uid, message)} posted as Events
        self.exhausted = set()      # keys waiting for an address to free
        # key -> (uid, annotations) of a pod served, as it reads once served:
        # its next event (our own patch, a status) with the same is no work
        self.served_as = {}
        # key -> (uid, {ovnIfaceList: the list the watcher last wrote}): what a pod was told, which the
        # cache may not have yet (our patch's event is late) when a change is judged against it
        self.told = {}
        self.pending = {}           # key -> since when it waits for OVN's dynamic address
        # set once every pod has been listed into the cache: what selects
        # pods (policies) must not judge from a cache still empty
        self.listed = threading.Event()
        self.pod_watch = kube.ListWatch(
            "pods", "V1Pod", self.resync, self.core.list_pod_for_all_namespaces, self.observe, self.stopping,
            config.resync_seconds, config.watch_seconds, config.max_backoff_seconds)
        self.services = service_watch.Services(self, api_client)
        self.chains = chain_hops.Chains(self)
        self.policies = policy_watch.Policies(self) if config.policies else None
        self.vms = vm_watch.Vms(self, self.custom)
        self.physnets = physnet_watch.Physnets(self)
        self.grants = grant_watch.Grants(self)
        # a standby keeps everything warm but serves nothing until it leads
        self.leadership = leadership.Leadership(self)
        self.writer.acting = self.leadership.check_acting
        self.leadership.hold(getattr(part, "queue", None) for part in (
            self, self.services, self.chains, self.policies, self.physnets, self.grants))
        self.api_client = api_client

    # -- lifecycle ---------------------------------------------------------
    def stop(self, *_args):
        self.stopping.set()
        self._stop_parts()
        self.pod_watch.stop()
        # the Lease goes as soon as the keys in hand are done, not once every watch has ended
        self.leadership.release_after(getattr(self, "workers", []))

    def _stop_parts(self):
        self.queue.shutdown()
        for part in (self.services, self.chains, self.policies, self.vms, self.physnets, self.grants):
            if part is not None:
                part.stop()

    def connect_nb(self):
        backoff = Backoff(self.config.max_backoff_seconds)
        tls = ovsdb.TLS(self.config.private_key, self.config.certificate, self.config.ca_cert)
        while not self.stopping.is_set():
            try:
                tables = TABLES + services.TABLES + chains.TABLES + remote_mirrors.TABLES + multi_policies.TABLES + port_qos.TABLES
                self.nb = ovsdb.Database(
                    self.config.nb_db, ovsdb.NB_SCHEMA, tables, timeout=self.config.ovsdb_timeout, tls=tls,
                    field="nb_db", columns=nb_fence.COLUMNS, probe_ms=self.config.nb_probe_ms,
                    fence=self.leadership.fence)
                self.addresses = pod_addresses.AddressIndex().attach(self.nb)
                self.committer = Committer(self.nb, self.config.batch_size, pod_ports.claims, "nb-committer")
                self.multus = multus.Attachments(self.custom, self.nb, self.addresses)
                self.nb.add_listener(self._nb_changed)
                return True
            except Ovn4nfvError as exc:
                LOG.warning("northbound database: %s", exc)
                self.stopping.wait(backoff.next())
        return False

    def run(self):
        if not self.connect_nb():
            return
        workers = [threading.Thread(target=self._work, name="worker-%d" % i, daemon=True)
                   for i in range(self.config.workers)]
        for worker in workers:
            worker.start()
        workers += self.services.start() + self.chains.start() + (self.policies.start() if self.policies else [])
        workers += self.vms.start() + self.physnets.start() + self.grants.start()
        self.workers = workers
        self.leadership.start(self.api_client)
        # systemd (Type=notify), and the tests' harness before it stops the
        # watcher: it serves (or stands by), and SIGTERM now stops it cleanly
        daemon.notify_ready()
        try:
            self.pod_watch.run()
        finally:
            self._stop_parts()
            for worker in workers:
                worker.join(self.config.ovsdb_timeout * 2)
            self.committer.close()
            self.leadership.finish()        # released once its work ended
            self.nb.close()
            LOG.info("stopped")
        return self.leadership.exit_code

    # -- the cache and the queue ---------------------------------------------
    def observe(self, pod, deleted=False):
        """Take the newest word on a pod into the cache, and queue its key."""
        key, uid = pod_key(pod), pod.metadata.uid
        with self.lock:
            before = self.cache.get(key)
            labels = [pod.metadata.labels] + ([before.metadata.labels] if before is not None else [])
            if deleted:
                self.tombstones[uid] = time.monotonic()
                current = self.cache.get(key)
                if current is not None and current.metadata.uid == uid:
                    del self.cache[key]
            elif uid in self.tombstones:
                return          # a stale word on a pod that is gone
            else:
                self.cache[key] = pod
        self.queue.add(key)
        self.vms.pod_changed(pod, deleted)
        self.physnets.pod_changed(pod, deleted)
        self.services.pod_changed(pod.metadata.namespace, labels)
        self.chains.pods_changed()
        if self.policies:
            self.policies.pod_changed(pod.metadata.namespace, labels)

    def _nb_changed(self, event, row):
        """Where the NB's updates are taken in: wake the keys that wait on
        the NB. A pod port that waits came or changed (ovn-northd gave it
        its address); or a pod port went, so an address may have freed for
        the keys waiting on a full network."""
        self.grants.nb_changed(event, row)
        if row._table.name == "Logical_Router_Policy":
            self.chains.nb_changed(event, row)
            return
        if row._table.name == "Logical_Switch":
            if self.policies:
                self.policies.switch_changed(event, row)
            self.services.switch_changed(event, row)
            return
        if row._table.name == "ACL":
            if self.policies and (getattr(row, "external_ids", None) or {}).get(K_BASELINE):
                self.policies.baseline_changed()
            return
        if row._table.name == "Logical_Router" and event in ("create", "delete"):
            # a gateway came or went: who answers for external IPs may change
            self.services.requeue_all()
            return
        # a pod port, or its QoS row (as a port changed: its pod is looked at again)
        if not (port_qos.is_pod_qos(row) if row._table.name == port_qos.TABLE else
                row._table.name == "Logical_Switch_Port" and pod_ports.is_pod_port(row)):
            return
        ids = cell(row, "external_ids")
        key = key_of(ids.get(K_NAMESPACE), ids.get(K_POD))
        self.served_as.pop(key, None)
        if vms.vm_of(ids.get(K_POD)):
            self.queue.add(key)         # the VM's own key judges it; its launchers make and mend it
            self.vms.requeue_launchers(ids.get(K_NAMESPACE), ids.get(K_POD))
        if event == "delete" and row._table.name == "Logical_Switch_Port":
            with self.lock:
                live = key in self.cache
            if live:
                # a live pod's port went from under it (its network deleted
                # with force, or by hand): serve it again, or say why not
                self.queue.add(key)
            for key in list(self.exhausted):
                self.queue.add(key)
            if self.policies:
                # its deletion took its addresses out of the policies' sets;
                # a policy planned from a view that still had the port may
                # have put them back since (set mutations do not conflict):
                # each policy is planned again, from a view without it
                self.policies.requeue_all()
            return
        if key in self.pending or event != "create":
            # an address came, or a served port changed: it is looked at again
            # (a port security or a VLAN's tag changed by hand is mended, a QoS row deleted made again)
            self.queue.add(key)

    def _work(self):
        # the API's answers (a status) and OVN's are retried in a line
        serve(self.queue, self.handle, LOG, "pod", (Ovn4nfvError, ApiException))

    # -- one pod -----------------------------------------------------------
    def _live(self, key):
        """The pod of ``key`` that should have ports now, or None."""
        with self.lock:
            pod = self.cache.get(key)
            if pod is None:
                return None
            if pod.metadata.deletion_timestamp:
                self.tombstones[pod.metadata.uid] = time.monotonic()
                return None
            return pod

    def handle(self, key):
        """Make OVN hold exactly the ports the cache's pod of ``key`` asks
        for: none if it is gone, and never another UID's. A VM's key is
        the VM's (:meth:`.vm_watch.Vms.handle`)."""
        namespace, name = key.split("/", 1)
        if vms.vm_of(name):
            self.vms.handle(namespace, name)
            return
        pod = self._live(key)
        uid = pod.metadata.uid if pod is not None else None
        if uid is not None and self.served_as.get(key) == (uid, pod.metadata.annotations or {}):
            return      # served as it is, and neither the NB nor a resync said otherwise since
        # a transaction only when there is something to release: most
        # events (a new pod, a served pod's own patch, a resync) have none
        if self.nb.read(lambda _idl: self.addresses.holds_others(namespace, name, uid)):
            self._execute(lambda view: pod_ports.plan_release(view, namespace, name, uid, self.addresses))
        if pod is None:
            self._forget(key)
            return
        meta = pod.metadata
        found = dict(meta.annotations or {})
        owner = vms.owner_of(meta)      # the pod, or the VM it launches
        try:
            requests = self.requests_of(key, pod, owner)
        except ValidationError as exc:
            self._refuse(key, pod, exc.reason, str(exc))
            return
        unused = annotations.unused_forms(found)
        if unused:
            self.report(pod, IGNORED, "%s present but not used: %s takes precedence (%s)" % (
                ", ".join(unused), next((f for f in annotations.FORMS if f in found), "nothing"),
                " > ".join(annotations.FORMS)))
        if not requests:
            return
        if vms.vm_of(owner.name) and not self.vms.listed():
            self.queue.add_after(key, 1.0)      # whether it is its VMI's launcher is not known yet
            return
        refused = vms.vm_of(owner.name) and self.vms.refusal(pod, vms.vm_of(owner.name))
        if refused:
            # its VMI's change queues it again
            self.report(pod, vm_watch.UNAUTHORIZED, "not served as VM %s's launcher: %s" % (
                vms.vm_of(owner.name), refused), kind="Normal")
            return
        self._serve(key, pod, found, requests, owner)

    def requests_of(self, key, pod, owner):
        """What ``pod`` asks for (its annotations, its Multus selections),
        checked; ValidationError says why not."""
        found = dict(pod.metadata.annotations or {})
        _source, requests = annotations.parse_requests(found, self.config.default_network)
        selections = annotations.parse_multus(found, pod.metadata.namespace)
        if selections:
            requests = annotations.check_interfaces(
                requests + self.multus.requests(found, selections, owner.uid), "pod %s" % key)
        return requests

    def _serve(self, key, pod, found, requests, owner):
        meta = pod.metadata
        # a pod follows its request; a VM's ports go by the K_VMI rule (sole, below)
        follow = None if vms.vm_of(owner.name) else self.addresses
        told = dict(found, **self.told[key][1]) if self.told.get(key, (None,))[0] == meta.uid else found
        # what to write, whether the ports honour the request, have their port security, and what changed

        def state(idl):
            return pod_changes.state(View(idl), owner, requests, told, follow)

        self.grants.refuse(pod, owner, requests)        # what its networks do not allow it, or cap: said
        patch, right, secured, changed = self.nb.read(state)
        if patch and right and secured and not changed and all(found.get(k) == v for k, v in patch.items()):
            self._served(key, (meta.uid, found))
            return      # already done, as the MODIFIED event of our own patch shows
        planner = self.vms.planner(owner) if vms.vm_of(owner.name) else key
        if planner != key:
            self.vms.tell(key, pod, found, requests, owner, planner)
            return      # the VM's key queues it again when its ports change
        try:
            # a port gone from under a served pod is made with the addresses it was told
            # with its labels, a new port joins its policies' groups as it is made
            labels = dict(meta.labels or {}) if self.policies else None
            # a VM's only launcher: the VM's ports of interfaces it no longer asks for go
            sole = vms.vm_of(owner.name) and len(self.vms.running(owner)) == 1
            if changed:
                # what it no longer asks for, or asks for anew, goes first, in its own
                # transaction; a refused change (InterfaceChangeRefused, bad input) drops nothing
                self._execute(lambda view: pod_changes.plan_changes(
                    view, owner, requests, told, follow, getattr(pod.status, "pod_ip", None)))
                LOG.info("pod %s: %s", key, changed)

            def plan(view):
                batch = pod_ports.plan_pod(view, owner, pod_changes.pinned(view, owner, requests, told),
                                           self.addresses, labels)
                if sole:
                    batch.add(pod_ports.plan_drop(view, owner, [r.interface for r in requests], self.addresses))
                return batch
            self._execute(plan)
        except ValidationError as exc:
            self.pending.pop(key, None)
            self._refuse(key, pod, exc.reason, str(exc))
            if exc.reason == pod_ports.UNKNOWN_NETWORK and found.get(annotations.IFACE_LIST):
                self._strand(key, meta, found, requests, owner)
            return
        self.exhausted.discard(key)
        patch, _right, secured, _changed = self.nb.read(state)
        if patch is None:
            # a port ovn-northd addresses (made by an earlier version) waits
            # for it; the NB listener queues the key when the address comes,
            # and a look after the mark catches one that came before it
            self.pending.setdefault(key, time.monotonic())
            patch, _right, secured, _changed = self.nb.read(state)
            if patch is None:
                self._await_address(key, pod, owner, requests)
                return
        if not secured:
            # port security before the pod is told its interfaces: it never
            # sends a packet from a port that would take another's address
            # (a new port has it from the start)
            self._execute(lambda view: pod_ports.plan_port_security(view, owner, requests))
        if any(found.get(k) != v for k, v in patch.items()):
            self.writer.annotate(meta, patch, annotations.request_forms(found))
        self._served(key, (meta.uid, dict(found, **patch)))
        LOG.info("pod %s: %s", key, ", ".join(
            "%s=%s" % (e["interface"], e["ip_address"])
            for e in annotations.parse_iface_list(patch[annotations.IFACE_LIST])) or "addresses for other CNIs")

    def _strand(self, key, meta, found, requests, owner):
        """A served pod one of whose networks is gone: its interface list
        keeps only the interfaces whose networks remain, so that nothing
        reads it as naming a network that no longer exists."""
        entries = pod_changes.served(found)      # [] when it does not parse: nothing to shorten
        kept = self.nb.read(lambda idl: pod_ports.surviving_entries(View(idl), owner, requests, entries))
        if len(kept) != len(entries):
            self.writer.annotate(meta, annotations.output_annotations(kept), annotations.request_forms(found))
            LOG.info("pod %s: interfaces on deleted networks dropped from its list; %d left", key, len(kept))

    def _await_address(self, key, pod, owner, requests):
        """OVN has not assigned a dynamic address yet: come back when the
        NB says it did (or, at the latest, after ``address_seconds``),
        without holding a worker. If northd found the pool empty (another
        pod took the last address first), give the ports back and wait
        for an address to free."""
        starved = self.nb.read(lambda idl: pod_ports.starved(View(idl), owner, requests))
        if starved:
            self._execute(lambda view: pod_ports.plan_delete(view, owner.uid))
            self._refuse(key, pod, pod_ports.EXHAUSTED, starved)
            return
        if time.monotonic() - self.pending[key] >= self.config.address_seconds:
            LOG.warning("pod %s: OVN assigned no address within %ds; is ovn-northd running?",
                        key, self.config.address_seconds)
        self.queue.add_after(key, self.config.address_seconds)

    def _refuse(self, key, pod, reason, message):
        """The pod cannot be served as it asks: say why, once. A pod
        refused for want of an address waits for one to free (the NB
        listener queues it again)."""
        if reason == pod_ports.EXHAUSTED:
            self.exhausted.add(key)
        self.report(pod, reason or pod_ports.INVALID, message)

    def _served(self, key, served=None):
        """The pod is served: what was reported of its failures may be
        reported again should they recur (a warning stays said). With
        ``served``, (its UID, its annotations once served): an event that
        brings no other is no work."""
        self.pending.pop(key, None)
        self.exhausted.discard(key)
        with self.lock:
            pod = self.cache.get(key)
        if served is not None:
            self.served_as[key] = served
            self.told[key] = (served[0], {annotations.IFACE_LIST: served[1].get(annotations.IFACE_LIST)})
        # its addresses are known (or gone): the Services that select it
        if pod is not None:
            self.services.pod_changed(pod.metadata.namespace, [pod.metadata.labels])
            self.chains.pods_changed()
            if self.policies:
                self.policies.pod_changed(pod.metadata.namespace, [pod.metadata.labels])
        # what is not the pod's ports' to say stays said
        self.reported.unsay(key, keep=(IGNORED, physnet_watch.MISSING) + grant_watch.SAID)

    def _forget(self, key):
        self.served_as.pop(key, None)
        self.told.pop(key, None)
        self._served(key)
        self.reported.unsay(key)
        self.queue.forget(key)

    def _execute(self, compute):
        return self.committer.execute(compute)

    def report(self, pod, reason, message, kind="Warning"):
        """Report a pod's problem once per pod, reason and message: a log
        line and an Event of that reason on the pod, saying the same."""
        key, said = pod_key(pod), (pod.metadata.uid, message)
        LOG.warning("pod %s: %s: %s", key, reason, message)
        if self.reported.fresh(key, reason, said):
            self.writer.event(pod, reason, message, kind)
            self.reported.mark(key, reason, said)

    # -- resync --------------------------------------------------------------
    def resync(self):
        """List every pod; the list replaces the cache, and every pod the
        cache held that the list lacks was deleted meanwhile (tombstoned).
        Queue every key, and the keys of ports whose pod is gone. Returns
        the list's resourceVersion to watch from."""
        pods = kube.listed(self.core.list_pod_for_all_namespaces, "V1PodList")
        now = time.monotonic()
        with self.lock:
            fresh = {}
            for pod in pods.items:
                if pod.metadata.uid not in self.tombstones:
                    fresh[pod_key(pod)] = pod
            live = set(pod.metadata.uid for pod in fresh.values())
            for pod in self.cache.values():
                if pod.metadata.uid not in live:
                    self.tombstones[pod.metadata.uid] = now
            keys = set(self.cache) | set(fresh)
            self.cache = fresh
        self.vms.pods_listed(fresh.values())
        with self.lock:
            horizon = now - max(600, 2 * self.config.resync_seconds)
            self.tombstones = dict((u, t) for u, t in self.tombstones.items() if t > horizon)
        self.served_as = {}         # every pod is checked against the NB again
        owned = self.nb.read(lambda idl: pod_ports.owned_pods(View(idl)))
        gone = [owner for uid, owner in owned.items() if uid not in live and not vms.vm_of(owner.name)]
        for owner in owned.values():
            if vms.vm_of(owner.name):
                self.vms.queue_vm(owner.namespace, vms.vm_of(owner.name))      # its own key judges it
        for owner in gone:
            LOG.info("pod %s (uid %s) is gone; removing its ports", owner, owner.uid)
        for key in sorted(keys | set(key_of(owner.namespace, owner.name) for owner in gone)):
            self.queue.add(key)
        self.services.requeue_all()
        self.chains.pods_changed()
        if self.policies:
            self.policies.requeue_all()
        self.physnets.requeue_all()
        LOG.info("resync: %d pods, %d with ports", len(live), len(owned))
        self.listed.set()
        return pods.metadata.resource_version


def main(argv=None):
    return daemon.run(WATCHER, __doc__.split("\n", 1)[0], Config, Watcher, argv)


if __name__ == "__main__":
    raise SystemExit(main())
