# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A virtual network as the product declares it (:class:`Network`): its
settings, the records it keeps of them in ``external_ids``, and the OVN
rows or OVS bridge that realise it. Checking, reading back and planning
are :mod:`.networks`'.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ..common import addressing
from ..common.marks import (
    K_BACKEND, K_DHCP, K_DNS, K_EXCLUDE, K_GATEWAY, K_GATEWAY6, K_MTU, K_PHYSNET, K_POLICY_MODE, K_PROVIDER, K_RELAXED,
    K_ROUTES, K_SUBNET, K_SUBNET6, K_VIRTUAL_IPS, K_VLAN, NETWORK_KEY)
from ..resources.nb_routers import LogicalRouterPort
from ..resources.nb_switches import LogicalSwitch, LogicalSwitchPort
from . import port_qos


class Network:
    """A complete, checked network."""

    def __init__(self, name, subnet, gateway, backend, exclude_ips=(), mtu=None, dns=(),
                 routes=(), provider=None, bridge=None, vlan=None, subnet6=None, gateway6=None,
                 policy_mode="stateful", dhcp=None, physnet=None, relaxed=None, virtual_ips=(), qos_max=None):
        self.name = name
        self.subnet = subnet
        self.gateway = gateway
        self.subnet6 = subnet6      # an IPv6 /64, or None for an IPv4-only network
        self.gateway6 = gateway6
        self.backend = backend
        self.exclude_ips = list(exclude_ips)
        self.mtu = mtu
        self.dns = list(dns)
        self.routes = list(routes)
        self.provider = provider
        self.bridge = bridge
        self.vlan = vlan
        self.policy_mode = policy_mode or "stateful"
        self.dhcp = dhcp            # dhcp.check's form, or None: OVN serves no DHCP here
        self.physnet = physnet      # a provider network's physical network, or None: an overlay
        # where its pods' interfaces may relax port security: {namespace or "*": "mac" or "off"}
        self.relaxed = dict(relaxed or {})
        # its VRRP virtual IPs: [{"address", "namespaces"}], each an OVN virtual port
        self.virtual_ips = [dict(v) for v in virtual_ips]
        self.qos_max = qos_max      # the most an interface's qos may ask ({rate[, burst]}), or None

    @property
    def stateful(self):
        """Whether the network's policies keep connection state."""
        return self.policy_mode != "stateless"

    def config(self):
        out = {"name": self.name, "subnet": str(self.subnet), "gateway": str(self.gateway),
               "backend": self.backend}
        if self.subnet6 is not None:
            out.update(subnet6=str(self.subnet6), gateway6=str(self.gateway6))
        for option in ("exclude_ips", "mtu", "dns", "routes", "provider", "bridge", "physnet", "vlan"):
            value = getattr(self, option)
            if value not in (None, [], ()):
                out[option] = value
        if not self.stateful:
            out["policy_mode"] = self.policy_mode
        if self.dhcp is not None:
            out["dhcp"] = dict(self.dhcp)
        if self.relaxed:
            out["relaxed_port_security"] = [{"namespace": n, "level": level} for n, level in sorted(self.relaxed.items())]
        if self.virtual_ips:
            out["virtual_ips"] = [dict(v) for v in self.virtual_ips]
        if self.qos_max:
            out["qos_max"] = dict(self.qos_max)
        return out

    @property
    def gateway_cidr(self):
        return "%s/%d" % (self.gateway, self.subnet.prefixlen)

    @property
    def gateway6_cidr(self):
        return "%s/%d" % (self.gateway6, self.subnet6.prefixlen) if self.subnet6 is not None else None

    @property
    def router_port(self):
        return "rtos-" + self.name

    @property
    def localnet_port(self):
        """A provider network's way out (``ln-<node>`` is the gateways')."""
        return "lnet-" + self.name

    @property
    def switch_port(self):
        return "stor-" + self.name

    def virtual_port(self, address):
        """The OVN ``virtual`` port of one of its virtual IPs: no pod port
        is named so (their names hold two ``_``)."""
        return "vip-%s-%s" % (self.name, address)

    def records(self):
        """The network's settings as ``external_ids``; None removes a key."""
        return {
            NETWORK_KEY: self.name,
            K_BACKEND: self.backend,
            K_GATEWAY: self.gateway_cidr,
            K_GATEWAY6: self.gateway6_cidr,
            K_EXCLUDE: " ".join(self.exclude_ips) or None,
            K_MTU: str(self.mtu) if self.mtu else None,
            K_DNS: ",".join(self.dns) or None,
            K_ROUTES: json.dumps(self.routes, sort_keys=True) if self.routes else None,
            K_PROVIDER: self.provider,
            K_POLICY_MODE: None if self.stateful else self.policy_mode,
            K_DHCP: json.dumps(self.dhcp, sort_keys=True) if self.dhcp is not None else None,
            K_PHYSNET: self.physnet,
            K_VLAN: str(self.vlan) if self.vlan else None,
            K_RELAXED: json.dumps(self.relaxed, sort_keys=True) if self.relaxed else None,
            K_VIRTUAL_IPS: json.dumps(self.virtual_ips, sort_keys=True) if self.virtual_ips else None,
            **port_qos.cap_records(self.qos_max)
        }

    def own_ports(self):
        """The network's own ports on its switch (not pods')."""
        return ((self.localnet_port,) if self.physnet else (self.switch_port,)) + tuple(
            self.virtual_port(v["address"]) for v in self.virtual_ips)

    def virtual_items(self):
        """Its virtual IPs' ports: OVN binds each to whichever of its
        ``virtual-parents`` (the watcher keeps them: the ports granted the
        address) announces it. Merged, so the parents stay."""
        return [{"name": self.virtual_port(v["address"]), "switch": self.name, "type": "virtual",
                 "options": {"virtual-ip": v["address"]}, "external_ids": {NETWORK_KEY: self.name}}
                for v in self.virtual_ips]

    def ovn_items(self, topology):
        mark = {NETWORK_KEY: self.name}
        switch = {"name": self.name, "subnet": str(self.subnet),
                  "exclude_ips": self.exclude_ips + [str(self.gateway)] + [v["address"] for v in self.virtual_ips],
                  "ipv6_prefix": str(self.subnet6.network) if self.subnet6 is not None else None,
                  "external_ids": self.records()}
        if self.physnet:
            # unknown: frames to a MAC no port of the switch holds go out
            # to the fabric (its router, its hosts)
            localnet = {"name": self.localnet_port, "switch": self.name, "type": "localnet",
                        "addresses": ["unknown"], "options": {"network_name": self.physnet},
                        "external_ids": mark}
            if self.vlan:
                localnet["tag"] = self.vlan
            return {LogicalSwitch: [switch], LogicalSwitchPort: [localnet] + self.virtual_items()}
        return {
            LogicalSwitch: [switch],
            LogicalRouterPort: [{"name": self.router_port, "router": topology.router,
                                 "mac": addressing.mac_from_name(self.router_port),
                                 "networks": [n for n in (self.gateway_cidr, self.gateway6_cidr) if n],
                                 "external_ids": mark}],
            LogicalSwitchPort: [{"name": self.switch_port, "switch": self.name, "type": "router",
                                 "addresses": ["router"],
                                 "options": {"router-port": self.router_port},
                                 "external_ids": mark}] + self.virtual_items(),
        }

    def ovn_keys(self):
        ports = [{"name": name} for name in self.own_ports()]
        if self.physnet:
            return {LogicalSwitch: [{"name": self.name}], LogicalSwitchPort: ports}
        return {LogicalSwitch: [{"name": self.name}],
                LogicalRouterPort: [{"name": self.router_port}],
                LogicalSwitchPort: ports}

    def ovs_item(self, datapath_type):
        records = self.records()
        records.update({K_SUBNET: str(self.subnet), K_VLAN: str(self.vlan) if self.vlan else None,
                        K_SUBNET6: str(self.subnet6) if self.subnet6 is not None else None})
        return {"name": self.bridge, "datapath_type": datapath_type, "external_ids": records}
