"""A real OVN data plane on one machine, for tests and benchmarks.

The *node* is a network namespace in which a real ``ovs-vswitchd`` (the
userspace ``netdev`` datapath) and ``ovn-controller`` run, against the
databases of a :class:`sandbox.Sandbox`. *Pods* and the *external host*
are further namespaces joined to the node by veth pairs. Nothing is
created in the root namespace, and :meth:`Node.stop` removes every
namespace and daemon, also after a failure.

Traffic in the tests goes only between these namespaces.
"""

import json
import os
import subprocess
import time
import uuid

from tests.harness.sandbox import Sandbox


FRAMES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frames.py")


def listening(netns, iface, *stops):
    """frames.py listening on ``iface`` in ``netns`` (a name or a path
    under /var/run/netns) until it saw each payload of ``stops`` (bounded:
    20 s); once it said it is ready."""
    proc = subprocess.Popen(["ip", "netns", "exec", ns_name(netns), "python3", FRAMES, "listen", iface, "20"] +
                            list(stops), stdout=subprocess.PIPE, universal_newlines=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def heard(proc):
    """The frames (frames.py's dicts) a :func:`listening` process saw, once
    it stopped."""
    try:
        out, _err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    return [json.loads(line) for line in out.splitlines()]


def ns_name(netns):
    """A namespace's name for ``ip netns exec``, from its name or its path
    under /var/run/netns."""
    return os.path.basename(netns) if netns.startswith("/var/run/netns/") else netns


def ip(*args, netns=None, check=True):
    """Run a command, inside the namespace ``netns`` when given."""
    cmd = (["ip", "netns", "exec", ns_name(netns)] if netns else []) + list(args)
    return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)


class Node:
    """One chassis in a namespace, with its databases."""

    def __init__(self, chassis="chassis1", physnet="physnet-ext", external_bridge="br-ex", ovn=True):
        self.tag = uuid.uuid4().hex[:6]
        self.ns = "o4n-%s-node" % self.tag
        self.namespaces = []
        self.chassis = chassis
        self.physnet = physnet
        self.external_bridge = external_bridge
        self.box = Sandbox(vswitchd=False, ovn=ovn)
        try:
            self._add_ns(self.ns)
            env = self.box.env
            self.box.pidfiles.append(os.path.join(self.box.dir, "ovs-vswitchd.pid"))
            self.run_in_node("ovs-vswitchd", self.box.ovs_db, "--detach", "--no-chdir",
                             "--pidfile=%s/ovs-vswitchd.pid" % self.box.dir,
                             "--unixctl=%s/ovs-vswitchd.ctl" % self.box.dir,
                             "--log-file=%s/ovs-vswitchd.log" % self.box.dir, env=env)
        except Exception:
            self.stop()
            raise

    # -- namespaces ---------------------------------------------------------
    def _add_ns(self, name):
        ip("ip", "netns", "add", name)
        self.namespaces.append(name)
        ip("ip", "link", "set", "lo", "up", netns=name)

    def run_in_node(self, *args, env=None, check=True, timeout=60):
        result = subprocess.run(["ip", "netns", "exec", self.ns] + list(args), check=False,
                                env=env or self.box.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
        if check and result.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (
                args[0], result.returncode, result.stderr.strip()[-2000:]))
        return result

    def join(self):
        """Make the node a chassis of the sandbox's SB (its Open_vSwitch
        row's settings, as ovn_chassis writes them) and start its
        ovn-controller."""
        from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
        from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import reconcile
        from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources import ovs as ovs_resources
        with ovsdb.Database(self.box.ovs_db, ovsdb.OVS_SCHEMA, ovs_resources.Chassis.tables) as db:
            reconcile(ovs_resources.Chassis(), [{
                "system_id": self.chassis, "ovn_remote": self.box.sb_db, "encap_type": ["geneve"],
                "encap_ip": "127.0.0.1", "bridge_datapath_type": "netdev"}], "merged", db)
        self.start_controller()

    def start_controller(self):
        """Start ovn-controller in the node; it creates br-int (netdev)."""
        self.box.pidfiles.append(os.path.join(self.box.dir, "ovn-controller.pid"))
        self.run_in_node("ovn-controller", self.box.ovs_db, "--detach", "--no-chdir",
                         "--pidfile=%s/ovn-controller.pid" % self.box.dir,
                         "--log-file=%s/ovn-controller.log" % self.box.dir)

    def wait_hv(self, timeout=60):
        """Block until ovn-controller has applied every NB change so far (an
        event from the databases, not a sleep); then the datapath's cached
        flows are purged, so that none made from the tables before the
        change still carries packets (revalidation would remove them in
        its own time, later on a loaded machine)."""
        self.box.run("ovn-nbctl", "--db=" + self.box.nb_db, "--timeout=%d" % timeout,
                     "--wait=hv", "sync", timeout=timeout + 5)
        self.run_in_node("ovs-appctl", "-t", os.path.join(self.box.dir, "ovs-vswitchd.ctl"),
                         "revalidator/purge", env=self.box.env)

    def attach(self, name, bridge, mac, cidr, gateway=None, iface_id=None, routes=(), cidr6=None,
               gateway6=None, ifname="eth0", into=None):
        """A namespace ``o4n-<tag>-<name>`` (or the namespace ``into``, for
        a second interface) with ``ifname`` (MAC, address unless ``cidr`` is
        None, default route),
        whose peer ``<name>-h`` is a port of ``bridge``. Returns the
        namespace's name."""
        netns = into or "o4n-%s-%s" % (self.tag, name)
        if into is None:
            self._add_ns(netns)
        host = "%s-h" % name
        self.run_in_node("ip", "link", "add", host, "type", "veth", "peer", "name", ifname,
                         "netns", netns)
        self.run_in_node("ip", "link", "set", host, "up")
        ip("ip", "link", "set", ifname, "address", mac, netns=netns)
        if cidr:        # None: the interface's address is its DHCP client's to get
            ip("ip", "addr", "add", cidr, "dev", ifname, netns=netns)
        if cidr6:
            ip("ip", "-6", "addr", "add", cidr6, "dev", ifname, "nodad", netns=netns)
        ip("ip", "link", "set", ifname, "up", netns=netns)
        # The userspace datapath drops partial checksums read from a veth.
        ip("ethtool", "-K", ifname, "tx", "off", netns=netns)
        if gateway:
            ip("ip", "route", "add", "default", "via", gateway, netns=netns)
        if gateway6:
            ip("ip", "-6", "route", "add", "default", "via", gateway6, netns=netns)
        for dst, via in routes:
            ip("ip", "route", "add", dst, "via", via, netns=netns)
        args = ["ovs-vsctl", "--db=" + self.box.ovs_db, "add-port", bridge, host]
        if iface_id:
            args += ["--", "set", "interface", host, "external_ids:iface-id=" + iface_id]
        self.box.run(*args)
        return netns

    def purge_flows(self):
        """Wait until ovs-vswitchd has applied the database as it is (a
        change made with ovs-vsctl, which bumps next_cfg and waits for
        ovs-vswitchd's cur_cfg to reach it), then drop the datapath's cached flows, so that the next
        packets are translated with the bridge's configuration as it is now
        (a mirror just made or removed applies to cached flows only when
        revalidated)."""
        self.synced = getattr(self, "synced", 0) + 1
        self.box.run("ovs-vsctl", "--db=" + self.box.ovs_db, "--timeout=30", "set", "Open_vSwitch", ".",
                     "external_ids:o4n-test-sync=%d" % self.synced, timeout=40)
        self.run_in_node("ovs-appctl", "-t", os.path.join(self.box.dir, "ovs-vswitchd.ctl"),
                         "revalidator/purge", env=self.box.env)

    def log_errors(self):
        """Lines the daemons logged at ERR or EMER level: a test ends by
        checking there are none it did not expect (a test that injects a
        fault adds what it must cause to ``expected_errors``)."""
        expected = getattr(self, "expected_errors", [])
        found = []
        for name in sorted(os.listdir(self.box.dir)):
            if name.endswith(".log"):
                with open(os.path.join(self.box.dir, name)) as handle:
                    found += ["%s: %s" % (name, line.strip()) for line in handle
                              if ("|ERR|" in line or "|EMER|" in line) and not any(e in line for e in expected)]
        return found

    def stop(self):
        self.box.stop()
        for name in reversed(self.namespaces):
            ip("ip", "netns", "delete", name, check=False)
        self.namespaces = []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()


def ping(netns, address, count=3, wait=2):
    """True when ``address`` (IPv4 or IPv6) answers from ``netns``; bounded
    by count and wait."""
    family = "-6" if ":" in address else "-4"
    return ip("ping", family, "-n", "-c", str(count), "-W", str(wait), "-i", "0.2", address,
              netns=netns, check=False).returncode == 0


TCP_SERVER = r"""
import socket, sys
srv = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2])))
srv.listen(1)
srv.settimeout(float(sys.argv[3]))
print("listening", flush=True)
conn, peer = srv.accept()
conn.settimeout(5)
data = conn.recv(100)
conn.sendall(b"pong:" + data)
conn.close()
print(peer[0], flush=True)
"""

TCP_CLIENT = r"""
import socket, sys
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
conn.sendall(b"ping")
print(conn.recv(100).decode())
"""


ECHO_SERVER = r"""
import socket, sys
srv = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2])))
srv.listen(64)
print("listening", flush=True)
while True:
    conn, _peer = srv.accept()
    conn.settimeout(2)
    try:
        conn.sendall(b"pong:" + conn.recv(100))
    except OSError:
        pass
    conn.close()
"""

PROBE_CLIENT = r"""
import socket, sys
for line in sys.stdin:
    address, port, timeout = line.split()
    try:
        conn = socket.create_connection((address, int(port)), timeout=float(timeout))
        conn.sendall(b"ping")
        ok = conn.recv(100) == b"pong:ping"
        conn.close()
    except OSError:
        ok = False
    print(1 if ok else 0, flush=True)
"""


class Prober:
    """A TCP server that answers every connection in ``server_ns``, on
    ``address``:``port``, and a client in ``client_ns`` that stays up
    between probes: a probe is one new connection, answered or not within
    ``timeout`` seconds, at the cost of a line on a pipe (no process
    started per probe). Stop it with :meth:`stop` (or as a context)."""

    def __init__(self, server_ns, client_ns, address, port):
        self.address, self.port = address, port
        self.procs = []
        try:
            self.server = self._start(server_ns, ECHO_SERVER, address, str(port))
            assert self.server.stdout.readline().strip() == "listening"
            self.client = self._start(client_ns, PROBE_CLIENT)
        except Exception:
            self.stop()
            raise

    def _start(self, netns, script, *args):
        proc = subprocess.Popen(["ip", "netns", "exec", ns_name(netns), "python3", "-c", script] + list(args),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                universal_newlines=True)
        self.procs.append(proc)
        return proc

    def reaches(self, timeout=0.2):
        """Whether one new connection is made and answered."""
        self.client.stdin.write("%s %d %s\n" % (self.address, self.port, timeout))
        self.client.stdin.flush()
        return self.client.stdout.readline().strip() == "1"

    def settle(self, expected, deadline=30.0, hold=3, timeout=0.1):
        """Probe until ``hold`` probes in a row are ``expected`` (bounded by
        ``deadline`` seconds): when the first of them was sent (the
        monotonic clock), or None. A probe that comes out otherwise in
        between (a connection that missed its ``timeout`` while the node
        was busy, or flows being replaced) starts the count again."""
        end = time.monotonic() + deadline
        since, streak = None, 0
        while time.monotonic() < end:
            sent = time.monotonic()
            if self.reaches(timeout) == expected:
                since, streak = since if streak else sent, streak + 1
                if streak >= hold:
                    return since
            else:
                streak = 0
        return None

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(5)
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()


def tcp_exchange(server_ns, client_ns, address, port, timeout=10, bind=None, server_port=None):
    """Run a one-shot TCP server in ``server_ns`` and a client in
    ``client_ns`` (IPv4 or IPv6, as ``address`` is). Returns (client's
    reply, source address the server saw), or (None, None) when no
    connection was made within ``timeout``. The server listens on
    ``address``:``port`` unless ``bind`` and ``server_port`` say otherwise
    (a VIP's backend)."""
    return _exchange(TCP_SERVER, TCP_CLIENT, server_ns, client_ns, address, port, timeout,
                     bind or address, server_port or port)


def _exchange(server_script, client_script, server_ns, client_ns, address, port, timeout, bind, server_port):
    """A one-shot server (``server_script``, listening on ``bind``:``server_port``)
    and its client (``client_script``, to ``address``:``port``); see
    :func:`tcp_exchange`."""
    server = subprocess.Popen(["ip", "netns", "exec", ns_name(server_ns), "python3", "-c", server_script,
                               bind, str(server_port), str(timeout)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        client = ip("python3", "-c", client_script, address, str(port), str(timeout), netns=client_ns, check=False)
        out, _err = server.communicate(timeout=timeout + 5)
        if client.returncode != 0 or server.returncode != 0:
            return None, None
        return client.stdout.strip(), out.strip().splitlines()[-1]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(5)


UDP_SERVER = r"""
import socket, sys
srv = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
srv.bind((sys.argv[1], int(sys.argv[2])))
srv.settimeout(float(sys.argv[3]))
print("listening", flush=True)
data, peer = srv.recvfrom(100)
srv.sendto(b"pong:" + data, peer)
print(peer[0], flush=True)
"""

UDP_CLIENT = r"""
import socket, sys
conn = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
conn.settimeout(float(sys.argv[3]))
conn.sendto(b"ping", (sys.argv[1], int(sys.argv[2])))
print(conn.recvfrom(100)[0].decode())
"""


def udp_exchange(server_ns, client_ns, address, port, timeout=10):
    """One datagram from ``client_ns`` to a server in ``server_ns`` on
    ``address``:``port``, and its answer back (small: no fragments).
    Returns (the client's answer, the source the server saw), or (None,
    None) when either way was dropped within ``timeout``."""
    return _exchange(UDP_SERVER, UDP_CLIENT, server_ns, client_ns, address, port, timeout, address, port)


# SCTP without the kernel's SCTP (this kernel has none): an INIT chunk sent
# and caught on raw IP sockets (protocol 132), which see every packet of the
# protocol whether or not a handler is loaded. The checksum is CRC32c, as
# RFC 9260 says, so that conntrack does not take the packet for invalid.
SCTP_RAW = r"""
import socket, struct, sys

def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

role, address, port, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, 132)
raw.settimeout(timeout)
if role == "send":
    init = struct.pack("!BBHIIHHI", 1, 0, 20, 0x1234ABCD, 65535, 1, 1, 0x1234)
    header = struct.pack("!HHII", 40000, port, 0, 0)
    packet = header + init
    packet = packet[:8] + struct.pack("<I", crc32c(packet)) + packet[12:]
    raw.sendto(packet, (address, 0))
    print("sent", flush=True)
else:
    import time
    deadline = time.monotonic() + timeout
    print("listening", flush=True)
    while time.monotonic() < deadline:
        raw.settimeout(max(0.05, deadline - time.monotonic()))
        data, peer = raw.recvfrom(2048)
        ihl = (data[0] & 0x0F) * 4
        dst = struct.unpack("!H", data[ihl + 2:ihl + 4])[0]
        if dst == port and data[ihl + 12] == 1:
            print(peer[0], flush=True)
            break
"""


def sctp_reaches(server_ns, client_ns, address, port, timeout=5):
    """Whether an SCTP INIT from ``client_ns`` to ``address``:``port`` (IPv4)
    arrives in ``server_ns`` within ``timeout``."""
    server = subprocess.Popen(["ip", "netns", "exec", ns_name(server_ns), "python3", "-c", SCTP_RAW,
                               "catch", address, str(port), str(timeout)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        ip("python3", "-c", SCTP_RAW, "send", address, str(port), str(timeout), netns=client_ns)
        out, _err = server.communicate(timeout=timeout + 5)
        return server.returncode == 0 and bool(out.strip())
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(5)
