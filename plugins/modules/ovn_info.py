#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_info
short_description: Read OVN logical switches, routers, ports, routes, NAT and load balancers
version_added: 0.1.0
description:
  - Returns the logical topology of the OVN northbound database as structured data, each
    section in the same form as the C(config) of the matching module.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  gather:
    description:
      - Which sections to return; all when not given.
    type: list
    elements: str
    choices: [logical_switches, logical_switch_ports, logical_routers, logical_router_ports,
              static_routes, nat, load_balancers]
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.NB
attributes:
  check_mode:
    description: Reads only, so it runs the same in check mode.
    support: full
  diff_mode:
    description: Reads only; there is nothing to diff.
    support: N/A
"""

EXAMPLES = r"""
- name: Read the switches and their ports
  ovn4nfv.k8s.ovn_info:
    gather: [logical_switches, logical_switch_ports]
  register: nb

- name: Show the ports of one switch
  ansible.builtin.debug:
    msg: "{{ nb.logical_switch_ports | selectattr('switch', 'equalto', 'ovn-ls-25') | map(attribute='name') }}"
"""

RETURN = r"""
logical_switches:
  description: The logical switches.
  returned: when asked for
  type: list
  elements: dict
  sample: [{"name": "ovn-ls-25", "subnet": "172.16.25.0/24"}]
logical_switch_ports:
  description: The logical switch ports.
  returned: when asked for
  type: list
  elements: dict
  sample: [{"name": "default_web_net0", "switch": "ovn-ls-25", "addresses": ["dynamic"]}]
logical_routers:
  description: The logical routers.
  returned: when asked for
  type: list
  elements: dict
  sample: [{"name": "ovn4nfv-master"}]
logical_router_ports:
  description: The logical router ports.
  returned: when asked for
  type: list
  elements: dict
  sample: [{"name": "rtos-ovn-ls-25", "router": "ovn4nfv-master", "mac": "0a:00:00:19:00:01",
            "networks": ["172.16.25.1/24"]}]
static_routes:
  description: The static routes.
  returned: when asked for
  type: list
  elements: dict
  sample: [{"router": "gr-worker1", "ip_prefix": "0.0.0.0/0", "nexthop": "192.168.50.1",
            "policy": "dst-ip"}]
nat:
  description: The NAT rules.
  returned: when asked for
  type: list
  elements: dict
  sample: [{"router": "gr-worker1", "type": "snat", "external_ip": "192.168.50.12",
            "logical_ip": "172.16.25.0/24"}]
load_balancers:
  description: The load balancers, with the switches and routers they are attached to.
  returned: when asked for
  type: list
  elements: dict
  sample: [{"name": "web", "protocol": "tcp", "switches": ["ovn-ls-25"],
            "vips": {"10.96.0.10:80": ["172.16.25.3:8080", "172.16.25.4:8080"]}}]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_info_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_balancers import LoadBalancer
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_routers import (
    LogicalRouter, LogicalRouterPort, NAT, StaticRoute)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import (
    LogicalSwitch, LogicalSwitchPort)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB, NB_SCHEMA

SECTIONS = dict(
    logical_switches=LogicalSwitch,
    logical_switch_ports=LogicalSwitchPort,
    logical_routers=LogicalRouter,
    logical_router_ports=LogicalRouterPort,
    static_routes=StaticRoute,
    nat=NAT,
    load_balancers=LoadBalancer,
)


def main():
    run_info_module(DEFAULT_NB_DB, NB_SCHEMA, SECTIONS, dict(
        gather=dict(type="list", elements="str", choices=list(SECTIONS))))


if __name__ == "__main__":
    main()
