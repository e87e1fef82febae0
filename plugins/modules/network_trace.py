#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: network_trace
short_description: The logical path of one link, from a pod interface to an address, by OVN's tracer
version_added: 0.2.0
description:
  - Builds the packet a pod interface would send (its port, MAC and address as the southbound
    database binds them, and the next hop's MAC, the destination's on the same network or its
    gateway's), runs C(ovn-trace) on it against the live southbound database, and returns the
    logical path as hops (each switch and router it enters, with the routes, policies, NAT, load
    balancers and ACLs that acted on it) and a verdict, V(delivered), V(dropped) or V(unresolved),
    with where.
  - A trace follows logical flows only. A link that traces V(delivered) but carries nothing is broken
    below OVN (a tunnel, a node's Open vSwitch, a veth); RV(where) names the chassis the destination
    port is bound on.
  - A provider network has no router, since its gateway is the fabric's. There, a packet for an address
    no port of it holds is addressed to a stand-in MAC for the fabric's router and traced out of its
    localnet port (V(delivered) to the localnet port). Whatever happens beyond it is the fabric's.
  - Run it where the southbound database and C(ovn-trace) are, the central. It writes nothing.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  source:
    description:
      - The sending interface, as a pod and its interface, a logical port, or an address on a network.
    type: dict
    required: true
    suboptions:
      pod:
        description:
          - The pod's name.
        type: str
      namespace:
        description:
          - The pod's namespace. Defaults to V(default).
        type: str
      interface:
        description:
          - The pod's interface, as its network request names it.
        type: str
      port:
        description:
          - The logical switch port instead (C(<namespace>_<pod>_<interface>)).
        type: str
      address:
        description:
          - The interface's address instead, looked up on O(source.network).
        type: str
      network:
        description:
          - The virtual network of O(source.address).
        type: str
  destination:
    description:
      - Where the packet goes, as a pod and its interface, a logical port, or any address.
    type: dict
    required: true
    suboptions:
      pod:
        description:
          - The pod's name.
        type: str
      namespace:
        description:
          - The pod's namespace. Defaults to V(default).
        type: str
      interface:
        description:
          - The pod's interface.
        type: str
      port:
        description:
          - The logical switch port instead.
        type: str
      address:
        description:
          - An address instead, another pod's or outside the cluster.
        type: str
  protocol:
    description:
      - V(icmp), an echo request; V(tcp) or V(udp) to O(port).
    type: str
    choices: [icmp, tcp, udp]
    default: icmp
  port:
    description:
      - The destination port, with V(tcp) and V(udp).
    type: int
  db:
    description:
      - The OVN southbound database remote, as in C(ovn-sbctl --db). A follower of a RAFT cluster will do.
    type: str
    default: unix:/var/run/ovn/ovnsb_db.sock
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
attributes:
  check_mode:
    description: Reads only; check mode runs the same trace.
    support: full
  diff_mode:
    description: Writes nothing, so there is no diff.
    support: none
"""

EXAMPLES = r"""
- name: How does pod-w1a's eth0 reach 172.16.33.5?
  ovn4nfv.k8s.network_trace:
    source: {pod: pod-w1a, interface: eth0}
    destination: {address: 172.16.33.5}
  register: trace

- name: Say where it ends
  ansible.builtin.debug:
    msg: "{{ trace.lines }}"

- name: TCP from an address on ovn-net1 to the web pod's net1, port 80
  ovn4nfv.k8s.network_trace:
    source: {address: 172.16.33.4, network: ovn-net1}
    destination: {pod: web-w2, interface: net1}
    protocol: tcp
    port: 80
"""

RETURN = r"""
verdict:
  description: V(delivered), V(dropped), or V(unresolved) (a router asks for the next hop's MAC).
  returned: always
  type: str
  sample: delivered
where:
  description: Where the packet was delivered or dropped, in words (a drop by a named ACL says its name).
  returned: always
  type: str
  sample: to port default_pod-w2a_eth0 on ovn-net1 (bound on worker2)
hops:
  description:
    - Each datapath the packet entered or left, in order, with the stages that acted on it (C(events), each
      with its C(kind), C(stage), C(match) and C(actions)).
    - An ACL that refused the packet is an event of kind V(acl); a logged one also has C(acl), its name
      (a policy's default deny is V(deny:in:<network>) or V(deny:eg:<network>)).
  returned: always
  type: list
  elements: dict
  sample: [{"datapath": "ovn-net1", "direction": "ingress", "inport": "default_pod-w1a_eth0",
            "outport": null, "type": "switch", "events": []}]
lines:
  description: One readable line per switch or router entered, and the verdict.
  returned: always
  type: list
  elements: str
  sample: ["switch ovn-net1 from default_pod-w1a_eth0", "router ovn4nfv-master from rtos-ovn-net1",
           "delivered to port default_pod-w2a_eth0 on ovn-net2 (bound on worker2)"]
flow:
  description: The microflow traced, in OVN's expression language.
  returned: always
  type: str
  sample: inport == "default_pod-w1a_eth0" && eth.src == 0a:00:00:00:01:0a && ...
switch:
  description: The source port's logical switch.
  returned: always
  type: str
  sample: ovn-net1
source_port:
  description: The source's logical port.
  returned: always
  type: str
  sample: default_pod-w1a_eth0
source_ip:
  description: The source address traced.
  returned: always
  type: str
  sample: 172.16.33.3
destination_ip:
  description: The destination address traced.
  returned: always
  type: str
  sample: 172.16.33.5
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_task_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.trace import run_trace
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_SB_DB

END = dict(pod=dict(type="str"), namespace=dict(type="str"), interface=dict(type="str"),
           port=dict(type="str"), address=dict(type="str"))


def main():
    run_task_module(dict(
        source=dict(type="dict", required=True, options=dict(END, network=dict(type="str"))),
        destination=dict(type="dict", required=True, options=END),
        protocol=dict(type="str", choices=["icmp", "tcp", "udp"], default="icmp"),
        port=dict(type="int"),
    ), run_trace, DEFAULT_SB_DB)


if __name__ == "__main__":
    main()
