#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovs_port
short_description: Manage Open vSwitch ports and their interfaces
version_added: 0.1.0
description:
  - Creates, updates and deletes ports of Open vSwitch bridges, each with one interface of the
    same name, in one transaction per task.
  - O(config[].type), O(config[].options), O(config[].external_ids), O(config[].mtu_request) and
    O(config[].mac) belong to the interface; O(config[].tag) and O(config[].trunks) to the port.
  - A bridge's own local port is managed by M(ovn4nfv.k8s.ovs_bridge) and not shown here.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The ports.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The port (and interface) name; it identifies the port. At most 15 characters.
        type: str
        required: true
      bridge:
        description:
          - The bridge the port belongs to. Required unless O(state=deleted).
        type: str
      type:
        description:
          - The interface type; V(system) is a kernel network device.
        type: str
        choices: [system, internal, patch, vxlan, geneve]
      options:
        description:
          - Interface C(options), for example C(peer) of a patch port or C(remote_ip) and C(key)
            of a tunnel.
        type: dict
      tag:
        description:
          - VLAN of an access port, 0-4095.
        type: int
      trunks:
        description:
          - VLANs a trunk port carries, each 0-4095.
        type: list
        elements: int
      external_ids:
        description:
          - Interface C(external_ids), for example C(iface-id), the OVN logical port bound here.
        type: dict
      mtu_request:
        description:
          - Requested MTU of the interface, 68-65535.
        type: int
      mac:
        description:
          - The Ethernet address Open vSwitch gives an internal interface (O(config[].type=internal))
            each time it makes it; without it, a random one.
        type: str
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.OVS
  - ovn4nfv.k8s.ovsdb.RESOURCE
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: A patch pair between br-int and br-ex
  ovn4nfv.k8s.ovs_port:
    config:
      - name: patch-int-ex
        bridge: br-int
        type: patch
        options:
          peer: patch-ex-int
      - name: patch-ex-int
        bridge: br-ex
        type: patch
        options:
          peer: patch-int-ex

- name: A pod's veth on br-int, bound to its logical port
  ovn4nfv.k8s.ovs_port:
    config:
      - name: veth1234ab
        bridge: br-int
        external_ids:
          iface-id: default_web_net0
"""

RETURN = r"""
before:
  description: The ports this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "patch-int-ex", "bridge": "br-int", "type": "patch", "options": {"peer": "patch-ex-int"}}]
after:
  description: The ports this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "patch-int-ex", "bridge": "br-int", "type": "patch", "options": {"peer": "patch-ex-int"}}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create port patch-int-ex: bridge='br-int'; options.peer='patch-ex-int'; type='patch'"]
gathered:
  description: The current ports, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"name": "patch-int-ex", "bridge": "br-int", "type": "patch", "options": {"peer": "patch-ex-int"}}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample:
    [
      {
        "op": "insert",
        "table": "Interface",
        "uuid-name": "row1",
        "row": {
          "name": "patch-int-ex",
          "type": "patch"
        }
      }
    ]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import Port
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_OVS_DB

OPTIONS = dict(
    name=dict(type="str", required=True),
    bridge=dict(type="str"),
    type=dict(type="str", choices=["system", "internal", "patch", "vxlan", "geneve"]),
    options=dict(type="dict"),
    tag=dict(type="int"),
    trunks=dict(type="list", elements="int"),
    external_ids=dict(type="dict"),
    mtu_request=dict(type="int"),
    mac=dict(type="str"),
)


def main():
    run_resource_module(Port, OPTIONS, DEFAULT_OVS_DB)


if __name__ == "__main__":
    main()
