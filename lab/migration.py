"""``lab migrate``: the lab's VM moved to the other worker by QEMU's live
migration over the underlay, and back, measured from outside.

A probe pod on the master (a third node: neither the source nor the
target) pings the VM's address every 10 ms and keeps one TCP connection
to the guest's echo server busy (lab/steady.py, in its network
namespace). First a baseline: the same probe for as long, with nothing
moving. Then the move, as KubeVirt makes it (lab/virt.py): a target
launcher on the other worker, named in the VMI's ``activePods``, whose
QEMU waits for the guest; the watcher binds the VM's port on both nodes
(``requested-chassis=<source>,<target>``, ``activation-strategy=rarp``);
the source's QEMU sends the guest; the target's announces it (RARP),
which activates the port there; the source launcher is done and deleted,
and the watcher binds the port on the target alone. The way back is the
same, so that the lab is as it was (the VM on the node its layout names).

Prints one line per move and, last, the first move's:
``migration: lost=<n> sent=<n> interruption_ms=<x> tcp_survived=<yes|no>``
with the baseline's figures beside it.
"""

import json
import subprocess
import time

from lab.host import KUBELET_DIR, exec_in, kubelet_argv, log
from lab.layout import UNDERLAY_NET
from lab.workload import central_ctl, kubelet, virt

PROBE_POD = "mig-probe"
MIGRATION_PORT = 4444
ECHO_PORT = 7777                # the guest's echo server (lab/guest)
BASELINE_S = 5
# how long the probe goes on once the move is done: a path that did not come
# back shows as an interruption at least this long (the run's end counts as
# a reply, so without it a lasting outage at the end would hide)
TAIL_S = 2
BIND_S = 30
STOPFILE = "/run/ovn4nfv-steady.stop"


def underlay_ip(session, host):
    return [ip for network, ip in session.layout.nodes[session.container(host)][1] if network == UNDERLAY_NET][0]


class Probe:
    """lab/steady.py in the probe pod on ``node``, against ``address``,
    until :meth:`stop`."""

    def __init__(self, session, node, address, max_seconds=120):
        self.name = session.container(node)
        kubelet_argv(self.name)         # steady.py staged beside the kubelet
        exec_in(self.name, "rm", "-f", STOPFILE)
        self.proc = subprocess.Popen(
            ["podman", "exec", self.name, "ip", "netns", "exec", PROBE_POD, "python3", KUBELET_DIR + "/steady.py",
             address, str(ECHO_PORT), STOPFILE, str(max_seconds)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)

    def stop(self):
        exec_in(self.name, "touch", STOPFILE)
        try:
            out, err = self.proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        if self.proc.returncode:
            raise SystemExit("lab: steady.py failed (exit %d): %s" % (self.proc.returncode, err.strip()[-2000:]))
        return json.loads(out)


def move(session, vm, network, source, target, address):
    """The VM from ``source`` to ``target``, probed; the probe's figures
    and the migration's own."""
    probe = Probe(session, session.layout.masters[0], address)
    try:
        received = virt(session, target, "receive", vm, network, str(MIGRATION_PORT))
        sent = virt(session, source, "send", vm, "%s:%d" % (underlay_ip(session, target), MIGRATION_PORT))
        virt(session, target, "running", vm)        # the guest lives on there, or why not
        bound = bound_on(session, vm, network, target)
        time.sleep(TAIL_S)      # a window of the measurement, after the move and the port's last binding
    finally:
        figures = probe.stop()
    if not bound:
        raise SystemExit("lab: the VM's port was not bound on %s alone within %ds of the move" % (target, BIND_S))
    figures.update(source=source, target=target, launcher=received["launcher"],
                   downtime_ms=sent["migrated"].get("downtime"), total_ms=sent["migrated"].get("total-time"))
    return figures


def bound_on(session, vm, network, node):
    """Whether the VM's port is bound on ``node`` alone (the watcher's last
    step of a move: requested-chassis, no activation strategy), read in the
    NB on the central (its RAFT leader), waited for (bounded)."""
    port = "default_vm:%s_eth1" % vm
    deadline = time.monotonic() + BIND_S
    while time.monotonic() < deadline:
        options = central_ctl(session, "ovn-nbctl", "--bare", "--columns=options",
                              "find", "Logical_Switch_Port", 'name="%s"' % port, check=False).stdout.split()
        if "requested-chassis=%s" % node in options and not any(o.startswith("activation-strategy") for o in options):
            return True
        time.sleep(0.2)
    return False


def baseline(session, address):
    probe = Probe(session, session.layout.masters[0], address)
    time.sleep(BASELINE_S)      # the baseline is a window of time itself, with nothing moving
    return probe.stop()


def line(name, moved, base):
    return ("%s: lost=%d sent=%d interruption_ms=%.0f tcp_survived=%s downtime_ms=%s total_ms=%s "
            "tcp_gap_ms=%.0f baseline_lost=%d baseline_sent=%d baseline_interruption_ms=%.0f" % (
                name, moved["lost"], moved["sent"], moved["interruption_ms"],
                "yes" if moved["tcp_survived"] else "no", moved["downtime_ms"], moved["total_ms"],
                moved["tcp_gap_ms"], base["lost"], base["sent"], base["interruption_ms"]))


def migrate(session):
    """The lab's first VM there and back; 0 when the TCP connection
    survived both moves and the guest answers on its node again."""
    node, vm, network, _peers = session.layout.vms()[0]
    other = [w for w in session.layout.workers if w != node][0]
    started = virt(session, node, "start", vm, network)
    address = started["lease"]["address"].split("/")[0]
    probe = kubelet(session, session.layout.masters[0], "run", PROBE_POD,
                    json.dumps([{"name": network, "interface": "eth0"}]))
    try:
        base = baseline(session, address)
        log("baseline: %s" % json.dumps(base))
        there = move(session, vm, network, node, other, address)
        log("%s -> %s: %s" % (node, other, json.dumps(there)))
        back = move(session, vm, network, other, node, address)
        log("%s -> %s: %s" % (other, node, json.dumps(back)))
        checked = virt(session, node, "check", vm, "%s=%s" % (PROBE_POD, probe["ips"][0].split("/")[0]))
    finally:
        kubelet(session, session.layout.masters[0], "delete", PROBE_POD)        # the lab as it was
    print("\n".join(row["line"] for row in checked))
    print(line("migration_back", back, base))
    print(line("migration", there, base))
    return 0 if there["tcp_survived"] and back["tcp_survived"] and all(row["ok"] for row in checked) else 1
