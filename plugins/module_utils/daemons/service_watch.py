# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's Services: Services and EndpointSlices from the API,
pods from the watcher's own cache, OVN load balancers out
(:mod:`..cluster.services`).

Services and EndpointSlices are listed and watched (:class:`.kube.ListWatch`)
into caches; every change that can move a Service's endpoints queues its
key (``namespace/name``) in a work queue of its own, with the pods'
semantics: one worker per key at a time, backoff on failure, and a
handler that reads the newest word from the caches. A pod's change queues
the Services of its namespace; its readiness is the kubelet's Ready
condition. Each Service is one NB transaction. Bad input is a Warning
Event on the Service, said once, and nothing is written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
import threading

from ..cluster import services
from ..common.errors import Ovn4nfvError, ValidationError
from ..common.marks import K_PHYSNET
from ..common.workqueue import WorkQueue, serve
from ..ovsdb.execution import execute
from ..ovsdb.view import View
from . import kube
from .switch_marks import SwitchMarks

try:
    from kubernetes import client as k8s_client
except ImportError:  # pragma: no cover - the daemon needs it; modules do not
    k8s_client = None

LOG = logging.getLogger("ovn4nfv.services")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def _key(meta):
    return "%s/%s" % (meta.namespace, meta.name)


def service_of(obj):
    """The plain :class:`..cluster.services.Service` of a V1Service."""
    spec, meta = obj.spec, obj.metadata
    affinity = None
    if spec.session_affinity == "ClientIP":
        config = spec.session_affinity_config
        client_ip = config.client_ip if config is not None else None
        affinity = (client_ip.timeout_seconds if client_ip is not None else None) or services.DEFAULT_AFFINITY
    ports = [services.Port(p.name, p.protocol, p.port, p.target_port) for p in spec.ports or []]
    # the client's generations name spec.externalIPs differently
    external = getattr(spec, "external_ips", None) or getattr(spec, "external_i_ps", None) or []
    return services.Service(meta.namespace, meta.name, meta.uid, meta.annotations, spec.cluster_ip,
                            external, ports, spec.selector, affinity,
                            bool(spec.publish_not_ready_addresses))


def is_ready(pod):
    if pod.metadata.deletion_timestamp or pod.status is None:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def named_ports(pod):
    return dict((p.name, p.container_port) for c in pod.spec.containers or []
                for p in c.ports or [] if p.name)


def slice_endpoints(obj):
    """The :class:`..cluster.services.Endpoint` list of a V1EndpointSlice."""
    if obj.address_type != "IPv4":
        return []
    ports = dict((p.name or "", p.port) for p in obj.ports or [] if p.port)
    out = []
    for endpoint in obj.endpoints or []:
        conditions = endpoint.conditions
        ready = conditions is None or conditions.ready is not False
        for address in endpoint.addresses or []:
            out.append(services.Endpoint(ready, ports, ip=address))
    return out


class Services:
    """Services on virtual networks, for one :class:`..watcher.Watcher`."""

    def __init__(self, watcher, api_client):
        self.watcher = watcher
        self.config = watcher.config
        self.core = watcher.core
        self.discovery = k8s_client.DiscoveryV1Api(api_client)
        self.queue = WorkQueue(base_delay=0.2, max_delay=self.config.max_backoff_seconds, name="services")
        self.lock = threading.Lock()
        self.services = {}          # key -> (V1Service, services.Service)
        self.slices = {}            # (namespace, slice name) -> (service key, [Endpoint])
        self.reported = {}          # key -> (uid, reason, message) last said
        self.physnets = SwitchMarks(K_PHYSNET)      # each network's physnet ("" for an overlay), as last seen
        stopping = watcher.stopping
        self.watches = [
            kube.ListWatch("services", "V1Service", self.relist_services,
                           self.core.list_service_for_all_namespaces, self.observe_service,
                           stopping, self.config.resync_seconds, self.config.watch_seconds,
                           self.config.max_backoff_seconds),
            kube.ListWatch("endpointslices", "V1EndpointSlice", self.relist_slices,
                           self.discovery.list_endpoint_slice_for_all_namespaces, self.observe_slice,
                           stopping, self.config.resync_seconds, self.config.watch_seconds,
                           self.config.max_backoff_seconds)]

    # -- threads -------------------------------------------------------------
    def start(self):
        """The watch threads and one worker; returns them, to be joined."""
        return kube.start_threads(self.watches, self._work, "services-worker")

    def stop(self):
        kube.stop_threads(self.queue, self.watches)

    # -- caches --------------------------------------------------------------
    def relist_services(self):
        listed = kube.listed(self.core.list_service_for_all_namespaces, "V1ServiceList")
        fresh = dict((_key(o.metadata), (o, service_of(o))) for o in listed.items)
        owned = self.watcher.nb.read(lambda idl: services.owned_services(View(idl)))
        with self.lock:
            keys = set(self.services) | set(fresh) | set(owned)
            self.services = fresh
        for key in sorted(keys):
            self.queue.add(key)
        return listed.metadata.resource_version

    def observe_service(self, obj, deleted=False):
        key = _key(obj.metadata)
        with self.lock:
            if deleted:
                self.services.pop(key, None)
            else:
                self.services[key] = (obj, service_of(obj))
        self.queue.add(key)

    def relist_slices(self):
        listed = kube.listed(self.discovery.list_endpoint_slice_for_all_namespaces, "V1EndpointSliceList")
        fresh = {}
        for obj in listed.items:
            owner = (obj.metadata.labels or {}).get(SERVICE_NAME_LABEL)
            if owner:
                fresh[(obj.metadata.namespace, obj.metadata.name)] = (
                    "%s/%s" % (obj.metadata.namespace, owner), slice_endpoints(obj))
        with self.lock:
            keys = set(k for k, _e in list(self.slices.values()) + list(fresh.values()))
            self.slices = fresh
        for key in sorted(keys):
            self.queue.add(key)
        return listed.metadata.resource_version

    def observe_slice(self, obj, deleted=False):
        where = (obj.metadata.namespace, obj.metadata.name)
        owner = (obj.metadata.labels or {}).get(SERVICE_NAME_LABEL)
        with self.lock:
            before = self.slices.pop(where, (None, []))[0]
            if owner and not deleted:
                self.slices[where] = ("%s/%s" % (where[0], owner), slice_endpoints(obj))
            after = self.slices.get(where, (None, []))[0]
        for key in set(k for k in (before, after) if k):
            self.queue.add(key)

    def pod_changed(self, namespace, labels):
        """A pod of ``namespace`` changed (readiness, ports, or labels, from
        any of ``labels`` to another): the Services that select it, before
        or after, may have other endpoints now."""
        with self.lock:
            keys = [k for k, (_o, s) in self.services.items() if s.namespace == namespace
                    and any(s.selects(found) for found in labels)]
        for key in keys:
            self.queue.add(key)

    def switch_changed(self, event, row):
        """A network's switch came, went or changed: one that became a
        provider network, or an overlay again, changes which switches take
        every Service's VIP (and whether a Service on it is served); a new
        network takes them. The first change seen of a network's switch
        plans every Service again, once (:mod:`.switch_marks`)."""
        if self.physnets.changed(event, row):
            self.requeue_all()

    def requeue_all(self):
        with self.lock:
            keys = list(self.services)
        for key in keys:
            self.queue.add(key)

    # -- one Service ---------------------------------------------------------------
    def endpoints(self, service):
        if service.selector:
            with self.watcher.lock:
                pods = [p for p in self.watcher.cache.values()
                        if p.metadata.namespace == service.namespace
                        and service.selects(p.metadata.labels)]
            # a VM's launcher stands for the VM's ports (vm_watch.port_owner)
            owners = [(p, self.watcher.vms.port_owner(p)) for p in pods]
            return [services.Endpoint(is_ready(p), named_ports(p), pod=owner[0], uid=owner[1])
                    for p, owner in owners if owner]
        with self.lock:
            return [e for key, found in self.slices.values() if key == service.key for e in found]

    def handle(self, key):
        with self.lock:
            obj, service = self.services.get(key, (None, None))
        nb = self.watcher.nb
        if service is None or not services.is_ours(service):
            result = execute(nb, lambda view: services.plan_remove(view, key), write=True)
            self.reported.pop(key, None)
        else:
            endpoints = self.endpoints(service)
            try:
                result = execute(nb, lambda view: services.plan_service(
                    view, service, endpoints, self.watcher.addresses), write=True)
            except ValidationError as exc:
                self.report(obj, service, exc.reason or services.INVALID, str(exc))
                # a Service refused as it is now is not served as it was
                # (its network became a provider network, its VIP another's)
                result = execute(nb, lambda view: services.plan_remove(view, key), write=True)
                if result.changed:
                    LOG.info("service %s: %s", key, "; ".join(result.operations()))
                return
            self.reported.pop(key, None)
        if result.changed:
            LOG.info("service %s: %s", key, "; ".join(result.operations()))

    def report(self, obj, service, reason, message):
        LOG.warning("service %s: %s: %s", service.key, reason, message)
        said = (service.uid, reason, message)
        if self.reported.get(service.key) != said:
            self.watcher.writer.event(obj, reason, message, involved="Service")
            self.reported[service.key] = said

    def _work(self):
        serve(self.queue, self.handle, LOG, "service", (Ovn4nfvError, kube.ApiException))
