#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_logical_switch_port
short_description: Manage OVN logical switch ports
version_added: 0.1.0
description:
  - Creates, updates and deletes logical switch ports in the OVN northbound database, many in one
    transaction.
  - "Port names are unique across the database: a port that exists on another switch is refused,
    never moved silently."
  - Static IPv4 addresses must lie inside the switch's
    O(ovn4nfv.k8s.ovn_logical_switch#module:config[].subnet) when it has one.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The switch ports.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The port name; it identifies the port.
        type: str
        required: true
      switch:
        description:
          - The switch the port belongs to. Required unless O(state=deleted).
        type: str
      addresses:
        description:
          - V(dynamic), V(router), V(unknown), C(MAC), C(MAC IP...) or C(MAC dynamic).
        type: list
        elements: str
      port_security:
        description:
          - C(MAC [IP...]) entries the port may send from.
        type: list
        elements: str
      type:
        description:
          - V(normal) for a VM or pod port, V(router) to connect a router port, V(localnet) for a
            physical network.
        type: str
        choices: [normal, router, localnet]
      options:
        description:
          - Port C(options), for example C(router-port) or C(network_name).
        type: dict
      tag:
        description:
          - VLAN of a V(localnet) port, 1-4095; of a nested port (O(config[].parent_name)), the VLAN its
            frames carry on its parent's interface.
        type: int
      parent_name:
        description:
          - Makes this a nested port (OVN's container port), for example a VLAN of a VNF's trunk interface.
          - Its frames ride the interface of the port named here, tagged with O(config[].tag); the port
            itself may sit on another switch.
        type: str
      external_ids:
        description:
          - C(external_ids) keys.
        type: dict
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.NB
  - ovn4nfv.k8s.ovsdb.RESOURCE
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: A dynamic and a static port
  ovn4nfv.k8s.ovn_logical_switch_port:
    config:
      - name: default_web_net0
        switch: ovn-ls-25
        addresses: [dynamic]
      - name: default_web_net1
        switch: ovn-ls-26
        addresses: ["0a:00:00:00:00:15 172.16.26.3"]
        port_security: ["0a:00:00:00:00:15 172.16.26.3"]

- name: A switch's end of a router connection
  ovn4nfv.k8s.ovn_logical_switch_port:
    config:
      - name: stor-ovn-ls-25
        switch: ovn-ls-25
        type: router
        addresses: [router]
        options:
          router-port: rtos-ovn-ls-25
"""

RETURN = r"""
before:
  description: The switch ports this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "default_web_net0", "switch": "ovn-ls-25", "addresses": ["dynamic"], "type": "normal"}]
after:
  description: The switch ports this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "default_web_net0", "switch": "ovn-ls-25", "addresses": ["dynamic"], "type": "normal"}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create logical_switch_port default_web_net0: addresses=['dynamic']; switch='ovn-ls-25'; type='normal'"]
gathered:
  description: The current switch ports, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"name": "default_web_net0", "switch": "ovn-ls-25", "addresses": ["dynamic"], "type": "normal"}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample:
    [
      {
        "op": "insert",
        "table": "Logical_Switch_Port",
        "uuid-name": "row1",
        "row": {
          "name": "default_web_net0",
          "addresses": [
            "set",
            [
              "dynamic"
            ]
          ]
        }
      }
    ]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB

OPTIONS = dict(
    name=dict(type="str", required=True),
    switch=dict(type="str"),
    addresses=dict(type="list", elements="str"),
    port_security=dict(type="list", elements="str"),
    type=dict(type="str", choices=["normal", "router", "localnet"]),
    options=dict(type="dict"),
    tag=dict(type="int"),
    parent_name=dict(type="str"),
    external_ids=dict(type="dict"),
)


def main():
    run_resource_module(LogicalSwitchPort, OPTIONS, DEFAULT_NB_DB)


if __name__ == "__main__":
    main()
