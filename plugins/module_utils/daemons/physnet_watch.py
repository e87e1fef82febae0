# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's word on a pod scheduled where its provider network is not
(issue 35).

A provider network's frames leave a node on the bridge its physical network
is mapped to (``ovn-bridge-mappings``); a node without the mapping carries
nothing for it, and ovn-controller only logs that once. The node agent
refuses such a pod's ADD (CNI error 106); this says it on the pod too, as a
``PhysicalNetworkMissing`` Warning Event, as soon as the pod is scheduled
there, so that ``kubectl describe pod`` names the network, its physical
network and the node before any sandbox is tried (ovn-kubernetes #5000 gave
an Event alone and left the pod to fail).

What a node maps is what its ovn-controller reports in the southbound
``Chassis`` (the audit's reading, :func:`..cluster.provider_audit.chassis_mappings`),
the chassis found by the node's name as its name (the ovn_controller
role's system-id) or its ``hostname``, in any case (a kubelet lower-cases
the host's name); of several (a stale one beside), the pod is told only
when none maps the network. Whether the mapped bridge exists is the
node's to know: the node agent refuses that too. A pod is looked at when
the API first says where it is scheduled (or it moves), when its node's
chassis changes, and at every resync. The ports are made whatever this
says: the mapping may come before the pod starts. Off when ``sb_db`` is
not set.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
import threading

from ..cluster import networks as vn, vms
from ..cluster.provider_audit import chassis_mappings
from ..common.errors import Ovn4nfvError, ValidationError
from ..common.workqueue import Backoff, WorkQueue, serve
from ..ovsdb import connection as ovsdb
from ..ovsdb.view import View
from ..resources.ovs import MAPPINGS
from .kube import ApiException

LOG = logging.getLogger("ovn4nfv.physnets")
MISSING = "PhysicalNetworkMissing"
SB_TABLES = ("Chassis",)


def _names(row):
    """What a chassis is known by, lower-cased: its name and its host's."""
    return set(str(n).lower() for n in (getattr(row, "name", None), getattr(row, "hostname", None)) if n)


def node_of(pod):
    spec = getattr(pod, "spec", None)
    return getattr(spec, "node_name", None) if spec is not None else None


class Physnets:
    """Mixed beside the watcher's pods: its own queue of pod keys, one
    worker, and a southbound connection that holds the chassis only."""

    def __init__(self, watcher):
        self.watcher = watcher
        self.config = watcher.config
        self.sb = None
        self.queue = WorkQueue(base_delay=0.5, max_delay=self.config.max_backoff_seconds, name="physnets")
        self.stopping = threading.Event()
        self.placed = {}        # key -> the node the pod was last seen scheduled on
        self.lock = threading.Lock()

    def enabled(self):
        return bool(self.config.sb_db)

    def start(self):
        if not self.enabled():
            LOG.info("sb_db is not set: pods scheduled where their provider network is not are not reported")
            return []
        thread = threading.Thread(target=self._run, name="physnets", daemon=True)
        thread.start()
        return [thread]

    def stop(self):
        self.stopping.set()
        self.queue.shutdown()

    def _run(self):
        backoff = Backoff(self.config.max_backoff_seconds)
        tls = ovsdb.TLS(self.config.sb_private_key, self.config.sb_certificate, self.config.sb_ca_cert)
        while not self.stopping.is_set():
            try:
                self.sb = ovsdb.Database(self.config.sb_db, ovsdb.SB_SCHEMA, SB_TABLES,
                                         timeout=self.config.ovsdb_timeout, tls=tls, field="sb_db")
                break
            except Ovn4nfvError as exc:
                LOG.warning("southbound database: %s", exc)
                self.stopping.wait(backoff.next())
        if self.sb is None:
            return
        self.sb.add_listener(self._chassis_changed)
        self.requeue_all()
        try:
            serve(self.queue, self.handle, LOG, "pod", (Ovn4nfvError, ApiException))
        finally:
            self.sb.close()

    # -- what queues a pod -----------------------------------------------------
    def pod_changed(self, pod, deleted=False):
        """A pod's word: looked at once it is scheduled, or scheduled
        elsewhere (its other changes are its own worker's)."""
        if not self.enabled():
            return
        key, node = "%s/%s" % (pod.metadata.namespace, pod.metadata.name), node_of(pod)
        with self.lock:
            moved = not deleted and node and self.placed.get(key) != node
            if deleted or not node:
                self.placed.pop(key, None)
            elif moved:
                self.placed[key] = node
        if moved:
            self.queue.add(key)

    def _chassis_changed(self, event, row):
        """A node's chassis came or changed (its mappings): its pods again.
        Called with the SB's cache held: only queues."""
        if event != "delete":
            names = _names(row)
            self._queue_where(lambda node: node.lower() in names)

    def requeue_all(self):
        """Every scheduled pod again (a resync); what is known of pods the
        cache no longer has is dropped."""
        if self.enabled():
            with self.watcher.lock:
                live = set(self.watcher.cache)
            with self.lock:
                self.placed = dict((k, v) for k, v in self.placed.items() if k in live)
            self._queue_where(lambda node: True)

    def _queue_where(self, chosen):
        with self.watcher.lock:
            keys = [key for key, pod in self.watcher.cache.items() if node_of(pod) and chosen(node_of(pod))]
        for key in keys:
            self.queue.add(key)

    # -- one pod -----------------------------------------------------------------
    def handle(self, key):
        pod = self.watcher._live(key)
        node = node_of(pod) if pod is not None else None
        if node is None:
            return
        owner = vms.owner_of(pod.metadata)
        try:
            requests = self.watcher.requests_of(key, pod, owner)
        except ValidationError:
            return          # the pod's own worker says what is wrong with it

        def physnets(idl):
            view, out = View(idl), {}
            for name in sorted(set(r.network for r in requests)):
                network = vn.read_network(view, name)
                if network is not None and network.physnet:
                    out[name] = network.physnet
            return out
        wanted = self.watcher.nb.read(physnets) if requests else {}
        if not wanted:
            return
        found = self.sb.read(lambda idl: [chassis_mappings(row) for row in idl.tables["Chassis"].rows.values()
                                          if node.lower() in _names(row)])
        if not found:
            LOG.debug("pod %s: node %s has no chassis yet", key, node)
            return          # not a chassis (yet): its chassis' coming queues the pod again
        text = " / ".join(sorted(set(t for _m, t in found if t)))
        missing = sorted((net, physnet) for net, physnet in wanted.items()
                         if not any(physnet in mapped for mapped, _t in found))
        if not missing:
            # mapped now: should it go again, it is said again
            self.watcher.reported.unsay(key, [MISSING])
        else:
            self.watcher.report(pod, MISSING, "scheduled on node %s, which does not map %s (%s: %s); the pod's "
                                "interfaces there would carry nothing and its node agent refuses them: map it "
                                "there (the ovn_controller role's ovn_controller_physnets) or schedule the pod "
                                "elsewhere" % (node, ", ".join("physical network %s of network %s" % (p, n)
                                                               for n, p in missing), MAPPINGS, text or "none"))
