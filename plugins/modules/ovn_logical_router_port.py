#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_logical_router_port
short_description: Manage OVN logical router ports
version_added: 0.1.0
description:
  - Creates, updates and deletes logical router ports in the OVN northbound database.
  - A new port needs O(config[].mac) and O(config[].networks).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The router ports.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The port name; it identifies the port.
        type: str
        required: true
      router:
        description:
          - The router the port belongs to. Required unless O(state=deleted).
        type: str
      mac:
        description:
          - The port's unicast MAC address.
        type: str
      networks:
        description:
          - The port's addresses with their prefix lengths, for example V(172.16.25.1/24).
        type: list
        elements: str
      peer:
        description:
          - The router port at the other end, for a direct router-to-router link.
        type: str
      gateway_chassis:
        description:
          - Chassis that may host this port as a distributed gateway port, with priorities.
        type: list
        elements: dict
        suboptions:
          chassis_name:
            description:
              - The chassis name (its system-id).
            type: str
            required: true
          priority:
            description:
              - Higher wins, 0-32767.
            type: int
      options:
        description:
          - Port C(options).
        type: dict
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
- name: The router side of a virtual network
  ovn4nfv.k8s.ovn_logical_router_port:
    config:
      - name: rtos-ovn-ls-25
        router: ovn4nfv-master
        mac: "0a:00:00:19:00:01"
        networks: [172.16.25.1/24]

- name: A distributed gateway port that prefers worker1
  ovn4nfv.k8s.ovn_logical_router_port:
    config:
      - name: rtoe-ext
        router: ovn4nfv-master
        mac: "0a:00:00:32:00:01"
        networks: [192.168.50.100/24]
        gateway_chassis:
          - chassis_name: worker1
            priority: 20
          - chassis_name: worker2
            priority: 10
"""

RETURN = r"""
before:
  description: The router ports this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "rtos-ovn-ls-25", "router": "ovn4nfv-master", "mac": "0a:00:00:19:00:01", "networks": ["172.16.25.1/24"]}]
after:
  description: The router ports this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "rtos-ovn-ls-25", "router": "ovn4nfv-master", "mac": "0a:00:00:19:00:01", "networks": ["172.16.25.1/24"]}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create logical_router_port rtos-ovn-ls-25: mac='0a:00:00:19:00:01'; networks=['172.16.25.1/24']; router='ovn4nfv-master'"]
gathered:
  description: The current router ports, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"name": "rtos-ovn-ls-25", "router": "ovn4nfv-master", "mac": "0a:00:00:19:00:01", "networks": ["172.16.25.1/24"]}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample:
    [
      {
        "op": "insert",
        "table": "Logical_Router_Port",
        "uuid-name": "row1",
        "row": {
          "name": "rtos-ovn-ls-25",
          "mac": "0a:00:00:19:00:01"
        }
      }
    ]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_routers import LogicalRouterPort
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB

OPTIONS = dict(
    name=dict(type="str", required=True),
    router=dict(type="str"),
    mac=dict(type="str"),
    networks=dict(type="list", elements="str"),
    peer=dict(type="str"),
    gateway_chassis=dict(type="list", elements="dict", options=dict(
        chassis_name=dict(type="str", required=True),
        priority=dict(type="int"),
    )),
    options=dict(type="dict"),
    external_ids=dict(type="dict"),
)


def main():
    run_resource_module(LogicalRouterPort, OPTIONS, DEFAULT_NB_DB)


if __name__ == "__main__":
    main()
