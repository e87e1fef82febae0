"""A VM on a lab node, plugged into its launcher pod the way KubeVirt's
bridge binding does it, and live-migrated between nodes with QEMU's own
migration: the node-side half of a KubeVirt VM in the lab (issue 34).

    python3 vmm.py start --name N --netns /run/netns/POD --interface eth1 [--incoming PORT]
    python3 vmm.py wait-dhcp --name N
    python3 vmm.py console --name N -- ping -c 3 10.0.0.1
    python3 vmm.py migrate --name N --to HOST:PORT
    python3 vmm.py announce --name N
    python3 vmm.py status --name N
    python3 vmm.py stop --name N

Every subcommand takes ``--state-dir`` (default /run/ovn4nfv/vmm; a VM's
sockets, pidfile, logs and state.json are in ``<state-dir>/<name>/``).
Output is JSON on stdout (``console``: the command's own output, and its
exit code as vmm's); errors go to stderr with exit code 1.

The bridge binding (KubeVirt's ``pkg/network``): in the pod's network
namespace the pod's interface (made by the CNI plugin with the MAC OVN
holds for the port, and no address) takes another MAC, locally
administered and derived from the first (so that the bridge does not take
the guest's MAC for its own and keep its frames), and IPv6 off (so that it
sends nothing of its own); a bridge ``k6t-<iface>`` joins it to a tap
``tap-<iface>``; the guest's virtio NIC gets the interface's original MAC.
Only the guest speaks on the port, with the MAC and address OVN gives it
(port security holds), and gets its address, routes and MTU from OVN's
DHCP. ``stop`` undoes all of it.

QEMU runs in the node's network namespace, not the pod's, so that a
migration's stream goes over the node's underlay; only its tap is in the
pod's: vmm opens /dev/net/tun while in the pod's namespace (setns) and
hands QEMU the file descriptor (``-netdev tap,fd=N``). The tap is not
persistent: it goes with QEMU. QEMU daemonizes (``-daemonize``, pidfile):
the same on a node with systemd as PID 1 and on a host without it, and the
process outlives the ``podman exec`` or Ansible task that started it.
Its serial port (the guest's console) and QMP are Unix sockets in the
state directory; the serial port's output is also logged there.

The accelerator: KVM when /dev/kvm answers (API version 12, a VM made),
the kernel's KVM is Intel's or AMD's (a PVM host's ``kvm_pvm`` runs only
guests built for it), and no KVM guest failed to boot on this node before;
otherwise TCG. A KVM guest that does not reach its console in time is
stopped and started again under TCG, and the node remembers it. Source and
target of a migration must use the same accelerator, machine type and
QEMU command line: vmm gives both the same unless told otherwise.

After an incoming migration QEMU announces the guest's MAC itself: RARP
frames from that MAC (5 rounds, 50 ms to 550 ms apart: QEMU's announce
defaults, ``net/announce.c``), plus a guest-sent gratuitous ARP where the
guest negotiated VIRTIO_NET_F_GUEST_ANNOUNCE. OVN's
``activation-strategy=rarp`` activates the port on the target chassis on
that RARP. ``announce`` sends another round (QMP ``announce-self``).

Standard library only, plus pyroute2 (Debian's python3-pyroute2, 0.7 on
Debian 12 and 13): it runs on the nodes with their own Python.
"""

import argparse
import base64
import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

STATE_DIR = "/run/ovn4nfv/vmm"
GUEST_DIR = "/usr/lib/ovn4nfv/guest"
QEMU = "qemu-system-x86_64"
MACHINE = "pc-q35-7.2"
MEMORY_MB = 128
APPEND = "console=ttyS0 quiet panic=-1"
READY = b"<<<O4N-READY>>>"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
KVM_BOOT_SECONDS = 20
TCG_BOOT_SECONDS = 120
KVM_NOTE = "kvm-did-not-boot"

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
KVM_GET_API_VERSION = 0xAE00
KVM_CREATE_VM = 0xAE01


class VmmError(Exception):
    """What vmm reports and exits 1 on."""


def _wait(predicate, timeout, interval=0.05):
    """Poll ``predicate`` until it is true or ``timeout`` seconds passed;
    its last value. Every wait in vmm is one of these: bounded in time,
    and so in count."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= end:
            return value
        time.sleep(interval)


# -- network namespaces ---------------------------------------------------------

_LIBC = ctypes.CDLL(None, use_errno=True)


def _setns(fd):
    """setns(2) for a network namespace: os.setns from Python 3.12, libc's
    before (Debian 12's Python is 3.11)."""
    if hasattr(os, "setns"):
        os.setns(fd, CLONE_NEWNET)
    elif _LIBC.setns(fd, CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, "setns: %s" % os.strerror(code))


@contextlib.contextmanager
def netns(path):
    """This thread in the network namespace ``path`` (a bind mount such as
    /run/netns/POD, or /proc/PID/ns/net) for the block, back in its own
    after, also on an error. Sockets made inside (netlink, /dev/net/tun)
    stay in the namespace they were made in."""
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        there = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        os.close(here)
        raise VmmError("network namespace %s: %s" % (path, exc.strerror)) from exc
    try:
        _setns(there)
        try:
            yield
        finally:
            _setns(here)
    finally:
        os.close(there)
        os.close(here)


def _sysctl_path(ifname):
    return "/proc/sys/net/ipv6/conf/%s/disable_ipv6" % ifname


def _ipv6_disabled(ifname):
    """The interface's disable_ipv6 in the current namespace, or None
    without IPv6."""
    try:
        with open(_sysctl_path(ifname)) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _set_ipv6_disabled(ifname, value):
    if value is None:
        return
    try:
        with open(_sysctl_path(ifname), "w") as handle:
            handle.write(value)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise


# -- names, MACs, state ---------------------------------------------------------

def bridge_name(iface):
    return ("k6t-" + iface)[:15]


def tap_name(iface):
    return ("tap-" + iface)[:15]


def pod_side_mac(mac):
    """The MAC the pod's interface takes while its own is the guest's: a
    locally administered unicast one derived from it (the same on every
    node, and again after a restart)."""
    octets = bytearray(hashlib.sha256(b"ovn4nfv-k6t " + mac.lower().encode()).digest()[:6])
    octets[0] = (octets[0] & 0xFC) | 0x02
    derived = ":".join("%02x" % o for o in octets)
    if derived == mac.lower():
        octets[5] ^= 1
        derived = ":".join("%02x" % o for o in octets)
    return derived


def vm_dir(state_dir, name):
    if not NAME.match(name or ""):
        raise VmmError("a VM's name is 1 to 63 letters, digits, '_', '.', '-': %r" % name)
    return os.path.join(state_dir, name)


def paths(directory):
    return {key: os.path.join(directory, value) for key, value in (
        ("state", "state.json"), ("pid", "qemu.pid"), ("qmp", "qmp.sock"), ("serial", "serial.sock"),
        ("serial_log", "serial.log"), ("qemu_log", "qemu.log"), ("console_lock", "console.lock"))}


def load_state(directory):
    try:
        with open(paths(directory)["state"]) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def save_state(directory, state):
    target = paths(directory)["state"]
    with open(target + ".tmp", "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.replace(target + ".tmp", target)


@contextlib.contextmanager
def locked(path, timeout=60):
    """An exclusive flock on ``path`` for the block (start and stop of one
    VM, or one console exchange), waited for at most ``timeout`` s."""
    handle = open(path, "a")
    try:
        if not _wait(lambda: _try_lock(handle), timeout):
            raise VmmError("%s is held by another vmm for more than %d s" % (path, timeout))
        yield
    finally:
        handle.close()


def _try_lock(handle):
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


# -- the accelerator ----------------------------------------------------------------

def kvm_verdict(state_dir):
    """(True, why) when a guest may run under KVM here, else (False, why)."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return False, "/dev/kvm: %s" % exc.strerror
    try:
        version = fcntl.ioctl(fd, KVM_GET_API_VERSION)
        if version != 12:
            return False, "KVM API version %d, not 12" % version
        os.close(fcntl.ioctl(fd, KVM_CREATE_VM, 0))
    except OSError as exc:
        return False, "KVM refuses a VM: %s" % exc.strerror
    finally:
        os.close(fd)
    if os.path.isdir("/sys/module/kvm_pvm"):
        return False, "the host's KVM is PVM (kvm_pvm), which runs only guests built for it"
    if not any(os.path.isdir("/sys/module/" + m) for m in ("kvm_intel", "kvm_amd")):
        return False, "KVM is neither kvm_intel nor kvm_amd"
    if os.path.exists(os.path.join(state_dir, KVM_NOTE)):
        return False, "a KVM guest did not boot on this node before (%s)" % os.path.join(state_dir, KVM_NOTE)
    return True, "KVM answers (API 12, a VM made)"


# -- the bridge binding ----------------------------------------------------------

def _ipr():
    from pyroute2 import IPRoute  # pylint: disable=import-outside-toplevel
    return IPRoute()


def _index(ipr, ifname):
    found = ipr.link_lookup(ifname=ifname)
    return found[0] if found else None


def _link(ipr, index):
    msg = ipr.get_links(index)[0]
    return {"mac": msg.get_attr("IFLA_ADDRESS"), "mtu": msg.get_attr("IFLA_MTU"),
            "master": msg.get_attr("IFLA_MASTER"), "up": bool(msg["flags"] & 1)}


def open_tap(name):
    """A tap device ``name`` in the current network namespace, made by
    opening /dev/net/tun (IFF_TAP, no packet information, no virtio-net
    header: the guest computes its own checksums, which the userspace
    datapath needs); its file descriptor, inheritable by QEMU."""
    fd = os.open("/dev/net/tun", os.O_RDWR)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), IFF_TAP | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


def plug(state):
    """The bridge binding in the pod's namespace; the tap's file
    descriptor. ``state`` already holds what unplug needs (the interface's
    MAC and IPv6 setting), saved before anything changes."""
    with netns(state["netns"]):
        with _ipr() as ipr:
            iface, bridge, tap = state["interface"], state["bridge"], state["tap"]
            index = _index(ipr, iface)
            if index is None:
                raise VmmError("no interface %s in %s" % (iface, state["netns"]))
            mtu = _link(ipr, index)["mtu"]
            ipr.link("add", ifname=bridge, kind="bridge")
            br_index = _index(ipr, bridge)
            _set_ipv6_disabled(bridge, "1")
            ipr.link("set", index=br_index, address=state["pod_side_mac"], mtu=mtu)
            ipr.link("set", index=index, state="down")
            _set_ipv6_disabled(iface, "1")
            ipr.link("set", index=index, address=state["pod_side_mac"])
            ipr.link("set", index=index, master=br_index)
            ipr.link("set", index=index, state="up")
            fd = open_tap(tap)
            try:
                tap_index = _index(ipr, tap)
                _set_ipv6_disabled(tap, "1")
                ipr.link("set", index=tap_index, mtu=mtu, master=br_index)
                ipr.link("set", index=tap_index, state="up")
                ipr.link("set", index=br_index, state="up")
            except Exception:
                os.close(fd)
                raise
            return fd


def unplug(state):
    """Undo :func:`plug` as far as it went: tap and bridge gone, the
    interface's MAC and IPv6 setting back, the interface up. Nothing to do
    when the namespace is gone (the pod with it)."""
    if not os.path.exists(state["netns"]):
        return
    with netns(state["netns"]):
        with _ipr() as ipr:
            for name in (state["tap"], state["bridge"]):
                index = _index(ipr, name)
                if index is not None:
                    ipr.link("del", index=index)
            index = _index(ipr, state["interface"])
            if index is None:
                return
            link = _link(ipr, index)
            if link["master"]:
                ipr.link("set", index=index, master=0)
            if link["mac"] != state["mac"]:
                ipr.link("set", index=index, state="down")
                ipr.link("set", index=index, address=state["mac"])
            _set_ipv6_disabled(state["interface"], state.get("ipv6_disabled"))
            if state.get("was_up", True):
                ipr.link("set", index=index, state="up")


def inspect_interface(netns_path, iface):
    """The pod's interface as the CNI plugin left it: MAC, up, IPv6 setting,
    and whether it is free (in no bridge)."""
    with netns(netns_path):
        with _ipr() as ipr:
            index = _index(ipr, iface)
            if index is None:
                raise VmmError("no interface %s in %s" % (iface, netns_path))
            link = _link(ipr, index)
            link["ipv6_disabled"] = _ipv6_disabled(iface)
            link["ipv4"] = [a.get_attr("IFA_ADDRESS") for a in ipr.get_addr(family=socket.AF_INET, index=index)]
            link["taken"] = [n for n in (bridge_name(iface), tap_name(iface)) if _index(ipr, n) is not None]
            return link


# -- QEMU ---------------------------------------------------------------------------

def _pid(directory):
    try:
        with open(paths(directory)["pid"]) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def qemu_alive(directory):
    """QEMU's pid while the VM's QEMU runs (its command line names this
    VM's QMP socket: a recycled pid is not taken for it), else None."""
    pid = _pid(directory)
    if pid is None:
        return None
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read()
        with open("/proc/%d/stat" % pid) as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return None
    except OSError:
        return None
    return pid if paths(directory)["qmp"].encode() in cmdline else None


def qemu_argv(state, directory, fd):
    """QEMU's command line: the same on a migration's source and target
    but for ``-incoming``."""
    where = paths(directory)
    guest = state["guest_dir"]
    argv = [state["qemu"], "-name", "guest=%s" % state["name"], "-machine", state["machine"],
            "-accel", state["accel"], "-m", str(state["memory"]), "-smp", "1",
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-kernel", os.path.join(guest, "vmlinuz"), "-initrd", os.path.join(guest, "initramfs.gz"),
            "-append", APPEND,
            "-netdev", "tap,id=net0,fd=%d" % fd,
            # romfile= : no iPXE option ROM (nothing boots from the network)
            "-device", "virtio-net-pci,netdev=net0,mac=%s,romfile=" % state["mac"],
            "-chardev", "socket,id=serial0,path=%s,server=on,wait=off,logfile=%s,logappend=on" % (
                where["serial"], where["serial_log"]),
            "-serial", "chardev:serial0",
            "-qmp", "unix:%s,server=on,wait=off" % where["qmp"],
            "-daemonize", "-pidfile", where["pid"]]
    if state.get("incoming"):
        argv += ["-incoming", "tcp:%s:%d" % (state["listen"], state["incoming"])]
    return argv


def launch(state, directory, fd):
    """QEMU, daemonized: returns when it runs (and, as a migration target,
    listens). Its early errors are in qemu.log."""
    where = paths(directory)
    with open(where["qemu_log"], "ab") as log:
        try:
            result = subprocess.run(qemu_argv(state, directory, fd), pass_fds=(fd,), stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=log, timeout=60, check=False)
        except subprocess.TimeoutExpired as exc:
            raise VmmError("QEMU did not daemonize within 60 s") from exc
    if result.returncode != 0 or not qemu_alive(directory):
        with open(where["qemu_log"], errors="replace") as handle:
            tail = handle.read()[-2000:]
        raise VmmError("QEMU failed to start (exit %d): %s" % (result.returncode, tail.strip()))


def wait_ready(directory, timeout):
    """Seconds until the guest's console said it is ready (its marker in the
    serial port's log), or None when QEMU died or ``timeout`` passed."""
    started = time.monotonic()
    log = paths(directory)["serial_log"]

    def ready():
        if not qemu_alive(directory):
            return "dead"
        try:
            with open(log, "rb") as handle:
                return READY in handle.read()
        except FileNotFoundError:
            return False

    outcome = _wait(ready, timeout)
    return round(time.monotonic() - started, 2) if outcome is True else None


class Qmp:
    """A QMP client on the VM's monitor socket: commands in order, events
    kept aside, every read bounded by ``timeout``."""

    def __init__(self, path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
            self.stream = self.sock.makefile("rwb")
            self.events = []
            if "QMP" not in self._read():
                raise VmmError("no QMP greeting on %s" % path)
            self.execute("qmp_capabilities")
        except (OSError, ValueError) as exc:
            self.sock.close()
            raise VmmError("QMP on %s: %s" % (path, exc)) from exc

    def _read(self):
        line = self.stream.readline()
        if not line:
            raise VmmError("QMP closed")
        return json.loads(line)

    def execute(self, command, **arguments):
        message = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        self.stream.write(json.dumps(message).encode() + b"\n")
        self.stream.flush()
        for _message in range(10000):
            reply = self._read()
            if "event" in reply:
                self.events.append(reply)
            elif "error" in reply:
                raise VmmError("QMP %s: %s" % (command, reply["error"].get("desc", reply["error"])))
            else:
                return reply.get("return")
        raise VmmError("QMP %s: no answer among 10000 events" % command)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def quit_qemu(directory, timeout=10):
    """QEMU gone: QMP ``quit``, then SIGTERM, then SIGKILL, each waited for
    (bounded)."""
    pid = qemu_alive(directory)
    if pid is None:
        return
    try:
        with Qmp(paths(directory)["qmp"], timeout=5) as qmp:
            qmp.execute("quit")
    except (VmmError, OSError):
        pass
    for signum in (None, signal.SIGTERM, signal.SIGKILL):
        if signum is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        if _wait(lambda: qemu_alive(directory) is None, timeout):
            return
    raise VmmError("QEMU %d outlived SIGKILL" % pid)


# -- the console -------------------------------------------------------------------

def console(directory, command, timeout=30):
    """(exit code, output) of ``command`` run by sh in the guest, through
    the serial console (lab/guest/console); bounded by ``timeout`` seconds
    in the guest and a little more here."""
    token = "O4N-" + secrets.token_hex(8)
    line = ("%s %d %s\n" % (token, max(1, int(timeout)), base64.b64encode(command.encode()).decode())).encode()
    if len(line) > 3500:
        raise VmmError("a console command is at most about 2.5 kB")
    begin = b"<<<%s begin>>>\n" % token.encode()
    end = re.compile(rb"<<<%s end (\d+)>>>\n" % token.encode())
    where = paths(directory)
    deadline = time.monotonic() + timeout + 10
    with locked(where["console_lock"], timeout=timeout + 10):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            try:
                sock.connect(where["serial"])
                sock.sendall(line)
            except OSError as exc:
                raise VmmError("the console of %s: %s" % (directory, exc)) from exc
            data = b""
            while True:
                found = end.search(data)
                if found:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise VmmError("the guest did not answer within %d s" % (timeout + 10))
                sock.settimeout(min(left, 5))
                try:
                    chunk = sock.recv(65536)
                except socket.timeout:
                    continue
                if not chunk:
                    raise VmmError("the console closed (QEMU gone?)")
                data += chunk
    start = data.find(begin)
    output = data[start + len(begin):found.start()] if start >= 0 else b""
    return int(found.group(1)), output.decode("utf-8", "replace")


WAIT_DHCP = """end=$(( $(cut -d. -f1 /proc/uptime) + %d ))
while [ ! -s /run/dhcp/address ] && [ "$(cut -d. -f1 /proc/uptime)" -lt "$end" ]; do sleep 0.1; done
[ -s /run/dhcp/address ] || exit 1
cat /run/dhcp/address /run/dhcp/bound-uptime /run/dhcp/lease
"""


def wait_dhcp(directory, timeout=60):
    """The guest's DHCP lease once applied (bounded): its address with
    prefix, the guest's uptime when it was applied, udhcpc's variables."""
    code, output = console(directory, WAIT_DHCP % int(timeout), timeout=timeout + 5)
    if code != 0:
        raise VmmError("no DHCP lease in the guest within %d s" % timeout)
    lines = output.splitlines()
    lease = dict(line.split("=", 1) for line in lines[2:] if "=" in line)
    return {"address": lines[0], "bound_uptime": float(lines[1]), "lease": lease}


# -- the subcommands --------------------------------------------------------------

def start(args):
    base = os.path.abspath(args.state_dir)
    directory = vm_dir(base, args.name)
    os.makedirs(base, exist_ok=True)
    with locked(os.path.join(base, args.name + ".lock")):
        old = load_state(directory)
        if old and qemu_alive(directory):
            raise VmmError("%s runs already (pid %d): stop it first" % (args.name, qemu_alive(directory)))
        if old:
            _teardown(directory, old)
        guest_dir = os.path.abspath(args.guest_dir)
        for name in ("vmlinuz", "initramfs.gz"):
            if not os.path.exists(os.path.join(guest_dir, name)):
                raise VmmError("no %s in %s (lab/guest/build.py makes it)" % (name, guest_dir))
        qemu = shutil.which(args.qemu)
        if not qemu:
            raise VmmError("no %s on this node (Debian's qemu-system-x86)" % args.qemu)
        for key, where in paths(directory).items():
            if key in ("qmp", "serial") and len(where) > 100:
                raise VmmError("%s is too long for a Unix socket: choose a shorter --state-dir" % where)
        link = inspect_interface(args.netns, args.interface)
        if link["master"]:
            raise VmmError("%s in %s is in a bridge already" % (args.interface, args.netns))
        if link["taken"]:
            raise VmmError("%s has a device of the name vmm gives its bridge or tap: %s" % (
                args.netns, ", ".join(link["taken"])))
        if link["ipv4"]:
            # the guest, not the pod, holds the port's address: an interface
            # configured inside (the request's dhcp: true) has none
            raise VmmError("%s in %s has an address (%s): the VM's interface is one configured inside, by DHCP" % (
                args.interface, args.netns, ", ".join(link["ipv4"])))
        if args.accel == "auto":
            usable, why = kvm_verdict(base)
            accel = "kvm" if usable else "tcg"
        else:
            accel, why = args.accel, "asked for"
        os.makedirs(directory, exist_ok=True)
        for name in ("serial_log", "qemu_log"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(paths(directory)[name])
        state = {"name": args.name, "netns": os.path.abspath(args.netns), "interface": args.interface,
                 "bridge": bridge_name(args.interface), "tap": tap_name(args.interface),
                 "mac": link["mac"], "pod_side_mac": pod_side_mac(link["mac"]), "was_up": link["up"],
                 "ipv6_disabled": link["ipv6_disabled"], "guest_dir": guest_dir, "qemu": qemu,
                 "machine": args.machine, "memory": args.memory, "accel": accel, "accel_reason": why,
                 "incoming": args.incoming, "listen": args.listen}
        save_state(directory, state)
        try:
            booted = _boot(state, directory, args)
            if booted is None and accel == "kvm" and args.accel == "auto":
                # KVM said yes and the guest did not boot: TCG, and the node remembers
                with open(os.path.join(base, KVM_NOTE), "w") as handle:
                    handle.write("a KVM guest (%s) did not reach its console in %d s\n" % (args.name, args.kvm_boot))
                _teardown(directory, state, keep_dir=True)
                state.update(accel="tcg", accel_reason="KVM's guest did not boot in %d s" % args.kvm_boot)
                save_state(directory, state)
                booted = _boot(state, directory, args)
            if booted is None and not args.incoming:
                raise VmmError("the guest did not reach its console under %s; %s" % (
                    state["accel"], _logs(directory)))
        except BaseException:
            _teardown(directory, load_state(directory) or state)
            raise
        state["boot_seconds"] = None if args.incoming else booted
        save_state(directory, state)
    report = {k: state[k] for k in ("name", "accel", "accel_reason", "mac", "pod_side_mac", "bridge", "tap",
                                    "incoming", "boot_seconds")}
    report["pid"] = qemu_alive(directory)
    report["state_dir"] = directory
    return report


def _boot(state, directory, args):
    """Plug, launch; the seconds to the guest's console (0 for a migration
    target, which boots nothing), None if it did not come."""
    fd = plug(state)
    try:
        launch(state, directory, fd)
    finally:
        os.close(fd)
    if state.get("incoming"):
        return 0
    trial = state["accel"] == "kvm" and args.accel == "auto"
    return wait_ready(directory, args.kvm_boot if trial else args.boot_timeout)


def _logs(directory):
    """The ends of QEMU's log and of the guest's serial output, for an
    error's message (the state directory goes with the failed VM)."""
    tails = []
    for key in ("qemu_log", "serial_log"):
        try:
            with open(paths(directory)[key], errors="replace") as handle:
                tails.append("%s: %s" % (key.replace("_", " "), handle.read()[-1500:].strip() or "(empty)"))
        except FileNotFoundError:
            tails.append("%s: (none)" % key.replace("_", " "))
    return "; ".join(tails)


def _teardown(directory, state, keep_dir=False):
    quit_qemu(directory)
    unplug(state)
    if not keep_dir:
        shutil.rmtree(directory, ignore_errors=True)


def stop(args):
    base = os.path.abspath(args.state_dir)
    directory = vm_dir(base, args.name)
    if not os.path.isdir(directory):
        return {"name": args.name, "stopped": False, "why": "no such VM"}
    with locked(os.path.join(base, args.name + ".lock")):
        state = load_state(directory)
        if state is None:
            quit_qemu(directory)
            shutil.rmtree(directory, ignore_errors=True)
        else:
            _teardown(directory, state)
    return {"name": args.name, "stopped": True}


def existing(args):
    """The state directory of the VM ``--name``, which must exist."""
    directory = vm_dir(os.path.abspath(args.state_dir), args.name)
    if load_state(directory) is None:
        raise VmmError("no VM %s in %s" % (args.name, os.path.abspath(args.state_dir)))
    return directory


def run_console(args):
    directory = existing(args)
    command = " ".join(args.argv[1:] if args.argv[:1] == ["--"] else args.argv)
    if not command:
        raise VmmError("console needs a command after --")
    code, output = console(directory, command, args.timeout)
    sys.stdout.write(output)
    sys.stdout.flush()
    return code


def run_wait_dhcp(args):
    return wait_dhcp(existing(args), args.timeout)


MIGRATION_FIGURES = ("status", "total-time", "downtime", "expected-downtime", "setup-time")


def migrate(args):
    """QMP ``migrate`` to the target, ``query-migrate`` polled until it is
    completed or failed, or cancelled after ``--timeout`` seconds."""
    directory = existing(args)
    if not qemu_alive(directory):
        # its QEMU went since it was started: why is in its logs, kept
        raise VmmError("%s does not run here (its QEMU is gone); %s" % (args.name, _logs(directory)))
    host, _colon, port = args.to.rpartition(":")
    if not host or not port.isdigit():
        raise VmmError("--to is HOST:PORT, not %r" % args.to)
    with Qmp(paths(directory)["qmp"]) as qmp:
        parameters = {}
        if args.downtime_limit is not None:
            parameters["downtime-limit"] = args.downtime_limit
        if args.max_bandwidth is not None:
            parameters["max-bandwidth"] = args.max_bandwidth * 1024 * 1024
        if parameters:
            qmp.execute("migrate-set-parameters", **parameters)
        qmp.execute("migrate", uri="tcp:%s:%s" % (host, port))
        info = _wait(lambda: _finished(qmp.execute("query-migrate")), args.timeout, interval=0.1)
        if not info:
            qmp.execute("migrate_cancel")
            raise VmmError("the migration did not end within %d s: cancelled" % args.timeout)
        status = qmp.execute("query-status")
    report = {k: info.get(k) for k in MIGRATION_FIGURES if k in info}
    report["ram"] = {k: info.get("ram", {}).get(k) for k in ("total", "transferred", "mbps", "dirty-sync-count")}
    report["source_status"] = status.get("status")
    report["to"] = args.to
    if info.get("status") != "completed":
        report["error"] = info.get("error-desc")
        raise VmmError("migration %s: %s" % (info.get("status"), json.dumps(report)))
    return report


def _finished(info):
    return info if info.get("status") in ("completed", "failed", "cancelled") else None


def announce(args):
    directory = existing(args)
    with Qmp(paths(directory)["qmp"]) as qmp:
        qmp.execute("announce-self", initial=50, max=550, rounds=5, step=100)
    return {"name": args.name, "announced": True}


def status(args):
    directory = vm_dir(os.path.abspath(args.state_dir), args.name)
    state = load_state(directory)
    if state is None:
        return {"name": args.name, "exists": False}
    report = dict(state, exists=True, pid=qemu_alive(directory), state_dir=directory)
    if not report["pid"]:
        report["logs"] = _logs(directory)       # why it went
    if report["pid"]:
        with Qmp(paths(directory)["qmp"]) as qmp:
            report["status"] = qmp.execute("query-status").get("status")
            report["migration"] = {k: v for k, v in qmp.execute("query-migrate").items() if k in MIGRATION_FIGURES}
    return report


def parser():
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="subcommand", required=True)

    def command(name, helptext):
        one = sub.add_parser(name, help=helptext)
        one.add_argument("--name", required=True, help="the VM's name (its state directory's)")
        one.add_argument("--state-dir", default=STATE_DIR, help="where VMs' sockets and state are (%(default)s)")
        return one

    one = command("start", "plug the pod's interface and start the VM (or a migration's target)")
    one.add_argument("--netns", required=True, help="the pod's network namespace (a path)")
    one.add_argument("--interface", required=True, help="the pod's interface the VM takes over")
    one.add_argument("--incoming", type=int, help="start as a migration target listening on this TCP port")
    one.add_argument("--listen", default="0.0.0.0", help="the target's listening address (%(default)s)")
    one.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto")
    one.add_argument("--guest-dir", default=GUEST_DIR, help="vmlinuz and initramfs.gz (%(default)s)")
    one.add_argument("--machine", default=MACHINE, help="QEMU's machine type, the same on both ends of a migration")
    one.add_argument("--memory", type=int, default=MEMORY_MB, help="MiB (%(default)s)")
    one.add_argument("--qemu", default=QEMU)
    one.add_argument("--boot-timeout", type=int, default=TCG_BOOT_SECONDS, help="seconds to the guest's console")
    one.add_argument("--kvm-boot", type=int, default=KVM_BOOT_SECONDS,
                     help="seconds to the console under KVM, after which auto falls back to TCG")
    one = command("console", "run a command in the guest through its serial console")
    one.add_argument("--timeout", type=int, default=30)
    one.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND...: run by sh in the guest")
    one = command("wait-dhcp", "wait until the guest applied its DHCP lease")
    one.add_argument("--timeout", type=int, default=60)
    one = command("migrate", "live-migrate the VM to a target started with --incoming")
    one.add_argument("--to", required=True, help="the target's HOST:PORT")
    one.add_argument("--timeout", type=int, default=300)
    one.add_argument("--downtime-limit", type=int, help="ms (QEMU's default: 300)")
    one.add_argument("--max-bandwidth", type=int, help="MiB/s (QEMU's default: 128)")
    command("announce", "send the guest's MAC again (RARP), as after a migration")
    command("status", "the VM's state, QEMU's run state and migration")
    command("stop", "stop the VM and unplug the pod's interface (idempotent)")
    return top


def main(argv=None):
    args = parser().parse_args(argv)
    actions = {"start": start, "stop": stop, "console": run_console, "wait-dhcp": run_wait_dhcp,
               "migrate": migrate, "announce": announce, "status": status}
    try:
        result = actions[args.subcommand](args)
    except VmmError as exc:
        print("vmm: %s" % exc, file=sys.stderr)
        return 1
    if isinstance(result, int):
        return result
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
