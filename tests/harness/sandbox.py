"""Real OVS and OVN daemons in a temporary run directory, for tests and
benchmarks.

Starts, as the system would run them but confined to one directory:

* ``ovsdb-server`` with the Open_vSwitch schema, and ``ovs-vswitchd`` on
  it (dummy datapath by default, so that no kernel device is created);
* ``ovsdb-server`` for the OVN northbound and southbound schemas, and
  ``ovn-northd`` between them.

Nothing here touches the system's own daemons or sockets. Every daemon is
stopped by :meth:`Sandbox.stop`, which the fixtures call even when a test
fails.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
NB_SCHEMA = "/usr/share/ovn/ovn-nb.ovsschema"
SB_SCHEMA = "/usr/share/ovn/ovn-sb.ovsschema"


_STABLE_OVS_COLUMNS = {
    "Open_vSwitch": "_uuid,bridges,external_ids,other_config,manager_options,ssl",
    "Bridge": "_uuid,name,datapath_type,fail_mode,protocols,other_config,external_ids,ports,"
              "controller,mirrors",
    "Port": "_uuid,name,interfaces,tag,trunks,vlan_mode,external_ids,other_config",
    "Interface": "_uuid,name,type,options,external_ids,mtu_request,other_config",
}


def stable_dump(text):
    """A dump without the NB_Global table, whose sync counters
    (``nb_cfg``, ``sb_cfg``) every ``ovn-nbctl --wait`` bumps; no module
    of the product writes that table."""
    blocks = text.split("\n\n")
    return "\n\n".join(b for b in blocks if not b.lstrip("\n").startswith("NB_Global table"))


def rows_from_json(text):
    """Rows of one table from ``ovsdb-client -f json dump`` output."""
    out = json.loads(text)
    return [dict(zip(out["headings"], (decode(v) for v in row))) for row in out["data"]]


def decode(value):
    """One value of ``ovsdb-client -f json`` output as plain Python."""
    if isinstance(value, list) and len(value) == 2 and value[0] in ("set", "map", "uuid"):
        kind, inner = value
        if kind == "uuid":
            return inner
        if kind == "set":
            return [decode(v) for v in inner]
        return dict((decode(k), decode(v)) for k, v in inner)
    return value


def alive(pid):
    """True while ``pid`` runs. A zombie has exited: where PID 1 is slow to
    reap, waiting for it to vanish would only waste time."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _signal(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def terminate(pids, grace=10):
    """SIGTERM each of ``pids``, wait (at most ``grace`` s) for them to
    end, and SIGKILL those still running."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    for pid in pids:
        if alive(pid):
            _signal(pid, signal.SIGKILL)


class Sandbox:
    """A directory holding running daemons, and their remotes."""

    def __init__(self, ovs=True, ovn=True, vswitchd=True, dummy=True, base=None, files=None, northd=True):
        """``files``: ``{"conf" | "ovnnb_db" | "ovnsb_db": a database file}``
        to serve instead of a new database, as a node's or a central's
        files are found after an upgrade of the packages: copied, and
        converted to the installed schema first if it differs
        (:attr:`converted` names those that were). ``northd``: whether
        ovn-northd runs between the NB and the SB."""
        self.dir = tempfile.mkdtemp(prefix="ovn4nfv-sandbox-", dir=base)
        self.files = dict(files or {})
        self.converted = []
        self.env = dict(os.environ, OVS_RUNDIR=self.dir, OVS_LOGDIR=self.dir,
                        OVS_DBDIR=self.dir, OVN_RUNDIR=self.dir, OVN_LOGDIR=self.dir,
                        OVN_DBDIR=self.dir)
        self.pidfiles = []
        self.ovs_db = self.nb_db = self.sb_db = None
        try:
            if ovs:
                self.ovs_db = self._db_server("conf", OVS_SCHEMA)
                if "conf" not in self.files:
                    self.run("ovs-vsctl", "--db=" + self.ovs_db, "--no-wait", "init")
                if vswitchd:
                    args = ["ovs-vswitchd", self.ovs_db, "--detach", "--no-chdir",
                            "--pidfile=%s/ovs-vswitchd.pid" % self.dir,
                            "--unixctl=%s/ovs-vswitchd.ctl" % self.dir,
                            "--log-file=%s/ovs-vswitchd.log" % self.dir]
                    if dummy:
                        args += ["--enable-dummy=override", "--disable-system"]
                    self._daemon(args, "ovs-vswitchd")
            if ovn:
                self.nb_db = self._db_server("ovnnb_db", NB_SCHEMA)
                self.sb_db = self._db_server("ovnsb_db", SB_SCHEMA)
                if "ovnnb_db" not in self.files:
                    self.run("ovn-nbctl", "--db=" + self.nb_db, "init")
                if "ovnsb_db" not in self.files:
                    self.run("ovn-sbctl", "--db=" + self.sb_db, "init")
            if ovn and northd:
                self._daemon(["ovn-northd", "--detach", "--no-chdir",
                              "--ovnnb-db=" + self.nb_db, "--ovnsb-db=" + self.sb_db,
                              "--pidfile=%s/ovn-northd.pid" % self.dir,
                              "--unixctl=%s/ovn-northd.ctl" % self.dir,
                              "--log-file=%s/ovn-northd.log" % self.dir], "ovn-northd")
        except Exception:
            self.stop()
            raise

    def _db_server(self, name, schema):
        path = os.path.join(self.dir, name + ".db")
        if name in self.files:
            shutil.copyfile(self.files[name], path)
            if self.run("ovsdb-tool", "needs-conversion", path, schema).strip() == "yes":
                self.run("ovsdb-tool", "convert", path, schema)
                self.converted.append(name)
        else:
            self.run("ovsdb-tool", "create", path, schema)
        sock = os.path.join(self.dir, name + ".sock")
        self._daemon(["ovsdb-server", path, "--detach", "--no-chdir",
                      "--remote=punix:" + sock,
                      "--pidfile=%s/%s.pid" % (self.dir, name),
                      "--unixctl=%s/%s.ctl" % (self.dir, name),
                      "--log-file=%s/%s.log" % (self.dir, name)], name)
        return "unix:" + sock

    def db_file(self, name):
        """The file the database server ``name`` (``conf``, ``ovnnb_db``,
        ``ovnsb_db``) keeps."""
        return os.path.join(self.dir, name + ".db")

    def restart_db(self, name):
        """Stop one database server (``ovnnb_db``, ``ovnsb_db``, ``conf``)
        and start it again on the same file and socket, as a restart of the
        service would. Returns once it answers again."""
        pidfile = os.path.join(self.dir, name + ".pid")
        with open(pidfile) as handle:
            pid = int(handle.read().strip())
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        path = os.path.join(self.dir, name + ".db")
        self.run("ovsdb-server", path, "--detach", "--no-chdir",
                 "--remote=punix:" + os.path.join(self.dir, name + ".sock"),
                 "--pidfile=" + pidfile, "--unixctl=%s/%s.ctl" % (self.dir, name),
                 "--log-file=%s/%s.log" % (self.dir, name))

    def _daemon(self, args, name):
        self.pidfiles.append(os.path.join(self.dir, name + ".pid"))
        self.run(*args)

    def run(self, *args, **kwargs):
        """Run a command with the sandbox's environment; return its stdout."""
        result = subprocess.run(list(args), env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True,
                                timeout=kwargs.pop("timeout", 60),
                                check=kwargs.pop("check", True))
        return result.stdout

    def nbctl(self, *args):
        return self.run("ovn-nbctl", "--db=" + self.nb_db, *args)

    def sbctl(self, *args):
        return self.run("ovn-sbctl", "--db=" + self.sb_db, *args)

    def vsctl(self, *args):
        return self.run("ovs-vsctl", "--db=" + self.ovs_db, "--no-wait", *args)

    def dump_commands(self, which):
        """The ``ovsdb-client dump`` commands whose joined output is
        :meth:`dump`. Columns that the daemons rewrite as time passes
        (statistics, status, counters) are left out of the OVS dump."""
        remote = {"ovs": self.ovs_db, "nb": self.nb_db, "sb": self.sb_db}[which]
        if which == "sb":
            # SB_Global.nb_cfg moves on with every sync; the rest is stable
            return [["ovsdb-client", "dump", remote, "OVN_Southbound", "SB_Global",
                     "connections", "options", "ssl", "external_ids", "ipsec"],
                    ["ovsdb-client", "dump", remote, "OVN_Southbound", "Connection",
                     "target", "role", "read_only", "inactivity_probe", "max_backoff",
                     "other_config", "external_ids"]]
        if which != "ovs":
            return [["ovsdb-client", "dump", remote]]
        return [["ovsdb-client", "dump", remote, "Open_vSwitch", table] + columns.split(",")
                for table, columns in _STABLE_OVS_COLUMNS.items()]

    def dump(self, which):
        """A byte-exact dump of a database, for before/after comparisons."""
        return stable_dump("".join(self.run(*cmd) for cmd in self.dump_commands(which)))

    def rows(self, which, table):
        """A table's rows, read with ``ovsdb-client``: the view of the
        database the tests check the product against. Maps become dicts,
        sets lists, references uuid strings."""
        remote = {"ovs": self.ovs_db, "nb": self.nb_db, "sb": self.sb_db}[which]
        schema = {"ovs": "Open_vSwitch", "nb": "OVN_Northbound", "sb": "OVN_Southbound"}[which]
        return rows_from_json(self.run("ovsdb-client", "-f", "json", "dump", remote, schema, table))

    def stop(self):
        """Stop every daemon this sandbox started and remove its directory."""
        pids = []
        for pidfile in reversed(self.pidfiles):
            try:
                with open(pidfile) as handle:
                    pids.append(int(handle.read().strip()))
            except (OSError, ValueError):
                continue
        terminate(pids)
        self.pidfiles = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()
