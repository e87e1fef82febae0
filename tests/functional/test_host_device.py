"""SR-IOV beside OVN (issue 37): Debian's reference ``host-device`` CNI
plugin (containernetworking-plugins 1.1.1) with ``ipam: {type:
ovn4nfv-ipam}``, on a real node (ovs-vswitchd netdev, ovn-controller, NB
and SB with ovn-northd), the node agent and the watcher as processes, the
Kubernetes API stand-in holding the pods and the
NetworkAttachmentDefinitions. This kernel has no dummy links and no 8021q:
one end of a veth on the node stands in for a VF, its peer in a namespace
of the test's own for the wire behind it.

Everything is checked from outside the product: the pod's and the node's
links, addresses and routes (``ip``), the NB's ports, the data plane to
the VF's far end, and the cluster audit's findings (``network_audit``'s
core function). The ``sriov`` plugin, not installable here, calls its
IPAM exactly as host-device does (docs/docsite/rst/cni.rst)."""

import contextlib
import json
import uuid

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.audit_task import run_cluster_audit
from tests.harness.cni_env import running
from tests.harness.cni_runtime import call, runtime_args
from tests.harness.dataplane import ip, ping
from tests.harness.kube_api_standin import WATCHER
from tests.harness.watcher_env import Cluster

HOST_DEVICE = "/usr/lib/cni/host-device"
PROVIDER = "hostdev.default"
PREFIX = PROVIDER + ".kubernetes.io/"
# the network that serves the NADs' provider; its top addresses are the wire's
NETWORK = {"name": "vf-net", "subnet": "172.16.40.0/24", "provider": PROVIDER,
           "exclude_ips": ["172.16.40.200..172.16.40.254"]}
FAR_END = "172.16.40.254"
OVN0 = {"name": "net1", "interface": "net0"}
OVN1 = {"name": "net2", "interface": "net1"}


@pytest.fixture(scope="module")
def env(tmp_path_factory, collections_path):
    """The CNI node (the node agent) and the watcher, on one NB and API."""
    tmp = str(tmp_path_factory.mktemp("host-device"))
    with running(tmp, collections_path) as environment:
        watcher = Cluster(tmp, collections_path, networks=[NETWORK], api=environment.api, box=environment.node.box)
        try:
            environment.watcher = watcher
            yield environment
        finally:
            code = watcher.stop()
        assert code == 0, "SIGTERM must stop the watcher cleanly (exit %r)" % code
        assert environment.api.denied == [], "the watcher asked for what its RBAC manifest does not grant"


def nad(device, name, provider=PROVIDER):
    """A NetworkAttachmentDefinition's config: host-device moving
    ``device``, its address from ovn4nfv-ipam, as an operator writes it."""
    return {"cniVersion": "1.0.0", "name": name, "type": "host-device", "device": device,
            "ipam": {"type": "ovn4nfv-ipam", "provider": provider}}


@contextlib.contextmanager
def vf(env):
    """A stand-in VF: a veth end on the node, up (as a VF's netdev is),
    its peer in a wire namespace holding the far end's address. The pair
    and the namespace go afterwards, wherever the VF end is by then (a
    pod's namespace, the node's), also after a failure."""
    tag = uuid.uuid4().hex[:6]
    device, wire = "o4nvf" + tag, "o4n-%s-wire%s" % (env.node.tag, tag)
    ip("ip", "netns", "add", wire)
    try:
        ip("ip", "link", "add", device, "type", "veth", "peer", "name", "far", "netns", wire, netns=env.node.ns)
        ip("ip", "link", "set", device, "up", netns=env.node.ns)
        for argv in (("link", "set", "lo", "up"), ("link", "set", "far", "up"),
                     ("addr", "add", FAR_END + "/24", "dev", "far")):
            ip("ip", *argv, netns=wire)
        yield device
    finally:
        ip("ip", "link", "del", "far", netns=wire, check=False)     # the pair goes with its peer
        ip("ip", "netns", "delete", wire, check=False)


def attachment(env, name, device, provider=PROVIDER):
    """NetworkAttachmentDefinition ``default/<name>`` (one per test: each
    moves its own device) with :func:`nad`'s config; returns the config."""
    config = nad(device, name, provider)
    env.api.add_nad("default", name, config)
    return config


def pod_annotations(env, name):
    return (env.api.pod("default", name) or {"metadata": {"annotations": {}}})["metadata"]["annotations"]


def served(env, name, interfaces=0, timeout=30):
    """The pod's annotations once the watcher took its attachment's
    address and wrote its interface list (``interfaces`` OVN entries)."""
    def done(_api):
        found = pod_annotations(env, name)
        return found.get(PREFIX + "allocated") == "true" and ann.IFACE_LIST in found and \
            len(json.loads(found[ann.IFACE_LIST])) == interfaces
    assert env.api.wait(done, timeout), "pod %s not served; watcher log:\n%s" % (name, env.watcher.log_text())
    return pod_annotations(env, name)


def host_device(env, command, name, config, ifname="net1"):
    """host-device run as Multus runs an attachment's plugin: in the node's
    namespace, with the pod's sandbox and CNI_ARGS."""
    pod = env.api.pod("default", name)
    container = "ctr-" + name
    return call(HOST_DEVICE, command, config, netns="/var/run/netns/o4n-%s-%s" % (env.node.tag, name), ifname=ifname,
                container_id=container, args=runtime_args("default", name, container, pod and pod["metadata"]["uid"]),
                node=env.node.ns, extra_env={"CNI_PATH": env.tmp + ":/usr/lib/cni"})


def links(netns):
    return sorted(line.split(":")[1].strip().split("@")[0]
                  for line in ip("ip", "-o", "link", netns=netns).stdout.splitlines())


def addresses(netns, ifname):
    return [line.split()[3] for line in ip("ip", "-o", "-4", "addr", "show", "dev", ifname, netns=netns)
            .stdout.splitlines()]


def routes(netns, *match):
    """``(destination, gateway, device)`` of the pod's IPv4 routes."""
    found = json.loads(ip("ip", "-4", "-j", "route", "show", *match, netns=netns).stdout or "[]")
    return [(r["dst"], r.get("gateway"), r.get("dev")) for r in found]


def nb_port(env, name):
    return next((p for p in env.node.box.rows("nb", "Logical_Switch_Port") if p["name"] == name), None)


def findings(env, port):
    """The cluster audit's findings (``network_audit``'s core: the NB, the
    SB and the API's pods) that name ``port``."""
    kubeconfig = env.api.kubeconfig(env.tmp + "/audit.kubeconfig", WATCHER)
    result = run_cluster_audit({"db": env.node.box.nb_db, "sb_db": env.node.box.sb_db, "kubeconfig": kubeconfig,
                                "state": "audited", "timeout": 10, "private_key": None, "certificate": None,
                                "ca_cert": None})
    return sorted((f["class"], f["objects"]) for f in result["findings"] if port in f["objects"])


def test_the_device_takes_the_ovn_held_address_and_goes_back_to_the_node(env):
    """ADD moves the node's device into the pod with the address the
    watcher recorded in OVN (an address-only port with its port security);
    DEL gives it back to the node; the pod's deletion frees the address,
    which the next pod gets."""
    with vf(env) as device:
        config = attachment(env, "hostdev", device)
        env.create_pod("hd1", annotations={ann.MULTUS_NETWORKS: "hostdev"})
        netns = "/var/run/netns/o4n-%s-hd1" % env.node.tag
        held = served(env, "hd1")[PREFIX + "ip_address"]
        port = nb_port(env, "default_hd1_net1")
        assert port["addresses"].split()[1] == held and port["port_security"].startswith(port["addresses"] + " "), \
            "the address is OVN's, with port security as every pod port has"
        code, result, err = host_device(env, "ADD", "hd1", config)
        assert code == 0, (result, err, env.log_text())
        assert result["ips"][0]["address"] == held + "/24" and not result.get("routes")
        assert links(netns) == ["lo", "net1"] and addresses(netns, "net1") == [held + "/24"]
        assert device not in links(env.node.ns), "the device left the node"
        assert ping(netns, FAR_END), "the device carries the pod's traffic with OVN's address"

        code, out, err = host_device(env, "DEL", "hd1", config)
        assert code == 0, (out, err)
        assert links(netns) == ["lo"] and device in links(env.node.ns), "DEL gave the device back to the node"
        env.api.delete_pod("default", "hd1")
        env.watcher.wait_ports_gone(["default_hd1_net1"])

        env.create_pod("hd2", annotations={ann.MULTUS_NETWORKS: "hostdev"})
        assert served(env, "hd2")[PREFIX + "ip_address"] == held, "the freed address is handed out again"
        assert host_device(env, "ADD", "hd2", config)[0] == 0
        assert host_device(env, "DEL", "hd2", config)[0] == 0
        env.api.delete_pod("default", "hd2")
        env.watcher.wait_ports_gone(["default_hd2_net1"])


def test_a_host_device_beside_ovn_interfaces_with_one_default_route(env):
    """OVN interfaces on two networks, one with the default route, and a
    host device on a third: one default route, the OVN interface's; the
    host device has its address and its subnet's route alone. The cluster
    audit judges the device's address-only port as it judges none of the
    node's ports: nothing binds it. Its address is held against others
    (duplicate_ip). Dropped from the running pod's request, its port goes."""
    with vf(env) as device:
        config = attachment(env, "hostdev-mix", device)
        env.create_pod("mix", OVN0, dict(OVN1, default_gateway=True),
                       annotations={ann.MULTUS_NETWORKS: "hostdev-mix@vf0"})
        netns = "/var/run/netns/o4n-%s-mix" % env.node.tag
        held = served(env, "mix", interfaces=2)[PREFIX + "ip_address"]
        # before the runtime's ADD the OVN ports are not bound (and said so); the device's never is
        assert findings(env, "default_mix_net0") == [("port_not_bound", ["default_mix_net0"])]
        assert findings(env, "default_mix_vf0") == []

        code, result, err = env.cni("ADD", "mix", netns, "ctr-mix")
        assert code == 0, (result, err, env.log_text())
        code, result, err = host_device(env, "ADD", "mix", config, ifname="vf0")
        assert code == 0, (result, err, env.log_text())
        assert links(netns) == ["lo", "net0", "net1", "vf0"] and addresses(netns, "vf0") == [held + "/24"]
        assert routes(netns, "default") == [("default", "172.16.2.1", "net1")]
        assert routes(netns, "dev", "vf0") == [("172.16.40.0/24", None, None)], "the subnet's route alone"
        env.node.wait_hv()
        assert ping(netns, FAR_END) and ping(netns, "172.16.2.1"), "both ways out work"
        assert findings(env, "default_mix_vf0") == []

        # another holder of its address, a port written by hand (the watcher stopped, or it
        # would delete that port of no pod at once), is found beside it
        assert env.watcher.terminate() == 0
        try:
            marks = dict(owner="ovn4nfv.k8s", role="pod-port",
                         **{"pod-uid": "gone", "pod-namespace": "default", "pod-name": "gone", "interface": "net0"})
            env.node.box.nbctl("lsp-add", "vf-net", "byhand", "--", "set", "Logical_Switch_Port", "byhand",
                               'addresses="0a:00:00:00:40:99 %s"' % held,
                               *["external_ids:ovn4nfv-%s=%s" % pair for pair in sorted(marks.items())])
            assert ("duplicate_ip", ["byhand", "default_mix_vf0"]) in findings(env, "default_mix_vf0")
        finally:
            env.node.box.nbctl("--if-exists", "lsp-del", "byhand")
            env.watcher.start()
        assert env.watcher.wait_ready(), env.watcher.log_text()

        # the request drops the attachment: its port goes, the OVN interfaces stay
        assert host_device(env, "DEL", "mix", config, ifname="vf0")[0] == 0
        assert device in links(env.node.ns)
        env.api.set_annotations("default", "mix", {ann.MULTUS_NETWORKS: None})
        env.watcher.wait_ports_gone(["default_mix_vf0"])
        assert nb_port(env, "default_mix_net0") and nb_port(env, "default_mix_net1")
        assert env.cni("DEL", "mix", netns, "ctr-mix")[0] == 0
        env.api.delete_pod("default", "mix")
        env.watcher.wait_ports_gone(["default_mix_net0", "default_mix_net1"])


def test_a_default_route_given_to_the_host_device_leaves_the_ovn_interfaces_without_one(env):
    """One default route per pod: a request that gives it both to an OVN
    interface and to the host device's attachment (Multus's
    ``default-route``) is refused, and nothing is made; given to the host
    device alone, no OVN interface takes it, and the IPAM result carries
    none (Multus sets the one its ``default-route`` names)."""
    with vf(env) as device:
        config = attachment(env, "hostdev-dr", device)
        selection = json.dumps([{"name": "hostdev-dr", "interface": "vf0", "default-route": ["172.16.40.1"]}])
        env.create_pod("dr", dict(OVN0, default_gateway=True), annotations={ann.MULTUS_NETWORKS: selection})
        netns = "/var/run/netns/o4n-%s-dr" % env.node.tag

        def refused(_api):
            return [e for e in env.watcher.events_for("dr") if "more than one default gateway" in e["message"]]
        assert env.api.wait(refused, 30), env.watcher.log_text()
        assert refused(None)[0]["reason"] == "InvalidNetworkRequest"
        assert not [p for p in env.watcher.pod_ports() if p["external_ids"].get("ovn4nfv-pod-name") == "dr"]

        env.api.set_annotations("default", "dr", {ann.OVN_NETWORK: json.dumps([OVN0])})
        served(env, "dr", interfaces=1)
        assert env.cni("ADD", "dr", netns, "ctr-dr")[0] == 0
        code, result, err = host_device(env, "ADD", "dr", config, ifname="vf0")
        assert code == 0, (result, err, env.log_text())
        assert not result.get("routes") and routes(netns, "default") == []
        assert host_device(env, "DEL", "dr", config, ifname="vf0")[0] == 0
        assert env.cni("DEL", "dr", netns, "ctr-dr")[0] == 0
        env.api.delete_pod("default", "dr")
        env.watcher.wait_ports_gone(["default_dr_net0", "default_dr_vf0"])


def test_an_add_whose_ipam_failed_leaves_the_device_for_the_runtime_s_del(env):
    """A NAD whose provider no network serves: the watcher takes no address
    (UnknownNetwork), so ovn4nfv-ipam answers none (101, after the
    agent's ``annotation_seconds``) and the device stays in the pod
    without one (host-device 1.1.1 does not move it back); the runtime's
    DEL, which follows a failed ADD, gives it back to the node."""
    with vf(env) as device:
        config = attachment(env, "hostdev-none", device, provider="none.default")
        env.create_pod("nf", annotations={ann.MULTUS_NETWORKS: "hostdev-none"})
        netns = "/var/run/netns/o4n-%s-nf" % env.node.tag
        assert env.api.wait(lambda _api: [e for e in env.watcher.events_for("nf") if e["reason"] == "UnknownNetwork"],
                            30), env.watcher.log_text()
        code, out, err = host_device(env, "ADD", "nf", config)
        assert code != 0 and out["code"] == 101, (out, err)
        assert links(netns) == ["lo", "net1"] and addresses(netns, "net1") == []
        assert host_device(env, "DEL", "nf", config)[0] == 0
        assert links(netns) == ["lo"] and device in links(env.node.ns)
        env.api.delete_pod("default", "nf")
