#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: node_gateway
short_description: Manage the OVN gateway of each node
version_added: 0.1.0
description:
  - For each node, in one transaction, creates a gateway router bound to the node's chassis,
    its port on the cluster's join switch, an external logical switch whose localnet port
    reaches the node's external OVS bridge, the gateway's external address, a default route to
    the external next hop, routes between the distributed router and the gateway router, and SNAT
    of every virtual network's subnet to the node's external address.
  - Routes and SNAT follow the virtual networks; M(ovn4nfv.k8s.virtual_network) keeps them right
    when networks come and go, without further tasks.
  - The node's C(ovn-bridge-mappings) must map O(config[].physnet) to its external bridge
    (M(ovn4nfv.k8s.ovn_chassis)).
  - Needs the topology of M(ovn4nfv.k8s.cluster_topology).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The gateways, one per node.
    type: list
    elements: dict
    suboptions:
      node:
        description:
          - The node's name; it identifies the gateway and names its objects (C(gr-<node>), ...).
        type: str
        required: true
      chassis:
        description:
          - The node's chassis name (its C(system-id)). Defaults to O(config[].node).
        type: str
      external_ip:
        description:
          - The node's external address with its prefix length, for example V(192.168.50.12/24).
          - Required unless O(state=deleted).
        type: str
      external_gateway:
        description:
          - The next hop on the external network for the default route.
          - Required unless O(state=deleted).
        type: str
      physnet:
        description:
          - The physical network name of the localnet port. Defaults to V(physnet-ext).
        type: str
      join_ip:
        description:
          - The gateway's address on the join switch. By default its current one, or the lowest
            free host after the distributed router's.
        type: str
      vlan:
        description:
          - VLAN of the external network, 1-4094, on the localnet port.
        type: int
      external_mac:
        description:
          - MAC of the external port. By default derived from the node name, locally administered.
        type: str
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.NB
  - ovn4nfv.k8s.ovsdb.RESOURCE
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: The cluster topology the gateways hang off
  ovn4nfv.k8s.cluster_topology:
    config:
      join_subnet: 100.64.1.0/24

- name: Gateways of the seed topology's workers
  ovn4nfv.k8s.node_gateway:
    config:
      - node: worker1
        external_ip: 192.168.50.12/24
        external_gateway: 192.168.50.1
      - node: worker2
        external_ip: 192.168.50.13/24
        external_gateway: 192.168.50.1
"""

RETURN = r"""
before:
  description: The gateways this task changes, as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: []
after:
  description: The gateways this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"node": "worker1", "chassis": "worker1", "external_ip": "192.168.50.12/24",
            "external_gateway": "192.168.50.1", "physnet": "physnet-ext", "join_ip": "100.64.1.2",
            "external_mac": "0a:6e:1f:22:83:10"}]
operations:
  description: What was done (in check mode, what would be done), in readable lines.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create node_gateway worker1: external_ip='192.168.50.12/24'"]
gathered:
  description: The current gateways, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"node": "worker1", "external_ip": "192.168.50.12/24", "external_gateway": "192.168.50.1"}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample: [{"op": "insert", "table": "Logical_Router", "uuid-name": "row1", "row": {"name": "gr-worker1"}}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import (
    composite_result, connection_argument_spec, refuse_bare_override, require_libraries, run_composite)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB, NB_SCHEMA
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import STATES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_gateways


def main():
    spec = dict(
        config=dict(type="list", elements="dict", options=dict(
            node=dict(type="str", required=True),
            chassis=dict(type="str"),
            external_ip=dict(type="str"),
            external_gateway=dict(type="str"),
            physnet=dict(type="str"),
            join_ip=dict(type="str"),
            vlan=dict(type="int"),
            external_mac=dict(type="str"),
        )),
        state=dict(type="str", default="merged", choices=list(STATES)),
    )
    spec.update(connection_argument_spec(DEFAULT_NB_DB))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True,
                           required_if=[("state", s, ("config",)) for s in ("merged", "replaced", "rendered")])
    refuse_bare_override(module)
    require_libraries(module)
    items = [("config[%d]" % i, dict((k, v) for k, v in item.items() if v is not None))
             for i, item in enumerate(module.params["config"] or [])]
    plan = run_composite(module, NB_SCHEMA, TABLES,
                         lambda view, mode: plan_gateways(view, items, mode))
    module.exit_json(**composite_result(module, plan, module.params["state"]))


if __name__ == "__main__":
    main()
