# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's chains: each network function chain's next hops, from the
ready pods its functions' selectors pick (:mod:`..cluster.chains`).

Chains are declared in the NB (``ovn4nfv.k8s.network_chain``); the watcher
follows them there. A chain's name is queued when its policies change in
the NB, and every chain when a pod changes (readiness, labels, addresses);
one worker makes each chain's policies, source address set and function
ports what the pods say, in one transaction per chain. A selected pod whose
chain interface is on another network is not used, and says so once in an
Event on the pod.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
import threading

from ..cluster import chains
from ..common.errors import Ovn4nfvError
from ..common.marks import K_CHAIN, K_CHAIN_FUNCTION, K_INTERFACE, K_UID, OWNER_KEY, OWNER_VALUE
from ..common.workqueue import WorkQueue, serve
from ..ovsdb.execution import execute
from ..ovsdb.view import cell
from . import kube
from .service_watch import is_ready

LOG = logging.getLogger("ovn4nfv.chains")
MISMATCH = "ChainInterfaceMismatch"


def chain_names(idl):
    """Every chain the NB knows of: declared ones, and those a port still
    carries the mark of."""
    names = set()
    for row in idl.tables["Logical_Router_Policy"].rows.values():
        if row.external_ids.get(OWNER_KEY) == OWNER_VALUE and row.external_ids.get(K_CHAIN):
            names.add(row.external_ids[K_CHAIN])
    for row in idl.tables["Logical_Switch_Port"].rows.values():
        names.update(n for n in (cell(row, "external_ids").get(K_CHAIN_FUNCTION) or "").split(",") if n)
    return names


class Chains:
    """Network function chains, for one :class:`..watcher.Watcher`."""

    def __init__(self, watcher):
        self.watcher = watcher
        self.queue = WorkQueue(base_delay=0.2, max_delay=watcher.config.max_backoff_seconds, name="chains")
        self.reported = {}          # (pod uid, chain) -> message said
        self.known = set()          # chains the NB has shown, until handled gone
        self.lock = threading.Lock()

    def start(self):
        # read before the lock is taken: the NB listener holds the database while it takes the lock
        found = self.watcher.nb.read(chain_names)
        with self.lock:
            self.known |= found
        self.pods_changed()
        thread = threading.Thread(target=self._work, name="chains-worker", daemon=True)
        thread.start()
        return [thread]

    def stop(self):
        self.queue.shutdown()

    def nb_changed(self, event, row):
        """Where the NB's updates are taken in: a chain's policy came, went or changed."""
        ids = getattr(row, "external_ids", None) or {}
        if ids.get(K_CHAIN):
            with self.lock:
                self.known.add(ids[K_CHAIN])
            self.queue.add(ids[K_CHAIN])

    def pods_changed(self):
        """A pod changed, or every pod was listed again: every chain."""
        with self.lock:
            names = sorted(self.known)
        for name in names:
            self.queue.add(name)

    def _resolve(self, view, namespace, selector, interface):
        with self.watcher.lock:
            pods = [p for p in self.watcher.cache.values() if p.metadata.namespace == namespace
                    and is_ready(p) and all((p.metadata.labels or {}).get(k) == v for k, v in selector.items())]
        for pod in pods:
            owner = self.watcher.vms.port_owner(pod)        # a VM's launcher: the VM's ports
            for row in self.watcher.addresses.ports_of(view, namespace, owner[0]) if owner else ():
                ids = row.external_ids
                if ids.get(K_UID) == owner[1] and (interface is None or ids.get(K_INTERFACE) == interface):
                    yield pod, row

    def handle(self, name):
        mismatched = []

        def compute(view):
            batch, found = chains.plan_hops(view, name, lambda ns, sel, iface: list(
                self._resolve(view, ns, sel, iface)))
            mismatched[:] = found
            return batch

        result = execute(self.watcher.nb, compute, write=True)
        if result.changed:
            LOG.info("chain %s: %s", name, "; ".join(result.operations()))
        if name not in self.watcher.nb.read(chain_names):
            with self.lock:
                self.known.discard(name)        # deleted, and nothing of it is left
        said = {}
        for pod, _port, message in mismatched:
            said.setdefault(pod.metadata.uid, (pod, set()))[1].add(message)
        for pod, messages in said.values():
            key, message = (pod.metadata.uid, name), "; ".join(sorted(messages))
            if self.reported.get(key) != message:
                LOG.warning("pod %s/%s: %s: %s", pod.metadata.namespace, pod.metadata.name, MISMATCH, message)
                self.watcher.writer.event(pod, MISMATCH, message)
                self.reported[key] = message

    def _work(self):
        serve(self.queue, self.handle, LOG, "chain", (Ovn4nfvError, kube.ApiException))
