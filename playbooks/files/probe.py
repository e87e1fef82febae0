"""verify.yml's probe (run as ``python3 probe.py ...``): what the pods on a node are, and whether they reach
their peers. Standard library only, plus pyroute2 to enter namespaces.

    probe.py pods NETWORKS_JSON           list the pod namespaces and their
                                          addresses on the given networks
    probe.py serve PORT [--netns NS]...   answer TCP on PORT (in each NS, or
                                          here) with "seen <client address>",
                                          in the background, for at most
                                          --seconds
    probe.py stop                         stop the servers started here
    probe.py check LINKS_JSON             ping and TCP for each link
                                          {src_netns, dst, port}
    probe.py fdb BRIDGE                   whether BRIDGE has learned its own
                                          MAC on a port other than LOCAL

Every wait is bounded: ping gets -c 1 -W 2, a TCP connect 3 s.
"""

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time

NETNS_DIR = "/run/netns"
PIDS = "/run/ovn4nfv-probe.pids"


def enter(netns):
    from pyroute2 import netns as pr_netns
    pr_netns.setns(netns)


def pods(networks):
    """Each namespace under /run/netns with its addresses on ``networks``."""
    subnets = dict((n["name"], ipaddress.ip_network(n["subnet"])) for n in networks)
    out = []
    names = sorted(os.listdir(NETNS_DIR)) if os.path.isdir(NETNS_DIR) else []
    for name in names:
        text = subprocess.run(["ip", "-n", name, "-j", "-4", "addr", "show"], check=False,
                              stdout=subprocess.PIPE, universal_newlines=True).stdout or "[]"
        addresses = {}
        for link in json.loads(text):
            for info in link.get("addr_info", []):
                ip = ipaddress.ip_address(info["local"])
                for net, subnet in subnets.items():
                    if ip in subnet:
                        addresses[net] = {"ip": str(ip), "interface": link["ifname"]}
        if addresses:
            out.append({"netns": name, "networks": addresses})
    return out


def serve(port, netns_list, seconds):
    """Fork one server per namespace; each answers until ``seconds`` pass."""
    pids = []
    for netns in netns_list or [None]:
        pid = os.fork()
        if pid:
            pids.append(pid)
            continue
        os.setsid()
        if netns:
            enter(netns)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", port))
        listener.listen(64)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            listener.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                conn, peer = listener.accept()
            except socket.timeout:
                break
            with conn:
                conn.sendall(("seen %s\n" % peer[0]).encode())
        os._exit(0)
    with open(PIDS, "a") as handle:
        handle.write("".join("%d\n" % p for p in pids))
    return {"servers": len(pids)}


def stop():
    stopped = 0
    if os.path.exists(PIDS):
        for line in open(PIDS):
            try:
                os.kill(int(line), signal.SIGTERM)
                stopped += 1
            except (ValueError, ProcessLookupError):
                pass
        os.unlink(PIDS)
    return {"stopped": stopped}


def check_one(link):
    """Ping and TCP from inside ``src_netns`` to ``dst``."""
    pid = os.fork()
    if pid == 0:
        result = {}
        try:
            if link.get("src_netns"):
                enter(link["src_netns"])
            ping = subprocess.run(["ping", "-c", "1", "-W", "2", link["dst"]], check=False,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            result["ping"] = ping.returncode == 0
            try:
                with socket.create_connection((link["dst"], link["port"]), timeout=3) as conn:
                    conn.settimeout(3)
                    data = conn.recv(100).decode().split()
                    result["tcp"] = len(data) == 2 and data[0] == "seen"
                    result["seen"] = data[1] if result["tcp"] else None
            except OSError as exc:
                result["tcp"], result["seen"], result["error"] = False, None, str(exc)
        finally:
            with open("/run/ovn4nfv-probe-%d.json" % os.getpid(), "w") as handle:
                json.dump(result, handle)
            os._exit(0)
    os.waitpid(pid, 0)
    path = "/run/ovn4nfv-probe-%d.json" % pid
    with open(path) as handle:
        result = json.load(handle)
    os.unlink(path)
    return dict(link, **result)


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
    elif command == "check":
        result = [check_one(link) for link in json.loads(argv[2])]
    else:
        raise SystemExit("unknown command %s" % command)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
