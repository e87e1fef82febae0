#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ovn_connection
short_description: Manage the listeners of the OVN northbound and southbound databases
version_added: 0.1.0
description:
  - Creates, updates and deletes the C(Connection) rows of the OVN northbound or southbound
    database, which C(ovsdb-server) started with C(--remote=db:OVN_Northbound,NB_Global,connections)
    (the default of C(ovn-ctl)) listens on, as C(ovn-nbctl set-connection) and
    C(ovn-sbctl set-connection) write them.
  - A southbound listener with O(config[].role=ovn-controller) turns on role-based access control
    for the chassis that connect through it, so that each chassis can write only its own rows.
    The chassis' certificate CN must then be its chassis name.
  - Give a listener an address (V(pssl:6642:192.168.33.11)) so that it binds that address only;
    a target without one binds every address of the host.
author:
  - ovn4nfv.k8s developers (@ovn4nfv-k8s)
options:
  database:
    description:
      - Which database's listeners to manage.
    type: str
    choices: [northbound, southbound]
    default: northbound
  db:
    description:
      - The database remote, as in C(ovn-nbctl --db) or C(ovn-sbctl --db).
      - C(unix:PATH), C(tcp:HOST:PORT) or C(ssl:HOST:PORT); several remotes of a RAFT cluster
        are joined by commas, and writes go to the leader.
      - Defaults to C(unix:/var/run/ovn/ovnnb_db.sock) or C(unix:/var/run/ovn/ovnsb_db.sock)
        according to O(database).
    type: str
  config:
    description:
      - The listeners, each known by its O(config[].target).
    type: list
    elements: dict
    suboptions:
      target:
        description:
          - The remote, as C(ovsdb-server --remote) takes it, V(pssl:PORT[:IP]),
            V(ptcp:PORT[:IP]) or V(punix:PATH); or an outgoing V(ssl:IP:PORT), V(tcp:IP:PORT).
        type: str
        required: true
      inactivity_probe:
        description:
          - Milliseconds without traffic before the server probes a client; V(0) turns probing off.
        type: int
      max_backoff:
        description:
          - Maximum milliseconds between reconnection attempts of an outgoing connection.
        type: int
      role:
        description:
          - The RBAC role of the clients of this listener (southbound only), usually
            V(ovn-controller). An empty string means no access control.
        type: str
      read_only:
        description:
          - Whether the clients of this listener may only read (southbound only).
        type: bool
      other_config:
        description:
          - C(other_config) keys, such as C(dscp).
        type: dict
      external_ids:
        description:
          - C(external_ids) keys.
        type: dict
extends_documentation_fragment:
  - ovn4nfv.k8s.ovsdb
  - ovn4nfv.k8s.ovsdb.RESOURCE
  - ovn4nfv.k8s.ovsdb.ATTRIBUTES
notes:
  - The certificates of an V(pssl) listener are C(ovsdb-server)'s own options (C(ovn-ctl
    --ovn-nb-db-ssl-key) and its kin), which the P(ovn4nfv.k8s.ovn_central#role) role sets.
"""

EXAMPLES = r"""
- name: The northbound database listens with TLS on the master's underlay address only
  ovn4nfv.k8s.ovn_connection:
    database: northbound
    config:
      - target: pssl:6641:192.168.33.11
        inactivity_probe: 60000
    state: overridden

- name: The southbound database, with RBAC for the chassis
  ovn4nfv.k8s.ovn_connection:
    database: southbound
    config:
      - target: pssl:6642:192.168.33.11
        role: ovn-controller
        inactivity_probe: 60000
    state: overridden

- name: What the southbound database listens on
  ovn4nfv.k8s.ovn_connection:
    database: southbound
    state: gathered
  register: listeners
"""

RETURN = r"""
before:
  description: The listeners this task changes (in check mode, would change), as they were.
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: []
after:
  description: The listeners this task changes, as they are now (in check mode, as they would be).
  returned: when O(state) is not V(gathered) or V(rendered)
  type: list
  elements: dict
  sample: [{"target": "pssl:6642:192.168.33.11", "role": "ovn-controller", "read_only": false}]
operations:
  description: What was done (in check mode, what would be done), one readable line per object.
  returned: when O(state) is not V(gathered)
  type: list
  elements: str
  sample: ["create connection pssl:6642:192.168.33.11: role='ovn-controller'"]
gathered:
  description: The current listeners, in config form.
  returned: when O(state=gathered)
  type: list
  elements: dict
  sample: [{"target": "pssl:6642:192.168.33.11", "role": "ovn-controller", "read_only": false}]
rendered:
  description: The OVSDB operations V(merged) would perform, as RFC 7047 C(transact) operations.
  returned: when O(state=rendered)
  type: list
  elements: dict
  sample: [{"op": "insert", "table": "Connection", "uuid-name": "row1",
            "row": {"target": "ptcp:6641:127.0.0.1"}}]
"""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils._ansible import run_resource_module
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.listeners import NBConnection, SBConnection
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.connection import DEFAULT_NB_DB, DEFAULT_SB_DB

OPTIONS = dict(
    target=dict(type="str", required=True),
    inactivity_probe=dict(type="int"),
    max_backoff=dict(type="int"),
    role=dict(type="str"),
    read_only=dict(type="bool"),
    other_config=dict(type="dict"),
    external_ids=dict(type="dict"),
)
DATABASES = {"northbound": (NBConnection, DEFAULT_NB_DB), "southbound": (SBConnection, DEFAULT_SB_DB)}


def _choose(params):
    return DATABASES[params["database"]]


def main():
    run_resource_module(None, OPTIONS, None, choose=_choose,
                        argument_spec=dict(database=dict(type="str", default="northbound",
                                                         choices=sorted(DATABASES))))


if __name__ == "__main__":
    main()
