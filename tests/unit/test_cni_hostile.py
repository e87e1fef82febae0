"""CNI requests a runtime or an attacker can send: each gets the error
code the CNI specification gives it, at once, never a traceback or a hang."""

import json
import os
import threading

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils import cni

CONFIG = {"cniVersion": "1.0.0", "name": "ovn", "type": "ovn4nfv"}


def environ(command="ADD", **changes):
    out = {"CNI_COMMAND": command, "CNI_CONTAINERID": "ctr1", "CNI_IFNAME": "eth0",
           "CNI_NETNS": "/proc/self/ns/net", "CNI_PATH": "/opt/cni/bin"}
    out.update(changes)
    return out


def code_of(env, stdin):
    with pytest.raises(cni.CNIError) as err:
        cni.parse_request(env, stdin)
    return err.value.code, err.value.msg


def test_a_fifo_as_the_namespace_fails_at_once(tmp_path):
    fifo = str(tmp_path / "netns")
    os.mkfifo(fifo)
    outcome = {}

    def attempt():
        try:
            cni.parse_request(environ(CNI_NETNS=fifo), json.dumps(CONFIG))
        except cni.CNIError as exc:
            outcome["error"] = exc
    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():                   # blocked in open(): release it before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail("opening a FIFO as CNI_NETNS blocked")
    assert outcome["error"].code == cni.INVALID_ENVIRONMENT
    assert "not a network namespace" in outcome["error"].msg


@pytest.mark.parametrize("stdin,text", [
    ('{"cniVersion": "1.0.0", "name": "ovn", "type": "ovn4nfv", "mtu": NaN}', "NaN"),
    ('{"cniVersion": "1.0.0", "name": "ovn", "type": "ovn4nfv", "mtu": Infinity}', "Infinity"),
    ("[" * 600000 + "]" * 600000, "characters; at most"),
    ('{"a": ' * 5000 + "1" + "}" * 5000, "not JSON"),
])
def test_undecodable_configuration_is_a_decode_failure(stdin, text):
    code, msg = code_of(environ(), stdin)
    assert code == cni.DECODE_FAILURE and text in msg, msg


@pytest.mark.parametrize("field,value", [("mtu", "1500"), ("mtu", True), ("mtu", 100), ("vlan", "10"),
                                         ("provider", 7), ("ipam", "ovn4nfv-ipam"), ("mode", "bridge"),
                                         ("server_socket", ["/run/x"]), ("name", 1)])
def test_fields_of_the_wrong_type_are_invalid_config(field, value):
    code, msg = code_of(environ("DEL"), json.dumps(dict(CONFIG, **{field: value})))
    assert code == cni.INVALID_CONFIG and msg.startswith(field), msg


def test_another_plugins_fields_are_not_this_products():
    config = {"cniVersion": "1.0.0", "name": "mv", "type": "macvlan", "mode": "bridge",
              "ipam": {"type": "ovn4nfv-ipam", "provider": "macvlan.default"}}
    assert cni.parse_request(environ("DEL"), json.dumps(config))["config"]["mode"] == "bridge"
    code, msg = code_of(environ("DEL"), json.dumps(dict(config, ipam={"type": "ovn4nfv-ipam", "provider": 1})))
    assert code == cni.INVALID_CONFIG and "ipam.provider" in msg


def test_check_before_0_4_0_is_refused():
    code, msg = code_of(environ("CHECK"), json.dumps(dict(CONFIG, cniVersion="0.3.1")))
    assert code == cni.INCOMPATIBLE_VERSION and "0.4.0" in msg


def test_del_takes_any_namespace_path(tmp_path):
    plain = tmp_path / "netns"
    plain.write_text("not a namespace")
    for path in (str(plain), str(tmp_path / "gone"), "/proc/self/ns/net"):
        request = cni.parse_request(environ("DEL", CNI_NETNS=path), json.dumps(CONFIG))
        assert request["command"] == "DEL"
