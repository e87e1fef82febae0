#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: traffic_tap
short_description: Copy a pod interface's traffic to a collector pod, or to a remote collector
version_added: 0.2.0
description:
  - A tap delivers copies of the traffic of a pod's interface (what it receives, what it sends,
    or both) to a collector pod's interface on the same node, as an Open vSwitch mirror on the
    integration bridge. Run it on the node that hosts both pods.
  - The tap is declared by logical port (a pod and its interface, or the port's name), and kept in
    the node's Open vSwitch database. The node agent makes the mirror again whenever a pod is made
    again, so a tap follows its pods; while either pod is away there is no mirror. Deleting the tap
    leaves nothing behind.
  - With O(kind=remote) the collector is an address outside OVN instead, reached in GRE or ERSPAN
    from whichever node runs the pod, as an OVN C(Mirror) in the northbound database. Run it where
    that database is (O(db) defaults to the northbound socket). The watcher puts the tap back on a
    pod's port whenever it makes the port anew, so such a tap follows its pod across nodes.
  - A remote tap's name has at most 11 characters (ovn-controller names its tunnel port
    C(ovn-<name>)). Copying both directions to one remote collector needs OVN 24.03 or later; on an
    older OVN, declare an V(ingress) and an V(egress) tap with different keys.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  config:
    description:
      - The taps.
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - The tap's name, lower-case letters, digits and C(-); it identifies the tap.
        type: str
        required: true
      source:
        description:
          - The tapped interface. Required unless O(state=deleted).
        type: dict
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
      collector:
        description:
          - Where the copies go. Required unless O(state=deleted).
          - With O(kind=node), a pod interface on the same node (O(config[].collector.pod) and
            O(config[].collector.interface), or O(config[].collector.port)).
          - With O(kind=remote), an O(config[].collector.address), its
            O(config[].collector.encapsulation) and O(config[].collector.key).
        type: dict
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
              - The remote collector's IPv4 or IPv6 address, reached through the nodes' routing
                (in the lab, an address on the underlay).
            type: str
          encapsulation:
            description:
              - V(gre), or V(erspan) (version 1, the key as its session ID).
            type: str
            choices: [gre, erspan]
            default: gre
          key:
            description:
              - The GRE key (0-4294967295) or ERSPAN session ID (0-1023) the copies carry; two
                remote taps to one address need different keys.
            type: int
            default: 0
      direction:
        description:
          - V(ingress), what the pod receives; V(egress), what it sends; V(both).
        type: str
        choices: [ingress, egress, both]
        default: both
  kind:
    description:
      - V(node), taps whose collector is a pod on this node, kept in the node's Open vSwitch
        database; V(remote), taps whose collector is an address, kept in the OVN northbound
        database. A task handles taps of one kind; V(overridden), V(deleted) and V(gathered) see
        only that kind.
    type: str
    choices: [node, remote]
    default: node
  db:
    description:
      - The database remote, as in C(ovs-vsctl --db) or C(ovn-nbctl --db), that is C(unix:PATH),
        C(tcp:HOST:PORT) or C(ssl:HOST:PORT).
      - Defaults to C(unix:/var/run/openvswitch/db.sock) with O(kind=node) and to
        C(unix:/var/run/ovn/ovnnb_db.sock) with O(kind=remote).
    type: str
  bridge:
    description:
      - The integration bridge, with O(kind=node).
    type: str
    default: br-int
  state:
    description:
      - V(merged) and V(replaced) declare the taps in O(config); V(overridden) also deletes every
        other tap; V(deleted) deletes those named (all, without O(config)); V(gathered) reads them;
        V(rendered) shows the OVSDB operations V(merged) would perform.
    type: str
    choices: [merged, replaced, overridden, deleted, gathered, rendered]
    default: merged
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
"""

EXAMPLES = r"""
- name: Copy what pod web sends and receives on net0 to the collector pod's eth1
  ovn4nfv.k8s.traffic_tap:
    config:
      - name: web-tap
        source: {pod: web, interface: net0}
        collector: {pod: collector, interface: eth1}
        direction: both

- name: Send what pod web receives on net0 to an analyser at 10.20.0.9, in ERSPAN session 7
  ovn4nfv.k8s.traffic_tap:
    kind: remote
    config:
      - name: web-erspan
        source: {pod: web, interface: net0}
        collector: {address: 10.20.0.9, encapsulation: erspan, key: 7}
        direction: ingress
"""

RETURN = r"""
before:
  description: The taps this task changes, as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: []
after:
  description: The taps this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"name": "web-tap", "source": "default_web_net0", "collector": "default_collector_eth1",
            "direction": "both"}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create traffic_tap web-tap: ..."]
gathered:
  description: The taps of O(kind) declared in the database.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: []
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import (
    composite_result, connection_argument_spec, refuse_bare_override, require_libraries, run_composite)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import remote_mirrors
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import port_mirrors
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import (
    DEFAULT_NB_DB, DEFAULT_OVS_DB, NB_SCHEMA, OVS_SCHEMA)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import STATES

END = dict(
    pod=dict(type="str"),
    namespace=dict(type="str"),
    interface=dict(type="str"),
    port=dict(type="str"),
)
REMOTE = dict(
    address=dict(type="str"),
    encapsulation=dict(type="str", choices=list(remote_mirrors.ENCAPSULATIONS), default="gre"),
    key=dict(type="int", default=0, no_log=False),     # a GRE key or an ERSPAN session, not a secret
)


def main():
    spec = dict(
        config=dict(type="list", elements="dict", options=dict(
            name=dict(type="str", required=True),
            source=dict(type="dict", options=END),
            collector=dict(type="dict", options=dict(END, **REMOTE)),
            direction=dict(type="str", choices=list(port_mirrors.DIRECTIONS), default="both"),
        )),
        kind=dict(type="str", default="node", choices=["node", "remote"]),
        bridge=dict(type="str", default=port_mirrors.DEFAULT_BRIDGE),
        state=dict(type="str", default="merged", choices=list(STATES)),
    )
    spec.update(connection_argument_spec(None))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True,
                           required_if=[("state", s, ("config",)) for s in ("merged", "replaced", "rendered")])
    refuse_bare_override(module)
    require_libraries(module)

    def clean(value):
        if isinstance(value, dict):
            return dict((k, clean(v)) for k, v in value.items() if v is not None)
        return value
    remote = module.params["kind"] == "remote"
    items = []
    for i, item in enumerate(module.params["config"] or []):
        item = clean(item)
        # the suboptions' defaults belong to remote collectors only
        if not remote and item.get("collector"):
            item["collector"] = dict((k, v) for k, v in item["collector"].items()
                                     if k not in ("encapsulation", "key"))
        items.append(("config[%d]" % i, item))
    if remote:
        module.params["db"] = module.params["db"] or DEFAULT_NB_DB
        plan = run_composite(module, NB_SCHEMA, remote_mirrors.TABLES,
                             lambda view, mode: remote_mirrors.plan_taps(view, items, mode))
    else:
        module.params["db"] = module.params["db"] or DEFAULT_OVS_DB
        plan = run_composite(module, OVS_SCHEMA, port_mirrors.TABLES,
                             lambda view, mode: port_mirrors.plan_taps(view, items, mode, module.params["bridge"]))
    module.exit_json(**composite_result(module, plan, module.params["state"]))


if __name__ == "__main__":
    main()
