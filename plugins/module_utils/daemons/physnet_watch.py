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
the chassis found by the node's name as its ``hostname``. A pod is looked
at when the API says it is scheduled or changed, when its node's chassis
changes, and at every resync. The ports are made whatever this says: the
mapping may come before the pod starts. Off when ``sb_db`` is not set.
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

LOG = logging.getLogger("ovn4nfv.physnets")
MISSING = "PhysicalNetworkMissing"
SB_TABLES = ("Chassis",)


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
            serve(self.queue, self.handle, LOG, "pod", (Ovn4nfvError,))
        finally:
            self.sb.close()

    # -- what queues a pod -----------------------------------------------------
    def pod_changed(self, pod, deleted=False):
        if self.enabled() and not deleted and node_of(pod):
            self.queue.add("%s/%s" % (pod.metadata.namespace, pod.metadata.name))

    def _chassis_changed(self, event, row):
        """A node's chassis came or changed (its mappings): its pods again.
        Called with the SB's cache held: only queues."""
        if event != "delete":
            self._queue_where(lambda node: node == getattr(row, "hostname", None))

    def requeue_all(self):
        if self.enabled():
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
                                          if row.hostname == node])
        if not found:
            return          # not a chassis (yet): its chassis' coming queues the pod again
        mapped, text = found[0]
        missing = sorted((net, physnet) for net, physnet in wanted.items() if physnet not in mapped)
        if not missing:
            # mapped now: should it go again, it is said again
            self.watcher.reported.get(key, {}).pop(MISSING, None)
        else:
            self.watcher.report(pod, MISSING, "scheduled on node %s, which does not map %s (%s: %s); the pod's "
                                "interfaces there would carry nothing and its node agent refuses them: map it "
                                "there (the ovn_controller role's ovn_controller_physnets) or schedule the pod "
                                "elsewhere" % (node, ", ".join("physical network %s of network %s" % (p, n)
                                                               for n, p in missing), MAPPINGS, text or "none"))
