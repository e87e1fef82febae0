# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node agent's OVS bridge attachment, the ovs-cni design: a pod
interface as an access (or trunk) port of a plain OVS bridge, its
addresses from the IPAM plugin the configuration names."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import logging
import os
import subprocess

from .. import cni
from ..common.marks import K_CONTAINER
from ..node.netns import netlink, tx_off
from ..ovsdb.execution import reconcile
from ..resources.ovs import Port

LOG = logging.getLogger("ovn4nfv.node_agent")

INTERFACE_EXISTS = 100        # plugin-specific CNI error: ADD onto an existing interface


def vlan_ranges(values, field):
    """``["100", "200-299", 0]`` as ``[(100, 100), (200, 299), (0, 0)]``;
    0 is an untagged port. Raises ValueError naming ``field``."""
    ranges = []
    for value in values if isinstance(values, list) else [None]:
        low, _sep, high = str(value).partition("-")
        if isinstance(value, bool) or not low.isdigit() or not (high or low).isdigit() \
                or not 0 <= int(low) <= int(high or low) <= 4094:
            raise ValueError("%s: %r is not a VLAN (0-4094, 0 for untagged) or a range a-b of them" % (field, value))
        ranges.append((int(low), int(high or low)))
    return ranges


def _vlan(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 4094


class OvsAttachment:
    """Mixed into the node agent, which provides ``ovs``, ``_node`` and
    ``_remove``."""

    # -- the OVS bridge attachment (the ovs-cni design) -------------------------
    def _allowed(self, bridge, vlans):
        """Only the bridges and VLANs the node lists (``ovs_bridges``): a
        NetworkAttachmentDefinition's author must not put a pod on the
        underlay's bridge, the external one or ``br-int``."""
        allowed = self.config.ovs_bridges or {}
        if bridge not in allowed:
            raise cni.CNIError(cni.INVALID_CONFIG, "bridge: %r is not a bridge this node lets pods attach to "
                               "(ovs_bridges: %s)" % (bridge, ", ".join(sorted(allowed)) or "none"))
        ranges = vlan_ranges(allowed[bridge], "ovs_bridges")
        refused = sorted(set(v for v in vlans if not any(low <= v <= high for low, high in ranges)))
        if refused:
            raise cni.CNIError(cni.INVALID_CONFIG, "vlan: %s on %s is outside what this node allows (%s)" % (
                ", ".join(str(v) for v in refused), bridge, ", ".join(str(r) for r in allowed[bridge])))

    def ovs_attachment(self, request):
        """``{"type": "ovn4nfv", "mode": "ovs", "bridge": ..., "vlan": N}``:
        the interface as an access port of a plain OVS bridge (or a trunk,
        with ``trunk: [{"id": N} | {"minID": a, "maxID": b}]``); its
        addresses from the ``ipam`` plugin the config names, as CNI
        plugins delegate."""
        config, command = request["config"], request["command"]
        bridge, vlan = config.get("bridge"), config.get("vlan")
        if not bridge:
            raise cni.CNIError(cni.INVALID_CONFIG, "bridge: mode ovs needs the OVS bridge to attach to")
        if vlan is not None and not _vlan(vlan):
            raise cni.CNIError(cni.INVALID_CONFIG, "vlan: %r is not a VLAN ID (0-4094)" % (vlan,))
        trunks = []
        for item in config.get("trunk") or []:
            low = high = None
            if isinstance(item, dict):
                low, high = item.get("id", item.get("minID")), item.get("id", item.get("maxID"))
            if not (_vlan(low) and _vlan(high) and low <= high):
                raise cni.CNIError(cni.INVALID_CONFIG, "trunk: %r is not a VLAN or a range of them" % (item,))
            trunks.extend(range(low, high + 1))
        if command != "DEL":
            self._allowed(bridge, [vlan or 0] + trunks)
        host = cni.host_ifname(request["container_id"], request["ifname"])
        if command == "DEL":
            self._remove([host], request["container_id"])
            if config.get("ipam"):
                self._delegate_ipam(request)
            return None
        if command != "ADD":
            return None
        if not self.ovs.read(lambda idl: any(b.name == bridge for b in idl.tables["Bridge"].rows.values())):
            raise cni.CNIError(cni.INVALID_CONFIG, "bridge: OVS bridge %s does not exist on this node" % bridge)
        pod_netns = request["pod_netns"]
        if netlink(pod_netns, lambda pod_ns: pod_ns.link_lookup(ifname=request["ifname"])):
            raise cni.CNIError(INTERFACE_EXISTS, "interface %s already exists in %s" % (
                request["ifname"], request["netns"]))
        addresses = self._delegate_ipam(request) if config.get("ipam") else {"ips": [], "routes": []}
        netdev = self.ovs.read(lambda idl: any(b.name == bridge and b.datapath_type == "netdev"
                                               for b in idl.tables["Bridge"].rows.values()))
        made = []       # the veth, once this request made it: only that is undone
        try:
            def node_side(ipr):
                ipr.link("add", ifname=host, kind="veth",
                         peer={"ifname": request["ifname"], "net_ns_fd": pod_netns})
                made.append(host)
                ipr.link("set", index=ipr.link_lookup(ifname=host)[0], state="up")

            def pod_side(pod_ns):
                index = pod_ns.link_lookup(ifname=request["ifname"])[0]
                pod_ns.link("set", index=index, state="up", **({"mtu": config["mtu"]} if config.get("mtu") else {}))
                for address in addresses.get("ips") or []:
                    ip, _sep, prefix = address["address"].partition("/")
                    pod_ns.addr("add", index=index, address=ip, prefixlen=int(prefix))
                for route in addresses.get("routes") or []:
                    pod_ns.route("add", dst=route["dst"], gateway=route.get("gw"), oif=index)
                if netdev:
                    tx_off(request["ifname"])       # this thread is in the pod's namespace
                return pod_ns.get_links(index)[0].get_attr("IFLA_ADDRESS")
            self._node(node_side)
            mac = netlink(pod_netns, pod_side)
            port = {"name": host, "bridge": bridge, "external_ids": {K_CONTAINER: request["container_id"]}}
            if vlan is not None:
                port["tag"] = vlan
            if trunks:
                port["trunks"] = trunks
            reconcile(Port(), [port], "merged", self.ovs)
        except Exception:
            self._remove(made, request["container_id"])
            if config.get("ipam"):
                # the addresses go back too, or a retry would be given others
                try:
                    self._delegate_ipam(dict(request, env=dict(request["env"], CNI_COMMAND="DEL")))
                except Exception:  # noqa: the ADD's own error is the one to report
                    LOG.exception("IPAM DEL after a failed ADD of %s", request["container_id"])
            raise
        ips = [dict(a, interface=0) for a in addresses.get("ips") or []]
        return {"cniVersion": request["version"], "interfaces": [
            {"name": request["ifname"], "mac": mac, "sandbox": request["netns"]}],
            "ips": ips, "routes": addresses.get("routes") or [], "dns": {}}

    def _delegate_ipam(self, request):
        """Run the IPAM plugin the config names, from CNI_PATH, with the
        same request, as CNI plugins delegate; return its result."""
        kind = request["config"]["ipam"].get("type")
        if not kind or "/" in kind:
            raise cni.CNIError(cni.INVALID_CONFIG, "ipam.type: %r is not a plugin name" % kind)
        for directory in request["env"].get("CNI_PATH", "").split(":"):
            path = os.path.join(directory, kind)
            if directory and os.path.isfile(path) and os.access(path, os.X_OK):
                break
        else:
            raise cni.CNIError(cni.INVALID_CONFIG, "ipam.type: no plugin %s in CNI_PATH" % kind)
        proc = subprocess.run([path], input=request["stdin"], env=request["env"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
        try:
            answer = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except ValueError:
            raise cni.CNIError(cni.IO_FAILURE, "IPAM plugin %s answered no JSON: %s" % (kind, proc.stdout[:200]))
        if proc.returncode != 0:
            raise cni.CNIError(answer.get("code", cni.IO_FAILURE), "IPAM plugin %s: %s" % (
                kind, answer.get("msg", proc.stderr.strip()[:200])))
        return answer
