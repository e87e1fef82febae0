# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One OVSDB connection: the local OVS database or the OVN northbound.

A :class:`Database` fetches the schema from the server within the timeout,
monitors only the tables its caller names, keeps the IDL running in
ovsdbapp's connection thread, and offers two things: :meth:`Database.read`
(a consistent look at the cache) and :meth:`Database.transact` (one
transaction, committed in the caller's thread, built by a function that
runs against the current cache and again when the server answers ``try
again``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import logging
import os
import re
import threading
import time

from ..common.errors import DatabaseUnreachable, Fenced, TransactionFailed, ValidationError
from .transaction import FunctionCommand, RunSignal, Transaction

try:
    from ovs import jsonrpc, poller, stream
    from ovs.db import idl as ovs_idl
    from ovsdbapp import exceptions as ovsdbapp_exceptions
    from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection
    from ovsdbapp.backend.ovs_idl import transaction as ovsdbapp_transaction
    HAS_OVSDBAPP = True
    OVSDBAPP_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - exercised by ansible-test
    HAS_OVSDBAPP = False
    OVSDBAPP_IMPORT_ERROR = exc

OVS_SCHEMA = "Open_vSwitch"
NB_SCHEMA = "OVN_Northbound"
SB_SCHEMA = "OVN_Southbound"

DEFAULT_OVS_DB = "unix:/var/run/openvswitch/db.sock"
DEFAULT_NB_DB = "unix:/var/run/ovn/ovnnb_db.sock"
DEFAULT_SB_DB = "unix:/var/run/ovn/ovnsb_db.sock"
DEFAULT_TIMEOUT = 10

_REMOTE_RE = re.compile(
    r"^(?:unix:(?P<path>/\S+)"
    r"|(?P<proto>tcp|ssl):(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(?P<port>\d{1,5}))\Z")


LOG = logging.getLogger("ovn4nfv.ovsdb")


def parse_remote(remote, field="db"):
    """Split a remote string (``unix:PATH``, ``tcp:HOST:PORT``, ``ssl:HOST:PORT``,
    or several of them joined by commas, as for a RAFT cluster) into parts.

    Raises :class:`ValidationError` naming the field and the value.
    """
    if not remote or not isinstance(remote, str):
        raise ValidationError("%s: %r is not an OVSDB remote" % (field, remote))
    parts = [part.strip() for part in remote.split(",")]
    for part in parts:
        match = _REMOTE_RE.match(part)
        if not match:
            raise ValidationError(
                "%s: %r is not an OVSDB remote; use unix:PATH, tcp:HOST:PORT or "
                "ssl:HOST:PORT, comma-separated for a cluster" % (field, part))
        if match.group("port") and not 0 < int(match.group("port")) < 65536:
            raise ValidationError("%s: %r has a port outside 1-65535" % (field, part))
    return parts


class TLS:
    """Private key, certificate and CA certificate for ``ssl:`` remotes."""

    def __init__(self, private_key=None, certificate=None, ca_cert=None):
        self.private_key = private_key
        self.certificate = certificate
        self.ca_cert = ca_cert

    def validate(self, parts):
        if not any(part.startswith("ssl:") for part in parts):
            return
        problems = []
        for field in ("private_key", "certificate", "ca_cert"):
            path = getattr(self, field)
            if not path:
                problems.append("%s: an ssl: remote needs %s, and none was given" % (field, field))
            elif not os.access(path, os.R_OK):
                problems.append("%s: %r is not a readable file" % (field, path))
        if problems:
            raise ValidationError(problems)

    def apply(self, parts=()):
        """Make these the files of each ``ssl:`` remote of ``parts``, and
        the process's default. python-ovs keeps one set of TLS files for the
        whole process (on its Stream class) and reads it at every connect
        and reconnect: a daemon that talks to the NB and the SB, each with
        its own CA, would reconnect to one with the other's files. Each
        remote's own are kept here and put in place for its connect alone
        (:class:`_RemoteTLSStream`)."""
        files = (self.private_key, self.certificate, self.ca_cert)
        with _TLS_LOCK:
            for part in parts:
                if part.startswith("ssl:") and all(files):
                    _TLS_BY_REMOTE[part[len("ssl:"):]] = files
            _use_files(files)
        _install_remote_tls()


_TLS_LOCK = threading.Lock()
_TLS_BY_REMOTE = {}     # "host:port" -> (private key, certificate, CA) for its connects


def _use_files(files):
    private_key, certificate, ca_cert = files
    if private_key:
        stream.Stream.ssl_set_private_key_file(private_key)
    if certificate:
        stream.Stream.ssl_set_certificate_file(certificate)
    if ca_cert:
        stream.Stream.ssl_set_ca_cert_file(ca_cert)


def _install_remote_tls():
    if HAS_OVSDBAPP and stream.Stream._SOCKET_METHODS.get("ssl:") not in (None, _RemoteTLSStream):
        stream.Stream.register_method("ssl", _RemoteTLSStream)


class _RemoteTLSStream(stream.SSLStream if HAS_OVSDBAPP and hasattr(stream, "SSLStream") else object):
    """python-ovs's TLS stream, each connect made with its remote's files
    (:meth:`TLS.apply`): the SSL context is built from the process-wide
    files inside ``_open``, so they are swapped in for that call alone,
    under a lock every TLS connect of the process takes."""

    @staticmethod
    def _open(suffix, dscp):
        with _TLS_LOCK:
            files = _TLS_BY_REMOTE.get(suffix)
            if files is None:
                return stream.SSLStream._open(suffix, dscp)
            saved = (stream.Stream._SSL_private_key_file, stream.Stream._SSL_certificate_file,
                     stream.Stream._SSL_ca_cert_file)
            _use_files(files)
            try:
                return stream.SSLStream._open(suffix, dscp)
            finally:
                (stream.Stream._SSL_private_key_file, stream.Stream._SSL_certificate_file,
                 stream.Stream._SSL_ca_cert_file) = saved


def _block(waiter, deadline):
    """Wait on a poller primed by ``waiter`` until it wakes or the deadline."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return False
    ovs_poller = poller.Poller()
    waiter(ovs_poller)
    ovs_poller.timer_wait(int(remaining * 1000) + 1)
    ovs_poller.block()
    return True


class _Session:
    """One JSON-RPC connection to one remote; every wait ends by
    ``deadline`` (``OSError`` with ``ETIMEDOUT``)."""

    def __init__(self, remote, deadline):
        self.deadline = deadline
        err, strm = stream.Stream.open(remote)
        if err:
            raise OSError(err, os.strerror(err))
        try:
            while True:
                err = strm.connect()
                if err == 0:
                    break
                if err != errno.EAGAIN:
                    raise OSError(err, os.strerror(err))

                def wait_connect(p):
                    strm.run_wait(p)
                    strm.connect_wait(p)
                if not _block(wait_connect, deadline):
                    raise OSError(errno.ETIMEDOUT, "timed out connecting")
        except BaseException:
            strm.close()
            raise
        self.rpc = jsonrpc.Connection(strm)

    def send(self, method, params):
        """Send a request; its id."""
        request = jsonrpc.Message.create_request(method, params)
        err = self.rpc.send(request)
        if err:
            raise OSError(err, os.strerror(err))
        return request.id

    def receive(self):
        """The next reply or notification (echo requests are answered)."""
        while True:
            self.rpc.run()
            err, msg = self.rpc.recv()
            if msg is not None:
                if msg.type == jsonrpc.Message.T_REQUEST and msg.method == "echo":
                    self.rpc.send(jsonrpc.Message.create_reply(msg.params, msg.id))
                    continue
                return msg
            if err and err != errno.EAGAIN:
                raise OSError(err, os.strerror(err) if err > 0 else "connection closed")

            def wait_reply(p):
                self.rpc.wait(p)
                self.rpc.recv_wait(p)
            if not _block(wait_reply, self.deadline):
                raise OSError(errno.ETIMEDOUT, "timed out waiting for the server")

    def call(self, method, params):
        """Send a request and return its result; notifications that come
        first are left out."""
        request_id = self.send(method, params)
        while True:
            msg = self.receive()
            if msg.id == request_id:
                if msg.error:
                    raise OSError(errno.EPROTO, "server answered %s" % (msg.error,))
                return msg.result

    def close(self):
        self.rpc.close()


def _sessions(parts, deadline):
    """``(remote part, session or the reason it did not connect)`` for each
    of ``parts`` in turn, each opened within an equal share of the time
    left, so that one that went away (a RAFT member whose host is down
    answers nothing) cannot use up the time of those after it. The caller
    closes each session it is given."""
    for index, part in enumerate(parts):
        share = (deadline - time.monotonic()) / (len(parts) - index)
        try:
            yield part, _Session(part, time.monotonic() + share)
        except OSError as exc:
            yield part, exc.strerror or str(exc)


def _first_answer(parts, deadline, schema_name, remote, work):
    """``work(session)`` on the first remote of ``parts`` that answers: a
    remote that refuses, or fails while it works, is left for the next
    (each has its share of the time, :func:`_sessions`; ``work`` may extend
    its session's deadline once it is talking). Raises
    :class:`DatabaseUnreachable` naming each remote's failure when none
    answered."""
    failures = []
    for part, session in _sessions(parts, deadline):
        if isinstance(session, str):
            failures.append("%s: %s" % (part, session))
            continue
        try:
            return work(session)
        except OSError as exc:
            failures.append("%s: %s" % (part, exc.strerror or exc))
        finally:
            session.close()
    raise DatabaseUnreachable(
        "cannot reach the %s database at %s: %s" % (schema_name, remote, "; ".join(failures)))


def _plain(value):
    """A value from the OVSDB wire format: a set as a list, a map as a
    dict, a UUID as its string, an atom as it is."""
    if isinstance(value, list) and len(value) == 2 and value[0] in ("set", "map", "uuid", "named-uuid"):
        if value[0] == "set":
            return [_plain(v) for v in value[1]]
        if value[0] == "map":
            return dict((_plain(k), _plain(v)) for k, v in value[1])
        return value[1]
    return value


def follow_rows(remote, schema_name, table, names, columns, decide, timeout, tls=None, field="db", also=()):
    """Follow the rows of ``table`` whose ``name`` column is in ``names``
    (a key column such as ``logical_port``: ``(column, [values])``), and
    those of the ``also`` clauses (``[(column, value)]``), and no other
    rows, until ``decide(rows)`` returns something other than
    None, within ``timeout`` seconds; return it, or None when time ran
    out. ``rows`` is a list of dicts of ``columns``, read whole at each
    change: a conditional monitor of those rows only (``monitor_cond``)
    tells when they change, and a ``select`` reads them, so the cost does
    not grow with the table. The remotes of a list are tried in turn, and
    one that fails while followed is left for the next; raises
    :class:`DatabaseUnreachable` when none answers."""
    column, values = names
    parts = parse_remote(remote, field)
    tls = tls or TLS()
    tls.validate(parts)
    tls.apply(parts)
    deadline = time.monotonic() + timeout
    clauses = [(column, value) for value in values] + list(also)
    where = [[name, "==", value] for name, value in clauses]        # any of them: a monitor's clauses
    select = [schema_name] + [{"op": "select", "table": table, "where": [[name, "==", value]],
                               "columns": columns} for name, value in clauses]

    def follow(session):
        # a remote that does not answer the monitor in its share of the
        # time is left for the next; once it answered, it has all the time
        session.call("monitor_cond", [schema_name, "follow", {table: [{"columns": columns, "where": where}]}])
        session.deadline = deadline
        try:
            while True:
                rows = []
                for result in session.call("transact", select):
                    if "error" in result:
                        raise OSError(errno.EPROTO, "server answered %s" % (result,))
                    rows.extend(dict((k, _plain(v)) for k, v in row.items()) for row in result["rows"])
                verdict = decide(rows)
                if verdict is not None:
                    return verdict
                while session.receive().method != "update2":
                    pass
        except OSError as exc:
            if exc.errno == errno.ETIMEDOUT:
                return None         # the rows never satisfied decide in time: the caller's answer
            raise                   # the remote failed: the next one is followed

    return _first_answer(parts, deadline, schema_name, remote, follow)


def servers(remote, database, timeout, tls=None, field="db"):
    """``{remote part: row or the reason it did not answer}``: each server
    of ``remote`` (every member of a RAFT cluster, one by one) asked for
    its own view of ``database`` in its ``_Server`` database (``model``,
    ``connected``, ``leader``, ``cid``, ``sid``, ``index``), each within its
    share of ``timeout``."""
    parts = parse_remote(remote, field)
    tls = tls or TLS()
    tls.validate(parts)
    tls.apply(parts)
    select = ["_Server", {"op": "select", "table": "Database", "where": [["name", "==", database]],
                          "columns": ["model", "connected", "leader", "cid", "sid", "index"]}]
    out = {}
    for part, session in _sessions(parts, time.monotonic() + timeout):
        if isinstance(session, str):
            out[part] = session
            continue
        try:
            result = session.call("transact", select)[0]
            rows = result.get("rows") if isinstance(result, dict) else None
            out[part] = dict((k, _plain(v)) for k, v in rows[0].items()) if rows else "no %s here" % database
        except OSError as exc:
            out[part] = exc.strerror or str(exc)
        finally:
            session.close()
    return out


def fetch_schema(parts, schema_name, deadline, remote):
    """The schema from the first remote of ``parts`` that answers in time."""
    return _first_answer(parts, deadline, schema_name, remote,
                         lambda session: session.call("get_schema", [schema_name]))


if HAS_OVSDBAPP:
    class _Idl(ovsdbapp_connection.OvsdbIdl):
        """ovsdbapp's IDL without its per-row ``sleep(0)``, which only helps
        green threads and costs a millisecond per ten rows here, and with a
        condition that every change from the server wakes."""

        def __init__(self, *args, **kwargs):
            super(_Idl, self).__init__(*args, **kwargs)
            self.changed = threading.Condition()
            self.events = 0
            self.listeners = []
            self.ran = RunSignal()      # wakes a committing thread (transaction.py)

        def cooperative_yield(self):
            pass

        def close(self):
            super(_Idl, self).close()
            self.ran.close()

        def run(self):
            # a condition the server acknowledged wakes waiters (Database.widen), row or none
            acked = self.cond_seqno
            changed = super(_Idl, self).run()
            self.ran.signal()
            if self.cond_seqno != acked:
                with self.changed:
                    self.events += 1
                    self.changed.notify_all()
            return changed

        def notify(self, event, row, updates=None):
            super(_Idl, self).notify(event, row, updates)
            for listener in self.listeners:
                try:
                    listener(event, row)
                except Exception:  # noqa: a listener's fault must not stop the update stream
                    LOG.exception("a listener of %s failed on a %s", row._table.name, event)
            with self.changed:
                self.events += 1
                self.changed.notify_all()


class Database:
    """A live, monitored connection to one OVSDB database.

    ``tables`` names the tables to monitor; nothing else is fetched.
    ``where`` (``{table: [clause, ...]}``, any of which may match, as OVSDB's
    conditional monitoring takes them) narrows a table to the rows a caller
    needs from the first update on; ``columns`` (``{table: [column, ...]}``)
    monitors only those columns of a table. ``probe_ms`` is the inactivity
    probe: a connection whose server went silent (a host lost power sends
    no reset) is dropped after about twice that, and the IDL moves on (to
    the next RAFT member). ``fence`` (:class:`.fence.Fence`, settable later)
    makes every transaction conditional on its term. The connection is
    made in the constructor and fails within ``timeout`` seconds with
    :class:`DatabaseUnreachable`, naming the remote.
    """

    def __init__(self, remote, schema_name, tables, timeout=DEFAULT_TIMEOUT, tls=None,
                 field="db", where=None, columns=None, probe_ms=None, fence=None):
        self.remote = remote
        self.schema_name = schema_name
        self.timeout = timeout
        self.fence = fence
        columns = columns or {}
        tables = tuple(dict.fromkeys(tuple(tables) + tuple(sorted(columns))))   # each once, in order
        parts = parse_remote(remote, field)
        tls = tls or TLS()
        tls.validate(parts)
        tls.apply(parts)
        deadline = time.monotonic() + timeout
        schema = fetch_schema(parts, schema_name, deadline, remote)
        helper = ovs_idl.SchemaHelper(None, schema)
        missing = [t for t in tables if t not in schema.get("tables", {})]
        if missing:
            raise DatabaseUnreachable("the %s database at %s has no table %s" % (
                schema_name, remote, ", ".join(missing)))
        for table in tables:
            if table in columns:
                helper.register_columns(table, columns[table])
            else:
                helper.register_table(table)
        # With several remotes of a RAFT cluster, talk to the leader. With
        # one, talk to that server whatever its role: a follower forwards
        # writes to the leader, and there is no other server to move to.
        self.idl = _Idl(",".join(parts), helper, leader_only=len(parts) > 1, probe_interval=probe_ms)
        for table, condition in sorted((where or {}).items()):
            self.idl.cond_change(table, condition)     # sent with the first monitor request
        remaining = max(deadline - time.monotonic(), 0.1)
        self._connection = ovsdbapp_connection.Connection(self.idl, remaining)
        try:
            self._connection.start()
        except ovsdbapp_exceptions.TimeoutException:
            self._connection.idl.close()
            raise DatabaseUnreachable(
                "connected to the %s database at %s but it did not sync within %ss" % (
                    schema_name, remote, timeout))
        self._connection.timeout = timeout

    # ovsdbapp's Transaction reads ``api.idl`` and ``api.ovsdb_connection``.
    @property
    def ovsdb_connection(self):
        return self._connection

    @property
    def tables(self):
        return self.idl.tables

    def read(self, function):
        """Call ``function(idl)`` while the cache is held still."""
        with self._connection.lock:
            return function(self.idl)

    def transact(self, function, fenced=True):
        """Run ``function(idl, txn)`` inside one transaction and commit it.

        The function may be called more than once: ovsdbapp repeats it when
        the server says the cache was stale. Returns its last result. With a
        fence, the transaction commits only under its term (raises
        :class:`~..common.errors.Fenced`); ``fenced=False`` is for the one
        transaction that takes the term.
        """
        if self.fence is not None and fenced:
            function = self.fence.guarded(function)
        txn = Transaction(self, self._connection, timeout=self.timeout, check_error=True, log_errors=False)
        command = txn.add(FunctionCommand(self, function))
        try:
            txn.commit()
        except Fenced as exc:
            if self.fence is not None:
                self.fence.told(exc)        # the lock is let go: it may stop the process
            raise
        except ovsdbapp_exceptions.TimeoutException:
            raise TransactionFailed("the transaction on %s did not finish within %ss" % (
                self.remote, self.timeout))
        except RuntimeError as exc:
            raise TransactionFailed("%s refused the transaction: %s" % (self.remote, exc))
        return command.result

    def healthy(self):
        """Whether the connection is up and the cache follows the server
        (python-ovs's monitoring state), read without taking the lock."""
        return self.idl.state == ovs_idl.Idl.IDL_S_MONITORING and self.idl._session.is_connected()

    def narrowed(self, table):
        return table in self.idl.tables and self.idl.tables[table].condition_state.latest != [True]

    def widen(self, table, clauses):
        """Monitor the rows of ``table`` that ``clauses`` match too, and wait
        (within the timeout) until the server has sent them."""
        with self._connection.lock:
            state = self.idl.tables[table].condition_state
            wanted = [c for c in state.latest if c is not False] + list(clauses)
            self.idl.cond_change(table, wanted)
        # an empty transaction wakes the connection thread, which sends the change
        ovsdbapp_transaction.Transaction(self, self._connection, timeout=self.timeout).commit()
        if not self.wait_for(lambda idl: state.acked == wanted, self.timeout):
            raise DatabaseUnreachable("the %s database at %s did not answer a monitor change within %ss" % (
                self.schema_name, self.remote, self.timeout))

    def add_listener(self, listener):
        """Call ``listener(event, row)`` for every row the server creates,
        updates or deletes (``event`` is ``create``, ``update`` or
        ``delete``), in the thread that takes the update in (the connection's,
        or one committing), with the cache held still: never wait there."""
        with self._connection.lock:
            self.idl.listeners.append(listener)

    def wait_for(self, predicate, timeout):
        """Block until ``predicate(idl)`` is true, woken by the server's
        updates (no polling); return its last value, falsy on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            # Never hold the condition while taking the connection lock: the
            # IDL thread takes them in the other order.
            with self.idl.changed:
                seen = self.idl.events
            value = self.read(predicate)
            remaining = deadline - time.monotonic()
            if value or remaining <= 0:
                return value
            with self.idl.changed:
                if self.idl.events == seen:
                    self.idl.changed.wait(remaining)

    def close(self):
        self._connection.stop(timeout=self.timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
