# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node agent's follower: a running pod's interfaces follow its
interface list (issue 36).

It lists and watches the pods of its node (``spec.nodeName``) into a cache,
with a work queue of their keys (``namespace/name``): one worker per key at
a time, backoff on failure, every pod looked at again at each list (start,
410 Gone, every ``resync_seconds``). For a pod it compares the interfaces
the last ADD (or this follower) made, as their OVS rows record them
(:data:`..common.marks.K_ENTRY`), with the devices its ``ovnIfaceList``
names now (:func:`..cni.devices`), and in the runtime's namespace of that ADD
(:data:`..common.marks.K_SANDBOX`: the path ``CNI_NETNS`` gave, checked
against the identity recorded then, never a path the pod names):

* an interface no longer listed is removed, once OVN holds no port for it
  (a list forged to drop one removes nothing while OVN keeps it);
* one listed anew is made as ADD makes it (veth, MAC, MTU, address,
  routes, default route, OVS port), after its ports are confirmed in the
  southbound as ADD confirms them;
* one whose address, MAC or way of configuration changed is replaced;
  one whose routes, default route or MTU changed is mended in place.

It leaves alone a pod an ADD is working on (the ADD queues it when it
ends), one being deleted (DEL's and the sweep's), one whose rows predate
the record (an earlier release: its next sandbox follows), and one with
Multus selections (the Multus dynamic-networks controller calls ADD and
DEL per attachment for those). The pod's own mutations hold its key's lock,
as ADD's and DEL's do.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import logging
import os
import threading

from .. import cni
from ..cluster import annotations, vms
from ..common.errors import Ovn4nfvError
from ..common.marks import K_CONTAINER, K_ENTRY, K_INTERFACE, K_POD_REF, K_SANDBOX, K_UID
from ..common.workqueue import WorkQueue, serve
from ..node.netns import in_netns, netlink, step
from ..ovsdb import connection as ovsdb
from . import kube

LOG = logging.getLogger("ovn4nfv.follow")
LOCKS = 64
WORKERS = 4
# how long one pass waits for the southbound to hold a pod's ports: a
# list naming a port that never comes holds a worker no longer than this
CONFIRM_SECONDS = 5


def canonical(entry):
    return json.dumps(entry, sort_keys=True, separators=(",", ":"))


def identity(entry):
    """What makes an interface another, in the form the southbound confirms
    it (a MAC in any case, an address whatever its prefix): its replacement
    takes a new MAC or address, which OVN must hold first."""
    return (entry.get("interface"), str(entry.get("mac_address") or "").lower(),
            str(entry.get("ip_address") or "").partition("/")[0])


def plan(recorded, desired):
    """``(remove, replace, mend, add)``: interface names, from what was
    applied (``recorded``: ``{interface: entry}``) and what is listed now
    (``desired``)."""
    remove = sorted(i for i in recorded if i not in desired)
    add = sorted(i for i in desired if i not in recorded)
    same = [i for i in desired if i in recorded and canonical(recorded[i]) != canonical(desired[i])]
    replace = sorted(i for i in same if identity(recorded[i]) != identity(desired[i]))
    mend = sorted(i for i in same if i not in replace)
    return remove, replace, mend, add


def _entries(text):
    """The list's entries, each an object naming its interface, or None
    (a list the watcher would never write is followed by no one)."""
    try:
        entries = annotations.parse_iface_list(text)
    except (ValueError, Ovn4nfvError):
        return None
    if all(isinstance(e, dict) and isinstance(e.get("interface"), str) for e in entries):
        return entries
    return None


class Follower:
    """Serves the node agent ``agent`` (its OVS connection, its API client,
    its ADD's steps)."""

    def __init__(self, agent):
        self.agent = agent
        config = agent.config
        self.queue = WorkQueue(base_delay=0.2, max_delay=config.max_backoff_seconds, name="follow")
        self.cache = {}
        self.guard = threading.Lock()       # the cache and the ADDs in flight
        self.adding = {}                    # key -> ADDs in flight
        # container -> a descriptor of its namespace, kept from its ADD: a
        # namespace the runtime mounted after this daemon's mounts were set
        # up (systemd's hardening gives it a mount namespace of its own, and
        # a host whose /run is not shared propagates nothing into it) is
        # reached all the same; after a restart the path is (its mounts are new)
        self.held = {}          # container -> (descriptor, pod UID)
        self.locks = [threading.Lock() for _index in range(LOCKS)]
        self.watch = kube.ListWatch(
            "pods", "V1Pod", self.relist, self._list, self.observe, agent.stopping, config.resync_seconds,
            config.watch_seconds, config.max_backoff_seconds)

    def _list(self, **kwargs):
        return self.agent.core.list_pod_for_all_namespaces(
            field_selector="spec.nodeName=%s" % self.agent.node_name, **kwargs)

    def lock_of(self, key):
        """The lock of the pod ``key``'s mutations (ADD's, DEL's, this one's)."""
        return self.locks[sum(bytearray(key.encode())) % LOCKS]

    # -- lifecycle ---------------------------------------------------------------
    def start(self):
        # several workers: one pod's pass waiting on the southbound holds no other's
        threads = [threading.Thread(target=self.watch.run, name="follow-watch", daemon=True)] + [
            threading.Thread(target=self._work, name="follow-%d" % i, daemon=True) for i in range(WORKERS)]
        for thread in threads:
            thread.start()
        return threads

    def stop(self):
        self.queue.shutdown()
        self.watch.stop()
        self.drop(None, keep_only=())

    def _work(self):
        serve(self.queue, self.handle, LOG, "pod", (Ovn4nfvError, cni.CNIError, kube.ApiException, OSError))

    # -- what queues a pod ---------------------------------------------------------
    def relist(self):
        pods = kube.listed(self._list, "V1PodList")
        fresh = dict(("%s/%s" % (p.metadata.namespace, p.metadata.name), p) for p in pods.items)
        with self.guard:
            self.cache = fresh
        for key in sorted(fresh):
            self.queue.add(key)
        return pods.metadata.resource_version

    def observe(self, pod, deleted=False):
        key = "%s/%s" % (pod.metadata.namespace, pod.metadata.name)
        with self.guard:
            if deleted:
                self.cache.pop(key, None)
            else:
                self.cache[key] = pod
        self.queue.add(key)

    def keep(self, container, path, uid):
        """Keep the namespace an ADD of ``container`` (of the pod ``uid``)
        was given (``path``, the agent's own descriptor of it) until its DEL."""
        # opened from inside it, through /proc: a descriptor of the runtime's
        # mount would keep that mount busy (its unmount would fail)
        handle = in_netns(path, lambda: os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC))
        with self.guard:
            old, self.held[container] = self.held.get(container), (handle, uid)
        if old is not None:
            os.close(old[0])

    def drop(self, container, keep_only=None, uid=None):
        """Let go of ``container``'s namespace; or of every one but those of
        ``keep_only`` (the containers the node still has ports of); or, with
        ``uid``, of the pod's other sandboxes (a new one is being made: the
        old one's namespace must not live on in this daemon's hands)."""
        with self.guard:
            gone = [c for c, (_h, u) in self.held.items() if (c == container if uid is None else u == uid and
                                                              c != container) or
                    (keep_only is not None and c not in keep_only)]
            handles = [self.held.pop(c)[0] for c in gone]
        for handle in handles:
            os.close(handle)

    def begin_add(self, key):
        with self.guard:
            self.adding[key] = self.adding.get(key, 0) + 1

    def end_add(self, key):
        """An ADD of ``key`` ended: a change that came meanwhile is applied now."""
        with self.guard:
            self.adding[key] -= 1
            if not self.adding[key]:
                del self.adding[key]
        self.queue.add(key)

    # -- one pod -----------------------------------------------------------------
    def _rows(self, key, uid):
        """``{container: {interface: (its Interface's name, its marks)}}`` of
        the pod's rows an ADD of the whole pod recorded."""
        def read(idl):
            out = {}
            for iface in idl.tables["Interface"].rows.values():
                ids = iface.external_ids
                if ids.get(K_POD_REF) == key and ids.get(K_UID) == uid and ids.get(K_SANDBOX) and ids.get(K_ENTRY):
                    out.setdefault(ids.get(K_CONTAINER), {})[ids.get(K_INTERFACE)] = (iface.name, dict(ids))
            return out
        return self.agent.ovs.read(read)

    def handle(self, key):
        with self.guard:
            pod = self.cache.get(key)
            busy = key in self.adding
        meta = pod.metadata if pod is not None else None
        if meta is None or busy or meta.deletion_timestamp:
            return
        found = meta.annotations or {}
        if annotations.MULTUS_NETWORKS in found or not found.get(annotations.IFACE_LIST):
            return
        containers = self._rows(key, meta.uid)
        if len(containers) != 1:
            if len(containers) > 1:
                LOG.warning("pod %s: interfaces of %d sandboxes on the node; the sweep's first", key, len(containers))
            return
        entries = _entries(found[annotations.IFACE_LIST])
        if entries is None or len(entries) > annotations.MAX_INTERFACES:
            LOG.debug("pod %s: a list that is none the watcher writes; not followed", key)
            return
        desired = dict((e["interface"], e) for e in cni.devices(entries))
        (container, rows), = containers.items()
        recorded = dict((i, json.loads(ids[K_ENTRY])) for i, (_name, ids) in rows.items())
        owner = vms.owner_of(meta)
        remove, replace, mend, add = plan(recorded, desired)
        if vms.vm_of(owner.name):
            remove = []     # a running VM keeps its ports (the watcher's K_VMI rule): its next launcher follows
        if not (remove or replace or mend or add):
            return
        if replace or add or mend:
            # what is made is what OVN holds, for this launcher where it is a VM's; a port
            # that is not there yet is looked for again later, holding no worker meanwhile
            self.agent._confirm(owner, entries, launcher=meta.uid if vms.vm_of(owner.name) else None,
                                seconds=CONFIRM_SECONDS)
        if remove:
            self._released(owner, remove)
        with self.lock_of(key):
            with self.guard:
                if key in self.adding:
                    return          # an ADD began meanwhile: it queues the pod when it ends
            again = self._rows(key, meta.uid)
            if again != containers:
                self.queue.add(key)
                return              # a DEL, or another pass, changed them: looked at anew
            sandbox = json.loads(next(iter(rows.values()))[1][K_SANDBOX])
            made = self._apply(key, meta, owner, container, sandbox, rows, recorded, desired,
                               (remove, replace, mend, add))
        try:
            # ovn-controller's install is waited for without the pod's lock, as ADD waits
            self.agent._wait_installed(made)
        except Exception:
            with self.lock_of(key):
                self.agent._remove(made, container)
            raise
        LOG.info("pod %s: followed its list: %s", key, "; ".join("%s %s" % (what, ", ".join(names)) for what, names in (
            ("removed", remove), ("replaced", replace), ("mended", mend), ("added", add)) if names))

    def _released(self, owner, interfaces):
        """Raise while OVN still holds a port of this pod for ``interfaces``:
        a list that drops an interface OVN keeps is not the watcher's."""
        remote, tls = self.agent._southbound()
        held = ovsdb.follow_rows(
            remote, ovsdb.SB_SCHEMA, "Port_Binding", ("logical_port", [owner.port_name(i) for i in interfaces]),
            ["logical_port", "external_ids"], lambda rows: [r["logical_port"] for r in rows
                                                            if (r.get("external_ids") or {}).get(K_UID) == owner.uid],
            CONFIRM_SECONDS, tls=tls, field="ovn_sb")
        if held:
            raise cni.CNIError(cni.TRY_AGAIN, "pod %s/%s: OVN still holds %s; its interfaces stay" % (
                owner.namespace, owner.name, ", ".join(held)))

    def _apply(self, key, meta, owner, container, sandbox, rows, recorded, desired, changes):
        remove, replace, mend, add = changes
        try:
            with self.guard:
                kept = self.held.get(container)
            handle = os.dup(kept[0]) if kept is not None else cni.open_netns(sandbox["netns"])
        except cni.CNIError as exc:
            # its sandbox is gone (a reboot, a DEL to come): the next ADD makes the pod anew
            LOG.info("pod %s: %s; nothing changed", key, exc)
            return []
        try:
            stat = os.fstat(handle)
            if "%d:%d" % (stat.st_dev, stat.st_ino) != sandbox.get("id"):
                LOG.warning("pod %s: %s is no longer the namespace its ADD was given; nothing changed", key,
                            sandbox["netns"])
                return []
            cni.check_netns_fd(handle, sandbox["netns"], forbidden=[self.agent.config.node_netns])
            netns = "/proc/%d/fd/%d" % (os.getpid(), handle)
            self.agent._remove([rows[i][0] for i in remove + replace], container)
            if mend:
                self._mend(netns, sandbox, rows, [(recorded[i], desired[i]) for i in mend])
            hosts = [(cni.host_ifname(meta.uid, i), desired[i]) for i in replace + add]
            made = []
            try:
                if hosts:
                    self.agent._veths(netns, hosts, sandbox.get("mtu"), self.agent._netdev(), container, made)
                    self.agent._attach(hosts, owner, meta.namespace, meta.name, meta.uid, container, sandbox)
            except Exception:
                self.agent._remove(made, container)
                raise
            return made
        finally:
            os.close(handle)

    def _mend(self, netns, sandbox, rows, pairs):
        """Interfaces whose routes, default route or MTU changed, in place:
        every route gained first (the default route replaced, so never
        absent), then those no longer listed removed; the MTU of both ends,
        bounded as ADD bounds it."""
        netlink(netns, lambda pod_ns: _mend_routes(pod_ns, pairs))
        for old, new in pairs:
            mtu = cni.entry_mtu(new, sandbox.get("mtu"))
            if mtu and mtu != cni.entry_mtu(old, sandbox.get("mtu")):
                host = rows[new["interface"]][0]
                netlink(netns, lambda pod_ns, m=mtu, n=new["interface"]: pod_ns.link(
                    "set", index=pod_ns.link_lookup(ifname=n)[0], mtu=m))
                self.agent._node(lambda ipr, m=mtu, h=host: ipr.link("set", index=ipr.link_lookup(ifname=h)[0], mtu=m))
        self.agent._record([(rows[new["interface"]][0], new) for _old, new in pairs])


class Sweep:
    """Mixed into the node agent, which provides ``ovs``, ``core``,
    ``node_name``, ``config``, ``stopping``, ``_node`` and ``_remove``."""

    def sweep(self):
        """Remove the product's ports on this node that no pod needs any
        more, and their veths: after a reboot (the devices are gone, the
        OVS database is not), an agent crash, or a CNI DEL that never came
        (the pod is gone from the API). Only ports the product made (an
        ``K_CONTAINER`` mark) are looked at. Without the API only
        the ports whose device is gone are removed. Returns their names."""
        def owned(idl):
            return [(iface.name, iface.external_ids.get(K_UID)) for iface in idl.tables["Interface"].rows.values()
                    if iface.external_ids.get(K_CONTAINER)]
        ports = self.ovs.read(owned)
        if not ports:
            return []
        live = None
        try:
            pods = self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=%s" % self.node_name)
            live = set(pod.metadata.uid for pod in pods.items)
        except Exception as exc:  # noqa: the API may be away; devices are still checked
            LOG.warning("sweep: no pod list (%s); removing only ports whose device is gone", exc)
        present = self._node(lambda ipr: set(link.get_attr("IFLA_IFNAME") for link in ipr.get_links()))
        stale = sorted(name for name, uid in ports
                       if name not in present or (live is not None and uid and uid not in live))
        if stale:
            self._remove(stale)
            LOG.info("sweep: removed %d stale ports: %s", len(stale), ", ".join(stale))
        if self.follower:
            self.follower.drop(None, keep_only=self.ovs.read(lambda idl: set(
                i.external_ids.get(K_CONTAINER) for i in idl.tables["Interface"].rows.values())))
        return stale

    def _sweep_loop(self):
        while not self.stopping.is_set():
            try:
                self.sweep()
            except Exception:  # noqa: logged whole; the next round tries again
                LOG.exception("sweep")
            self.stopping.wait(self.config.sweep_seconds)


def _routes(entry):
    """``{dst: via}`` an entry gives its interface (none for one its DHCP
    configures inside: ADD makes none)."""
    gateway = entry.get("gateway_ip")
    if entry.get("dhcp"):
        return {}
    out = dict((r["dst"], r.get("gw") or gateway) for r in entry.get("routes") or [] if isinstance(r, dict))
    if entry.get("default_gateway") and gateway:
        out["0.0.0.0/0"] = gateway
    return out


def _mend_routes(pod_ns, pairs):
    """Each ``(old, new)`` interface's routes as ``new`` says: all gains
    first (``replace``), then the losses; a default route that moves between
    interfaces is replaced, never deleted between."""
    indexes = {}
    for _old, new in pairs:
        found = pod_ns.link_lookup(ifname=new["interface"])
        if not found:
            raise cni.CNIError(cni.TRY_AGAIN, "interface %s is missing" % new["interface"])
        indexes[new["interface"]] = found[0]
    gained = set()
    for old, new in pairs:
        for dst, via in sorted(_routes(new).items()):
            with step("interface %s: the route to %s via %s" % (new["interface"], dst, via)):
                pod_ns.route("replace", dst=dst, gateway=via, oif=indexes[new["interface"]])
            if dst == "0.0.0.0/0":
                gained.add(dst)
    for old, new in pairs:
        kept = _routes(new)
        for dst, via in sorted(_routes(old).items()):
            if kept.get(dst) == via or dst in gained:
                continue
            try:
                pod_ns.route("del", dst=dst, gateway=via, oif=indexes[new["interface"]])
            except Exception:  # noqa: a route already gone is what is wanted
                pass
