"""``lab providers``: the lab's provider networks (issue 35) checked from
outside the product, on the running lab.

The inventory's provider networks sit on the workers' external NIC (the
gateways' ``physnet-ext``), VLANs 100 and 200; the external host is their
fabric (lab/containers.py ``fabric``: an OVS VLAN switch on its NIC with an
access port per VLAN holding the network's gateway). lab/layout.py's
``PROVIDER_PODS`` run in the namespace ``provider``, apart from verify.yml's
matrix. The rows, each read from the fabric or a pod's own namespace:

* each pod reaches its VLAN's gateway on the fabric, and the fabric knows
  the pod's own address at the pod's own MAC on that VLAN's port: tagged,
  untranslated, no router between;
* the pods of one network on the two workers reach each other (the wire,
  not the tunnels: the fabric learned both MACs on the trunk);
* the fabric's switch learned each pod's MAC on its network's VLAN alone;
* a pod on both provider networks and an overlay reaches all three;
* a full 1500-byte packet with DF set, tagged, fits;
* a VNF's trunk (``prov-trunk``: the second provider network untagged, the
  first as VID 10 in the pod, OVN's nested port): a frame the pod tags with
  10 reaches the fabric on VLAN 100 from the VLAN's own address, and the
  fabric's answer comes back tagged 10; an untagged one is VLAN 200's;
* a pod on the master, which maps no ``physnet-ext``, is refused by the node
  agent naming the physical network, nothing of it is made, and the
  watcher's ``PhysicalNetworkMissing`` Event on it names the network too.

Prints the rows and, last, ``providers: provider_ok=<n>/<n>``.
"""

import json
import subprocess

from lab.host import KUBELET_DIR, exec_in, kubelet_argv
from lab.layout import PROVIDER_NAMESPACE, PROVIDER_PODS, TRUNK_POD, TRUNK_VIDS
from lab.workload import kubelet, report, row, tally

FABRIC_BRIDGE = "br-fabric"
REFUSED_POD = "prov-m"
MISSING_EVENT = "PhysicalNetworkMissing"


def _row(ok, text):
    return row("provider", ok, text)


def _in_pod(session, node, pod, *argv):
    return exec_in(session.container(node), "ip", "netns", "exec", pod, *argv, check=False)


def _ping(session, node, pod, address, size=None):
    argv = ["ping", "-n", "-c", "2", "-W", "2", "-i", "0.2"] + (["-M", "do", "-s", str(size)] if size else [])
    return _in_pod(session, node, pod, *(argv + [address])).returncode == 0


def _interface(session, node, pod, ifname):
    """(address, MAC) of the pod's ``ifname``, read in the pod."""
    link = json.loads(_in_pod(session, node, pod, "ip", "-j", "addr", "show", "dev", ifname).stdout or "[{}]")[0]
    ips = [a["local"] for a in link.get("addr_info", []) if a.get("family") == "inet"]
    return (ips[0] if ips else None), link.get("address")


def _fabric_knows(session, external, port, address, mac):
    """Whether the fabric's neighbour table holds ``address`` at ``mac``
    on ``port``: the pod's own address reached it on that VLAN."""
    out = exec_in(session.container(external), "ip", "neigh", "show", address, "dev", port, check=False).stdout
    return mac is not None and mac.lower() in out.lower()


def _learned(session, external):
    """``{MAC: {VLAN}}`` the fabric's switch learned."""
    out = exec_in(session.container(external), "ovs-appctl", "fdb/show", FABRIC_BRIDGE, check=False).stdout
    learned = {}
    for line in out.splitlines()[1:]:
        words = line.split()
        if len(words) >= 3:
            learned.setdefault(words[2].lower(), set()).add(int(words[1]))
    return learned


def _refused(session):
    """The pod a master cannot carry: the node agent's refusal, and
    nothing of it on the master; the pod is deleted after."""
    master = session.layout.masters[0]
    name = session.container(master)
    network = session.layout.provider_networks[0]
    request = json.dumps([{"name": network["name"], "interface": "eth0"}])
    done = exec_in(name, *(kubelet_argv(name) + ["run", "%s/%s" % (PROVIDER_NAMESPACE, REFUSED_POD), request]),
                   check=False)
    try:
        made = exec_in(name, "ovs-vsctl", "--bare", "--columns=name", "find", "interface",
                       "external_ids:ovn4nfv-pod-name=%s" % REFUSED_POD, check=False).stdout.split()
        # the watcher's word on the pod, in the API
        told = [m for m in kubelet(session, master, "events", "%s/%s" % (PROVIDER_NAMESPACE, REFUSED_POD),
                                   MISSING_EVENT) if "physnet-ext" in m]
    finally:
        kubelet(session, master, "delete", "%s/%s" % (PROVIDER_NAMESPACE, REFUSED_POD))
    said = "physnet-ext" in done.stderr and "does not map" in done.stderr
    ok = done.returncode != 0 and said and not made and told
    return _row(ok, "%s on %s (no physnet-ext there): %s" % (
        REFUSED_POD, master, "refused naming physnet-ext, nothing made, a %s Event" % MISSING_EVENT if ok
        else "exit %d, OVS ports %s, %s Events %s, said: %s" % (
            done.returncode, made, MISSING_EVENT, told, done.stderr.strip()[-300:])))


FRAMES = KUBELET_DIR + "/tests/harness/frames.py"


def _listening(container, netns, iface, stop):
    """frames.py listening on ``iface`` (in the pod ``netns``, if any) in
    ``container`` until ``stop`` arrives (bounded: 10 s); whether it said
    it is ready."""
    argv = ["podman", "exec", container] + (["ip", "netns", "exec", netns] if netns else []) + [
        "python3", FRAMES, "listen", iface, "10", stop]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, universal_newlines=True)
    return proc, proc.stdout.readline().strip() == "ready"


def _heard(proc, payload):
    """The frames of ``payload`` a :func:`_listening` process saw."""
    try:
        out, _err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        out = ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    return [f for f in (json.loads(line) for line in out.splitlines() if line.startswith("{"))
            if f.get("payload") == payload]


def _trunk(session, networks, external):
    """The VNF's trunk on the first worker: for each of its VLANs, a frame
    the pod tags with its VID reaches the fabric's port of the network's
    own wire VLAN from the VLAN's own address, and the fabric's answer
    comes back into the pod tagged with the VID."""
    node = session.layout.workers[0]
    worker, fabric = session.container(node), session.container(external)
    for name in (worker, fabric):
        kubelet_argv(name)          # frames.py staged there
    listed = json.loads(kubelet(session, node, "annotations", "%s/%s" % (PROVIDER_NAMESPACE, TRUNK_POD))[
        "ovnIfaceList"])
    rows = []
    for network, vid in zip(networks, TRUNK_VIDS):
        child = next((e for e in listed if (e.get("vlan") == vid if vid else not e.get("parent"))), None)
        port = "vlan%d" % network["vlan"]
        gateway_mac = json.loads(exec_in(fabric, "ip", "-j", "link", "show", port).stdout)[0]["address"]
        mine = child["ip_address"].split("/")[0] if child else None
        frame = {"kind": "udp", "src_mac": child and child["mac_address"], "dst_mac": gateway_mac, "src_ip": mine,
                 "dst_ip": network["gateway"], "payload": "trunk-%s" % (vid or "untagged"), "vlan": vid}
        up, ready = _listening(fabric, None, port, frame["payload"])
        if child and ready:
            exec_in(worker, "ip", "netns", "exec", TRUNK_POD, "python3", FRAMES, "send", "eth0",
                    json.dumps([frame]), check=False)
        up = [f for f in _heard(up, frame["payload"]) if f.get("src_ip") == mine] if ready else []
        back = dict(frame, src_mac=gateway_mac, dst_mac=frame["src_mac"], src_ip=frame["dst_ip"], dst_ip=mine,
                    payload="back-%s" % (vid or "untagged"), vlan=None)
        down, ready = _listening(worker, TRUNK_POD, "eth0", back["payload"])
        if child and ready:
            exec_in(fabric, "python3", FRAMES, "send", port, json.dumps([back]), check=False)
        down = [f for f in _heard(down, back["payload"]) if f.get("vlan") == vid] if ready else []
        said = "tagged %d" % vid if vid else "untagged"
        rows.append(_row(bool(up and down), "%s@%s %s in the pod is %s on VLAN %d: %s, %s" % (
            TRUNK_POD, node, "VID %d" % vid if vid else "untagged", network["name"], network["vlan"],
            "the fabric heard %s" % mine if up else "the fabric heard nothing from %s" % mine,
            "its answer came back %s" % said if down else "no answer %s in the pod" % said)))
    return rows


def check(session):
    """The rows (``{ok, line}``), made on the running lab."""
    layout = session.layout
    networks, external = layout.provider_networks, layout.externals[0]
    pods = dict((pod, (layout.workers[index], [networks[n] for n in nets], overlay))
                for index, pod, nets, overlay in PROVIDER_PODS)
    seen = dict((pod, _interface(session, node, pod, "eth0")) for pod, (node, _n, _o) in pods.items())
    rows = []
    for pod in ("prov-w1", "prov-w2", "prov-v2"):
        node, (network,), _overlay = pods[pod]
        address, mac = seen[pod]
        port = "vlan%d" % network["vlan"]
        reached = _ping(session, node, pod, network["gateway"])
        known = _fabric_knows(session, external, port, address, mac)
        rows.append(_row(reached and known, "%s@%s %s -> the fabric's %s on VLAN %d: %s, %s" % (
            pod, node, address, network["gateway"], network["vlan"], "ping ok" if reached else "ping FAIL",
            "seen there as itself" if known else "NOT seen there as %s %s" % (address, mac))))
    across = _ping(session, pods["prov-w1"][0], "prov-w1", seen["prov-w2"][0])
    rows.append(_row(across, "prov-w1@%s -> prov-w2@%s %s across the wire: %s" % (
        pods["prov-w1"][0], pods["prov-w2"][0], seen["prov-w2"][0], "ping ok" if across else "ping FAIL")))
    learned = _learned(session, external)
    wrong = ["%s %s on VLANs %s" % (pod, seen[pod][1], sorted(learned.get((seen[pod][1] or "").lower(), ())))
             for pod in ("prov-w1", "prov-w2", "prov-v2")
             if learned.get((seen[pod][1] or "").lower()) != {pods[pod][1][0]["vlan"]}]
    rows.append(_row(not wrong, "the fabric learned each pod's MAC on its network's VLAN alone%s" % (
        "" if not wrong else ": " + "; ".join(wrong))))
    node = pods["prov-multi"][0]
    overlay_peer = _interface(session, layout.workers[1], "pod-w2a", "eth0")[0]
    reached = [(target, _ping(session, node, "prov-multi", target))
               for target in [n["gateway"] for n in networks[:2]] + [overlay_peer]]
    rows.append(_row(all(ok for _t, ok in reached), "prov-multi@%s on two provider networks and %s: %s" % (
        node, layout.pod_networks[0], ", ".join("%s %s" % (t, "ok" if ok else "FAIL") for t, ok in reached))))
    full = _ping(session, pods["prov-w1"][0], "prov-w1", networks[0]["gateway"], size=1472)
    rows.append(_row(full, "prov-w1 -> %s: 1500 bytes, DF, tagged: %s" % (
        networks[0]["gateway"], "ok" if full else "FAIL")))
    rows.extend(_trunk(session, networks, external))
    rows.append(_refused(session))
    return rows


def run(session):
    """``lab providers``: 0 when every row is OK."""
    if len(session.layout.provider_networks) < 2:
        raise SystemExit("lab: %s declares fewer than two provider networks on the gateways' physnet" %
                         session.layout.inventory)
    rows = check(session)
    return report(rows, line(rows))


def line(rows):
    return tally("providers", "provider_ok", rows)
