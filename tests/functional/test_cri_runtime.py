"""The CNI plugin behind a real container runtime: containerd's CRI
(Debian's containerd, runc and a sandbox image of Debian's catatonit) in
the CNI test node's namespace, called as a kubelet calls it, and calling
the product's plugin through its own libcni: RunPodSandbox (ADD),
StopPodSandbox and RemovePodSandbox (DEL, repeated), its restart with
sandboxes running, its result cache, its deadline. The API stand-in is the
only stand-in. Each case ends with the node, OVS and the NB looked at from
outside: ``ip``, ``ovsdb-client``, ``ovn-nbctl``/``ovn-sbctl``, the
libcni cache in /var/lib/cni and the mounts."""

import json
import os
import subprocess

import grpc
import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils import cni
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.node_agent import veth_alias
from tests.harness import collection, cri
from tests.harness.cni_env import running
from tests.harness.containerd_env import CACHE, Containerd, recorded, recorder

TWO = ({"name": "net1", "interface": "net0"}, {"name": "net2", "interface": "net1"})
ETH0 = ({"name": "net1", "interface": "eth0"},)


@pytest.fixture(scope="module")
def env(tmp_path_factory, collections_path):
    with running(str(tmp_path_factory.mktemp("cri")), collections_path) as environment:
        yield environment


@pytest.fixture(scope="module")
def ct(env):
    """One containerd for the module; each test has pods of its own."""
    runtime = Containerd(env, record=True)
    try:
        yield runtime
    finally:
        errors = runtime.stop()
        assert not runtime._processes() and not runtime.mounted() and not os.path.exists(runtime.dir)
    assert not errors, errors


def wanted(env, name):
    """The pod's interface list as the watcher wrote it."""
    return ann.parse_iface_list(env.api.pod("default", name)["metadata"]["annotations"][ann.IFACE_LIST])


def assert_running(env, ct, obj, sandbox):
    """The sandbox READY, its IP the first interface's; each interface in
    containerd's namespace with the watcher's MAC and address; its OVS
    port on br-int, marked for this sandbox, its veth on the node; its NB
    port up."""
    name, uid = obj["metadata"]["name"], obj["metadata"]["uid"]
    entries = wanted(env, name)
    status, info = ct.status(sandbox)
    assert status.get("state", cri.SANDBOX_READY) == cri.SANDBOX_READY, status
    assert status["network"]["ip"] == entries[0]["ip_address"].split("/")[0], (status, entries)
    links = ct.pod_links(ct.netns(sandbox))
    for entry in entries:
        mac, addresses = links[entry["interface"]]
        assert mac == entry["mac_address"] and entry["ip_address"] in addresses, (links, entry)
    ports = ct.ovs_ports(name)
    hosts = dict((cni.host_ifname(uid, e["interface"]), e["interface"]) for e in entries)
    assert set(ports) == set(hosts), (ports, hosts)
    for host, interface in hosts.items():
        assert ports[host]["iface-id"] == "default_%s_%s" % (name, interface)
        assert ports[host]["ovn4nfv-container-id"] == sandbox
        assert ct.node_veths()[host] == veth_alias(sandbox, interface)
    assert info["cniResult"]["Interfaces"]["eth0"]["IPConfigs"][0]["IP"] == status["network"]["ip"]
    ct.nb_wait(name, [e["interface"] for e in entries], up=True)


def assert_gone(env, ct, obj, *sandboxes):
    """Nothing of the pod's sandboxes left: no OVS port, no veth, no
    sandbox, no mounted namespace, no cache entry; its NB ports down."""
    name, uid = obj["metadata"]["name"], obj["metadata"]["uid"]
    interfaces = [r["interface"] for r in json.loads(obj["metadata"]["annotations"]["ovnNetwork"])]
    assert not ct.ovs_ports(name)
    assert not set(cni.host_ifname(uid, i) for i in interfaces) & set(env.node_links())
    assert not [v for v in ct.node_veths().values() if any(veth_alias(s, "") in v for s in sandboxes)]
    assert not ct.of_pod(uid)
    netns = set(c["env"]["CNI_NETNS"] for s in sandboxes for c in ct.calls(s, "ADD"))
    assert not netns & set(ct.mounted()) and not [path for path in netns if os.path.exists(path)], netns
    assert not [f for f in os.listdir(CACHE) if any(s in f for s in sandboxes)]
    ct.nb_wait(name, interfaces, up=False)


def test_run_pod_sandbox_adds_the_pods_interfaces(env, ct):
    """A pod whose interfaces are not the runtime's eth0 (net0, net1):
    containerd takes its IP from the first one (without that, it refused
    the sandbox: "failed to find network info"); one asking for eth0
    too."""
    for name, requests in (("add", TWO), ("add-eth0", ETH0)):
        obj, sandbox = ct.run_pod(name, *requests)
        assert_running(env, ct, obj, sandbox)
        call, = ct.calls(sandbox, "ADD")
        assert call["env"]["CNI_NETNS"] == ct.netns(sandbox) and call["env"]["CNI_IFNAME"] == "eth0"
        ct.stop_sandbox(sandbox)
        ct.remove_sandbox(sandbox)
        assert_gone(env, ct, obj, sandbox)


def test_stop_repeated_and_remove_leave_nothing(env, ct):
    obj, sandbox = ct.run_pod("del", *TWO)
    assert_running(env, ct, obj, sandbox)
    netns = ct.netns(sandbox)
    ct.stop_sandbox(sandbox)
    status, _info = ct.status(sandbox)
    assert status["state"] == cri.SANDBOX_NOTREADY
    assert not ct.ovs_ports("del") and not ct.cached(sandbox)
    ct.stop_sandbox(sandbox)
    ct.remove_sandbox(sandbox)
    dels = ct.calls(sandbox, "DEL")
    assert len(dels) >= 2, "the runtime repeats DEL: %s" % dels
    assert dels[0]["env"]["CNI_NETNS"] == netns and dels[-1]["env"]["CNI_NETNS"] == "", dels
    assert dels[0]["stdin"]["prevResult"]["ips"][0]["address"] == wanted(env, "del")[0]["ip_address"]
    assert_gone(env, ct, obj, sandbox)


def test_check_with_the_runtimes_cached_result(env, ct):
    obj, sandbox = ct.run_pod("check", *TWO)
    entry = ct.cached(sandbox)["eth0"]
    assert entry["containerId"] == sandbox and entry["networkName"] == ct.network["name"]
    assert dict(entry["cniArgs"])["K8S_POD_UID"] == obj["metadata"]["uid"]
    assert [ip["address"] for ip in entry["result"]["ips"]] == [e["ip_address"] for e in wanted(env, "check")]
    code, out, err = ct.libcni_check(sandbox)
    assert code == 0 and out is None, (out, err, env.log_text())
    netns = ct.netns(sandbox)
    subprocess.run(["nsenter", "--net=" + netns, "ip", "link", "del", "net1"], check=True, timeout=30)
    assert "net1" not in ct.pod_links(netns)
    code, out, _err = ct.libcni_check(sandbox)
    assert code == 1 and out["code"] == 103 and "net1" in out["msg"], out
    ct.stop_sandbox(sandbox)
    ct.remove_sandbox(sandbox)
    assert_gone(env, ct, obj, sandbox)


def test_containerd_restarted_with_sandboxes_running(env, ct):
    pods = [ct.run_pod("rs-a", *TWO), ct.run_pod("rs-b", *ETH0)]
    before = [ct.pod_links(ct.netns(sandbox)) for _obj, sandbox in pods]
    ct.restart()
    for (obj, sandbox), links in zip(pods, before):
        assert_running(env, ct, obj, sandbox)
        assert ct.pod_links(ct.netns(sandbox)) == links
    for obj, sandbox in pods:
        ct.stop_sandbox(sandbox)
        ct.remove_sandbox(sandbox)
        assert_gone(env, ct, obj, sandbox)


@pytest.mark.parametrize("failure", ["agent stopped", "address refused"])
def test_a_failed_add_retried_with_a_new_sandbox_leaves_one_set(env, ct, failure):
    """The first sandbox's ADD fails (the agent is away: DEL fails too and
    containerd keeps the sandbox; or the kernel refuses the address after
    the veth was made); the kubelet removes what the runtime kept and runs
    attempt 1 once the agent is back: one set of ports, the new sandbox's."""
    name = "retry-" + failure.split()[0]
    obj = ct.create_pod(name, *TWO)
    first_ip = wanted(env, name)[0]["ip_address"].split("/")[0]
    with pytest.raises(grpc.RpcError) as failed:
        if failure == "agent stopped":
            env.stop_agent()
            try:
                ct.run_sandbox(obj)
            finally:
                env.start_agent()
        else:
            with env.agent_variant(faults={"address": first_ip}):
                ct.run_sandbox(obj)
    assert ("not reachable" if failure == "agent stopped" else "injected") in failed.value.details()
    failed_id, = set(c["env"]["CNI_CONTAINERID"] for c in ct.calls(command="ADD")
                     if "K8S_POD_NAME=%s;" % name in c["env"]["CNI_ARGS"] + ";")
    for sandbox, state in ct.of_pod(obj["metadata"]["uid"]).items():      # as the kubelet cleans up
        assert state != cri.SANDBOX_READY
        ct.stop_sandbox(sandbox)
        ct.remove_sandbox(sandbox)
    sandbox = ct.run_sandbox(obj, attempt=1)
    assert sandbox != failed_id
    assert_running(env, ct, obj, sandbox)
    assert list(ct.of_pod(obj["metadata"]["uid"])) == [sandbox]
    assert not [v for v in ct.node_veths().values() if veth_alias(failed_id, "") in v]
    assert not ct.cached(failed_id)
    ct.stop_sandbox(sandbox)
    ct.remove_sandbox(sandbox)
    assert_gone(env, ct, obj, sandbox, failed_id)


def test_agent_restarted_between_run_and_remove(env, ct):
    """The agent goes away under a running pod: the kubelet's stop fails
    (its DEL cannot be served) and leaves the pod's ports; once the agent
    is back, the repeated stop and the removal leave nothing."""
    obj, sandbox = ct.run_pod("agent-restart", *TWO)
    env.stop_agent()
    try:
        with pytest.raises(grpc.RpcError) as refused:
            ct.stop_sandbox(sandbox)
        assert "not reachable" in refused.value.details()
    finally:
        env.start_agent()
    assert len(ct.ovs_ports("agent-restart")) == 2
    ct.stop_sandbox(sandbox)
    ct.remove_sandbox(sandbox)
    assert_gone(env, ct, obj, sandbox)


def test_del_with_the_namespace_already_gone(env, ct):
    """The sandbox's namespace was unmounted (a reboot, an admin): the
    runtime's DEL passes no CNI_NETNS; the ports and veths go all the same."""
    obj, sandbox = ct.run_pod("netns-gone", *TWO)
    netns = ct.netns(sandbox)
    subprocess.run(["umount", netns], check=True, timeout=30)
    ct.stop_sandbox(sandbox)
    assert [c["env"]["CNI_NETNS"] for c in ct.calls(sandbox, "DEL")][0] == ""
    ct.remove_sandbox(sandbox)
    assert_gone(env, ct, obj, sandbox)


def test_a_del_before_the_add_finished_leaves_nothing(env, ct):
    """The kubelet's deadline passes while the ADD waits for the pod's
    interface list: containerd kills the plugin and sends DEL at once,
    which finds nothing; the ADD then completes in the agent, finds nobody
    to answer and is undone. The kubelet's retry then succeeds."""
    obj = ct.create_pod("early", *TWO, announce=False)
    with env.agent_variant(annotation_seconds=30):
        with pytest.raises(grpc.RpcError) as failed:
            ct.run_sandbox(obj, timeout=2)
        assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        adds = [c for c in ct.calls(command="ADD") if "K8S_POD_NAME=early;" in c["env"]["CNI_ARGS"] + ";"]
        sandbox = adds[0]["env"]["CNI_CONTAINERID"]
        assert env.wait_log("DEL %s: nothing left" % sandbox, 30), env.log_text()
        ct.announce(obj, *TWO)
        assert env.wait_log("ADD of %s was abandoned by the plugin; rolled back" % sandbox, 30), env.log_text()
        assert_gone(env, ct, obj, sandbox)
        retried = ct.run_sandbox(obj)
        assert_running(env, ct, obj, retried)
    ct.stop_sandbox(retried)
    ct.remove_sandbox(retried)
    assert_gone(env, ct, obj, sandbox, retried)


def test_a_sandbox_for_a_pod_since_replaced_takes_nothing(env, ct):
    """The kubelet runs a sandbox for a pod that was deleted and made again
    under the same name (a StatefulSet's): the runtime passes the old UID
    (K8S_POD_UID). The new pod's interfaces are not its to take."""
    old = ct.create_pod("twin", *ETH0)
    ct.delete_pod(old)
    new = ct.create_pod("twin", *ETH0)
    with pytest.raises(grpc.RpcError) as refused:
        ct.run_sandbox(old)
    assert "another pod now" in refused.value.details() and old["metadata"]["uid"] in refused.value.details()
    assert not ct.ovs_ports("twin") and not ct.of_pod(old["metadata"]["uid"])
    sandbox = ct.run_sandbox(new)
    assert_running(env, ct, new, sandbox)
    ct.stop_sandbox(sandbox)
    ct.remove_sandbox(sandbox)
    assert_gone(env, ct, new, sandbox)


@pytest.mark.parametrize("version", ["0.3.1", "0.4.0"])
def test_older_configuration_versions(env, version):
    """A configuration of CNI 0.3.1 or 0.4.0: libcni converts the 0.x
    result for the CRI, which still finds the first interface's address;
    from 0.4.0 libcni's CHECK runs on the cached result."""
    runtime = Containerd(env, record=True, network={"cniVersion": version})
    try:
        obj, sandbox = runtime.run_pod("v" + version.replace(".", ""), *TWO)
        assert_running(env, runtime, obj, sandbox)
        cached = runtime.cached(sandbox)["eth0"]["result"]
        assert cached["cniVersion"] == version and [ip["version"] for ip in cached["ips"]] == ["4", "4"]
        if version != "0.3.1":
            code, out, err = runtime.libcni_check(sandbox)
            assert code == 0, (out, err)
        runtime.stop_sandbox(sandbox)
        runtime.remove_sandbox(sandbox)
        assert_gone(env, runtime, obj, sandbox)
    finally:
        assert not runtime.stop()


def _shape(value):
    if isinstance(value, dict):
        return dict((key, _shape(item)) for key, item in value.items())
    if isinstance(value, list):
        return sorted(set(json.dumps(_shape(item), sort_keys=True) for item in value))
    return type(value).__name__


def test_the_stand_in_passes_what_containerd_passes(env, ct, tmp_path):
    """The fast tiers' runtime stand-in (Env.cni, cni_runtime.call) against
    containerd on the same pod shape: the same CNI_* variables, CNI_IFNAME,
    CNI_ARGS keys, and configurations of the same shape (on DEL the ADD's
    result as prevResult, from the cache)."""
    obj, sandbox = ct.run_pod("drift", *TWO)
    ct.stop_sandbox(sandbox)
    ct.remove_sandbox(sandbox)
    real = dict((c["env"]["CNI_COMMAND"], c) for c in reversed(ct.calls(sandbox)))
    plugin, _calls = recorder(str(tmp_path), env.plugin)
    netns = env.pod("drift-s", *TWO)
    for command in ("ADD", "DEL"):
        code, out, err = env.cni(command, "drift-s", netns, "ctr-drift", plugin=plugin)
        assert code == 0, (out, err)
    stand_in = dict((c["env"]["CNI_COMMAND"], c) for c in reversed(recorded(str(tmp_path))))
    for command in ("ADD", "DEL"):
        theirs, ours = real[command], stand_in[command]
        names = [sorted(k for k in c["env"] if k.startswith("CNI_")) for c in (theirs, ours)]
        assert names[0] == names[1], (command, names)
        assert theirs["env"]["CNI_IFNAME"] == ours["env"]["CNI_IFNAME"]
        keys = [sorted(cni.parse_cni_args(c["env"]["CNI_ARGS"])) for c in (theirs, ours)]
        assert keys[0] == keys[1], (command, keys)
        assert _shape(theirs["stdin"]) == _shape(ours["stdin"]), (command, theirs["stdin"], ours["stdin"])
    assert "prevResult" in real["DEL"]["stdin"]
    with open(os.path.join(collection.ROOT, "lab", "kubelet.py")) as handle:
        assert "CNI_COMMAND" not in handle.read(), "the lab's kubelet calls the plugin itself: compare it here"
