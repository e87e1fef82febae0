#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_load_balancer
short_description: Manage OVN load balancers and where they apply
version_added: 0.2.0
description:
  - Creates, updates and deletes load balancers in the OVN northbound database, with their
    health checks, and attaches them to logical switches and routers, all in one transaction.
  - A balancer attached to a switch balances the traffic that the switch's ports send to a
    VIP; one attached to a gateway router balances traffic that reaches the router, such as
    traffic from an external network to an external address.
  - A new balancer needs O(config[].vips).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The load balancers.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The balancer's name; it identifies the balancer.
        type: str
        required: true
      protocol:
        description:
          - The transport protocol of every VIP. OVN reads an unset protocol as V(tcp).
        type: str
        choices: [tcp, udp, sctp]
      vips:
        description:
          - "Each VIP, written V(ip:port), V([ipv6]:port) or as a bare address, with its list
            of backends written the same way: a backend has a port exactly when its VIP has
            one. An empty list keeps the VIP with no backend (OVN drops its traffic)."
          - Under O(state=merged) the VIPs given are added or changed and a VIP set to V(null)
            is removed.
        type: dict
      switches:
        description:
          - The logical switches the balancer is attached to; under O(state=merged) the
            balancer is attached to exactly these.
        type: list
        elements: str
      routers:
        description:
          - The logical routers the balancer is attached to.
        type: list
        elements: str
      health_checks:
        description:
          - Active health checks, one per VIP. Backends to be checked need an entry in
            O(config[].ip_port_mappings).
        type: list
        elements: dict
        suboptions:
          vip:
            description:
              - The VIP, with its port, as written in O(config[].vips).
            type: str
            required: true
          interval:
            description:
              - Seconds between checks.
            type: int
          timeout:
            description:
              - Seconds to wait for an answer.
            type: int
          success_count:
            description:
              - Answers in a row that mark a backend up.
            type: int
          failure_count:
            description:
              - Missed answers in a row that mark a backend down.
            type: int
      ip_port_mappings:
        description:
          - For health checks, each backend address mapped to V(port_name:source_ip), the
            logical port the backend is on and the address the checks come from.
        type: dict
      affinity_timeout:
        description:
          - Session affinity by client address, for this many seconds (1-65535).
        type: int
      selection_fields:
        description:
          - The fields that choose a backend, instead of OVN's default 5-tuple hash.
        type: list
        elements: str
        choices: [eth_src, eth_dst, ip_src, ip_dst, tp_src, tp_dst]
      options:
        description:
          - Other balancer C(options), for example C(reject) or C(hairpin_snat_ip).
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
- name: A web VIP on ovn-ls-25, balanced over two pods, with client affinity
  ovn4nfv.k8s.ovn_load_balancer:
    config:
      - name: web
        protocol: tcp
        vips:
          "10.96.0.10:80": ["172.16.25.3:8080", "172.16.25.4:8080"]
        switches: [ovn-ls-25]
        routers: [ovn4nfv-master]
        affinity_timeout: 10800

- name: Check the backends' health
  ovn4nfv.k8s.ovn_load_balancer:
    config:
      - name: web
        health_checks:
          - vip: "10.96.0.10:80"
            interval: 5
            timeout: 3
            failure_count: 3
        ip_port_mappings:
          172.16.25.3: "default_web_net0:172.16.25.2"
          172.16.25.4: "default_web-2_net0:172.16.25.2"

- name: Remove a VIP, keep the rest
  ovn4nfv.k8s.ovn_load_balancer:
    config:
      - name: web
        vips:
          "10.96.0.11:443":
"""

RETURN = r"""
before:
  description: The balancers this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "web", "protocol": "tcp", "vips": {"10.96.0.10:80": ["172.16.25.3:8080"]}}]
after:
  description: The balancers this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "web", "protocol": "tcp", "switches": ["ovn-ls-25"],
            "vips": {"10.96.0.10:80": ["172.16.25.3:8080", "172.16.25.4:8080"]}}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create load_balancer web: protocol='tcp'; switches=['ovn-ls-25']; vips={...}"]
gathered:
  description: The current balancers, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"name": "web", "protocol": "tcp", "vips": {"10.96.0.10:80": ["172.16.25.3:8080"]}}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample:
    [
      {
        "op": "insert",
        "table": "Load_Balancer",
        "uuid-name": "row1",
        "row": {"name": "web", "protocol": "tcp",
                "vips": ["map", [["10.96.0.10:80", "172.16.25.3:8080"]]]}
      }
    ]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_balancers import (
    LoadBalancer, PROTOCOLS, SELECTION_FIELDS)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB

OPTIONS = dict(
    name=dict(type="str", required=True),
    protocol=dict(type="str", choices=list(PROTOCOLS)),
    vips=dict(type="dict"),
    switches=dict(type="list", elements="str"),
    routers=dict(type="list", elements="str"),
    health_checks=dict(type="list", elements="dict", options=dict(
        vip=dict(type="str", required=True),
        interval=dict(type="int"),
        timeout=dict(type="int"),
        success_count=dict(type="int"),
        failure_count=dict(type="int"),
    )),
    ip_port_mappings=dict(type="dict"),
    affinity_timeout=dict(type="int"),
    selection_fields=dict(type="list", elements="str", choices=list(SELECTION_FIELDS)),
    options=dict(type="dict"),
    external_ids=dict(type="dict"),
)


def main():
    run_resource_module(LoadBalancer, OPTIONS, DEFAULT_NB_DB)


if __name__ == "__main__":
    main()
