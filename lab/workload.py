"""The lab's workload: its pods (made on the nodes as kubelet would, by
lab/kubelet.py), the web Service, the tenants' namespaces and their
MultiNetworkPolicy (made as a tenant's kubectl would, by lab/kubelet.py),
the chain, the tap and the operator's baseline (workloads.yml), all on the
inventory's first two networks (``Layout.pod_networks``), and what
verify.yml is told to check of them.
"""

import json
import os
import re
import time

from lab import layout as seed
from lab.host import HERE, exec_in, kubelet_argv
from lab.playbooks import playbook

SYSCTLS = {"fwd-w2": {"net.ipv4.ip_forward": "1"}}
WORKLOADS = os.path.join(HERE, "workloads.yml")
VERIFY_PORT = 7777          # verify.yml's probes answer here
BASELINE_PORT = 7778        # the operator's baseline denies the second network this port of the first
SERVICE_VIP = "10.96.100.10"
POLICY = "srv-in"
POLICY_FOR = "k8s.v1.cni.cncf.io/policy-for"


def node_of(session, pod):
    return [node for node, name, _n, _l, _ns in session.layout.pods() if name == pod][0]


def with_labels(session, labels):
    return [(node, pod) for node, pod, _n, have, _ns in session.layout.pods() if have == labels]


def service(session):
    """The seeds' ExternalIP case: the Service ``web`` on the first network,
    its external IP the external network's 120th address (192.168.50.120
    in the example), port 80, the pods labelled app=web behind it."""
    lay = session.layout
    annotations = {"k8s.plugin.opnfv.org/service-network": lay.pod_networks[0],
                   "k8s.plugin.opnfv.org/service-vip": SERVICE_VIP}
    return {"metadata": {"name": "web", "annotations": annotations},
            "spec": {"selector": seed.WEB, "externalIPs": [lay.external_address(120)],
                     "ports": [{"name": "http", "port": 80, "targetPort": VERIFY_PORT}]}}


def verify_services(session, deleted=()):
    """verify.yml's ``verify_services``: what to reach of the lab's
    Service, from where, and which backends must answer."""
    spec = service(session)["spec"]
    backends = [pod for _node, pod in with_labels(session, spec["selector"])]
    return [{"name": "web", "vip": SERVICE_VIP, "external_ips": spec["externalIPs"], "port": spec["ports"][0]["port"],
             "backends": [b for b in backends if b not in deleted], "deleted": list(deleted),
             "clients": ["cli-w1"]}]


def verify_chains(session, closed=False):
    """verify.yml's ``verify_chains``: lab-chain's ends and function, and
    whether the function is deleted (the chain must then be closed)."""
    function = with_labels(session, seed.FWD)[0]
    return [{"name": "lab-chain", "source": {"node": node_of(session, "chain-src"), "pod": "chain-src"},
             "destination": {"pod": "chain-dst", "network": session.layout.pod_networks[1]},
             "function": {"node": function[0], "pod": function[1], "interfaces": ["eth0", "net1"]},
             "closed": closed}]


def verify_taps(session):
    return [{"name": "lab-tap", "node": node_of(session, "pod-w1a"), "source": "pod-w1a", "collector": "col-w1",
             "collector_interface": "eth0", "target": {"pod": "pod-w1b", "network": session.layout.pod_networks[0]}}]


def tenancy(session):
    """What ``kubelet.py policies`` is given: the tenants' namespaces with
    their labels, and tenant-a's MultiNetworkPolicy ``srv-in`` for the
    first network: the pods labelled app=srv take, on the policed ports
    (VERIFY_PORT and BASELINE_PORT, TCP), only what comes from the pods
    labelled app=cli of their namespace, from the pods of the namespaces
    labelled team=b, or from the second network's subnet (an ipBlock:
    through the router, which does no NAT)."""
    lay = session.layout
    policy = {"apiVersion": "k8s.cni.cncf.io/v1beta1", "kind": "MultiNetworkPolicy",
              "metadata": {"name": POLICY, "namespace": seed.SERVER_NS,
                           "annotations": {POLICY_FOR: "ovn4nfv.k8s/" + lay.pod_networks[0]}},
              "spec": {"podSelector": {"matchLabels": seed.SERVER}, "policyTypes": ["Ingress"],
                       "ingress": [{"from": [{"podSelector": {"matchLabels": seed.CLIENT}},
                                             {"namespaceSelector": {"matchLabels": seed.TENANTS[seed.OTHER_NS]}},
                                             {"ipBlock": {"cidr": lay.pod_subnets[1]}}],
                                    "ports": [{"protocol": "TCP", "port": port}
                                              for port in (VERIFY_PORT, BASELINE_PORT)]}]}}
    return {"namespaces": [{"name": ns, "labels": labels} for ns, labels in sorted(seed.TENANTS.items())],
            "policies": [policy]}


def verify_policies(session):
    """verify.yml's ``verify_policies``: TCP from a client pod to the
    policy's server on the first network, and whether it must pass."""
    lay = session.layout
    rows = [("pol-cli", VERIFY_PORT, "allowed", "podSelector app=cli"),
            ("pol-cli", BASELINE_PORT, "allowed", "the baseline denies the second network only"),
            ("pol-b", VERIFY_PORT, "allowed", "namespaceSelector team=b"),
            ("pod-w1a", VERIFY_PORT, "denied", "no peer of the isolated server"),
            ("cli-w1", VERIFY_PORT, "allowed", "ipBlock %s, through the router" % lay.pod_subnets[1]),
            ("cli-w1", BASELINE_PORT, "denied", "the operator's baseline over the ipBlock")]
    return [{"policy": POLICY, "client": source, "server": "pol-srv", "network": lay.pod_networks[0],
             "port": port, "expect": expect, "why": why} for source, port, expect, why in rows]


def verify_vms(session):
    """verify.yml's ``verify_vms``: each VM, its node, its network and the
    pods its guest must reach."""
    return [{"vm": vm, "node": node, "network": network, "peers": peers}
            for node, vm, network, peers in session.layout.vms()]


def verify_vars(session, deleted=()):
    """verify.yml's extra variables: the Service, chain, tap, policy and
    VMs to check, with the pods named in ``deleted`` gone."""
    closed = any(pod in deleted for _node, pod in with_labels(session, seed.FWD))
    return "-e", json.dumps({"verify_services": verify_services(session, [d for d in deleted if d.startswith("web")]),
                             "verify_chains": verify_chains(session, closed), "verify_taps": verify_taps(session),
                             "verify_policies": verify_policies(session), "verify_vms": verify_vms(session)})


def workloads(session, check=True):
    """workloads.yml: the chain, the tap and the operator's baseline, on
    the lab's networks."""
    return playbook(session, WORKLOADS, "-e", json.dumps({"lab_networks": list(session.layout.pod_networks)}),
                    check=check)


def run_pods(session, nodes=None):
    """Pods on each worker (or on ``nodes``), the way kubelet would make
    them; a pod the API has already is given its interfaces again. Then
    the Service and the tenants' namespaces and policy (:func:`tenants`),
    which the API keeps when they are there."""
    made = []
    for node, pod, networks, labels, namespace in session.layout.pods():
        if nodes is not None and node not in nodes:
            continue
        made.append(kubelet(session, node, "run", "%s/%s" % (namespace, pod), networks, json.dumps(labels),
                            json.dumps(SYSCTLS.get(pod, {}))))
    kubelet(session, session.layout.workers[0], "service", json.dumps(service(session)))
    tenants(session)
    made += run_vms(session, nodes)
    return made


def run_vms(session, nodes=None):
    """The lab's VMs on their nodes (or on ``nodes``), as KubeVirt would
    run them (lab/virt.py): a VM whose guest runs is left as it is. Each
    answer is shaped as a pod's (its launcher's), with the guest's address."""
    made = []
    for node, vm, network, _peers in session.layout.vms():
        if nodes is None or node in nodes:
            answer = virt(session, node, "start", vm, network)
            made.append({"pod": answer["launcher"], "node": answer["node"], "vm": vm,
                         "ips": [answer["lease"]["address"]]})
    return made


def virt(session, node, *argv):
    """lab/virt.py on ``node``; its JSON answer."""
    return kubelet(session, node, *argv, tool="virt.py")


def tenants(session):
    """The tenants' namespaces and policy (:func:`tenancy`), made in one
    call of ``kubelet.py policies`` on the first worker: its answer, what
    became of each and how many ``changed`` (none when they are as made)."""
    return kubelet(session, session.layout.workers[0], "policies", json.dumps(tenancy(session)))


def kubelet(session, node, *argv, tool="kubelet.py"):
    """lab/kubelet.py (or ``tool`` beside it) on ``node``; its JSON answer."""
    name = session.container(node)
    result = exec_in(name, *(kubelet_argv(name, tool) + list(argv)), check=False)
    if result.returncode:
        print(underlay_state(session), flush=True)
        raise SystemExit("lab: kubelet %s on %s failed (exit %d): %s" % (
            " ".join(argv[:2]), node, result.returncode, result.stderr.strip()[-3000:]))
    return json.loads(result.stdout)


UNDERLAY_COMMANDS = [["ip", "-br", "addr"], ["ip", "route"], ["ip", "neigh"],
                     ["ovs-vsctl", "list-ports", "br-phy"], ["ovs-appctl", "fdb/show", "br-phy"]]


def underlay_state(session):
    """What each node's underlay looks like, for a failure report."""
    out = []
    lab = session.lab_set("lab")
    for name, (hostname, _networks) in lab.nodes.items():
        if name in lab.tx_off or name == lab.api:      # no underlay of theirs
            continue
        for argv in UNDERLAY_COMMANDS:
            result = exec_in(name, *argv, check=False)
            out.append("== %s: %s\n%s%s" % (hostname, " ".join(argv), result.stdout, result.stderr))
    return "\n".join(out)


# each central tool's database: its member's control socket and name
DATABASES = {"ovn-nbctl": ("/var/run/ovn/ovnnb_db.ctl", "OVN_Northbound"),
             "ovn-sbctl": ("/var/run/ovn/ovnsb_db.ctl", "OVN_Southbound")}


def raft_role(session, host, tool="ovn-nbctl"):
    """The RAFT role (``leader``, ``follower``, ``candidate``) of ``host``'s
    member of ``tool``'s database, or None (no answer, or standalone)."""
    ctl, database = DATABASES[tool]
    status = exec_in(session.container(host), "ovn-appctl", "-t", ctl, "cluster/status", database,
                     check=False).stdout
    found = re.search(r"^Role: (\S+)", status, re.M)
    return found.group(1) if found else None


def central_leader(session, tool="ovn-nbctl", seconds=20):
    """The central host whose member leads ``tool``'s database (a RAFT
    cluster elects one; a standalone central is its one member), waited
    for (bounded): the one place a write made there is also read back."""
    central = session.layout.central
    if len(central) == 1:
        return central[0]
    leader = until(lambda: next((h for h in central if raft_role(session, h, tool) == "leader"), None), seconds)
    if not leader:
        raise SystemExit("lab: no member of %s leads %s after %d s" % (
            ", ".join(central), DATABASES[tool][1], seconds))
    return leader


def central_ctl(session, tool, *argv, check=True):
    """``tool`` (ovn-nbctl, ovn-sbctl) with ``argv`` on the central, on the
    member that leads its database (:func:`central_leader`): a write and
    what is read after it see the same database."""
    return exec_in(session.container(central_leader(session, tool)), tool, *argv, check=check)


def until(check, seconds=30):
    """``check()``'s answer once it is true, or its last after ``seconds``
    (what a lab check reads changes on its own time, as the watcher, the
    node agent and OVN get to it), looked at every 0.2 s."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def row(kind, ok, text):
    """One row of a lab check (``lab providers``, ``lab hotplug``)."""
    return {"ok": bool(ok), "line": "%-4s %s %s" % ("OK" if ok else "FAIL", kind, text)}


def report(rows, last):
    """A check's rows, then ``last`` (its ``<name>_ok=<n>/<n>`` line made from them by :func:`tally`);
    0 when every row is OK."""
    print("\n".join(r["line"] for r in rows))
    print(last)
    return 0 if all(r["ok"] for r in rows) else 1


def tally(check, key, rows):
    return "%s: %s=%d/%d" % (check, key, sum(1 for r in rows if r["ok"]), len(rows))
