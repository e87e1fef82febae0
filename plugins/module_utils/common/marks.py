# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The product's marks: its on-disk contract, kept across upgrades.

Every ``external_ids`` key the product writes, every value of a mark that
it matches on, and every other name of its own that outlives one run (the
default names of its rows, a mirror's and an address set's name prefix,
its CNI plugin types, the node agent's socket, its programs and systemd
unit) is defined here, once, and nowhere else in the core:
``tests/unit/test_marks.py`` fails on an ``ovn4nfv-`` string anywhere else
in ``plugins/module_utils/``.

These strings are on disk: in the NB and SB databases, in each node's
Open vSwitch database, in CNI configurations, in systemd units. A release
reads what the previous release wrote. So **an upgrade must keep reading
every key a previous release wrote**: renaming or dropping one is a
migration (read the old key, write the new one, for at least one release),
never an edit of this file. Adding a mark is free; give it its entry in
:data:`CONTRACT` (where it is written, who writes it, who reads it).

Who is who in :data:`CONTRACT`: *modules* are the Ansible modules (through
``cluster/``, ``node/`` and ``resources/``), the *watcher* and the *node
agent* are the daemons (``daemons/``), the *audit* is ``cluster/audit.py``
(the audit, repair and picture modules) and ``node/host_audit.py``.

Keys of other systems that the product reads or writes beside its own
(``iface-id``, ``attached-mac``, ``ovn-bridge-mappings``,
``ovn-match-northd-version``, ``neutron:*``) are not its marks: their
owners may rename them, and they are defined where they are used.

Standard library only, and nothing of the core imported: ``cni.py`` (which
stands alone) takes its plugin types and socket from here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# --------------------------------------------------------------------------
# Ownership: on every row the product creates
# --------------------------------------------------------------------------

# Every row the product creates carries this mark in external_ids, so that it
# finds, updates and removes exactly its own rows and leaves others alone.

OWNER_KEY = "ovn4nfv-owner"
OWNER_VALUE = "ovn4nfv.k8s"

# --------------------------------------------------------------------------
# Topology: the distributed router, the join switch, node gateways, wiring
# --------------------------------------------------------------------------

ROLE = "ovn4nfv-role"
ROLE_ROUTER = "cluster-router"
ROLE_JOIN = "join-switch"
ROLE_GATEWAY = "node-gateway"
ROLE_WIRING = "gateway-wiring"
ROLE_POD = "pod-port"
# a node gateway's settings, kept on its gateway router (K_VLAN too)
K_NODE = "ovn4nfv-node"
K_EXTERNAL_IP = "ovn4nfv-external-ip"
K_EXTERNAL_GATEWAY = "ovn4nfv-external-gateway"
K_PHYSNET = "ovn4nfv-physnet"
K_JOIN_IP = "ovn4nfv-join-ip"
DEFAULT_ROUTER = "ovn4nfv-master"
DEFAULT_JOIN_SWITCH = "ovn4nfv-join"

# --------------------------------------------------------------------------
# Virtual networks: their settings, kept on the switch (or OVS bridge)
# --------------------------------------------------------------------------

NETWORK_KEY = "ovn4nfv-network"
K_GATEWAY = "ovn4nfv-gateway"
K_GATEWAY6 = "ovn4nfv-gateway6"
K_SUBNET = "ovn4nfv-subnet"
K_SUBNET6 = "ovn4nfv-subnet6"
K_EXCLUDE = "ovn4nfv-exclude-ips"
K_MTU = "ovn4nfv-mtu"
K_DNS = "ovn4nfv-dns"
K_ROUTES = "ovn4nfv-routes"
K_PROVIDER = "ovn4nfv-provider"
K_BACKEND = "ovn4nfv-backend"
K_VLAN = "ovn4nfv-vlan"
# how the policies of a network keep state: "stateless" (absent: stateful)
K_POLICY_MODE = "ovn4nfv-policy-mode"
# the DHCP and router advertisements OVN serves on a network, as JSON
# ({"lease_time", "domain", "ipv6_address_mode"}; absent: none)
K_DHCP = "ovn4nfv-dhcp"
# a DHCP_Options row made for one pod port: the port's name, and what the
# pod asked of its DHCP (JSON {"routes", "default_route"})
K_DHCP_PORT = "ovn4nfv-dhcp-port"
K_DHCP_OVERRIDE = "ovn4nfv-dhcp-override"
# where the operator lets a pod's interface relax its port security, as
# JSON {namespace or "*": "mac" or "off"}; the network's virtual IPs for
# VRRP and the namespaces whose pods may hold each, as JSON
# [{"address", "namespaces"}] (issue 37)
K_RELAXED = "ovn4nfv-relaxed-security"
K_VIRTUAL_IPS = "ovn4nfv-virtual-ips"
# the most a pod's interface on the network may ask of QoS (virtual_network's
# qos_max): rate in kbit/s, burst in kbit, as decimal text
K_QOS_MAX_RATE = "ovn4nfv-qos-max-rate"
K_QOS_MAX_BURST = "ovn4nfv-qos-max-burst"

# --------------------------------------------------------------------------
# Pods: their ports in OVN, their interfaces in a node's Open vSwitch
# --------------------------------------------------------------------------

K_NAMESPACE = "ovn4nfv-pod-namespace"
K_POD = "ovn4nfv-pod-name"
K_UID = "ovn4nfv-pod-uid"
K_INTERFACE = "ovn4nfv-interface"
K_CONTAINER = "ovn4nfv-container-id"
K_POD_REF = "ovn4nfv-pod"
# on a pod's Interface, by an ADD that set up the whole pod: where the
# runtime's namespace is ({"netns": CNI_NETNS, "id": "dev:inode", "mtu"}),
# and the interface list's entry as it was applied (JSON): what the node
# agent's follower reopens and compares when the list changes (issue 36)
K_SANDBOX = "ovn4nfv-sandbox"
K_ENTRY = "ovn4nfv-entry"
# a VM's ports: the UIDs of the launcher pods its VMI names and that run
# (comma-separated), the only pods a node agent attaches to them
K_LAUNCHERS = "ovn4nfv-launchers"
# a VM's port: the UID of the VMI whose launcher's request made it last
K_VMI = "ovn4nfv-vmi"
# the chains a pod port is a network function's interface in (comma-separated),
# and the port security that MAC-only replaced there
K_CHAIN_FUNCTION = "ovn4nfv-chains"
K_CHAIN_HELD = "ovn4nfv-chain-held"
# what a pod port was granted beyond full port security: "mac" or "off"
# (absent: full), and the network's virtual IPs it may answer for
# (comma-separated)
K_SECURITY = "ovn4nfv-port-security"
K_VIPS = "ovn4nfv-vips"
# a pod port's QoS row (its rate, burst and DSCP; a ROLE, beside the pod's
# marks): the name of the port whose traffic it limits
ROLE_POD_QOS = "pod-qos"
K_QOS_PORT = "ovn4nfv-qos-port"

# --------------------------------------------------------------------------
# Services, chains, taps, uplinks
# --------------------------------------------------------------------------

K_SERVICE = "ovn4nfv-service"
K_SERVICE_UID = "ovn4nfv-service-uid"
K_SERVICE_PART = "ovn4nfv-service-part"
K_CHAIN = "ovn4nfv-chain"
K_CHAIN_HOP = "ovn4nfv-chain-hop"
K_CHAIN_SELECTOR = "ovn4nfv-chain-function"
K_CHAIN_SPEC = "ovn4nfv-chain-spec"
K_CHAIN_FAIL = "ovn4nfv-chain-fail"
CHAIN_ADDRESS_SET_PREFIX = "ovn4nfv_chain_"
K_TAP = "ovn4nfv-tap"
K_TAP_SOURCE = "ovn4nfv-tap-source"
K_TAP_PREFIX = "ovn4nfv-tap:"
TAP_MIRROR_PREFIX = "ovn4nfv-tap-"
K_UPLINK = "ovn4nfv-uplink"
# the node's own address on a VLAN of a physical network: an OVS internal
# port with a tag on the physnet's bridge; the value is the VLAN
K_VLAN_INTERFACE = "ovn4nfv-vlan-interface"
# the physnets of ovn-bridge-mappings the product set on a node (its
# provider networks' there), comma-separated: only these it ever removes
K_OWNED_PHYSNETS = "ovn4nfv-physnets"

# --------------------------------------------------------------------------
# Policies: a tenant's MultiNetworkPolicy, a network's default deny
# --------------------------------------------------------------------------

# port groups: one per policy, one per network and direction that a policy
# isolates (OVN's names are identifiers in matches: '_', no '-')
POLICY_GROUP_PREFIX = "ovn4nfv_mnp_"
DENY_GROUP_PREFIX = "ovn4nfv_deny_"
# a policy's rows (its port group, ACLs, address sets): <namespace>/<name>
K_POLICY = "ovn4nfv-policy"
# on its port group: the policy as rendered (canonical JSON, with the
# switches it was resolved to): what changed is found without the API
K_POLICY_SPEC = "ovn4nfv-policy-spec"
# on its ACLs and address sets: which rule (ingress/0, egress/2)
K_POLICY_RULE = "ovn4nfv-policy-rule"
# a network's default-deny port group and its ACLs: the direction (with NETWORK_KEY)
K_DEFAULT_DENY = "ovn4nfv-default-deny"
# the conntrack anchor ACL of a network with isolated ports (a ROLE)
ROLE_ACL_ANCHOR = "policy-conntrack"
# the meter every default deny's drop log goes through
METER_ACL_LOG = "ovn4nfv-acl-log"
# the operator's baseline (network_policy): a rule's ACL and its peers'
# address sets carry its name; its ACL the rule as declared (canonical
# JSON); its address sets the selectors whose pods the watcher puts there
K_BASELINE = "ovn4nfv-baseline"
K_BASELINE_SPEC = "ovn4nfv-baseline-spec"
K_BASELINE_PEERS = "ovn4nfv-baseline-peers"
BASELINE_SET_PREFIX = "ovn4nfv_base_"
# the ACLs a network a baseline rule guards gets from the baseline itself
# (a ROLE, beside NETWORK_KEY): its conntrack anchor (its own connections'
# replies pass a deny) and, when it has IPv6, its neighbour discovery holes
ROLE_BASELINE_NETWORK = "baseline-network"

# --------------------------------------------------------------------------
# The watchers' leadership (issue 38): the term the leading watcher took,
# kept in the one NB_Global row, and the comment of its transactions
# --------------------------------------------------------------------------

# a whole number, advanced by each watcher that takes over; every NB
# transaction of the leader waits on it being its own (ovsdb/fence.py)
K_TERM = "ovn4nfv-term"
# the identity (the Lease's holderIdentity) of the watcher that took it
K_TERM_HOLDER = "ovn4nfv-term-holder"
# the comment of every transaction a watcher commits, then
# "<term> holder=<identity>": ovsdb-tool show-log names who wrote each
TERM_COMMENT = "ovn4nfv-watcher term="

# --------------------------------------------------------------------------
# Names outside the databases: CNI configurations, the node, the API, files
# --------------------------------------------------------------------------

CNI_TYPE = "ovn4nfv"
IPAM_TYPE = "ovn4nfv-ipam"
DEFAULT_SOCKET = "/run/ovn4nfv/agent.sock"
WATCHER = "ovn4nfv-watcher"
NODE_AGENT = "ovn4nfv-node-agent"
UPLINK_PROGRAM = "ovn4nfv-uplink"
UPLINK_UNIT = "ovn4nfv-uplink@"
AGENT_UNIT = "ovn4nfv-agent"
# the systemd drop-in that starts a clustered central's NB and SB
# ovsdb-server without the 3.2 file format while its members are mixed
UPGRADE_DROPIN = "ovn4nfv-upgrade.conf"
PICTURE_MARK = "ovn4nfv-picture"
VETH_ALIAS_PREFIX = "ovn4nfv "
# a virtual network named in a MultiNetworkPolicy's policy-for annotation,
# as <this>/<network>, beside Multus' <namespace>/<attachment> (tenants
# write it in their policies: it outlives every release)
VIRTUAL_NETWORK_SCOPE = "ovn4nfv.k8s"

# --------------------------------------------------------------------------
# The contract: each mark's kind, where it is, who writes it, who reads it
# --------------------------------------------------------------------------

KIND_KEY = "external_ids key"                # a key, in the external_ids of the tables named
KIND_KEY_PREFIX = "external_ids key prefix"  # the start of keys, the rest is a name
KIND_VALUE = "value"                         # a value written under a key and matched on
KIND_PREFIX = "name prefix"                  # the start of names, the rest is a name
KIND_NAME = "name"                           # a name outside external_ids
KINDS = (KIND_KEY, KIND_KEY_PREFIX, KIND_VALUE, KIND_PREFIX, KIND_NAME)

_MODULES = "the modules (ovsdb/resource.py for every kind)"
_TOPOLOGY = "cluster_topology, node_gateway (cluster/topology.py, cluster/wiring.py)"
_NETWORKS = "virtual_network, cluster_network (cluster/networks.py, cluster/composite.py)"
_PODS = "the watcher (cluster/pod_ports.py, cluster/pod_addresses.py)"

# {mark's name: (kind, where it is written, who writes it, who reads it)}
CONTRACT = {
    "OWNER_KEY": (KIND_KEY, "every row the product creates, NB and Open_vSwitch databases alike",
                  _MODULES + ", the watcher, the node agent",
                  "every module (what it may change or delete), the watcher, the audit, the picture"),
    "OWNER_VALUE": (KIND_VALUE, "under OWNER_KEY", "as OWNER_KEY", "as OWNER_KEY"),
    "ROLE": (KIND_KEY, "Logical_Router, Logical_Switch, Logical_Switch_Port, Logical_Router_Static_Route, NAT, QoS",
             _TOPOLOGY + ", the watcher (pod ports, their QoS rows)",
             "cluster/topology.py (role_of), cluster/pod_addresses.py (is_pod_port), the audit, the picture"),
    "ROLE_ROUTER": (KIND_VALUE, "ROLE on the distributed Logical_Router", "cluster_topology",
                    "cluster/topology.py, the picture"),
    "ROLE_JOIN": (KIND_VALUE, "ROLE on the join Logical_Switch", "cluster_topology",
                  "cluster/topology.py, the picture"),
    "ROLE_GATEWAY": (KIND_VALUE, "ROLE on a node's gateway Logical_Router and its switch and ports", "node_gateway",
                     "cluster/topology.py (read_gateways), the picture"),
    "ROLE_WIRING": (KIND_VALUE, "ROLE on Logical_Router_Static_Route and NAT rows that wire networks to gateways",
                    "cluster/wiring.py", "cluster/wiring.py (which routes and SNAT are its own)"),
    "ROLE_POD": (KIND_VALUE, "ROLE on a pod's Logical_Switch_Port", "the watcher",
                 "cluster/pod_addresses.py (is_pod_port), the watcher, the audit, the picture"),
    "K_NODE": (KIND_KEY, "a gateway's Logical_Router and its parts (ports, switch)", "node_gateway",
               "cluster/topology.py (read_gateways)"),
    "K_EXTERNAL_IP": (KIND_KEY, "a gateway's Logical_Router", "node_gateway", "cluster/topology.py (read_gateways)"),
    "K_EXTERNAL_GATEWAY": (KIND_KEY, "a gateway's Logical_Router", "node_gateway",
                           "cluster/topology.py (read_gateways)"),
    "K_PHYSNET": (KIND_KEY, "a gateway's Logical_Router; a provider network's Logical_Switch",
                  "node_gateway, " + _NETWORKS, "cluster/topology.py (read_gateways), cluster/networks.py (network_of), "
                  "cluster/wiring.py (no route or SNAT for a provider network), the node agent"),
    "K_JOIN_IP": (KIND_KEY, "a gateway's Logical_Router", "node_gateway", "cluster/topology.py (read_gateways)"),
    "DEFAULT_ROUTER": (KIND_NAME, "Logical_Router.name of the distributed router, unless declared",
                       "cluster_topology", "every cluster module that takes no router name, the audit"),
    "DEFAULT_JOIN_SWITCH": (KIND_NAME, "Logical_Switch.name of the join switch, unless declared", "cluster_topology",
                            "every cluster module that takes no join switch name, the audit"),
    "NETWORK_KEY": (KIND_KEY, "a network's Logical_Switch, its router and switch ports, its declared ports; "
                              "an OVS-backend network's Bridge; a network's DHCP_Options",
                    _NETWORKS, "cluster/networks.py (read_networks), cluster/wiring.py, the watcher, the audit, "
                               "resources/nb_dhcp.py (a DHCP_Options row's network)"),
    "K_GATEWAY": (KIND_KEY, "a network's Logical_Switch or Bridge", _NETWORKS, "cluster/networks.py (network_of)"),
    "K_GATEWAY6": (KIND_KEY, "a network's Logical_Switch or Bridge", _NETWORKS, "cluster/networks.py (network_of)"),
    "K_SUBNET": (KIND_KEY, "an OVS-backend network's Bridge (OVN keeps the subnet in other_config)", _NETWORKS,
                 "cluster/networks.py (read_ovs_networks)"),
    "K_SUBNET6": (KIND_KEY, "an OVS-backend network's Bridge", _NETWORKS, "cluster/networks.py"),
    "K_EXCLUDE": (KIND_KEY, "a network's Logical_Switch or Bridge", _NETWORKS, "cluster/networks.py (network_of)"),
    "K_MTU": (KIND_KEY, "a network's Logical_Switch or Bridge", _NETWORKS, "cluster/networks.py, the watcher"),
    "K_DNS": (KIND_KEY, "a network's Logical_Switch or Bridge", _NETWORKS, "cluster/networks.py, the watcher"),
    "K_ROUTES": (KIND_KEY, "a network's Logical_Switch or Bridge", _NETWORKS, "cluster/networks.py, the watcher"),
    "K_PROVIDER": (KIND_KEY, "a network's Logical_Switch or Bridge", _NETWORKS,
                   "cluster/networks.py (by_provider), the watcher (Multus selections)"),
    "K_BACKEND": (KIND_KEY, "a network's Logical_Switch or Bridge", _NETWORKS, "cluster/networks.py"),
    "K_VLAN": (KIND_KEY, "an OVS-backend network's Bridge; a provider network's Logical_Switch; a gateway's "
                         "Logical_Router", _NETWORKS + ", node_gateway",
               "cluster/networks.py, cluster/topology.py (read_gateways)"),
    "K_DHCP": (KIND_KEY, "a network's Logical_Switch", _NETWORKS,
               "cluster/networks.py (its DHCP_Options rows, its router port's ipv6_ra_configs), the watcher, "
               "the audit"),
    "K_DHCP_PORT": (KIND_KEY, "a DHCP_Options row made for one pod port", "the watcher; virtual_network keeps it",
                    "cluster/dhcp.py, resources/nb_dhcp.py (the row's identity), the audit"),
    "K_DHCP_OVERRIDE": (KIND_KEY, "a DHCP_Options row made for one pod port", "the watcher",
                        "cluster/dhcp.py (the row's options made again from it and the network)"),
    "K_RELAXED": (KIND_KEY, "a network's Logical_Switch (where port security may be relaxed, JSON)", _NETWORKS,
                  "cluster/port_grants.py (the watcher's grants), the audit (cluster/security_audit.py)"),
    "K_VIRTUAL_IPS": (KIND_KEY, "a network's Logical_Switch (its VRRP virtual IPs and their namespaces, JSON)",
                      _NETWORKS, "cluster/networks.py (its virtual ports), cluster/port_grants.py, the audit"),
    "K_QOS_MAX_RATE": (KIND_KEY, "a network's Logical_Switch", _NETWORKS,
                       "cluster/networks.py, the watcher (cluster/port_qos.py: a pod's QoS capped), the audit"),
    "K_QOS_MAX_BURST": (KIND_KEY, "a network's Logical_Switch", _NETWORKS,
                        "cluster/networks.py, the watcher (cluster/port_qos.py: a pod's QoS capped), the audit"),
    "K_POLICY_MODE": (KIND_KEY, "a network's Logical_Switch", _NETWORKS,
                      "cluster/networks.py; the watcher and network_policy (how its ACLs keep state)"),
    "K_NAMESPACE": (KIND_KEY, "a pod's Logical_Switch_Port", _PODS, "the watcher, the audit, the picture"),
    "K_POD": (KIND_KEY, "a pod's Logical_Switch_Port", _PODS, "the watcher, the audit, the picture"),
    "K_UID": (KIND_KEY, "a pod's Logical_Switch_Port; its Interface in a node's Open_vSwitch",
              _PODS + ", the node agent",
              "the watcher (pod ports, services, Multus), the node agent, the audit, the host audit"),
    "K_INTERFACE": (KIND_KEY, "a pod's Logical_Switch_Port; its Interface in a node's Open_vSwitch",
                    _PODS + ", the node agent", "the watcher, the node agent, the audit, the picture"),
    "K_CONTAINER": (KIND_KEY, "a pod's Interface in a node's Open_vSwitch (OVN and plain OVS attachments)",
                    "the node agent (daemons/node_agent.py, daemons/ovs_attachment.py)",
                    "the node agent (DEL, CHECK, GC; daemons/pod_truth.py), the host audit"),
    "K_POD_REF": (KIND_KEY, "a pod's Interface in a node's Open_vSwitch (<namespace>/<name>)", "the node agent",
                  "operators (ovs-vsctl list Interface); nothing in the product yet"),
    "K_SANDBOX": (KIND_KEY, "a pod's Interface in a node's Open_vSwitch (the runtime's namespace: path, "
                            "identity, MTU; JSON)", "the node agent (ADD of a whole pod)",
                  "the node agent's follower (daemons/pod_follow.py)"),
    "K_ENTRY": (KIND_KEY, "a pod's Interface in a node's Open_vSwitch (its interface list entry as applied, JSON)",
                "the node agent (ADD, the follower)", "the node agent's follower (daemons/pod_follow.py)"),
    "K_VMI": (KIND_KEY, "a VM's Logical_Switch_Port (the VMI whose launcher made it last)", "the watcher",
              "cluster/pod_ports.py (plan_drop: a restarted VM's interfaces it no longer has)"),
    "K_LAUNCHERS": (KIND_KEY, "a VM's Logical_Switch_Port (the UIDs of its running launcher pods)",
                    "the watcher (daemons/vm_watch.py)", "the node agent, through the SB copy (daemons/pod_truth.py)"),
    "K_CHAIN_FUNCTION": (KIND_KEY, "a network function pod's Logical_Switch_Port (the chains it serves)",
                         "the watcher (cluster/chains.py)",
                         "cluster/pod_addresses.py (MAC-only port security), daemons/chain_hops.py, "
                         "the node agent (through the SB copy)"),
    "K_CHAIN_HELD": (KIND_KEY, "a network function pod's Logical_Switch_Port (its replaced port security)",
                     "the watcher (cluster/chains.py)",
                     "cluster/pod_addresses.py (held_addresses), the node agent (through the SB copy)"),
    "K_SECURITY": (KIND_KEY, "a pod's Logical_Switch_Port (the relaxed port security it was granted)",
                   "the watcher (cluster/port_grants.py)",
                   "cluster/pod_addresses.py (its port security), the node agent (through the SB copy), the audit"),
    "K_VIPS": (KIND_KEY, "a pod's Logical_Switch_Port (the virtual IPs it was granted)",
               "the watcher (cluster/port_grants.py)",
               "cluster/pod_addresses.py (its port security), the watcher (daemons/grant_watch.py), the audit"),
    "ROLE_POD_QOS": (KIND_VALUE, "ROLE on a pod port's QoS row (beside the pod's marks and K_QOS_PORT)",
                     "the watcher (cluster/port_qos.py)", "cluster/port_qos.py, the watcher (a row changed by hand "
                     "is mended), the audit"),
    "K_QOS_PORT": (KIND_KEY, "a pod port's QoS row: the port's name", "the watcher (cluster/port_qos.py)",
                   "cluster/port_qos.py (the row of a port; deleted with it), the audit"),
    "K_SERVICE": (KIND_KEY, "Load_Balancer (<namespace>/<name> of the Service)",
                  "the watcher (cluster/services.py)", "cluster/services.py, the watcher"),
    "K_SERVICE_UID": (KIND_KEY, "Load_Balancer", "the watcher (cluster/services.py)",
                      "cluster/services.py (a Service recreated under its name)"),
    "K_SERVICE_PART": (KIND_KEY, "Load_Balancer (cluster or external)", "the watcher (cluster/services.py)",
                       "operators (which of a Service's balancers a row is); nothing in the product yet"),
    "K_CHAIN": (KIND_KEY, "Logical_Router_Policy, Address_Set", "network_chain, the watcher (cluster/chains.py)",
                "cluster/chains.py, daemons/chain_hops.py"),
    "K_CHAIN_HOP": (KIND_KEY, "Logical_Router_Policy (forward/<n>, reverse/<n>)", "network_chain",
                    "operators and tests (which hop a policy is); nothing in the product yet"),
    "K_CHAIN_SELECTOR": (KIND_KEY, "Logical_Router_Policy, Address_Set (a function's or the source's selector, JSON)",
                         "network_chain", "cluster/chains.py, the watcher (next hops, source addresses)"),
    "K_CHAIN_SPEC": (KIND_KEY, "a chain's first Logical_Router_Policy (the chain as declared, JSON)", "network_chain",
                     "cluster/chains.py (gathered, read_chains)"),
    "K_CHAIN_FAIL": (KIND_KEY, "Logical_Router_Policy (open or closed)", "network_chain",
                     "cluster/chains.py, the watcher (the action with no next hop)"),
    "CHAIN_ADDRESS_SET_PREFIX": (KIND_PREFIX, "Address_Set.name, then the chain's name ('-' as '_')", "network_chain",
                                 "the chain's policies (match $<name>), the watcher"),
    "K_TAP": (KIND_KEY, "Mirror (NB, remote taps; a node's Open_vSwitch, port taps)",
              "traffic_tap (cluster/remote_mirrors.py), the node agent (node/port_mirrors.py)",
              "cluster/remote_mirrors.py, node/port_mirrors.py"),
    "K_TAP_SOURCE": (KIND_KEY, "NB Mirror (the source port's name)", "traffic_tap (cluster/remote_mirrors.py)",
                     "cluster/remote_mirrors.py (gathered, mirrors of a port)"),
    "K_TAP_PREFIX": (KIND_KEY_PREFIX, "Open_vSwitch (the root row), then the tap's name; the tap as declared, JSON",
                     "port_tap (node/port_mirrors.py)", "node/port_mirrors.py, the node agent (follow_taps)"),
    "TAP_MIRROR_PREFIX": (KIND_PREFIX, "Mirror.name in a node's Open_vSwitch, then the tap's name",
                          "node/port_mirrors.py (the node agent, port_tap)", "operators (ovs-vsctl list Mirror)"),
    "K_UPLINK": (KIND_KEY, "Port in a node's Open_vSwitch (the NIC moved onto a bridge)", "ovs_uplink (node/uplink.py)",
                 "operators (which port the product moved there); nothing in the product yet"),
    "K_VLAN_INTERFACE": (KIND_KEY, "Interface in a node's Open_vSwitch (an internal port with a tag on a physical "
                                   "network's bridge, holding the node's address on that VLAN)",
                         "ovs_uplink vlan_interfaces (node/vlan_interfaces.py; the ovn_controller role's "
                         "ovn_controller_physnets)", "node/vlan_interfaces.py (which ports are the product's to remove)"),
    "K_OWNED_PHYSNETS": (KIND_KEY, "Open_vSwitch.external_ids of a node (beside ovn-bridge-mappings)",
                         "ovn_chassis (owned_bridge_mappings; the ovn_controller role's ovn_controller_physnets)",
                         "resources/ovs.py (which mappings are the product's to remove)"),
    "CNI_TYPE": (KIND_NAME, "CNI configurations (type), NetworkAttachmentDefinitions", "the cni role, users",
                 "cni.py, the node agent, the watcher (daemons/multus.py)"),
    "IPAM_TYPE": (KIND_NAME, "CNI configurations (ipam.type) of other plugins", "users",
                  "the node agent, the watcher (daemons/multus.py)"),
    "DEFAULT_SOCKET": (KIND_NAME, "the node agent's unix socket, and the cni role's default", "the node agent",
                       "cni.py (the plugin the runtime executes)"),
    "WATCHER": (KIND_NAME, "the watcher's program and logger, the source component of its Events, and its "
                           "systemd unit (the watcher role's default watcher_service)", "the watcher",
                "operators (kubectl get events, the journal)"),
    "NODE_AGENT": (KIND_NAME, "the node agent's program and logger", "the node agent", "operators (the journal)"),
    "UPLINK_PROGRAM": (KIND_NAME, "daemons/uplinks.py's program name", "daemons/uplinks.py", "its usage line"),
    "UPLINK_UNIT": (KIND_NAME, "the systemd unit ovn4nfv-uplink@<bridge>.service that runs daemons/uplinks.py",
                    "the ovs role", "systemd at boot; daemons/uplinks.py's docs"),
    "UPGRADE_DROPIN": (KIND_NAME, "/etc/systemd/system/ovn-ovsdb-server-nb.service.d/ and -sb.service.d/ of a "
                       "clustered central member on Open vSwitch 3.2 or later, while the upgrade runs "
                       "(ExecStart with --disable-file-no-data-conversion)",
                       "node_upgrade (state restarted, step central)",
                       "systemd; node_upgrade (state settled: its presence is the sign to settle, then removed)"),
    "AGENT_UNIT": (KIND_NAME, "the node agent's systemd unit (the cni role's default cni_agent_service)",
                   "the cni role", "node/upgrade_node.py (restarted on the new release)"),
    "VETH_ALIAS_PREFIX": (KIND_PREFIX, "the alias (IFLA_IFALIAS) of a pod's node-side veth, then the "
                                       "container's digest and the pod's interface",
                          "the node agent (ADD)", "the node agent (DEL: which veths are the container's)"),
    "PICTURE_MARK": (KIND_NAME, "the comment an SVG picture carries (with its digest)", "cluster/picture.py (digest)",
                     "cluster/picture.py (page), the picture module (unchanged picture, no rewrite)"),
    "POLICY_GROUP_PREFIX": (KIND_PREFIX, "Port_Group.name of a policy's group (and its address sets' names)",
                            "the watcher (cluster/policy_render.py)", "the watcher, the audit, the trace"),
    "DENY_GROUP_PREFIX": (KIND_PREFIX, "Port_Group.name of a network's default-deny group, per direction",
                          "the watcher (cluster/policy_render.py)", "the watcher, the audit, the trace"),
    "K_POLICY": (KIND_KEY, "a policy's Port_Group, ACL and Address_Set rows", "the watcher (cluster/multi_policies.py)",
                 "cluster/multi_policies.py (read, what a plan may change), the audit, the trace"),
    "K_POLICY_SPEC": (KIND_KEY, "a policy's Port_Group", "the watcher (cluster/multi_policies.py)",
                      "cluster/multi_policies.py (read: the policy as rendered, its switches)"),
    "K_POLICY_RULE": (KIND_KEY, "a policy's ACL and Address_Set rows", "the watcher (cluster/multi_policies.py)",
                      "the audit, the trace (which rule)"),
    "K_DEFAULT_DENY": (KIND_KEY, "a network's default-deny Port_Group and its ACLs (beside NETWORK_KEY)",
                       "the watcher (cluster/multi_policies.py)", "cluster/multi_policies.py, the audit, the trace"),
    "ROLE_ACL_ANCHOR": (KIND_VALUE, "ROLE on the ACL of a switch that keeps its conntrack on",
                        "the watcher (cluster/multi_policies.py)", "cluster/multi_policies.py, the audit"),
    "METER_ACL_LOG": (KIND_NAME, "Meter.name of the meter of the default denies' drop logs (ACL.meter)",
                      "the watcher (cluster/multi_policies.py)", "ovn-controller; the audit"),
    "K_BASELINE": (KIND_KEY, "a baseline rule's ACL and Address_Set rows", "the network_policy module "
                   "(cluster/baseline.py)", "cluster/baseline.py, the watcher (its address sets), the audit, the trace"),
    "K_BASELINE_SPEC": (KIND_KEY, "a baseline rule's ACL: the rule as declared", "the network_policy module",
                        "cluster/baseline.py (read, gathered), the audit"),
    "K_BASELINE_PEERS": (KIND_KEY, "a baseline rule's Address_Set: the selectors of its peers",
                         "the network_policy module", "the watcher (which pods' addresses it holds)"),
    "BASELINE_SET_PREFIX": (KIND_PREFIX, "Address_Set.name of a baseline rule's selector peers, per IP family",
                            "the network_policy module (cluster/baseline.py)", "the watcher, the audit"),
    "ROLE_BASELINE_NETWORK": (KIND_VALUE, "ROLE on the ACLs of a network a baseline rule guards: its conntrack "
                              "anchor, its neighbour discovery holes (beside NETWORK_KEY)",
                              "the network_policy module (cluster/baseline.py)", "cluster/baseline.py, the audit"),
    "K_TERM": (KIND_KEY, "NB_Global (the leading watcher's term)", "the watcher (ovsdb/fence.py, at takeover)",
               "ovsdb/fence.py (every watcher transaction waits on it), operators (ovn-nbctl get NB_Global . "
               "external_ids)"),
    "K_TERM_HOLDER": (KIND_KEY, "NB_Global (who took the term: the Lease's holder)",
                      "the watcher (ovsdb/fence.py, at takeover)", "ovsdb/fence.py, operators"),
    "TERM_COMMENT": (KIND_PREFIX, "the comment of every NB transaction a watcher commits, then its term and "
                     "identity", "the watcher (ovsdb/fence.py)", "operators (ovsdb-tool show-log -m), the tests' "
                     "history reader"),
    "VIRTUAL_NETWORK_SCOPE": (KIND_NAME, "a MultiNetworkPolicy's k8s.v1.cni.cncf.io/policy-for annotation, "
                              "as <scope>/<network>", "tenants (their policies)",
                              "cluster/policy_model.py (parse_policy_for)"),
}
