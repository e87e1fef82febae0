# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Ansible layer: argument specs, the one error path, result shaping.

The only file under module_utils that imports Ansible. Modules hand their
resource to :func:`run_resource_module` and :func:`run_info_module`, and a
core function that returns the task's result (the audit, the picture, the
trace) to :func:`run_task_module`. Generic glue only: a file of the core
imported here is shipped with every module, so a feature's code stays in
the feature's core file, imported by the module that uses it
(tests/unit/test_payload.py keeps it so).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from .common.addressing import HAS_NETADDR, NETADDR_IMPORT_ERROR
from .common import versions
from .common.errors import Ovn4nfvError, ValidationError
from .ovsdb.connection import DEFAULT_TIMEOUT, HAS_OVSDBAPP, OVSDBAPP_IMPORT_ERROR
from .ovsdb.execution import execute, reconcile, reconcile_items
from .ovsdb.operations import render_ops
from .ovsdb.plan import STATES, WRITE_STATES, planning_state, validate_config
from .ovsdb.task_databases import open_database


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
    return open_database(module.params, resource_tables, schema, db_param, where)


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


def run_task_module(argument_spec, task, default_db=None, libraries=None, connects=True):
    """Run a module whose work is one core function: ``task(params,
    check_mode)`` returns the result dict (``changed`` in it). Its
    parameters are ``argument_spec`` and the connection options (``db``
    defaults to ``default_db``; none when not ``connects``);
    ``libraries(params)`` says whether this run needs ovsdbapp and netaddr
    (by default it does). An error of the product's fails the module; so
    does an optional library missing where the task needs it (its
    ImportError names it)."""
    spec = dict(argument_spec)
    if connects:
        spec.update(connection_argument_spec(default_db))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    if libraries is None or libraries(module.params):
        require_libraries(module)
    try:
        result = task(module.params, module.check_mode)
    except Ovn4nfvError as exc:
        fail(module, exc)
    except ImportError as exc:
        module.fail_json(msg=missing_required_lib(str(exc)))
    module.exit_json(**result)


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
