# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One node's part of the rolling upgrade (the ``node_upgrade`` module):
what it runs, its record, and each daemon restarted on the new release
without losing the flows it forwards with.

* **What it runs**: the Debian codename (``/etc/os-release``), the
  packages' versions (dpkg's status file), each daemon's own version (asked
  over its control socket, as ``ovs-appctl version`` asks), whether
  ``ovn-controller`` is pinned to northd's version, and the record.
* **The record**, ``/var/lib/ovn4nfv/upgrade.json``: ``{"from", "to",
  "started", "finished", "steps": {step: [start, end]}}`` (seconds since
  the epoch, the node's clock). An upgrade that stopped half-way left
  ``finished`` empty, and the next run resumes that node.
* **The restarts**, each timed into the record:

  - ``ovs``: Debian's ``systemctl reload openvswitch-switch``, which is
    ``ovs-ctl restart``: the flows saved, ``ovsdb-server`` restarted on the
    new release (its schema converted), ``ovs-vswitchd`` started with
    ``flow-restore-wait`` and given its flows back before it forwards;
    then each uplink the roles configured is put back
    (``ovn4nfv-uplink@<bridge>``), since a bridge's port may come back
    without the node's address.
  - ``ovn-controller``: told ``exit --restart`` over its control socket (it
    leaves its chassis and its ports' bindings in the southbound, so no
    other chassis changes a flow), then started on the new release, which
    waits ``ovn-ofctrl-wait-before-clear`` before it replaces the flows.
  - ``central``: ``ovn-central`` (NB, SB, ovn-northd) restarted on the new
    release; a clustered member is waited for until it is back in its
    cluster, which has a leader.
  - ``daemons``: the product's units that this node has (the node agent,
    the watcher: a leader releases its Lease on SIGTERM and a standby takes
    over; containerd, whose containers outlive it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import time

from ..cluster import releases
from ..cluster.upgrade_plan import behind
from ..common.errors import Ovn4nfvError, ValidationError
from ..common.marks import AGENT_UNIT, UPLINK_UNIT, WATCHER
from ..ovsdb.connection import DEFAULT_OVS_DB

RECORD = "/var/lib/ovn4nfv/upgrade.json"
STEPS = ("packages", "ovs", "ovn-controller", "central", "daemons")
PACKAGES = {"ovs": "openvswitch-switch", "ovn": "ovn-host", "central": "ovn-central"}
OVS_RUNDIR, OVN_RUNDIR = "/var/run/openvswitch", "/var/run/ovn"
PIN_KEY = "ovn-match-northd-version"
# the product's units a node may have, restarted in this order
DAEMONS = ("containerd", AGENT_UNIT, WATCHER)
UPLINKS = "/etc/ovn4nfv/uplinks"
# what ovsdb-server answers cluster/status for a database that is not
# clustered (OVS 3.1 and 3.5: the command exists only with a clustered one)
STANDALONE = ("is not a valid command", "unknown command", "unknown cluster")


class UpgradeFailed(Ovn4nfvError):
    """A restart that did not come back as it should; the record shows the
    step it stopped in, and the next run resumes there."""


def os_codename(path="/etc/os-release"):
    """``VERSION_CODENAME`` of os-release (``bookworm``); None without."""
    try:
        with open(path) as handle:
            for line in handle:
                key, _sep, value = line.strip().partition("=")
                if key == "VERSION_CODENAME":
                    return value.strip().strip('"') or None
    except (IOError, OSError):
        return None
    return None


def installed_versions(names, status="/var/lib/dpkg/status"):
    """``{package: version}`` of ``names`` that dpkg has installed (a
    package it does not have is absent)."""
    wanted, found = set(names), {}
    try:
        with open(status) as handle:
            text = handle.read()
    except (IOError, OSError):
        return found
    for stanza in text.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace():
                key, _sep, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Package") in wanted and fields.get("Status", "").endswith(" installed"):
            found[fields["Package"]] = fields.get("Version")
    return found


def _unixctl(rundir, name, command, args=(), target=None):
    """``(error, answer)`` of ``command`` sent to the daemon ``name`` over
    its control socket (``<rundir>/<name>.<pid>.ctl``, or ``target``);
    python-ovs's client, as ``ovs-appctl`` asks."""
    from ovs.unixctl.client import UnixctlClient
    path = target
    if path is None:
        try:
            with open(os.path.join(rundir, "%s.pid" % name)) as handle:
                path = os.path.join(rundir, "%s.%d.ctl" % (name, int(handle.read().strip())))
        except (IOError, OSError, ValueError) as exc:
            return str(exc), None
    error, client = UnixctlClient.create(path)
    if error:
        return os.strerror(error), None
    try:
        error, problem, result = client.transact(command, list(args))
        if error:
            return os.strerror(error), None
        return (problem, None) if problem else (None, result)
    finally:
        client.close()


def daemon_version(rundir, name):
    """The running daemon's own version (``ovn-controller 25.03.0 ...``);
    None when none runs."""
    error, answer = _unixctl(rundir, name, "version")
    return None if error else answer


def is_pinned(external_ids):
    """Whether ``Open_vSwitch.external_ids`` pin ovn-controller to
    northd's version (``ovn-match-northd-version``)."""
    return external_ids.get(PIN_KEY, "false").lower() == "true"


def _pinned(ovs_db, timeout):
    from ..ovsdb.connection import OVS_SCHEMA, Database
    database = Database(ovs_db, OVS_SCHEMA, ("Open_vSwitch",), timeout=timeout,
                        columns={"Open_vSwitch": ["external_ids"]})
    try:
        def read(idl):
            rows = list(idl.tables["Open_vSwitch"].rows.values())
            return is_pinned(rows[0].external_ids) if rows else False
        return database.read(read)
    finally:
        database.close()


def read_record(path=RECORD):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def gather(ovs_db, timeout, record=RECORD):
    """What this node runs, as :func:`cluster.upgrade.plan` reads a node."""
    packages = installed_versions(PACKAGES.values())
    return {
        "debian": os_codename(),
        "installed": dict((key, packages.get(name)) for key, name in PACKAGES.items()),
        "running": {"ovs": daemon_version(OVS_RUNDIR, "ovs-vswitchd"),
                    "ovn_controller": daemon_version(OVN_RUNDIR, "ovn-controller"),
                    "northd": daemon_version(OVN_RUNDIR, "ovn-northd")},
        "pinned": _pinned(ovs_db, timeout) if daemon_version(OVS_RUNDIR, "ovsdb-server") else False,
        "record": read_record(record),
    }


def updated_record(record, mark, step=None, source=None, target=None, now=None):
    """``record`` (None: none yet) after ``mark``: ``started`` (a node's
    upgrade begins, or resumes: an unfinished record keeps its steps),
    ``start``/``end`` of ``step``, or ``finished``."""
    now = time.time() if now is None else now
    if mark == "started":
        if record and not record.get("finished") and record.get("to") == target:
            return dict(record)
        return {"from": source, "to": target, "started": now, "finished": None, "steps": {}}
    if record is None:
        raise ValidationError("the node has no upgrade record: mark it started first")
    record = dict(record, steps=dict(record.get("steps") or {}))
    if mark == "finished":
        record["finished"] = now
    elif step not in STEPS:
        raise ValidationError("step: %r is none of %s" % (step, ", ".join(STEPS)))
    elif mark == "start":
        record["steps"][step] = [now, None]
    elif mark == "end":
        record["steps"][step] = [(record["steps"].get(step) or [now])[0], now]
    else:
        raise ValidationError("mark: %r is none of started, start, end, finished" % mark)
    return record


def write_record(record, path=RECORD):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    temporary = path + ".new"
    with open(temporary, "w") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.rename(temporary, path)


def systemctl(*args):
    proc = subprocess.run(("systemctl",) + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False, timeout=300)
    if proc.returncode:
        raise UpgradeFailed("systemctl %s failed (exit %d): %s" % (
            " ".join(args), proc.returncode, proc.stdout.strip()))
    return proc.stdout


def unit_exists(name):
    proc = subprocess.run(("systemctl", "cat", name + ".service"), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False, timeout=60)
    return proc.returncode == 0


def wait_until(what, predicate, timeout, interval=0.1):
    """Ask ``predicate`` until it answers true, at most ``timeout``
    seconds; ValidationError naming ``what`` (and its last answer) if it
    never does."""
    deadline = time.monotonic() + timeout
    answer = predicate()
    while not answer:
        if time.monotonic() > deadline:
            raise UpgradeFailed("%s: not within %d s" % (what, timeout))
        time.sleep(interval)
        answer = predicate()
    return answer


def _runs(rundir, name, package):
    """A predicate: the daemon ``name`` answers with the release of the
    installed ``package``."""
    def check():
        installed = installed_versions([package]).get(package)
        parse = releases.ovs_release if name.startswith("ovs") else releases.release
        return installed and parse(daemon_version(rundir, name)) == parse(installed)
    return check


def restart_ovs(timeout):
    """Open vSwitch on the new release, its flows kept; then the uplinks."""
    systemctl("reload", "openvswitch-switch.service")
    wait_until("ovs-vswitchd on the installed Open vSwitch",
               _runs(OVS_RUNDIR, "ovs-vswitchd", PACKAGES["ovs"]), timeout)
    bridges = sorted(name[:-len(".json")] for name in (os.listdir(UPLINKS) if os.path.isdir(UPLINKS) else [])
                     if name.endswith(".json"))
    for bridge in bridges:
        systemctl("restart", "%s%s.service" % (UPLINK_UNIT, bridge))
    return bridges


def restart_controller(timeout):
    """ovn-controller on the new release; its chassis and bindings kept."""
    error, _answer = _unixctl(OVN_RUNDIR, "ovn-controller", "exit", ["--restart"])
    if error is None:
        wait_until("the old ovn-controller gone", lambda: daemon_version(OVN_RUNDIR, "ovn-controller") is None,
                   timeout)
    systemctl("restart", "ovn-controller.service")
    wait_until("ovn-controller on the installed OVN", _runs(OVN_RUNDIR, "ovn-controller", PACKAGES["ovn"]), timeout)
    wait_until("ovn-controller connected to the southbound",
               lambda: (_unixctl(OVN_RUNDIR, "ovn-controller", "connection-status")[1] or "").strip() == "connected",
               timeout)


def _cluster_ok(target):
    """A clustered database's member is back in a cluster that has a
    leader (a standalone one: it answers)."""
    def check():
        error, answer = _unixctl(OVN_RUNDIR, None, "cluster/status", [target[1]], target=target[0])
        if error and any(words in error for words in STANDALONE):
            return True     # the server answered: a standalone database has no cluster to be back in
        if error or not answer:
            return False
        status = dict(line.split(":", 1) for line in answer.splitlines() if ":" in line)
        return status.get("Status", "").strip() == "cluster member" and \
            status.get("Leader", "unknown").strip() not in ("", "unknown")
    return check


def restart_central(timeout):
    """NB, SB and ovn-northd on the new release; a clustered member back
    in its cluster, which has a leader."""
    systemctl("restart", "ovn-central.service")
    wait_until("ovn-northd on the installed OVN", _runs(OVN_RUNDIR, "ovn-northd", PACKAGES["central"]), timeout)
    for target in ((os.path.join(OVN_RUNDIR, "ovnnb_db.ctl"), "OVN_Northbound"),
                   (os.path.join(OVN_RUNDIR, "ovnsb_db.ctl"), "OVN_Southbound")):
        wait_until("%s's member in its cluster, with a leader" % target[1], _cluster_ok(target), timeout)


def restart_daemons(units=DAEMONS):
    """The product's units this node has, restarted; their names."""
    done = []
    for unit in units:
        if unit_exists(unit):
            systemctl("restart", unit + ".service")
            done.append(unit)
    return done


RESTARTS = {"ovs": restart_ovs, "ovn-controller": restart_controller, "central": restart_central}


def _recorded(params, check_mode):
    if params["mark"] is None:
        raise ValidationError("mark: state recorded needs a mark (started, start, end or finished)")
    if params["mark"] in ("start", "end") and params["step"] is None:
        raise ValidationError("step: mark %s needs the step it marks" % params["mark"])
    if params["mark"] == "started" and not (params["from_release"] and params["to_release"]):
        raise ValidationError("from_release, to_release: mark started needs both")
    before = read_record(params["record"])
    after = updated_record(before, params["mark"], params["step"], params["from_release"], params["to_release"])
    if not check_mode and after != before:
        write_record(after, params["record"])
    return dict(changed=after != before, record=after)


def _restarted(params, check_mode):
    step = params["step"]
    if step not in RESTARTS and step != "daemons":
        raise ValidationError("step: state restarted restarts ovs, ovn-controller, central or daemons, not %r"
                              % step)
    if check_mode:
        return dict(changed=True, record=read_record(params["record"]), restarted=[])
    record = updated_record(read_record(params["record"]), "start", step)
    write_record(record, params["record"])
    done = restart_daemons() if step == "daemons" else (RESTARTS[step](params["wait"]) or [])
    record = updated_record(record, "end", step)
    write_record(record, params["record"])
    return dict(changed=True, record=record, restarted=done)


def task(params, check_mode):
    """The ``node_upgrade`` module's work: its parameters, its result."""
    params = dict(params, db=params["db"] or DEFAULT_OVS_DB)
    if params["wait"] <= 0:
        raise ValidationError("wait: %r must be a positive number of seconds" % params["wait"])
    if params["state"] == "recorded":
        return _recorded(params, check_mode)
    if params["state"] == "restarted":
        if params["step"] is None:
            raise ValidationError("step: state restarted needs the step to restart")
        return _restarted(params, check_mode)
    node = gather(params["db"], params["timeout"], params["record"])
    if params["to_release"] is None:
        return dict(changed=False, node=node)
    if params["to_release"] not in releases.DEBIAN:
        raise ValidationError("to_release: %r is no Debian release the upgrade knows (it knows %s)" % (
            params["to_release"], ", ".join(sorted(releases.DEBIAN))))
    roles = dict(node, central=params["central"], chassis=params["chassis"])
    return dict(changed=False, node=node, behind=behind(roles, params["to_release"]))
