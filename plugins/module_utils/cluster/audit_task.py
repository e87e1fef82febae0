# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster audit as one task (``network_audit`` with ``layer:
cluster``), returning its result dict: the API's pods and nodes (with a
kubeconfig), the RAFT central's members (cluster/raft.py), then the
northbound and southbound read and correlated (cluster/audit.py) and,
with ``state: repaired``, mended in one transaction per database.

It stands apart from cluster/audit.py because it runs the RAFT audit too,
which builds its findings with cluster/audit.py's. The node's audit is
node/host_audit.py's :func:`run_host_audit`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ..common.errors import Ovn4nfvError
from ..ovsdb.connection import DEFAULT_NB_DB
from ..ovsdb.task_databases import nb_and_sb, read_both
from . import audit, provider_audit, raft, vms


def api_pods_and_nodes(kubeconfig):
    """The API's pods (the audit's view of each) and its nodes' names, read
    with ``kubeconfig``; the nodes are None when it may not list them."""
    try:
        from kubernetes import client, config     # noqa: only a task given a kubeconfig needs it
        from kubernetes.client.rest import ApiException
        api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig, persist_config=False))
        listed = json.loads(api.list_pod_for_all_namespaces(_preload_content=False).data)
    except Exception as exc:  # noqa: any failure of the API client is the task's
        raise Ovn4nfvError("cannot list the pods with %s: %s" % (kubeconfig, exc))
    try:
        nodes = [item["metadata"]["name"] for item in json.loads(api.list_node(_preload_content=False).data)
                 .get("items", [])]
    except ApiException as exc:
        if exc.status != 403:
            raise Ovn4nfvError("cannot list the nodes with %s: %s" % (kubeconfig, exc))
        nodes = None        # not granted (the watcher's audit ClusterRole): the stale chassis class is skipped
    return [audit.pod_of(item) for item in listed.get("items", [])] + _virtual_machines(
        client.CustomObjectsApi(api.api_client), ApiException, kubeconfig), nodes


def _virtual_machines(custom, api_exception, kubeconfig):
    """The audit's view of every KubeVirt VirtualMachine and VMI
    (:func:`.audit.vm_of`): none where the API serves no KubeVirt; one
    standing for every VM where they may not be listed."""
    out = []
    for plural in ("virtualmachines", "virtualmachineinstances"):
        try:
            items = json.loads(custom.list_cluster_custom_object(
                vms.GROUP, "v1", plural, _preload_content=False).data).get("items", [])
        except api_exception as exc:
            if exc.status == 404:
                continue        # KubeVirt is not installed
            if exc.status == 403:
                return [audit.vm_of(None)]
            raise Ovn4nfvError("cannot list the %s with %s: %s" % (plural, kubeconfig, exc))
        out += [audit.vm_of(item) for item in items if isinstance(item, dict)]
    return out


def run_cluster_audit(params, check_mode=False):
    """The cluster audit a task asks for, as a result dict. ``params``:
    ``kubeconfig`` (None: the classes that need the API are skipped),
    ``db`` (the northbound; several remotes: a RAFT central, its members
    audited), ``sb_db`` ("": no southbound), ``timeout``, the TLS files,
    and ``state`` (``audited``, or ``repaired``: mended, unless
    ``check_mode``, where the repair is said and not made)."""
    params = dict(params, db=params["db"] or DEFAULT_NB_DB)
    write = params["state"] == "repaired" and not check_mode
    pods, nodes = api_pods_and_nodes(params["kubeconfig"]) if params["kubeconfig"] else (None, None)
    members = raft.audit_members(params)
    if any(f["class"] == raft.LEADER for f in members):
        # no leader takes the reads the other classes need: say so, and what was skipped
        return audit.audit_result(members, list(audit.CLASSES), [], None, None, members)
    with nb_and_sb(params, audit.NB_TABLES, audit.SB_TABLES) as (nb, sb):
        def found(nb_view, sb_view):
            handed = (sorted(row.name for row in nb_view.rows("Logical_Switch_Port")), audit.port_mtus(nb_view),
                      audit.northd_version(sb_view), provider_audit.physnet_mtus(nb_view))
            return audit.audit(nb_view, sb_view, pods, nodes) + handed
        repairs = [(nb, lambda view, found_: audit.plan_repair(view, found_, pods))]
        repairs += [(sb, audit.plan_sb_repair)] if sb is not None else []
        (findings, skipped, ports, mtus, northd, physnets), repair, left = audit.audit_and_mend(
            lambda: read_both(nb, sb, found), repairs, params["state"], write)
    live_pods = sorted(pod["uid"] for pod in pods if not pod.get("vm")) if pods is not None else None
    return audit.audit_result(findings + members, skipped, ports, live_pods, repair, left + members,
                              dict(port_mtus=mtus, northd_version=northd, physnet_mtus=physnets))
