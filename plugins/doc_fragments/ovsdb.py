# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The OVSDB connection options, the same for every module."""

    DOCUMENTATION = r"""
options:
  timeout:
    description:
      - Seconds to wait for the database to answer, sync and commit.
      - When it cannot be reached in that time the task fails with an error that names the remote.
    type: int
    default: 10
  private_key:
    description:
      - Private key file for an C(ssl:) remote, as in C(ovs-vsctl --private-key).
    type: path
  certificate:
    description:
      - Certificate file for an C(ssl:) remote, as in C(ovs-vsctl --certificate).
    type: path
  ca_cert:
    description:
      - CA certificate file that the server's certificate must be signed by, for an C(ssl:) remote.
    type: path
    aliases: [bootstrap_ca_cert]
requirements:
  - ovsdbapp
  - netaddr
"""

    OVS = r"""
options:
  db:
    description:
      - The Open vSwitch database remote, as in C(ovs-vsctl --db).
      - C(unix:PATH), C(tcp:HOST:PORT) or C(ssl:HOST:PORT).
    type: str
    default: unix:/var/run/openvswitch/db.sock
"""

    NB = r"""
options:
  db:
    description:
      - The OVN northbound database remote, as in C(ovn-nbctl --db).
      - C(unix:PATH), C(tcp:HOST:PORT) or C(ssl:HOST:PORT); several remotes of a RAFT cluster
        are joined by commas, and writes go to the leader.
    type: str
    default: unix:/var/run/ovn/ovnnb_db.sock
"""

    ATTRIBUTES = r"""
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
  idempotent:
    description: A second run with the same arguments reports no change.
    support: full
"""

    RESOURCE = r"""
options:
  state:
    description:
      - V(merged) creates the objects in O(config) and updates the options given; maps such as
        C(external_ids) merge key by key, and a key set to V(null) is removed.
      - V(replaced) makes each object in O(config) exactly as given; options left out are
        cleared and maps are replaced whole.
      - V(overridden) is V(replaced), and also deletes every object of this kind that the
        product owns (C(external_ids:ovn4nfv-owner=ovn4nfv.k8s)) and O(config) does not list.
        Objects the product does not own are left alone.
      - V(deleted) deletes the objects in O(config), identified by their keys; with no
        O(config) it deletes every object of this kind that the product owns.
      - V(gathered) returns the current objects (those in O(config), or all) in config form,
        without writing.
      - V(rendered) returns, in RV(rendered), the OVSDB operations that V(merged) would perform
        against the current database, as RFC 7047 C(transact) operations, without writing.
    type: str
    choices: [merged, replaced, overridden, deleted, gathered, rendered]
    default: merged
notes:
  - Every write of a task is one OVSDB transaction, however many objects O(config) holds.
  - Objects the product creates or declares carry C(external_ids:ovn4nfv-owner=ovn4nfv.k8s);
    that key is not shown in C(external_ids) and cannot be set there.
"""
