# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's policies: MultiNetworkPolicies and namespaces from the API,
pods from the watcher's own cache and their ports from the NB; port
groups, address sets and ACLs out (:mod:`..cluster.multi_policies`).

MultiNetworkPolicies (``k8s.cni.cncf.io/v1beta1``) and namespaces are
listed and watched (:class:`.kube.ListWatch`) into caches. Every change
that can move what a policy selects or admits queues its key
(``namespace/name``) in a work queue of its own: the policy itself, a
namespace's labels, a pod's labels or ports. The handler reads the newest
word from the caches, resolves the policy (the switches its networks are,
the ports of the pods it selects there, the addresses of its rules'
peers) and plans it in one NB transaction.

A policy is untrusted input. One that cannot be checked or resolved gets
a Warning Event naming the field, said once per generation, and nothing of
it is written: what the NB holds of it (its last good rendering) stays.
A network of the policy's that is another plugin's is ignored; one that
OVN does not carry (an ovn4nfv-ipam attachment: macvlan and the like) is
said in a ``NetworkNotPoliced`` Warning, never silently skipped.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
import threading

from ..cluster import baseline, multi_policies, policy_model
from ..cluster import networks as vn
from ..common.errors import Ovn4nfvError, ValidationError
from ..common.marks import CNI_TYPE, IPAM_TYPE, K_POLICY_MODE
from ..common.selectors import Selector
from ..common.workqueue import WorkQueue, serve
from ..ovsdb.execution import execute
from ..ovsdb.view import View
from . import kube
from .switch_marks import SwitchMarks

LOG = logging.getLogger("ovn4nfv.policies")

GROUP, VERSION, PLURAL = "k8s.cni.cncf.io", "v1beta1", "multi-networkpolicies"
API_VERSION = "%s/%s" % (GROUP, VERSION)
KIND = "MultiNetworkPolicy"
# Event reasons
UNKNOWN_NETWORK = "UnknownNetwork"
NOT_POLICED = "NetworkNotPoliced"
# the queue's key of the operator's baseline (its selector peers' address
# sets): no policy's key, which is always <namespace>/<name>
BASELINE = "@baseline"


class _Meta:
    """What an Event needs of a policy's metadata, from its JSON."""

    def __init__(self, raw):
        meta = raw.get("metadata") or {}
        self.name, self.namespace, self.uid = meta.get("name"), meta.get("namespace"), meta.get("uid")


class _Reported:
    def __init__(self, raw):
        self.metadata = _Meta(raw)


def _key(raw):
    meta = raw.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


class Policies:
    """MultiNetworkPolicies on virtual networks, for one :class:`..watcher.Watcher`."""

    def __init__(self, watcher):
        self.watcher = watcher
        self.config = watcher.config
        self.custom = watcher.custom
        self.core = watcher.core
        self.queue = WorkQueue(base_delay=0.2, max_delay=self.config.max_backoff_seconds, name="policies")
        self.lock = threading.Lock()
        self.policies = {}          # key -> the policy's JSON, as the API sent it
        self.checked = {}           # key -> the policy checked, or the ValidationError that refused it
        self.namespaces = {}        # name -> labels
        self.reported = {}          # key -> {(uid, generation, reason, message)} said
        self.namespaces_listed = threading.Event()
        self.modes = SwitchMarks(K_POLICY_MODE)     # each network's policy_mode, as last seen in the NB
        stopping = watcher.stopping
        self.watches = [
            kube.ListWatch("multi-networkpolicies", None, self.relist_policies, self._list_policies,
                           self.observe_policy, stopping, self.config.resync_seconds, self.config.watch_seconds,
                           self.config.max_backoff_seconds),
            kube.ListWatch("namespaces", "V1Namespace", self.relist_namespaces, self.core.list_namespace,
                           self.observe_namespace, stopping, self.config.resync_seconds,
                           self.config.watch_seconds, self.config.max_backoff_seconds)]

    def _list_policies(self, **kwargs):
        return self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs)

    # -- threads -------------------------------------------------------------
    def start(self):
        """The watch threads and one worker; returns them, to be joined."""
        return kube.start_threads(self.watches, self._work, "policies-worker")

    def stop(self):
        kube.stop_threads(self.queue, self.watches)

    # -- caches --------------------------------------------------------------
    def relist_policies(self):
        listed = kube.listed(self._list_policies, None)
        fresh = dict((_key(o), o) for o in listed.get("items") or [] if isinstance(o, dict))
        owned = self.watcher.nb.read(lambda idl: multi_policies.read_policies(View(idl)))
        checked = dict((key, _checked(raw)) for key, raw in fresh.items())
        with self.lock:
            keys = set(self.policies) | set(fresh) | set(owned)
            self.policies, self.checked = fresh, checked
        for key in sorted(keys) + [BASELINE]:
            self.queue.add(key)
        return (listed.get("metadata") or {}).get("resourceVersion")

    def observe_policy(self, raw, deleted=False):
        key = _key(raw)
        checked = None if deleted else _checked(raw)
        with self.lock:
            if deleted:
                self.policies.pop(key, None)
                self.checked.pop(key, None)
            else:
                self.policies[key], self.checked[key] = raw, checked
        self.queue.add(key)

    def relist_namespaces(self):
        listed = kube.listed(self.core.list_namespace, "V1NamespaceList")
        fresh = dict((o.metadata.name, dict(o.metadata.labels or {})) for o in listed.items)
        with self.lock:
            changed = fresh != self.namespaces
            self.namespaces = fresh
        self.namespaces_listed.set()
        if changed:
            self.requeue_all()
        return listed.metadata.resource_version

    def observe_namespace(self, obj, deleted=False):
        name, labels = obj.metadata.name, dict(obj.metadata.labels or {})
        with self.lock:
            before = self.namespaces.get(name)
            if deleted:
                self.namespaces.pop(name, None)
            else:
                self.namespaces[name] = labels
        if deleted or before != labels:
            self.requeue_all()

    def pod_changed(self, namespace, labels):
        """A pod of ``namespace`` changed (its ports and addresses, or its
        labels, from any of ``labels`` to another): the policies that
        select it or whose selector peers pick it, before or after, are
        queued (a policy that does not check, always), and the baseline.
        The others' rendering cannot change: it is the selected pods' ports
        and the picked pods' addresses."""
        with self.lock:
            namespaces = dict(self.namespaces)
            keys = [key for key, checked in self.checked.items() if isinstance(checked, ValidationError)
                    or any(_concerns(checked, namespace, found, namespaces) for found in labels)]
        for key in keys + [BASELINE]:
            self.queue.add(key)

    def requeue_all(self):
        with self.lock:
            keys = list(self.policies)
        for key in keys + [BASELINE]:
            self.queue.add(key)

    def switch_changed(self, event, row):
        """A switch came, went or changed in the NB: when a network's
        ``policy_mode`` changed, its policies are rendered again, and when
        a network came (a policy naming it may resolve now). The first
        change seen of a network's switch renders them all again, once: its
        mode before is not known (:mod:`.switch_marks`)."""
        if self.modes.changed(event, row):
            self.requeue_all()

    def baseline_changed(self):
        """A rule of the operator's baseline came, went or changed in the NB."""
        self.queue.add(BASELINE)

    # -- one policy ------------------------------------------------------------
    def handle(self, key):
        nb = self.watcher.nb
        if key == BASELINE:
            result = execute(nb, lambda view: baseline.plan_peer_sets(view, self._baseline_resolver(view)),
                             write=True)
            if result.changed:
                LOG.info("baseline: %s", "; ".join(result.operations()))
            return
        with self.lock:
            raw, checked = self.policies.get(key), self.checked.get(key)
        if raw is None:
            result = execute(nb, lambda view: multi_policies.plan_policies(view, [(key, {"name": key})], "deleted"),
                             write=True)
            self.reported.pop(key, None)
        else:
            if isinstance(checked, ValidationError):
                self.refused(raw, checked)
                return
            try:
                switches, notes = self.switches(checked)
                self.reported.pop(key, None)        # a problem that recurs is said again
                for reason, message in notes:
                    self.report(raw, reason, message)
                if not switches:
                    # for no network of the product's: nothing of it may stay
                    result = execute(nb, lambda view: multi_policies.plan_policies(
                        view, [(key, {"name": key})], "deleted"), write=True)
                else:
                    result = execute(nb, lambda view: multi_policies.plan_policies(
                        view, [(key, self.resolve(view, checked, switches))], "replaced",
                        self.config.policy_log_rate), write=True)
            except ValidationError as exc:
                self.refused(raw, exc)
                return
        if result.changed:
            LOG.info("policy %s: %s", key, "; ".join(result.operations()))

    def refused(self, raw, exc):
        """Say why the policy ``raw`` is not applied (``exc``); what was
        applied of it before stays."""
        self.report(raw, exc.reason or policy_model.INVALID,
                    "%s; nothing of it is applied, and what was applied of it before stays" % exc)

    def switches(self, checked):
        """The switches of the policy's networks, and Warnings to say:
        ``(switches, [(reason, message)])``. A NAD of another plugin is
        not ours and is left alone."""
        switches, notes = [], []
        where = policy_model.POLICY_FOR_FIELD
        for index, ref in enumerate(checked.networks):
            field = "%s[%d]" % (where, index)
            if not ref.is_attachment:
                if self.watcher.nb.read(lambda idl, n=ref.name: vn.read_network(View(idl), n)) is None:
                    raise ValidationError("%s: %s is not a virtual network" % (field, ref),
                                          reason=UNKNOWN_NETWORK)
                switches.append(ref.name)
                continue
            selection = {"namespace": ref.namespace, "name": ref.name, "where": field}
            try:
                config = self.watcher.multus.nad_config(selection)
            except ValidationError as exc:
                raise ValidationError(exc.problems, reason=UNKNOWN_NETWORK)
            ipam = config.get("ipam") if isinstance(config.get("ipam"), dict) else {}
            if config.get("type") == CNI_TYPE:
                network = config.get("network")
                if not network:
                    provider = config.get("provider") or "%s.%s.ovn" % (ref.name, ref.namespace)
                    network = self.watcher.nb.read(lambda idl, p=provider: vn.network_by_provider(View(idl), p))
                if not network:
                    raise ValidationError("%s: no virtual network serves NetworkAttachmentDefinition %s" % (
                        field, ref), reason=UNKNOWN_NETWORK)
                switches.append(network)
            elif ipam.get("type") == IPAM_TYPE:
                notes.append((NOT_POLICED, "%s: NetworkAttachmentDefinition %s takes its addresses from "
                              "%s but its interfaces are %s's, not OVN's: this policy cannot police them"
                              % (field, ref, IPAM_TYPE, config.get("type"))))
        return sorted(set(switches)), notes

    def resolve(self, view, checked, switches):
        """The item :mod:`..cluster.multi_policies` plans: the ports of the
        selected pods on ``switches``, and each rule's selector peers'
        addresses (every address of the pods picked, on any network: the
        router does no NAT, so that is the source a routed packet has)."""
        pods = self._live_pods()
        with self.lock:
            namespaces = dict(self.namespaces)
        ports = self._pod_ports(view)
        located = multi_policies.port_switches(view)
        members = []
        for namespace, name, labels in pods:
            if namespace == checked.namespace and checked.pod_selector.matches(labels):
                members.extend(port for port, _ips in ports.get((namespace, name), ())
                               if located.get(port) in switches)
        peers = {}
        for direction in multi_policies.DIRECTIONS:
            for index, rule in enumerate(checked.rules(direction)):
                peers[(direction, index)] = sorted(set(
                    ip for peer in rule.peers if not peer.is_block for ip in _addresses(peer, pods, namespaces, ports)))
        return {"name": checked.key, "policy": checked, "switches": switches, "members": sorted(set(members)),
                "peers": peers}

    def _baseline_resolver(self, view):
        """``resolve(namespace selector, pod selector)`` for the baseline's
        peers: the addresses of every port of the pods picked. What it
        reads (every live pod, every pod port) is read at its first call:
        every pod event queues the baseline, and a cluster whose baseline
        picks no pods by selector (most) never calls it. Measured: read up
        front, it was a quarter of the watcher's CPU in a 500-pod burst
        with no baseline at all."""
        known = []

        def resolve(namespace_selector, pod_selector):
            if not known:
                with self.lock:
                    namespaces = dict(self.namespaces)
                known.append((self._live_pods(), namespaces, self._pod_ports(view)))
            peer = policy_model.Peer(namespace_selector=namespace_selector, pod_selector=pod_selector)
            return _addresses(peer, *known[0])
        return resolve

    def _live_pods(self):
        """``[(namespace, name, labels)]`` of the pods not being deleted,
        ``name`` the one their ports carry (a VM's launcher's are its VM's,
        :meth:`.vm_watch.Vms.port_owner`; a launcher that is not its VMI's
        has none)."""
        with self.watcher.lock:
            pods = [p for p in self.watcher.cache.values() if not p.metadata.deletion_timestamp]
        owners = [(p, self.watcher.vms.port_owner(p)) for p in pods]
        return [(p.metadata.namespace, owner[0], dict(p.metadata.labels or {})) for p, owner in owners if owner]

    def _pod_ports(self, view):
        """``{(namespace, pod): [(port name, [IPAddress])]}`` of the pods'
        ports the NB holds, from the watcher's address index."""
        index = self.watcher.addresses
        rows = view.idl.tables["Logical_Switch_Port"].rows
        out = {}
        for pod, uuids in list(index.by_pod.items()):
            for uuid in list(uuids):
                row = rows.get(uuid)
                if row is not None:
                    out.setdefault(pod, []).append((row.name, index.of_row.get(uuid, (None, [], None))[1]))
        return out

    def report(self, raw, reason, message):
        key = _key(raw)
        meta = raw.get("metadata") or {}
        LOG.warning("policy %s: %s: %s", key, reason, message)
        said = (meta.get("uid"), meta.get("generation"), reason, message)
        if said not in self.reported.setdefault(key, set()):
            self.watcher.writer.event(_Reported(raw), reason, message, involved=KIND, api_version=API_VERSION)
            self.reported[key].add(said)

    def _work(self):
        # A policy resolved before every pod and namespace is known would
        # select nothing, and take its isolation away (at each restart):
        # served only once both are listed.
        stopping = self.watcher.stopping
        while not stopping.is_set() and not (self.watcher.listed.wait(1) and self.namespaces_listed.wait(1)):
            pass
        serve(self.queue, self.handle, LOG, "policy", (Ovn4nfvError, kube.ApiException))


def _checked(raw):
    """The policy ``raw`` checked, or the ValidationError that refuses it
    (its worker says it), once, when the policy arrives."""
    try:
        return policy_model.check_policy(raw)
    except ValidationError as exc:
        return exc


def _concerns(checked, namespace, labels, namespaces):
    """Whether a pod of ``namespace`` with ``labels`` is one the policy
    ``checked`` selects, or one a selector peer of its rules picks."""
    labels = labels or {}
    if namespace == checked.namespace and checked.pod_selector.matches(labels):
        return True
    return any(_picks(peer, namespace, labels, namespaces)
               for direction in multi_policies.DIRECTIONS for rule in checked.rules(direction)
               for peer in rule.peers if not peer.is_block)


def _addresses(peer, pods, namespaces, ports):
    """The addresses (strings) of every port of the ``pods`` selector
    ``peer`` picks: a tenant's rule's peers and the baseline's alike."""
    for namespace, name, labels in pods:
        if _picks(peer, namespace, labels, namespaces):
            for _port, ips in ports.get((namespace, name), ()):
                for ip in ips:
                    yield str(ip)


def _picks(peer, namespace, labels, namespaces):
    """Whether selector ``peer`` picks a pod of ``namespace`` with ``labels``."""
    if peer.namespace is not None:
        if namespace != peer.namespace:
            return False
    elif not peer.namespace_selector.matches(namespaces.get(namespace, {"kubernetes.io/metadata.name": namespace})):
        return False
    return (peer.pod_selector or Selector()).matches(labels)
