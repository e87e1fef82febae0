"""The CNI entry point, run as a runtime runs it: the VERSION answer and
every refusal with its CNI error code, never a traceback."""

import os
import socket
import subprocess
import threading
import uuid

import pytest

from tests.harness.cni_runtime import call, install_plugin

CONFIG = {"cniVersion": "1.0.0", "name": "ovn", "type": "ovn4nfv"}


@pytest.fixture(scope="module")
def plugin(tmp_path_factory, collections_path):
    return install_plugin(str(tmp_path_factory.mktemp("cni-bin")), collections_path)


@pytest.fixture(scope="module")
def pod_netns():
    name = "o4n-cni-%s" % uuid.uuid4().hex[:6]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield "/var/run/netns/" + name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)


@pytest.fixture
def no_agent():
    """A configuration for a node whose agent is not there (the plugin's
    socket, beside it, has no listener)."""
    return dict(CONFIG)


def test_version(plugin):
    code, out, err = call(plugin, "VERSION", {"cniVersion": "1.0.0"})
    assert code == 0 and err == ""
    assert {"0.3.1", "0.4.0", "1.0.0"} <= set(out["supportedVersions"])


def refused(plugin, expected_code, *fragments, **kwargs):
    config = kwargs.pop("config", CONFIG)
    code, out, err = call(plugin, kwargs.pop("command", "ADD"), config, **kwargs)
    assert code == 1 and err == "", (out, err)
    assert out["code"] == expected_code, out
    for fragment in fragments:
        assert fragment in out["msg"], (fragment, out)
    return out


BAD_REQUESTS = [
    ("unknown_cni_version", 1, ["2.0.0"], dict(config=dict(CONFIG, cniVersion="2.0.0"))),
    ("malformed_json", 6, ["not JSON"], dict(stdin="{not json")),
    ("config_not_an_object", 6, ["not a JSON object"], dict(stdin="[1, 2]")),
    ("config_without_type", 7, ["name and a type"], dict(config={"cniVersion": "1.0.0", "name": "x"})),
    ("unknown_command", 4, ["CNI_COMMAND", "FROB"], dict(command="FROB")),
    ("missing_container_id", 4, ["CNI_CONTAINERID"], dict(container_id="")),
    ("unsafe_container_id", 4, ["CNI_CONTAINERID", "../etc"], dict(container_id="../etc")),
    ("over_long_ifname", 4, ["CNI_IFNAME", "averyveryverylongname"], dict(ifname="averyveryverylongname")),
    ("ifname_with_slash", 4, ["CNI_IFNAME", "eth/0"], dict(ifname="eth/0")),
    ("ifname_dot_dot", 4, ["CNI_IFNAME"], dict(ifname="..")),
    ("add_without_netns", 4, ["CNI_NETNS"], dict(netns="")),
    ("netns_missing", 3, ["CNI_NETNS", "/var/run/netns/o4n-nosuch"], dict(netns="/var/run/netns/o4n-nosuch")),
    ("netns_not_a_namespace", 4, ["not a network namespace"], dict(netns="/etc/hostname")),
    ("netns_of_another_kind", 4, ["not a network namespace"], dict(netns="/proc/self/ns/mnt")),
    ("the_nodes_own_netns_by_proc", 4, ["node's own network namespace"], dict(netns="/proc/self/ns/net")),
    ("bad_cni_args", 4, ["CNI_ARGS"], dict(args="K8S_POD_NAME")),
    ("bad_timeout", 7, ["timeout"], dict(config=dict(CONFIG, timeout=-1))),
    ("relative_netns", 4, ["CNI_NETNS", "absolute"], dict(netns="var/run/netns/x")),
    ("a_socket_the_nad_chose", 7, ["server_socket", "/run/elsewhere.sock", "the node chooses"],
     dict(config=dict(CONFIG, server_socket="/run/elsewhere.sock"))),
    ("an_ipam_socket_the_nad_chose", 7, ["server_socket"],
     dict(config=dict(CONFIG, type="macvlan", ipam={"type": "ovn4nfv-ipam", "server_socket": "/tmp/x.sock"}))),
]


@pytest.mark.parametrize("case_id,code,fragments,kwargs", BAD_REQUESTS, ids=[c[0] for c in BAD_REQUESTS])
def test_bad_request(plugin, pod_netns, no_agent, case_id, code, fragments, kwargs):
    kwargs = dict(kwargs)
    kwargs.setdefault("netns", pod_netns)
    kwargs.setdefault("config", no_agent)
    refused(plugin, code, *fragments, **kwargs)


def test_the_nodes_own_netns_under_another_path(plugin, no_agent, tmp_path):
    """Identity, not path: the test's own namespace seen through /proc/<pid>."""
    refused(plugin, 4, "node's own network namespace", config=no_agent, netns="/proc/%d/ns/net" % os.getpid())


def test_agent_unreachable(plugin, pod_netns, no_agent):
    socket_path = os.path.join(os.path.dirname(plugin), "agent.sock")
    out = refused(plugin, 11, "not reachable", socket_path, config=no_agent, netns=pod_netns)
    assert out["details"]


def test_agent_that_never_answers(pod_netns, tmp_path, collections_path):
    path = str(tmp_path / "silent.sock")
    plugin = install_plugin(str(tmp_path), collections_path, socket_path=path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    try:
        refused(plugin, 11, "did not answer within 1s", config=dict(CONFIG, timeout=1),
                netns=pod_netns)
    finally:
        thread.join(5)
        for conn in accepted:
            conn.close()
        listener.close()


def test_status_without_agent_says_not_available(plugin, no_agent):
    refused(plugin, 50, "not reachable", command="STATUS", config=no_agent)
