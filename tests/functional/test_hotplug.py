"""Interfaces added to and removed from running pods, on the node (issue
36): the node agent as a process on a real node (ovs-vswitchd netdev,
ovn-controller), the pods' interface lists written on the API stand-in as
the watcher writes them (the core's functions; the watcher's own part is
tests/functional/test_pod_changes.py). Everything is checked from outside
the agent: the OVS database, the node's and the pod's links, the data
plane."""

import json
import re
import subprocess

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from tests.harness.cni_env import running
from tests.harness.dataplane import ip, ns_name, ping

NET0 = {"name": "net1", "interface": "net0"}
NET1 = {"name": "net2", "interface": "net1"}


@pytest.fixture(scope="module")
def env(tmp_path_factory, collections_path):
    with running(str(tmp_path_factory.mktemp("hotplug")), collections_path) as environment:
        yield environment


def rows_of(env, pod):
    """``{interface: its Interface row's name}`` of the pod, in the node's OVS."""
    box = env.node.box
    out = box.run("ovs-vsctl", "--db=" + box.ovs_db, "--format=json", "--columns=name,external_ids", "list",
                  "interface")
    found = {}
    for name, ids in json.loads(out)["data"]:
        marks = dict(ids[1])
        if marks.get("ovn4nfv-pod") == "default/" + pod:
            found[marks.get("ovn4nfv-interface")] = name
    return found


def wait_rows(env, pod, interfaces, timeout=30):
    """Block until the pod's OVS rows are exactly ``interfaces``, each
    installed by ovn-controller, woken by the OVS database's updates."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb

    def there(idl):
        rows = [r for r in idl.tables["Interface"].rows.values()
                if r.external_ids.get("ovn4nfv-pod") == "default/" + pod]
        return sorted(r.external_ids.get("ovn4nfv-interface") for r in rows) == sorted(interfaces) and all(
            r.external_ids.get("ovn-installed") == "true" for r in rows)
    with ovsdb.Database(env.node.box.ovs_db, ovsdb.OVS_SCHEMA, ("Interface",)) as db:
        done = db.wait_for(there, timeout)
    assert done, "pod %s: not %s; agent log:\n%s" % (pod, interfaces, env.log_text())


def pod_links(netns):
    return sorted(line.split(":")[1].strip().split("@")[0]
                  for line in ip("ip", "-o", "link", netns=netns).stdout.splitlines())


def address_of(netns, ifname):
    out = ip("ip", "-o", "-4", "addr", "show", "dev", ifname, netns=netns).stdout
    return out.split()[3].split("/")[0] if out.strip() else None


def change(env, name, *requests, drop=()):
    """What the watcher does when the pod's request becomes ``requests``:
    ports made for the new ones, the dropped interfaces' ports deleted, the
    list written anew."""
    for interface in drop:
        env.node.box.nbctl("--if-exists", "lsp-del", "default_%s_%s" % (name, interface))
    _netns, patch = env.watcher_ran(env.api.pod("default", name), *requests)
    env.api.set_annotations("default", name, dict(patch, **{ann.OVN_NETWORK: json.dumps(list(requests))}))
    return json.loads(patch[ann.IFACE_LIST])


def test_an_interface_added_and_removed_while_the_first_carries_traffic(env):
    """While a steady ping runs on net0, net1 is added (it then carries
    traffic) and removed (its OVS port, its veth and the pod's link gone);
    the ping on net0 loses nothing, and CHECK and DEL see the pod as it is."""
    peer = env.pod("hpeer", NET0, NET1)
    assert env.cni("ADD", "hpeer", peer, "ctr-hpeer")[0] == 0
    netns = env.pod("hp", NET0)
    code, result, err = env.cni("ADD", "hp", netns, "ctr-hp")
    assert code == 0, (result, err, env.log_text())
    env.node.wait_hv()
    target = address_of(peer, "net0")
    steady = subprocess.Popen(["ip", "netns", "exec", ns_name(netns), "ping", "-n", "-i", "0.01", "-w", "60",
                               target], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    try:
        assert ping(netns, target), "net0 carries traffic before"
        change(env, "hp", NET0, NET1)
        wait_rows(env, "hp", ["net0", "net1"])
        assert pod_links(netns) == ["lo", "net0", "net1"] and address_of(netns, "net1").startswith("172.16.2.")
        env.node.wait_hv()
        assert ping(netns, address_of(peer, "net1")), "the added interface carries traffic"
        host = rows_of(env, "hp")["net1"]
        change(env, "hp", NET0, drop=["net1"])
        wait_rows(env, "hp", ["net0"])
        # the OVS port goes before the veth: the agent's record says when both went
        assert env.wait_log("pod default/hp: followed its list: removed net1", 30), env.log_text()
        assert pod_links(netns) == ["lo", "net0"], "the pod's link is gone"
        assert host not in env.node_links(), "the node's veth is gone"
        assert "default_hp_net1" not in env.node.box.nbctl("--bare", "--columns=name", "list", "logical_switch_port")
        assert ping(netns, target), "net0 carries traffic after"
    finally:
        steady.send_signal(2)       # SIGINT: ping prints its summary
        out, _err = steady.communicate(timeout=30)
    # by the replies' sequence numbers: the request in flight when ping was stopped is no loss
    answered = set(int(n) for n in re.findall(r"icmp_seq=(\d+)", out))
    sent = max(answered) if answered else 0
    assert sent > 50 and len(answered) == sent, "net0 lost %d of %d while net1 came and went" % (
        sent - len(answered), sent)
    code, out, _err = env.cni("CHECK", "hp", netns, "ctr-hp", prevResult=result)
    assert code == 0, out
    assert env.cni("DEL", "hp", netns, "ctr-hp")[0] == 0
    assert rows_of(env, "hp") == {}


def test_a_list_that_drops_an_interface_ovn_still_holds_removes_nothing(env):
    """The pod's owner rewrites its list to drop net1 while OVN keeps its
    port: the follower leaves the interface, saying why."""
    netns = env.pod("hf", NET0, NET1)
    assert env.cni("ADD", "hf", netns, "ctr-hf")[0] == 0
    listed = ann.parse_iface_list(env.api.pod("default", "hf")["metadata"]["annotations"][ann.IFACE_LIST])
    env.api.set_annotations("default", "hf", ann.output_annotations(listed[:1]))
    assert env.wait_log("OVN still holds default_hf_net1", 60), env.log_text()
    assert sorted(rows_of(env, "hf")) == ["net0", "net1"] and pod_links(netns) == ["lo", "net0", "net1"]
    assert env.cni("DEL", "hf", netns, "ctr-hf")[0] == 0


def test_a_change_written_while_the_agent_is_down_is_applied_when_it_starts(env):
    netns = env.pod("hd", NET0)
    assert env.cni("ADD", "hd", netns, "ctr-hd")[0] == 0
    env.stop_agent()
    try:
        change(env, "hd", NET0, NET1)
    finally:
        env.start_agent()
    wait_rows(env, "hd", ["net0", "net1"])
    assert pod_links(netns) == ["lo", "net0", "net1"]
    # and a default route that moves to the new interface is moved in place
    change(env, "hd", NET0, dict(NET1, default_gateway=True))
    assert env.wait_log("pod default/hd: followed its list: mended net1", 30), env.log_text()
    assert "default via 172.16.2.1 dev net1" in ip("ip", "route", netns=netns).stdout
    assert env.cni("DEL", "hd", netns, "ctr-hd")[0] == 0
    assert rows_of(env, "hd") == {}


def test_the_multus_way_an_attachment_added_before_the_watcher_served_it(env):
    """The Multus dynamic-networks controller calls the delegate's ADD for
    an attachment it adds to a running pod, often before the watcher has
    served the changed selections: the per-attachment ADD waits until the
    list names its interface, then makes it; its DEL removes it alone. The
    follower leaves such a pod's interfaces to those calls."""
    import threading
    netns = env.pod("hm", NET0)
    code, result, _err = env.cni("ADD", "hm", netns, "ctr-hm", ifname="net0", provider="ovnnet.default.ovn")
    assert code == 0, result
    env.api.set_annotations("default", "hm", {ann.MULTUS_NETWORKS: "ovnnet"})    # the pod is Multus's
    outcome = {}
    adding = threading.Thread(target=lambda: outcome.update(answer=env.cni(
        "ADD", "hm", netns, "ctr-hm", ifname="net1", provider="ovnnet.default.ovn")))
    adding.start()
    try:
        change(env, "hm", NET0, NET1)       # the watcher, later
    finally:
        adding.join(60)
    code, result, err = outcome["answer"]
    assert code == 0, (result, err, env.log_text())
    assert [i["name"] for i in result["interfaces"] if i.get("sandbox")] == ["net1"]
    assert pod_links(netns) == ["lo", "net0", "net1"]
    assert env.cni("DEL", "hm", netns, "ctr-hm", ifname="net1", provider="ovnnet.default.ovn")[0] == 0
    assert pod_links(netns) == ["lo", "net0"] and sorted(rows_of(env, "hm")) == ["net0"]
    assert env.cni("DEL", "hm", netns, "ctr-hm", ifname="net0", provider="ovnnet.default.ovn")[0] == 0


def test_a_change_that_comes_while_the_add_runs_is_followed_after_it(env):
    """The ADD waits for the pod's list; the list comes with one interface
    and, at once, with two: whichever the ADD read, the pod ends with both
    (the ADD queues the follower when it ends), and a change then the
    pod's DEL leaves nothing."""
    import threading
    obj = env.create_pod("hr", NET0, NET1)
    netns = "/var/run/netns/o4n-%s-hr" % env.node.tag
    outcome = {}
    adding = threading.Thread(target=lambda: outcome.update(answer=env.cni("ADD", "hr", netns, "ctr-hr")))
    adding.start()
    try:
        _netns, both = env.watcher_ran(obj, NET0, NET1)
        listed = ann.parse_iface_list(both[ann.IFACE_LIST])
        env.api.set_annotations("default", "hr", ann.output_annotations(listed[:1]))
        env.api.set_annotations("default", "hr", both)
    finally:
        adding.join(60)
    assert outcome["answer"][0] == 0, (outcome["answer"], env.log_text())
    wait_rows(env, "hr", ["net0", "net1"])
    assert pod_links(netns) == ["lo", "net0", "net1"]
    change(env, "hr", NET0, drop=["net1"])
    assert env.cni("DEL", "hr", netns, "ctr-hr")[0] == 0
    assert rows_of(env, "hr") == {} and "net1" not in pod_links(netns)


def mtu_of(ifname, netns):
    out = ip("ip", "-o", "link", "show", "dev", ifname, netns=netns).stdout
    return int(re.search(r" mtu (\d+)", out).group(1))


def test_an_mtu_mended_in_place_is_the_mtu_of_both_ends_of_the_veth(env):
    """ADD gives both ends of a veth the entry's MTU; so does a mend."""
    netns = env.pod("rm", NET0, NET1)
    assert env.cni("ADD", "rm", netns, "ctr-rm")[0] == 0
    host = rows_of(env, "rm")["net1"]
    entries = ann.parse_iface_list(env.api.pod("default", "rm")["metadata"]["annotations"][ann.IFACE_LIST])
    entries[1]["mtu"] = 9000
    env.api.set_annotations("default", "rm", ann.output_annotations(entries))
    assert env.wait_log("pod default/rm: followed its list: mended net1", 30), env.log_text()
    assert (mtu_of("net1", netns), mtu_of(host, env.node.ns)) == (9000, 9000)
    assert env.cni("DEL", "rm", netns, "ctr-rm")[0] == 0


def test_the_default_route_moved_to_an_interface_its_dhcp_configures(env):
    """net0 gives up the default route and net1, configured inside by its
    network's DHCP, takes it: its DHCP carries the route, so the node makes
    none on it (as ADD makes none) and the change is followed."""
    guest = {"name": "vmnet", "interface": "net1", "dhcp": True, "default_gateway": False}
    netns = env.pod("rg", dict(NET0, default_gateway=True), guest)
    assert env.cni("ADD", "rg", netns, "ctr-rg")[0] == 0
    change(env, "rg", NET0, dict(guest, default_gateway=True))
    assert env.wait_log("pod default/rg: followed its list: mended net0, net1", 30), env.log_text()
    assert "default" not in ip("ip", "route", netns=netns).stdout
    assert env.cni("DEL", "rg", netns, "ctr-rg")[0] == 0


def test_a_hot_added_interface_survives_an_agent_restart_and_comes_back_with_the_next_sandbox(env):
    """An interface added to the running pod stays through the node agent's
    restart (its follower, level-triggered, finds nothing to change); the
    runtime then loses the sandbox (a reboot: its namespace gone, no DEL):
    the agent lets go of what it kept of it, and the pod's next sandbox is
    made with both interfaces, its node-side names free again."""
    netns = env.pod("rn", NET0)
    assert env.cni("ADD", "rn", netns, "ctr-rn")[0] == 0
    change(env, "rn", NET0, NET1)
    wait_rows(env, "rn", ["net0", "net1"])
    hosts = rows_of(env, "rn")
    env.stop_agent()
    env.start_agent()
    env.cni("STATUS", "none", "", "ctr-status")         # answered once it serves, its first list made
    change(env, "rn", NET0, NET1)                       # a pass over the pod, which changes nothing
    assert rows_of(env, "rn") == hosts and pod_links(netns) == ["lo", "net0", "net1"]
    name = netns.rsplit("/", 1)[1]
    ip("ip", "netns", "delete", name)
    env.node.namespaces.remove(name)
    env.node._add_ns(name + "b")
    code, out, _err = env.cni("ADD", "rn", "/var/run/netns/%sb" % name, "ctr-rn2")
    assert code == 0, (out, env.log_text())
    assert pod_links("/var/run/netns/%sb" % name) == ["lo", "net0", "net1"]
    assert env.cni("DEL", "rn", "/var/run/netns/%sb" % name, "ctr-rn2")[0] == 0
    assert env.cni("DEL", "rn", netns, "ctr-rn")[0] == 0
    assert rows_of(env, "rn") == {}
