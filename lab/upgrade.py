"""``lab upgrade`` (issue 39, upgrades without dropped traffic): the lab's
nodes upgraded in place from Debian 12 (bookworm) to 13 (trixie) by the
collection's ``playbooks/upgrade.yml``, packages upgraded on the running
nodes, the containers not replaced, while steady traffic runs; what was
sent and lost counted per node, per step of each node's upgrade and per
flow.

Without a lab it stands one up on bookworm first (``make lab
DEBIAN=bookworm``: :func:`lab.scenarios.run`). The packages come from a
flat repository on the host (lab/upgrade_repo.py), which the nodes see
read-only at ``/srv/ovn4nfv-debs``: the lab's networks reach no mirror.

The traffic (lab/flows.py on each node, about 100 probes a second a flow,
each timestamped): UDP echo from a pod to a pod on another node on each of
the lab's two networks, both ways round; from a probe pod on the first
master (a chassis, not a worker) to a pod on each worker; from a pod and
from the probe pod to the external host; TCP from the client pod to the
Service's VIP, and from the external host to the Service's external IP.
The Service is TCP only (lab/workload.py's ``web``: port 80 to the
backends' 7777), so its flows are TCP, one connection a probe: each goes
through the balancer afresh, as a new client's would, and a refused, reset
or stalled one (no echo within a second) is a lost probe.

upgrade.yml writes on each node it upgrades ``/var/lib/ovn4nfv/upgrade.json``
(``started``, ``finished``, and ``steps``: ``{step: [start, end]}``); the
node's window is ``[started, finished]``. A lost probe is *touched* when a
node of its flow's ends was being upgraded when it was sent, and
*untouched* otherwise (also when no node was being upgraded at all: a loss
then is nobody's upgrade's). A flow's ends (:func:`ends`): the node of its
client and the node of its server; for a flow to the external host also
every gateway the external host saw it come from (its SNAT address); for
the Service's VIP every node holding a backend; for the Service's external
IP every node holding a backend and the gateway whose router carries that
address (found in the NB). The external host is no node being upgraded.

Before the traffic starts, and before anything changes: upgrade.yml in
check mode (it prints the plan, changes nothing, writes no record) and in
the rolling order (refused: 23.03 to 25.03 is outside OVN's rolling span;
nothing written). Then, with the traffic running, a fault on purpose: a
process holds dpkg's lock on the last worker (as an unattended apt would),
so the first upgrade.yml stops at that node's packages step with its
record unfinished; the lock let go, the second run must plan that node
alone, resumed, and finish. Then audit.yml (clean: no ERROR line),
verify.yml (every link OK) and upgrade.yml once more, which must change
nothing. Prints the tables and,
last, ``upgrade: from=bookworm to=trixie nodes=<n> sent=<n> lost=<n>
max_gap_ms=<x> untouched_lost=<n> audit_clean=<yes|no> links_ok=<a>/<b>``;
0 when untouched_lost=0, the audit is clean, every link is OK, the rerun
changed nothing, every node upgraded runs the new release, check mode
planned and changed nothing, the rolling order was refused, and the run
stopped by the fault was resumed.
"""

import json
import select
import subprocess
import time

from lab import layout as seed, upgrade_repo
from lab.containers import DEBS_MOUNT, UPGRADED
from lab.host import KUBELET_DIR, exec_in, kubelet_argv, log, podman
from lab.playbooks import changed, matrix, playbook
from lab.workload import central_ctl, kubelet, node_of, service, verify_services, verify_vars

FROM, TO = "bookworm", "trixie"
PROBE_POD = "upg-probe"
UDP_PORT = 7790
STATE_FILE = "/var/lib/ovn4nfv/upgrade.json"
STOPFILE = "/run/ovn4nfv-flows.stop"
FLOWS_MAX_S = 3600
READY_S = 60
# the measurement goes on this long after upgrade.yml is done: a path that
# did not come back shows as a gap at least this long
TAIL_S = 5
# verify.yml's probe: its listeners hold the Service's target port for a while
VERIFY_PROBE = "/usr/local/lib/ovn4nfv-probe.py"
PLAYBOOK = "upgrade.yml"


# a fault injected on purpose: a process holding dpkg's frontend lock on
# the last node (as an unattended apt would), so that its upgrade fails at
# its packages step and the next run must resume it
LOCKED_NODE_S = 900
LOCK_MARK = "ovn4nfv-lab-dpkg-lock"
LOCKER = ("import fcntl, time  # %s\nhandle = open('/var/lib/dpkg/lock-frontend', 'w')\n"
          "fcntl.lockf(handle, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(%d)\n" % (
              LOCK_MARK, LOCKED_NODE_S))


def upgrade_vars(order="fail-safe"):
    return ("-e", "upgrade_to=" + TO, "-e", "upgrade_order=" + order,
            "-e", json.dumps({"upgrade_apt_sources": upgrade_repo.node_sources(TO)}))


# -- what happened when: pure, tested (tests/unit/test_lab_upgrade.py)

def node_windows(records, now):
    """``{node: (start, end)}`` from each node's upgrade.json (an upgrade
    not finished ends at ``now``)."""
    return dict((node, (r["started"], r.get("finished") or now)) for node, r in records.items()
                if r and r.get("started") is not None)


def step_windows(records, now):
    """``[(node, step, start, end)]`` in the order they started."""
    found = []
    for node, record in records.items():
        for step, span in ((record or {}).get("steps") or {}).items():
            if span and span[0] is not None:
                found.append((node, step, span[0], span[1] if len(span) > 1 and span[1] is not None else now))
    return sorted(found, key=lambda w: (w[2], w[0]))


def upgrading_at(stamp, windows):
    """The nodes being upgraded at ``stamp``."""
    return set(node for node, (start, end) in windows.items() if start <= stamp <= end)


def shown_plan(text):
    """The plan as upgrade.yml's ``Show it`` task printed it (its ``msg``
    lines), from the playbook's output; [] when it printed none."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("TASK [Show it]"):
            found = []
            for later in lines[index + 1:]:
                later = later.strip()
                if later.startswith("TASK [") or later == "]":
                    break
                if later.startswith('"') and not later.startswith('"msg"'):
                    found.append(json.loads(later.rstrip(",")))
            return found
    return []


def refusal(text):
    """The plan's refusal as upgrade.yml printed it (None without one)."""
    for line in text.splitlines():
        if line.startswith("fatal: ") and "outside OVN's rolling upgrade span" in line and "{" in line:
            try:
                return json.loads(line[line.index("{"):]).get("msg")
            except ValueError:
                return line.strip()
    return None


def untouched(lost_at, flow_ends, windows):
    """The lost probes' send times when none of ``flow_ends`` was being
    upgraded."""
    return [t for t in lost_at if not upgrading_at(t, windows) & set(flow_ends)]


def sent_between(buckets, start, end):
    """The probes sent in ``[start, end)``, from a flow's tenth-of-a-second
    counts: a bucket that straddles an edge counts for the part of it
    inside (so a window shorter than a bucket gets its share, not 0)."""
    total, width = 0.0, buckets["width"]
    for index, count in enumerate(buckets["counts"]):
        at = buckets["start"] + index * width
        inside = min(end, at + width) - max(start, at)
        if inside > 0:
            total += count * min(1.0, inside / width)
    return int(round(total))


def gap_between(gaps, start, end):
    """The longest of ``gaps`` (``[[from, to]]``) that overlaps ``[start, end]``, in ms (0: none)."""
    return max([round((b - a) * 1000, 1) for a, b in gaps if a < end and b > start] or [0.0])


def tally(flows, start, end):
    """``{sent, lost, max_gap_ms}`` of ``flows`` in ``[start, end)``."""
    return {"sent": sum(sent_between(f["buckets"], start, end) for f in flows),
            "lost": sum(1 for f in flows for t in f["lost_at"] if start <= t < end),
            "max_gap_ms": max([gap_between(f["gaps"], start, end) for f in flows] or [0.0])}


def idle_spans(windows, start, end):
    """The parts of ``[start, end]`` when no node was being upgraded."""
    spans, at = [], start
    for first, last in sorted(windows.values()):
        if first > at:
            spans.append((at, min(first, end)))
        at = max(at, last)
    if at < end:
        spans.append((at, end))
    return [(a, b) for a, b in spans if b > a]


def phase_rows(flows, records, start, end):
    """``[(phase, start, end, tally)]``: each node's window, each of its
    steps, and the time no node was being upgraded."""
    windows = node_windows(records, end)
    rows = []
    for node, (first, last) in sorted(windows.items(), key=lambda kv: kv[1]):
        rows.append((node, first, last, tally(flows, first, last)))
        rows += [("%s:%s" % (n, step), a, b, tally(flows, a, b)) for n, step, a, b in step_windows(records, end)
                 if n == node]
    idle = idle_spans(windows, start, end)
    merged = {"sent": 0, "lost": 0, "max_gap_ms": 0.0}
    for a, b in idle:
        one = tally(flows, a, b)
        merged = {"sent": merged["sent"] + one["sent"], "lost": merged["lost"] + one["lost"],
                  "max_gap_ms": max(merged["max_gap_ms"], one["max_gap_ms"])}
    rows.append(("no-upgrade", start, end, merged))
    return rows


def last_line(nodes, flows, untouched_lost, audit_clean, links):
    """The command's last line."""
    ok, total = links
    return ("upgrade: from=%s to=%s nodes=%d sent=%d lost=%d max_gap_ms=%.0f untouched_lost=%d audit_clean=%s "
            "links_ok=%d/%d" % (FROM, TO, nodes, sum(f["sent"] for f in flows), sum(f["lost"] for f in flows),
                                max([f["max_gap_ms"] for f in flows] or [0.0]), untouched_lost,
                                "yes" if audit_clean else "no", ok, total))


# -- the flows

def pod_ip(session, node, netns, subnet):
    """The address of the pod ``netns`` on ``node`` in ``subnet``."""
    import netaddr
    out = exec_in(session.container(node), "ip", "-n", netns, "-4", "-j", "addr").stdout
    for link in json.loads(out or "[]"):
        for info in link.get("addr_info", []):
            if netaddr.IPAddress(info["local"]) in netaddr.IPNetwork(subnet):
                return info["local"]
    raise SystemExit("lab: %s on %s has no address in %s" % (netns, node, subnet))


def external_ips(session):
    """``{external address: node}`` of the nodes with a gateway."""
    lay = session.layout
    return dict((ip, host) for _c, (host, nics) in lay.nodes.items() for net, ip in nics
                if net == seed.EXTERNAL_NET and host not in lay.externals)


def ovsdb_rows(text):
    """``ovn-nbctl --format=json list`` as ``[{column: value}]``: a set is
    a list, a map a dict, a UUID its string."""
    def value(v):
        if isinstance(v, list) and v and v[0] == "set":
            return [value(x) for x in v[1]]
        if isinstance(v, list) and v and v[0] == "map":
            return dict((value(k), value(x)) for k, x in v[1])
        if isinstance(v, list) and v and v[0] == "uuid":
            return v[1]
        return v
    table = json.loads(text)
    return [dict(zip(table["headings"], (value(v) for v in row))) for row in table["data"]]


def service_gateway(session, ip):
    """The node whose gateway router carries the Service's external ``ip``
    (the watcher's ``svcx_..._<ip>`` balancer on it), or None."""
    balancers = ovsdb_rows(central_ctl(session, "ovn-nbctl", "--format=json", "--columns=_uuid,name",
                                       "list", "Load_Balancer").stdout)
    wanted = [b["_uuid"] for b in balancers if b["name"].startswith("svcx_") and b["name"].endswith("_" + ip)]
    routers = ovsdb_rows(central_ctl(session, "ovn-nbctl", "--format=json", "--columns=load_balancer,external_ids",
                                     "list", "Logical_Router").stdout)
    for router in routers:
        balancers = router["load_balancer"] if isinstance(router["load_balancer"], list) else [router["load_balancer"]]
        if set(balancers) & set(wanted):
            return router["external_ids"].get("ovn4nfv-node")
    return None


def plan(session):
    """``({node: spec}, [flow])``: what lab/flows.py runs on each node,
    and each flow with its ``client`` and static ``ends`` (see :func:`ends`)."""
    lay = session.layout
    net1, net2 = lay.pod_subnets
    w1, w2 = lay.workers[0], lay.workers[1]
    master, external = lay.masters[0], lay.externals[0]
    ext_ip = [ip for net, ip in lay.nodes[lay.container(external)][1] if net == seed.EXTERNAL_NET][0]
    web = verify_services(session)[0]
    backends = sorted(set(node_of(session, pod) for pod in web["backends"]))
    pods = {"pod-w1a": w1, "pod-w1b": w1, "pod-w2a": w2, "pod-w2b": w2, PROBE_POD: master, "cli-w1": w1}
    specs = dict((host, {"servers": [], "flows": [], "max_seconds": FLOWS_MAX_S})
                 for host in [master, w1, w2, external])
    for pod in ("pod-w1a", "pod-w1b", "pod-w2a", "pod-w2b"):
        specs[pods[pod]]["servers"].append({"name": pod, "netns": pod, "udp": UDP_PORT})
    for pod in web["backends"]:
        specs[node_of(session, pod)]["servers"].append({"name": pod, "netns": pod, "tcp": seed_target(session)})
    specs[external]["servers"].append({"name": external, "netns": None, "udp": UDP_PORT})
    rows = [  # (name, client pod or None, client node, proto, dst, port, static ends, kind)
        ("w1-w2/net1", "pod-w1a", w1, "udp", pod_ip(session, w2, "pod-w2a", net1), UDP_PORT, [w1, w2], "pod"),
        ("w2-w1/net2", "pod-w2b", w2, "udp", pod_ip(session, w1, "pod-w1b", net2), UDP_PORT, [w2, w1], "pod"),
        ("m-w1/net1", PROBE_POD, master, "udp", pod_ip(session, w1, "pod-w1a", net1), UDP_PORT, [master, w1], "pod"),
        ("m-w2/net2", PROBE_POD, master, "udp", pod_ip(session, w2, "pod-w2b", net2), UDP_PORT, [master, w2], "pod"),
        ("w1-ext", "pod-w1b", w1, "udp", ext_ip, UDP_PORT, [w1, external], "external"),
        ("m-ext", PROBE_POD, master, "udp", ext_ip, UDP_PORT, [master, external], "external"),
        ("cli-vip", "cli-w1", w1, "tcp", web["vip"], web["port"], [w1] + backends, "service"),
    ]
    for ip in web["external_ips"]:
        gateway = service_gateway(session, ip)
        carried = [gateway] if gateway else sorted(set(external_ips(session).values()))
        rows.append(("ext-svc/%s" % ip, None, external, "tcp", ip, web["port"],
                     [external] + backends + carried, "service"))
    flows = []
    for name, pod, host, proto, dst, port, flow_ends, kind in rows:
        specs[host]["flows"].append({"name": name, "netns": pod, "proto": proto, "dst": dst, "port": port})
        flows.append({"name": name, "client": host, "ends": sorted(set(flow_ends)), "kind": kind})
    return specs, flows


def seed_target(session):
    """The Service's target port (the backends answer there)."""
    return service(session)["spec"]["ports"][0]["targetPort"]


def ends(flow, measured, gateways):
    """A flow's ends: its static ones (client's node, server's node, the
    Service's backends' and its external IP's gateway) and, for a flow to
    the external host, each gateway whose address the external host saw."""
    found = set(flow["ends"])
    if flow["kind"] == "external":
        for said, count in measured.get("answered_by", {}).items():
            seen = said.split()[-1]
            if count and seen in gateways:
                found.add(gateways[seen])
    return sorted(found)


class Flows:
    """lab/flows.py on each node of ``specs``, until :meth:`stop`."""

    def __init__(self, session, specs):
        self.procs = {}
        for host, spec in specs.items():
            name = session.container(host)
            kubelet_argv(name)         # flows.py staged beside the kubelet
            exec_in(name, "rm", "-f", STOPFILE)
            self.procs[host] = (name, subprocess.Popen(
                ["podman", "exec", "-i", name, "python3", KUBELET_DIR + "/flows.py", json.dumps(spec), STOPFILE],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True))
        deadline = time.monotonic() + READY_S
        for host, (name, proc) in self.procs.items():
            ready, _w, _x = select.select([proc.stdout], [], [], max(0.1, deadline - time.monotonic()))
            line = proc.stdout.readline() if ready else ""
            if line.strip() != '{"ready": true}':
                for _name, other in self.procs.values():
                    other.kill()
                raise SystemExit("lab: flows.py on %s did not start: %s %s" % (host, line, proc.stderr.read()[-2000:]))
        # every node's servers answer: the first probes now, everywhere
        for _name, proc in self.procs.values():
            proc.stdin.write("go\n")
            proc.stdin.flush()          # left open: communicate() closes it

    def stop(self):
        """Every node's figures: ``{host: flows.py's answer}``."""
        touches = [subprocess.Popen(["podman", "exec", name, "touch", STOPFILE]) for name, _p in self.procs.values()]
        for touch in touches:
            touch.wait(60)
        found = {}
        for host, (_name, proc) in self.procs.items():
            try:
                out, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            lines = [line for line in out.splitlines() if line.strip().startswith('{"started"')]
            if proc.returncode or not lines:
                raise SystemExit("lab: flows.py on %s failed (exit %s): %s" % (host, proc.returncode, err[-3000:]))
            found[host] = json.loads(lines[-1])
        return found


# -- the run

def release_of(session, host):
    out = exec_in(session.container(host), "sh", "-c", ". /etc/os-release && echo $VERSION_CODENAME",
                  check=False).stdout
    return out.strip()


def records(session):
    """Each node's upgrade.json (None where there is none)."""
    found = {}
    for host in session.layout.hosts():
        if host in session.layout.externals:
            continue
        out = exec_in(session.container(host), "cat", STATE_FILE, check=False)
        try:
            found[host] = json.loads(out.stdout) if out.returncode == 0 else None
        except ValueError:
            found[host] = None
    return found


def ready_lab(session):
    """A bookworm lab to upgrade: the one standing, or one stood up now."""
    if session.debian != FROM:
        raise SystemExit("lab: upgrade goes from %s to %s: the lab must be stood up on %s (DEBIAN=%s), not %s" % (
            FROM, TO, FROM, FROM, session.debian))
    if not session.running():
        log("upgrade: no lab stands; standing one up on %s (make lab DEBIAN=%s)" % (FROM, FROM))
        from lab import scenarios
        code = scenarios.run(session)
        log("upgrade: the %s lab stood up (its run's exit code %d)" % (FROM, code))
    lay = session.layout
    for host in lay.hosts():
        name = lay.container(host)
        mounts = podman("container", "inspect", "--format", "{{range .Mounts}}{{.Destination}} {{end}}", name,
                        capture=True).stdout.split()
        if DEBS_MOUNT not in mounts:
            raise SystemExit("lab: %s has no %s (a lab made before the upgrade's repository): make lab-down first"
                             % (name, DEBS_MOUNT))
    now = dict((host, release_of(session, host)) for host in lay.hosts() if host not in lay.externals)
    if any(release != FROM for release in now.values()):
        raise SystemExit("lab: the nodes run %s, not %s everywhere: make lab-down first" % (now, FROM))


def print_tables(measured, flows, rows):
    print("\n== phases (sent/lost/max_gap_ms of every flow in each window; gaps under 20 ms not kept: 0)")
    for phase, start, end, t in rows:
        print("%-28s %7.1fs %8d sent %6d lost %9.1f max_gap_ms" % (
            phase, end - start, t["sent"], t["lost"], t["max_gap_ms"]))
    print("\n== flows")
    for flow in flows:
        m = measured[flow["name"]]
        by = ", ".join("%s=%d" % kv for kv in sorted(m["answered_by"].items()))
        print("%-22s %-4s ends=%-30s sent=%-6d lost=%-5d untouched_lost=%-5d max_gap_ms=%-8.1f "
              "send_stall_ms=%-6.1f by: %s" % (flow["name"], m["proto"], ",".join(flow["ends"]), m["sent"], m["lost"],
                                               flow["untouched"], m["max_gap_ms"], m["send_stall_ms"], by))


def upgrade(session):
    """The whole issue-39 run (see the module's docstring); its exit code."""
    ready_lab(session)
    repo = upgrade_repo.build(FROM, TO)
    lay = session.layout
    for host in lay.workers + lay.externals:        # verify.yml's listeners leave the ports
        exec_in(lay.container(host), "python3", VERIFY_PROBE, "stop", check=False)
    checked, refused = before(session)
    kubelet(session, lay.masters[0], "run", PROBE_POD, lay.request(seed.BOTH))
    try:
        specs, flows = plan(session)
        log("upgrade: %d flows: %s" % (len(flows), ", ".join("%s %s" % (f["name"], ",".join(f["ends"]))
                                                             for f in flows)))
        running = Flows(session, specs)
        try:
            locked = lay.workers[-1]
            locker = lock_dpkg(session, locked)
            try:
                failed_s, _r, failed = playbook(session, PLAYBOOK, *upgrade_vars(), check=False)
            finally:
                unlock_dpkg(session, locked, locker)
            stopped = records(session).get(locked) or {}
            log("upgrade: upgrade.yml with dpkg's lock held on %s: %.0fs rc=%d, its record %s" % (
                locked, failed_s, failed.returncode, json.dumps(stopped)))
            seconds, recap, proc = playbook(session, PLAYBOOK, *upgrade_vars(), check=False)
            log("upgrade: upgrade.yml resumed %.0fs rc=%d %s" % (seconds, proc.returncode, json.dumps(recap)))
            resumed = shown_plan(proc.stdout)
            time.sleep(TAIL_S)          # a window of the measurement itself, after the upgrade
        finally:
            answers = running.stop()
    finally:
        try:
            kubelet(session, lay.masters[0], "delete", PROBE_POD)      # the lab as it was
        except SystemExit as error:     # said, and the figures are still worth their report
            log("upgrade: the probe pod stays: %s" % str(error)[:300])
    with open(session.path("upgrade-flows.json"), "w") as handle:      # every probe's figures, kept
        json.dump({"flows": answers, "plan": flows}, handle)
    measured = dict((f["name"], f) for answer in answers.values() for f in answer["flows"])
    start = min(a["started"] for a in answers.values())
    end = max(a["stopped"] for a in answers.values())
    found = records(session)
    windows = node_windows(found, end)
    gateways = external_ips(session)
    for flow in flows:
        flow["ends"] = ends(flow, measured[flow["name"]], gateways)
        flow["untouched"] = len(untouched(measured[flow["name"]]["lost_at"], flow["ends"], windows))
    print_tables(measured, flows, phase_rows(list(measured.values()), found, start, end))
    print("\n== upgrade.json\n" + "\n".join("%s: %s" % (h, json.dumps(r)) for h, r in sorted(found.items())))
    findings = upgrade_audit(session)
    _s, _r, verify = playbook(session, "verify.yml", *verify_vars(session), check=False)
    rows = matrix(verify)
    rerun_s, rerun, _p = playbook(session, PLAYBOOK, *upgrade_vars(), check=False)
    releases = dict((h, release_of(session, h)) for h in found)
    with open(session.path(UPGRADED), "w") as handle:
        json.dump({"from": FROM, "to": TO, "nodes": releases}, handle)
    errors = [line for line in findings if line.startswith("ERROR")]
    print("\n== audit\n" + "\n".join(findings or ["(nothing found)"]))
    print("\n== connectivity matrix\n" + "\n".join(rows))
    made = "cached" if repo["cached"] else "made in %.0fs" % repo["seconds"]
    print("\n== repository: %d packages, %.0f MB (%s)" % (repo["packages"], repo["bytes"] / 1e6, made))
    print("== upgrade.yml: %.0fs rc=%d; again: %.0fs rc=%d changed=%d" % (
        seconds, proc.returncode, rerun_s, _p.returncode, changed(rerun)))
    print("== releases: " + " ".join("%s=%s" % kv for kv in sorted(releases.items())))
    print("\n== the plan in check mode (rc=%d, changed=%d, no record written: %s)\n%s" % (
        checked["rc"], checked["changed"], checked["untouched"], "\n".join(checked["plan"]) or "(none shown)"))
    print("== the rolling order asked (rc=%d, no record written: %s): %s" % (
        refused["rc"], refused["untouched"], refused["said"]))
    fault_ok = failed.returncode != 0 and not stopped.get("finished") and "packages" in (stopped.get("steps") or {})
    resumed_ok = any(line.startswith("1. %s " % locked) and "(resumed" in line for line in resumed)
    print("== a fault injected: dpkg's lock held on %s: the run stopped there (rc=%d, steps %s); the next run "
          "resumed it (%s)" % (locked, failed.returncode, ",".join(sorted(stopped.get("steps") or {})),
                               next((line for line in resumed if line.startswith("1. ")), "no node planned")))
    ok = sum(1 for r in rows if r.startswith("OK"))
    total_untouched = sum(f["untouched"] for f in flows)
    upgraded = [h for h, r in found.items() if r and r.get("to") == TO and r.get("finished")]
    print(last_line(len(upgraded), list(measured.values()), total_untouched, not errors, (ok, len(rows))))
    good = (total_untouched == 0 and not errors and rows and ok == len(rows) and changed(rerun) == 0
            and proc.returncode == 0 and _p.returncode == 0 and all(r == TO for r in releases.values())
            and checked["ok"] and refused["ok"] and fault_ok and resumed_ok)
    return 0 if good else 1


def lock_dpkg(session, host):
    """A process holding dpkg's frontend lock on ``host``, once it holds
    it (:func:`unlock_dpkg` ends it; it lets go by itself after
    LOCKED_NODE_S)."""
    proc = subprocess.Popen(["podman", "exec", session.container(host), "python3", "-c", LOCKER],
                            stdout=subprocess.PIPE, universal_newlines=True)
    ready, _w, _x = select.select([proc.stdout], [], [], READY_S)
    if not ready or proc.stdout.readline().strip() != "locked":
        unlock_dpkg(session, host, proc)
        raise SystemExit("lab: could not hold dpkg's lock on %s" % host)
    return proc


def unlock_dpkg(session, host, proc):
    """The lock's holder ended, in the node and here."""
    exec_in(session.container(host), "pkill", "-f", LOCK_MARK, check=False)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


def before(session):
    """Before any change: upgrade.yml in check mode (the plan, nothing
    changed) and in the rolling order (refused, nothing changed)."""
    lay = session.layout
    nodes = [h for h in lay.hosts() if h not in lay.externals]

    def untouched():
        return all(r is None for r in records(session).values()) and all(
            release_of(session, h) == FROM for h in nodes)
    _s, recap, proc = playbook(session, PLAYBOOK, *upgrade_vars(), "--check", check=False)
    checked = {"rc": proc.returncode, "changed": changed(recap), "plan": shown_plan(proc.stdout),
               "untouched": untouched()}
    checked["ok"] = checked["rc"] == 0 and checked["changed"] == 0 and bool(checked["plan"]) and checked["untouched"]
    _s, _r, proc = playbook(session, PLAYBOOK, *upgrade_vars("rolling"), check=False)
    refused = {"rc": proc.returncode, "said": refusal(proc.stdout), "untouched": untouched()}
    refused["ok"] = refused["rc"] != 0 and bool(refused["said"]) and refused["untouched"]
    log("upgrade: check mode rc=%d changed=%d; rolling order rc=%d: %s" % (
        checked["rc"], checked["changed"], refused["rc"], refused["said"]))
    return checked, refused


def upgrade_audit(session):
    from lab.scenarios import audit_lines
    return audit_lines(session)
