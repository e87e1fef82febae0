#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: network_policy
short_description: The operator's baseline policy on the virtual networks, above every tenant's
version_added: 0.2.0
description:
  - Rules per virtual network that no tenant's MultiNetworkPolicy can override. A rule guards
    one network in one direction, traffic to the network's addresses (V(ingress)) or from them
    (V(egress)), from or to its peers (other networks, CIDRs, the pods of the namespaces a
    selector picks), less its O(config[].except), on some ports or all; it denies or allows.
  - Each rule is one OVN ACL on the network's switch, at priority 20000 + O(config[].priority),
    above every ACL the watcher makes of the tenants' policies (12000 and below) in the same
    stage, so a baseline V(deny) wins over a tenant's allow, and a baseline V(allow) over a
    tenant's default deny. An V(allow) is stateful (the replies of what it lets through pass).
  - A denied packet is logged (rule O(config[].log), on by default for V(deny)) in
    ovn-controller's log, named C(base:<rule>), at most 20 lines a second per rule through the
    product's meter.
  - The pods a O(config[].peers[].namespace_selector) picks are kept in an address set per rule
    and IP family by the ovn4nfv watcher, as pods and namespaces come, go and change labels.
    Until the watcher has filled it, such a peer matches no pod.
  - The rule is recorded on its ACL, so the rules are read back, changed and audited from the
    northbound database alone (M(ovn4nfv.k8s.network_audit) finds and repairs an ACL edited by
    hand).
  - A rule whose networks do not exist is refused, naming the field, and nothing of the task is
    applied. Two rules of one network and direction may not share a priority.
  - Needs the networks of M(ovn4nfv.k8s.virtual_network).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The rules.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The rule's name, lower-case letters, digits and C(-); it identifies the rule.
        type: str
        required: true
      network:
        description:
          - The virtual network the rule guards. Required unless O(state=deleted).
        type: str
      direction:
        description:
          - V(ingress), traffic to the network's addresses; V(egress), traffic from them.
            V(ingress) when a new rule does not say.
        type: str
        choices: [ingress, egress]
      action:
        description:
          - What becomes of the traffic the rule matches; V(deny) when a new rule does not say.
        type: str
        choices: [deny, allow]
      priority:
        description:
          - 1-9999; of two baseline rules that match a packet, the higher decides. Two rules of
            one network and direction need different priorities. 5000 when a new rule does not say.
        type: int
      peers:
        description:
          - The other end of the traffic, each one of O(config[].peers[].network),
            O(config[].peers[].cidr) or O(config[].peers[].namespace_selector). None, every peer.
        type: list
        elements: dict
        suboptions:
          network:
            description:
              - A virtual network, its subnets.
            type: str
          cidr:
            description:
              - An IPv4 or IPv6 CIDR.
            type: str
          namespace_selector:
            description:
              - The pods of the namespaces with these labels, as a Kubernetes label selector
                (C(matchLabels), C(matchExpressions)); V({}) picks every namespace.
            type: dict
          pod_selector:
            description:
              - With O(config[].peers[].namespace_selector), only the pods with these labels.
            type: dict
      except:
        description:
          - Networks or CIDRs taken back out of the peers (each one of C(network), C(cidr)).
        type: list
        elements: dict
        suboptions:
          network:
            description:
              - A virtual network, its subnets.
            type: str
          cidr:
            description:
              - An IPv4 or IPv6 CIDR.
            type: str
      ports:
        description:
          - The destination ports matched; none, every port.
        type: list
        elements: dict
        suboptions:
          protocol:
            description:
              - The protocol.
            type: str
            choices: [TCP, UDP, SCTP]
            default: TCP
          port:
            description:
              - A port number; none, every port of the protocol.
            type: int
          end_port:
            description:
              - With O(config[].ports[].port), the last port of a range.
            type: int
      log:
        description:
          - Log the packets the rule matches. Defaults to V(true) for V(deny), V(false) for V(allow).
        type: bool
  state:
    description:
      - V(merged) creates the rules in O(config) and changes the options given; V(replaced) makes
        each rule exactly as given; V(overridden) also deletes every other rule; V(deleted)
        deletes the rules named (every rule, without O(config)); V(gathered) reads the rules;
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
- name: The operator's baseline, all of it
  ovn4nfv.k8s.network_policy:
    state: overridden
    config:
      # two networks that never reach each other through the router
      - name: ls25-not-from-ls26
        network: ovn-ls-25
        peers: [{network: ovn-ls-26}]
      - name: ls26-not-from-ls25
        network: ovn-ls-26
        peers: [{network: ovn-ls-25}]
      # below that, ovn-ls-26 accepts only from the operators' subnet (and itself)
      - name: ls26-operators-only
        network: ovn-ls-26
        priority: 4000
        except: [{cidr: 192.0.2.0/24}, {network: ovn-ls-26}]
      # the monitoring namespaces scrape every pod of ovn-ls-25, whatever the tenants' policies say
      - name: monitoring-scrapes
        network: ovn-ls-25
        action: allow
        priority: 6000
        peers: [{namespace_selector: {matchLabels: {role: monitoring}}}]
        ports: [{protocol: TCP, port: 9100}]

- name: Read it back
  ovn4nfv.k8s.network_policy:
    state: gathered
  register: baseline
"""

RETURN = r"""
before:
  description: The rules this task changes, as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: []
after:
  description: The rules this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "net1-not-from-net2", "network": "ovn-net1", "direction": "ingress", "action": "deny",
            "priority": 5000, "peers": [{"network": "ovn-net2"}], "except": [], "ports": [], "log": true}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create network_policy net1-not-from-net2: ..."]
gathered:
  description: The current rules, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: []
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample: [{"op": "insert", "table": "ACL", "uuid-name": "row1", "row": {"priority": 25000}}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import (
    composite_result, connection_argument_spec, refuse_bare_override, require_libraries, run_composite)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import baseline
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB, NB_SCHEMA
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import STATES

ADDRESS = dict(network=dict(type="str"), cidr=dict(type="str"))


def main():
    spec = dict(
        config=dict(type="list", elements="dict", options=dict(
            name=dict(type="str", required=True),
            network=dict(type="str"),
            direction=dict(type="str", choices=["ingress", "egress"]),
            action=dict(type="str", choices=list(baseline.ACTIONS)),
            priority=dict(type="int"),
            peers=dict(type="list", elements="dict", options=dict(
                namespace_selector=dict(type="dict"), pod_selector=dict(type="dict"), **ADDRESS)),
            # "except" is the option's name, as in an ipBlock
            **{"except": dict(type="list", elements="dict", options=ADDRESS),
               "ports": dict(type="list", elements="dict", options=dict(
                   protocol=dict(type="str", choices=["TCP", "UDP", "SCTP"], default="TCP"),
                   port=dict(type="int"),
                   end_port=dict(type="int"))),
               "log": dict(type="bool")})),
        state=dict(type="str", default="merged", choices=list(STATES)),
    )
    spec.update(connection_argument_spec(DEFAULT_NB_DB))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True,
                           required_if=[("state", s, ("config",)) for s in ("merged", "replaced", "rendered")])
    refuse_bare_override(module)
    require_libraries(module)
    items = [("config[%d]" % i, _given(item)) for i, item in enumerate(module.params["config"] or [])]
    plan = run_composite(module, NB_SCHEMA, tuple(sorted(set(TABLES + baseline.TABLES))),
                         lambda view, mode: baseline.plan_baseline(view, items, mode))
    module.exit_json(**composite_result(module, plan, module.params["state"]))


def _given(value):
    """What the task gave, without the options it left out (None)."""
    if isinstance(value, dict):
        return dict((k, _given(v)) for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return [_given(v) for v in value]
    return value


if __name__ == "__main__":
    main()
