"""The core against real ovsdb-server and ovn-northd: connection, one
transaction per task, and rendered operations that really apply."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import types

import pytest
from ovs import poller

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import transaction
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import NameIndex, View, cell
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import DatabaseUnreachable, ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.operations import apply_ops, render_ops
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.plan import plan, validate_config
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_routers import LogicalRouterPort
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import (
    LogicalSwitch, LogicalSwitchPort)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import Chassis


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def connect(remote, *tables, **kwargs):
    return ovsdb.Database(remote, ovsdb.NB_SCHEMA, tables or ("Logical_Switch",), **kwargs)


def test_monitors_only_the_tables_asked_for(sandbox):
    with connect(sandbox.nb_db, "Logical_Switch", "Logical_Switch_Port") as db:
        assert set(db.tables) == {"Logical_Switch", "Logical_Switch_Port"}


def test_missing_socket_fails_fast_and_names_the_remote(tmp_path):
    remote = "unix:%s/none.sock" % tmp_path
    start = time.monotonic()
    with pytest.raises(DatabaseUnreachable) as err:
        connect(remote, timeout=5)
    assert remote in str(err.value)
    assert time.monotonic() - start < 5


@contextlib.contextmanager
def silent_server():
    """A TCP peer on loopback that accepts and never answers; yields
    ``(remote, accepted connections)``."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    accepted = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except socket.timeout:
                continue
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield "tcp:127.0.0.1:%d" % listener.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        listener.close()


def test_silent_server_fails_within_the_timeout():
    """A peer that accepts and never answers must not hang the caller."""
    with silent_server() as (remote, accepted):
        start = time.monotonic()
        with pytest.raises(DatabaseUnreachable) as err:
            connect(remote, timeout=2)
        elapsed = time.monotonic() - start
    assert remote in str(err.value)
    assert accepted, "the client did connect"
    assert elapsed < 2 + 1.5, "bounded by the timeout, took %.1fs" % elapsed


def test_a_silent_first_remote_leaves_time_for_the_next(sandbox):
    """A RAFT member that went away (first in the list) must not use up
    the whole timeout of the schema fetch: the members after it still get
    their turn. (The IDL that follows picks its remotes in random order and
    leaves a silent one on python-ovs's inactivity probe; that is not this.)"""
    with silent_server() as (remote, accepted):
        schema = ovsdb.fetch_schema([remote, sandbox.nb_db], "OVN_Northbound",
                                    time.monotonic() + 6, remote)
    assert schema["name"] == "OVN_Northbound"
    assert accepted, "the silent member was tried first"


def _port_names(rows):
    return sorted(row["name"] for row in rows) if rows else None


def test_following_rows_leaves_a_silent_first_remote_for_the_next(sandbox):
    """A member that accepts and never answers the monitor gets its share
    of the time, then the next member is followed."""
    sandbox.nbctl("ls-add", "follow-sw", "--", "lsp-add", "follow-sw", "follow-p1")
    with silent_server() as (remote, accepted):
        names = ovsdb.follow_rows(remote + "," + sandbox.nb_db, "OVN_Northbound", "Logical_Switch_Port",
                                  ("name", ["follow-p1"]), ["name"], _port_names, 6)
    assert names == ["follow-p1"]
    assert accepted, "the silent member was tried first"


def test_following_rows_goes_to_the_next_remote_when_one_fails_while_followed(sandbox):
    """A member that goes away while its rows are followed (its server
    stops) is left for the next; the rows that appear there decide."""
    sandbox.nbctl("ls-add", "follow-sw2")
    port = free_port()
    ctl = os.path.join(sandbox.dir, "ovnnb_db.ctl")
    sandbox.run("ovs-appctl", "-t", ctl, "ovsdb-server/add-remote", "ptcp:%d:127.0.0.1" % port)
    outcome, following = {}, threading.Event()

    def decide(rows):
        following.set()         # the first member answered the monitor and the select
        return _port_names(rows)
    follower = threading.Thread(target=lambda: outcome.update(names=ovsdb.follow_rows(
        "tcp:127.0.0.1:%d,%s" % (port, sandbox.nb_db), "OVN_Northbound", "Logical_Switch_Port",
        ("name", ["follow-p2"]), ["name"], decide, 20)))
    follower.start()
    try:
        assert following.wait(10), "the follower never started"
        # the first member goes: its listener and its sessions
        sandbox.run("ovs-appctl", "-t", ctl, "ovsdb-server/remove-remote", "ptcp:%d:127.0.0.1" % port)
        sandbox.nbctl("lsp-add", "follow-sw2", "follow-p2")
    finally:
        follower.join(25)
    assert outcome.get("names") == ["follow-p2"], outcome


def test_tcp_remote(sandbox):
    port = free_port()
    sandbox.run("ovs-appctl", "-t", os.path.join(sandbox.dir, "ovnnb_db.ctl"),
                "ovsdb-server/add-remote", "ptcp:%d:127.0.0.1" % port)
    sandbox.nbctl("ls-add", "over-tcp")
    with connect("tcp:127.0.0.1:%d" % port) as db:
        names = db.read(lambda idl: [r.name for r in idl.tables["Logical_Switch"].rows.values()])
    assert names == ["over-tcp"]


def _openssl(*args, cwd):
    subprocess.run(("openssl",) + args, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)


def make_pki(directory):
    """A CA and two certificates it signs (server, client), with openssl."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.pem", "-days", "2", "-subj", "/CN=test-ca", cwd=directory)
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out",
                 name + ".csr", "-subj", "/CN=" + name, cwd=directory)
        _openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", name + ".pem", "-days", "2", cwd=directory)
    return dict((n, os.path.join(directory, n)) for n in os.listdir(directory))


def test_ssl_remote_with_key_certificate_and_ca(sandbox, tmp_path):
    pki = make_pki(str(tmp_path))
    port = free_port()
    db_file = os.path.join(sandbox.dir, "ssl-nb.db")
    sandbox.run("ovsdb-tool", "create", db_file, "/usr/share/ovn/ovn-nb.ovsschema")
    sandbox.pidfiles.append(os.path.join(sandbox.dir, "ssl-nb.pid"))
    sandbox.run("ovsdb-server", db_file, "--detach", "--no-chdir",
                "--remote=pssl:%d:127.0.0.1" % port,
                "--private-key=" + pki["server.key"], "--certificate=" + pki["server.pem"],
                "--ca-cert=" + pki["ca.pem"],
                "--pidfile=%s/ssl-nb.pid" % sandbox.dir, "--unixctl=%s/ssl-nb.ctl" % sandbox.dir,
                "--log-file=%s/ssl-nb.log" % sandbox.dir)
    tls = ovsdb.TLS(pki["client.key"], pki["client.pem"], pki["ca.pem"])
    remote = "ssl:127.0.0.1:%d" % port
    with connect(remote, tls=tls, timeout=10) as db:
        plan = reconcile(LogicalSwitch(), [{"name": "over-ssl"}], "merged", db)
    assert plan.changed
    out = sandbox.run("ovsdb-client", "--private-key=" + pki["client.key"],
                      "--certificate=" + pki["client.pem"], "--ca-cert=" + pki["ca.pem"],
                      "-f", "json", "dump", remote, "OVN_Northbound", "Logical_Switch", "name")
    assert "over-ssl" in out


def _tls_server(sandbox, tag, schema, pki, port, create=True):
    """An ovsdb-server of its own on ``port`` (TLS, with ``pki``'s CA) and a
    unix socket; started again on the same file when ``create`` is false."""
    db_file, unix = os.path.join(sandbox.dir, tag + ".db"), os.path.join(sandbox.dir, tag + ".sock")
    if create:
        sandbox.run("ovsdb-tool", "create", db_file, schema)
        sandbox.pidfiles.append(os.path.join(sandbox.dir, tag + ".pid"))
    sandbox.run("ovsdb-server", db_file, "--detach", "--no-chdir", "--remote=pssl:%d:127.0.0.1" % port,
                "--remote=punix:" + unix, "--private-key=" + pki["server.key"],
                "--certificate=" + pki["server.pem"], "--ca-cert=" + pki["ca.pem"],
                "--pidfile=%s/%s.pid" % (sandbox.dir, tag), "--log-file=%s/%s.log" % (sandbox.dir, tag))
    return "unix:" + unix


def test_two_remotes_of_two_cas_each_reconnect_with_their_own_files(sandbox, tmp_path):
    """The watcher holds the NB (the northbound CA's files) and the SB (the
    southbound CA's) in one process. python-ovs keeps one set of TLS files
    for the process and reads it at every reconnect: each remote must
    reconnect with its own. The NB's server is restarted after the SB
    connected; a switch added after the restart is seen only if the client
    came back."""
    pkis = {}
    for side in ("nb", "sb"):
        os.makedirs(str(tmp_path / side))
        pkis[side] = make_pki(str(tmp_path / side))
    ports = {"nb": free_port(), "sb": free_port()}
    unix = _tls_server(sandbox, "two-nb", "/usr/share/ovn/ovn-nb.ovsschema", pkis["nb"], ports["nb"])
    _tls_server(sandbox, "two-sb", "/usr/share/ovn/ovn-sb.ovsschema", pkis["sb"], ports["sb"])
    tls = dict((side, ovsdb.TLS(p["client.key"], p["client.pem"], p["ca.pem"])) for side, p in pkis.items())
    with ovsdb.Database("ssl:127.0.0.1:%d" % ports["nb"], ovsdb.NB_SCHEMA, ("Logical_Switch",), timeout=10,
                        tls=tls["nb"]) as nb:
        with ovsdb.Database("ssl:127.0.0.1:%d" % ports["sb"], ovsdb.SB_SCHEMA, ("Chassis",), timeout=10,
                            tls=tls["sb"]):
            with open(os.path.join(sandbox.dir, "two-nb.pid")) as handle:
                pid = int(handle.read())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while os.path.exists("/proc/%d" % pid) and time.monotonic() < deadline:
                time.sleep(0.05)        # the old server's exit, before the new one takes the port
            _tls_server(sandbox, "two-nb", None, pkis["nb"], ports["nb"], create=False)
            sandbox.run("ovn-nbctl", "--db=" + unix, "ls-add", "after-restart")
            seen = nb.wait_for(lambda idl: any(r.name == "after-restart"
                                               for r in idl.tables["Logical_Switch"].rows.values()), 30)
            with open(os.path.join(sandbox.dir, "two-nb.log")) as handle:
                log = handle.read()[-1500:]
            assert seen, "the NB client never came back once the SB connected; its server's log:\n" + log


def test_ssl_remote_needs_all_three_files(tmp_path):
    with pytest.raises(ValidationError) as err:
        connect("ssl:127.0.0.1:6641", tls=ovsdb.TLS(private_key=str(tmp_path / "k")))
    text = str(err.value)
    assert "certificate" in text and "ca_cert" in text and "private_key" in text


def test_a_thousand_ports_in_one_transaction(sandbox, monkeypatch):
    sandbox.nbctl("ls-add", "big", "--", "set", "Logical_Switch", "big",
                  "other_config:subnet=10.200.0.0/16")
    config = [{"name": "bp%d" % i, "switch": "big", "addresses": ["dynamic"]} for i in range(1000)]
    calls = []
    with connect(sandbox.nb_db, *LogicalSwitchPort.tables) as db:
        real = db.transact
        monkeypatch.setattr(db, "transact", lambda f: calls.append(1) or real(f))
        plan = reconcile(LogicalSwitchPort(), config, "merged", db)
    assert len(calls) == 1 and len(plan.changes) == 1000
    sandbox.nbctl("--wait=sb", "sync")
    ports = sandbox.rows("nb", "Logical_Switch_Port")
    assert len(ports) == 1000
    dynamic = [p["dynamic_addresses"] for p in ports]
    assert all(d for d in dynamic) and len(set(dynamic)) == 1000, "ovn-northd assigned each"
    with connect(sandbox.nb_db, *LogicalSwitchPort.tables) as db:
        again = reconcile(LogicalSwitchPort(), config, "merged", db)
    assert not again.changed


def test_rendered_operations_apply_with_ovsdb_client(sandbox):
    """What state=rendered returns is a real RFC 7047 transaction."""
    sandbox.nbctl("ls-add", "sw")
    sandbox.nbctl("lr-add", "lr")
    configs = [
        (LogicalSwitchPort(), [
            {"name": "a", "switch": "sw", "addresses": ["0a:00:00:00:00:01 10.0.0.5"],
             "options": {"k": "v"}}]),
        (LogicalRouterPort(), [
            {"name": "rp", "router": "lr", "mac": "0a:00:00:00:00:02", "networks": ["10.0.0.1/24"],
             "gateway_chassis": [{"chassis_name": "c1", "priority": 3}]}]),
    ]
    for resource, config in configs:
        with connect(sandbox.nb_db, *resource.tables) as db:
            plan = reconcile(resource, config, "rendered", db)
            expected = plan.after
        ops = render_ops(plan.ops)
        out = json.loads(sandbox.run("ovsdb-client", "transact", sandbox.nb_db,
                                     json.dumps(["OVN_Northbound"] + ops)))
        assert all("error" not in r for r in out), out
        with connect(sandbox.nb_db, *resource.tables) as db:
            gathered = reconcile(resource, config, "gathered", db).gathered
            again = reconcile(resource, config, "merged", db, check_mode=True)
        assert gathered == expected
        assert not again.changed, again.operations()


def test_update_of_an_existing_map_key_is_a_delete_then_insert(sandbox):
    sandbox.nbctl("ls-add", "m", "--", "set", "Logical_Switch", "m", "external_ids:a=1")
    with connect(sandbox.nb_db) as db:
        plan = reconcile(LogicalSwitch(), [{"name": "m", "external_ids": {"a": "2"}}], "rendered", db)
    mutations = [m for op in render_ops(plan.ops) for m in op.get("mutations", [])]
    assert ["external_ids", "delete", ["set", ["a"]]] in mutations
    assert ["external_ids", "insert", ["map", [["a", "2"], ["ovn4nfv-owner", "ovn4nfv.k8s"]]]] \
        in mutations


@contextlib.contextmanager
def bare_nb(directory):
    """An NB ovsdb-server with an empty database: no ovn-northd has made its
    NB_Global row yet, as just after a systemd unit started the server."""
    db = os.path.join(directory, "bare-nb.db")
    subprocess.run(["ovsdb-tool", "create", db, "/usr/share/ovn/ovn-nb.ovsschema"], check=True, timeout=30)
    sock = os.path.join(directory, "bare-nb.sock")
    server = subprocess.Popen(["ovsdb-server", db, "--remote=punix:" + sock, "--no-chdir",
                               "--unixctl=" + os.path.join(directory, "bare-nb.ctl")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            assert server.poll() is None and time.monotonic() < deadline, "ovsdb-server did not start"
            time.sleep(0.02)
        yield "unix:" + sock
    finally:
        server.terminate()
        server.wait(10)


def test_a_listener_waits_for_northd_to_make_nb_global(tmp_path):
    """The NB_Global row comes a moment after the server answers (northd
    makes it): the task waits for it, woken by the server, and then
    writes; with no northd at all it says what is missing."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.listeners import NBConnection
    with bare_nb(str(tmp_path)) as remote:
        with ovsdb.Database(remote, ovsdb.NB_SCHEMA, NBConnection.tables, timeout=1) as db:
            with pytest.raises(ValidationError) as err:
                reconcile(NBConnection(), [{"target": "pssl:6641:127.0.0.1"}], "merged", db)
        assert "0 NB_Global rows" in str(err.value)
        outcome, waiting = {}, threading.Event()
        with ovsdb.Database(remote, ovsdb.NB_SCHEMA, NBConnection.tables, timeout=20) as db:
            wait_for = db.wait_for

            def observed(predicate, timeout):       # the task is waiting: now northd may come
                waiting.set()
                return wait_for(predicate, timeout)
            db.wait_for = observed
            task = threading.Thread(target=lambda: outcome.update(plan=reconcile(
                NBConnection(), [{"target": "pssl:6641:127.0.0.1"}], "merged", db)))
            task.start()
            try:
                assert waiting.wait(10), "the task did not wait for NB_Global"
                # what northd does when it connects, as ovn-nbctl init does it
                subprocess.run(["ovn-nbctl", "--db=" + remote, "init"], check=True, timeout=30)
            finally:
                task.join(30)
        assert outcome["plan"].changed
        listeners = subprocess.run(["ovn-nbctl", "--db=" + remote, "get-connection"], check=True,
                                   stdout=subprocess.PIPE, universal_newlines=True, timeout=30).stdout
        assert listeners.split() == ["pssl:6641:127.0.0.1"]


def test_a_reply_taken_in_by_the_connection_thread_wakes_its_caller(sandbox, monkeypatch):
    """Transactions run in their callers' threads (ovsdb/transaction.py)
    while the connection's thread takes the server's updates in. Here the
    caller is made late on purpose: after it lets the lock go, it waits
    until the connection's thread has taken the server's answer in, and
    only then sleeps until the socket has something. Nothing more comes,
    so the caller must be woken another way, or it sleeps until its
    timeout (600 s here: a caller still waiting after a minute was not
    woken). The NB, read from outside, holds every switch."""
    outcome = []
    with connect(sandbox.nb_db, "Logical_Switch", timeout=600) as db:
        idl, ran = db.idl, threading.Condition()
        run = idl.run

        def counted_run():
            changed = run()
            with ran:
                ran.notify_all()
            return changed
        monkeypatch.setattr(idl, "run", counted_run)

        class LatePoller(poller.Poller):
            def block(self):
                # python-ovs forgets a transaction once its answer is in
                with ran:
                    ran.wait_for(lambda: not idl._outstanding_txns, 5)
                super(LatePoller, self).block()

        monkeypatch.setattr(transaction, "poller", types.SimpleNamespace(Poller=LatePoller, POLLIN=poller.POLLIN))

        def commit():
            try:
                for index in range(10):
                    name = "late%d" % index
                    db.transact(lambda idl, txn: setattr(txn.insert(idl.tables["Logical_Switch"]), "name", name))
                outcome.append("done")
            except Exception as exc:  # noqa: reported below
                outcome.append(exc)

        thread = threading.Thread(target=commit, daemon=True)
        thread.start()
        thread.join(60)
        assert not thread.is_alive(), "a commit was not woken by its answer"
    assert outcome == ["done"]
    names = set(row["name"] for row in sandbox.rows("nb", "Logical_Switch"))
    assert names == set("late%d" % i for i in range(10))


def test_names_are_looked_up_in_a_hash_again_after_the_server_restarts(sandbox):
    """python-ovs makes a new set of rows, without the name index, when a
    restarted server sends the whole database again. The next lookup makes
    the index again from the rows (it would be a scan of every row for
    every name after that), and it finds what the NB holds, read from
    outside, switches of the same name included."""
    sandbox.nbctl("ls-add", "a")
    with connect(sandbox.nb_db, "Logical_Switch") as db:
        table = db.idl.tables["Logical_Switch"]
        before = table.rows
        sandbox.restart_db("ovnnb_db")
        assert db.wait_for(lambda idl: idl.tables["Logical_Switch"].rows is not before and
                           len(idl.tables["Logical_Switch"].rows) == 1, 30), "the IDL did not dump the NB again"
        assert "name" not in table.rows.indexes, "python-ovs kept its indexes: this test no longer tests anything"
        sandbox.nbctl("ls-add", "b", "--", "--may-exist", "ls-add", "c")
        sandbox.nbctl("create", "Logical_Switch", "name=c")
        assert db.wait_for(lambda idl: len(idl.tables["Logical_Switch"].rows) == 4, 30)
        found = db.read(lambda idl: dict((name, View(idl).lookup("Logical_Switch", name)) for name in "abcd"))
        assert isinstance(table.rows.indexes.get("name"), NameIndex)
    held = dict((row["name"], []) for row in sandbox.rows("nb", "Logical_Switch"))
    for row in sandbox.rows("nb", "Logical_Switch"):
        held[row["name"]].append(row["_uuid"])
    assert str(found["a"].uuid) == held["a"][0] and str(found["b"].uuid) == held["b"][0]
    assert sorted(str(row.uuid) for row in found["c"]) == sorted(held["c"]) and len(held["c"]) == 2
    assert found["d"] is None


def test_cell_reads_every_column_as_python_ovs_does_without_its_getattr(sandbox, monkeypatch):
    """``view.cell`` reads a row's columns from the data the server sent,
    those the server left at their defaults included (python-ovs 3.1 keeps
    them out of the row's data until they are asked for by index), and
    reads what python-ovs's own getattr reads."""
    sandbox.nbctl("ls-add", "s", "--", "lsp-add", "s", "p", "--",
                  "lsp-set-addresses", "p", "0a:00:00:00:00:01 10.0.0.5", "--",
                  "set", "Logical_Switch_Port", "p", "external_ids:k=v")
    with connect(sandbox.nb_db, "Logical_Switch", "Logical_Switch_Port") as db:
        assert db.wait_for(lambda idl: View(idl).lookup("Logical_Switch_Port", "p") is not None, 10)
        port = db.read(lambda idl: View(idl).lookup("Logical_Switch_Port", "p"))
        columns = sorted(db.idl.tables["Logical_Switch_Port"].columns)
        left_out = [c for c in columns if not dict.__contains__(port._data, c)]
        assert "dynamic_addresses" in left_out, "python-ovs holds defaults: this test no longer tests anything"
        expected = db.read(lambda _idl: dict((c, getattr(port, c)) for c in columns))
        row_class = type(port)
        monkeypatch.setattr(row_class, "__getattr__", lambda self, name: pytest.fail("python-ovs read " + name))
        got = db.read(lambda _idl: dict((c, cell(port, c)) for c in columns))
    assert got == expected
    assert got["external_ids"] == {"k": "v"} and got["dynamic_addresses"] == []


def _mappings(sandbox):
    return sandbox.vsctl("get", "open_vswitch", ".", "external_ids:ovn-bridge-mappings").strip().strip('"')


def test_a_bridge_mapping_another_writer_adds_meanwhile_survives(sandbox):
    """ovn-bridge-mappings is one string, read, changed and written back
    (nmstate #2395, kube-ovn #3074). A writer that changes it between the
    plan and the commit makes the commit fail ("try again", the plan's
    verify); the plan made anew keeps that writer's mapping. The same stale
    plan without its verify commits and loses it."""
    sandbox.vsctl("set", "open_vswitch", ".", "external_ids:ovn-bridge-mappings=foreign:br-f")
    resource = Chassis()
    items = validate_config(resource, [{"owned_bridge_mappings": {"physnet-a": "br-a"}}], "merged")

    def attempt(keep_verify, meanwhile):
        calls = []

        def transaction_(idl, txn):
            planned = plan(resource, items, "merged", View(idl))
            if not calls:
                # another writer, committed before this transaction is sent
                sandbox.vsctl("set", "open_vswitch", ".", "external_ids:ovn-bridge-mappings=" + meanwhile)
            calls.append(planned)
            ops = planned.ops if keep_verify else [op for op in planned.ops if op.op != "verify"]
            apply_ops(ops, idl, txn)

        with ovsdb.Database(sandbox.ovs_db, ovsdb.OVS_SCHEMA, resource.tables) as db:
            db.transact(transaction_)
        return calls

    calls = attempt(True, "foreign:br-f,other:br-o")
    assert any(op.op == "verify" for op in calls[0].ops)
    assert len(calls) == 2, "the stale plan's commit was refused and the plan made again"
    assert _mappings(sandbox) == "foreign:br-f,other:br-o,physnet-a:br-a"

    sandbox.vsctl("set", "open_vswitch", ".", "external_ids:ovn-bridge-mappings=foreign:br-f")
    sandbox.vsctl("remove", "open_vswitch", ".", "external_ids", "ovn4nfv-physnets")
    calls = attempt(False, "foreign:br-f,third:br-t")
    assert len(calls) == 1
    assert "third:br-t" not in _mappings(sandbox), "without the verify, the other writer's mapping is lost"
