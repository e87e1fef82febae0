# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's part in what network functions are granted beyond full
port security (:mod:`..cluster.port_grants`) and in their QoS caps
(:mod:`..cluster.port_qos`).

A pod's grant is planned with its ports, by the pod's own key. What is not
one pod's is this worker's:

* a network's allowances changing (``relaxed_port_security``,
  ``virtual_ips``, the QoS cap ``qos_max``): its ports are made no looser
  than it now allows at once, in one transaction, as the audit's repair
  makes them (:func:`..cluster.security_audit.plan_tighten`), so that a
  revocation waits on no pod's serving, a VM's port included; and every
  pod on it (a VM's launchers) is served again, for what it may now have
  and for a new cap;
* each virtual port's ``virtual-parents``, the ports granted its address:
  one list shared by several pods, so one worker writes it, from the NB as
  it is, whenever a pod port or a virtual port changes while any network
  has virtual IPs (a pod that went leaves it so).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
import threading

from ..cluster import port_grants, port_qos, security_audit, vms
from ..common.errors import Ovn4nfvError
from ..common.marks import K_NAMESPACE, K_POD, K_QOS_MAX_BURST, K_QOS_MAX_RATE, K_RELAXED, K_VIRTUAL_IPS, NETWORK_KEY
from ..common.workqueue import WorkQueue, serve
from ..ovsdb.execution import execute
from ..ovsdb.view import View, cell
from .switch_marks import SwitchMarks

LOG = logging.getLogger("ovn4nfv.grants")
ALL = "*"       # the queue's key for every network's virtual ports' parents
TIGHTEN = "tighten:"    # and one network's ports' port security, by its name after this
# warnings that stay said while the pod is served (the watcher's _served)
SAID = (port_grants.SECURITY_REFUSED, port_grants.VIP_REFUSED, port_qos.CAPPED)


def vip_networks(idl):
    """The networks whose switch declares virtual IPs."""
    return set(row.name for row in idl.tables["Logical_Switch"].rows.values()
               if row.external_ids.get(NETWORK_KEY) and row.external_ids.get(K_VIRTUAL_IPS))


def _batch(batch, plan):
    """``batch`` with ``plan`` added, when it changes anything."""
    if plan.changed:
        batch.add(plan)
    return batch


class Grants:
    """For one :class:`..watcher.Watcher`."""

    def __init__(self, watcher):
        self.watcher = watcher
        self.queue = WorkQueue(base_delay=0.2, max_delay=watcher.config.max_backoff_seconds, name="grants")
        self.marks = tuple(SwitchMarks(key) for key in (K_RELAXED, K_VIRTUAL_IPS, K_QOS_MAX_RATE, K_QOS_MAX_BURST))
        self.lock = threading.Lock()
        self.networks = set()       # those with virtual IPs, as the NB last said

    def start(self):
        # read before the lock is taken: the NB listener holds the database while it takes the lock
        found = self.watcher.nb.read(vip_networks)
        with self.lock:
            self.networks |= found
        self.queue.add(ALL)
        thread = threading.Thread(target=self._work, name="grants-worker", daemon=True)
        thread.start()
        return [thread]

    def stop(self):
        self.queue.shutdown()

    def nb_changed(self, event, row):
        """Where the watcher's NB listener hands on every update."""
        if row._table.name == "Logical_Switch":
            self.switch_changed(event, row)
        elif row._table.name == "Logical_Switch_Port":
            self.port_changed(event, row)

    def refuse(self, pod, owner, requests):
        """Say in the pod's Events what its requests ask that their networks
        do not allow it (its ports keep full port security) or cap (its QoS
        is served at the cap): once each, as the watcher reports."""
        if any(r.security != "full" or r.vips or r.qos for r in requests):
            for reason, message in self.watcher.nb.read(lambda idl: port_grants.refusals(View(idl), owner, requests) + [
                    (port_qos.CAPPED, m) for m in port_qos.capped(View(idl), requests)]):
                self.watcher.report(pod, reason, message)

    def switch_changed(self, event, row):
        """A network's switch changed: where its allowances did, its ports
        are tightened, and every pod with a port on it is served again."""
        seen = [marks.changed(event, row) for marks in self.marks]      # each mark's seen value kept
        changed = any(seen)
        with self.lock:
            self.networks.discard(row.name)
            if event != "delete" and row.external_ids.get(NETWORK_KEY) and row.external_ids.get(K_VIRTUAL_IPS):
                self.networks.add(row.name)
        if not changed or event == "delete":
            return
        self.queue.add(TIGHTEN + row.name)
        for port in getattr(row, "ports", None) or ():
            ids = cell(port, "external_ids")
            if vms.vm_of(ids.get(K_POD)):
                self.watcher.vms.requeue_launchers(ids.get(K_NAMESPACE), ids.get(K_POD))
            elif ids.get(K_POD):
                key = "%s/%s" % (ids.get(K_NAMESPACE), ids.get(K_POD))
                self.watcher.served_as.pop(key, None)
                self.watcher.queue.add(key)
        self.queue.add(ALL)

    def port_changed(self, event, row):
        """A switch port came, went or changed: while any network has
        virtual IPs, their parents are looked at again."""
        with self.lock:
            if not self.networks:
                return
        self.queue.add(ALL)

    def handle(self, key):
        if key.startswith(TIGHTEN):
            name = key[len(TIGHTEN):]
            result = execute(self.watcher.nb, lambda view: _batch(security_audit.plan_tighten(view, name),
                                                                  port_qos.plan_capped(view, name)), write=True)
            if result.changed:
                LOG.info("network %s: its allowances changed: %s", name, "; ".join(result.operations()))
            return
        with self.lock:
            names = sorted(self.networks)
        for name in names:
            result = execute(self.watcher.nb, lambda view, name=name: port_grants.plan_parents(view, name), write=True)
            if result.changed:
                LOG.info("network %s: %s", name, "; ".join(result.operations()))

    def _work(self):
        serve(self.queue, self.handle, LOG, "virtual IPs", (Ovn4nfvError,))
