"""Interfaces added to and removed from running pods (issue 36): 100
changes of a request, alternately adding a second interface to a running
pod and removing it, on 10 pods; each timed from the request's change in
the API to the interface up with its address in the pod (for a removal,
to its link gone), through the real watcher (a process) and the real node
agent (a process, its follower) on a real node (ovs-vswitchd netdev,
ovn-controller).

Baseline, in the same run and the same way: 20 new pods, each timed from
its creation in the API (the runtime's ADD called as soon as the API has
it, as a kubelet would) to its interface up with its address.

The pod's namespace is read every 5 ms (netlink): what it adds to a figure
is at most that.

Last line: ``hotplug: changes=100 p50_ms=<a> p99_ms=<b> pod_p50_ms=<c> pod_p99_ms=<d>``
"""

import json
import shutil
import tempfile
import time

from benchmarks.common import Ansible, percentile

PODS, CHANGES, FRESH = 10, 100, 20
NET0 = {"name": "net1", "interface": "net0"}
NET1 = {"name": "net2", "interface": "net1"}


def state(netns, ifname):
    """The IPv4 address of ``ifname`` in the namespace, "" when it is there
    without one, None when it is not there."""
    from pyroute2 import NetNS
    with NetNS(netns) as pod_ns:
        found = pod_ns.link_lookup(ifname=ifname)
        if not found:
            return None
        addresses = [a.get_attr("IFA_ADDRESS") for a in pod_ns.get_addr(index=found[0], family=2)]
        return addresses[0] if addresses else ""


def until(netns, ifname, present, started, timeout=30):
    """Milliseconds from ``started`` until ``ifname`` has an address (or,
    ``present`` false, is gone)."""
    deadline = started + timeout
    while time.monotonic() < deadline:
        found = state(netns, ifname)
        if (found if present else found is None):
            return (time.monotonic() - started) * 1000
        time.sleep(0.005)
    raise AssertionError("%s %s in %s after %ss" % (ifname, "not up" if present else "still there", netns, timeout))


def main():
    ansible = Ansible()      # only for its collection path
    from tests.harness.cni_env import NETWORKS, Env
    from tests.harness.watcher_env import Cluster
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-hotplug-")
    env = Env(tmp, ansible.collections)
    watcher = None
    changes, fresh = [], []
    try:
        watcher = Cluster(tmp, ansible.collections, networks=NETWORKS, api=env.api, box=env.node.box)
        pods = []
        for index in range(PODS + FRESH):
            name = "h%d" % index
            netns = "/var/run/netns/o4n-%s-%s" % (env.node.tag, name)
            started = time.monotonic()
            env.create_pod(name, NET0)
            code, out, err = env.cni("ADD", name, netns, "ctr-" + name)        # waits for the watcher's list
            assert code == 0, (out, err)
            took = until(netns, "net0", True, started)
            if index < PODS:
                pods.append((name, netns))
            else:
                fresh.append(took)
        for index in range(CHANGES):
            name, netns = pods[index % PODS]
            adding = (index // PODS) % 2 == 0
            started = time.monotonic()
            env.api.set_annotations("default", name, {ann.OVN_NETWORK: json.dumps([NET0, NET1] if adding else [NET0])})
            changes.append(until(netns, "net1", adding, started))
    finally:
        if watcher is not None:
            watcher.stop()
        env.stop()
        ansible.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d changes on %d running pods (an interface added, then removed), through the watcher and the "
          "node agent's follower; p99 aim: under 2000 ms" % (CHANGES, PODS))
    print("baseline: %d new pods, from creation in the API to the interface up with its address" % FRESH)
    print("hotplug: changes=%d p50_ms=%.0f p99_ms=%.0f pod_p50_ms=%.0f pod_p99_ms=%.0f" % (
        len(changes), percentile(changes, 0.5), percentile(changes, 0.99), percentile(fresh, 0.5),
        percentile(fresh, 0.99)))


if __name__ == "__main__":
    main()
