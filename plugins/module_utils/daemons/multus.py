# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's side of Multus: which of a pod's selections are the
product's, and the interface requests they make. A
NetworkAttachmentDefinition is untrusted input like the pod: its config is
read within the same size and depth limits."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..cluster import annotations, networks as vn, pod_ports, request_schema
from ..common.errors import ValidationError
from ..common.marks import CNI_TYPE, IPAM_TYPE, K_UID
from ..ovsdb.view import View

try:
    from kubernetes.client.rest import ApiException
except ImportError:  # pragma: no cover - the watcher needs it; modules do not
    class ApiException(Exception):
        """Stands for the client's exception where the client is missing."""
        status = None


class Attachments:
    """Resolves Multus selections with the API (the NADs) and the NB."""

    def __init__(self, custom, nb, addresses):
        self.custom = custom
        self.nb = nb
        self.addresses = addresses

    def requests(self, found, selections, uid=None):
        """Requests for the Multus attachments that are the product's: a
        NetworkAttachmentDefinition of type ovn4nfv, or one whose IPAM is
        ovn4nfv-ipam. Others belong to other plugins and are left alone.
        From an ``ip_pool`` the pod (of ``uid``) keeps the address its port
        already holds, and else takes the first free one: the pod is served
        again (its own patch is an event), and the address it holds is not
        free but its own."""
        requests = []
        for selection in selections:
            where = selection["where"]
            config = self.nad_config(selection)
            ipam = config.get("ipam") if isinstance(config.get("ipam"), dict) else {}
            if config.get("type") == CNI_TYPE:
                provider = config.get("provider") or "%s.%s.ovn" % (selection["name"], selection["namespace"])
                network, for_other_cni = config.get("network"), False
            elif ipam.get("type") == IPAM_TYPE:
                provider = ipam.get("provider") or "%s.%s" % (selection["name"], selection["namespace"])
                network, for_other_cni = None, True
            else:
                continue
            if not network:
                network = self.nb.read(lambda idl, p=provider: vn.network_by_provider(View(idl), p))
                if not network:
                    raise ValidationError("%s: no virtual network serves provider %s" % (where, provider),
                                          reason=pod_ports.UNKNOWN_NETWORK)
            annotations.check_provider_keys(found, provider)
            pool = annotations.ip_pool(found, provider, where)
            choice = None
            if pool:
                choice = self.nb.read(lambda idl, n=network: self._pool_choice(View(idl), pool, uid, n))
                if choice is None:
                    raise ValidationError("%s: every address of %s.kubernetes.io/ip_pool is taken" % (
                        where, provider), reason=pod_ports.EXHAUSTED)
            requests.append(annotations.attachment_request(
                selection, network, provider, for_other_cni, found, str(choice) if choice else None,
                config.get("dhcp") if not for_other_cni else None))
        return requests

    def _pool_choice(self, view, pool, uid, network=None):
        settings = vn.read_network(view, network) if network else None
        vips = [v["address"] for v in settings.virtual_ips] if settings is not None else []
        holders = [(ip, self.addresses.holder(view, "ip", ip)) for ip in pool if str(ip) not in vips]
        mine = [ip for ip, row in holders if row is not None and uid and row.external_ids.get(K_UID) == uid]
        return next(iter(mine), None) or next((ip for ip, row in holders if row is None), None)

    def nad_config(self, selection):
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
        text = (nad.get("spec") or {}).get("config") if isinstance(nad, dict) else None
        config = request_schema.parse_json("%s: the config of NetworkAttachmentDefinition %s/%s" % (
            selection["where"], selection["namespace"], selection["name"]), text or "{}")
        return config if isinstance(config, dict) else {}
