"""verify.yml's probe (run as ``python3 probe.py ...``): what the pods on a node are, and whether they reach
their peers. Standard library only, plus pyroute2 to enter namespaces.

    probe.py pods NETWORKS_JSON           list the pod namespaces, their
                                          addresses on the given networks and
                                          their pods' Kubernetes namespaces
    probe.py serve PORT [--netns NS[:PORTS]]...
                                          answer TCP on PORT (in each NS, or
                                          here; on PORTS, comma-separated,
                                          where an NS names them) with "seen
                                          <client address> <NS>", in the
                                          background, for at most --seconds
    probe.py stop                         stop the servers started here
    probe.py check LINKS_JSON             ping and TCP for each link
                                          {src_netns, dst, port}; a link with
                                          a count is a Service's: that many
                                          connections, and who answered each;
                                          a link with an expect ("allowed" or
                                          "denied") is a policy's: TCP only,
                                          each try's outcome
    probe.py fdb BRIDGE                   whether BRIDGE has learned its own
                                          MAC on a port other than LOCAL
    probe.py rx NETNS IFNAME...           each interface's received packets
    probe.py pings NETNS ADDRESS COUNT    COUNT pings (-W 2 each): how many
                                          were answered, and the TTL of the
                                          answers

Every wait is bounded: a link gets up to 3 pings (-c 1 -W 2) and 3 TCP
connects (3 s each), a Service's link its count of connects (3 s each), a
policy's link 3 connects (3 s each; an allowed one stops at the first
answer); the links of one run are probed at once.
"""

import ipaddress
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

NETNS_DIR = "/run/netns"
PIDS = os.environ.get("OVN4NFV_PROBE_PIDS", "/run/ovn4nfv-probe.pids")
# what the node agent writes on a pod's OVS interface: <namespace>/<name>
# (common/marks.py's K_POD_REF; this probe stands alone)
POD_REF = "ovn4nfv-pod"


def enter(netns):
    from pyroute2 import netns as pr_netns
    pr_netns.setns(netns)


def _ovs_json(*args):
    db = ["--db=" + os.environ["OVN4NFV_PROBE_OVS_DB"]] if os.environ.get("OVN4NFV_PROBE_OVS_DB") else []
    done = subprocess.run(["ovs-vsctl", "--format=json"] + db + list(args), check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True)
    return json.loads(done.stdout) if done.returncode == 0 and done.stdout else {"data": []}


def ifindexes():
    """``{name: ifindex}`` of this namespace's links (OVS's ports among them)."""
    links = subprocess.run(["ip", "-j", "link", "show"], check=False, stdout=subprocess.PIPE,
                           universal_newlines=True).stdout or "[]"
    return dict((link.get("ifname"), link["ifindex"]) for link in json.loads(links))


def mirror_outputs(indexes):
    """The ifindex of each port that is a mirror's output (a tap's collector):
    OVS hands such a port nothing but the copies and drops what it sends, so
    it is no link of the matrix, whatever verify.yml was told."""
    try:
        outputs = set(row[0][1] for row in _ovs_json("--columns=output_port", "find", "Mirror")["data"]
                      if row[0] and row[0][0] == "uuid")
        names = set(row[1] for row in _ovs_json("--columns=_uuid,name", "list", "Port")["data"]
                    if row[0][1] in outputs)
    except (OSError, ValueError, KeyError, IndexError):
        return set()
    return set(indexes[name] for name in names if name in indexes)


def pod_namespaces(indexes):
    """``{ifindex: Kubernetes namespace}`` of the OVS interfaces the node
    agent made for pods (their POD_REF)."""
    try:
        rows = _ovs_json("--columns=name,external_ids", "list", "Interface")["data"]
        refs = dict((row[0], dict(row[1][1]).get(POD_REF)) for row in rows if row[1][0] == "map")
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return {}
    return dict((indexes[name], ref.partition("/")[0]) for name, ref in refs.items()
                if ref and "/" in ref and name in indexes)


def pods(networks):
    """Each namespace under /run/netns with its addresses on ``networks``;
    ``collector`` when one of its interfaces is a mirror's output;
    ``namespace``, its pod's Kubernetes namespace, read from its OVS port
    (None when it has none). A network namespace with several names
    (containerd's ``cni-<id>``, and the pod's own that the lab's kubelet
    adds) is one pod, under the name that is not the runtime's."""
    subnets = dict((n["name"], ipaddress.ip_network(n["subnet"])) for n in networks)
    indexes = ifindexes()
    collectors, namespaces = mirror_outputs(indexes), pod_namespaces(indexes)
    out = []
    names = sorted(os.listdir(NETNS_DIR), key=lambda n: (n.startswith("cni-"), n)) if os.path.isdir(NETNS_DIR) else []
    seen = set()
    for name in names:
        try:
            stat = os.stat(os.path.join(NETNS_DIR, name))
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) in seen:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        text = subprocess.run(["ip", "-n", name, "-j", "-4", "addr", "show"], check=False,
                              stdout=subprocess.PIPE, universal_newlines=True).stdout or "[]"
        addresses, collector, namespace = {}, False, None
        for link in json.loads(text):
            collector = collector or link.get("link_index") in collectors
            namespace = namespace or namespaces.get(link.get("link_index"))
            for info in link.get("addr_info", []):
                ip = ipaddress.ip_address(info["local"])
                for net, subnet in subnets.items():
                    if ip in subnet:
                        addresses[net] = {"ip": str(ip), "interface": link["ifname"]}
        if addresses:
            out.append({"netns": name, "networks": addresses, "collector": collector, "namespace": namespace})
    return sorted(out, key=lambda pod: pod["netns"])


def spawn(work, *args):
    """Fork a child that runs ``work(report, *args)`` with its stdio on
    /dev/null, then exits. ``report(text)`` hands text to the parent once;
    an exception is reported as its type and message. Returns the child's
    pid and the read end of its report (see ``receive``)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        return pid, read_end
    os.close(read_end)
    status = 1

    def report(text):
        os.write(write_end, text.encode())
        os.close(write_end)

    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):        # the caller waits for its output's end
            os.dup2(devnull, fd)
        work(report, *args)
        status = 0
    except Exception as exc:  # pylint: disable=broad-except
        try:
            report("%s: %s" % (type(exc).__name__, exc))
        except OSError:             # reported already
            pass
    finally:
        os._exit(status)


def receive(read_end, seconds):
    """A child's report: what it wrote before closing its end, or exiting,
    read for at most ``seconds``; None if it did not come in time."""
    deadline = time.monotonic() + seconds
    chunks = []
    try:
        while True:
            readable, _w, _x = select.select([read_end], [], [], max(0, deadline - time.monotonic()))
            if not readable:
                return None
            chunk = os.read(read_end, 65536)
            if not chunk:
                return b"".join(chunks).decode()
            chunks.append(chunk)
    finally:
        os.close(read_end)


def answer_tcp(report, port, netns, seconds):
    """One server: listen on ``port`` (in ``netns``), report, then answer
    each client with "seen <its address> <this namespace>" until ``seconds``
    pass: a client through a load balancer learns which backend answered."""
    os.setsid()
    if netns:
        enter(netns)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(64)
    report("listening")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        listener.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, peer = listener.accept()
        except socket.timeout:
            break
        with conn:
            conn.sendall(("seen %s %s\n" % (peer[0], netns or "host")).encode())


def listeners(port, netns_list):
    """``[(netns, port)]``: each of ``netns_list`` (or here) on ``port``,
    or, where an entry is ``NS:PORTS``, on those (comma-separated)."""
    out = []
    for entry in netns_list or [None]:
        netns, _sep, ports = (entry or "").partition(":")
        for text in ports.split(",") if ports else [str(port)]:
            if not text.isdigit() or not 0 < int(text) < 65536:
                raise SystemExit("serve: %r is no port (in %r)" % (text, entry))
            out.append((netns or None, int(text)))
    return out


def serve(port, netns_list, seconds):
    """Fork one server per namespace and port (see :func:`listeners`); each
    answers until ``seconds`` pass. The servers of an earlier run stop
    first: left running, one would keep the port and then end its own time
    in the middle of this run's checks. Returns once every server listens,
    or fails naming those that do not."""
    wanted = listeners(port, netns_list)
    stop()
    servers = [(netns, one, spawn(answer_tcp, one, netns, seconds)) for netns, one in wanted]
    with open(PIDS, "a") as handle:
        handle.write("".join("%d\n" % pid for _netns, _port, (pid, _fd) in servers))
    failed = []
    for netns, one, (_pid, read_end) in servers:
        answer = receive(read_end, 20)
        if answer != "listening":
            failed.append("%s:%d: %s" % (netns or "host", one, "no answer in 20 s" if answer is None
                                         else answer or "exited"))
    if failed:
        raise SystemExit("servers not listening: %s" % "; ".join(failed))
    return {"servers": len(servers)}


def running(pid):
    """Whether ``pid`` still runs: gone or a zombie, it holds no port."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def stop(seconds=5):
    """Stop the servers started here, and wait (at most ``seconds``) until
    they are gone."""
    stopped = []
    if os.path.exists(PIDS):
        for line in open(PIDS):
            try:
                os.kill(int(line), signal.SIGTERM)
                stopped.append(int(line))
            except (ValueError, ProcessLookupError):
                pass
        os.unlink(PIDS)
    deadline = time.monotonic() + seconds
    while any(running(pid) for pid in stopped) and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"stopped": len(stopped), "running": sum(1 for pid in stopped if running(pid))}


ATTEMPTS = 3


def ask(dst, port):
    """One TCP connection to ``dst``:``port``, its connect and its read each
    bounded by 3 s: the words the server answered ("seen <client> <NS>")."""
    with socket.create_connection((dst, port), timeout=3) as conn:
        conn.settimeout(3)
        return conn.recv(100).decode().split()


def probe_link(link):
    """Ping and TCP to ``link["dst"]`` from here; each is tried up to
    ATTEMPTS times, so that one packet lost while a remote chassis is still
    installing the port's flows does not count as a broken link."""
    result = {"ping": False, "tcp": False, "seen": None}
    for _attempt in range(ATTEMPTS):
        ping = subprocess.run(["ping", "-c", "1", "-W", "2", link["dst"]], check=False,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if ping.returncode == 0:
            result["ping"] = True
            break
    for _attempt in range(ATTEMPTS):
        try:
            data = ask(link["dst"], link["port"])
            if len(data) in (2, 3) and data[0] == "seen":
                result.update(tcp=True, seen=data[1], error=None)
                break
            result["error"] = "answered %r" % " ".join(data)
        except OSError as exc:
            result["error"] = str(exc)
            if isinstance(exc, ConnectionRefusedError):
                time.sleep(0.5)     # refused at once: give the next try its chance
    return result


def reach(link):
    """``link["count"]`` TCP connections, one after another, to
    ``link["dst"]``:``link["port"]`` (a Service's address), each bounded by
    3 s: how many were answered, and by which backends."""
    result = {"answered": 0, "from": [], "error": None}
    for _attempt in range(link["count"]):
        try:
            data = ask(link["dst"], link["port"])
            if len(data) == 3 and data[0] == "seen":
                result["answered"] += 1
                result["from"].append(data[2])
            else:
                result["error"] = "answered %r" % " ".join(data)
        except OSError as exc:
            result["error"] = str(exc)
    return result


def policed(link):
    """TCP to ``link["dst"]``:``link["port"]``, ATTEMPTS connections, each
    bounded by 3 s; one that ``expect``s ``allowed`` stops at the first
    answer. ``tries``: each one's outcome, ``answered`` (the server's
    "seen"), ``refused`` (a reset: the packet got there, no one listens),
    ``timeout`` (no word back: dropped on the way) or the error;
    ``seen``: the client's address as the server saw it."""
    result = {"tries": [], "seen": None}
    for _attempt in range(ATTEMPTS):
        try:
            data = ask(link["dst"], link["port"])
            outcome = "answered" if len(data) == 3 and data[0] == "seen" else "answered %r" % " ".join(data)
            result["seen"] = data[1] if outcome == "answered" else result["seen"]
        except socket.timeout:
            outcome = "timeout"
        except ConnectionRefusedError:
            outcome = "refused"
        except OSError as exc:
            outcome = str(exc)
        result["tries"].append(outcome)
        if outcome == "answered" and link.get("expect") == "allowed":
            break
    return result


def probe_in(report, link):
    """``probe_link`` (``reach`` for a link with a ``count``, ``policed``
    for one with an ``expect``) from inside the link's ``src_netns``,
    reported as JSON."""
    if link.get("src_netns"):
        enter(link["src_netns"])
    if "count" in link:
        report(json.dumps(reach(link)))
    elif "expect" in link:
        report(json.dumps(policed(link)))
    else:
        report(json.dumps(probe_link(link)))


def check(links):
    """Every link at once, each from inside its ``src_netns`` (a child
    process each), so a run with broken links takes one link's time."""
    children = [(link, spawn(probe_in, link)) for link in links]
    out = []
    for link, (pid, read_end) in children:
        text = receive(read_end, 60 + 3 * link.get("count", 0))
        if text is None:            # every wait in a probe is bounded; this should not happen
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        try:
            result = json.loads(text)
        except (TypeError, ValueError):
            failed = "probe failed: %s" % ("no answer in 60 s" if text is None else text)
            result = {"ping": False, "tcp": False, "seen": None, "error": failed, "tries": [failed]}
        out.append(dict(link, **result))
    return out


def rx(netns, interfaces):
    """The received-packet counters of ``interfaces`` in ``netns``."""
    out = {}
    for name in interfaces:
        text = subprocess.run(["ip", "netns", "exec", netns, "cat", "/sys/class/net/%s/statistics/rx_packets" % name],
                              check=False, stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
        out[name] = int(text) if text.isdigit() else None
    return out


def pings(netns, address, count):
    """``count`` pings from ``netns``: answered, and the answers' TTLs."""
    text = subprocess.run(["ip", "netns", "exec", netns, "ping", "-n", "-c", str(count), "-W", "2", "-i", "0.2",
                           address], check=False, stdout=subprocess.PIPE, universal_newlines=True).stdout
    ttls = sorted(set(int(w[4:]) for w in text.split() if w.startswith("ttl=")))
    answered = sum(1 for line in text.splitlines() if "bytes from" in line)
    return {"answered": answered, "count": count, "ttls": ttls}


def pings_each(targets, count=3, at_once=16):
    """Each ``{netns, address, ...}`` of ``targets`` pinged ``count`` times
    from its netns, at most ``at_once`` at a time: each with ``answered``
    (the upgrade's gate: a node's pods reach their peers on the others)."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(max_workers=at_once) as pool:
        answers = list(pool.map(lambda t: pings(t["netns"], t["address"], count), targets))
    return [dict(target, answered=answer["answered"], count=count) for target, answer in zip(targets, answers)]


def fdb(bridge):
    """The bridge's own MAC must be learned, if at all, on LOCAL only: seen
    on the NIC's port, it means the kernel sent from the NIC after it joined
    the bridge, and the node loses its peers until the entry ages out."""
    try:
        with open("/sys/class/net/%s/address" % bridge) as handle:
            own = handle.read().strip()
    except OSError:
        return {"bridge": bridge, "present": False, "ok": True, "wrong_ports": []}
    text = subprocess.run(["ovs-appctl", "fdb/show", bridge], check=False,
                          stdout=subprocess.PIPE, universal_newlines=True).stdout
    wrong = [line.split()[0] for line in text.splitlines()[1:]
             if len(line.split()) >= 3 and line.split()[2] == own and line.split()[0] != "LOCAL"]
    return {"bridge": bridge, "present": True, "mac": own, "ok": not wrong, "wrong_ports": wrong}


def main(argv):
    command = argv[1]
    if command == "pods":
        result = pods(json.loads(argv[2]))
    elif command == "serve":
        args = argv[2:]
        port = int(args.pop(0))
        netns, seconds = [], 300
        while args:
            flag = args.pop(0)
            if flag == "--netns":
                netns.append(args.pop(0))
            elif flag == "--seconds":
                seconds = int(args.pop(0))
        result = serve(port, netns, seconds)
    elif command == "stop":
        result = stop()
    elif command == "fdb":
        result = fdb(argv[2])
    elif command == "rx":
        result = rx(argv[2], argv[3:])
    elif command == "pings":
        result = pings(argv[2], argv[3], int(argv[4]))
    elif command == "pings-each":
        result = pings_each(json.loads(argv[2]))
    elif command == "check":
        result = check(json.loads(argv[2]))
    else:
        raise SystemExit("unknown command %s" % command)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
