"""``lab vip``: a VRRP pair holds the first pod network's virtual IP in
turn through OVN's virtual port (issue 37), checked from outside the
product on the running lab.

The inventory declares the virtual IP on the network (``virtual_ips``,
with the namespace ``vrrp`` allowed to hold it). Two pods of that
namespace ask for it and run Debian's keepalived: ``vrrp-w1`` on the first
worker (MASTER), ``vrrp-w2`` on the second (BACKUP); ``pod-w2a`` on the
second worker is the client, so that the master is on another node. The
pod ``vrrp-x`` asks for it from the namespace ``default``, which may not.
The rows, each read from the NB and SB on the master, the pods' own
namespaces and the API:

* the holders' ports are the virtual port's parents and carry the address
  in their port security; ``vrrp-x``'s does not, and a ``VirtualIPRefused``
  Event on it says why;
* the SB binds the address to the master's port and the client reaches it;
* while the client pings it every 10 ms, the master's keepalived is
  stopped: the SB binds it to the backup's port, which answers; the gap
  and the replies lost are measured;
* ``vrrp-x`` claims the address (a gratuitous ARP): the SB's binding and
  the client's neighbour stay the backup's.

The pods are made at the start and deleted at the end. Prints the rows
and, last, ``vip: vip_ok=<n>/<n> failover_ms=<x> lost=<n>``.
"""

import json
import re
import subprocess

from lab.host import exec_in
from lab.workload import kubelet, report, row, tally, until

HOLDERS = (("vrrp-w1", 0, "MASTER", 200), ("vrrp-w2", 1, "BACKUP", 100))
ROGUE, CLIENT = "vrrp-x", "pod-w2a"
INTERVAL_MS = 10
KEEPALIVED = """vrrp_instance nf {
  state %s
  interface eth0
  virtual_router_id 51
  priority %d
  advert_int 1
  virtual_ipaddress {
    %s/%s
  }
}
"""
# a gratuitous ARP reply from the pod's eth0: its MAC claims the address (argv[1])
GARP = """import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(("eth0", 0))
mac = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
ip = socket.inet_aton(sys.argv[1])
s.send(b"\\xff" * 6 + mac + b"\\x08\\x06" + b"\\x00\\x01\\x08\\x00\\x06\\x04\\x00\\x02" + mac + ip + b"\\xff" * 6 + ip)
"""


def _row(ok, text):
    return row("vip", ok, text)


def _in_pod(session, node, pod, *argv):
    return exec_in(session.container(node), "ip", "netns", "exec", pod, *argv, check=False)


def _ping(session, node, pod, address):
    return _in_pod(session, node, pod, "ping", "-n", "-c", "2", "-W", "2", "-i", "0.2", address).returncode == 0


def check(session):
    layout = session.layout
    vip = layout.virtual_ips[0]
    network, address, namespace = vip["network"], vip["address"], vip["namespaces"][0]
    prefix = layout.pod_subnets[layout.pod_networks.index(network)].split("/")[1]
    master = session.container(layout.masters[0])
    nodes = dict((pod, layout.workers[index]) for pod, index, _s, _p in HOLDERS)
    vport = "vip-%s-%s" % (network, address)
    entry = [{"name": network, "interface": "eth0", "virtual_ips": [address]}]
    rows, figures = [], {}
    try:
        for pod, _i, _s, _p in HOLDERS:
            kubelet(session, nodes[pod], "run", "%s/%s" % (namespace, pod), json.dumps(entry))
        kubelet(session, layout.workers[0], "run", "default/" + ROGUE, json.dumps(entry))
        ports = ["%s_%s_eth0" % (namespace, pod) for pod, _i, _s, _p in HOLDERS]

        def nb(*argv):
            return exec_in(master, "ovn-nbctl", "--no-leader-only", *argv, check=False).stdout.strip()

        def bound():
            return exec_in(master, "ovn-sbctl", "--no-leader-only", "--bare", "--columns=virtual_parent", "find",
                           "port_binding", "logical_port=" + vport, check=False).stdout.strip()
        wanted = "virtual-parents=" + ",".join(sorted(ports))
        parents = until(lambda: wanted in nb("--bare", "--columns=options", "find", "logical_switch_port",
                                             "name=" + vport))
        secured = [address in nb("--bare", "--columns=port_security", "list", "logical_switch_port", p)
                   for p in ports + ["default_%s_eth0" % ROGUE]]
        told = [m for m in kubelet(session, layout.workers[0], "events", "default/" + ROGUE, "VirtualIPRefused")
                if address in m]
        rows.append(_row(parents and secured == [True, True, False] and told, "%s on %s: held by %s (the virtual "
                         "port's parents: %s); %s of namespace default %s" % (
                             address, network, ", ".join(ports), "yes" if parents else "no", ROGUE,
                             "refused (VirtualIPRefused), its port security without it" if told and not secured[2]
                             else "not refused: port security %s, Event %s" % (secured[2], told))))
        for pod, _i, state, priority in HOLDERS:
            _keepalived(session, nodes[pod], pod, KEEPALIVED % (state, priority, address, prefix))
        first = until(lambda: bound() == ports[0] and _ping(session, layout.workers[1], CLIENT, address))
        rows.append(_row(first, "the SB binds %s to %s; %s@%s reaches it: %s" % (
            address, ports[0], CLIENT, layout.workers[1], "yes" if first else "no (bound to %r)" % bound())))
        steady = subprocess.Popen(["podman", "exec", session.container(layout.workers[1]), "ip", "netns", "exec",
                                   CLIENT, "ping", "-n", "-i", "%.2f" % (INTERVAL_MS / 1000.0), "-w", "120", address],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        try:
            _stop(session, nodes[HOLDERS[0][0]], HOLDERS[0][0])        # the master is stopped
            moved = until(lambda: bound() == ports[1] and _ping(session, layout.workers[1], CLIENT, address))
        finally:
            exec_in(session.container(layout.workers[1]), "pkill", "-INT", "-f", "ping -n -i 0.01", check=False)
            out, _err = steady.communicate(timeout=30)
        answered = sorted(set(int(n) for n in re.findall(r"icmp_seq=(\d+)", out or "")))
        sent = answered[-1] if answered else 0
        figures = {"failover_ms": max([b - a - 1 for a, b in zip(answered, answered[1:])] + [0]) * INTERVAL_MS,
                   "lost": sent - len(answered)}
        rows.append(_row(moved and sent > 20, "%s's keepalived stopped: the SB binds %s to %s, which answers %s@%s; "
                         "%d of %d answered, the longest gap %d ms" % (
                             HOLDERS[0][0], address, ports[1], CLIENT, layout.workers[1], len(answered), sent,
                             figures["failover_ms"]) if moved else "%s's keepalived stopped: still bound to %r" % (
                             HOLDERS[0][0], bound())))
        _in_pod(session, layout.workers[0], ROGUE, "ip", "addr", "add", "%s/%s" % (address, prefix), "dev", "eth0")
        _in_pod(session, layout.workers[0], ROGUE, "python3", "-c", GARP, address)
        backup_mac = json.loads(_in_pod(session, layout.workers[1], HOLDERS[1][0], "ip", "-j", "link", "show",
                                        "eth0").stdout or "[{}]")[0].get("address")
        kept = bound() == ports[1] and _ping(session, layout.workers[1], CLIENT, address) and backup_mac in \
            _in_pod(session, layout.workers[1], CLIENT, "ip", "neigh", "show", address).stdout
        rows.append(_row(kept, "%s claims %s (a gratuitous ARP): %s" % (
            ROGUE, address, "dropped; still %s's, which answers" % ports[1] if kept else
            "bound to %r now" % bound())))
    finally:
        for pod, _i, _s, _p in HOLDERS:
            _stop(session, nodes[pod], pod)
        for pod, node in list(nodes.items()) + [(ROGUE, layout.workers[0])]:
            ref = ("default/" if pod == ROGUE else namespace + "/") + pod
            kubelet(session, node, "delete", ref)
    return rows, figures


def _files(pod):
    return "/run/ovn4nfv-lab-%s" % pod


def _keepalived(session, node, pod, conf):
    """keepalived's VRRP in the pod's namespace (it daemonizes)."""
    base = _files(pod)
    exec_in(session.container(node), "sh", "-c", "cat > %s.conf <<'EOF'\n%sEOF" % (base, conf))
    _in_pod(session, node, pod, "keepalived", "--vrrp", "--use-file", base + ".conf", "--pid", base + ".pid",
            "--vrrp_pid", base + ".vrrp.pid", "--checkers_pid", base + ".checkers.pid", "--bfd_pid", base + ".bfd.pid")


def _stop(session, node, pod):
    """keepalived stopped as its service is (SIGTERM: it gives the address
    up, priority 0), waited for."""
    base = _files(pod)
    exec_in(session.container(node), "sh", "-c", "p=$(cat %s.pid 2>/dev/null) && kill $p && "
            "for i in $(seq 100); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; rm -f %s.*" % (base, base),
            check=False)


def run(session):
    """``lab vip``: 0 when every row is OK."""
    rows, figures = check(session)
    return report(rows, line(rows, figures))


def line(rows, figures):
    return tally("vip", "vip_ok", rows) + "".join(" %s=%d" % kv for kv in sorted(figures.items()))
