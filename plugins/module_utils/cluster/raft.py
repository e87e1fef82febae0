# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit of a RAFT central: each member of the northbound's and the
southbound's clusters asked, one by one, what it knows of its database
(its ``_Server`` database: clustered or not, connected to the others or
not, leader or not, and the cluster's id), and the answers judged.

* ``raft_member``: a member that is not part of the cluster: it does not
  answer, it is cut off from the others (``connected`` false), it runs a
  standalone database, or its cluster id is not the others' (a member
  that was made a cluster of its own);
* ``raft_leader``: no member that answers is the leader: the database
  takes no writes.

Reported only: mending a cluster's membership is an operator's decision
(``ovs-appctl cluster/kick``, a member made again from the others). A
database given as one remote is not audited as a cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..ovsdb.connection import parse_remote, servers
from ..ovsdb.task_databases import tls_of
from .audit import finding

MEMBER = "raft_member"
LEADER = "raft_leader"
CLASSES = (MEMBER, LEADER)
DATABASES = (("db", "OVN_Northbound"), ("sb_db", "OVN_Southbound"))


def judge(database, answers):
    """The findings on ``database`` from :func:`servers`' ``answers``."""
    rows = dict((member, row) for member, row in answers.items() if isinstance(row, dict))
    cids = [row.get("cid") for row in rows.values() if row.get("model") == "clustered" and row.get("cid")]
    cluster = max(set(cids), key=cids.count) if cids else None
    out = []
    for member, row in sorted(answers.items()):
        why = None
        if not isinstance(row, dict):
            why = "does not answer (%s)" % row
        elif row.get("model") != "clustered":
            why = "runs a %s database, not a member of a cluster" % row.get("model")
        elif row.get("cid") != cluster:
            why = "belongs to another cluster (%s; the others' is %s)" % (row.get("cid"), cluster)
        elif not row.get("connected"):
            why = "is cut off from the other members"
        if why:
            out.append(finding(MEMBER, "warning", "raft", [member], "%s member %s %s" % (database, member, why)))
    if not any(row.get("leader") and row.get("cid") == cluster for row in rows.values()):
        out.append(finding(LEADER, "error", "raft", [database], "%s has no leader among %s: it takes no writes" % (
            database, ", ".join(sorted(answers)))))
    return out


def audit_clusters(remotes, timeout, tls=None):
    """Every finding on the clustered databases of ``remotes``
    (``{"db": NB remote, "sb_db": SB remote}``): a remote of one member
    is not a cluster here."""
    out = []
    for field, database in DATABASES:
        remote = remotes.get(field)
        if remote and len(parse_remote(remote, field)) > 1:
            out += judge(database, servers(remote, database, timeout, tls, field))
    return out


def audit_members(params):
    """Every finding on the clustered databases a task names: the
    northbound in ``params["db"]``, the southbound in ``params["sb_db"]``,
    asked within ``params["timeout"]`` with its TLS files."""
    return audit_clusters({"db": params["db"], "sb_db": params["sb_db"]}, params["timeout"], tls_of(params))
