#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovs_uplink
short_description: Move a host NIC onto an OVS bridge, with its addresses
version_added: 0.1.0
description:
  - Makes a host NIC a port of an OVS bridge, and moves the NIC's global addresses and its
    routes through a next hop onto the bridge's own interface, which takes the NIC's MAC.
  - This is the underlay of OVS's userspace tunnelling (C(br-phy)), where the node's tunnel
    endpoint address must live on a netdev bridge; and, with O(move_addresses=false), the
    external NIC of a node gateway (C(br-ext)), whose address the gateway router answers for.
  - "The steps run in an order that keeps the bridge from learning its own MAC on the NIC's
    port: IPv6 is turned off on the NIC and its addresses are removed first, then the bridge and
    the port are created in one OVSDB transaction, and only then do the addresses appear on the
    bridge."
  - "Nothing goes on the bridge's interface until it carries the NIC's MAC: on the userspace
    datapath C(ovs-vswitchd) takes the interface down to set it, and a link that goes down loses
    its routes."
  - If a step fails, the NIC is taken off the bridge again and given back its addresses, routes
    and IPv6, and the error names the step.
  - V(absent) moves the addresses and routes back to the NIC and takes it off the bridge; the
    bridge stays, and so do its VLAN interfaces.
  - "With O(vlan_interfaces), the node's own addresses on VLANs of the NIC: each an OVS internal
    port of the bridge with the VLAN as its C(tag) (never a kernel VLAN device: the NIC is a bridge
    port, and the kernel may have no 8021q module), holding exactly its address."
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  interface:
    description:
      - The host NIC, such as V(eth0).
    type: str
    required: true
  bridge:
    description:
      - The OVS bridge, created if missing.
    type: str
    required: true
  datapath_type:
    description:
      - The bridge's datapath; V(netdev) for the userspace datapath.
    type: str
    choices: [system, netdev]
    default: netdev
  move_addresses:
    description:
      - Whether the NIC's addresses and routes move to the bridge (V(true)), or are dropped
        (V(false), for an external NIC whose address a gateway router holds).
    type: bool
    default: true
  addresses:
    description:
      - Addresses, as V(IP/prefix), that the bridge must hold, besides those that move from the NIC.
      - The NIC's addresses move only while it still holds them; once it is a port, nothing is
        left on it to learn from. Naming the node's address here lets a later run put it back on
        a bridge that lost it, for example after C(ovs-vswitchd) re-created the bridge's
        interface.
    type: list
    elements: str
    default: []
  vlan_interfaces:
    description:
      - The node's addresses on VLANs carried by the NIC, exactly these. Each is an internal port of
        the bridge, marked as the product's (C(external_ids:ovn4nfv-vlan-interface), on its
        interface), whose device holds the address; what arrives on the NIC with that VLAN's tag
        reaches it untagged, and what it sends leaves tagged.
      - A VLAN interface of the product's on this bridge that is no longer listed is deleted, its
        address with it; another tool's port is never touched, and a name that another port or a
        kernel link already has is refused before anything changes. V([]) deletes every one of
        the product's; leaving the option out leaves them alone.
      - The device's MAC (C(Interface.mac)) is derived from the NIC's MAC and the VLAN, so it is
        the same after every restart of Open vSwitch and differs between nodes.
      - Ignored with O(state=absent).
    type: list
    elements: dict
    suboptions:
      vlan:
        description:
          - The VLAN, 1-4094.
        type: int
        required: true
      address:
        description:
          - The node's address on it, as V(IP/prefix).
        type: str
        required: true
      name:
        description:
          - The device's name, at most 15 characters; by default V(<bridge>.<vlan>).
        type: str
      mtu:
        description:
          - The device's MTU (the interface's C(mtu_request)), 68-65535; by default Open vSwitch's.
        type: int
  state:
    description:
      - V(present) puts the NIC on the bridge; V(absent) takes it off again.
    type: str
    choices: [present, absent]
    default: present
  link_timeout:
    description:
      - Seconds to wait for the bridge's interface to appear once OVS has created it, and to carry
        the NIC's MAC.
    type: int
    default: 10
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.OVS
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
requirements:
  - pyroute2
notes:
  - "Run it where the host is reachable through another path (a console, a container runtime, a
    second NIC): the node's address is briefly on neither interface."
"""

EXAMPLES = r"""
- name: The underlay NIC on br-phy, for userspace Geneve tunnels
  ovn4nfv.k8s.ovs_uplink:
    interface: eth0
    bridge: br-phy
    datapath_type: netdev
    addresses: [192.168.33.12/24]

- name: A provider network's NIC on br-prov, with the node's address on its VLAN 100
  ovn4nfv.k8s.ovs_uplink:
    interface: eth2
    bridge: br-prov
    move_addresses: false
    vlan_interfaces:
      - vlan: 100
        address: 192.168.100.12/24

- name: The external NIC on br-ext; the node gateway router holds the external address
  ovn4nfv.k8s.ovs_uplink:
    interface: eth1
    bridge: br-ext
    move_addresses: false
"""

RETURN = r"""
before:
  description: The NIC and the bridge as they were.
  returned: always
  type: dict
  sample: {"interface": "eth0", "bridge": "br-phy", "in_bridge": false,
           "interface_addresses": ["192.168.33.12/24"], "interface_ipv6": true, "bridge_addresses": []}
after:
  description: The NIC and the bridge as they are now (in check mode, as they would be).
  returned: always
  type: dict
  sample: {"interface": "eth0", "bridge": "br-phy", "in_bridge": true,
           "interface_addresses": [], "interface_ipv6": false, "bridge_addresses": ["192.168.33.12/24"]}
operations:
  description: What was done (in check mode, what would be done), in order.
  returned: always
  type: list
  elements: str
  sample: ["disable IPv6 on eth0", "remove 192.168.33.12/24 from eth0", "create bridge br-phy",
           "create port eth0", "add 192.168.33.12/24 to br-phy"]
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import (
    connected, connection_argument_spec, fail, require_libraries)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import Ovn4nfvError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import Bridge
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_OVS_DB, OVS_SCHEMA
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import uplink, vlan_interfaces


def main():
    spec = dict(
        interface=dict(type="str", required=True),
        bridge=dict(type="str", required=True),
        datapath_type=dict(type="str", default="netdev", choices=["system", "netdev"]),
        move_addresses=dict(type="bool", default=True),
        addresses=dict(type="list", elements="str", default=[]),
        vlan_interfaces=dict(type="list", elements="dict", options=dict(
            vlan=dict(type="int", required=True), address=dict(type="str", required=True),
            name=dict(type="str"), mtu=dict(type="int"))),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        link_timeout=dict(type="int", default=10),
    )
    spec.update(connection_argument_spec(DEFAULT_OVS_DB))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    require_libraries(module)
    if not uplink.HAS_PYROUTE2:
        module.fail_json(msg=missing_required_lib("pyroute2"), exception="".join(
            traceback.format_exception_only(type(uplink.PYROUTE2_IMPORT_ERROR),
                                            uplink.PYROUTE2_IMPORT_ERROR)))
    params = module.params
    try:
        wanted = uplink.Uplink(params["interface"], params["bridge"], params["datapath_type"],
                               params["move_addresses"], params["addresses"], where="ovs_uplink")
        vlans = None if params["vlan_interfaces"] is None else vlan_interfaces.parse(wanted, [
            dict((k, v) for k, v in item.items() if v is not None) for item in params["vlan_interfaces"]])
    except Ovn4nfvError as exc:
        fail(module, exc)
    if params["state"] == "present":
        def step(ipr, database, wanted, check_mode, timeout):
            return vlan_interfaces.apply_with_uplink(ipr, database, wanted, vlans, check_mode, timeout)
    else:
        step = uplink.remove_uplink
    with connected(module, Bridge().tables, OVS_SCHEMA) as database:
        with uplink.netlink() as ipr:
            try:
                changed, before, after, operations = step(ipr, database, wanted, module.check_mode,
                                                          params["link_timeout"])
            except Ovn4nfvError as exc:
                fail(module, exc)
    result = dict(changed=changed, before=before, after=after, operations=operations)
    if module._diff and changed:
        result["diff"] = dict(before=before, after=after)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
