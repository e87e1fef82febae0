#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: traffic_tap
short_description: Copy a pod interface's traffic to a collector pod on the same node
version_added: 0.2.0
description:
  - A tap delivers copies of the traffic of a pod's interface (what it receives, what it sends,
    or both) to a collector pod's interface on the same node, as an Open vSwitch mirror on the
    integration bridge. Run it on the node that hosts both pods.
  - The tap is declared by logical port (a pod and its interface, or the port's name), and kept in
    the node's Open vSwitch database. The node agent makes the mirror again whenever a pod is made
    again, so a tap follows its pods; while either pod is away there is no mirror. Deleting the tap
    leaves nothing behind.
  - A collector elsewhere (OVN's GRE or ERSPAN mirror) is not supported yet.
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
          - The interface the copies go to. Required unless O(state=deleted).
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
      direction:
        description:
          - V(ingress), what the pod receives; V(egress), what it sends; V(both).
        type: str
        choices: [ingress, egress, both]
        default: both
  bridge:
    description:
      - The integration bridge.
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
  - ovn4nfv.k8s.ovsdb.OVS
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
  description: The taps declared on this node.
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
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import taps
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_OVS_DB, OVS_SCHEMA
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import STATES

END = dict(type="dict", options=dict(
    pod=dict(type="str"),
    namespace=dict(type="str"),
    interface=dict(type="str"),
    port=dict(type="str"),
))


def main():
    spec = dict(
        config=dict(type="list", elements="dict", options=dict(
            name=dict(type="str", required=True),
            source=END,
            collector=END,
            direction=dict(type="str", choices=list(taps.DIRECTIONS), default="both"),
        )),
        bridge=dict(type="str", default=taps.DEFAULT_BRIDGE),
        state=dict(type="str", default="merged", choices=list(STATES)),
    )
    spec.update(connection_argument_spec(DEFAULT_OVS_DB))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True,
                           required_if=[("state", s, ("config",)) for s in ("merged", "replaced", "rendered")])
    refuse_bare_override(module)
    require_libraries(module)

    def clean(value):
        if isinstance(value, dict):
            return dict((k, clean(v)) for k, v in value.items() if v is not None)
        return value
    items = [("config[%d]" % i, clean(item)) for i, item in enumerate(module.params["config"] or [])]
    plan = run_composite(module, OVS_SCHEMA, taps.TABLES,
                         lambda view, mode: taps.plan_taps(view, items, mode, module.params["bridge"]))
    module.exit_json(**composite_result(module, plan, module.params["state"]))


if __name__ == "__main__":
    main()
