#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: network_picture
short_description: The cluster's network as a picture, laid out by Graphviz, with what the audit found
version_added: 0.2.0
description:
  - Reads the OVN northbound and southbound databases and draws the product's objects as a graph in
    Graphviz's DOT language. Each network is drawn with its subnet and gateway, and so are the join
    switch and each gateway's external switch. The distributed router and each gateway router are
    drawn with the chassis it is pinned on. Each node (chassis) is a box holding the pods bound on it,
    and each pod interface is an edge to its network, labelled with the interface, IP and MAC.
  - Objects that a finding of M(ovn4nfv.k8s.network_audit) names (O(findings)) are drawn red, with
    the finding in their tooltip.
  - With O(dest) it also lays the graph out with Graphviz's C(dot) layout (through pygraphviz, its
    Python binding) and writes C(topology.svg) and C(topology.html), a self-contained page of the
    picture and the audit's lines, into that directory. A file is written only when it differs.
  - Run it on the central to read the databases, and again where the picture is wanted with
    O(source), the RV(dot) of the first run, so that Graphviz is needed only there.
    C(playbooks/topology.yml) does both.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
requirements:
  - pygraphviz (Debian package python3-pygraphviz), only where O(dest) is given
options:
  db:
    description:
      - The OVN northbound database remote, as in C(ovn-nbctl --db); by default
        C(unix:/var/run/ovn/ovnnb_db.sock).
    type: str
  sb_db:
    description:
      - The OVN southbound database remote, as in C(ovn-sbctl --db); V("") draws no chassis and no pod
        placement.
    type: str
    default: unix:/var/run/ovn/ovnsb_db.sock
  findings:
    description:
      - The findings of M(ovn4nfv.k8s.network_audit) (its RV(ovn4nfv.k8s.network_audit#module:left)),
        marked on the picture.
    type: list
    elements: dict
    default: []
  lines:
    description:
      - The audit's readable lines, listed under the picture on the page.
    type: list
    elements: str
  title:
    description:
      - The picture's title.
    type: str
    default: ovn4nfv.k8s
  source:
    description:
      - DOT text to lay out (the RV(dot) of a run on the central) instead of reading the databases.
    type: str
  dest:
    description:
      - The directory to write C(topology.svg) and C(topology.html) into; without it nothing is written.
    type: path
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
attributes:
  check_mode:
    description: Says whether the files would change, and writes nothing.
    support: full
  diff_mode:
    description: No diff of the picture is shown.
    support: none
"""

EXAMPLES = r"""
- name: The cluster, as DOT, on the central
  ovn4nfv.k8s.network_picture:
  register: drawn

- name: Laid out, with nothing found, where the picture is wanted
  ovn4nfv.k8s.network_picture:
    source: "{{ drawn.dot }}"
    dest: /tmp/ovn4nfv-topology
"""

RETURN = r"""
dot:
  description: The graph in Graphviz's DOT language.
  returned: always
  type: str
  sample: "digraph \"ovn4nfv.k8s\" {\n  \"switch:ovn-net1\" [label=\"ovn-net1\\n172.16.33.0/24\"];\n}\n"
objects:
  description: The ids of the objects drawn, C(switch:), C(router:), C(chassis:) or C(pod:) and the name.
  returned: always
  type: list
  elements: str
  sample: ["chassis:worker1", "pod:default/web", "router:ovn4nfv-master", "switch:ovn-net1"]
paths:
  description: With O(dest), the files, C(topology.html) and C(topology.svg).
  returned: always
  type: list
  elements: str
  sample: ["/tmp/ovn4nfv-topology/topology.html", "/tmp/ovn4nfv-topology/topology.svg"]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_task_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.picture import run_picture


def main():
    run_task_module(dict(
        sb_db=dict(type="str", default="unix:/var/run/ovn/ovnsb_db.sock"),
        findings=dict(type="list", elements="dict", default=[]),
        lines=dict(type="list", elements="str"),
        title=dict(type="str", default="ovn4nfv.k8s"),
        source=dict(type="str"),
        dest=dict(type="path"),
    ), run_picture, libraries=lambda params: params["source"] is None)  # drawn from a source: no database


if __name__ == "__main__":
    main()
