#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_chassis
short_description: Manage the OVN chassis settings of a node
version_added: 0.1.0
description:
  - "Sets the keys C(ovn-controller) reads from the local C(Open_vSwitch) table's C(external_ids):
    system-id, ovn-remote, ovn-encap-type, ovn-encap-ip, ovn-bridge-mappings,
    ovn-bridge-datapath-type and ovn-cms-options."
  - No other key of that map is ever touched.
  - O(config.bridge_mappings) merges mapping by mapping under V(merged); a mapping set to V(null)
    is removed.
  - O(config.owned_bridge_mappings) are the product's own mappings on this node (its provider networks').
    They are recorded by physical network in C(external_ids:ovn4nfv-physnets). Exactly these are set, and
    one the product set before and no longer lists is removed. A mapping another tool made is never
    touched.
  - A change of C(ovn-bridge-mappings) is committed only if no other writer changed C(external_ids) since
    it was read. Otherwise it is planned again from what that writer left, so a mapping set
    meanwhile is kept.
  - V(deleted) removes the keys named in O(config) (any value), or all of these keys when
    O(config) names none. V(overridden) is V(replaced).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - "The chassis settings: one object, not a list."
    type: dict
    suboptions:
      system_id:
        description:
          - "C(system-id): the chassis name."
        type: str
      ovn_remote:
        description:
          - "C(ovn-remote): the southbound database remote(s)."
        type: str
      encap_type:
        description:
          - "C(ovn-encap-type): tunnel types."
        type: list
        elements: str
        choices: [geneve, vxlan]
      encap_ip:
        description:
          - "C(ovn-encap-ip): the address tunnels leave from."
        type: str
      bridge_mappings:
        description:
          - C(ovn-bridge-mappings) as physical network name to OVS bridge.
        type: dict
      owned_bridge_mappings:
        description:
          - The product's own C(ovn-bridge-mappings), as physical network name to OVS bridge, exactly. Use
            it under V(merged). V(deleted) naming it removes the product's mappings and its record.
          - Not with O(config.bridge_mappings) in the same task.
        type: dict
      bridge_datapath_type:
        description:
          - "C(ovn-bridge-datapath-type): the datapath of the bridges C(ovn-controller) creates."
        type: str
        choices: [system, netdev]
      cms_options:
        description:
          - C(ovn-cms-options), for example V(enable-chassis-as-gw).
        type: list
        elements: str
      match_northd_version:
        description:
          - "C(ovn-match-northd-version): V(true) makes C(ovn-controller) keep the flows it has and
            process no database change while C(ovn-northd) runs another OVN version. Step 2 of OVN's
            fail-safe upgrade, for upgrades outside its rolling span (Debian 12's OVN 23.03 to Debian
            13's 25.03 is one); set it back to V(false) once the chassis runs the central's version."
        type: bool
      ofctrl_wait_before_clear:
        description:
          - "C(ovn-ofctrl-wait-before-clear): milliseconds a starting C(ovn-controller) keeps the flows it
            finds in Open vSwitch before it replaces them, so that a restart (an upgrade's) forwards with the
            old flows until it has computed the new ones. C(playbooks/upgrade.yml) sets it before it restarts
            C(ovn-controller)."
        type: int
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.OVS
  - ovn4nfv.k8s.ovsdb.RESOURCE
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: A chassis on the userspace datapath, tunnelling over the underlay
  ovn4nfv.k8s.ovn_chassis:
    config:
      system_id: worker1
      ovn_remote: tcp:192.168.33.11:6642
      encap_type: [geneve]
      encap_ip: 192.168.33.12
      bridge_datapath_type: netdev
      bridge_mappings:
        physnet-ext: br-ex

- name: The provider networks' mappings this node has from the inventory, exactly (another tool's stay)
  ovn4nfv.k8s.ovn_chassis:
    config:
      owned_bridge_mappings:
        physnet-prov: br-prov
        physnet-vlan: br-vlan

- name: Drop one bridge mapping, keep the others
  ovn4nfv.k8s.ovn_chassis:
    config:
      bridge_mappings:
        physnet-old: null
"""

RETURN = r"""
before:
  description: The chassis settings this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: dict
  sample: {"system_id": "worker1", "encap_type": ["geneve"], "encap_ip": "192.168.33.12", "bridge_mappings": {"physnet-ext": "br-ex"}}
after:
  description: The chassis settings this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: dict
  sample: {"system_id": "worker1", "encap_type": ["geneve"], "encap_ip": "192.168.33.12", "bridge_mappings": {"physnet-ext": "br-ex"}}
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["update chassis open_vswitch: encap_ip='192.168.33.12'"]
gathered:
  description: The current chassis settings, in config form.
  returned: when O(state=gathered)
  type: dict
  sample: {"system_id": "worker1", "encap_type": ["geneve"], "encap_ip": "192.168.33.12", "bridge_mappings": {"physnet-ext": "br-ex"}}
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample:
    [
      {
        "op": "mutate",
        "table": "Open_vSwitch",
        "where": [
          [
            "_uuid",
            "==",
            [
              "uuid",
              "4e1a3c52-0000-0000-0000-000000000000"
            ]
          ]
        ],
        "mutations": [
          [
            "external_ids",
            "insert",
            [
              "map",
              [
                [
                  "ovn-encap-ip",
                  "192.168.33.12"
                ]
              ]
            ]
          ]
        ]
      }
    ]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import Chassis
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_OVS_DB

OPTIONS = dict(
    system_id=dict(type="str"),
    ovn_remote=dict(type="str"),
    encap_type=dict(type="list", elements="str", choices=["geneve", "vxlan"]),
    encap_ip=dict(type="str"),
    bridge_mappings=dict(type="dict"),
    owned_bridge_mappings=dict(type="dict"),
    bridge_datapath_type=dict(type="str", choices=["system", "netdev"]),
    cms_options=dict(type="list", elements="str"),
    match_northd_version=dict(type="bool"),
    ofctrl_wait_before_clear=dict(type="int"),
)


def main():
    run_resource_module(Chassis, OPTIONS, DEFAULT_OVS_DB, single=True)


if __name__ == "__main__":
    main()
