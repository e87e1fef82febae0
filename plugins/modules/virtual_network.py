#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: virtual_network
short_description: Create, update, delete and query virtual networks
version_added: 0.1.0
description:
  - The seed design's CreateVL, UpdateVL, DeleteVL and QueryVL calls, for many networks in one task.
  - With the V(ovn) backend a network is a logical switch whose C(other_config:subnet) and
    C(exclude_ips) let OVN hand out addresses, attached to the cluster's distributed router
    (M(ovn4nfv.k8s.cluster_topology)) through a router port that holds the gateway address.
    Routes and SNAT on every node gateway (M(ovn4nfv.k8s.node_gateway)) follow in the same
    transaction.
  - A I(provider network) (V(ovn) with O(config[].physnet)) sits on the operator's own L2 instead of the
    overlay. Its switch has a localnet port C(lnet-<name>) on that physical network, tagged with
    O(config[].vlan) (access) or untagged, and no router port, route or SNAT. Its gateway is the fabric's
    router, and frames between nodes cross the wire untunnelled. Addresses still come from OVN, so pod
    annotations, port security, policies and DHCP work on it as on an overlay. Each node that runs its
    pods maps the physical network to a bridge (C(ovn-bridge-mappings), set by the
    C(ovn4nfv.k8s.ovn_controller) role's C(ovn_controller_physnets)). One physical network and VLAN
    carries one network only, and not a node gateway's.
  - With the V(ovs) backend a network is a plain OVS bridge on the node, for networks that need no
    overlay; the O(config[].vlan) is applied to the ports attached to it.
  - V(auto) picks a backend the same way every time and says which in RV(backends)
    V(ovn) when the northbound database answers and holds the cluster topology, otherwise V(ovs)
    when the local OVS database answers.
  - Before anything is written, every network is checked, and each failure names the objects in
    conflict. Subnets may not overlap each other, the join subnet or the gateways' external
    networks. A gateway lies inside its subnet and outside its exclude ranges. Exclude ranges lie
    inside the subnet. The MTU of an overlay network fits O(underlay_mtu) minus the Geneve overhead.
  - An update that would strand ports, such as a subnet that no longer holds their addresses or
    a gateway moved onto a port's address, is refused and names the ports. So is deleting a
    network that still has ports, and turning an overlay with ports into a provider network or
    back. O(force=true) overrides them.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The networks.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The network's name; for the V(ovn) backend also its logical switch's.
        type: str
        required: true
      subnet:
        description:
          - IPv4 subnet, as a CIDR. Required for a new network.
        type: str
      gateway:
        description:
          - The gateway address. Defaults to the first host of O(config[].subnet).
          - OVN4NFV's definitions wrote it with the subnet's prefix length (V(10.1.20.1/24)); that form
            is accepted when the length is the subnet's, and stored without it.
        type: str
      subnet6:
        description:
          - IPv6 /64 for a dual-stack network (V(ovn) backend; OVN derives each port's IPv6
            address from the prefix and its MAC).
          - The distributed router routes IPv6 between networks; traffic leaves through the node
            gateways over IPv4 only.
        type: str
      gateway6:
        description:
          - The IPv6 gateway address. Defaults to the first host of O(config[].subnet6).
        type: str
      exclude_ips:
        description:
          - Addresses never handed out; single addresses or C(a..b) ranges inside the subnet.
        type: list
        elements: str
      mtu:
        description:
          - MTU of the pods' interfaces on this network, 576-9216.
        type: int
      dns:
        description:
          - DNS servers the pods on this network receive.
        type: list
        elements: str
      routes:
        description:
          - Routes the pods on this network receive.
        type: list
        elements: dict
        suboptions:
          dst:
            description:
              - Destination, as a CIDR.
            type: str
            required: true
          gw:
            description:
              - Next hop inside the subnet. Defaults to the network's gateway.
            type: str
      provider:
        description:
          - The Multus attachment whose addresses this network serves, V(<nad>.<namespace>) or
            V(<nad>.<namespace>.ovn). The watcher and the IPAM plugin find networks by it.
        type: str
      backend:
        description:
          - Which backend realises the network.
        type: str
        choices: [ovn, ovs, auto]
        default: auto
      bridge:
        description:
          - The OVS bridge of an V(ovs) network. Defaults to C(br-<name>), cut to 15 characters.
        type: str
      vlan:
        description:
          - The VLAN of an V(ovs) network, 1-4094, applied to its ports.
          - The access VLAN of a provider network (O(config[].physnet)) on its physical network, 1-4094;
            without it the provider network is untagged. An overlay network has none.
        type: int
      physnet:
        description:
          - Makes the network a provider network on this physical network, as the nodes'
            C(ovn-bridge-mappings) name it (for example V(physnet-ext), the node gateways' default).
          - Letters, digits, V(_), V(.) and V(-), up to 64 characters. Under O(state=merged), an empty string
            makes a provider network an overlay again.
          - An IPv6 subnet with O(config[].dhcp) is refused here, because the router advertisements are the
            fabric router's.
        type: str
      policy_mode:
        description:
          - How the security policies on an V(ovn) network keep state (the tenants' MultiNetworkPolicies
            and the operator's baseline of M(ovn4nfv.k8s.network_policy)).
          - V(stateful) when a new network does not say - every allowed connection is tracked, so its
            replies and related ICMP pass, and Services are load-balanced.
          - V(stateless) - no conntrack - each allow rule gets a mirror that lets its replies back (from
            the peers' ports), nothing else is tracked - an isolated pod's own connections get replies
            only from what its rules admit, related ICMP (a fragmentation needed) is not let through,
            and a Service's VIP is not translated for traffic an allow matches, so it is not balanced.
            For network functions that forward at a rate conntrack cannot keep.
          - After changing it, run M(ovn4nfv.k8s.network_policy) again for the network's baseline
            rules; the watcher re-renders the tenants' policies itself.
        type: str
        choices: [stateful, stateless]
      dhcp:
        description:
          - OVN answers DHCP on the network (V(ovn) backend), so that a VM's guest, or any DHCP client in
            a pod, configures its interface itself. Each pod port of the network is pointed at the
            network's C(DHCP_Options); OVN answers with the address the port holds, and port security
            stays on, so a client with another MAC gets nothing.
          - DHCPv4 carries the gateway (as router and server), the router port's MAC as the server's,
            the lease time, O(config[].mtu), the IPv4 O(config[].dns) servers, the domain, and
            O(config[].routes) as classless static routes with the default route last.
          - On a network with O(config[].subnet6), its router port sends router advertisements
            (C(ipv6_ra_configs)) and, unless O(config[].dhcp.ipv6_address_mode=slaac), OVN answers
            DHCPv6 too.
          - Given, it replaces the network's DHCP settings whole; V(enabled=false) turns DHCP off, and
            the network's C(DHCP_Options) rows and its ports' references to them go. Not given, under
            O(state=merged), the network keeps what it has.
        type: dict
        suboptions:
          enabled:
            description:
              - Whether OVN serves DHCP on the network.
            type: bool
            default: true
          lease_time:
            description:
              - DHCPv4 lease time in seconds, 60-4294967295.
            type: int
            default: 3600
          domain:
            description:
              - The DNS domain the clients get (DHCPv4 C(domain_name), DHCPv6 C(domain_search), the
                advertisements' DNSSL).
            type: str
          ipv6_address_mode:
            description:
              - How hosts on a dual-stack network take their IPv6 address; OVN derives it from the
                prefix and the port's MAC either way, so it is the address the port holds.
            type: str
            choices: [slaac, dhcpv6_stateless, dhcpv6_stateful]
            default: slaac
      relaxed_port_security:
        description:
          - Where a pod's interface on this network (V(ovn) backend) may relax its port security, by the pod's
            namespace. Every pod port holds strict port security by default (its MAC and IPs; OVN drops any
            other source); a network function asks for less in its request entry (C(port_security))
            and is granted it only where this list allows.
          - V(mac) lets an interface send from any IP with its own MAC (a virtual router or a firewall that
            forwards others' packets); V(off) lets it send from any MAC and IP (a bridge). V(off) allows V(mac)
            too.
          - A pod that asks for more than its namespace is allowed keeps full port security, and a Warning Event
            C(PortSecurityRefused) says why. Taking an allowance away takes it from the pods that have it.
          - Given, it replaces the list whole; an empty list removes every allowance.
        type: list
        elements: dict
        suboptions:
          namespace:
            description:
              - A namespace, or V(*) for every namespace.
            type: str
            required: true
          level:
            description:
              - The loosest port security allowed there.
            type: str
            required: true
            choices: [mac, "off"]
      virtual_ips:
        description:
          - Virtual IPs that pods of the given namespaces may hold in turn (VRRP, keepalived), on an V(ovn)
            network. Each is an OVN C(virtual) port C(vip-<network>-<address>), and never handed out to a pod.
          - A pod asks for one in its request entry (C(virtual_ips)); where its namespace is allowed, the address
            joins its interface's port security and its port joins the virtual port's C(virtual-parents), so OVN
            binds the address to whichever pod announces it. Any other pod with full port security that announces
            it is dropped (one granted C(mac) or C(off) by O(config[].relaxed_port_security) on the same network
            may send as any address, this one too), and a pod that asks without being allowed gets a Warning
            Event C(VirtualIPRefused).
          - Given, it replaces the list whole; a virtual IP dropped from it loses its port and its holders.
        type: list
        elements: dict
        suboptions:
          address:
            description:
              - The IPv4 address, a host of the subnet other than its gateway, that no pod holds.
            type: str
            required: true
          namespaces:
            description:
              - The namespaces whose pods may hold it (V(*) for every one).
            type: list
            elements: str
            required: true
      qos_max:
        description:
          - The most QoS an interface on the network (V(ovn) backend) may ask for, in its request's C(qos)
            (the pod side is in the watcher's guide), recorded on the switch as C(ovn4nfv-qos-max-rate) and
            C(ovn4nfv-qos-max-burst).
          - A request above it is served at it, never refused. Its pod gets a Warning Event C(QoSCapped)
            that names what it asked for and what it got. A request's rate without a burst gets this burst.
          - It bounds what is asked for and sets no default. An interface that asks for no C(qos) is not
            limited, and a DSCP mark is never capped.
          - Given, it replaces the network's cap whole. An empty V({}) removes it. Not given, under
            O(state=merged), the network keeps what it has.
          - The watcher applies a changed cap to the pods already running on the network at once (a lowered cap
            brings every row above it down in one transaction, and the network's pods are served again).
        type: dict
        suboptions:
          rate:
            description:
              - The highest rate, in kbit/s (1-100000000), that an interface may send at. Required
                unless O(config[].qos_max) is empty.
            type: int
          burst:
            description:
              - The largest burst, in kbit, above the rate.
            type: int
  force:
    description:
      - Apply updates that strand ports, and delete networks that still have ports.
    type: bool
    default: false
  underlay_mtu:
    description:
      - MTU of the underlay the overlay runs on; when given, each V(ovn) network's O(config[].mtu)
        must fit it minus 58 bytes of Geneve overhead.
    type: int
  ovs_db:
    description:
      - The local Open vSwitch database, for V(ovs) networks and for V(auto) discovery.
    type: str
    default: unix:/var/run/openvswitch/db.sock
  ovs_datapath_type:
    description:
      - Datapath type of the bridges of V(ovs) networks.
    type: str
    choices: [system, netdev]
    default: system
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.NB
  - ovn4nfv.k8s.ovsdb.RESOURCE
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: The cluster topology networks attach to
  ovn4nfv.k8s.cluster_topology:
    config:
      join_subnet: 100.64.1.0/24

- name: Two networks for network functions
  ovn4nfv.k8s.virtual_network:
    underlay_mtu: 1500
    config:
      - name: ovn-ls-25
        subnet: 172.16.25.0/24
        exclude_ips: [172.16.25.200..172.16.25.254]
        mtu: 1400
        routes:
          - dst: 10.20.0.0/16
        # an interface may ask (its request's qos) for at most 1 Gbit/s and a 10 Mbit burst
        qos_max:
          rate: 1000000
          burst: 10000
      - name: macvlan-net
        subnet: 172.16.30.0/24
        provider: macvlan.default

- name: Provider networks on the operator's VLANs 100 and 200 (the nodes map physnet-ext to a bridge)
  ovn4nfv.k8s.virtual_network:
    config:
      - name: prov-v100
        subnet: 192.168.100.0/24
        gateway: 192.168.100.1
        exclude_ips: [192.168.100.2..192.168.100.99]
        physnet: physnet-ext
        vlan: 100
      - name: prov-v200
        subnet: 192.168.200.0/24
        physnet: physnet-ext
        vlan: 200

- name: A network whose VMs configure themselves by DHCP and router advertisements
  ovn4nfv.k8s.virtual_network:
    config:
      - name: vm-net
        subnet: 172.16.40.0/24
        subnet6: fd00:40::/64
        mtu: 1400
        dns: [172.16.40.53]
        dhcp:
          lease_time: 600
          domain: vnf.example
          ipv6_address_mode: dhcpv6_stateful

- name: A network for a pair of VRRP routers in namespace vnf, which may forward others' packets there
  ovn4nfv.k8s.virtual_network:
    config:
      - name: vnf-net
        subnet: 172.16.50.0/24
        relaxed_port_security:
          - namespace: vnf
            level: mac
        virtual_ips:
          - address: 172.16.50.250
            namespaces: [vnf]

- name: Query them
  ovn4nfv.k8s.virtual_network:
    state: gathered
  register: networks
"""

RETURN = r"""
before:
  description: The networks this task changes, as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: []
after:
  description: The networks this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "ovn-ls-25", "subnet": "172.16.25.0/24", "gateway": "172.16.25.1", "backend": "ovn"}]
operations:
  description: What was done (in check mode, what would be done); first a line per network, then
    a line per OVN or OVS object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create virtual_network ovn-ls-25: backend='ovn'; gateway='172.16.25.1'; subnet='172.16.25.0/24'"]
gathered:
  description: The networks with their settings, the number of addresses in use and free, and
    their ports with their addresses.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"name": "ovn-ls-25", "subnet": "172.16.25.0/24", "gateway": "172.16.25.1", "backend": "ovn",
            "addresses_in_use": 1, "addresses_free": 252,
            "ports": [{"name": "default_web_net0", "addresses": ["dynamic"]}]}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample: [{"op": "insert", "table": "Logical_Switch", "uuid-name": "row1", "row": {"name": "ovn-ls-25"}}]
backends:
  description: Which backend each network of the task went to, and why V(auto) chose as it did.
  returned: always
  type: dict
  sample: {"networks": {"ovn-ls-25": "ovn"}, "auto": "ovn: the northbound database at
           unix:/var/run/ovn/ovnnb_db.sock answers and holds the cluster topology"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import (
    composite_result, connect_or_none, connection_argument_spec, fail, refuse_bare_override, require_libraries)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import backends
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import Ovn4nfvError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import (
    DEFAULT_NB_DB, DEFAULT_OVS_DB, NB_SCHEMA, OVS_SCHEMA)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import STATES, WRITE_STATES, planning_state
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import OVS_TABLES


def main():
    spec = dict(
        config=dict(type="list", elements="dict", options=dict(
            name=dict(type="str", required=True),
            subnet=dict(type="str"),
            gateway=dict(type="str"),
            subnet6=dict(type="str"),
            gateway6=dict(type="str"),
            exclude_ips=dict(type="list", elements="str"),
            mtu=dict(type="int"),
            dns=dict(type="list", elements="str"),
            routes=dict(type="list", elements="dict", options=dict(
                dst=dict(type="str", required=True),
                gw=dict(type="str"),
            )),
            provider=dict(type="str"),
            backend=dict(type="str", choices=["ovn", "ovs", "auto"], default="auto"),
            bridge=dict(type="str"),
            vlan=dict(type="int"),
            physnet=dict(type="str"),
            policy_mode=dict(type="str", choices=["stateful", "stateless"]),
            dhcp=dict(type="dict", options=dict(
                enabled=dict(type="bool", default=True),
                lease_time=dict(type="int", default=3600),
                domain=dict(type="str"),
                ipv6_address_mode=dict(type="str", choices=["slaac", "dhcpv6_stateless", "dhcpv6_stateful"],
                                       default="slaac"),
            )),
            relaxed_port_security=dict(type="list", elements="dict", options=dict(
                namespace=dict(type="str", required=True),
                level=dict(type="str", required=True, choices=["mac", "off"]),
            )),
            virtual_ips=dict(type="list", elements="dict", options=dict(
                address=dict(type="str", required=True),
                namespaces=dict(type="list", elements="str", required=True),
            )),
            qos_max=dict(type="dict", options=dict(rate=dict(type="int"), burst=dict(type="int"))),
        )),
        state=dict(type="str", default="merged", choices=list(STATES)),
        force=dict(type="bool", default=False),
        underlay_mtu=dict(type="int"),
        ovs_db=dict(type="str", default=DEFAULT_OVS_DB),
        ovs_datapath_type=dict(type="str", choices=["system", "netdev"], default="system"),
    )
    spec.update(connection_argument_spec(DEFAULT_NB_DB))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True,
                           required_if=[("state", s, ("config",)) for s in ("merged", "replaced", "rendered")])
    refuse_bare_override(module)
    require_libraries(module)
    params = module.params
    state = params["state"]
    databases, errors = {}, {}
    try:
        items = backends.check_items(params["config"])
        wanted = backends.wanted_backends(items)
        nb, errors["ovn"] = connect_or_none(module, "db", TABLES, NB_SCHEMA)
        if nb is not None:
            databases["ovn"] = nb
        if "ovs" in wanted or "auto" in wanted or state == "gathered":
            ovs, errors["ovs"] = connect_or_none(module, "ovs_db", OVS_TABLES, OVS_SCHEMA)
            if ovs is not None:
                databases["ovs"] = ovs
        auto, auto_reason = None, None
        if "auto" in wanted:
            auto, auto_reason = backends.choose_auto(databases, errors, {"ovn": params["db"], "ovs": params["ovs_db"]})
        combined, chosen = backends.plan_by_backend(
            databases, errors, items, state, planning_state(state), auto,
            write=state in WRITE_STATES and not module.check_mode, force=params["force"],
            underlay_mtu=params["underlay_mtu"], datapath_type=params["ovs_datapath_type"])
    except Ovn4nfvError as exc:
        fail(module, exc)
    finally:
        for database in databases.values():
            database.close()
    result = composite_result(module, combined, state)
    result["backends"] = {"networks": chosen, "auto": auto_reason}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
