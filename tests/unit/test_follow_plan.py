"""The node agent's follower (daemons/pod_follow.py), its pure parts and
its pass over one pod with a fake agent (written by a hostile review of
issue 36: each was a finding, mended since)."""

import json
import os
import threading
from types import SimpleNamespace

from ansible_collections.ovn4nfv.k8s.plugins.module_utils import cni
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import (
    K_CONTAINER, K_ENTRY, K_INTERFACE, K_POD_REF, K_SANDBOX, K_UID)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import pod_follow

NET0 = {"interface": "net0", "ip_address": "172.16.1.5/24", "mac_address": "0a:58:ac:10:01:05",
        "gateway_ip": "172.16.1.1", "default_gateway": True, "routes": [{"dst": "10.20.0.0/16", "gw": "172.16.1.1"}]}
NET1 = {"interface": "net1", "ip_address": "172.16.2.5/24", "mac_address": "0a:58:ac:10:02:05",
        "gateway_ip": "172.16.2.1", "default_gateway": False, "routes": []}
# as the watcher writes a dhcp interface's entry (annotations.interface_entry): routes emptied
DHCP1 = {"interface": "net1", "ip_address": "172.16.60.5/24", "mac_address": "0a:58:ac:10:3c:05",
         "gateway_ip": "172.16.60.1", "default_gateway": False, "routes": [], "dhcp": True, "mtu": 1400}


class FakeNetns:
    """pyroute2's IPRoute, as far as _mend_routes uses it: every call recorded."""

    def __init__(self):
        self.calls = []

    def link_lookup(self, ifname):
        return [7]

    def link(self, verb, **kwargs):
        self.calls.append(("link", verb, kwargs))

    def route(self, verb, **kwargs):
        self.calls.append(("route", verb, kwargs))


# -- the plan: what makes an interface "another" ------------------------------------
def test_a_mac_written_in_capitals_is_the_same_interface():
    """binding_verdict confirms a MAC case-insensitively, so a list whose
    only difference is the MAC's case (a forged one, or any writer's) is
    what OVN holds already: replacing the device (its removal without any
    southbound release) tears down a working interface for nothing."""
    forged = dict(NET0, mac_address=NET0["mac_address"].upper())
    remove, replace, _mend, add = pod_follow.plan({"net0": NET0}, {"net0": forged})
    assert (remove, replace, add) == ([], [], []), "replaced %s on a MAC's case alone" % replace


def test_a_prefix_length_alone_does_not_replace_an_interface_ovn_still_holds():
    """The southbound check (binding_verdict) ignores the prefix length:
    an entry whose only change is ``/24`` -> ``/8`` passes it, and the
    follower then removes and remakes the interface without OVN ever having
    released its port. A prefix is no part of the port's identity."""
    forged = dict(NET0, ip_address="172.16.1.5/8")
    _remove, replace, _mend, _add = pod_follow.plan({"net0": NET0}, {"net0": forged})
    assert replace == [], "replaced net0 for its prefix length alone"


# -- mending in place, against what ADD makes ---------------------------------------
def test_mending_a_dhcp_interface_makes_no_route_add_would_not_make():
    """ADD configures no address and no route on an interface configured by
    DHCP (node_agent._veths: ``continue``). A dhcp entry whose
    default_gateway becomes explicit (the same meaning: a DHCP interface
    carries its network's default route unless told not to) must not get a
    kernel default route via a gateway the interface has no address for:
    the replace fails, the pass is retried for ever, and when the default
    moves from net0 (which sorts first) net0's default route is already
    deleted."""
    ns = FakeNetns()
    pod_follow._mend_routes(ns, [(DHCP1, dict(DHCP1, default_gateway=True))])
    routes = [c for c in ns.calls if c[0] == "route"]
    assert routes == [], "routes on a DHCP interface: %s" % routes


def test_moving_the_default_route_never_leaves_the_pod_without_one():
    """cni.rst: "the default route is replaced, never absent". When the
    interface that loses it sorts before the one that gains it, the
    follower deletes the old default first: the pod has none until the
    second mend (and none at all if that one fails)."""
    old0, new0 = NET0, dict(NET0, default_gateway=False)
    old1, new1 = NET1, dict(NET1, default_gateway=True)
    ns = FakeNetns()
    pod_follow._mend_routes(ns, [(old0, new0), (old1, new1)])
    defaults = [(c[1], c[2].get("oif")) for c in ns.calls if c[0] == "route" and c[2].get("dst") == "0.0.0.0/0"]
    assert defaults[0][0] == "replace", "default route calls in order: %s" % defaults


# -- one pass over a pod ------------------------------------------------------------
class FakeAgent:
    def __init__(self):
        self.config = SimpleNamespace(max_backoff_seconds=1, resync_seconds=300, watch_seconds=10,
                                      node_netns=None, binding_seconds=1)
        self.stopping = threading.Event()
        self.core = None
        self.node_name = "node1"
        self.calls = []
        self.follower = None

    def _confirm(self, owner, entries, launcher=None, seconds=None):
        self.calls.append(("confirm", [e["interface"] for e in entries]))

    def _remove(self, hosts, container=None):
        self.calls.append(("remove", list(hosts)))

    def _netdev(self):
        return False

    def _veths(self, netns, hosts, default, netdev, container, made):
        made.extend(h for h, _e in hosts)
        self.calls.append(("veths", [h for h, _e in hosts]))

    def _attach(self, hosts, *args):
        self.calls.append(("attach", [h for h, _e in hosts]))

    def _record(self, hosts):
        self.calls.append(("record", [h for h, _e in hosts]))

    def _wait_installed(self, made):
        # the design (decision 4): locks only around mutations, never across waits
        self.calls.append(("wait_installed_locked", self.follower.lock_of("default/p").locked()))


def _pod(entries, uid="uid-p", **annotations):
    found = dict({ann.IFACE_LIST: json.dumps(entries)}, **annotations)
    return SimpleNamespace(metadata=SimpleNamespace(
        namespace="default", name="p", uid=uid, annotations=found, deletion_timestamp=None, labels={},
        owner_references=None))


def _follower(monkeypatch, recorded):
    agent = FakeAgent()
    follower = pod_follow.Follower(agent)
    agent.follower = follower
    handle = os.open("/proc/self/ns/net", os.O_RDONLY)
    stat = os.fstat(handle)
    sandbox = {"netns": "/var/run/netns/x", "id": "%d:%d" % (stat.st_dev, stat.st_ino), "mtu": None}
    follower.held["ctr"] = (handle, "uid-p")
    rows = dict((e["interface"], (cni.host_ifname("uid-p", e["interface"]), {
        K_POD_REF: "default/p", K_UID: "uid-p", K_CONTAINER: "ctr", K_INTERFACE: e["interface"],
        K_SANDBOX: pod_follow.canonical(sandbox), K_ENTRY: pod_follow.canonical(e)})) for e in recorded)
    monkeypatch.setattr(follower, "_rows", lambda key, uid: {"ctr": rows})
    monkeypatch.setattr(cni, "check_netns_fd", lambda *a, **k: None)
    return agent, follower


def test_the_follower_does_not_hold_the_pods_lock_while_it_waits_for_ovn_controller(monkeypatch):
    """Decision 4 of the design: the per-pod locks (64, striped: shared by
    other pods) are held around mutations only, "never across the waits
    (_await_pod, _confirm, _wait_installed)". The follower waits for
    ovn-controller (install_seconds, 30 by default) inside the lock: a DEL
    or ADD of this pod, and of every pod whose key falls in the same
    stripe, waits behind it."""
    agent, follower = _follower(monkeypatch, [NET0])
    follower.cache["default/p"] = _pod([NET0, NET1])
    try:
        follower.handle("default/p")
    finally:
        follower.drop("ctr")
    waits = [c[1] for c in agent.calls if c[0] == "wait_installed_locked"]
    assert waits == [False], "the lock was held while waiting for ovn-controller: %s" % agent.calls


def test_a_replacement_waits_until_ovn_released_the_old_port_as_a_removal_does(monkeypatch):
    """A removal waits until the southbound holds no port for the interface
    (a forged list removes nothing). A "replacement" removes the device
    just the same, but only the *new* entry is confirmed, and the SB check
    ignores the MAC's case, the prefix and ``dhcp``: a list that flips
    net0's ``dhcp`` (or capitalises its MAC) makes the follower tear down
    and remake the pod's primary interface (the one the watcher refuses to
    replace) while OVN never changed its port. Here: what the pass removed
    although nothing was released."""
    agent, follower = _follower(monkeypatch, [NET0, NET1])
    released = []
    monkeypatch.setattr(follower, "_released", lambda owner, interfaces: released.extend(interfaces))
    mended = []
    monkeypatch.setattr(follower, "_mend", lambda netns, sandbox, rows, pairs: mended.extend(pairs))
    follower.cache["default/p"] = _pod([dict(NET0, dhcp=True), NET1])
    try:
        follower.handle("default/p")
    finally:
        follower.drop("ctr")
    removed = [h for c in agent.calls if c[0] == "remove" for h in c[1]]
    assert not removed or released, "removed %s with no southbound release checked" % removed
    assert [new["interface"] for _old, new in mended] == ["net0"], "dhcp flipped alone is mended in place"
