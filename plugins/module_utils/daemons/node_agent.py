# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node agent: the CNI plugin's worker on each node.

Run as ``python -m <package>.daemons.node_agent --config FILE``. It listens on a
unix socket for the CNI entry point (:mod:`.cni`), keeps its OVSDB
connection to the local Open vSwitch open between calls, and does the work
with pyroute2 (netlink). For an ``ADD`` it waits for the pod's
``ovnIfaceList`` through a Kubernetes watch (bounded), then for each
interface: a veth pair whose node side has a stable name, the MAC, the IP,
the MTU and the routes in the pod, the default route only where flagged,
``tx`` checksum offload off on the pod side (the userspace datapath drops
partial checksums), and the node side on ``br-int`` with
``external_ids:iface-id`` set to the logical port. It then waits on the OVS
update stream until ``ovn-controller`` marks the port ``ovn-installed``. A
failed ADD removes what it made; DEL is idempotent. At start and every
``sweep_seconds`` it removes the ports of pods that are no longer on the
node (:meth:`NodeAgent.sweep`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import hashlib
import json
import logging
import os
import socket
import threading
import time

from .. import cni
from ..cluster import annotations, vms
from ..common.errors import Ovn4nfvError, ValidationError
from ..common.marks import (
    CNI_TYPE, DEFAULT_SOCKET, IPAM_TYPE, K_CONTAINER, K_ENTRY, K_INTERFACE, K_POD_REF, K_SANDBOX, K_UID, NODE_AGENT,
    VETH_ALIAS_PREFIX)
from ..node import port_mirrors
from ..node.netns import HAS_NETLINK, netlink, step, tx_off
from ..ovsdb import connection as ovsdb
from ..ovsdb.execution import execute, reconcile
from ..resources.ovs import OVS_TABLES, Port
from . import agent_socket, pod_follow, settings as daemon
from .ovs_attachment import INTERFACE_EXISTS, OvsAttachment, vlan_ranges
from .pod_truth import PodTruth

try:
    from kubernetes import client as k8s_client
    from kubernetes import watch as k8s_watch
    HAS_AGENT_LIBRARIES = HAS_NETLINK
except ImportError:  # pragma: no cover - the agent needs them; modules do not
    HAS_AGENT_LIBRARIES = False

LOG = logging.getLogger("ovn4nfv.node_agent")
ANNOTATION_TIMEOUT = 101      # plugin-specific CNI error: the watcher wrote nothing in time
NOT_INSTALLED = 102           # plugin-specific CNI error: ovn-controller did not install the port
POD_REPLACED = 105            # plugin-specific CNI error: the pod of that name is not the sandbox's (K8S_POD_UID)


def veth_alias(container, interface):
    """The mark on a pod's node-side veth: the container (a digest: an
    alias holds 255 bytes) and the pod's interface name."""
    return VETH_ALIAS_PREFIX + "%s %s" % (hashlib.sha256(container.encode()).hexdigest()[:24], interface)


class AgentConfig(daemon.Settings):
    """The agent's settings: a JSON file, then ``OVN4NFV_AGENT_<KEY>``
    environment variables, then these defaults."""

    NAME = "node agent"
    ENV_PREFIX = "OVN4NFV_AGENT_"
    LIBRARIES = ("ovsdbapp", "pyroute2", "kubernetes")
    DEFAULTS = {"socket": DEFAULT_SOCKET, "ovs_db": ovsdb.DEFAULT_OVS_DB, "kubeconfig": None,
                "bridge": "br-int", "annotation_seconds": 60, "install_seconds": 30, "ovsdb_timeout": 10,
                # where br-int and the node sides of the veths live; None: the agent's own
                "node_netns": None,
                # this node's name in Kubernetes (spec.nodeName); None: the host name
                "node_name": None,
                # how often stale ports are looked for (and at start)
                "sweep_seconds": 60,
                # the southbound the pod's interface list is checked against, and
                # its TLS files; None: ovn-controller's (external_ids:ovn-remote,
                # the SSL row of the node's Open_vSwitch database)
                "ovn_sb": None, "sb_private_key": None, "sb_certificate": None, "sb_ca_cert": None,
                # how long a pod's port may take to reach the southbound
                "binding_seconds": 30,
                # the plain OVS bridges "mode: ovs" may attach pods to, each with
                # the VLANs allowed on it ("100", "200-299"; 0 is untagged)
                "ovs_bridges": {},
                # the socket's bounds: open connections (one more is refused at
                # once), seconds a connection has to send its request, and the
                # threads that answer requests
                "max_connections": 512, "request_seconds": 10, "workers": 64,
                # a running pod's interfaces follow its list (the follower), and
                # how it lists and watches the node's pods
                "follow": True, "resync_seconds": 300, "watch_seconds": 10, "max_backoff_seconds": 30}

    def check(self):
        if not isinstance(self.ovs_bridges, dict):
            raise ValidationError("node agent config: ovs_bridges must map bridge names to lists of VLANs")
        if self.bridge in self.ovs_bridges:
            raise ValidationError("node agent config: ovs_bridges may not name %s, the bridge OVN owns" % self.bridge)
        for bridge, vlans in self.ovs_bridges.items():
            try:
                vlan_ranges(vlans, "ovs_bridges.%s" % bridge)
            except ValueError as exc:
                raise ValidationError("node agent config: %s" % exc)
        for field, low in (("max_connections", 1), ("request_seconds", 1), ("workers", 1), ("resync_seconds", 1),
                           ("watch_seconds", 1), ("max_backoff_seconds", 1)):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValidationError("node agent config: %s must be a whole number of at least %d, not %r" % (
                    field, low, value))


class NodeAgent(OvsAttachment, PodTruth, pod_follow.Sweep):
    """Serves CNI requests; :meth:`run` blocks until :meth:`stop`."""

    def __init__(self, config, api_client=None):
        if not HAS_AGENT_LIBRARIES:
            raise Ovn4nfvError("the node agent needs pyroute2 and the kubernetes client")
        self.config = config
        if api_client is None:
            api_client = daemon.kubernetes_api_client(config.kubeconfig)
        self.core = k8s_client.CoreV1Api(api_client)
        self.ovs = ovsdb.Database(config.ovs_db, ovsdb.OVS_SCHEMA, OVS_TABLES + ("SSL", "Mirror"),
                                  timeout=config.ovsdb_timeout, field="ovs_db")
        self.server = None
        self.node_name = config.node_name or socket.gethostname()
        self.stopping = threading.Event()
        self.follower = pod_follow.Follower(self) if config.follow else None

    # -- the socket ----------------------------------------------------------
    def run(self):
        """Serve until :meth:`stop`."""
        if os.path.exists(self.config.socket):
            os.unlink(self.config.socket)
        os.makedirs(os.path.dirname(self.config.socket) or ".", exist_ok=True)
        self.server = agent_socket.BoundedServer(
            self.config.socket, self.answer, self.abandoned, workers=self.config.workers,
            max_connections=self.config.max_connections, request_seconds=self.config.request_seconds)
        LOG.info("listening on %s", self.config.socket)
        daemon.notify_ready()       # systemd (Type=notify): a node is booted once its agent listens
        sweeper = threading.Thread(target=self._sweep_loop, name="sweep", daemon=True)
        sweeper.start()
        following = self.follower.start() if self.follower else []
        try:
            self.server.serve()
        finally:
            self.stopping.set()
            if self.follower:
                self.follower.stop()
            for thread in following:
                thread.join(self.config.ovsdb_timeout)
            sweeper.join(self.config.ovsdb_timeout * 2)
            self.ovs.close()

    def stop(self, *_args):
        self.stopping.set()
        if self.server is not None:
            self.server.stop()

    def answer(self, line, fds=()):
        """One request from the plugin: its JSON line and the descriptors
        it sent (the pod's namespace, opened and checked by the plugin)."""
        version = cni.SPEC_VERSION
        try:
            message = json.loads(line.decode() or "null")
            request = cni.parse_request(message["env"], message["stdin"], open_path=False)
            request["env"], request["stdin"] = message["env"], message["stdin"]
            if request["command"] in ("ADD", "CHECK"):
                request["pod_netns"] = self._pod_netns(request, fds)
            version = request["version"]
            command = request["command"]
            config = request["config"]
            if config.get("mode") == "ovs":
                return {"result": self.ovs_attachment(request)}
            ipam = config.get("ipam") if isinstance(config.get("ipam"), dict) else {}
            if config.get("type") != CNI_TYPE and ipam.get("type") == IPAM_TYPE:
                # an address for another plugin (macvlan, ...): nothing to build
                return {"result": self.ipam_add(request, ipam) if command == "ADD" else None}
            if command == "ADD":
                return {"result": self.add(request)}
            if command == "DEL":
                self.delete(request)
                return {"result": None}
            if command == "CHECK":
                self.check(request)
                return {"result": None}
            return {"result": None}         # STATUS: reachable and connected; GC: nothing kept
        except cni.CNIError as exc:
            return {"error": exc.to_json(version)}
        except (ValueError, KeyError, TypeError) as exc:
            return {"error": cni.CNIError(cni.DECODE_FAILURE, "unreadable request: %s" % exc).to_json(version)}
        except Exception as exc:  # noqa: a CNI error, never a dead connection
            LOG.exception("request failed")
            return {"error": cni.CNIError(cni.IO_FAILURE, str(exc)).to_json(version)}

    def abandoned(self, line, reply):
        """The plugin gave up (its timeout) before the agent answered: an
        ADD that succeeded is undone, as a DEL of the same request, so that
        the runtime's retry starts clean."""
        try:
            message = json.loads(line.decode())
            if message["env"].get("CNI_COMMAND") != "ADD" or "error" in reply:
                return
            message["env"] = dict(message["env"], CNI_COMMAND="DEL")
            undone = self.answer(json.dumps(message).encode(), [])
            LOG.warning("ADD of %s was abandoned by the plugin; rolled back%s", message["env"].get("CNI_CONTAINERID"),
                        "" if "error" not in undone else ": %s" % undone["error"].get("msg"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            LOG.warning("an abandoned request could not be undone: %s", exc)

    def _pod_netns(self, request, fds):
        """A path to the namespace the plugin opened and sent: the agent's
        own descriptor of it (``/proc/<pid>/fd/<n>``), which names that
        namespace whatever ``CNI_NETNS`` has become since. Checked again
        here, against the agent's own and the node's namespace."""
        if len(fds) != 1:
            raise cni.CNIError(cni.INVALID_ENVIRONMENT, "CNI_NETNS: the plugin sent %d namespace descriptors, "
                               "not 1" % len(fds))
        cni.check_netns_fd(fds[0], request["netns"], forbidden=[self.config.node_netns])
        return "/proc/%d/fd/%d" % (os.getpid(), fds[0])

    # -- the pod's interface list ------------------------------------------------
    def _pod(self, request):
        args = request["args"]
        namespace, name = args.get("K8S_POD_NAMESPACE"), args.get("K8S_POD_NAME")
        if not namespace or not name:
            raise cni.CNIError(cni.INVALID_ENVIRONMENT, "CNI_ARGS: K8S_POD_NAMESPACE and K8S_POD_NAME are needed")
        return namespace, name

    def _await_pod(self, namespace, name, ready, what, uid=None):
        """The pod once ``ready(annotations)`` is true: read it, then follow
        it with a watch, bounded by ``annotation_seconds``. With ``uid``
        (``K8S_POD_UID``, which runtimes pass), a pod of that name with
        another UID is refused at once: the pod the sandbox was made for
        is gone, and this one's interfaces are not its to take."""
        def found(pod):
            if pod.metadata.name != name:
                return False
            if uid and pod.metadata.uid != uid:
                raise cni.CNIError(POD_REPLACED, "pod %s/%s is another pod now (UID %s); this sandbox was made "
                                   "for UID %s, which is gone" % (namespace, name, pod.metadata.uid, uid))
            return ready(pod.metadata.annotations or {})
        field = "metadata.name=%s" % name
        pods = self.core.list_namespaced_pod(namespace, field_selector=field)
        for pod in pods.items:
            if found(pod):
                return pod
        watch = k8s_watch.Watch()
        for event in watch.stream(self.core.list_namespaced_pod, namespace, field_selector=field,
                                  resource_version=pods.metadata.resource_version,
                                  timeout_seconds=self.config.annotation_seconds):
            pod = event["object"]
            if found(pod):
                watch.stop()
                return pod
        raise cni.CNIError(ANNOTATION_TIMEOUT, "pod %s/%s has no %s after %ss; is the watcher running?" % (
            namespace, name, what, self.config.annotation_seconds))

    def _entries(self, namespace, name, uid=None, ifname=None):
        """The pod's UID, who its ports belong to (the pod, or the VM it
        launches: :func:`..cluster.vms.owner_of`) and its ``ovnIfaceList``,
        once the watcher wrote it (naming ``ifname``, for one attachment:
        one the Multus dynamic-networks controller adds to a running pod
        may come before the watcher served the change)."""
        def ready(found):
            text = found.get(annotations.IFACE_LIST)
            if not text or ifname is None:
                return bool(text)
            try:
                return any(isinstance(e, dict) and e.get("interface") == ifname
                           for e in annotations.parse_iface_list(text))
            except (ValueError, ValidationError):
                return False
        pod = self._await_pod(namespace, name, ready, annotations.IFACE_LIST + (
            " naming %s" % ifname if ifname else ""), uid)
        return pod.metadata.uid, vms.owner_of(pod.metadata), annotations.parse_iface_list(
            pod.metadata.annotations[annotations.IFACE_LIST])

    def ipam_add(self, request, ipam):
        """ovn4nfv-ipam: the address the watcher took for this attachment
        (``<provider>.kubernetes.io/*``), as a CNI IPAM result."""
        namespace, name = self._pod(request)
        provider = ipam.get("provider")
        if not provider:
            raise cni.CNIError(cni.INVALID_CONFIG, "ipam.provider: %s needs <nad>.<namespace>" % IPAM_TYPE)
        prefix = provider + ".kubernetes.io/"
        pod = self._await_pod(namespace, name, lambda found: found.get(prefix + "allocated") == "true",
                              prefix + "allocated", request["args"].get("K8S_POD_UID"))
        found = pod.metadata.annotations
        owner = vms.owner_of(pod.metadata)
        self._confirm(owner, [
            {"interface": request["ifname"], "mac_address": None, "ip_address": found[prefix + "ip_address"]}],
            macs=False, launcher=pod.metadata.uid if vms.vm_of(owner.name) else None)
        length = found[prefix + "cidr"].split("/", 1)[1]
        address = {"address": "%s/%s" % (found[prefix + "ip_address"], length), "gateway": found[prefix + "gateway"]}
        if request["version"].startswith("0."):
            address["version"] = "6" if ":" in address["address"] else "4"
        LOG.info("IPAM %s/%s %s: %s", namespace, name, provider, address["address"])
        return {"cniVersion": request["version"], "ips": [address], "routes": [], "dns": {}}

    # -- ADD ---------------------------------------------------------------
    def add(self, request):
        namespace, name = self._pod(request)
        key = "%s/%s" % (namespace, name)
        if self.follower:
            self.follower.begin_add(key)
        try:
            return self._add(request, namespace, name, key)
        finally:
            if self.follower:
                self.follower.end_add(key)      # a change of its list meanwhile is followed now

    def _add(self, request, namespace, name, key):
        marks = [("", time.monotonic())]      # where an ADD's time goes, in its log line
        config = request["config"]
        uid, owner, entries = self._entries(namespace, name, request["args"].get("K8S_POD_UID"),
                                            request["ifname"] if config.get("provider") else None)
        marks.append(("api", time.monotonic()))
        entries = cni.select_entries(entries, request["ifname"], bool(config.get("provider")))
        self._confirm(owner, entries, launcher=uid if vms.vm_of(owner.name) else None)
        marks.append(("sb", time.monotonic()))
        entries = cni.devices(entries)
        netns = request["pod_netns"]
        taken = netlink(netns, lambda pod_ns: [e["interface"] for e in entries if pod_ns.link_lookup(
            ifname=e["interface"])])
        if taken:
            raise cni.CNIError(INTERFACE_EXISTS, "interface %s already exists in %s" % (taken[0], request["netns"]))
        netdev = self._netdev()
        hosts = [(cni.host_ifname(uid, entry["interface"]), entry) for entry in entries]
        made = []       # the veths this ADD made: only those are undone
        # where the runtime's namespace is, for the follower: a whole pod's ADD only; a
        # sandbox of the pod before this one is over (its namespace must not live on here)
        if self.follower and not config.get("provider"):
            self.follower.drop(request["container_id"], uid=uid)
        stat = os.stat(netns)
        sandbox = None if config.get("provider") else {
            "netns": request["netns"], "id": "%d:%d" % (stat.st_dev, stat.st_ino), "mtu": config.get("mtu")}
        try:
            with self._lock(key):
                self._veths(netns, hosts, config.get("mtu"), netdev, request["container_id"], made)
                marks.append(("netlink", time.monotonic()))
                self._attach(hosts, owner, namespace, name, uid, request["container_id"], sandbox)
            marks.append(("ovs", time.monotonic()))
            self._wait_installed(made)
            marks.append(("installed", time.monotonic()))
        except Exception:
            self._remove(made, request["container_id"])
            raise
        if sandbox is not None and self.follower:
            self.follower.keep(request["container_id"], netns, uid)
        macs = self._node(lambda ipr: [
            (host, ipr.get_links(ipr.link_lookup(ifname=host)[0])[0].get_attr("IFLA_ADDRESS")) for host in made])
        LOG.info("ADD %s/%s: %s (%s)", namespace, name, ", ".join(e["interface"] for e in entries), " ".join(
            "%s=%.1fms" % (step, (at - marks[index][1]) * 1000) for index, (step, at) in enumerate(marks[1:])))
        return cni.result(request["version"], entries, request["netns"], macs,
                          None if config.get("provider") else request["ifname"])

    def _node(self, function):
        """``function(ipr)`` with netlink in the node's network namespace."""
        return netlink(self.config.node_netns or None, function)

    def _netdev(self):
        def datapath(idl):
            for bridge in idl.tables["Bridge"].rows.values():
                if bridge.name == self.config.bridge:
                    return bridge.datapath_type
            return None
        kind = self.ovs.read(datapath)
        if kind is None:
            raise cni.CNIError(cni.TRY_AGAIN, "bridge %s does not exist yet; is ovn-controller running?" %
                               self.config.bridge)
        return kind == "netdev"

    def _veths(self, netns, hosts, default, netdev, container, made):
        """A veth for each ``(host, entry)``: made from the node's side (one
        netlink handle there), then set up from the pod's (one there); its
        MTU the entry's (its network's), else ``default`` (the config's)."""
        def node_side(ipr):
            for host, entry in hosts:
                mtu = cni.entry_mtu(entry, default)
                # one netlink request makes both ends or neither; a name taken
                # by an interface that is not ours fails it, and is left alone;
                # one of this pod's earlier sandbox (its DEL never came) goes
                for index in ipr.link_lookup(ifname=host):
                    alias = ipr.get_links(index)[0].get_attr("IFLA_IFALIAS") or ""
                    if alias.startswith(VETH_ALIAS_PREFIX) and alias != veth_alias(container, entry["interface"]):
                        ipr.link("del", index=index)
                with step("interface %s: the veth pair (%s on the node)" % (entry["interface"], host)):
                    ipr.link("add", ifname=host, kind="veth", peer={"ifname": entry["interface"], "net_ns_fd": netns})
                made.append(host)
                up = "interface %s: its node side %s up%s" % (entry["interface"], host, " with MTU %s" % mtu if mtu else "")
                with step(up):
                    index = ipr.link_lookup(ifname=host)[0]
                    # the container's mark on the node side, for a DEL that comes
                    # before the OVS port was made (or after it was lost)
                    ipr.link("set", index=index, ifalias=veth_alias(container, entry["interface"]))
                    ipr.link("set", index=index, state="up", **({"mtu": mtu} if mtu else {}))

        def pod_side(pod_ns):
            for _host, entry in hosts:
                mtu = cni.entry_mtu(entry, default)
                name = entry["interface"]
                ip, _sep, prefix = entry["ip_address"].partition("/")
                settings = {"address": entry["mac_address"], "state": "up"}
                if mtu:
                    settings["mtu"] = mtu
                with step("interface %s: MAC %s%s and up" % (name, entry["mac_address"],
                                                             ", MTU %s" % mtu if mtu else "")):
                    index = pod_ns.link_lookup(ifname=name)[0]
                    pod_ns.link("set", index=index, **settings)
                if netdev:
                    with step("interface %s: transmit checksum offload off" % name):
                        tx_off(name)        # this thread is in the pod's namespace
                if entry.get("dhcp"):
                    continue        # configured inside, by its network's DHCP: no address, no route
                with step("interface %s: the address %s" % (name, entry["ip_address"])):
                    pod_ns.addr("add", index=index, address=ip, prefixlen=int(prefix))
                gateway = entry.get("gateway_ip")
                for route in entry.get("routes") or []:
                    with step("interface %s: the route to %s via %s" % (name, route["dst"], route.get("gw") or gateway)):
                        pod_ns.route("add", dst=route["dst"], gateway=route.get("gw") or gateway, oif=index)
                if entry.get("default_gateway") and gateway:
                    with step("interface %s: the default route via %s" % (name, gateway)):
                        pod_ns.route("add", dst="0.0.0.0/0", gateway=gateway, oif=index)
        self._node(node_side)
        netlink(netns, pod_side)

    def _attach(self, hosts, owner, namespace, name, uid, container_id, sandbox=None):
        """The OVS ports of the pod's veths, each naming its logical port
        (``owner``'s: a VM's launcher attaches the VM's); with ``sandbox``
        (a whole pod's), where its namespace is and each entry as applied."""
        config = [{"name": host, "bridge": self.config.bridge, "external_ids": dict({
            "iface-id": owner.port_name(entry["interface"]), "attached-mac": entry["mac_address"],
            K_UID: uid, K_CONTAINER: container_id, K_INTERFACE: entry["interface"],
            K_POD_REF: "%s/%s" % (namespace, name)}, **({} if sandbox is None else {
                K_SANDBOX: pod_follow.canonical(sandbox), K_ENTRY: pod_follow.canonical(entry)}))}
            for host, entry in hosts]
        reconcile(Port(), config, "merged", self.ovs)
        self.follow_taps()

    def _record(self, hosts):
        """Each ``(host, entry)``'s entry as now applied, on its OVS row."""
        reconcile(Port(), [{"name": host, "bridge": self.config.bridge, "external_ids": {
            K_ENTRY: pod_follow.canonical(entry)}} for host, entry in hosts], "merged", self.ovs)

    def _lock(self, key):
        """The pod's mutations, one at a time with the follower's."""
        return self.follower.lock_of(key) if self.follower else contextlib.suppress()

    def follow_taps(self):
        """Make the node's taps' mirrors from their declarations, with the
        ports there are now: a pod made again is tapped again. A tap that
        cannot be made is logged; it never fails a pod's ADD or DEL."""
        try:
            plan = execute(self.ovs, lambda view: port_mirrors.plan_follow(view, self.config.bridge), write=True)
            if plan.changed:
                LOG.info("taps: %s", "; ".join(plan.operations()))
        except Ovn4nfvError as exc:
            LOG.warning("taps: %s", exc)

    def _wait_installed(self, hosts):
        def installed(idl):
            ready = set()
            for iface in idl.tables["Interface"].rows.values():
                if iface.name in hosts and iface.external_ids.get("ovn-installed") == "true":
                    ready.add(iface.name)
            return ready == set(hosts)
        if not self.ovs.wait_for(installed, self.config.install_seconds):
            raise cni.CNIError(NOT_INSTALLED, "ovn-controller did not install %s within %ss" % (
                ", ".join(hosts), self.config.install_seconds))

    # -- DEL ---------------------------------------------------------------
    def delete(self, request):
        """Remove the container's interfaces and ports; called once per
        attachment (a ``provider`` in the config), only ``CNI_IFNAME``'s."""
        args, container = request["args"], request["container_id"]
        key = "%s/%s" % (args.get("K8S_POD_NAMESPACE"), args.get("K8S_POD_NAME")) if args.get("K8S_POD_NAME") else \
            self.ovs.read(lambda idl: next((i.external_ids.get(K_POD_REF) for i in idl.tables["Interface"].rows.values()
                                            if i.external_ids.get(K_CONTAINER) == container), None)) or container
        with self._lock(key):
            self._delete(request)

    def _delete(self, request):
        container = request["container_id"]
        if self.follower:
            self.follower.drop(container)
        only = request["ifname"] if request["config"].get("provider") else None
        hosts = self.ovs.read(lambda idl: set(
            iface.name for iface in idl.tables["Interface"].rows.values()
            if iface.external_ids.get(K_CONTAINER) == container
            and (only is None or iface.external_ids.get(K_INTERFACE) == only)))
        prefix = veth_alias(container, only or "")
        hosts |= self._node(lambda ipr: set(link.get_attr("IFLA_IFNAME") for link in ipr.get_links()
                                            if (link.get_attr("IFLA_IFALIAS") or "").startswith(prefix)))
        hosts = sorted(hosts)
        self._remove(hosts, container)
        LOG.info("DEL %s: %s", container, ", ".join(hosts) or "nothing left")

    def _remove(self, hosts, container=None):
        """Remove the veths ``hosts`` (ours: made by this request, or
        marked for its container) and those of their OVS ports that carry
        the product's mark, ``container``'s when it is given: a port of
        that name that is not ours stays."""
        if not hosts:
            return
        ours = self.ovs.read(lambda idl: [
            iface.name for iface in idl.tables["Interface"].rows.values()
            if iface.name in hosts and iface.external_ids.get(K_CONTAINER)
            and container in (None, iface.external_ids.get(K_CONTAINER))])
        if ours:
            reconcile(Port(), [{"name": host} for host in ours], "deleted", self.ovs)
            self.follow_taps()

        def gone(ipr):
            for host in hosts:
                for index in ipr.link_lookup(ifname=host):
                    ipr.link("del", index=index)
        self._node(gone)


def main(argv=None):
    return daemon.run(NODE_AGENT, __doc__.split("\n", 1)[0], AgentConfig, NodeAgent, argv)


if __name__ == "__main__":
    raise SystemExit(main())
