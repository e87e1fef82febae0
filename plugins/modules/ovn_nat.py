#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_nat
short_description: Manage NAT rules of OVN logical routers
version_added: 0.1.0
description:
  - Creates, updates and deletes NAT rules of logical routers in the OVN northbound database.
  - As with C(ovn-nbctl lr-nat-add), an V(snat) rule is identified by its router and
    O(config[].logical_ip), the other types by their router and O(config[].external_ip).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The NAT rules.
    type: list
    elements: dict
    suboptions:
      router:
        description:
          - The router the rule belongs to.
        type: str
        required: true
      type:
        description:
          - The kind of translation.
        type: str
        required: true
        choices: [snat, dnat, dnat_and_snat]
      external_ip:
        description:
          - The external address. Required unless O(state=deleted).
        type: str
      logical_ip:
        description:
          - The logical address, or for V(snat) a logical network in CIDR form.
        type: str
      logical_port:
        description:
          - "For a distributed V(dnat_and_snat) rule: the logical switch port the address belongs
            to."
        type: str
      external_mac:
        description:
          - "For a distributed V(dnat_and_snat) rule: the MAC answering for
            O(config[].external_ip)."
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
- name: SNAT a virtual network to a node's external address
  ovn4nfv.k8s.ovn_nat:
    config:
      - router: gr-worker1
        type: snat
        external_ip: 192.168.50.12
        logical_ip: 172.16.25.0/24
"""

RETURN = r"""
before:
  description: The NAT rules this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"router": "gr-worker1", "type": "snat", "external_ip": "192.168.50.12", "logical_ip": "172.16.25.0/24"}]
after:
  description: The NAT rules this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"router": "gr-worker1", "type": "snat", "external_ip": "192.168.50.12", "logical_ip": "172.16.25.0/24"}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create nat router=gr-worker1 type=snat logical_ip=172.16.25.0/24: external_ip='192.168.50.12'"]
gathered:
  description: The current NAT rules, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"router": "gr-worker1", "type": "snat", "external_ip": "192.168.50.12", "logical_ip": "172.16.25.0/24"}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample:
    [
      {
        "op": "insert",
        "table": "NAT",
        "uuid-name": "row1",
        "row": {
          "type": "snat",
          "external_ip": "192.168.50.12",
          "logical_ip": "172.16.25.0/24"
        }
      }
    ]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_routers import NAT
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB

OPTIONS = dict(
    router=dict(type="str", required=True),
    type=dict(type="str", required=True, choices=["snat", "dnat", "dnat_and_snat"]),
    external_ip=dict(type="str"),
    logical_ip=dict(type="str"),
    logical_port=dict(type="str"),
    external_mac=dict(type="str"),
    external_ids=dict(type="dict"),
)


def main():
    run_resource_module(NAT, OPTIONS, DEFAULT_NB_DB)


if __name__ == "__main__":
    main()
