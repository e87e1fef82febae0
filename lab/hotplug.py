"""``lab hotplug``: a running pod gains a second network and loses it again
while its first interface carries traffic (issue 36), checked from outside
the product on the running lab.

The pod ``hp-w1`` (namespace ``hotplug``, apart from verify.yml's matrix)
runs on the first worker with the first pod network as ``eth0``; a steady
ping (every 50 ms) runs from it to ``pod-w2a`` across the overlay while its
request changes. The rows, each read from the pod's own namespace, the
worker's OVS and links, the NB on the master, and the API:

* the request gains the second pod network as ``eth1``: the interface comes
  up in the pod with an address of that network, and reaches ``pod-w2a``'s
  interface on it;
* the request drops it: its logical port, its OVS port, its veth and the
  pod's link are gone;
* the steady ping on ``eth0`` lost nothing while ``eth1`` came and went;
* a request naming a network that does not exist is refused (the
  watcher's ``UnknownNetwork`` Event on the pod) and the pod keeps its
  interfaces.

The pod is made at the start and deleted at the end, so that a second run
starts where the first did and nothing of it outlives the check. Prints the rows and, last,
``hotplug: hotplug_ok=<n>/<n>``.
"""

import json
import re
import subprocess

from lab.host import exec_in
from lab.workload import kubelet, report, row, tally, until

NAMESPACE, POD = "hotplug", "hp-w1"
WAIT_S = 30


def _row(ok, text):
    return row("hotplug", ok, text)


def _links(session, node):
    """``{name: address or None}`` of the pod's links, read in the pod."""
    out = exec_in(session.container(node), "ip", "netns", "exec", POD, "ip", "-j", "addr", check=False).stdout
    links = json.loads(out or "[]")
    return dict((l["ifname"], next((a["local"] for a in l.get("addr_info", []) if a.get("family") == "inet"), None))
                for l in links if l["ifname"] != "lo")


def _request(session, node, networks):
    return kubelet(session, node, "request", "%s/%s" % (NAMESPACE, POD), json.dumps(
        [{"name": n, "interface": "eth%d" % i} for i, n in enumerate(networks)]))


def check(session):
    layout = session.layout
    node, peer_node = layout.workers[0], layout.workers[1]
    first, second = layout.pod_networks[0], layout.pod_networks[1]
    worker, master = session.container(node), session.container(layout.masters[0])
    kubelet(session, node, "run", "%s/%s" % (NAMESPACE, POD), json.dumps([{"name": first, "interface": "eth0"}]))
    _request(session, node, [first])        # as it was made, whatever a run before left
    peer = json.loads(exec_in(session.container(peer_node), "ip", "netns", "exec", "pod-w2a", "ip", "-j", "-4",
                              "addr").stdout)
    peer = dict((l["ifname"], l["addr_info"][0]["local"]) for l in peer if l.get("addr_info") and l["ifname"] != "lo")
    steady = subprocess.Popen(["podman", "exec", worker, "ip", "netns", "exec", POD, "ping", "-n", "-i", "0.05",
                               "-w", "120", peer["eth0"]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True)
    rows = []
    try:
        _request(session, node, [first, second])
        gained = until(lambda: _links(session, node).get("eth1"), WAIT_S)
        reached = gained and exec_in(worker, "ip", "netns", "exec", POD, "ping", "-n", "-c", "2", "-W", "2",
                                     "-i", "0.2", peer["net1"], check=False).returncode == 0
        rows.append(_row(gained and reached, "%s@%s gains %s as eth1: %s" % (
            POD, node, second, "up with %s, reaches pod-w2a's %s" % (gained, peer["net1"]) if reached
            else "address %s, pod-w2a's %s %s" % (gained, peer["net1"], "reached" if reached else "not reached"))))
        host = exec_in(worker, "ovs-vsctl", "--bare", "--columns=name", "find", "interface",
                       "external_ids:ovn4nfv-pod=%s/%s" % (NAMESPACE, POD),
                       "external_ids:ovn4nfv-interface=eth1", check=False).stdout.strip()
        _request(session, node, [first])

        def gone():
            port = exec_in(master, "ovn-nbctl", "--no-leader-only", "--bare", "--columns=name", "find",
                           "logical_switch_port", "name=%s_%s_eth1" % (NAMESPACE, POD), check=False).stdout.strip()
            ovs = exec_in(worker, "ovs-vsctl", "--bare", "--columns=name", "find", "interface",
                          "external_ids:ovn4nfv-pod=%s/%s" % (NAMESPACE, POD),
                          "external_ids:ovn4nfv-interface=eth1", check=False).stdout.strip()
            veth = host and exec_in(worker, "ip", "link", "show", host, check=False).returncode == 0
            return not port and not ovs and not veth and "eth1" not in _links(session, node)
        lost = until(gone, WAIT_S)
        rows.append(_row(lost and host, "%s@%s loses eth1: %s" % (POD, node, "its logical port, OVS port %s, veth "
                                                                  "and link gone" % host if lost and host else
                                                                  "something of it is left (OVS port %r)" % host)))
        _request(session, node, [first, "no-such-network"])
        told = [m for m in kubelet(session, node, "events", "%s/%s" % (NAMESPACE, POD), "UnknownNetwork")
                if "no-such-network" in m]
        kept = list(_links(session, node)) == ["eth0"]
        rows.append(_row(told and kept, "%s asks for no-such-network: %s, %s" % (
            POD, "an UnknownNetwork Event" if told else "no UnknownNetwork Event",
            "its interfaces kept" if kept else "its interfaces now %s" % sorted(_links(session, node)))))
    finally:
        exec_in(worker, "pkill", "-INT", "-f", "ping -n -i 0.05", check=False)
        out, _err = steady.communicate(timeout=30)
        # the pod is this check's alone: gone after it, as kubelet deletes a pod (a reboot of its
        # node would otherwise leave the API a pod no sandbox runs, which the audit reports)
        kubelet(session, node, "delete", "%s/%s" % (NAMESPACE, POD))
    # by the replies' sequence numbers: the request in flight when the ping
    # was stopped is no loss (its summary would count it as one)
    answered = set(int(n) for n in re.findall(r"icmp_seq=(\d+)", out or ""))
    sent = max(answered) if answered else 0
    rows.insert(2, _row(sent > 20 and len(answered) == sent, "%s's eth0 -> pod-w2a %s while eth1 came and went: "
                        "%d of %d answered" % (POD, peer["eth0"], len(answered), sent)))
    return rows


def run(session):
    """``lab hotplug``: 0 when every row is OK."""
    rows = check(session)
    return report(rows, line(rows))


def line(rows):
    return tally("hotplug", "hotplug_ok", rows)
