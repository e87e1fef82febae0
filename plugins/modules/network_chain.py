#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: network_chain
short_description: Chain network functions between virtual networks
version_added: 0.2.0
description:
  - A chain sends the traffic from a source network (optionally only that of the pods a label
    selector picks, and only to some destination prefixes) to a destination network through an
    ordered list of network functions. Each function is the pods a label selector picks, entering
    on their left interface and leaving on their right one; the answers cross the same functions
    in reverse order, right in and left out.
  - Built as logical router policies with C(reroute) on the distributed router, in one
    transaction per task. The ovn4nfv watcher keeps each policy's next hops the ready pods of its
    function (several pods share the load, ECMP), keeps the source selector's address set, and
    gives the functions' chain interfaces MAC-only port security, so that they may forward
    traffic that is not theirs.
  - Without a ready pod, a function fails the chain closed (its traffic is dropped), or open
    (traffic goes straight, without the function) when O(config[].fail_open) says so.
  - A chain whose networks do not exist is refused, naming the part. A selected pod whose named
    interface is not on the network the chain names is not used, and the watcher says so in an
    Event on the pod.
  - Needs the topology of M(ovn4nfv.k8s.cluster_topology) and the networks of
    M(ovn4nfv.k8s.virtual_network).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The chains.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The chain's name, lower-case letters, digits and C(-); it identifies the chain.
        type: str
        required: true
      source_network:
        description:
          - The network the traffic comes from. Required unless O(state=deleted).
        type: str
      destination_network:
        description:
          - The network the traffic goes to. Required unless O(state=deleted).
        type: str
      destination_prefixes:
        description:
          - The destinations chained; the destination network's subnet when not given.
        type: list
        elements: str
      source_selector:
        description:
          - Only the traffic of the pods with these labels (in O(config[].namespace)), on the
            source network.
        type: dict
      namespace:
        description:
          - The namespace of the pods the selectors pick. Defaults to V(default).
        type: str
      functions:
        description:
          - The network functions, in the order the traffic crosses them.
        type: list
        elements: dict
        suboptions:
          selector:
            description:
              - The labels of the function's pods.
            type: dict
            required: true
          left:
            description:
              - Where the traffic enters the function.
            type: dict
            required: true
            suboptions:
              interface:
                description:
                  - The pod interface, as the pod's network request names it.
                type: str
                required: true
              network:
                description:
                  - The virtual network that interface is on.
                type: str
                required: true
          right:
            description:
              - Where the traffic leaves the function.
            type: dict
            required: true
            suboptions:
              interface:
                description:
                  - The pod interface.
                type: str
                required: true
              network:
                description:
                  - The virtual network that interface is on.
                type: str
                required: true
      fail_open:
        description:
          - With no ready pod of a function, let traffic go straight instead of dropping it.
        type: bool
        default: false
      priority:
        description:
          - The policies' priority on the distributed router, 1-32766; chains that could match
            the same packets need different ones.
        type: int
        default: 1000
  state:
    description:
      - V(merged) creates the chains in O(config) and changes the options given; V(replaced) makes
        each chain exactly as given; V(overridden) also deletes every other chain; V(deleted)
        deletes the chains named (every chain, without O(config)); V(gathered) reads the chains;
        V(rendered) shows the OVSDB operations V(merged) would perform.
    type: str
    choices: [merged, replaced, overridden, deleted, gathered, rendered]
    default: merged
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.NB
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: Traffic from ovn-ls-25 to ovn-ls-26 crosses the firewall pods
  ovn4nfv.k8s.network_chain:
    config:
      - name: fw-chain
        source_network: ovn-ls-25
        destination_network: ovn-ls-26
        functions:
          - selector: {app: firewall}
            left: {interface: net0, network: ovn-ls-25}
            right: {interface: net1, network: ovn-ls-26}
"""

RETURN = r"""
before:
  description: The chains this task changes, as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: []
after:
  description: The chains this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "fw-chain", "source_network": "ovn-ls-25", "destination_network": "ovn-ls-26",
            "fail_open": false, "priority": 1000, "namespace": "default", "destination_prefixes": [],
            "functions": [{"selector": {"app": "firewall"}, "left": {"interface": "net0", "network": "ovn-ls-25"},
                           "right": {"interface": "net1", "network": "ovn-ls-26"}}]}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create network_chain fw-chain: ..."]
gathered:
  description: The current chains, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: []
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample: [{"op": "insert", "table": "Logical_Router_Policy", "uuid-name": "row1", "row": {"priority": 1000}}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import (
    composite_result, connection_argument_spec, refuse_bare_override, require_libraries, run_composite)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import chains
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB, NB_SCHEMA
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import STATES

SIDE = dict(type="dict", required=True, options=dict(
    interface=dict(type="str", required=True),
    network=dict(type="str", required=True),
))


def main():
    spec = dict(
        config=dict(type="list", elements="dict", options=dict(
            name=dict(type="str", required=True),
            source_network=dict(type="str"),
            destination_network=dict(type="str"),
            destination_prefixes=dict(type="list", elements="str"),
            source_selector=dict(type="dict"),
            namespace=dict(type="str"),
            functions=dict(type="list", elements="dict", options=dict(
                selector=dict(type="dict", required=True),
                left=SIDE,
                right=SIDE,
            )),
            fail_open=dict(type="bool", default=False),
            priority=dict(type="int", default=chains.DEFAULT_PRIORITY),
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
    plan = run_composite(module, NB_SCHEMA, TABLES + chains.TABLES,
                         lambda view, mode: chains.plan_chains(view, items, mode))
    module.exit_json(**composite_result(module, plan, module.params["state"]))


if __name__ == "__main__":
    main()
