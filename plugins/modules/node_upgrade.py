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
    upgrade that stopped half-way left its record unfinished, and the next run resumes that node. V(started) on a
    finished record of the same target (the node was planned again, one of its daemons down when read) reopens it
    - the first attempt's C(from) and C(started) kept, C(attempts) one more, the finished attempt under
    C(previous); another target begins a new record, the last one under C(previous).
  - V(restarted) restarts the O(step)'s daemons on the release now installed, timed into the record, and
    waits until they run it - V(ovs) by Debian's C(systemctl reload openvswitch-switch) (C(ovs-ctl restart) - the
    flows saved, C(ovsdb-server) restarted and its schema converted, C(ovs-vswitchd) started with
    C(flow-restore-wait) and given its flows back before it forwards), then each uplink the roles configured
    put back; V(ovn-controller) told C(exit --restart) (its chassis and bindings stay in the southbound) and
    started again, which waits C(ovn-ofctrl-wait-before-clear) before it replaces its flows, until it is
    connected; V(central) C(ovn-central) restarted, until C(ovn-northd) runs the installed release and each
    clustered database's member is back in a cluster with a leader; V(daemons) the node's C(containerd),
    node agent and watcher (a leading watcher releases its Lease when stopped, and a standby takes over).
  - With O(step=central), a clustered database's member must first see every other server of its cluster
    connected (C(cluster/status)), for the NB and the SB, or the task fails naming the missing servers and
    restarts nothing. With Open vSwitch 3.2 or later installed, each clustered database's unit
    (C(ovn-ovsdb-server-nb), C(ovn-ovsdb-server-sb)) gets a drop-in, C(ovn4nfv-upgrade.conf), that starts its
    C(ovsdb-server) with C(--disable-file-no-data-conversion), so that members still on 3.1 can read what it
    writes (ovsdb(7)).
  - V(prepared), on a central member right after its packages, writes those drop-ins (with Open vSwitch 3.2 or
    later installed, for each clustered database), so that nothing - a crash, a reboot, an operator - starts
    the new C(ovsdb-server) without the option before the member's V(central) step.
  - V(settled), on every central member once all of them run the new release, undoes the upgrade's measures -
    each database with the drop-in gets C(ovsdb/file/no-data-conversion-enable) (when its C(ovsdb-server) runs 3.2
    or later and has that command), and the drop-ins are removed. The drop-in is the sign of what to settle
    (C(ovsdb-server) has no query for it); a second run changes nothing.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  state:
    description:
      - What to do.
    type: str
    choices: [gathered, recorded, restarted, prepared, settled]
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
    description: V(gathered) reads only; V(recorded) and V(restarted) say they would change and change nothing
      (O(step=central) still checks the cluster's members, and fails as it would); V(prepared) and V(settled) say what they would do.
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

- name: Right after the packages, a clustered member's database servers made to write the old format
  ovn4nfv.k8s.node_upgrade:
    state: prepared

- name: Once every central member runs the new release, the upgrade's measures undone
  ovn4nfv.k8s.node_upgrade:
    state: settled
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
  sample: {from: bookworm, to: trixie, started: 1764300000.1, finished: null, attempts: 1,
           steps: {packages: [1764300000.2, 1764300051.0]}}
restarted:
  description: What was restarted (V(restarted)) - the uplinks' bridges put back, the product's units, or
    C(ovn-central).
  returned: state is restarted
  type: list
  elements: str
central:
  description:
    - With O(step=central), what the restart found and did - C(cluster) per database (C(N of N servers
      connected), C(standalone), or C(not answering) for a member down already, which takes no member from its
      cluster), and the C(dropins) written.
  returned: state is restarted and step is central
  type: dict
  sample:
    cluster: {OVN_Northbound: 3 of 3 servers connected, OVN_Southbound: 3 of 3 servers connected}
    dropins: [/etc/systemd/system/ovn-ovsdb-server-nb.service.d/ovn4nfv-upgrade.conf]
dropins:
  description: The drop-ins V(prepared) wrote (in check mode, would write).
  returned: state is prepared
  type: list
  elements: str
  sample: [/etc/systemd/system/ovn-ovsdb-server-nb.service.d/ovn4nfv-upgrade.conf]
settled:
  description:
    - What V(settled) did (in check mode, would do) - the databases given
      C(ovsdb/file/no-data-conversion-enable) (C(enabled)) and the drop-ins C(removed).
  returned: state is settled
  type: dict
  sample:
    enabled: [OVN_Northbound, OVN_Southbound]
    removed: [/etc/systemd/system/ovn-ovsdb-server-nb.service.d/ovn4nfv-upgrade.conf,
              /etc/systemd/system/ovn-ovsdb-server-sb.service.d/ovn4nfv-upgrade.conf]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_task_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import upgrade_node
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_OVS_DB


def main():
    run_task_module(dict(
        state=dict(type="str", choices=["gathered", "recorded", "restarted", "prepared", "settled"],
                   default="gathered"),
        step=dict(type="str", choices=list(upgrade_node.STEPS)),
        mark=dict(type="str", choices=["started", "start", "end", "finished"]),
        from_release=dict(type="str"),
        to_release=dict(type="str"),
        central=dict(type="bool", default=False),
        chassis=dict(type="bool", default=True),
        record=dict(type="path", default=upgrade_node.RECORD),
        wait=dict(type="int", default=120),
    ), upgrade_node.task, default_db=DEFAULT_OVS_DB, libraries=lambda params: params["state"] == "gathered")


if __name__ == "__main__":
    main()
