#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovs_info
short_description: Read Open vSwitch bridges, ports and chassis settings
version_added: 0.1.0
description:
  - Returns the bridges, ports and OVN chassis settings of the local Open vSwitch database as
    structured data, in the same form as the C(config) of M(ovn4nfv.k8s.ovs_bridge),
    M(ovn4nfv.k8s.ovs_port) and M(ovn4nfv.k8s.ovn_chassis).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  gather:
    description:
      - Which sections to return; all when not given.
    type: list
    elements: str
    choices: [bridges, ports, chassis]
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.OVS
attributes:
  check_mode:
    description: Reads only, so it runs the same in check mode.
    support: full
  diff_mode:
    description: Reads only; there is nothing to diff.
    support: N/A
"""

EXAMPLES = r"""
- name: Read the local switch
  ovn4nfv.k8s.ovs_info:
  register: ovs

- name: Fail unless br-int is on the userspace datapath
  ansible.builtin.assert:
    that:
      - ovs.bridges | selectattr('name', 'equalto', 'br-int') | map(attribute='datapath_type') | first == 'netdev'
"""

RETURN = r"""
bridges:
  description: The bridges.
  returned: when asked for
  type: list
  elements: dict
  sample: [{"name": "br-int", "datapath_type": "netdev", "fail_mode": "secure"}]
ports:
  description: The ports, without the bridges' own local ports.
  returned: when asked for
  type: list
  elements: dict
  sample: [{"name": "veth1234ab", "bridge": "br-int", "type": "system",
            "external_ids": {"iface-id": "default_web_net0"}}]
chassis:
  description: The OVN chassis settings.
  returned: when asked for
  type: dict
  sample: {"system_id": "worker1", "encap_type": ["geneve"], "encap_ip": "192.168.33.12"}
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_info_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import Bridge, Chassis, Port
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_OVS_DB, OVS_SCHEMA

SECTIONS = dict(bridges=Bridge, ports=Port, chassis=Chassis)


def main():
    run_info_module(DEFAULT_OVS_DB, OVS_SCHEMA, SECTIONS, dict(
        gather=dict(type="list", elements="str", choices=list(SECTIONS))))


if __name__ == "__main__":
    main()
