# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the node agent checks a pod's interfaces against: before an ADD,
OVN's southbound (the pod's own annotation is not trusted); for a CHECK,
the pod's namespace against the ADD's result and the interface list."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from .. import cni
from ..cluster import annotations
from ..cluster.pod_addresses import binding_verdict
from ..common.errors import DatabaseUnreachable
from ..common.marks import K_CONTAINER
from ..node.netns import netlink
from ..ovsdb import connection as ovsdb
from ..resources.ovs import MAPPINGS, parse_bridge_mappings

CHECK_FAILED = 103            # plugin-specific CNI error: CHECK found a difference
NOT_IN_OVN = 104              # plugin-specific CNI error: the interface list is not what OVN holds
NO_PHYSNET = 106              # plugin-specific CNI error: a provider network's physnet is not mapped here
BINDING_COLUMNS = ["logical_port", "mac", "port_security", "external_ids", "datapath", "type", "options",
                   "parent_port", "tag"]


class PodTruth:
    """Mixed into the node agent, which provides ``config``, ``ovs``,
    ``_pod`` and ``_entries``."""

    def _confirm(self, pod, entries, macs=True, launcher=None, seconds=None):
        """Refuse an interface list that OVN does not hold: each entry's MAC
        and IP must be in the port security (or static addresses) of the
        pod's port in the southbound, bound to this pod's UID. The pod's
        own annotation is not trusted: whoever may patch the pod may have
        written it. Waits, bounded by ``binding_seconds``, for the port to
        reach the southbound; reads only those ports' rows. ``pod``, who the
        ports belong to (:func:`..cluster.vms.owner_of`); for a VM, the
        asking launcher's UID (``launcher``) must be one the watcher let
        attach them."""
        namespace, name = pod.namespace, pod.name
        ports = [pod.port_name(e["interface"]) for e in entries]
        read = {}

        def decide(rows):
            read["rows"] = rows
            return binding_verdict(pod, entries, [r for r in rows if r["logical_port"] in ports], macs, launcher)
        remote, tls = self._southbound()
        if not remote:
            raise cni.CNIError(cni.TRY_AGAIN, "no southbound to check pod %s/%s against: ovn_sb is not set and "
                               "the node has no external_ids:ovn-remote" % (namespace, name))
        try:
            # with the localnet ports (a provider network's, the gateways'):
            # which physical networks the pod's switches need on this node
            verdict = ovsdb.follow_rows(
                remote, ovsdb.SB_SCHEMA, "Port_Binding", ("logical_port", ports), BINDING_COLUMNS, decide,
                seconds or self.config.binding_seconds, tls=tls, field="ovn_sb", also=[("type", "localnet")])
        except DatabaseUnreachable as exc:
            raise cni.CNIError(cni.TRY_AGAIN, "pod %s/%s: cannot check its interfaces against OVN: %s" % (
                namespace, name, exc))
        if verdict is None:
            raise cni.CNIError(cni.TRY_AGAIN, "pod %s/%s: OVN has no port with port security for %s after %ss%s" % (
                namespace, name, ", ".join(e["interface"] for e in entries), seconds or self.config.binding_seconds,
                " that lets this launcher (UID %s) attach it" % launcher if launcher else ""))
        if verdict:
            raise cni.CNIError(NOT_IN_OVN, "pod %s/%s: its %s annotation is not what OVN holds, refused: %s" % (
                namespace, name, annotations.IFACE_LIST, "; ".join(verdict)))
        self._require_physnets(pod, read["rows"], ports)

    def _require_physnets(self, pod, rows, ports):
        """Refuse, before anything is made, a pod on a provider network
        whose physical network this node does not map to a bridge that
        exists (ovn-controller would only log it, and the pod's interface
        would carry nothing: ovn-kubernetes #5000)."""
        datapaths = set(r["datapath"] for r in rows if r["logical_port"] in ports)
        needed = sorted((r["options"].get("network_name"), r["logical_port"]) for r in rows
                        if r.get("type") == "localnet" and r["datapath"] in datapaths and r["options"].get("network_name"))
        if not needed:
            return

        def node(idl):
            ids = next(iter(idl.tables["Open_vSwitch"].rows.values())).external_ids
            return ids.get(MAPPINGS, ""), set(b.name for b in idl.tables["Bridge"].rows.values())
        text, bridges = self.ovs.read(node)
        mapped = dict(parse_bridge_mappings(text))
        for physnet, localnet in needed:
            if mapped.get(physnet) not in bridges:
                raise cni.CNIError(NO_PHYSNET, "pod %s/%s: its network (localnet port %s) needs physical network %s, "
                                   "which node %s %s (%s: %s); map it there (the ovn_controller role's "
                                   "ovn_controller_physnets) or schedule the pod elsewhere" % (
                                       pod.namespace, pod.name, localnet, physnet, self.node_name,
                                       "does not map" if physnet not in mapped else
                                       "maps to bridge %s, which does not exist" % mapped[physnet],
                                       MAPPINGS, text or "none"))

    def _southbound(self):
        """The southbound remote and TLS files: the settings, or else what
        ``ovn-controller`` on this node uses (``external_ids:ovn-remote`` and
        the Open_vSwitch database's SSL row)."""
        config = self.config

        def node(idl):
            for row in idl.tables["Open_vSwitch"].rows.values():
                ssl = row.ssl[0] if row.ssl else None
                return row.external_ids.get("ovn-remote"), ssl and (ssl.private_key, ssl.certificate, ssl.ca_cert)
            return None, None
        remote, files = self.ovs.read(node)
        if config.ovn_sb or config.sb_private_key:
            return config.ovn_sb or remote, ovsdb.TLS(config.sb_private_key, config.sb_certificate, config.sb_ca_cert)
        return remote, ovsdb.TLS(*(files or ()))

    # -- CHECK -------------------------------------------------------------
    def check(self, request):
        """CHECK as the specification defines it: the interfaces were added
        for this container, and what the pod's interface list and the ADD's
        result (``prevResult``) say exists in the pod, as they say it."""
        namespace, name = self._pod(request)
        uid, _owner, entries = self._entries(namespace, name, request["args"].get("K8S_POD_UID"))
        entries = cni.devices(cni.select_entries(entries, request["ifname"], bool(request["config"].get("provider"))))
        previous = request["config"]["prevResult"]        # checked by cni.check_prev_result
        hosts = [cni.host_ifname(uid, entry["interface"]) for entry in entries]
        owners = self.ovs.read(lambda idl: dict((i.name, i.external_ids.get(K_CONTAINER))
                                                for i in idl.tables["Interface"].rows.values() if i.name in hosts))
        for host, entry in zip(hosts, entries):
            if owners.get(host) != request["container_id"]:
                raise cni.CNIError(CHECK_FAILED, "interface %s was not added for container %s" % (
                    entry["interface"], request["container_id"]))
        # an interface configured by DHCP holds its address inside (a guest's), if anywhere
        wanted = [(e["interface"], e["mac_address"], None if e.get("dhcp") else e["ip_address"]) for e in entries]
        interfaces = previous.get("interfaces", [])
        # an address without an index is CNI_IFNAME's: that interface's, or
        # else the pod's first that holds one (where cni.result puts it, for
        # the runtime)
        inside = [i for i in interfaces if i.get("sandbox")]
        guests = set(e["interface"] for e in entries if e.get("dhcp"))
        listed = set(e["interface"] for e in entries)
        addressed = [i for i in inside if i.get("name") not in guests]
        unindexed = next((i for i in inside if i.get("name") == request["ifname"]),
                         addressed[0] if addressed else None)
        for item in previous.get("ips", []):
            index = item.get("interface")
            target = unindexed if index is None else interfaces[index] if interfaces[index].get("sandbox") else None
            # an address its guest holds (cni.result gives it for a pod of guests' interfaces only);
            # one of an interface the list no longer names went with it (the follower)
            if target is not None and target.get("name") not in guests and target.get("name") in listed:
                wanted.append((target.get("name"), target.get("mac"), item.get("address")))

        def check(pod_ns):
            for interface, mac, address in wanted:
                self._check_interface(pod_ns, interface, mac, address)
        with self._lock("%s/%s" % (namespace, name)):       # not while the follower changes the pod
            netlink(request["pod_netns"], check)

    @staticmethod
    def _check_interface(pod_ns, interface, mac, address):
        found = pod_ns.link_lookup(ifname=interface)
        if not found:
            raise cni.CNIError(CHECK_FAILED, "interface %s is missing" % interface)
        link = pod_ns.get_links(found[0])[0]
        if mac and link.get_attr("IFLA_ADDRESS") != mac:
            raise cni.CNIError(CHECK_FAILED, "interface %s has MAC %s, not %s" % (
                interface, link.get_attr("IFLA_ADDRESS"), mac))
        if address is None:
            return
        ip, _sep, prefix = str(address).partition("/")
        addresses = set((a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in pod_ns.get_addr(index=found[0]))
        if not prefix.isdigit() or (ip, int(prefix)) not in addresses:
            raise cni.CNIError(CHECK_FAILED, "interface %s lacks the address %s" % (interface, address))
