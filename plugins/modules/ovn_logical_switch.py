#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_logical_switch
short_description: Manage OVN logical switches
version_added: 0.1.0
description:
  - Creates, updates and deletes logical switches in the OVN northbound database, many in one
    transaction.
  - O(config[].subnet) and O(config[].exclude_ips) are stored in C(other_config), where
    C(ovn-northd) reads them to hand out dynamic addresses.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The logical switches.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The switch's name; it identifies the switch.
        type: str
        required: true
      subnet:
        description:
          - IPv4 subnet from which C(ovn-northd) assigns dynamic addresses, as a CIDR.
        type: str
      exclude_ips:
        description:
          - Addresses of O(config[].subnet) never assigned dynamically; single addresses or
            C(a..b) ranges.
        type: list
        elements: str
      ipv6_prefix:
        description:
          - IPv6 /64 from which C(ovn-northd) assigns dynamic IPv6 addresses (from each port's MAC),
            as V(fd00:1::) or V(fd00:1::/64).
        type: str
      other_config:
        description:
          - Other C(other_config) keys. C(subnet), C(exclude_ips) and C(ipv6_prefix) go in their own
            options.
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
- name: Two switches with address pools
  ovn4nfv.k8s.ovn_logical_switch:
    config:
      - name: ovn-ls-25
        subnet: 172.16.25.0/24
        exclude_ips: [172.16.25.1, 172.16.25.200..172.16.25.254]
      - name: ovn-ls-26
        subnet: 172.16.26.0/24
        external_ids:
          purpose: data-plane

- name: Make the switches the product owns exactly these two; any other owned switch goes
  ovn4nfv.k8s.ovn_logical_switch:
    config:
      - name: ovn-ls-25
        subnet: 172.16.25.0/24
        exclude_ips: [172.16.25.1, 172.16.25.200..172.16.25.254]
      - name: ovn-ls-26
        subnet: 172.16.26.0/24
        external_ids:
          purpose: data-plane
    state: overridden

- name: Read every switch
  ovn4nfv.k8s.ovn_logical_switch:
    state: gathered
  register: switches
"""

RETURN = r"""
before:
  description: The switches this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "ovn-ls-25", "subnet": "172.16.25.0/24"}]
after:
  description: The switches this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "ovn-ls-25", "subnet": "172.16.25.0/24", "exclude_ips": ["172.16.25.1"]}]
operations:
  description: What was done (in check mode, what would be done), one readable line per switch.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["update logical_switch ovn-ls-25: exclude_ips=['172.16.25.1']"]
gathered:
  description: The current switches, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"name": "ovn-ls-25", "subnet": "172.16.25.0/24"}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample: [{"op": "insert", "table": "Logical_Switch", "uuid-name": "row1",
            "row": {"name": "ovn-ls-25"}}]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitch
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB

OPTIONS = dict(
    name=dict(type="str", required=True),
    subnet=dict(type="str"),
    exclude_ips=dict(type="list", elements="str"),
    ipv6_prefix=dict(type="str"),
    other_config=dict(type="dict"),
    external_ids=dict(type="dict"),
)


def main():
    run_resource_module(LogicalSwitch, OPTIONS, DEFAULT_NB_DB)


if __name__ == "__main__":
    main()
