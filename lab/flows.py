"""Steady traffic with a timestamp on every probe (issue 39: what an
upgrade costs the traffic), run on a lab node; standard library only.

    flows.py SPEC_JSON STOPFILE

SPEC_JSON is ``{"servers": [...], "flows": [...], "max_seconds": n, "rate": n}``.
A server is ``{"name", "netns" (null: the node's own), "udp": port or
null, "tcp": port or null}``: it echoes each UDP datagram, and each line
on a TCP connection, followed by `` <name> <the client's address as
seen>``. A flow is ``{"name", "netns", "proto" ("udp" or "tcp"), "dst",
"port"}``; every flow sends ``rate`` probes a second (100 by default).

A UDP probe is one datagram ``<seq> <send time>``. A TCP probe is one
connection of its own: connect, the same line, its echo, then the client
closes (a FIN; the server closes when it reads the end). So every TCP probe
goes through the Service's balancer afresh and may reach either backend,
as a new client would; a refused or reset connection, or one that stalls,
is a lost probe. The client closes first and normally, so that its
address and port wait in TIME_WAIT (60 s) before another probe may take
them again: closed with a reset instead, a port came back within the
seconds the userspace datapath's conntrack still kept the old connection,
and OVS 3.1's ovs-vswitchd (Debian 12) aborted on an assertion
(conntrack.c:1063, ``conn->conn_type == CT_CONN_TYPE_DEFAULT``) on both
workers, three times in 90 s, with no upgrade running. Closed with a FIN,
the kernel's port allocator still came back to a port after a few
minutes, while the userspace conntrack may keep a connection it saw close
for up to 15 minutes (its CLOSING timeout), and 3.1 still aborted, every
upgrade run, 3 to 5 minutes into the traffic (the assertion went in OVS
3.2.3, ad92b0da1). So each TCP probe binds a source port of its own from
SOURCE_PORTS, in turn: no 4-tuple comes back within a run (51,000 ports,
over 8 minutes at 100 probes a second); the flows measure the upgrade, not
that bug.
A probe answered later than LATE_S after it was sent counts as lost (for
TCP: the SYN's first retransmission comes a second later, so a stalled
exchange is lost).

It says ``{"ready": true}`` once its sockets are made (its servers
answer), and sends its first probe when it reads ``go`` on its standard
input (the lab says so once every node's servers answer: a probe sent
before would be lost to the harness, not the network). It runs until
STOPFILE exists (or max_seconds pass), then waits LATE_S for
the last answers (its servers answer LINGER_S longer: the other nodes'
flows stop a moment later), and prints JSON: for each flow ``sent``,
``lost``, ``lost_at`` (each lost probe's send time), ``max_gap_ms`` (the
longest time between the send times of two answered probes in a row, the
first probe and the last one sent counting as answered), ``gaps`` (each
such interval longer than GAP_MIN_S, as ``[from, to]``), ``buckets``
(``{"start", "width", "counts"}``: how many probes were sent in each
tenth of a second), ``answered_by`` (``"<server> <client address as
seen>": count``) and ``send_stall_ms`` (the sender's own longest pause
between two probes: a gap no longer than it is this process's, not the
network's). Every module it needs is imported before the first probe: the
node's Python may be upgraded under it.
"""

import ctypes
import errno
import json
import os
import selectors
import socket
import sys
import time

LATE_S = 1.0
LINGER_S = 3.0
SERVED_S = 5.0
GAP_MIN_S = 0.02
SOURCE_PORTS = (10000, 61000)
BUCKET_S = 0.1
CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"
LIBC = ctypes.CDLL(None, use_errno=True)


def in_netns(netns, make):
    """``make()`` called in the network namespace ``netns`` (None: this
    one), back here afterwards: a socket made there stays there."""
    if not netns:
        return make()
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(os.path.join(NETNS_DIR, netns), os.O_RDONLY)
    try:
        if LIBC.setns(there, CLONE_NEWNET):
            raise OSError(ctypes.get_errno(), "setns %s" % netns)
        try:
            return make()
        finally:
            if LIBC.setns(home, CLONE_NEWNET):
                raise OSError(ctypes.get_errno(), "setns back from %s" % netns)
    finally:
        os.close(home)
        os.close(there)


def udp_socket(netns, port=None):
    def make():
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if port is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("0.0.0.0", port))
        sock.setblocking(False)
        return sock
    return in_netns(netns, make)


def tcp_listener(netns, port):
    def make():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", port))
        sock.listen(256)
        sock.setblocking(False)
        return sock
    return in_netns(netns, make)


class SourcePorts:
    """TCP probes' source ports, each in turn from ``SOURCE_PORTS`` and
    back to the first after the last (a port still taken is passed over)."""

    def __init__(self, first=SOURCE_PORTS[0], last=SOURCE_PORTS[1]):
        self.first, self.last, self.at = first, last, first

    def take(self):
        port = self.at
        self.at = self.at + 1 if self.at + 1 < self.last else self.first
        return port


def tcp_client(netns, ports, tries=64):
    """A non-blocking TCP socket in ``netns`` bound to the next free port
    of ``ports`` (a :class:`SourcePorts`)."""
    def make():
        for _try in range(tries):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("0.0.0.0", ports.take()))
            except OSError:
                sock.close()
                continue
            sock.setblocking(False)
            return sock
        raise OSError(errno.EADDRINUSE, "no free source port in %d tries" % tries)
    return in_netns(netns, make)


class Flow:
    """One flow's probes: each one's send time (by sequence number) and
    whether it was answered in time."""

    def __init__(self, spec):
        self.spec = spec
        self.name, self.proto = spec["name"], spec["proto"]
        self.target = (spec["dst"], int(spec["port"]))
        self.sent_at = []
        self.answered = bytearray()
        self.by = {}
        self.pending = {}           # seq -> TCP socket (or None for UDP)
        self.sock = udp_socket(spec.get("netns")) if self.proto == "udp" else None
        self.stall = 0.0

    def answer(self, seq, said, now):
        if 0 <= seq < len(self.sent_at) and not self.answered[seq] and now - self.sent_at[seq] <= LATE_S:
            self.answered[seq] = 1
            self.by[said] = self.by.get(said, 0) + 1

    def result(self, ended):
        sent, times = len(self.sent_at), self.sent_at
        lost_at = [round(times[i], 3) for i in range(sent) if not self.answered[i]]
        marks = [times[0]] if times else []
        marks += [times[i] for i in range(sent) if self.answered[i]]
        marks += [times[-1]] if times else []
        gaps = [[round(a, 3), round(b, 3)] for a, b in zip(marks, marks[1:]) if b - a > GAP_MIN_S]
        longest = max([b - a for a, b in zip(marks, marks[1:])] or [0.0])
        start = int(times[0] / BUCKET_S) * BUCKET_S if times else 0.0
        counts = []
        for stamp in times:
            index = int((stamp - start) / BUCKET_S)
            counts.extend([0] * (index + 1 - len(counts)))
            counts[index] += 1
        return {"name": self.name, "proto": self.proto, "dst": self.target[0], "port": self.target[1],
                "sent": sent, "lost": len(lost_at), "lost_at": lost_at, "max_gap_ms": round(longest * 1000, 1),
                "gaps": gaps, "buckets": {"start": round(start, 1), "width": BUCKET_S, "counts": counts},
                "answered_by": self.by, "send_stall_ms": round(self.stall * 1000, 1),
                "started": round(times[0], 3) if times else None, "ended": round(ended, 3)}


def parse_echo(data):
    """``(seq, "<server> <client as seen>")`` of an echo, or None."""
    words = data.decode("ascii", "replace").split()
    if len(words) < 4 or not words[0].isdigit():
        return None
    return int(words[0]), " ".join(words[2:4])


class Runner:
    def __init__(self, spec):
        self.selector = selectors.DefaultSelector()
        self.servers = []
        for server in spec.get("servers", []):
            tag = (" %s " % server["name"]).encode()
            if server.get("udp"):
                sock = udp_socket(server.get("netns"), int(server["udp"]))
                self.selector.register(sock, selectors.EVENT_READ, ("udp-server", tag))
                self.servers.append(sock)
            if server.get("tcp"):
                sock = tcp_listener(server.get("netns"), int(server["tcp"]))
                self.selector.register(sock, selectors.EVENT_READ, ("tcp-listen", tag))
                self.servers.append(sock)
        self.flows = [Flow(f) for f in spec.get("flows", [])]
        for flow in self.flows:
            if flow.sock is not None:
                self.selector.register(flow.sock, selectors.EVENT_READ, ("udp-client", flow))
        self.step = 1.0 / float(spec.get("rate") or 100)
        self.buffers = {}
        self.served = {}            # a server's connection: when it was accepted
        self.ports = SourcePorts()

    def send(self, flow, now):
        seq = len(flow.sent_at)
        if flow.sent_at:
            flow.stall = max(flow.stall, now - flow.sent_at[-1])
        flow.sent_at.append(now)
        flow.answered.append(0)
        line = b"%d %.6f\n" % (seq, now)
        if flow.proto == "udp":
            try:
                flow.sock.sendto(line, flow.target)
            except OSError:
                pass            # not answered: lost
            return
        try:
            sock = tcp_client(flow.spec.get("netns"), self.ports)
        except OSError:
            return
        code = sock.connect_ex(flow.target)
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            return
        flow.pending[seq] = sock
        self.buffers[sock] = b""
        self.selector.register(sock, selectors.EVENT_WRITE, ("tcp-connect", (flow, seq, line)))

    def close(self, sock):
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        self.buffers.pop(sock, None)
        self.served.pop(sock, None)
        sock.close()

    def expire(self, now):
        """Probes unanswered for LATE_S, and a server's connections whose
        client never closed (its FIN lost) after SERVED_S, closed."""
        for sock in [c for c, at in self.served.items() if now - at > SERVED_S]:
            self.close(sock)
        for flow in self.flows:
            for seq in [s for s in flow.pending if now - flow.sent_at[s] > LATE_S]:
                self.close(flow.pending.pop(seq))

    def event(self, key, now):
        kind, data = key.data
        sock = key.fileobj
        if kind == "udp-server":
            try:
                got, peer = sock.recvfrom(2048)
                sock.sendto(got.rstrip(b"\n") + data + peer[0].encode() + b"\n", peer)
            except OSError:
                pass
        elif kind == "tcp-listen":
            try:
                conn, peer = sock.accept()
            except OSError:
                return
            conn.setblocking(False)
            self.buffers[conn] = b""
            self.served[conn] = now
            self.selector.register(conn, selectors.EVENT_READ, ("tcp-serve", data + peer[0].encode()))
        elif kind == "tcp-serve":
            try:
                got = sock.recv(2048)
            except OSError:
                got = b""
            if not got:
                self.close(sock)
                return
            self.buffers[sock] += got
            if b"\n" in self.buffers[sock]:
                line, self.buffers[sock] = self.buffers[sock].split(b"\n", 1)
                try:
                    sock.send(line + data + b"\n")
                except OSError:
                    self.close(sock)
            # the client closes first: this end closes when it reads the end
        elif kind == "udp-client":
            try:
                got = sock.recv(2048)
            except OSError:
                return
            echo = parse_echo(got)
            if echo:
                data.answer(echo[0], echo[1], now)
        elif kind == "tcp-connect":
            flow, seq, line = data
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.close(flow.pending.pop(seq))
                return
            try:
                sock.send(line)
            except OSError:
                self.close(flow.pending.pop(seq))
                return
            self.selector.modify(sock, selectors.EVENT_READ, ("tcp-read", data))
        elif kind == "tcp-read":
            flow, seq, line = data
            try:
                got = sock.recv(2048)
            except OSError:
                got = b""
            if got:
                self.buffers[sock] += got
                if b"\n" not in self.buffers[sock]:
                    return
                echo = parse_echo(self.buffers[sock])
                if echo and echo[0] == seq:
                    flow.answer(seq, echo[1], now)
            self.close(flow.pending.pop(seq))

    def run(self, stopfile, max_seconds):
        started = time.time()
        deadline = started + max_seconds
        tick, checked, stopping = started, 0.0, None
        while True:
            now = time.time()
            if stopping is None and (now >= deadline or (now - checked >= 0.1 and os.path.exists(stopfile))):
                stopping = now
            if stopping is None and now >= tick:
                for flow in self.flows:
                    self.send(flow, now)
                # behind schedule: the next probe now, none made up for (send_stall_ms says so)
                tick = max(tick + self.step, now)
            if now - checked >= 0.1:
                checked = now
                self.expire(now)
            if stopping is not None and now - stopping > (LINGER_S if self.servers else LATE_S):
                break
            timeout = max(0.0, min(tick - now if stopping is None else 0.1, 0.1))
            for key, _mask in self.selector.select(timeout):
                self.event(key, time.time())
        ended = stopping
        return {"started": round(started, 3), "stopped": round(stopping, 3),
                "flows": [flow.result(ended) for flow in self.flows]}


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    spec = json.loads(argv[1])
    runner = Runner(spec)
    print(json.dumps({"ready": True}), flush=True)      # every socket made: the servers answer
    # the first probe when every node's servers answer: told so on stdin
    if sys.stdin.readline().strip() != "go":
        return 1
    print(json.dumps(runner.run(argv[2], float(spec.get("max_seconds", 1800)))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
