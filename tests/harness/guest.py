"""The lab's VM guest on this machine, for tests: lab/vmm.py run as the
nodes run it (a process of Debian's python3, with Debian's pyroute2), on
the guest lab/guest/build.py makes, with a state directory of the test's
own.

:class:`Vmm` is a context: leaving it stops every VM it started (QEMU
quit, or killed; the pod's interface out of the bridge binding, its MAC
back), also after a failure. The pod namespaces themselves are the
data-plane harness's (:class:`tests.harness.dataplane.Node`), which
deletes them, and with them any bridge or tap left inside.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile

from lab.guest import build
from tests.harness.dataplane import ns_name

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VMM = os.path.join(ROOT, "lab", "vmm.py")
# the nodes' Python and pyroute2, not the venv's
PYTHON = "/usr/bin/python3"
# where the node image puts the guest (lab/Containerfile)
IMAGE_GUEST_DIR = "/usr/lib/ovn4nfv/guest"


def guest_dir():
    """The guest's kernel and initramfs: ``OVN4NFV_GUEST_DIR`` when set;
    in a container of the node image (the core's tests on Debian 13), the
    image's own copy, made from the same build; else lab/guest/out, built
    from this machine's apt sources or found current (the build is
    cached)."""
    if os.environ.get("OVN4NFV_GUEST_DIR"):
        return os.environ["OVN4NFV_GUEST_DIR"]
    if build.current(IMAGE_GUEST_DIR):
        return IMAGE_GUEST_DIR
    build.build()
    return build.OUT


class VmmFailed(AssertionError):
    """lab/vmm.py exited non-zero where a test expected it to succeed."""


class Vmm:
    """lab/vmm.py with a state directory of its own (short: the QMP and
    serial sockets' paths must fit a Unix socket's)."""

    def __init__(self, guest=None):
        self.guest = guest or guest_dir()
        self.state_dir = tempfile.mkdtemp(prefix="o4n-vmm-")
        self.names = []

    def run(self, subcommand, *args, timeout=300, check=True):
        """``vmm.py SUBCOMMAND --state-dir <ours> ARGS...``; raises
        :class:`VmmFailed` with vmm's words and the guest's console output
        when ``check`` and it fails."""
        result = subprocess.run([PYTHON, VMM, subcommand, "--state-dir", self.state_dir] + list(args),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise VmmFailed("vmm %s failed (%d): %s%s" % (
                subcommand, result.returncode, result.stderr.strip(), self._serial_tail(args)))
        return result

    def _serial_tail(self, args):
        """The guest's serial output so far, for a failure's message."""
        name = args[args.index("--name") + 1] if "--name" in args else None
        log = os.path.join(self.state_dir, name or "-", "serial.log")
        if os.path.exists(log):
            with open(log, errors="replace") as handle:
                return "\nserial console:\n" + handle.read()[-3000:]
        return ""

    def start(self, name, netns, interface="eth0", incoming=None, listen="127.0.0.1", accel="auto"):
        """Start a VM (or a migration's target) on the pod's interface; vmm's
        report (accel, boot_seconds, MACs...)."""
        args = ["start", "--name", name, "--netns", netns, "--interface", interface, "--guest-dir", self.guest,
                "--accel", accel]
        if incoming:
            args += ["--incoming", str(incoming), "--listen", listen]
        self.names.append(name)
        return json.loads(self.run(*args).stdout)

    def console(self, name, command, timeout=30):
        """(exit code, output) of ``command`` in the guest."""
        result = self.run("console", "--name", name, "--timeout", str(timeout), "--", command, timeout=timeout + 30, check=False)
        if result.returncode != 0 and result.stderr.startswith("vmm:"):
            raise VmmFailed(result.stderr.strip())
        return result.returncode, result.stdout

    def wait_dhcp(self, name, timeout=60):
        return json.loads(self.run("wait-dhcp", "--name", name, "--timeout", str(timeout),
                                   timeout=timeout + 30).stdout)

    def migrate(self, name, to, timeout=120):
        return json.loads(self.run("migrate", "--name", name, "--to", to, "--timeout", str(timeout),
                                   timeout=timeout + 30).stdout)

    def status(self, name):
        return json.loads(self.run("status", "--name", name).stdout)

    def stop(self, name):
        return json.loads(self.run("stop", "--name", name, timeout=120).stdout)

    def close(self, report=True):
        """Stop every VM (vmm's stop; a QEMU that outlives it is killed by
        its pidfile) and drop the state directory; a failed stop is raised
        when ``report`` (not over a test's own failure)."""
        errors = []
        for name in reversed(self.names):
            try:
                self.stop(name)
            except (VmmFailed, subprocess.SubprocessError) as exc:
                errors.append(str(exc))
        for dirpath, _dirs, files in os.walk(self.state_dir):
            if "qemu.pid" in files:
                with open(os.path.join(dirpath, "qemu.pid")) as handle:
                    pid = int(handle.read().strip() or 0)
                if pid and _is_qemu(pid, dirpath):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.state_dir, ignore_errors=True)
        self.names = []
        if errors and report:
            raise VmmFailed("; ".join(errors))

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close(report=exc_info[0] is None)


def _is_qemu(pid, directory):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return directory.encode() in handle.read()
    except OSError:
        return False


ANNOUNCE_WATCH = r"""
import socket, sys, time
ifname, mac, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
# ETH_P_ALL: a socket for one protocol does not see the frames the host sends
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
sock.bind((ifname, 0))
print("listening", flush=True)
end = time.monotonic() + timeout
while time.monotonic() < end:
    sock.settimeout(max(0.01, end - time.monotonic()))
    try:
        frame = sock.recv(2048)
    except socket.timeout:
        break
    source = ":".join("%02x" % b for b in frame[6:12])
    if frame[12:14] == b"\x80\x35" and source == mac:
        # RFC 903: opcode 3 (request reverse), the target hardware address the sender's
        print("rarp %s op %d target %s" % (source, frame[20] << 8 | frame[21],
                                           ":".join("%02x" % b for b in frame[32:38])), flush=True)
        break
"""


class AnnounceWatch:
    """Watches ``ifname`` in ``netns`` for a RARP frame from ``mac`` (what
    QEMU sends for the guest's NIC after a migration, and what OVN's
    activation-strategy=rarp waits for), for at most ``timeout`` seconds
    from its start. :meth:`result` is the frame's description, or None."""

    def __init__(self, netns, ifname, mac, timeout=60):
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns_name(netns), PYTHON, "-c", ANNOUNCE_WATCH, ifname,
                                      mac, str(timeout)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     universal_newlines=True)
        self.timeout = timeout
        if self.proc.stdout.readline().strip() != "listening":
            self.proc.kill()
            raise AssertionError("the RARP watch did not start: %s" % self.proc.communicate(timeout=10)[1])

    def result(self):
        out, _err = self.proc.communicate(timeout=self.timeout + 10)
        return out.strip() or None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


SESSION = r"""
import socket, sys
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
print("connected", flush=True)
for line in sys.stdin:
    conn.sendall(line.encode())
    data = b""
    try:
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    print(data.decode().strip() or "-", flush=True)
"""


class Session:
    """One TCP connection from ``netns`` to ``address``:``port``, kept open
    by a client process between exchanges: :meth:`echo` sends a line and
    returns what came back within ``timeout`` seconds ("-" for nothing),
    on the same connection every time."""

    def __init__(self, netns, address, port, timeout=30):
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns_name(netns), PYTHON, "-c", SESSION, address,
                                      str(port), str(timeout)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, universal_newlines=True)
        if self.proc.stdout.readline().strip() != "connected":
            self.close()
            raise AssertionError("no TCP connection to %s:%d" % (address, port))

    def echo(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            stream.close()
