"""Real DHCP clients in a test's network namespace: Debian's ``dhclient``
(ISC) and busybox's ``udhcpc``, each with a script of the test's own that
only writes down what the client was given (never the namespace's
addresses or the machine's resolv.conf), so that the test reads the answer
as the client understood it.

Every run is bounded: a client that gets no answer gives up within its
tries and timeouts, and is killed past a deadline in any case.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

from tests.harness.dataplane import ns_name

# what the scripts write: the client's environment when it binds
_SCRIPT = """#!/bin/sh
case "$%s" in %s) env > "%s.tmp" && mv "%s.tmp" "%s" ;; esac
exit 0
"""
# dhclient asks for what Debian's dhclient.conf asks for, the MTU and the
# classless static routes (option 121, which its stock configuration declares)
_DHCLIENT_CONF = """option rfc3442-classless-static-routes code 121 = array of unsigned integer 8;
timeout %d;
retry 1;
request subnet-mask, broadcast-address, routers, domain-name, domain-name-servers, interface-mtu,
        rfc3442-classless-static-routes;
"""


def _environment(path):
    with open(path) as handle:
        return dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)


def _run(argv, bound, deadline):
    """Run a client until it wrote ``bound`` or gave up; kill it after
    ``deadline`` seconds either way. Returns the bound environment or None."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        end = time.monotonic() + deadline
        while time.monotonic() < end and not os.path.exists(bound) and proc.poll() is None:
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
        return _environment(bound) if os.path.exists(bound) else None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def udhcpc(netns, ifname="eth0", tries=3, timeout=2):
    """busybox udhcpc's lease on ``ifname`` in ``netns``: its environment as
    its script saw it (``ip``, ``subnet``, ``router``, ``mtu``,
    ``staticroutes``, ``dns``, ``domain``...), or None when no server
    answered within ``tries`` discovers of ``timeout`` seconds each."""
    work = tempfile.mkdtemp(prefix="o4n-udhcpc-")
    try:
        bound = os.path.join(work, "bound")
        script = os.path.join(work, "script")
        with open(script, "w") as handle:
            handle.write(_SCRIPT % ("1", "bound|renew", bound, bound, bound))
        os.chmod(script, 0o755)
        argv = ["ip", "netns", "exec", ns_name(netns), "busybox", "udhcpc", "-i", ifname, "-f", "-q", "-n",
                "-t", str(tries), "-T", str(timeout), "-s", script, "-O", "mtu", "-O", "staticroutes",
                "-O", "domain"]
        return _run(argv, bound, tries * timeout + 10)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def dhclient(netns, ifname="eth0", timeout=15):
    """ISC dhclient's lease on ``ifname`` in ``netns``: the environment its
    script got on BOUND (``new_ip_address``, ``new_routers``,
    ``new_interface_mtu``, ``new_rfc3442_classless_static_routes``...), or
    None when no lease came within ``timeout`` seconds."""
    work = tempfile.mkdtemp(prefix="o4n-dhclient-")
    try:
        bound = os.path.join(work, "bound")
        script = os.path.join(work, "script")
        conf = os.path.join(work, "dhclient.conf")
        with open(script, "w") as handle:
            handle.write(_SCRIPT % ("reason", "BOUND|RENEW|REBIND|REBOOT", bound, bound, bound))
        os.chmod(script, 0o755)
        with open(conf, "w") as handle:
            handle.write(_DHCLIENT_CONF % timeout)
        argv = ["ip", "netns", "exec", ns_name(netns), "dhclient", "-d", "-1", "-cf", conf, "-sf", script,
                "-lf", os.path.join(work, "leases"), "-pf", os.path.join(work, "pid"), ifname]
        return _run(argv, bound, timeout + 10)
    finally:
        shutil.rmtree(work, ignore_errors=True)
