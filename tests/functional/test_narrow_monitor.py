"""A task that names its objects monitors only their rows (OVSDB's
conditional monitoring), against a real ovsdb-server: what it downloads,
what it still sees (an object under a parent the task does not name), and
that writes through a narrowed cache keep the rows it never saw."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import reconcile_items
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import validate_config
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.resource import NARROW_MAX
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort

TABLES = ("Logical_Switch", "Logical_Switch_Port")


def names(db, table):
    return sorted(db.read(lambda idl: [row.name for row in idl.tables[table].rows.values()]))


def fill(box, switches=4, ports=5):
    args = []
    for s in range(switches):
        args += ["--", "ls-add", "sw%d" % s]
        for p in range(ports):
            args += ["--", "lsp-add", "sw%d" % s, "sw%d-p%d" % (s, p)]
    box.nbctl(*args[1:])


def narrowed_task(box, config, state="merged"):
    """What run_resource_module does: validate, connect with the
    resource's conditions, reconcile. Returns ``(plan, database)``; the
    caller closes the database."""
    resource = LogicalSwitchPort()
    items = validate_config(resource, config, state)
    db = ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES, where=resource.conditions(items, state))
    try:
        return reconcile_items(resource, items, state, db), db
    except BaseException:
        db.close()
        raise


def test_a_task_downloads_only_the_rows_it_names(sandbox):
    fill(sandbox)
    resource = LogicalSwitchPort()
    items = validate_config(resource, [{"name": "sw1-p2", "switch": "sw1"}, {"name": "new", "switch": "sw3"}],
                            "merged")
    where = resource.conditions(items, "merged")
    assert where == {"Logical_Switch_Port": [["name", "==", "new"], ["name", "==", "sw1-p2"]],
                     "Logical_Switch": [["name", "==", "sw1"], ["name", "==", "sw3"]]}
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES, where=where) as db:
        assert names(db, "Logical_Switch") == ["sw1", "sw3"]
        assert names(db, "Logical_Switch_Port") == ["sw1-p2"]
    # the tables whole where the state needs them
    assert resource.conditions(items, "overridden") == {}
    assert resource.conditions([], "deleted") == {}
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES, where={}) as db:
        assert len(names(db, "Logical_Switch_Port")) == 20


def test_a_task_that_names_many_objects_monitors_their_tables_whole():
    """The server tests each row against each clause: past NARROW_MAX
    names, the tables are cheaper whole."""
    resource = LogicalSwitchPort()
    at_most = [{"name": "p%d" % i, "switch": "sw%d" % (i % 2)} for i in range(NARROW_MAX)]
    assert len(resource.conditions(validate_config(resource, at_most, "merged"), "merged")[
        "Logical_Switch_Port"]) == NARROW_MAX
    many = at_most + [{"name": "one-more", "switch": "sw0"}]
    assert resource.conditions(validate_config(resource, many, "merged"), "merged") == {}


def test_creating_and_changing_ports_keeps_the_ports_the_task_never_saw(sandbox):
    fill(sandbox)
    config = [{"name": "sw1-p2", "switch": "sw1", "addresses": ["dynamic"]},
              {"name": "sw1-new", "switch": "sw1", "addresses": ["dynamic"]}]
    plan, db = narrowed_task(sandbox, config)
    db.close()
    assert plan.changed and [c.action for c in plan.changes] == ["update", "create"]
    # read from outside: sw1 holds its four other ports, the changed one and the new one
    listed = sorted(line.split("(")[1].rstrip(")") for line in sandbox.nbctl("lsp-list", "sw1").split("\n") if line)
    assert listed == ["sw1-new", "sw1-p0", "sw1-p1", "sw1-p2", "sw1-p3", "sw1-p4"]
    assert sandbox.nbctl("lsp-get-addresses", "sw1-p2").strip() == "dynamic"
    again, db = narrowed_task(sandbox, config)
    db.close()
    assert not again.changed


def test_a_port_under_another_switch_is_still_seen(sandbox):
    fill(sandbox)
    # declared on sw3, it exists on sw0: the monitor widens to sw0 and the plan refuses the move
    with pytest.raises(ValidationError, match=r"already exists on switch 'sw0', not on 'sw3'"):
        narrowed_task(sandbox, [{"name": "sw0-p1", "switch": "sw3"}])
    # deleted without its switch: found through the switch that holds it, and deleted from it
    plan, db = narrowed_task(sandbox, [{"name": "sw2-p4"}], state="deleted")
    db.close()
    assert [(c.action, c.before["switch"]) for c in plan.changes] == [("delete", "sw2")]
    assert "sw2-p4" not in sandbox.nbctl("lsp-list", "sw2")
    assert len([line for line in sandbox.nbctl("lsp-list", "sw2").split("\n") if line]) == 4


def test_widen_on_a_whole_table_changes_nothing(sandbox):
    fill(sandbox, switches=2, ports=1)
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        assert not db.narrowed("Logical_Switch")
        assert names(db, "Logical_Switch") == ["sw0", "sw1"]
