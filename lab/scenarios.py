"""The lab's scenarios: ``run`` (stand the lab up, verify it, print what it
found), ``chaos`` (break it on purpose, audit, repair, verify) and
``reboot`` (restart a node's container, no Ansible, verify until OK).
Each prints one last line that says how it went and returns an exit code.
"""

import json
import time
import uuid

from lab import credentials, failover, host, hotplug as hotplug_checks, layout as seed, providers as provider_checks, qos as qos_checks, vip as vip_checks
from lab.containers import up, wait_booted
from lab.host import exec_in, log, podman
from lab.playbooks import audit_findings, changed, matrix, picture_line, playbook, traces
from lab.workload import central_ctl, kubelet, node_of, run_pods, tenants, verify_vars, with_labels, workloads

WATCHER_UNIT, AGENT_UNIT = failover.WATCHER_UNIT, "ovn4nfv-agent"
VICTIM = "chaos-victim"


def keep_log(session, name, proc):
    with open(session.path(name + ".log"), "w") as handle:
        handle.write(proc.stdout)


def draw(session):
    """playbooks/topology.yml: the lab as a picture (SVG and a page) in
    .cache/lab/topology; returns the line that says where it is."""
    _s, _r, proc = playbook(session, "topology.yml", "-e", "topology_dest=" + session.path("topology"),
                            "-e", json.dumps({"topology_title": "ovn4nfv.k8s lab"}))
    return picture_line(proc)


def topology_text(session):
    master = session.container(session.layout.central[0])
    nb = exec_in(master, "ovn-nbctl", "--no-leader-only", "show", check=False).stdout
    sb = exec_in(master, "ovn-sbctl", "--no-leader-only", "show", check=False).stdout
    return nb + sb


def deletion_check(session):
    """A backend deleted stops receiving traffic, and a chain whose function
    is deleted fails closed, then mends when it is back: delete web-w2 and
    fwd-w2 as kubelet and kubectl would, run verify.yml with them named as
    deleted, make them again and run verify.yml once more. Returns the
    service and chain rows of those two runs that say so."""
    gone = with_labels(session, seed.FWD) + [(node_of(session, "web-w2"), "web-w2")]
    for node, pod in gone:
        kubelet(session, node, "delete", pod)
    try:
        _s, _r, deleted = playbook(session, "verify.yml", *verify_vars(session, [pod for _n, pod in gone]),
                                   check=False)
    finally:
        run_pods(session, sorted(set(node for node, _pod in gone)))
    _s, _r, back = playbook(session, "verify.yml", *verify_vars(session), check=False)
    keep_log(session, "verify-deleted", deleted)
    keep_log(session, "verify-back", back)
    service = [r for r in matrix(deleted, "service") if " deleted " in r]
    closed = [r for r in matrix(deleted, "chain") if " closed:" in r]
    mended = [r.replace(" crossed ", " mended, crossed ", 1) for r in matrix(back, "chain") if " crossed " in r]
    # a row verify.yml did not print is a check that did not pass
    missing = "FAIL %s: no %s row in " + session.path("%s.log")
    return {"service": service or [missing % ("service", "deleted backend", "verify-deleted")],
            "chain": (closed or [missing % ("chain", "closed", "verify-deleted")])
            + (mended or [missing % ("chain", "crossed", "verify-back")])}


def _figures(figures):
    """``a=1 b=2``: a check's measurements, for its heading."""
    return " ".join("%s=%d" % kv for kv in sorted(figures.items()))


def run(session):
    """``make lab``: the whole lab from nothing (or from what stands), each
    phase timed, then verify.yml, the deletions, the picture and a second
    run (site.yml, workloads.yml and the tenants' policy) that must change
    nothing. Prints ``lab: pods=.. links_ok=N/N deploy_s=.. rerun_s=..
    rerun_changed=0 pid1=systemd debian=.. services_ok=.. chains_ok=..
    taps_ok=.. policies_ok=.. vms_ok=..``, and with several masters
    ``leader=<master> term=<n> standbys=<k>`` (lab/failover.py:
    one Lease holder, its watcher serving as the leader in the NB's term,
    the others standing by)."""
    phases = {}

    def phase(name, function, *args, **kwargs):
        started = time.monotonic()
        value = function(*args, **kwargs)
        phases[name] = time.monotonic() - started
        log("%s: %.1fs" % (name, phases[name]))
        return value

    phase("install", host.install_host_packages)
    lab = session.lab_set("lab")
    releases = lab.releases(session.debian)
    phase("image", host.build_images, releases.values())
    phase("containers", up, session, lab)
    phase("api", credentials.start_api, session, lab)
    phase("site", playbook, session, "site.yml")
    phase("networks", playbook, session, "networks.yml")
    pods = phase("pods", run_pods, session)
    phase("workloads", workloads, session)
    _s, _r, verify = phase("verify", playbook, session, "verify.yml", *verify_vars(session), check=False)
    # several masters: one watcher leads, in the NB's term, the others stand by
    led = phase("leadership", failover.settled_leadership, session) if len(session.layout.masters) > 1 else None
    after = phase("deletions", deletion_check, session)
    services = matrix(verify, "service") + after["service"]
    chains, taps = matrix(verify, "chain") + after["chain"], matrix(verify, "tap")
    policies, vms = matrix(verify, "policy"), matrix(verify, "vm")
    provided = [r["line"] for r in phase("providers", provider_checks.check, session)] \
        if len(session.layout.provider_networks) >= 2 else []
    hotplugged = [r["line"] for r in phase("hotplug", hotplug_checks.check, session)]
    vrrp, vrrp_figures = phase("vip", vip_checks.check, session) if session.layout.virtual_ips else ([], {})
    vrrp = [r["line"] for r in vrrp]
    shaped, shaped_figures = phase("qos", qos_checks.check, session) if session.layout.qos_cap else ([], {})
    shaped = [r["line"] for r in shaped]
    picture = phase("picture", draw, session)
    rerun_s, recap, _p = phase("rerun", playbook, session, "site.yml")
    _w, recap_w, _p = phase("rerun-workloads", workloads, session)
    retenanted = phase("rerun-policies", tenants, session)
    rows = matrix(verify)
    print("\n".join(["", "== connectivity matrix"] + rows))
    print("\n".join(["", "== services"] + services + ["", "== chains"] + chains + ["", "== taps"] + taps
                    + ["", "== policies"] + policies + ["", "== vms"] + vms + ["", "== providers"] + provided
                    + ["", "== hotplug"] + hotplugged + ["", "== vip " + _figures(vrrp_figures)] + vrrp
                    + ["", "== qos " + _figures(shaped_figures)] + shaped))
    if led:
        print("\n".join(["", "== control plane", led["row"]]))
    print("\n== topology\n" + topology_text(session))
    print("== phases: " + " ".join("%s=%.1fs" % kv for kv in phases.items()))
    print("== picture: " + picture)
    print("== pods: " + ", ".join("%s@%s %s" % (p["pod"], p["node"], " ".join(p["ips"])) for p in pods))
    ok = sum(1 for r in rows if r.startswith("OK"))
    # the tenants' namespaces and policy, made again as they are, change nothing either
    rerun_changed = changed(recap, recap_w) + retenanted["changed"]
    deploy = sum(phases[k] for k in ("install", "image", "containers", "api", "site", "networks", "pods",
                                     "workloads"))
    # what each node runs as PID 1, read from the node
    init = sorted(set(exec_in(name, "ps", "-p", "1", "-o", "comm=").stdout.strip() for name in lab.nodes))
    if verify.returncode:
        print("verify.yml failed; see %s" % session.path("verify.yml.log"))
    print("== debian: " + " ".join("%s=%s" % (lab.nodes[n][0], r) for n, r in sorted(releases.items())))
    counts = dict((name, (sum(1 for r in found if r.startswith("OK")), len(found)))
                  for name, found in (("services", services), ("chains", chains), ("taps", taps),
                                      ("policies", policies), ("vms", vms), ("providers", provided),
                                      ("hotplug", hotplugged), ("vip", vrrp), ("qos", shaped)))
    print("lab: pods=%d links_ok=%d/%d deploy_s=%.0f rerun_s=%.0f rerun_changed=%d pid1=%s debian=%s "
          "services_ok=%d/%d chains_ok=%d/%d taps_ok=%d/%d policies_ok=%d/%d vms_ok=%d/%d provider_ok=%d/%d "
          "hotplug_ok=%d/%d vip_ok=%d/%d qos_ok=%d/%d" % (
              len(pods), ok, len(rows), deploy, rerun_s, rerun_changed, ",".join(init), session.debian,
              counts["services"][0], counts["services"][1], counts["chains"][0], counts["chains"][1],
              counts["taps"][0], counts["taps"][1], counts["policies"][0], counts["policies"][1],
              counts["vms"][0], counts["vms"][1], counts["providers"][0], counts["providers"][1],
              counts["hotplug"][0], counts["hotplug"][1], counts["vip"][0], counts["vip"][1],
              counts["qos"][0], counts["qos"][1])
          + (" leader=%s term=%s standbys=%d" % (led["leader"], led["term"], len(led["standbys"])) if led else ""))
    return 0 if (not led or led["ok"]) and verify.returncode == 0 and ok == len(rows) and rows and rerun_changed == 0 \
        and init == ["systemd"] and all(total and good == total for name, (good, total) in counts.items()
                                        if (name != "providers" or provided) and (name != "vip" or vrrp)
                                        and (name != "qos" or shaped)) else 1


def audit_lines(session, *extra):
    """audit.yml's finding and repair lines (it is told not to fail)."""
    _seconds, _recap, proc = playbook(session, "audit.yml", "-e", "audit_fail=false", *extra, check=False)
    if proc.returncode:
        raise SystemExit("lab: audit.yml failed; see %s" % session.path("audit.yml.log"))
    return audit_findings(proc)


def injections(session):
    """One fault of each kind the lab can produce, made by hand on the
    running lab: ``[(what, finding class, a word its line carries)]``.
    chaos's victim pod sits on the second worker."""
    lay = session.layout
    victim, first, second = lay.workers[1], session.container(lay.workers[0]), session.container(lay.workers[1])
    ports = central_ctl(session, "ovn-nbctl", "--bare", "--columns=name", "find", "Logical_Switch_Port",
                        "external_ids:ovn4nfv-pod-name=pod-w1a").stdout.split()
    made = [("a pod's port deleted by hand", "missing_port", ports[0])]
    central_ctl(session, "ovn-nbctl", "lsp-del", ports[0])
    kubelet(session, victim, "vanish", VICTIM)
    made.append(("a pod's namespace gone without a CNI DEL", "dead_interface", VICTIM))
    ghost = str(uuid.uuid4())
    exec_in(first, "ovs-vsctl", "add-port", "br-int", "chaos-stray", "--", "set", "Interface",
            "chaos-stray", "type=internal", "external_ids:iface-id=default_chaos-ghost_eth0",
            "external_ids:ovn4nfv-container-id=chaos", "external_ids:ovn4nfv-pod-uid=" + ghost)
    made.append(("a stray OVS port, a gone pod's", "stray_interface", "chaos-stray"))
    central_ctl(session, "ovn-sbctl", "chassis-add", "chaos-gone", "geneve", lay.underlay_address(99))
    made.append(("a chassis whose node is gone", "stale_chassis", "chaos-gone"))
    exec_in(second, "ip", "link", "set", "br-phy", "down")
    made.append(("%s's tunnel down (br-phy)" % lay.workers[1], "tunnel_down", "br-phy"))
    return made


def chaos(session):
    """Break the running lab on purpose, one fault of each kind (see
    :func:`injections`), then audit, repair, audit again and run
    verify.yml. ``clean_after`` counts what the audit finds after the
    repair and did not find before the faults were made (a mixed-release
    lab's version_skew stands before and after, and is printed, not
    counted). The daemons that mend some of these on their own in time
    (the watcher's resync, the node agents' sweep) are stopped while the
    faults are made and mended, so that what is found and repaired is the
    audit's doing and the count is exact; they start again before
    verify.yml. Prints
    ``chaos: injected=<n> found=<k> repaired=<r> clean_after=<yes|no> links_ok=<a>/<b>``."""
    lay = session.layout
    victim = lay.workers[1]
    kubelet(session, victim, "run", VICTIM, lay.request(seed.NET1), "{}", "{}")
    before = audit_lines(session)
    units = [(session.container(h), WATCHER_UNIT) for h in lay.masters] + [(n, AGENT_UNIT) for n in lay.kube]
    try:
        for name, unit in units:
            exec_in(name, "systemctl", "stop", unit)
        made = injections(session)
        found_lines = audit_lines(session)
        repaired_lines = [line for line in audit_lines(session, "-e", "audit_state=repaired")
                          if line.startswith("REPAIRED")]
        after = audit_lines(session)
    finally:
        for name, unit in units:
            exec_in(name, "systemctl", "start", unit, check=False)
        kubelet(session, victim, "delete", VICTIM)
        exec_in(session.container(lay.workers[1]), "ip", "link", "set", "br-phy", "up", check=False)

    def seen(lines, kind, word):
        return any((" %s: " % kind) in line and word in line for line in lines)
    found = [m for m in made if seen(found_lines, m[1], m[2])]
    repaired = [m for m in found if not seen(after, m[1], m[2])]
    _s, _r, verify = playbook(session, "verify.yml", *verify_vars(session), check=False)
    rows = matrix(verify)
    ok = sum(1 for r in rows if r.startswith("OK"))
    left = [line for line in after if line not in before]
    said = ["%s: %s (%s)" % ("found" if m in found else "MISSED", m[0], m[1]) for m in made]
    report = ["", "== standing before chaos (not injected, not counted)"] + before + ["", "== injected"] + said
    report += ["", "== found"] + found_lines + ["", "== repaired"] + repaired_lines + ["", "== after"] + after
    print("\n".join(report + ["", "== connectivity matrix"] + rows + traces(verify)))
    print("chaos: injected=%d found=%d repaired=%d clean_after=%s links_ok=%d/%d" % (
        len(made), len(found), len(repaired), "yes" if not left else "no", ok, len(rows)))
    return 0 if len(found) == len(made) and not left and rows and ok == len(rows) else 1


def reboot(session, node, tries=5):
    """Restart ``node``'s container (systemd shuts down and boots again; no
    Ansible runs), re-create its pods as kubelet would, and run verify.yml
    until every link, the Service, the chain, the tap and the policy's rows
    are OK (at most ``tries`` times). Prints
    ``reboot: node=<name> back_s=<x> links_ok=<k>/<m> checks_ok=<s>/<t>``,
    back_s from the restart to everything OK."""
    name = session.container(node)
    started = time.monotonic()
    podman("restart", "--time", "30", name, capture=True)
    wait_booted(name)
    run_pods(session, [node])
    for attempt in range(tries):
        _seconds, _recap, verify = playbook(session, "verify.yml", *verify_vars(session), check=False)
        rows = matrix(verify)
        services = sum((matrix(verify, kind) for kind in ("service", "chain", "tap", "policy", "vm")), [])
        ok = sum(1 for row in rows if row.startswith("OK"))
        services_ok = sum(1 for row in services if row.startswith("OK"))
        if rows and ok == len(rows) and services_ok == len(services) and verify.returncode == 0:
            break
        log("reboot: verify %d of %d: %d/%d links, %d/%d service, chain, tap and policy checks OK" % (
            attempt + 1, tries, ok, len(rows), services_ok, len(services)))
    back = time.monotonic() - started
    print("\n".join(rows + services))
    print("reboot: node=%s back_s=%.0f links_ok=%d/%d checks_ok=%d/%d" % (
        node, back, ok, len(rows), services_ok, len(services)))
    return 0 if rows and ok == len(rows) and services_ok == len(services) else 1
