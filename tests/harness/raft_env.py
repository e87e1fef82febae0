"""A clustered (RAFT) OVN northbound of real ovsdb-server processes on
loopback, and a standalone one beside it: for the tests and benchmarks
that need a central of several members without a lab."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile

from tests.harness.sandbox import terminate

SCHEMA = "/usr/share/ovn/ovn-nb.ovsschema"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(*argv):
    return subprocess.run(argv, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60).stdout


class Northbound:
    """``members`` ovsdb-server processes holding one northbound: a RAFT
    cluster over TCP on loopback when more than one (``election_timer``
    in ms, as ovn-ctl's ``--db-nb-election-timer`` sets it at creation),
    a standalone database when one. ``remotes``: each member's unix
    socket. Everything is stopped and removed by :meth:`close`."""

    def __init__(self, members=3, election_timer=None, base=None):
        self.dir = tempfile.mkdtemp(prefix="ovn4nfv-nb-", dir=base)
        self.pids = []
        try:
            db = [os.path.join(self.dir, "m%d.db" % i) for i in range(members)]
            if members == 1:
                run("ovsdb-tool", "create", db[0], SCHEMA)
            else:
                ports = [free_port() for _member in range(members)]
                timer = ["--election-timer=%d" % election_timer] if election_timer else []
                run("ovsdb-tool", *(timer + ["create-cluster", db[0], SCHEMA, "tcp:127.0.0.1:%d" % ports[0]]))
                for i in range(1, members):
                    run("ovsdb-tool", "join-cluster", db[i], "OVN_Northbound", "tcp:127.0.0.1:%d" % ports[i],
                        "tcp:127.0.0.1:%d" % ports[0])
            socks = [os.path.join(self.dir, "m%d.sock" % i) for i in range(members)]
            for i in range(members):
                pidfile = os.path.join(self.dir, "m%d.pid" % i)
                run("ovsdb-server", "--detach", "--no-chdir", "--pidfile=" + pidfile,
                    "--log-file=" + os.path.join(self.dir, "m%d.log" % i),
                    "--unixctl=" + os.path.join(self.dir, "m%d.ctl" % i), "--remote=punix:" + socks[i], db[i])
                with open(pidfile) as handle:
                    self.pids.append(int(handle.read()))
            for sock in socks:
                run("ovsdb-client", "--timeout=30", "wait", "unix:" + sock, "OVN_Northbound", "connected")
            self.remotes = ["unix:" + sock for sock in socks]
        except BaseException:
            self.close()
            raise

    def stop(self, index):
        os.kill(self.pids[index], signal.SIGTERM)

    def close(self):
        terminate(self.pids)
        self.pids = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()
