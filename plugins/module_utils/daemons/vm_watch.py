# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's virtual machines (:mod:`..cluster.vms`): KubeVirt's
VirtualMachines and VirtualMachineInstances, listed and watched where the
API serves them, and the launcher pods of each VM.

A VM has a key of its own in the watcher's queue, ``namespace/vm:<VM>``,
queued whenever one of its launchers, its VM or its VMI changes, or one of
its ports does. Handling it (:meth:`Vms.handle`) frees the VM's ports once
nothing of it is left; otherwise it records on them which launchers run
(the only pods a node agent attaches them for), binds them where those
run, and queues the launchers, which the watcher serves as it serves any
pod, with the VM's ports: the oldest makes them from its request, the
others are told what they hold.

A launcher is served only once its VMI names it in ``status.activePods``.
That is KubeVirt's own word on which pods run the VM, and it goes as far
as KubeVirt's trust does, no further: virt-controller names there every
pod of the namespace that the VMI controls (an ownerReference names its
UID), and the VMI has no status subresource, so whoever may create pods,
or edit VMIs, in the VM's namespace can be named there too. Nothing
outside that namespace can: a VM's ports are only ever its namespace's.
Where a namespace's pod creators are not trusted with its VMs, an
admission policy on the launcher's label and ownerReference is the
cluster's to add (docs: watcher, Virtual machines). Where the API serves
no KubeVirt (its CRDs are not installed), no launcher is served.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import logging
import threading

from ..cluster import annotations, pod_ports, vms
from ..common.errors import ValidationError
from ..ovsdb.execution import Batch
from ..ovsdb.view import View
from . import kube

try:
    from kubernetes.client.rest import ApiException
except ImportError:  # pragma: no cover - the daemon needs it; modules do not
    class ApiException(Exception):
        """Stands for the client's exception where the client is missing."""
        status = None

LOG = logging.getLogger("ovn4nfv.watcher.vms")
VERSION = "v1"
VMS, VMIS = "virtualmachines", "virtualmachineinstances"
UNAUTHORIZED = "LauncherNotActive"      # the Event's reason


def _meta(obj):
    return obj.get("metadata") or {}


class Vms:
    """The VMs' caches; ``watcher`` provides ``config``, ``queue``,
    ``stopping``, ``nb``, ``addresses``, ``served_as``, ``listed`` and
    ``_execute``."""

    def __init__(self, watcher, custom):
        config = watcher.config
        self.watcher = watcher
        self.custom = custom
        self.lock = threading.Lock()
        self.objects = {VMS: {}, VMIS: {}}      # plural -> {(namespace, name): object}
        self.served = {}                        # plural -> whether the API serves it, once listed
        self.launchers = {}                     # a VM owner's UID -> {pod key: pod}
        self.owner_of = {}                      # a launcher's key -> its VM owner's UID
        self.judged = {}                        # a VM owner's UID -> (running launchers, binding) last handled
        self.watches = [kube.ListWatch(
            plural, None, functools.partial(self.relist, plural), functools.partial(self._list, plural),
            functools.partial(self.observe, plural), watcher.stopping, config.resync_seconds,
            config.watch_seconds, config.max_backoff_seconds) for plural in (VMS, VMIS)]

    def _list(self, plural, **kwargs):
        return self.custom.list_cluster_custom_object(vms.GROUP, VERSION, plural, **kwargs)

    def start(self):
        threads = [threading.Thread(target=w.run, name="watch-" + w.what, daemon=True) for w in self.watches]
        for thread in threads:
            thread.start()
        return threads

    def stop(self):
        for watch in self.watches:
            watch.stop()

    # -- caches --------------------------------------------------------------
    def relist(self, plural):
        try:
            listed = kube.listed(functools.partial(self._list, plural), None)
        except ApiException as exc:
            if exc.status != 404:
                raise
            if self.served.get(plural) is not False:
                LOG.info("the API serves no %s.%s: KubeVirt is not installed, and no pod is served as a VM's "
                         "launcher", plural, vms.GROUP)
            listed = None
        fresh = dict(((_meta(o).get("namespace"), _meta(o).get("name")), o)
                     for o in (listed or {}).get("items") or [] if isinstance(o, dict))
        with self.lock:
            old, self.objects[plural] = self.objects[plural], fresh
            self.served[plural] = listed is not None
        for key in set(old) | set(fresh):
            if old.get(key) != fresh.get(key):
                self.queue_vm(*key)
        return kube.ABSENT if listed is None else (listed.get("metadata") or {}).get("resourceVersion")

    def observe(self, plural, obj, deleted=False):
        key = (_meta(obj).get("namespace"), _meta(obj).get("name"))
        with self.lock:
            if deleted:
                self.objects[plural].pop(key, None)
            else:
                self.objects[plural][key] = obj
        self.queue_vm(*key)

    def pod_changed(self, pod, deleted):
        """Take a pod's newest word (the watcher's cache's): a launcher's
        VM is queued, and so is the VM a pod no longer launches."""
        vm = None if deleted else vms.launched_vm(pod.metadata)
        key = "%s/%s" % (pod.metadata.namespace, pod.metadata.name)
        owner = vms.vm_owner(pod.metadata.namespace, vm).uid if vm is not None else None
        with self.lock:
            held = self.launchers.get(self.owner_of.get(key), {}).get(key)
            if deleted and held is not None and held.metadata.uid != pod.metadata.uid:
                return          # a late word on an earlier pod of that name
            before = self.owner_of.pop(key, None)
            if before is not None:
                mine = self.launchers.get(before, {})
                mine.pop(key, None)
                if not mine:
                    self.launchers.pop(before, None)
            if owner is not None:
                self.owner_of[key] = owner
                self.launchers.setdefault(owner, {})[key] = pod
        for uid in set((before, owner)) - {None}:
            namespace, _sep, name = uid[len(vms.VM_PREFIX):].partition("/")
            self.queue_vm(namespace, name)

    def pods_listed(self, pods):
        """Take a list of every pod (the watcher's resync) as the launchers:
        made aside, then put in place at once (a worker never sees half)."""
        launchers, owner_of = {}, {}
        for pod in pods:
            vm = vms.launched_vm(pod.metadata)
            if vm is not None:
                key, uid = "%s/%s" % (pod.metadata.namespace, pod.metadata.name), \
                    vms.vm_owner(pod.metadata.namespace, vm).uid
                owner_of[key] = uid
                launchers.setdefault(uid, {})[key] = pod
        with self.lock:
            old, self.launchers, self.owner_of = self.launchers, launchers, owner_of
        for uid in set(old) | set(launchers):
            namespace, _sep, vm = uid[len(vms.VM_PREFIX):].partition("/")
            self.queue_vm(namespace, vm)

    def listed(self):
        """Whether both kinds have been listed (or found not served)."""
        with self.lock:
            return len(self.served) == 2

    def queue_vm(self, namespace, vm):
        self.watcher.queue.add("%s/%s%s" % (namespace, vms.VM_PREFIX, vm))

    # -- what a launcher may have ----------------------------------------------
    def refusal(self, pod, vm):
        """Why the launcher ``pod`` of ``vm`` is not served now, or None:
        its VMI must be the one it names and name it among its active pods."""
        meta = pod.metadata
        with self.lock:
            vmi = self.objects[VMIS].get((meta.namespace, vm))
            served = self.served.get(VMIS)
        if not served:
            return "the API serves no VirtualMachineInstances (KubeVirt is not installed, or not listed yet)"
        refs = [r for r in meta.owner_references or () if r.kind == vms.VMI_KIND and r.controller]
        if vmi is None or not refs or refs[0].uid != _meta(vmi).get("uid"):
            return "its VirtualMachineInstance %s/%s is not the one it names" % (meta.namespace, vm)
        if meta.uid not in ((vmi.get("status") or {}).get("activePods") or {}):
            return "VirtualMachineInstance %s/%s does not name it among its active pods (yet)" % (meta.namespace, vm)
        return None

    def running(self, owner):
        """``[(key, pod)]`` of the launchers of ``owner`` that run and are
        the VMI's, oldest first."""
        with self.lock:
            pods = list((self.launchers.get(owner.uid) or {}).items())
        return sorted(((key, pod) for key, pod in pods
                       if vms.running(pod) and self.refusal(pod, vms.vm_of(owner.name)) is None),
                      key=lambda kp: (str(kp[1].metadata.creation_timestamp), kp[0]))

    def port_owner(self, pod):
        """``(name, UID)`` that a pod's ports carry: its VM's for a launcher
        that runs and is its VMI's, None for another launcher (it has
        none), its own for any other pod. How Services, chains and policies
        find a pod's ports."""
        owner = vms.owner_of(pod.metadata)
        if not vms.vm_of(owner.name):
            return owner.name, owner.uid
        key = "%s/%s" % (pod.metadata.namespace, pod.metadata.name)
        return (owner.name, owner.uid) if key in dict(self.running(owner)) else None

    def planner(self, owner):
        """The key of the launcher whose requests make the VM's ports: the
        oldest that runs and is its VMI's. The others are told what it
        was given, and nothing else."""
        running = self.running(owner)
        return running[0][0] if running else None

    def tell(self, key, pod, found, requests, owner, planner):
        """Another launcher of the VM (``planner``) makes its ports: this one
        (a migration's target) is told what they hold when it asks for
        exactly what the planner asks for, and is refused otherwise."""
        watcher = self.watcher
        with watcher.lock:
            first = watcher.cache.get(planner)
        try:
            theirs = watcher.requests_of(planner, first, owner) if first is not None else None
        except ValidationError:
            theirs = None
        if theirs is None or [r.shape() for r in theirs] != [r.shape() for r in requests]:
            watcher.report(pod, pod_ports.CONFLICT, "VM %s's ports are made from its launcher %s's request; this "
                           "launcher asks for other interfaces or addresses" % (vms.vm_of(owner.name), planner))
            return
        patch, secured = watcher.nb.read(lambda idl: (
            pod_ports.pod_annotations(View(idl), owner, theirs), pod_ports.secured(View(idl), owner, theirs)))
        if patch and secured:
            if any(found.get(k) != v for k, v in patch.items()):
                watcher.writer.annotate(pod.metadata, patch, annotations.request_forms(found))
            watcher._served(key, (pod.metadata.uid, dict(found, **patch)))

    def requeue_launchers(self, namespace, name):
        """Serve the VM's launchers again (one of its ports went)."""
        with self.lock:
            keys = list(self.launchers.get(vms.vm_owner(namespace, vms.vm_of(name)).uid) or {})
        for key in keys:
            self.watcher.served_as.pop(key, None)
            self.watcher.queue.add(key)

    def exists(self, namespace, vm):
        with self.lock:
            return (namespace, vm) in self.objects[VMS] or (namespace, vm) in self.objects[VMIS]

    # -- a VM's key ------------------------------------------------------------
    def handle(self, namespace, name):
        """Free the VM's ports once nothing of it is left (no VirtualMachine,
        no VMI, no launcher that runs); otherwise record who may attach
        them and bind them where its launchers run, and queue its
        launchers."""
        vm = vms.vm_of(name)
        owner, watcher = vms.vm_owner(namespace, vm), self.watcher
        if not (self.listed() and watcher.listed.is_set()):
            watcher.queue.add_after("%s/%s" % (namespace, name), 1.0)      # not known yet: never judge on a guess
            return
        running = self.running(owner)
        if not running and not self.exists(namespace, vm):
            if watcher.nb.read(lambda _idl: watcher.addresses.holds_others(namespace, name, None)):
                def release(view):
                    if self.running(owner) or self.exists(namespace, vm):
                        return Batch()          # a launcher or the VMI came meanwhile
                    return pod_ports.plan_release(view, namespace, name, None, watcher.addresses)
                self.judged.pop(owner.uid, None)
                if watcher._execute(release).changed:
                    LOG.info("VM %s/%s is gone (no VirtualMachine, no VMI, no launcher that runs); its ports are "
                             "freed", namespace, vm)
            return
        if not running:
            LOG.info("VM %s/%s runs nowhere; its ports are kept while its VirtualMachine or VMI is", namespace, vm)
        options = vms.binding([(pod.metadata.creation_timestamp, pod.spec.node_name) for _k, pod in running])
        plan = watcher._execute(lambda view: pod_ports.plan_binding(
            view, watcher.addresses.ports_of(view, namespace, name), options,
            [pod.metadata.uid for _k, pod in running]))
        if plan.changed:
            LOG.info("VM %s/%s: %s; launchers %s", namespace, vm, ", ".join(
                "%s=%s" % (k, v) for k, v in sorted((options or {}).items()) if v is not None) or "runs nowhere",
                ", ".join(key for key, _pod in running) or "none")
        said = (tuple(key for key, _pod in running), tuple(sorted((options or {}).items())))
        if plan.changed or self.judged.get(owner.uid) != said:
            # who runs it, or where, changed: its launchers are served again (told, refused, or planning)
            self.judged[owner.uid] = said
            self.requeue_launchers(namespace, name)
