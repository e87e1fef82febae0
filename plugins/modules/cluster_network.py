#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_network
short_description: Declare a whole cluster network in one task and one transaction
version_added: 0.1.0
description:
  - Declares, in one OVN northbound transaction, the cluster topology
    (M(ovn4nfv.k8s.cluster_topology)), the node gateways (M(ovn4nfv.k8s.node_gateway)), the
    virtual networks (M(ovn4nfv.k8s.virtual_network), V(ovn) backend), and ports reserved on
    them; then the routes and SNAT that join them.
  - Every option means what it means in those modules, and every check they make is made here,
    before anything is written. Objects are created and updated as with their V(merged) state.
    To delete objects, or to apply V(replaced) or V(overridden), use those modules.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  topology:
    description:
      - The topology, as the C(config) of M(ovn4nfv.k8s.cluster_topology).
    type: dict
    default: {}
  gateways:
    description:
      - The node gateways, as the C(config) of M(ovn4nfv.k8s.node_gateway).
    type: list
    elements: dict
    default: []
  networks:
    description:
      - The virtual networks, as the C(config) of M(ovn4nfv.k8s.virtual_network), each with an
        optional C(ports) list of C({name, ip, mac}) to reserve on it. A port with an C(ip) gets
        that address (and C(mac), or a MAC derived from its name); a port without one is given
        an address by OVN.
    type: list
    elements: dict
    default: []
  underlay_mtu:
    description:
      - As in M(ovn4nfv.k8s.virtual_network).
    type: int
  state:
    description:
      - V(merged) creates and updates; V(gathered) returns the topology, gateways and networks
        without writing; V(rendered) returns the OVSDB operations V(merged) would perform.
    type: str
    choices: [merged, gathered, rendered]
    default: merged
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.NB
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: The seed topology's cluster network, in one transaction
  ovn4nfv.k8s.cluster_network:
    topology:
      join_subnet: 100.64.1.0/24
    gateways:
      - node: worker1
        external_ip: 192.168.50.12/24
        external_gateway: 192.168.50.1
      - node: worker2
        external_ip: 192.168.50.13/24
        external_gateway: 192.168.50.1
    networks:
      - name: ovn-ls-25
        subnet: 172.16.25.0/24
      - name: ovn-ls-26
        subnet: 172.16.26.0/24
        ports:
          - name: vnf-a-net1
            ip: 172.16.26.3
            mac: "0a:00:00:00:00:15"
"""

RETURN = r"""
before:
  description: The topology, gateways and networks this task changes, as they were.
  returned: when O(state=merged)
  type: list
  elements: dict
  sample: []
after:
  description: The topology, gateways and networks this task changes, as they are now (in check
    mode, as they would be).
  returned: when O(state=merged)
  type: list
  elements: dict
  sample: [{"name": "ovn-ls-25", "subnet": "172.16.25.0/24", "gateway": "172.16.25.1", "backend": "ovn"}]
operations:
  description: What was done (in check mode, what would be done), in readable lines.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create virtual_network ovn-ls-25: backend='ovn'; gateway='172.16.25.1'; subnet='172.16.25.0/24'"]
gathered:
  description: The topology, the gateways, and the networks with their usage and ports.
  returned: when O(state=gathered)
  type: dict
  sample: {"topology": {"router": "ovn4nfv-master"}, "gateways": [], "networks": []}
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample: [{"op": "insert", "table": "Logical_Router", "uuid-name": "row1", "row": {"name": "ovn4nfv-master"}}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import (
    composite_result, connection_argument_spec, require_libraries, run_composite)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.composite import plan_cluster_network
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB, NB_SCHEMA
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES


def _items(values):
    return [("%d" % i, dict((k, v) for k, v in item.items() if v is not None))
            for i, item in enumerate(values or [])]


def main():
    spec = dict(
        topology=dict(type="dict", default={}),
        gateways=dict(type="list", elements="dict", default=[]),
        networks=dict(type="list", elements="dict", default=[]),
        underlay_mtu=dict(type="int"),
        state=dict(type="str", default="merged", choices=["merged", "gathered", "rendered"]),
    )
    spec.update(connection_argument_spec(DEFAULT_NB_DB))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    require_libraries(module)
    params = module.params
    gateways = [("gateways[%s]" % w, item) for w, item in _items(params["gateways"])]
    networks = [("networks[%s]" % w, item) for w, item in _items(params["networks"])]
    plan = run_composite(module, NB_SCHEMA, TABLES, lambda view, mode: plan_cluster_network(
        view, params["topology"], gateways, networks, mode, params["underlay_mtu"]))
    module.exit_json(**composite_result(module, plan, params["state"],
                                        single=params["state"] == "gathered"))


if __name__ == "__main__":
    main()
