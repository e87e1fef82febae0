#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: network_audit
short_description: Correlate the Kubernetes API, the OVN northbound and southbound, and mend the drift
version_added: 0.2.0
description:
  - Reads the pods from the Kubernetes API, and the northbound and southbound databases, and reports
    what does not agree, as findings (a class, a severity, the layer, the objects involved, a message,
    and the repair it would make) and as readable lines.
  - "Classes: V(leaked_port), a pod port whose pod is gone; V(missing_port), a pod's requested interface
    with no port; V(duplicate_ip), one address held twice on a network; V(duplicate_mac), one MAC held
    twice; V(address_outside_network), an address outside its network's subnet; V(network_drift), a
    network whose switch, router port or routes no longer match the settings recorded when it was
    declared; V(policy_drift), a tenant's policy whose port groups, ACLs or network's default deny no
    longer match what was made of it (an ACL or a member changed by hand); V(policy_address_stale), an
    address in a policy's (or the baseline's) address set that no switch port holds; V(baseline_drift),
    a rule of the operator's baseline (M(ovn4nfv.k8s.network_policy)) whose ACL or address sets no
    longer match what its ACL records; V(port_not_bound), a
    running pod's port bound to no chassis (not one holding an address for another CNI plugin's device,
    ovn4nfv-ipam's under host-device, sriov or macvlan, which nothing binds); V(port_bound_elsewhere), bound to another node's chassis
    than the pod's; V(gateway_on_missing_chassis), a gateway router pinned to a chassis that is not
    registered; V(stale_chassis), a chassis whose node the API no longer has (its encapsulations
    left behind); V(provider_mapping_missing), a chassis that binds a port of a provider network
    whose physical network it does not map (its C(ovn-bridge-mappings) as the southbound has it:
    the port's frames go nowhere); V(qos_drift), a running pod's port whose QoS row is missing, differs
    from its request's C(qos) (within its network's C(qos_max)) or is there unasked (the watcher mends
    it: reported only); V(port_security_looser), a pod port that may send as more than its network allows
    its namespace (C(relaxed_port_security), C(virtual_ips) of M(ovn4nfv.k8s.virtual_network)): no port
    security, its MAC alone, or an address it was not granted (the repair tightens it)."
  - "When O(db) or O(sb_db) lists several remotes (a RAFT central), each member is asked, one by one, what
    it knows of its database (its C(_Server) database) - V(raft_member), a member that is not part of
    the cluster (it does not answer, is cut off from the others, runs a standalone database, or
    belongs to another cluster); V(raft_leader), no member is the leader (the database takes no
    writes; the classes that read it are then skipped). Both are reported only."
  - The stale chassis class needs a kubeconfig that may list the nodes (the C(ovn4nfv-audit)
    ClusterRole of the watcher's manifest grants it to the watcher's account); without it, or when
    the API lists no nodes, the class is skipped and no chassis is judged.
  - Without O(kubeconfig) the classes that need the API are skipped; without O(sb_db) those that need
    the southbound. RV(skipped) names them.
  - With O(state=repaired) it mends what the product owns, in one transaction per database. On the
    northbound, the ports of pods that are gone are deleted, a running pod's missing port is made
    again with the addresses the pod was told (its C(ovnIfaceList)), and a drifted network is made
    as recorded; on the southbound, a stale chassis is deleted. It reports what it did, and check
    mode what it would do. The other findings are reported only, because mending them is not the
    product's to decide (which of two holders keeps an address?) or is another part's job (the
    watcher makes the port of a pod never served, and says in the pod's Events why it does not).
  - With O(layer=node) it audits the node it runs on instead, comparing the integration bridge's
    interfaces with the northbound's logical ports (O(known_ports), the RV(ports) of the cluster
    run) and with the devices that exist. V(stray_interface), an interface naming a logical port
    the northbound does not have (the product's own is deleted by the repair when its pod is gone
    from the API, O(live_pods); another's, or a live pod's, is reported only); V(dead_interface), one
    of the product's interfaces whose device is gone, its pod's namespace
    gone without a CNI DEL (deleted by the repair, in one transaction on the node's database);
    V(mtu_mismatch), one of the product's interfaces whose MTU differs from its network's
    (O(port_mtus); the repair asks Open vSwitch for the network's); V(tunnel_down), the device holding
    the node's encapsulation IP is down or missing (the repair brings it up over netlink when it is
    one of this Open vSwitch's interfaces); V(version_skew), this node's C(ovn-controller) and the
    central's C(ovn-northd) (O(northd_version)) are releases OVN's upgrade rules say must not run
    together (older than northd and not pinned, an error; pinned and waiting, or newer than OVN's
    rolling upgrade span, a warning), reported only; V(provider_bridge_unwired), a physical network
    this node maps (C(ovn-bridge-mappings)) to a bridge that does not exist or holds no NIC, reported
    only (the mend is the C(ovn_controller) role's C(ovn_controller_physnets), or the gateway's);
    V(provider_mtu_mismatch), a mapped physical network's NIC whose MTU is less than its provider
    networks need (O(physnet_mtus)), reported only.
    The tunnel and version classes look at this host, so they run only against the local database.
  - C(playbooks/audit.yml) runs the cluster audit on the first central member, then every node's.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  state:
    description:
      - V(audited) reads and reports, and writes nothing; V(repaired) also mends.
    type: str
    choices: [audited, repaired]
    default: audited
  kubeconfig:
    description:
      - A kubeconfig that may list pods in every namespace (the watcher's will do).
    type: path
  layer:
    description:
      - V(cluster), the API, the northbound and the southbound; V(node), this node's Open vSwitch.
    type: str
    choices: [cluster, node]
    default: cluster
  db:
    description:
      - With O(layer=cluster), the OVN northbound database remote, as in C(ovn-nbctl --db); by default
        C(unix:/var/run/ovn/ovnnb_db.sock).
      - With O(layer=node), the Open vSwitch database remote, as in C(ovs-vsctl --db); by default
        C(unix:/var/run/openvswitch/db.sock).
    type: str
  known_ports:
    description:
      - With O(layer=node), the northbound's logical port names (RV(ports) of the cluster run).
        Without it the stray class is skipped.
    type: list
    elements: str
  port_mtus:
    description:
      - With O(layer=node), each logical port's network MTU, for the networks that set one
        (RV(port_mtus) of the cluster run). Without it the MTU class is skipped.
    type: dict
  physnet_mtus:
    description:
      - With O(layer=node), the MTU each physical network's NIC must carry, the largest of its provider
        networks' (RV(physnet_mtus) of the cluster run). Without it the provider MTU class is skipped.
    type: dict
  northd_version:
    description:
      - With O(layer=node), the central's C(ovn-northd) version (RV(northd_version) of the cluster run),
        judged against this node's running C(ovn-controller). Without it the version class is skipped.
    type: str
  ovn_rundir:
    description:
      - With O(layer=node), where C(ovn-controller) keeps its pid file and control socket.
    type: path
    default: /var/run/ovn
  live_pods:
    description:
      - With O(layer=node), the UIDs of the pods the API has (RV(live_pods) of the cluster run).
        Without it no stray interface is deleted.
    type: list
    elements: str
  node:
    description:
      - With O(layer=node), the node's name in the findings; by default the host's name.
    type: str
  bridge:
    description:
      - With O(layer=node), the integration bridge.
    type: str
    default: br-int
  sb_db:
    description:
      - The OVN southbound database remote, as in C(ovn-sbctl --db); V("") skips the southbound.
    type: str
    default: unix:/var/run/ovn/ovnsb_db.sock
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
attributes:
  check_mode:
    description: With O(state=repaired), reports the repair without making it.
    support: full
  diff_mode:
    description: The repair is in RV(repaired), one line per object.
    support: none
"""

EXAMPLES = r"""
- name: What does not agree?
  ovn4nfv.k8s.network_audit:
    kubeconfig: /etc/ovn4nfv/watcher.kubeconfig
  register: audit

- name: Say it
  ansible.builtin.debug:
    msg: "{{ audit.lines }}"

- name: Mend what the product owns
  ovn4nfv.k8s.network_audit:
    kubeconfig: /etc/ovn4nfv/watcher.kubeconfig
    state: repaired

- name: And on this node, against the northbound's ports
  ovn4nfv.k8s.network_audit:
    layer: node
    known_ports: "{{ audit.ports }}"
    live_pods: "{{ audit.live_pods }}"
    port_mtus: "{{ audit.port_mtus }}"
    physnet_mtus: "{{ audit.physnet_mtus }}"
    northd_version: "{{ audit.northd_version }}"
    state: repaired
"""

RETURN = r"""
findings:
  description: What does not agree, one entry per finding.
  returned: always
  type: list
  elements: dict
  sample: [{"class": "leaked_port", "severity": "warning", "layer": "nb",
            "objects": ["default_web_net0"], "message": "pod default/web (uid 7f3c) is gone, its ports are not",
            "repair": "delete the ports default_web_net0"}]
skipped:
  description: The classes not looked at, for want of the API or the southbound.
  returned: always
  type: list
  elements: str
  sample: []
lines:
  description: One readable line per finding, and the classes skipped.
  returned: always
  type: list
  elements: str
  sample: ["WARNING leaked_port: pod default/web (uid 7f3c) is gone, its ports are not (repair: ...)"]
ports:
  description: With O(layer=cluster), the northbound's logical port names, for the nodes' audit.
  returned: always
  type: list
  elements: str
  sample: ["default_web_net0"]
port_mtus:
  description: With O(layer=cluster), each logical port's network MTU, for the networks that set
    one, for the nodes' audit.
  returned: always
  type: dict
  sample: {"default_web_net0": 1400}
physnet_mtus:
  description: With O(layer=cluster), the MTU each physical network's NIC must carry (the largest of
    its provider networks'), for the nodes' audit.
  returned: always
  type: dict
  sample: {"physnet-ext": 1500}
northd_version:
  description: With O(layer=cluster) and the southbound, C(ovn-northd)'s version as it writes it
    (C(SB_Global) C(options:northd_internal_version)), for the nodes' audit; null before northd wrote it.
  returned: always
  type: str
  sample: 23.03.1-20.27.0-70.6
live_pods:
  description: With O(layer=cluster) and O(kubeconfig), the UIDs of the pods the API has, for the
    nodes' audit; null without the API.
  returned: always
  type: list
  elements: str
  sample: ["7f3c2a90-5d1e-4c1b-9a0e-2f8e1b7c6d54"]
left:
  description: The findings that stand after this run, what C(playbooks/audit.yml) judges; after a
    repair that wrote, the audit made again (a mend can clear other findings, a duplicate address
    whose other holder was a leaked port), otherwise RV(findings).
  returned: always
  type: list
  elements: dict
  sample: []
repaired:
  description: What the repair did (in check mode, would do), one line per object.
  returned: always
  type: list
  elements: str
  sample: ["delete logical_switch_port default_web_net0"]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_task_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.audit_task import run_cluster_audit
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node.host_audit import run_host_audit

RUNS = dict(cluster=run_cluster_audit, node=run_host_audit)


def main():
    run_task_module(dict(
        state=dict(type="str", choices=["audited", "repaired"], default="audited"),
        kubeconfig=dict(type="path"),
        sb_db=dict(type="str", default="unix:/var/run/ovn/ovnsb_db.sock"),
        layer=dict(type="str", choices=["cluster", "node"], default="cluster"),
        known_ports=dict(type="list", elements="str"),
        live_pods=dict(type="list", elements="str"),
        port_mtus=dict(type="dict"),
        physnet_mtus=dict(type="dict"),
        northd_version=dict(type="str"),
        ovn_rundir=dict(type="path", default="/var/run/ovn"),
        node=dict(type="str"),
        bridge=dict(type="str", default="br-int"),
    ), lambda params, check_mode: RUNS[params["layer"]](params, check_mode))


if __name__ == "__main__":
    main()
