#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_topology
short_description: Manage the cluster's distributed router and join switch in OVN
version_added: 0.1.0
description:
  - Creates the seed design's cluster topology in the OVN northbound database, in one transaction
    a distributed router, a join switch between it and the node gateways, and a router port on
    the join switch holding the first host address of the join subnet.
  - The join subnet is configurable; the next host addresses go to the node gateways
    (M(ovn4nfv.k8s.node_gateway)).
  - The topology cannot be renamed or renumbered while virtual networks or node gateways hang
    off it, and V(deleted) refuses while they exist unless O(force=true).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The topology, one object. Left out, each option takes its default (or, under V(merged),
        its current value).
    type: dict
    suboptions:
      router:
        description:
          - Name of the distributed router. Defaults to V(ovn4nfv-master).
        type: str
      join_switch:
        description:
          - Name of the join switch. Defaults to V(ovn4nfv-join).
        type: str
      join_subnet:
        description:
          - IPv4 subnet of the join switch. Defaults to V(100.64.1.0/24).
        type: str
  force:
    description:
      - Delete the topology even while virtual networks or gateways hang off it.
    type: bool
    default: false
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.NB
  - ovn4nfv.k8s.ovsdb.RESOURCE
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: The cluster router and the join switch, on a join subnet of our choosing
  ovn4nfv.k8s.cluster_topology:
    config:
      join_subnet: 100.64.1.0/24

- name: Read it back
  ovn4nfv.k8s.cluster_topology:
    state: gathered
  register: topology
"""

RETURN = r"""
before:
  description: The topology before the task, when it changes.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: dict
  sample: {}
after:
  description: The topology after the task (in check mode, as it would be), when it changes.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: dict
  sample: {"router": "ovn4nfv-master", "join_switch": "ovn4nfv-join", "join_subnet": "100.64.1.0/24",
           "router_join_ip": "100.64.1.1"}
operations:
  description: What was done (in check mode, what would be done), in readable lines.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create logical_router ovn4nfv-master: external_ids.ovn4nfv-role='cluster-router'"]
gathered:
  description: The current topology; empty when there is none.
  returned: when O(state=gathered)
  type: dict
  sample: {"router": "ovn4nfv-master", "join_switch": "ovn4nfv-join", "join_subnet": "100.64.1.0/24",
           "router_join_ip": "100.64.1.1"}
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample: [{"op": "insert", "table": "Logical_Router", "uuid-name": "row1", "row": {"name": "ovn4nfv-master"}}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import (
    composite_result, connection_argument_spec, refuse_bare_override, require_libraries, run_composite)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB, NB_SCHEMA
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import STATES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology


def main():
    spec = dict(
        config=dict(type="dict", options=dict(
            router=dict(type="str"),
            join_switch=dict(type="str"),
            join_subnet=dict(type="str"),
        )),
        state=dict(type="str", default="merged", choices=list(STATES)),
        force=dict(type="bool", default=False),
    )
    spec.update(connection_argument_spec(DEFAULT_NB_DB))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    refuse_bare_override(module)
    require_libraries(module)
    item = dict((k, v) for k, v in (module.params["config"] or {}).items() if v is not None)
    plan = run_composite(module, NB_SCHEMA, TABLES, lambda view, mode: plan_topology(
        view, item, "replaced" if mode == "overridden" else mode, module.params["force"]))
    module.exit_json(**composite_result(module, plan, module.params["state"], single=True))


if __name__ == "__main__":
    main()
