#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_logical_router
short_description: Manage OVN logical routers
version_added: 0.1.0
description:
  - Creates, updates and deletes logical routers in the OVN northbound database.
  - A gateway router is a router with C(options.chassis) set to the chassis it runs on.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The routers.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The router name; it identifies the router.
        type: str
        required: true
      options:
        description:
          - Router C(options), for example C(chassis) for a gateway router.
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
- name: The distributed router and a gateway router on worker1
  ovn4nfv.k8s.ovn_logical_router:
    config:
      - name: ovn4nfv-master
      - name: gr-worker1
        options:
          chassis: worker1
"""

RETURN = r"""
before:
  description: The routers this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "gr-worker1", "options": {"chassis": "worker1"}}]
after:
  description: The routers this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "gr-worker1", "options": {"chassis": "worker1"}}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create logical_router gr-worker1: options.chassis='worker1'"]
gathered:
  description: The current routers, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"name": "gr-worker1", "options": {"chassis": "worker1"}}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample:
    [
      {
        "op": "insert",
        "table": "Logical_Router",
        "uuid-name": "row1",
        "row": {
          "name": "gr-worker1"
        }
      }
    ]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_routers import LogicalRouter
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB

OPTIONS = dict(
    name=dict(type="str", required=True),
    options=dict(type="dict"),
    external_ids=dict(type="dict"),
)


def main():
    run_resource_module(LogicalRouter, OPTIONS, DEFAULT_NB_DB)


if __name__ == "__main__":
    main()
