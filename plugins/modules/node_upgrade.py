#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: node_upgrade
short_description: One node's part of a rolling upgrade - what it runs, its record, its daemons restarted
version_added: 0.2.0
description:
  - V(gathered) reads what the node runs, as M(ovn4nfv.k8s.upgrade_plan) plans from it - the Debian
    codename, the Open vSwitch and OVN packages' versions, each daemon's own version (asked over its control
    socket), whether C(ovn-controller) is pinned to northd's version, and the node's upgrade record.
  - V(recorded) writes a mark in the node's record, C(/var/lib/ovn4nfv/upgrade.json) - V(started) (a node's
    upgrade begins, or resumes an unfinished one), the V(start) or V(end) of a O(step), V(finished). An
    upgrade that stopped half-way left its record unfinished, and the next run resumes that node.
  - V(restarted) restarts the O(step)'s daemons on the release now installed, timed into the record, and
    waits until they run it - V(ovs) by Debian's C(systemctl reload openvswitch-switch) (C(ovs-ctl restart) - the
    flows saved, C(ovsdb-server) restarted and its schema converted, C(ovs-vswitchd) started with
    C(flow-restore-wait) and given its flows back before it forwards), then each uplink the roles configured
    put back; V(ovn-controller) told C(exit --restart) (its chassis and bindings stay in the southbound) and
    started again, which waits C(ovn-ofctrl-wait-before-clear) before it replaces its flows, until it is
    connected; V(central) C(ovn-central) restarted, until C(ovn-northd) runs the installed release and each
    clustered database's member is back in a cluster with a leader; V(daemons) the node's C(containerd),
    node agent and watcher (a leading watcher releases its Lease when stopped, and a standby takes over).
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  state:
    description:
      - What to do.
    type: str
    choices: [gathered, recorded, restarted]
    default: gathered
  step:
    description:
      - The step to restart (V(restarted)), or whose start or end to record (V(recorded) with O(mark=start)
        or O(mark=end)).
    type: str
    choices: [packages, ovs, ovn-controller, central, daemons]
  mark:
    description:
      - With V(recorded), the mark to write.
    type: str
    choices: [started, start, end, finished]
  from_release:
    description:
      - With O(mark=started), the Debian release the node is upgraded from.
    type: str
  to_release:
    description:
      - With O(mark=started), the Debian release the node is upgraded to. With V(gathered), the release
        whose daemons the node must run; RV(behind) then says what does not yet.
    type: str
  central:
    description:
      - With V(gathered) and O(to_release), whether the node is a central member (its C(ovn-northd) must run
        the target's OVN).
    type: bool
    default: false
  chassis:
    description:
      - With V(gathered) and O(to_release), whether the node is a chassis (its C(ovn-controller) must run the
        target's OVN).
    type: bool
    default: true
  record:
    description:
      - The record's path.
    type: path
    default: /var/lib/ovn4nfv/upgrade.json
  wait:
    description:
      - Seconds to wait for each restarted daemon to run the installed release and answer.
    type: int
    default: 120
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.OVS
attributes:
  check_mode:
    description: V(gathered) reads only; V(recorded) and V(restarted) say they would change and change nothing.
    support: full
  diff_mode:
    description: The record has no diff of its own.
    support: none
"""

EXAMPLES = r"""
- name: What this node runs
  ovn4nfv.k8s.node_upgrade:
  register: upgrade_node

- name: The node's upgrade begins
  ovn4nfv.k8s.node_upgrade:
    state: recorded
    mark: started
    from_release: bookworm
    to_release: trixie

- name: Open vSwitch on the release now installed, its flows kept
  ovn4nfv.k8s.node_upgrade:
    state: restarted
    step: ovs
"""

RETURN = r"""
node:
  description: What the node runs (V(gathered)).
  returned: state is gathered
  type: dict
  sample:
    debian: bookworm
    installed: {ovs: 3.1.0-2+deb12u1, ovn: 23.03.1-1~deb12u2, central: null}
    running: {ovs: "ovs-vswitchd (Open vSwitch) 3.1.0", ovn_controller: "ovn-controller 23.03.1", northd: null}
    pinned: false
    record: null
behind:
  description:
    - With V(gathered) and O(to_release), what of the node does not run that release yet - C(debian), C(ovs),
      C(ovn-controller), C(northd); empty once it all does (the upgrade's gate).
  returned: state is gathered and to_release is given
  type: list
  elements: str
  sample: [ovn-controller]
record:
  description: The node's record after this task (V(recorded), V(restarted)); in check mode, as it would be.
  returned: state is recorded or restarted
  type: dict
  sample: {from: bookworm, to: trixie, started: 1764300000.1, finished: null, steps: {packages: [1764300000.2, 1764300051.0]}}
restarted:
  description: What was restarted (V(restarted)) - the uplinks' bridges put back, or the product's units.
  returned: state is restarted
  type: list
  elements: str
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_task_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.releases import DEBIAN
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.upgrade import behind
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import upgrade
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_OVS_DB


def _recorded(params, check_mode):
    if params["mark"] is None:
        raise ValidationError("mark: state recorded needs a mark (started, start, end or finished)")
    if params["mark"] in ("start", "end") and params["step"] is None:
        raise ValidationError("step: mark %s needs the step it marks" % params["mark"])
    if params["mark"] == "started" and not (params["from_release"] and params["to_release"]):
        raise ValidationError("from_release, to_release: mark started needs both")
    before = upgrade.read_record(params["record"])
    after = upgrade.updated_record(before, params["mark"], params["step"], params["from_release"],
                                   params["to_release"])
    if not check_mode and after != before:
        upgrade.write_record(after, params["record"])
    return dict(changed=after != before, record=after)


def _restarted(params, check_mode):
    step = params["step"]
    if step not in upgrade.RESTARTS and step != "daemons":
        raise ValidationError("step: state restarted restarts ovs, ovn-controller, central or daemons, not %r" % step)
    if check_mode:
        return dict(changed=True, record=upgrade.read_record(params["record"]), restarted=[])
    record = upgrade.updated_record(upgrade.read_record(params["record"]), "start", step)
    upgrade.write_record(record, params["record"])
    if step == "daemons":
        done = upgrade.restart_daemons()
    else:
        done = upgrade.RESTARTS[step](params["wait"]) or []
    record = upgrade.updated_record(record, "end", step)
    upgrade.write_record(record, params["record"])
    return dict(changed=True, record=record, restarted=done)


def task(params, check_mode):
    params = dict(params, db=params["db"] or DEFAULT_OVS_DB)
    if params["wait"] <= 0:
        raise ValidationError("wait: %r must be a positive number of seconds" % params["wait"])
    if params["state"] == "recorded":
        return _recorded(params, check_mode)
    if params["state"] == "restarted":
        if params["step"] is None:
            raise ValidationError("step: state restarted needs the step to restart")
        return _restarted(params, check_mode)
    node = upgrade.gather(params["db"], params["timeout"], params["record"])
    if params["to_release"] is None:
        return dict(changed=False, node=node)
    if params["to_release"] not in DEBIAN:
        raise ValidationError("to_release: %r is no Debian release the upgrade knows (it knows %s)" % (
            params["to_release"], ", ".join(sorted(DEBIAN))))
    roles = dict(node, central=params["central"], chassis=params["chassis"])
    return dict(changed=False, node=node, behind=behind(roles, params["to_release"]))


def main():
    run_task_module(dict(
        state=dict(type="str", choices=["gathered", "recorded", "restarted"], default="gathered"),
        step=dict(type="str", choices=list(upgrade.STEPS)),
        mark=dict(type="str", choices=["started", "start", "end", "finished"]),
        from_release=dict(type="str"),
        to_release=dict(type="str"),
        central=dict(type="bool", default=False),
        chassis=dict(type="bool", default=True),
        record=dict(type="path", default=upgrade.RECORD),
        wait=dict(type="int", default=120),
    ), task, default_db=DEFAULT_OVS_DB, libraries=lambda params: params["state"] == "gathered")


if __name__ == "__main__":
    main()
