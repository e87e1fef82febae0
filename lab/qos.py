"""``lab qos``: QoS per interface (issue 37) measured on the lab's data
plane, across the overlay, from outside the product.

The inventory caps the second pod network's interfaces (``qos_max``). In
the namespace ``qos``: ``qos-lim`` on the first worker asks for four times
the cap's rate and a DSCP mark, ``qos-free`` beside it asks for nothing,
and ``qos-sink`` on the second worker receives. The rows, read from the
pods' own namespaces and the API:

* ``qos-lim`` is served at the cap, and a ``QoSCapped`` Event on it says
  what it asked for and what it got;
* what ``qos-lim`` sends (iperf3, UDP offered at three times the cap)
  reaches ``qos-sink`` within 10% of the cap's rate;
* what ``qos-free`` sends the same way is not limited (above twice the cap);
* ``qos-sink`` reads the DSCP of what each sends from the IP header
  (``IP_RECVTOS``): ``qos-lim``'s carries its mark, ``qos-free``'s none.

The pods are made at the start and deleted at the end. Prints the rows
and, last, ``qos: qos_ok=<n>/<n> limited_kbps=<x> free_kbps=<y>``.
"""

import json
import subprocess

from lab.host import exec_in
from lab.workload import kubelet, report, row, tally

NAMESPACE = "qos"
DSCP = 46
PORT = 5201
SECONDS = 4
# prints the TOS byte of the first datagram to the address argv[1]:9999, or nothing after 10 s
TOS_READER = """import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1); s.bind((sys.argv[1], 9999)); s.settimeout(10)
print("ready", flush=True)
try:
    _data, ancillary, _flags, _addr = s.recvmsg(64, 64)
except socket.timeout:
    raise SystemExit(1)
print(next(d[0] for level, kind, d in ancillary if level == socket.IPPROTO_IP and kind == socket.IP_TOS))
"""
SEND = "import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); " \
       "[s.sendto(b'qos', (sys.argv[1], 9999)) for _ in range(3)]"


def _row(ok, text):
    return row("qos", ok, text)


def _in_pod(session, node, pod, *argv):
    return exec_in(session.container(node), "ip", "netns", "exec", pod, *argv, check=False)


def _address(session, node, pod):
    link = json.loads(_in_pod(session, node, pod, "ip", "-j", "-4", "addr", "show", "dev", "eth0").stdout or "[{}]")
    return link[0]["addr_info"][0]["local"]


def _received_kbits(session, node, pod, sink, kbits):
    """The rate (kbit/s) at which ``sink`` received UDP ``pod`` offered at
    ``kbits`` for SECONDS (iperf3's receiver side)."""
    out = _in_pod(session, node, pod, "iperf3", "-c", sink, "-p", str(PORT), "-u", "-b", "%dK" % kbits, "-l",
                  "1400", "-t", str(SECONDS), "-J", "--connect-timeout", "5000").stdout
    found = json.loads(out or "{}").get("end", {})
    if "sum_received" in found:
        return found["sum_received"]["bits_per_second"] / 1000.0
    total = found.get("sum", {})        # an iperf3 without sum_received: the sender's rate, less what was lost
    return total.get("bits_per_second", 0) * (1 - total.get("lost_percent", 100) / 100.0) / 1000.0


def _dscp(session, node, pod, sink_node, sink):
    """The DSCP ``sink`` reads from what ``pod`` sends, or None."""
    reader = subprocess.Popen(["podman", "exec", session.container(sink_node), "ip", "netns", "exec", "qos-sink",
                               "python3", "-c", TOS_READER, sink], stdout=subprocess.PIPE, universal_newlines=True)
    try:
        if reader.stdout.readline().strip() != "ready":
            return None
        for _attempt in range(20):
            _in_pod(session, node, pod, "python3", "-c", SEND, sink)
            try:
                out, _err = reader.communicate(timeout=0.5)
                return int(out.strip()) >> 2 if out.strip() else None
            except subprocess.TimeoutExpired:
                continue
        return None
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.communicate()


def check(session):
    layout = session.layout
    cap = layout.qos_cap
    network = cap["network"]
    near, far = layout.workers[0], layout.workers[1]
    asked = {"rate": 4 * cap["rate"], "burst": 4 * cap.get("burst", cap["rate"] // 10), "dscp": DSCP}
    pods = (("qos-lim", near, asked), ("qos-free", near, None), ("qos-sink", far, None))
    rows, figures = [], {}
    try:
        for pod, node, qos in pods:
            entry = {"name": network, "interface": "eth0"}
            if qos:
                entry["qos"] = qos
            kubelet(session, node, "run", "%s/%s" % (NAMESPACE, pod), json.dumps([entry]))
        told = [m for m in kubelet(session, near, "events", NAMESPACE + "/qos-lim", "QoSCapped")
                if "rate %d kbit/s" % cap["rate"] in m]
        rows.append(_row(told, "qos-lim asks for %d kbit/s on %s (capped at %d): %s" % (
            asked["rate"], network, cap["rate"], "served at the cap, a QoSCapped Event says so" if told else
            "no QoSCapped Event naming the cap")))
        sink = _address(session, far, "qos-sink")
        exec_in(session.container(far), "ip", "netns", "exec", "qos-sink", "iperf3", "-s", "-B", sink, "-p", str(PORT),
                "-D", "--pidfile", "/run/ovn4nfv-lab-qos-iperf.pid")
        offered = 3 * cap["rate"]
        limited = _received_kbits(session, near, "qos-lim", sink, offered)
        free = _received_kbits(session, near, "qos-free", sink, offered)
        figures = {"limited_kbps": limited, "free_kbps": free}
        rows.append(_row(abs(limited - cap["rate"]) <= 0.1 * cap["rate"], "qos-lim -> qos-sink@%s, %d kbit/s offered: "
                         "%.0f kbit/s received (its rate %d, within 10%%)" % (far, offered, limited, cap["rate"])))
        rows.append(_row(free > 2 * cap["rate"], "qos-free -> qos-sink@%s, %d kbit/s offered: %.0f kbit/s received "
                         "(not limited: above twice %d)" % (far, offered, free, cap["rate"])))
        marks = [_dscp(session, near, pod, far, sink) for pod in ("qos-lim", "qos-free")]
        rows.append(_row(marks == [DSCP, 0], "DSCP read in qos-sink: qos-lim's %s (asked %d), qos-free's %s" % (
            marks[0], DSCP, marks[1])))
    finally:
        exec_in(session.container(far), "sh", "-c", "kill $(cat /run/ovn4nfv-lab-qos-iperf.pid) 2>/dev/null; "
                "rm -f /run/ovn4nfv-lab-qos-iperf.pid", check=False)
        for pod, node, _qos in pods:
            kubelet(session, node, "delete", "%s/%s" % (NAMESPACE, pod))
    return rows, figures


def run(session):
    """``lab qos``: 0 when every row is OK."""
    rows, figures = check(session)
    return report(rows, line(rows, figures))


def line(rows, figures):
    return tally("qos", "qos_ok", rows) + "".join(" %s=%d" % kv for kv in sorted(figures.items()))
