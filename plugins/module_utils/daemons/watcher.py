# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher: pod annotations become OVN ports and an interface list.

Run as ``python -m <package>.daemons.watcher --config FILE``. It lists every pod,
then watches for changes from that resourceVersion. For each pod that asks
for networks it checks the request (:mod:`.annotations`), creates the
pod's logical switch ports (:mod:`.pod_ports`), waits on the NB's update
stream for OVN's dynamic addresses, and writes ``ovnIfaceList`` and
``k8s.plugin.opnfv.org/ovnInterfaces`` back with a merge patch. Bad input
creates nothing and is reported as a Kubernetes Event on the pod, and in
the log. When a pod goes, exactly its ports go (matched on its UID).

It re-lists (resync) at start, whenever the watch has expired (410 Gone),
and every ``resync_seconds``: every pod that should have ports gets them,
and ports the product owns whose pod is gone are removed. The API server
going away is retried with backoff; an NB restart is a reconnect of the
IDL; SIGTERM stops it cleanly. It uses the official Kubernetes Python
client, the one the Kubernetes project maintains.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import logging
import queue
import threading
import time

from ..cluster import annotations, networks as vn, pod_ports
from ..cluster.topology import TABLES
from ..common.errors import Ovn4nfvError, ValidationError
from ..ovsdb import connection as ovsdb
from ..ovsdb.execution import execute
from ..ovsdb.view import View
from . import settings as daemon

try:
    from kubernetes import client as k8s_client
    from kubernetes import watch as k8s_watch
    from kubernetes.client.exceptions import ApiTypeError
    from kubernetes.client.rest import ApiException
    HAS_KUBERNETES = True
except ImportError:  # pragma: no cover - the daemon needs it; modules do not
    HAS_KUBERNETES = False

    class ApiException(Exception):
        """Stands for the client's exception where the client is missing."""
        status = None

    class ApiTypeError(TypeError):
        """Stands for the client's exception where the client is missing."""

LOG = logging.getLogger("ovn4nfv.watcher")
EVENT_REASON = "InvalidNetworkRequest"
COMPONENT = "ovn4nfv-watcher"
MERGE_PATCH = "application/merge-patch+json"


class Config(daemon.Settings):
    """The watcher's settings: a JSON file, then ``OVN4NFV_WATCHER_<KEY>``
    environment variables, then these defaults."""

    NAME = "watcher"
    ENV_PREFIX = "OVN4NFV_WATCHER_"
    LIBRARIES = ("ovsdbapp", "netaddr", "kubernetes")
    DEFAULTS = {
        "kubeconfig": None,            # None: in-cluster credentials
        "nb_db": ovsdb.DEFAULT_NB_DB,
        "private_key": None,
        "certificate": None,
        "ca_cert": None,
        "default_network": None,       # for pods with only the legacy "ovn" annotation
        "workers": 16,                 # mostly waiting on OVN; more of them batch northd's work
        "resync_seconds": 300,
        "watch_seconds": 10,           # how long one watch request lasts
        "address_seconds": 30,         # how long to wait for OVN's dynamic addresses
        "ovsdb_timeout": 10,
        "max_backoff_seconds": 30,
    }

    def check(self):
        for key in ("workers", "resync_seconds", "watch_seconds", "address_seconds", "ovsdb_timeout"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ValidationError("watcher config: %s: %r is not a positive number" % (key, getattr(self, key)))
        ovsdb.parse_remote(self.nb_db, "nb_db")


class Backoff:
    """Exponential backoff, capped; reset after a success."""

    def __init__(self, cap):
        self.cap = cap
        self.delay = 0.0

    def next(self):
        self.delay = min(self.cap, max(0.2, self.delay * 2))
        return self.delay

    def reset(self):
        self.delay = 0.0


class Watcher:
    """The daemon. :meth:`run` blocks until :meth:`stop`."""

    def __init__(self, config, api_client=None):
        if not HAS_KUBERNETES:
            raise Ovn4nfvError("the watcher needs the kubernetes Python client")
        self.config = config
        self.stopping = threading.Event()
        if api_client is None:
            api_client = daemon.kubernetes_api_client(config.kubeconfig)
        self.core = k8s_client.CoreV1Api(api_client)
        self._content_type_kwarg = None     # known after the first patch
        self.custom = k8s_client.CustomObjectsApi(api_client)
        self.nb = None
        self.addresses = None
        self.queues = [queue.Queue() for _i in range(config.workers)]
        self.latest = {}            # uid -> (pod, deleted): the newest word on each pod
        self.lock = threading.Lock()
        self.rejected = {}          # uid -> annotations already reported as bad
        self._watch = None

    # -- lifecycle ---------------------------------------------------------
    def stop(self, *_args):
        self.stopping.set()
        watch = self._watch
        if watch is not None:
            watch.stop()
            response = getattr(watch, "_resp", None)
            if response is not None:
                try:
                    response.close()
                except Exception:  # noqa: the stream is being torn down anyway
                    pass

    def connect_nb(self):
        backoff = Backoff(self.config.max_backoff_seconds)
        tls = ovsdb.TLS(self.config.private_key, self.config.certificate, self.config.ca_cert)
        while not self.stopping.is_set():
            try:
                self.nb = ovsdb.Database(self.config.nb_db, ovsdb.NB_SCHEMA, TABLES,
                                         timeout=self.config.ovsdb_timeout, tls=tls, field="nb_db")
                self.addresses = pod_ports.AddressIndex().attach(self.nb)
                return True
            except Ovn4nfvError as exc:
                LOG.warning("northbound database: %s", exc)
                self.stopping.wait(backoff.next())
        return False

    def run(self):
        if not self.connect_nb():
            return
        workers = [threading.Thread(target=self._work, args=(q,), name="worker-%d" % i, daemon=True)
                   for i, q in enumerate(self.queues)]
        for worker in workers:
            worker.start()
        try:
            self._watch_loop()
        finally:
            for q in self.queues:
                q.put(None)
            for worker in workers:
                worker.join(self.config.address_seconds + self.config.ovsdb_timeout)
            self.nb.close()
            LOG.info("stopped")

    def _watch_loop(self):
        backoff = Backoff(self.config.max_backoff_seconds)
        version, listed_at = None, 0.0
        while not self.stopping.is_set():
            try:
                if version is None or time.monotonic() - listed_at > self.config.resync_seconds:
                    version = self.resync()
                    listed_at = time.monotonic()
                self._watch = k8s_watch.Watch()
                for event in self._watch.stream(self.core.list_pod_for_all_namespaces,
                                                resource_version=version,
                                                timeout_seconds=self.config.watch_seconds):
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    self.enqueue(pod, event["type"] == "DELETED")
                    if self.stopping.is_set():
                        break
                backoff.reset()
            except ApiException as exc:
                if exc.status == 410:
                    LOG.info("the watch expired (410 Gone); listing again")
                    version = None
                    continue
                self._retry_later(backoff, "the API server answered %s" % exc.status)
            except Exception as exc:  # noqa: connection errors of every kind; retried
                if self.stopping.is_set():
                    break
                self._retry_later(backoff, "the API server is unreachable: %s" % exc)
            finally:
                self._watch = None

    def _retry_later(self, backoff, why):
        delay = backoff.next()
        LOG.warning("%s; retrying in %.1fs", why, delay)
        self.stopping.wait(delay)

    # -- the queue: per pod, in order, on one worker -----------------------
    def enqueue(self, pod, deleted=False):
        uid = pod.metadata.uid
        with self.lock:
            fresh = uid not in self.latest
            self.latest[uid] = (pod, deleted)
        if fresh:
            self.queues[hash(uid) % len(self.queues)].put(uid)

    def _work(self, jobs):
        while True:
            uid = jobs.get()
            if uid is None:
                return
            with self.lock:
                pod, deleted = self.latest.pop(uid, (None, False))
            if pod is None or self.stopping.is_set():
                continue        # on the way out: the next start resyncs
            try:
                self.handle(pod, deleted)
            except Ovn4nfvError as exc:
                LOG.warning("pod %s/%s: %s; retrying", pod.metadata.namespace, pod.metadata.name, exc)
                self._requeue(pod, deleted)
            except ApiException as exc:
                LOG.warning("pod %s/%s: the API server answered %s; retrying",
                            pod.metadata.namespace, pod.metadata.name, exc.status)
                self._requeue(pod, deleted)
            except Exception:  # noqa: a bug must not kill the worker; it is logged whole
                LOG.exception("pod %s/%s", pod.metadata.namespace, pod.metadata.name)
                self._requeue(pod, deleted)

    def _requeue(self, pod, deleted):
        if not self.stopping.is_set():
            timer = threading.Timer(1.0, self.enqueue, args=(pod, deleted))
            timer.daemon = True
            timer.start()

    # -- one pod -----------------------------------------------------------
    def handle(self, pod, deleted):
        meta = pod.metadata
        uid = meta.uid
        if deleted or meta.deletion_timestamp:
            self.rejected.pop(uid, None)
            self._execute(lambda view: pod_ports.plan_delete(view, uid))
            return
        found = dict(meta.annotations or {})
        try:
            _source, requests = annotations.parse_requests(found, self.config.default_network)
            selections = annotations.parse_multus(found, meta.namespace)
            if selections:
                requests = annotations.check_interfaces(
                    requests + self._attachments(found, selections), "pod %s/%s" % (meta.namespace, meta.name))
        except ValidationError as exc:
            self.reject(pod, found, exc)
            return
        if not requests:
            return
        owner = pod_ports.Pod(meta.namespace, meta.name, uid)

        def outputs(idl):
            return pod_ports.pod_annotations(View(idl), owner, requests)

        def done(idl):
            view = View(idl)
            entries = pod_ports.interface_list(view, owner, requests)
            if not entries or not pod_ports.matches_requests(entries, requests):
                return None
            return pod_ports.pod_annotations(view, owner, requests, entries)

        patch = self.nb.read(done)
        if patch and all(found.get(k) == v for k, v in patch.items()):
            return      # already done, as the MODIFIED event of our own patch shows
        try:
            self._execute(lambda view: pod_ports.plan_stale(view, owner, requests))
            self._execute(lambda view: pod_ports.plan_pod(view, owner, requests, self.addresses))
        except ValidationError as exc:
            self.reject(pod, found, exc)
            return
        patch = self.nb.wait_for(outputs, self.config.address_seconds)
        if not patch:
            raise Ovn4nfvError("OVN assigned no address within %ds" % self.config.address_seconds)
        if any(found.get(k) != v for k, v in patch.items()):
            self._patch(meta, {"metadata": {"annotations": patch}})
        self.rejected.pop(uid, None)
        LOG.info("pod %s/%s: %s", meta.namespace, meta.name, ", ".join(
            "%s=%s" % (e["interface"], e["ip_address"])
            for e in annotations.parse_iface_list(patch[annotations.IFACE_LIST])) or "addresses for other CNIs")

    def _attachments(self, found, selections):
        """Requests for the Multus attachments that are the product's: a
        NetworkAttachmentDefinition of type ovn4nfv, or one whose IPAM is
        ovn4nfv-ipam. Others belong to other plugins and are left alone."""
        requests = []
        for selection in selections:
            where = selection["where"]
            config = self._nad_config(selection)
            ipam = config.get("ipam") if isinstance(config.get("ipam"), dict) else {}
            if config.get("type") == "ovn4nfv":
                provider = config.get("provider") or "%s.%s.ovn" % (selection["name"], selection["namespace"])
                network, for_other_cni = config.get("network"), False
            elif ipam.get("type") == "ovn4nfv-ipam":
                provider = ipam.get("provider") or "%s.%s" % (selection["name"], selection["namespace"])
                network, for_other_cni = None, True
            else:
                continue
            if not network:
                network = self.nb.read(lambda idl, p=provider: vn.network_by_provider(View(idl), p))
                if not network:
                    raise ValidationError("%s: no virtual network serves provider %s" % (where, provider))
            pool = annotations.ip_pool(found, provider, where)
            choice = None
            if pool:
                choice = self.nb.read(lambda idl: next((ip for ip in pool if self.addresses.holder(
                    View(idl), "ip", ip) is None), None))
                if choice is None:
                    raise ValidationError("%s: every address of %s.kubernetes.io/ip_pool is taken" % (
                        where, provider))
            requests.append(annotations.attachment_request(selection, network, provider, for_other_cni,
                                                           found, str(choice) if choice else None))
        return requests

    def _nad_config(self, selection):
        """The CNI config of the selected NetworkAttachmentDefinition."""
        try:
            nad = self.custom.get_namespaced_custom_object(
                "k8s.cni.cncf.io", "v1", selection["namespace"], "network-attachment-definitions",
                selection["name"])
        except ApiException as exc:
            if exc.status == 404:
                raise ValidationError("%s: NetworkAttachmentDefinition %s/%s does not exist" % (
                    selection["where"], selection["namespace"], selection["name"]))
            raise
        try:
            config = json.loads((nad.get("spec") or {}).get("config") or "{}")
        except ValueError as exc:
            raise ValidationError("%s: the config of NetworkAttachmentDefinition %s/%s is not JSON (%s)" % (
                selection["where"], selection["namespace"], selection["name"], exc))
        return config if isinstance(config, dict) else {}

    def _execute(self, compute):
        return execute(self.nb, compute, write=True)

    def reject(self, pod, found, exc):
        """Report bad input once per version of the annotations: a log line
        and a Warning Event on the pod, each naming the field."""
        meta = pod.metadata
        message = str(exc)
        LOG.warning("pod %s/%s: %s", meta.namespace, meta.name, message)
        if self.rejected.get(meta.uid) == found:
            return
        now = datetime.datetime.now(datetime.timezone.utc)
        self.core.create_namespaced_event(meta.namespace, k8s_client.CoreV1Event(
            metadata=k8s_client.V1ObjectMeta(generate_name=meta.name + ".", namespace=meta.namespace),
            involved_object=k8s_client.V1ObjectReference(
                kind="Pod", api_version="v1", name=meta.name, namespace=meta.namespace, uid=meta.uid),
            reason=EVENT_REASON, message=message[:1024], type="Warning", count=1,
            first_timestamp=now, last_timestamp=now,
            source=k8s_client.V1EventSource(component=COMPONENT)))
        self.rejected[meta.uid] = found

    def _patch(self, meta, body):
        """A JSON merge patch of the pod. Clients before 24.2 (such as
        Debian 12's 22.6) take no ``_content_type`` and send a dict as a
        strategic merge patch, which for annotations is the same thing."""
        if self._content_type_kwarg is None:
            try:
                self.core.patch_namespaced_pod(meta.name, meta.namespace, body, _content_type=MERGE_PATCH)
                self._content_type_kwarg = True
                return
            except ApiTypeError:
                self._content_type_kwarg = False
        if self._content_type_kwarg:
            self.core.patch_namespaced_pod(meta.name, meta.namespace, body, _content_type=MERGE_PATCH)
        else:
            self.core.patch_namespaced_pod(meta.name, meta.namespace, body)

    # -- resync --------------------------------------------------------------
    def resync(self):
        """List every pod, queue each, and remove the ports of pods that are
        gone. Returns the list's resourceVersion to watch from."""
        pods = self.core.list_pod_for_all_namespaces()
        live = set()
        for pod in pods.items:
            live.add(pod.metadata.uid)
            self.enqueue(pod)
        owned = self.nb.read(lambda idl: pod_ports.owned_pods(View(idl)))
        for uid, owner in sorted(owned.items()):
            if uid in live or self._still_there(owner):
                continue
            LOG.info("pod %s (uid %s) is gone; removing its ports", owner, uid)
            self._execute(lambda view, u=uid: pod_ports.plan_delete(view, u))
        LOG.info("resync: %d pods, %d with ports", len(live), len(owned))
        return pods.metadata.resource_version

    def _still_there(self, owner):
        """A pod created after the list must keep its ports: ask for it."""
        try:
            pod = self.core.read_namespaced_pod(owner.name, owner.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return pod.metadata.uid == owner.uid


def main(argv=None):
    return daemon.run("ovn4nfv-watcher", __doc__.split("\n", 1)[0], Config, Watcher, argv)


if __name__ == "__main__":
    raise SystemExit(main())
