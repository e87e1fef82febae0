#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: upgrade_plan
short_description: Plan a rolling upgrade of the cluster's nodes from what each runs, by OVN's rules
version_added: 0.2.0
description:
  - From what every node runs (M(ovn4nfv.k8s.node_upgrade) with O(ovn4nfv.k8s.node_upgrade#module:state=gathered)),
    the order OVN's upgrade guide allows (C(Documentation/intro/install/ovn-upgrades.rst)), the nodes still to
    upgrade in that order, the chassis to pin to C(ovn-northd)'s version first and to unpin at the end, and
    the plan as lines a reviewer reads. C(playbooks/upgrade.yml) follows it.
  - V(rolling) upgrades the chassis that are no central member first, then the central members one by one
    (a member that is also a chassis takes its controller before its database and northd),
    and only within OVN's rolling span (from an LTS, or a release after it, to the next LTS). V(fail-safe)
    pins every chassis still to do to northd's version, upgrades the central members one by one, then the
    other chassis, and unpins them.
  - "Refuses, before anything changes: a jump outside the rolling span in the V(rolling) order, a downgrade
    (a node on a newer Debian release, OVN or Open vSwitch than the target), a target or a node's release it does not
    know, a fail-safe upgrade stopped half-way that is asked to finish in the V(rolling) order, and an
    inventory without a central member."
  - Reads nothing and changes nothing itself.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  to:
    description:
      - The Debian release to upgrade to, by its codename.
    type: str
    required: true
    choices: [bookworm, trixie]
  order:
    description:
      - OVN's upgrade order.
    type: str
    choices: [rolling, fail-safe]
    default: rolling
  nodes:
    description:
      - Every node of the cluster, each as M(ovn4nfv.k8s.node_upgrade) gathered it, with C(name) and its roles
        C(central) (a member of the OVN central) and C(chassis) (it runs C(ovn-controller)).
    type: list
    elements: dict
    required: true
attributes:
  check_mode:
    description: Plans only, so it runs the same in check mode.
    support: full
  diff_mode:
    description: Plans only; there is nothing to diff.
    support: N/A
"""

EXAMPLES = r"""
- name: What every node runs
  ovn4nfv.k8s.node_upgrade:
  register: upgrade_node

- name: The plan, from Debian 12 to 13 (outside OVN's rolling span, so in the fail-safe order)
  ovn4nfv.k8s.upgrade_plan:
    to: trixie
    order: fail-safe
    nodes: >-
      {% set ns = namespace(nodes=[]) %}{% for host in ansible_play_hosts_all %}{%
        set ns.nodes = ns.nodes + [hostvars[host].upgrade_node.node | combine({'name': host,
          'central': host in groups['ovn_central'], 'chassis': host in groups['masters'] + groups['workers']})] %}{%
      endfor %}{{ ns.nodes }}
  run_once: true
  register: upgrade

- name: Show it
  ansible.builtin.debug:
    msg: "{{ upgrade.lines }}"
  run_once: true
"""

RETURN = r"""
order:
  description: The order planned.
  returned: success
  type: str
  sample: fail-safe
span:
  description: From the oldest OVN release running to the target's.
  returned: success
  type: str
  sample: OVN 23.03 -> 25.03
nodes:
  description: The nodes to upgrade, in order; empty when every node runs the target.
  returned: success
  type: list
  elements: str
  sample: [master, worker1, worker2]
pin:
  description: The chassis to pin to northd's version before the first node is upgraded.
  returned: success
  type: list
  elements: str
  sample: [master, worker1, worker2]
unpin:
  description: The chassis to unpin once every node runs the target.
  returned: success
  type: list
  elements: str
  sample: [master, worker1, worker2]
lines:
  description: The plan, as lines.
  returned: success
  type: list
  elements: str
  sample:
    - "upgrade to trixie (Debian 13), OVN 23.03 -> 25.03, in the fail-safe order: 3 of 3 nodes to do"
    - "pin ovn-controller to northd's version on master, worker1, worker2"
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_task_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.releases import DEBIAN
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.upgrade_plan import ORDERS, task


def main():
    run_task_module(dict(
        to=dict(type="str", required=True, choices=sorted(DEBIAN)),
        order=dict(type="str", choices=list(ORDERS), default="rolling"),
        nodes=dict(type="list", elements="dict", required=True),
    ), task, libraries=lambda params: False, connects=False)


if __name__ == "__main__":
    main()
