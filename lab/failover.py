"""The control plane of a lab with several masters (issue 38): which
watcher leads (:func:`leadership`, a row of ``make lab``'s verification),
and ``python -m lab failover`` (``make lab-failover``), the leading
watcher broken while pods are made, timed.

Each master runs a watcher; the one that holds the Lease
``kube-system/ovn4nfv-watcher`` logs "serving as the leader (term N)" and
has advanced the NB's term (NB_Global external_ids ``ovn4nfv-term``) to
N; the others log "standing by as <identity> until it leads". A holder's
identity is ``<hostname>_<hex>``, and a master's container has the
master's name as its hostname: the Lease names the leader's master.
"""

import json
import re
import subprocess
import time

from lab import layout as seed
from lab.containers import wait_booted
from lab.host import exec_in, kubelet_argv, log, podman
from lab.workload import central_ctl, central_leader, kubelet, raft_role, until

WATCHER_UNIT = "ovn4nfv-watcher"
LEASE = "kube-system/ovn4nfv-watcher"
LEADS = re.compile(r"serving as the leader \(term (\d+)\)")
STANDS = re.compile(r"standing by as (\S+) until it leads")
SETTLE_S = 60           # a lab settles (a leader, every standby, every pod served) within this
SERVED_S = 60           # a pod not served this long after the fault is lost
CREATOR_S = 600         # the creator's bound, whatever happens here
STATE, STOP = "/run/ovn4nfv-failover.json", "/run/ovn4nfv-failover.stop"
BOOT_S = 180           # a master powered on again settles within this
MOVES = 6               # graceful restarts to bring the Lease to the NB leader's master, at most


def main_pid(session, host):
    """The running watcher's PID on ``host`` (0: none)."""
    text = exec_in(session.container(host), "systemctl", "show", "-p", "MainPID", "--value", WATCHER_UNIT,
                   check=False).stdout.strip()
    return int(text) if text.isdigit() else 0


def said(session, host, pid=None):
    """What the watcher process ``pid`` (default: the running one) on
    ``host`` wrote to its journal."""
    pid = pid or main_pid(session, host)
    if not pid:
        return []
    return exec_in(session.container(host), "journalctl", "--no-pager", "-o", "cat", "-u", WATCHER_UNIT,
                   "_PID=%d" % pid, check=False).stdout.splitlines()


def part(lines):
    """``("leader", term)``, ``("standby", identity)`` from the last of
    those lines that says which, or ``(None, None)``."""
    for line in reversed(lines):
        found = LEADS.search(line)
        if found:
            return "leader", int(found.group(1))
        found = STANDS.search(line)
        if found:
            return "standby", found.group(1)
    return None, None


def nb_term(session):
    """The NB's term (NB_Global external_ids:ovn4nfv-term), or None."""
    text = central_ctl(session, "ovn-nbctl", "--if-exists", "get", "NB_Global", ".",
                       "external_ids:ovn4nfv-term", check=False).stdout.strip().strip('"')
    return int(text) if text.isdigit() else None


def holder(session):
    """The Lease's holderIdentity ("" when released or none)."""
    return (kubelet(session, seed.API_HOSTNAME, "lease", LEASE) or {}).get("holderIdentity") or ""


def leadership(session):
    """Who leads: ``{"ok", "holder", "leader", "term", "standbys", "row"}``.
    ok: one Lease holder, its master's watcher serving as the leader in
    the NB's term (≥ 1), every other master's standing by."""
    masters = session.layout.masters
    identity = holder(session)
    leader = identity.rsplit("_", 1)[0] if identity else None
    parts = dict((m, part(said(session, m))) for m in masters)
    term = nb_term(session)
    leaders = [m for m in masters if parts[m][0] == "leader"]
    standbys = [m for m in masters if parts[m][0] == "standby"]
    ok = bool(identity) and leaders == [leader] and len(standbys) == len(masters) - 1 \
        and term is not None and term >= 1 and parts[leader][1] == term
    logged = "its watcher serving as the leader (term %s)" % parts[leader][1] if leader in leaders \
        else "its watcher not serving as the leader (%s)" % (parts.get(leader, (None,))[0] or "no such master")
    text = "%s holds the Lease %s as %r, %s, the NB's term %s; standing by: %s" % (
        leader or "nobody", LEASE, identity, logged, term, ", ".join(standbys) or "none")
    others = [m for m in masters if m != leader and m not in standbys]
    if others:
        text += "; neither leading nor standing by: %s" % ", ".join(
            "%s (%s)" % (m, parts[m][0] or "silent") for m in others)
    return {"ok": ok, "holder": identity, "leader": leader, "term": term, "standbys": standbys,
            "row": "%-4s leader %s" % ("OK" if ok else "FAIL", text)}


def settled_leadership(session, seconds=SETTLE_S):
    """:func:`leadership` once it is ok, or its last after ``seconds``."""
    last = {}

    def look():
        last["found"] = leadership(session)
        return last["found"]["ok"]
    until(look, seconds)
    return last["found"]


class Creator:
    """lab/creator.py in the API stand-in's container: pods made while
    the faults are made, and what became of each."""

    def __init__(self, session):
        self.session, self.name = session, session.container(seed.API_HOSTNAME)
        self.argv = kubelet_argv(self.name, "creator.py")
        self.proc = None

    def start(self):
        lay = self.session.layout
        exec_in(self.name, "rm", "-f", STATE, STOP)
        self.proc = subprocess.Popen(["podman", "exec", self.name] + self.argv + [
            "run", json.dumps(lay.workers), lay.request(seed.NET1), STATE, STOP, str(CREATOR_S)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)

    def state(self):
        text = exec_in(self.name, "cat", STATE, check=False).stdout
        try:
            return json.loads(text)
        except ValueError:
            return {"pods": {}, "errors": []}

    def first_after(self, moment, sent):
        """Seconds from ``moment`` (the fault's start) to the first list
        written for a pod made after ``sent`` (once the signal was
        delivered: a pod made in between may be the old leader's), or None."""
        served = [p["first"] for p in self.state()["pods"].values() if p["created"] > sent and p["first"]]
        return min(served) - moment if served else None

    def unserved(self):
        """The pods made more than a second ago, not deleted, without their list."""
        now = time.time()
        return sorted(n for n, p in self.state()["pods"].items() if p["first"] is None and p["deleted"] is None
                      and p["created"] < now - 1)

    def settled(self):
        """Pods were made, and every one made more than a second ago that is not deleted has its list."""
        return bool(self.state()["pods"]) and not self.unserved()

    def finish(self):
        """The creator stopped; its last record (it waits, bounded, for
        every pod it made to be served)."""
        exec_in(self.name, "touch", STOP, check=False)
        out, err = self.proc.communicate(timeout=CREATOR_S + SERVED_S + 60)
        if self.proc.returncode:
            raise SystemExit("lab: the failover's creator failed (exit %d): %s" % (self.proc.returncode, err[-2000:]))
        return json.loads(out.strip().splitlines()[-1])

    def clean(self):
        exec_in(self.name, *(self.argv + ["clean"]), check=False)


def settle(session, creator, before=None, seconds=SETTLE_S):
    """A settled lab: a leader other than ``before`` (an identity), every
    other master standing by, every RAFT member of the NB in the cluster,
    every pod served; bounded. Returns :func:`leadership`'s answer."""
    central = session.layout.central

    def look():
        found = leadership(session)
        raft = all(raft_role(session, h) in ("leader", "follower") for h in central)
        return found if found["ok"] and found["holder"] != before and raft and creator.settled() else None
    found = until(look, seconds)
    if not found:
        roles = ", ".join("%s %s" % (h, raft_role(session, h)) for h in central)
        raise SystemExit("lab: the lab did not settle in %d s: %s; the NB's RAFT roles: %s; pods without their "
                         "list: %s" % (seconds, leadership(session)["row"], roles,
                                       " ".join(creator.unserved()) or "none"))
    return found


def new_holder(session, old):
    """The Lease's holder once it is neither released nor ``old``, else None."""
    found = holder(session)
    return found if found not in ("", old) else None


def signal(session, host, name):
    exec_in(session.container(host), "systemctl", "kill", "-s", name, WATCHER_UNIT)


def kill(session, creator):
    """SIGKILL of the leading watcher (systemd starts it again, a standby)."""
    lead = settle(session, creator)
    moment = time.time()
    signal(session, lead["leader"], "SIGKILL")
    sent = time.time()
    log("failover: SIGKILL of %s's watcher (%s)" % (lead["leader"], lead["holder"]))
    seconds = until(lambda: creator.first_after(moment, sent), SERVED_S)
    return {"fault": "kill", "seconds": seconds, "from": lead["holder"]}


def stop(session, creator, previous):
    """SIGSTOP of the leading watcher; SIGCONT once another leads: the
    woken process must end with exit code 3 (systemd starts it again, a
    standby). Its journal's lines that say it was fenced are counted."""
    lead = settle(session, creator, before=previous)
    host, pid = lead["leader"], main_pid(session, lead["leader"])
    moment = time.time()
    try:
        signal(session, host, "SIGSTOP")
        sent = time.time()
        log("failover: SIGSTOP of %s's watcher (%s, pid %d)" % (host, lead["holder"], pid))
        seconds = until(lambda: creator.first_after(moment, sent), SERVED_S)
        taken = until(lambda: new_holder(session, lead["holder"]), SERVED_S)
    finally:
        woken = time.time()
        signal(session, host, "SIGCONT")
    log("failover: SIGCONT of %s's watcher (another took the Lease: %s)" % (host, bool(taken)))

    def exited():
        text = exec_in(session.container(host), "journalctl", "--no-pager", "-o", "cat", "-u", WATCHER_UNIT,
                       "--since", "@%d" % int(woken), check=False).stdout
        return main_pid(session, host) not in (0, pid) and re.findall(r"status=(\d+)/", text)
    statuses = until(exited, SETTLE_S) or []
    fenced = [line for line in said(session, host, pid) if "fenced" in line.lower()]
    return {"fault": "stop", "seconds": seconds, "from": lead["holder"], "exit": statuses[0] if statuses else None,
            "fenced": len(fenced)}


def partition(session, creator, previous):
    """The leading watcher's master cut off: ``ip link set br-phy down``
    there (its kernel stack holds the underlay address on the userspace
    datapath: the API, its RAFT peers and the watchers are cut; masters
    carry no pods), restored once another leads. The cut-off watcher
    cannot renew: it ends (exit 3) and systemd starts it again, a standby
    once it is back."""
    lead = settle(session, creator, before=previous)
    name = session.container(lead["leader"])
    moment = time.time()
    try:
        exec_in(name, "ip", "link", "set", "br-phy", "down")
        sent = time.time()
        log("failover: %s cut off (br-phy down; its watcher %s)" % (lead["leader"], lead["holder"]))
        seconds = until(lambda: creator.first_after(moment, sent), SERVED_S)
        taken = until(lambda: new_holder(session, lead["holder"]), SERVED_S)
    finally:
        exec_in(name, "ip", "link", "set", "br-phy", "up")
    log("failover: %s back (another took the Lease: %s)" % (lead["leader"], bool(taken)))
    return {"fault": "partition", "seconds": seconds, "from": lead["holder"]}


def nb_leader(session, creator, previous):
    """The watcher's leader and the NB's RAFT leader lost together
    (Kube-OVN #7497): the Lease brought to the NB leader's master by
    graceful restarts of the leading watcher (it releases the Lease; the
    first one timed, ``release_s``), then that master "powered off":
    br-phy down first, then its container killed (SIGKILL), so no FIN or
    RST reaches a peer; started again and booted, its RAFT members back."""
    lead = settle(session, creator, before=previous)
    target = central_leader(session)
    released, moves = None, 0
    while lead["leader"] != target and moves < MOVES:
        moves += 1
        moment = time.time()
        # --no-block: the clock runs from the SIGTERM, not from the end of the old process's stop
        exec_in(session.container(lead["leader"]), "systemctl", "restart", "--no-block", WATCHER_UNIT)
        sent = time.time()
        log("failover: %s's watcher restarted (%s releases the Lease)" % (lead["leader"], lead["holder"]))
        taken = until(lambda: creator.first_after(moment, sent), SERVED_S)
        released = taken if released is None else released
        lead = settle(session, creator, before=lead["holder"])
        target = central_leader(session)
    if lead["leader"] != target:
        raise SystemExit("lab: the Lease did not come to the NB leader's master %s in %d restarts" % (target, MOVES))
    name = session.container(target)
    moment = time.time()
    try:
        exec_in(name, "ip", "link", "set", "br-phy", "down")
        podman("kill", "-s", "KILL", name, capture=True)
        sent = time.time()
        log("failover: %s powered off (the NB leader, its watcher %s)" % (target, lead["holder"]))
        seconds = until(lambda: creator.first_after(moment, sent), SERVED_S)
    finally:
        podman("start", name, capture=True)
        wait_booted(name)
    log("failover: %s powered on and booted" % target)
    settle(session, creator, before=lead["holder"], seconds=BOOT_S)
    return {"fault": "nb_leader", "seconds": seconds, "from": lead["holder"], "release": released, "moves": moves}


def run(session):
    """``make lab-failover``: a creator makes pods; the leading watcher is
    SIGKILLed, then (once the lab settled) the next one SIGSTOPped and
    continued after the takeover, then the next one's master cut off and
    restored after the takeover, then the Lease brought to the NB's RAFT
    leader and that master powered off and on. Prints ``failover: kill_s=
    stop_s= partition_s= nb_leader_s= double_writes= lost=``: each fault to the first list
    written for a pod made after it; pods whose list took two values; pods
    not deleted and never served within SERVED_S of the creator's end."""
    lay = session.layout
    if len(lay.masters) < 2:
        raise SystemExit("lab: failover needs several masters (INVENTORY=playbooks/inventory/ha.yml), not %d"
                         % len(lay.masters))
    creator = Creator(session)
    creator.clean()
    creator.start()
    faults, failed = [], None
    try:
        faults.append(kill(session, creator))
        faults.append(stop(session, creator, faults[0]["from"]))
        faults.append(partition(session, creator, faults[1]["from"]))
        faults.append(nb_leader(session, creator, faults[2]["from"]))
        settle(session, creator)
    except SystemExit as exc:
        failed = str(exc)           # what was recorded until then is still told
    finally:
        record = creator.finish()
        creator.clean()
    pods = record["pods"]
    double = sorted(n for n, p in pods.items() if len(p["values"]) > 1)
    lost = sorted(n for n, p in pods.items() if p["first"] is None and p["deleted"] is None)
    seconds = dict((f["fault"], f["seconds"]) for f in faults)
    stale = faults[1]["exit"] if len(faults) > 1 else None
    for name in double:
        print("double write: %s took %s" % (name, " then ".join(pods[name]["values"])))
    if lost:
        print("lost: %s" % ", ".join(lost))
    for error in record["errors"]:
        print("creator: %s" % error)
    print(failed or leadership(session)["row"])
    moved = faults[3] if len(faults) > 3 else {}
    print("failover: pods=%d deleted=%d lease_moves=%s release_s=%s stopped_exit=%s stale_fenced_lines=%s" % (
        len(pods), sum(1 for p in pods.values() if p["deleted"]), moved.get("moves", "none"),
        figure(moved.get("release")), stale, faults[1]["fenced"] if len(faults) > 1 else "none"))
    print("failover: kill_s=%s stop_s=%s partition_s=%s nb_leader_s=%s double_writes=%d lost=%d" % (
        figure(seconds.get("kill")), figure(seconds.get("stop")), figure(seconds.get("partition")),
        figure(seconds.get("nb_leader")), len(double), len(lost)))
    return 0 if not failed and all(f["seconds"] is not None for f in faults) and not double and not lost \
        and stale == "3" else 1


def figure(seconds):
    return "%.1f" % seconds if seconds is not None else "none"
