"""A steady probe of one address from inside a pod (run in its network
namespace on a lab node): what a live migration costs the traffic to a VM.

    steady.py IP PORT STOPFILE MAX_SECONDS

pings IP every 10 ms (iputils' ping, ``-i 0.01``, each reply timestamped)
and, over one TCP connection to PORT (the guest's echo server), sends a
line every 10 ms and reads it back, until STOPFILE exists (or MAX_SECONDS
have passed). Then one last exchange on the same connection, bounded,
says whether it survived. Answers JSON: ``sent``, ``lost``,
``interruption_ms`` (the longest time between two replies in a row, the
start and the end of the run counting as replies), ``tcp_survived``,
``tcp_gap_ms`` (the longest wait for an echo), ``seconds``. Standard
library only: it runs on the lab's nodes.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

REPLY = re.compile(r"^\[(\d+\.\d+)\] \d+ bytes from .*icmp_seq=(\d+)")
SEQ = re.compile(r"icmp_seq=(\d+)")
SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")
LAST_EXCHANGE_S = 10


class Echo(threading.Thread):
    """One TCP connection to the echo server: a line every 10 ms, each
    read back before the next; the longest wait, and whether it broke."""

    def __init__(self, address, port, stop):
        super().__init__(daemon=True)
        self.address, self.port, self.stop = address, port, stop
        self.sock = None
        self.error = None
        self.gap = 0.0
        self.exchanges = 0

    def exchange(self, payload, timeout):
        self.sock.settimeout(timeout)
        self.sock.sendall(payload)
        got = b""
        while not got.endswith(b"\n"):
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the guest closed the connection")
            got += chunk
        if got != payload:
            raise ConnectionError("the echo was %r, not %r" % (got[:40], payload[:40]))

    def run(self):
        try:
            self.sock = socket.create_connection((self.address, self.port), timeout=5)
            while not self.stop.is_set():
                started = time.monotonic()
                self.exchange(b"%d\n" % self.exchanges, 30)
                self.gap = max(self.gap, time.monotonic() - started)
                self.exchanges += 1
                self.stop.wait(0.01)
        except (OSError, ConnectionError) as exc:
            self.error = str(exc)

    def survived(self):
        """One last exchange on the same connection, bounded."""
        if self.error or self.sock is None:
            return False
        try:
            self.exchange(b"last\n", LAST_EXCHANGE_S)
            return True
        except (OSError, ConnectionError) as exc:
            self.error = str(exc)
            return False
        finally:
            self.sock.close()


def measure(address, port, stopfile, max_seconds):
    stop = threading.Event()
    echo = Echo(address, port, stop)
    echo.start()
    started = time.time()
    ping = subprocess.Popen(["ping", "-n", "-D", "-i", "0.01", "-W", "1", address], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True)
    replies, seqs = [], [0]

    def read():
        for line in ping.stdout:
            seq = SEQ.search(line)
            if seq:
                seqs.append(int(seq.group(1)))
            match = REPLY.match(line)
            if match:
                replies.append(float(match.group(1)))
            else:
                summary = SUMMARY.search(line)
                if summary:
                    replies.append(("summary", int(summary.group(1)), int(summary.group(2))))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + max_seconds
    while not os.path.exists(stopfile) and time.monotonic() < deadline:
        time.sleep(0.05)
    ping.send_signal(signal.SIGINT)
    ping.wait(10)
    reader.join(10)
    ended = time.time()
    stop.set()
    echo.join(40)
    survived = echo.survived()
    summaries = [r for r in replies if isinstance(r, tuple)]
    times = sorted(r for r in replies if not isinstance(r, tuple))
    # ping's own count; without its summary, the highest sequence number it reported
    sent, received = summaries[-1][1:] if summaries else (max(seqs), len(times))
    marks = [started] + times + [ended]
    interruption = max(b - a for a, b in zip(marks, marks[1:]))
    return {"sent": sent, "lost": sent - received, "interruption_ms": round(interruption * 1000, 1),
            "tcp_survived": survived, "tcp_gap_ms": round(echo.gap * 1000, 1), "tcp_exchanges": echo.exchanges,
            "tcp_error": echo.error, "seconds": round(ended - started, 2)}


def main(argv):
    if len(argv) != 5:
        raise SystemExit(__doc__)
    print(json.dumps(measure(argv[1], int(argv[2]), argv[3], float(argv[4]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
