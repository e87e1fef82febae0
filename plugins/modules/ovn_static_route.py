#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_static_route
short_description: Manage static routes of OVN logical routers
version_added: 0.1.0
description:
  - Creates, updates and deletes static routes of logical routers in the OVN northbound database.
  - A route is identified by its router, O(config[].ip_prefix), O(config[].nexthop) and
    O(config[].policy).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The routes.
    type: list
    elements: dict
    suboptions:
      router:
        description:
          - The router the route belongs to.
        type: str
        required: true
      ip_prefix:
        description:
          - The destination (or source, with O(config[].policy=src-ip)) prefix, or a single
            address.
        type: str
        required: true
      nexthop:
        description:
          - The next hop address, or V(discard).
        type: str
        required: true
      policy:
        description:
          - Match on the destination or the source address. Defaults to V(dst-ip).
        type: str
        choices: [dst-ip, src-ip]
      output_port:
        description:
          - The router port to send through.
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
- name: A default route on a gateway router, and the way back to the pods
  ovn4nfv.k8s.ovn_static_route:
    config:
      - router: gr-worker1
        ip_prefix: 0.0.0.0/0
        nexthop: 192.168.50.1
      - router: gr-worker1
        ip_prefix: 172.16.0.0/16
        nexthop: 100.64.1.1
"""

RETURN = r"""
before:
  description: The routes this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"router": "gr-worker1", "ip_prefix": "0.0.0.0/0", "nexthop": "192.168.50.1", "policy": "dst-ip"}]
after:
  description: The routes this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"router": "gr-worker1", "ip_prefix": "0.0.0.0/0", "nexthop": "192.168.50.1", "policy": "dst-ip"}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create static_route router=gr-worker1 ip_prefix=0.0.0.0/0 nexthop=192.168.50.1 policy=dst-ip"]
gathered:
  description: The current routes, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"router": "gr-worker1", "ip_prefix": "0.0.0.0/0", "nexthop": "192.168.50.1", "policy": "dst-ip"}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample:
    [
      {
        "op": "insert",
        "table": "Logical_Router_Static_Route",
        "uuid-name": "row1",
        "row": {
          "ip_prefix": "0.0.0.0/0",
          "nexthop": "192.168.50.1"
        }
      }
    ]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_routers import StaticRoute
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB

OPTIONS = dict(
    router=dict(type="str", required=True),
    ip_prefix=dict(type="str", required=True),
    nexthop=dict(type="str", required=True),
    policy=dict(type="str", choices=["dst-ip", "src-ip"]),
    output_port=dict(type="str"),
    external_ids=dict(type="dict"),
)


def main():
    run_resource_module(StaticRoute, OPTIONS, DEFAULT_NB_DB)


if __name__ == "__main__":
    main()
