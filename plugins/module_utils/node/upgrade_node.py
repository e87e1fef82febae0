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
  "started", "finished", "steps": {step: [start, end]}, "attempts",
  "previous"}`` (seconds since the epoch, the node's clock). An upgrade
  that stopped half-way left ``finished`` empty, and the next run resumes
  that node. A finished node planned again (one of its daemons was down
  when it was read) keeps its history: its record is reopened with the
  first attempt's ``from`` and ``started``, ``attempts`` one more, and the
  finished attempt (its steps, its ``finished``) under ``previous``; a new
  target begins a new record, the last one under ``previous``. One attempt
  back only: ``previous`` holds no ``previous``.
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
    cluster, which has a leader. Before: each clustered database's member
    must see every other server of its cluster connected
    (``cluster/status``), else nothing restarts; with Open vSwitch 3.2 or
    later installed, the NB and SB units of a clustered database get a
    drop-in that starts their ovsdb-server with
    ``--disable-file-no-data-conversion`` (ovsdb(7): 3.1 members cannot
    read what 3.2 writes otherwise); ``prepared`` writes it right after the
    packages, before anything can start the new server without it. The
    active ovn-northd is the one beside the SB leader (the roles point each
    northd at its own member's socket), so while the members are mixed the
    active northd's release follows the leadership; pausing one cannot
    choose it (a paused northd beside the leader leaves none active).
  - ``settled``, once every central member runs the new release: each
    database with the drop-in gets ``ovsdb/file/no-data-conversion-enable``,
    and the drop-ins go.
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
from ..common.marks import AGENT_UNIT, UPGRADE_DROPIN, UPLINK_UNIT, WATCHER
from ..ovsdb.connection import DEFAULT_OVS_DB
from .ovs_control import cluster_status, is_clustered, not_connected, unixctl

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
# each central database: Debian's unit (ovn-central), the ovn-ctl command its
# ExecStart runs, its file, its server's control socket
CENTRAL_DBS = (
    {"name": "OVN_Northbound", "unit": "ovn-ovsdb-server-nb", "command": "run_nb_ovsdb",
     "file": "/var/lib/ovn/ovnnb_db.db", "ctl": os.path.join(OVN_RUNDIR, "ovnnb_db.ctl")},
    {"name": "OVN_Southbound", "unit": "ovn-ovsdb-server-sb", "command": "run_sb_ovsdb",
     "file": "/var/lib/ovn/ovnsb_db.db", "ctl": os.path.join(OVN_RUNDIR, "ovnsb_db.ctl")},
)
UNITDIR = "/etc/systemd/system"
OVN_CTL = "/usr/share/ovn/scripts/ovn-ctl"
# ovsdb(7), "Upgrading from version 3.1 and earlier to 3.2 and later": a
# clustered member on 3.2 or later writes what 3.1 members cannot read unless
# started with this option, until every member runs 3.2 or later
FILE_FORMAT_CHANGE = (3, 2)
NO_DATA_CONVERSION_OPTION = "--disable-file-no-data-conversion"
NO_DATA_CONVERSION_ENABLE = "ovsdb/file/no-data-conversion-enable"


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


def daemon_version(rundir, name):
    """The running daemon's own version (``ovn-controller 25.03.0 ...``);
    None when none runs."""
    error, answer = unixctl(rundir, name, "version")
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
    ``start``/``end`` of ``step``, or ``finished``.

    ``started`` on a record it does not resume keeps its history: the
    record replaced goes under ``previous`` (without its own ``previous``:
    one attempt back, so the file stays small). A finished record of the
    same target (the node was planned again: a daemon was down when it was
    read) is reopened: ``from`` and ``started`` stay those of the first
    attempt and ``attempts`` counts one more; a record of another target
    begins a new upgrade (``attempts`` 1). A record without ``attempts``
    (an older release's) counts as one attempt."""
    now = time.time() if now is None else now
    if mark == "started":
        if record and not record.get("finished") and record.get("to") == target:
            return dict(record)
        fresh = {"from": source, "to": target, "started": now, "finished": None, "steps": {}, "attempts": 1}
        if record:
            fresh["previous"] = dict((key, value) for key, value in record.items() if key != "previous")
            if record.get("to") == target:
                fresh.update({"from": record.get("from", source), "started": record.get("started", now),
                              "attempts": int(record.get("attempts") or 1) + 1})
        return fresh
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
    error, _answer = unixctl(OVN_RUNDIR, "ovn-controller", "exit", ["--restart"])
    if error is None:
        wait_until("the old ovn-controller gone", lambda: daemon_version(OVN_RUNDIR, "ovn-controller") is None,
                   timeout)
    systemctl("restart", "ovn-controller.service")
    wait_until("ovn-controller on the installed OVN", _runs(OVN_RUNDIR, "ovn-controller", PACKAGES["ovn"]), timeout)
    wait_until("ovn-controller connected to the southbound",
               lambda: (unixctl(OVN_RUNDIR, "ovn-controller", "connection-status")[1] or "").strip() == "connected",
               timeout)


def central_ready(dbs=CENTRAL_DBS):
    """Before a central member restarts: every other server of each of its
    clustered databases connected (a 3-member cluster then keeps two while
    this one restarts), else UpgradeFailed naming what is missing, for all
    the databases at once. ``{database: what was found}``: ``"N of N
    servers connected"``, ``"standalone"``, or ``"not answering: ..."`` (a
    member whose server does not answer is in no quorum now: restarting it
    takes nothing away from its cluster)."""
    found, problems = {}, []
    for db in dbs:
        error, answer = unixctl(None, None, "cluster/status", [db["name"]], target=db["ctl"])
        if error and any(words in error for words in STANDALONE):
            found[db["name"]] = "standalone"
            continue
        if error:
            found[db["name"]] = "not answering: %s" % error.strip()
            continue
        status = cluster_status(answer)
        missing = not_connected(status)
        if status["status"] != "cluster member":
            problems.append("%s: this member's status is %r" % (db["name"], status["status"]))
        if missing:
            problems.append("%s: this member does not see %s connected" % (db["name"], ", ".join(missing)))
        found[db["name"]] = "%d of %d servers connected" % (len(status["servers"]) - len(missing),
                                                            len(status["servers"]))
    if problems:
        raise UpgradeFailed("not restarting ovn-central, its cluster would lose a member it needs: %s"
                            % "; ".join(problems))
    return found


def dropin_path(unit, unitdir=UNITDIR):
    return os.path.join(unitdir, unit + ".service.d", UPGRADE_DROPIN)


def dropin_text(command):
    """The drop-in: the unit's ExecStart, with the option after ovn-ctl's
    ``--`` (which it passes to ovsdb-server; OVN_CTL_OPTS is ovn-northd's
    too, which would refuse it)."""
    return ("# ovn4nfv.k8s's upgrade: until every member of the cluster runs Open vSwitch 3.2 or later\n"
            "# (node_upgrade state=settled removes it)\n"
            "[Service]\nExecStart=\nExecStart=%s %s $OVN_CTL_OPTS -- %s\n"
            % (OVN_CTL, command, NO_DATA_CONVERSION_OPTION))


def write_dropins(installed_ovs, dbs=CENTRAL_DBS, unitdir=UNITDIR, check_mode=False):
    """With Open vSwitch 3.2 or later installed (``installed_ovs``, dpkg's
    version), each clustered database's unit gets the drop-in that starts
    its ovsdb-server with :data:`NO_DATA_CONVERSION_OPTION` (3.1 has no
    such option); the drop-ins written or changed (in ``check_mode``,
    those it would write, writing none)."""
    release = releases.ovs_release(installed_ovs)
    if release is None or release < FILE_FORMAT_CHANGE:
        return []
    written = []
    for db in dbs:
        if not is_clustered(db["file"]):
            continue
        path, text = dropin_path(db["unit"], unitdir), dropin_text(db["command"])
        if _holds(path, text):
            continue
        written.append(path)
        if check_mode:
            continue
        if not os.path.isdir(os.path.dirname(path)):
            os.makedirs(os.path.dirname(path), 0o755)
        with open(path + ".new", "w") as handle:
            handle.write(text)
        os.rename(path + ".new", path)
    return written


def _cluster_ok(target):
    """A clustered database's member is back in a cluster that has a
    leader (a standalone one: it answers)."""
    def check():
        error, answer = unixctl(OVN_RUNDIR, None, "cluster/status", [target[1]], target=target[0])
        if error and any(words in error for words in STANDALONE):
            return True     # the server answered: a standalone database has no cluster to be back in
        if error or not answer:
            return False
        status = cluster_status(answer)
        return status["status"] == "cluster member" and status["leader"] not in (None, "", "unknown")
    return check


def prepare(check_mode, dbs=CENTRAL_DBS, unitdir=UNITDIR):
    """Right after the packages: with Open vSwitch 3.2 or later installed,
    each clustered database's unit gets the drop-in that starts its
    ovsdb-server with :data:`NO_DATA_CONVERSION_OPTION`, before anything
    (a crash, a reboot, an operator) can start the new server without it.
    ``(changed, the drop-ins written)``; check mode writes none."""
    written = write_dropins(installed_versions([PACKAGES["ovs"]]).get(PACKAGES["ovs"]), dbs, unitdir, check_mode)
    if written and not check_mode:
        systemctl("daemon-reload")
    return bool(written), written


def _holds(path, text):
    try:
        with open(path) as handle:
            return handle.read() == text
    except (IOError, OSError):
        return False


def restart_central(timeout, dbs=CENTRAL_DBS, unitdir=UNITDIR, found=None):
    """NB, SB and ovn-northd on the new release, once every other member
    of each clustered database is seen connected (:func:`central_ready`,
    or what it ``found`` already); with Open vSwitch 3.2 or later
    installed, a clustered database's ovsdb-server started with
    :data:`NO_DATA_CONVERSION_OPTION` (the drop-in, :func:`prepare`'s, made
    here too if it is not there); each clustered member back in its
    cluster, which has a leader. What it found and did."""
    found = central_ready(dbs) if found is None else found
    written = write_dropins(installed_versions([PACKAGES["ovs"]]).get(PACKAGES["ovs"]), dbs, unitdir)
    if written:
        systemctl("daemon-reload")
    systemctl("restart", "ovn-central.service")
    wait_until("ovn-northd on the installed OVN", _runs(OVN_RUNDIR, "ovn-northd", PACKAGES["central"]), timeout)
    for db in dbs:
        wait_until("%s's member in its cluster, with a leader" % db["name"], _cluster_ok((db["ctl"], db["name"])),
                   timeout)
    return {"cluster": found, "dropins": written}


def settle(check_mode, dbs=CENTRAL_DBS, unitdir=UNITDIR):
    """After every central member runs the new release: each database whose
    drop-in is there (the sign: its server may have been started with
    :data:`NO_DATA_CONVERSION_OPTION`; ovsdb-server has no query for
    whether it was enabled since) gets :data:`NO_DATA_CONVERSION_ENABLE`
    when its server runs 3.2 or later and has that command (it has it only
    when started with the option), and the drop-in removed. ``(changed,
    what was done)``."""
    enabled, removed = [], []
    for db in dbs:
        path = dropin_path(db["unit"], unitdir)
        if not os.path.exists(path):
            continue
        error, version = unixctl(None, None, "version", target=db["ctl"])
        running = None if error else releases.ovs_release(version)
        if running is not None and running >= FILE_FORMAT_CHANGE:
            error, commands = unixctl(None, None, "list-commands", target=db["ctl"])
            if error:
                raise UpgradeFailed("%s's ovsdb-server list-commands: %s" % (db["name"], error))
            if NO_DATA_CONVERSION_ENABLE in commands:
                if not check_mode:
                    error, _answer = unixctl(None, None, NO_DATA_CONVERSION_ENABLE, target=db["ctl"])
                    if error:
                        raise UpgradeFailed("%s's ovsdb-server %s: %s"
                                            % (db["name"], NO_DATA_CONVERSION_ENABLE, error))
                enabled.append(db["name"])
        if not check_mode:
            os.remove(path)
            try:
                os.rmdir(os.path.dirname(path))
            except OSError:
                pass    # the unit's other drop-ins stay, and their directory
        removed.append(path)
    if removed and not check_mode:
        systemctl("daemon-reload")
    return bool(enabled or removed), {"enabled": enabled, "removed": removed}


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
    extra = {}
    if step == "central":
        # the other members first: a refusal restarts and records nothing, in check mode too
        found = central_ready()
        extra["central"] = {"cluster": found, "dropins": []}
    if check_mode:
        return dict(changed=True, record=read_record(params["record"]), restarted=[], **extra)
    record = updated_record(read_record(params["record"]), "start", step)
    write_record(record, params["record"])
    if step == "daemons":
        done = restart_daemons()
    elif step == "central":
        extra["central"] = restart_central(params["wait"], found=extra["central"]["cluster"])
        done = ["ovn-central"]
    else:
        done = RESTARTS[step](params["wait"]) or []
    record = updated_record(record, "end", step)
    write_record(record, params["record"])
    return dict(changed=True, record=record, restarted=done, **extra)


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
    if params["state"] == "settled":
        changed, done = settle(check_mode)
        return dict(changed=changed, settled=done)
    if params["state"] == "prepared":
        changed, written = prepare(check_mode)
        return dict(changed=changed, dropins=written)
    node = gather(params["db"], params["timeout"], params["record"])
    if params["to_release"] is None:
        return dict(changed=False, node=node)
    if params["to_release"] not in releases.DEBIAN:
        raise ValidationError("to_release: %r is no Debian release the upgrade knows (it knows %s)" % (
            params["to_release"], ", ".join(sorted(releases.DEBIAN))))
    roles = dict(node, central=params["central"], chassis=params["chassis"])
    return dict(changed=False, node=node, behind=behind(roles, params["to_release"]))
