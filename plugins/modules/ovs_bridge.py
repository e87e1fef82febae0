#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovs_bridge
short_description: Manage Open vSwitch bridges
version_added: 0.1.0
description:
  - Creates, updates and deletes bridges in the local Open vSwitch database, in one transaction
    per task.
  - A new bridge gets its local internal port, as C(ovs-vsctl add-br) does.
  - Maps merge key by key under V(merged); unlike C(openvswitch.openvswitch.openvswitch_bridge),
    keys can be removed and several keys can change at once.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The bridges.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The bridge name; it identifies the bridge. At most 15 characters.
        type: str
        required: true
      datapath_type:
        description:
          - V(system) for the kernel datapath, V(netdev) for the userspace datapath.
        type: str
        choices: [system, netdev]
      fail_mode:
        description:
          - What the bridge does without an OpenFlow controller.
        type: str
        choices: [standalone, secure]
      protocols:
        description:
          - OpenFlow versions the bridge speaks.
        type: list
        elements: str
        choices: [OpenFlow10, OpenFlow11, OpenFlow12, OpenFlow13, OpenFlow14, OpenFlow15]
      other_config:
        description:
          - C(other_config) keys, for example C(hwaddr).
        type: dict
      external_ids:
        description:
          - C(external_ids) keys.
        type: dict
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.OVS
  - ovn4nfv.k8s.ovsdb.RESOURCE
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: The integration bridge and an external bridge on the userspace datapath
  ovn4nfv.k8s.ovs_bridge:
    config:
      - name: br-int
        datapath_type: netdev
        fail_mode: secure
      - name: br-ex
        datapath_type: netdev
        other_config:
          hwaddr: "0a:00:00:00:50:0b"

- name: Drop a key from external_ids and set another, in one task
  ovn4nfv.k8s.ovs_bridge:
    config:
      - name: br-ex
        external_ids:
          old-key: null
          bridge-id: br-ex
"""

RETURN = r"""
before:
  description: The bridges this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "br-int", "datapath_type": "netdev", "fail_mode": "secure"}]
after:
  description: The bridges this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "br-int", "datapath_type": "netdev", "fail_mode": "secure"}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create bridge br-int: datapath_type='netdev'; fail_mode='secure'"]
gathered:
  description: The current bridges, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"name": "br-int", "datapath_type": "netdev", "fail_mode": "secure"}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample:
    [
      {
        "op": "insert",
        "table": "Interface",
        "uuid-name": "row1",
        "row": {
          "name": "br-int",
          "type": "internal"
        }
      }
    ]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import Bridge
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_OVS_DB

OPTIONS = dict(
    name=dict(type="str", required=True),
    datapath_type=dict(type="str", choices=["system", "netdev"]),
    fail_mode=dict(type="str", choices=["standalone", "secure"]),
    protocols=dict(type="list", elements="str", choices=["OpenFlow10", "OpenFlow11", "OpenFlow12", "OpenFlow13", "OpenFlow14", "OpenFlow15"]),
    other_config=dict(type="dict"),
    external_ids=dict(type="dict"),
)


def main():
    run_resource_module(Bridge, OPTIONS, DEFAULT_OVS_DB)


if __name__ == "__main__":
    main()
