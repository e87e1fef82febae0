# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Ansible layer: argument specs, the one error path, result shaping.

The only file under module_utils that imports Ansible. Modules hand their
resource to :func:`run_resource_module` and :func:`run_info_module`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os
import socket
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from .common.addressing import HAS_NETADDR, NETADDR_IMPORT_ERROR
from .common import versions
from .common.errors import Ovn4nfvError, ValidationError
from .ovsdb.connection import (
    DEFAULT_NB_DB, DEFAULT_OVS_DB, DEFAULT_SB_DB, DEFAULT_TIMEOUT, NB_SCHEMA, OVS_SCHEMA, SB_SCHEMA, Database,
    HAS_OVSDBAPP, OVSDBAPP_IMPORT_ERROR, TLS)
from .ovsdb.execution import Batch, execute, reconcile, reconcile_items
from .ovsdb.operations import render_ops
from .ovsdb.plan import STATES, WRITE_STATES, planning_state, validate_config
from .ovsdb.view import View


def connection_argument_spec(default_db):
    """The OVSDB connection options every module takes."""
    return dict(
        db=dict(type="str", default=default_db),
        timeout=dict(type="int", default=DEFAULT_TIMEOUT),
        private_key=dict(type="path"),
        certificate=dict(type="path"),
        ca_cert=dict(type="path", aliases=["bootstrap_ca_cert"]),
    )


def refuse_bare_override(module):
    """``state: overridden`` makes the product's objects exactly ``config``:
    without one it would delete every object the product owns. As in
    ansible.netcommon's resource modules, that is refused before anything
    connects; ``state: deleted`` without config says it on purpose."""
    params = module.params
    if params.get("state") == "overridden" and not params.get("config"):
        module.fail_json(msg="state: overridden needs a config: what it declares becomes all that the "
                             "product owns here, so without one everything would go. To delete it all "
                             "on purpose, use state: deleted without config")


def require_libraries(module):
    for name, present, error in (("ovsdbapp", HAS_OVSDBAPP, OVSDBAPP_IMPORT_ERROR),
                                 ("netaddr", HAS_NETADDR, NETADDR_IMPORT_ERROR)):
        if not present:
            module.fail_json(msg=missing_required_lib(name), exception="".join(
                traceback.format_exception_only(type(error), error)))
        problem = versions.too_old(name)
        if problem:
            module.fail_json(msg=problem)


def _connect(module, resource_tables, schema, db_param="db", where=None):
    """The database at the remote in ``db_param``, with the module's
    timeout and TLS files."""
    params = module.params
    if params["timeout"] <= 0:
        raise ValidationError("timeout: %r must be a positive number of seconds" %
                              params["timeout"])
    tls = TLS(params["private_key"], params["certificate"], params["ca_cert"])
    return Database(params[db_param], schema, resource_tables, timeout=params["timeout"], tls=tls,
                    field=db_param, where=where)


def fail(module, exc):
    if isinstance(exc, ValidationError):
        module.fail_json(msg=str(exc), problems=exc.problems)
    module.fail_json(msg=str(exc))


def run_resource_module(resource_class, options, default_db, single=False, argument_spec=None,
                        choose=None):
    """Run a resource module: ``config`` (a list of ``options``, or one
    object when ``single``) reconciled according to ``state``.

    A module whose resource depends on a parameter (the northbound or the
    southbound database) adds it in ``argument_spec`` and passes ``choose``,
    which maps the parameters to ``(resource_class, default_db)``; ``db``
    then defaults to that ``default_db``."""
    spec = dict(
        config=dict(type="dict", options=options) if single else
        dict(type="list", elements="dict", options=options),
        state=dict(type="str", default="merged", choices=list(STATES)),
    )
    spec.update(argument_spec or {})
    spec.update(connection_argument_spec(default_db))
    module = AnsibleModule(
        argument_spec=spec, supports_check_mode=True,
        required_if=[("state", state, ("config",)) for state in ("merged", "replaced", "rendered")])
    refuse_bare_override(module)
    require_libraries(module)
    if choose is not None:
        resource_class, default_db = choose(module.params)
        module.params["db"] = module.params["db"] or default_db
    state = module.params["state"]
    config = module.params["config"]
    if single:
        config = [config or {}]
    resource = resource_class()
    try:
        # bad input is refused before anything connects
        items = validate_config(resource, config, planning_state(state))
    except Ovn4nfvError as exc:
        fail(module, exc)
    with connected(module, resource.tables, resource.schema, resource.conditions(items, state)) as database:
        plan = reconcile_items(resource, items, state, database, check_mode=module.check_mode)
    module.exit_json(**composite_result(module, plan, state, single))


def run_info_module(default_db, schema, sections, argument_spec=None):
    """Run an info module: ``sections`` maps a result key to a resource
    class, whose objects are gathered as in ``state: gathered``."""
    spec = dict(argument_spec or {})
    spec.update(connection_argument_spec(default_db))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    require_libraries(module)
    wanted = module.params.get("gather") or list(sections)
    resources = [(key, sections[key]()) for key in wanted]
    tables = sorted(set(t for _key, resource in resources for t in resource.tables))
    result = dict(changed=False)
    with connected(module, tables, schema) as database:
        for key, resource in resources:
            gathered = reconcile(resource, [], "gathered", database).gathered
            result[key] = gathered[0] if resource.identity == () and gathered else gathered
    module.exit_json(**result)


def run_trace_module(argument_spec):
    """Run ``network_trace``: check the request, read the southbound
    database, trace; a read, so check mode is the same run."""
    from .cluster import trace      # only this module's task needs it
    spec = dict(argument_spec)
    spec.update(connection_argument_spec(DEFAULT_SB_DB))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    require_libraries(module)
    p = module.params

    def end(name):
        return dict((k, v) for k, v in (p[name] or {}).items() if v is not None)
    try:
        trace.check_link(end("source"), end("destination"), p["protocol"], p["port"])
    except ValidationError as exc:
        fail(module, exc)
    with connected(module, trace.TABLES, SB_SCHEMA) as database:
        result = database.read(lambda idl: trace.trace(
            View(idl), p["db"], end("source"), end("destination"), p["protocol"], p["port"], p["timeout"],
            (p["private_key"], p["certificate"], p["ca_cert"])))
    module.exit_json(changed=False, **result)


def run_audit_module(argument_spec):
    """Run ``network_audit``. ``layer: cluster``: read the API's pods (with
    a kubeconfig), the NB and the SB, and find. ``layer: node``: read this
    node's OVS against the NB's ports handed down. With ``state:
    repaired``, mend in one transaction on the database read (in check
    mode, say what it would mend)."""
    from .cluster import audit      # only this module's task needs it
    spec = dict(argument_spec)
    spec.update(connection_argument_spec(None))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    require_libraries(module)
    p = module.params
    write = p["state"] == "repaired" and not module.check_mode
    if p["layer"] == "node":
        from .node import host_audit
        p["db"] = p["db"] or DEFAULT_OVS_DB
        node = p["node"] or socket.gethostname()
        with connected(module, host_audit.TABLES, OVS_SCHEMA) as ovs:
            devices = set(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") and \
                p["db"] == DEFAULT_OVS_DB else None     # this host's devices are the database's
            running = host_audit.controller_version(p["ovn_rundir"]) if devices is not None else None
            versions = bool(p["northd_version"] and running)

            def read(idl):
                view = View(idl)
                found = host_audit.audit_node(view, node, p["known_ports"], p["bridge"], devices, p["live_pods"],
                                              p["port_mtus"])
                links = host_audit.encap_links(host_audit.encap_ips(view)) if devices is not None else []
                ours = set(iface.name for iface in view.rows("Interface"))
                found += host_audit.audit_versions(view, node, p["northd_version"], running) if versions else []
                return (found + host_audit.audit_tunnels(node, links, ours),)
            (findings,), repair, left = _audit_and_mend(lambda: ovs.read(read), [
                (ovs, lambda view, found: host_audit.plan_node_repair(view, found, p["bridge"], p["port_mtus"])),
                (None, lambda found: host_audit.bring_up(set(
                    o for f in found if f["class"] == host_audit.TUNNEL and f["repair"] for o in f["objects"]),
                    write))], p["state"], write,
                settle=lambda: ovs.wait_for(lambda idl: host_audit.mtus_applied(View(idl), p["bridge"]), ovs.timeout))
        skipped = ([] if p["known_ports"] is not None else [host_audit.STRAY]) + \
            ([] if p["port_mtus"] is not None else [host_audit.MTU]) + \
            ([] if devices is not None else [host_audit.TUNNEL]) + ([] if versions else [host_audit.VERSION])
        _exit_audit(module, findings, skipped, [], [], repair, left)
    p["db"] = p["db"] or DEFAULT_NB_DB
    pods, nodes = (_list_pods_and_nodes(module, audit) if p["kubeconfig"] else (None, None))
    members = _raft_findings(module)
    if any(f["class"] == "raft_leader" for f in members):
        # no leader takes the reads the other classes need: say so, and what was skipped
        _exit_audit(module, members, list(audit.CLASSES), [], None, None, members)
    with nb_and_sb(module, audit.NB_TABLES, audit.SB_TABLES) as (nb, sb):
        def found(nb_view, sb_view):
            handed = (sorted(row.name for row in nb_view.rows("Logical_Switch_Port")), audit.port_mtus(nb_view),
                      audit.northd_version(sb_view))
            return audit.audit(nb_view, sb_view, pods, nodes) + handed
        repairs = [(nb, lambda view, found_: audit.plan_repair(view, found_, pods))]
        repairs += [(sb, audit.plan_sb_repair)] if sb is not None else []
        (findings, skipped, ports, mtus, northd), repair, left = _audit_and_mend(
            lambda: read_both(nb, sb, found), repairs, p["state"], write)
    findings, left = findings + members, left + members
    _exit_audit(module, findings, skipped, ports, sorted(p_["uid"] for p_ in pods) if pods is not None else None,
                repair, left, dict(port_mtus=mtus, northd_version=northd))


def run_picture_module(argument_spec):
    """Run ``network_picture``: the cluster as DOT text, read from the
    northbound and southbound (or given as ``source``), and with ``dest``
    laid out by Graphviz into an SVG and an HTML page there, written only
    when they differ (check mode: said, not written)."""
    from .cluster import picture        # only this module's task needs it
    spec = dict(argument_spec)
    spec.update(connection_argument_spec(None))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    p["db"] = p["db"] or DEFAULT_NB_DB
    source = p["source"]
    if source is None:
        require_libraries(module)
        with nb_and_sb(module, picture.NB_TABLES, picture.SB_TABLES) as (nb, sb):
            source = read_both(nb, sb, lambda nb_view, sb_view: picture.dot(
                nb_view, sb_view, p["findings"], p["title"]))
    result = dict(changed=False, dot=source, objects=picture.objects(source), paths=[])
    if p["dest"]:
        # Graphviz lays the same source out the same, but may write its
        # groups in another order: the files record the source they show,
        # and are made again only when it differs
        mark = picture.digest(source, p["title"], p["lines"] or [])
        paths = [os.path.join(p["dest"], name) for name in ("topology.html", "topology.svg")]
        result["paths"] = paths
        if any(mark not in (_read(path) or "") for path in paths):
            result["changed"] = True
            try:
                svg = picture.render(source, mark)
            except ImportError:
                module.fail_json(msg=missing_required_lib("pygraphviz (Debian: python3-pygraphviz)"))
            if not module.check_mode:
                _write(paths[1], svg)
                _write(paths[0], picture.page(svg, p["title"], p["lines"] or []))
    module.exit_json(**result)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _write(path, text):
    """Write ``text`` to ``path`` whole: a reader never sees half a file."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory)
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.rename(path + ".tmp", path)


def _raft_findings(module):
    """The RAFT central's members judged (cluster/raft.py), for the
    databases given as several remotes."""
    from .cluster import raft
    p = module.params
    try:
        return raft.audit_clusters({"db": p["db"], "sb_db": p["sb_db"]}, p["timeout"],
                                   TLS(p["private_key"], p["certificate"], p["ca_cert"]))
    except Ovn4nfvError as exc:
        fail(module, exc)


def _list_pods_and_nodes(module, audit):
    """The API's pods (the audit's view of each) and its nodes' names; the
    nodes are None when the kubeconfig may not list them."""
    try:
        from .daemons.settings import kubernetes_api_client
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        api = client.CoreV1Api(kubernetes_api_client(module.params["kubeconfig"]))
        listed = json.loads(api.list_pod_for_all_namespaces(_preload_content=False).data)
    except Exception as exc:  # noqa: any failure of the API client is the task's
        module.fail_json(msg="cannot list the pods with %s: %s" % (module.params["kubeconfig"], exc))
    try:
        nodes = [item["metadata"]["name"] for item in json.loads(api.list_node(_preload_content=False).data)
                 .get("items", [])]
    except ApiException as exc:
        if exc.status != 403:
            module.fail_json(msg="cannot list the nodes with %s: %s" % (module.params["kubeconfig"], exc))
        nodes = None        # not granted (the ovn4nfv-audit ClusterRole): the stale chassis class is skipped
    return [audit.pod_of(item) for item in listed.get("items", [])], nodes


def _audit_and_mend(audited, repairs, state, write, settle=None):
    """One audit and its repair, for either layer. ``audited()`` returns
    the findings first in a tuple; with ``state: repaired``, each
    ``(database, plan_repair)`` of ``repairs`` mends in one transaction on
    its database, ``plan_repair(view, findings)`` (written when
    ``write``), or without a database (netlink), ``plan_repair(findings)``;
    ``settle()``, when given, waits for what the repair asked to be done
    (within the database's timeout) before the audit is made again. Returns that tuple, the repairs as one :class:`Batch`
    (None when auditing only), and the findings left: the audit again when
    it wrote."""
    first = audited()
    if state != "repaired":
        return first, None, first[0]
    repair = Batch([execute(database, lambda view, plan_=plan_repair: plan_(view, first[0]), write)
                    if database is not None else plan_repair(first[0]) for database, plan_repair in repairs])
    if write and repair.changed and settle is not None:
        settle()
    return first, repair, audited()[0] if write and repair.changed else first[0]


def _exit_audit(module, findings, skipped, ports, live_pods, repair, left, handed=None):
    """The audit's result; ``left``, the findings after the repair (the
    audit again, when it wrote); ``handed``, what the cluster run hands
    down to the nodes' (``port_mtus``, ``northd_version``)."""
    from .cluster import audit
    module.exit_json(changed=bool(repair and repair.changed), findings=findings, skipped=skipped,
                     lines=audit.lines(findings, skipped), ports=ports, live_pods=live_pods, left=left,
                     repaired=repair.operations() if repair is not None and repair.changed else [],
                     **dict(dict(port_mtus={}, northd_version=None), **(handed or {})))


@contextlib.contextmanager
def nb_and_sb(module, nb_tables, sb_tables):
    """The northbound, and the southbound (None when ``sb_db`` is ""), for
    the ``with`` block; any error of the product's in it fails the module,
    and both are closed."""
    try:
        sb = _connect(module, sb_tables, SB_SCHEMA, "sb_db") if module.params["sb_db"] else None
    except Ovn4nfvError as exc:
        fail(module, exc)
    try:
        with connected(module, nb_tables, NB_SCHEMA) as nb:
            yield nb, sb
    finally:
        if sb is not None:
            sb.close()


def read_both(nb, sb, function):
    """``function(northbound view, southbound view or None)``, with both
    databases held still."""
    if sb is None:
        return nb.read(lambda idl: function(View(idl), None))
    return nb.read(lambda idl: sb.read(lambda sb_idl: function(View(idl), View(sb_idl))))


@contextlib.contextmanager
def connected(module, tables, schema, where=None):
    """The module's database for the ``with`` block (``where``: see
    :class:`Database`); any error of the product's in it fails the module,
    and the connection is closed."""
    database = None
    try:
        database = _connect(module, tables, schema, where=where)
        yield database
    except Ovn4nfvError as exc:
        fail(module, exc)
    finally:
        if database is not None:
            database.close()


def composite_result(module, plan, state, single=False):
    """The result of a task (a resource, or a composite such as a virtual
    network): one object rather than a list when ``single``."""
    result = dict(changed=False)
    if state == "gathered":
        result["gathered"] = (plan.gathered[0] if plan.gathered else {}) if single else plan.gathered
        return result
    result["operations"] = plan.operations() if plan.changed else []
    if state == "rendered":
        result["rendered"] = render_ops(plan.ops)
        return result
    result["changed"] = plan.changed
    if single:
        result["before"] = plan.before[0] if plan.before else {}
        result["after"] = plan.after[0] if plan.after else {}
    else:
        result["before"], result["after"] = plan.before, plan.after
    if module._diff:
        result["diff"] = plan.diff()
    return result


def run_composite(module, schema, tables, compute):
    """Connect, compute with ``compute(view, state)``, apply unless check
    mode or a read-only state, and return the plan."""
    state = module.params["state"]
    write = state in WRITE_STATES and not module.check_mode
    mode = planning_state(state)
    with connected(module, tables, schema) as database:
        return execute(database, lambda view: compute(view, mode), write)


def connect_or_none(module, db_param, tables, schema):
    """A connection to the remote in ``db_param``, or None with the reason."""
    try:
        return _connect(module, tables, schema, db_param), None
    except Ovn4nfvError as exc:
        return None, str(exc)
