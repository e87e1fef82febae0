"""Rows a narrowed task creates are not sent back to it (the server would
send each of them, and ovn-northd's changes to them, before the
transaction's reply), against a real ovsdb-server and ovn-northd: the rows
are written, the task's cache leaves them out, a task on a whole table is
unchanged, and a transaction the server answers "try again" follows them
again first, so that a row another client created meanwhile is seen."""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import reconcile_items
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import validate_config
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort

TABLES = ("Logical_Switch", "Logical_Switch_Port")
LSP = "Logical_Switch_Port"


def cached(db, table):
    return sorted(db.read(lambda idl: [row.name for row in idl.tables[table].rows.values()]))


def listed(box, switch):
    return sorted(line.split("(")[1].rstrip(")") for line in box.nbctl("lsp-list", switch).split("\n") if line)


def task(box, config, narrow=True):
    resource = LogicalSwitchPort()
    items = validate_config(resource, config, "merged")
    where = resource.conditions(items, "merged") if narrow else {}
    db = ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES, where=where)
    try:
        return reconcile_items(resource, items, "merged", db), db
    except BaseException:
        db.close()
        raise


def test_a_task_writes_the_rows_it_creates_and_does_not_follow_them(sandbox):
    sandbox.nbctl("ls-add", "sw0", "--", "lsp-add", "sw0", "old", "--", "ls-add", "sw1", "--", "lsp-add", "sw1", "other")
    config = [{"name": "old", "switch": "sw0", "addresses": ["dynamic"]}] + [
        {"name": "new%02d" % i, "switch": "sw0", "addresses": ["dynamic"]} for i in range(30)]
    plan, db = task(sandbox, config)
    try:
        assert [c.action for c in plan.changes] == ["update"] + ["create"] * 30
        # the declared row that existed is still followed; the created ones are not
        assert cached(db, LSP) == ["old"]
        condition = db.read(lambda idl: idl.tables[LSP].condition_state.latest)
        assert condition == [["name", "==", "old"]]
    finally:
        db.close()
    # read from outside: all written, on their switch, nothing else touched
    assert listed(sandbox, "sw0") == sorted(["old"] + ["new%02d" % i for i in range(30)])
    assert listed(sandbox, "sw1") == ["other"]
    again, db = task(sandbox, config)
    db.close()
    assert not again.changed


def test_a_task_on_a_whole_table_still_follows_what_it_creates(sandbox):
    sandbox.nbctl("ls-add", "sw0")
    plan, db = task(sandbox, [{"name": "p%d" % i, "switch": "sw0"} for i in range(3)], narrow=False)
    try:
        assert plan.changed
        assert db.wait_for(lambda idl: len(idl.tables[LSP].rows) == 3, db.timeout)
    finally:
        db.close()


def test_try_again_follows_the_created_rows_again_before_the_retry(sandbox):
    sandbox.nbctl("ls-add", "sw0")
    where = {LSP: [["name", "==", "a"]], "Logical_Switch": [["name", "==", "sw0"]]}
    attempts = []

    def create_a(idl, txn):
        ports = [row for row in idl.tables[LSP].rows.values() if row.name == "a"]
        attempts.append(len(ports))
        if ports:
            return "seen"
        switch = next(iter(idl.tables["Logical_Switch"].rows.values()))
        switch.verify("ports")
        row = txn.insert(idl.tables[LSP])
        row.name = "a"
        switch.addvalue("ports", row.uuid)
        if len(attempts) == 1:
            # another client creates the same port between this read and the commit
            sandbox.nbctl("lsp-add", "sw0", "a")
        return "inserted"

    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES, where=where) as db:
        # the first commit fails its verify; the retry must see the other client's port
        assert db.transact(create_a) == "seen"
        assert attempts == [0, 1]
        assert cached(db, LSP) == ["a"]
    assert listed(sandbox, "sw0") == ["a"]
