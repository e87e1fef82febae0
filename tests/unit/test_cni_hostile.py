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


NON_UTF8 = os.fsdecode(b"pod\xff")      # as the environment hands undecodable bytes to Python
IDENTIFIERS = {
    # field: (how it is given, a value that is right)
    "K8S_POD_NAMESPACE": ("args", "default"),
    "K8S_POD_NAME": ("args", "web-1.a"),
    "K8S_POD_UID": ("args", "0c3bd2a1-6d3e-4e4b-9a52-2f1a5e9c1b11"),
    "K8S_POD_INFRA_CONTAINER_ID": ("args", "ctr1"),
    "CNI_CONTAINERID": ("env", "ctr1"),
    "CNI_IFNAME": ("env", "eth0"),
    "name": ("config", "ovn-net1"),
}
HOSTILE = {"traversal": "..", "slash": "../kube-system", "empty": "", "oversized": "a" * 600,
           "non-utf8": NON_UTF8, "newline": "web\nINJECTED", "upper": "Web"}


def request_with(field, value):
    how, _good = IDENTIFIERS[field]
    env, config = environ("DEL"), dict(CONFIG)      # DEL: no namespace to open, every identifier read
    if how == "args":
        env["CNI_ARGS"] = "IgnoreUnknown=1;%s=%s" % (field, value)
    elif how == "env":
        env[field] = value
    else:
        config[field] = value
    return env, json.dumps(config)


@pytest.mark.parametrize("field", sorted(IDENTIFIERS))
def test_every_identifier_the_runtime_hands_over_is_checked_before_use(field):
    env, stdin = request_with(field, IDENTIFIERS[field][1])
    cni.parse_request(env, stdin)           # the right value passes
    refused = []
    for case, value in sorted(HOSTILE.items()):
        if field in ("CNI_CONTAINERID", "K8S_POD_INFRA_CONTAINER_ID", "K8S_POD_UID", "CNI_IFNAME", "name") \
                and case == "upper":
            continue                        # opaque IDs, interface and network names may hold capitals
        env, stdin = request_with(field, value)
        with pytest.raises(cni.CNIError) as err:
            cni.parse_request(env, stdin)
        assert err.value.code in (cni.INVALID_ENVIRONMENT, cni.INVALID_CONFIG), (field, case)
        assert field in err.value.msg or (field == "name" and "name:" in err.value.msg), (field, case, err.value.msg)
        assert "\n" not in err.value.msg and "\udcff" not in err.value.msg, "printable, one line"
        assert len(err.value.msg) < 300, (field, case, "the message quotes at most 80 characters")
        refused.append(case)
    assert refused, field


GOOD_RESULT = {"cniVersion": "1.0.0", "interfaces": [{"name": "net0", "mac": "0a:58:0a:01:14:02", "sandbox": "/x"}],
               "ips": [{"address": "10.1.20.2/24", "gateway": "10.1.20.1", "interface": 0}],
               "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.20.1"}], "dns": {}}


@pytest.mark.parametrize("previous, words", [
    (None, "needs the result of the ADD"),
    ({}, "needs the result of the ADD"),
    ("a string", "needs the result of the ADD"),
    (dict(GOOD_RESULT, interfaces=3), "prevResult.interfaces: 3 is not a list"),
    (dict(GOOD_RESULT, interfaces="net0"), "prevResult.interfaces: 'net0' is not a list"),
    (dict(GOOD_RESULT, interfaces=[3]), "prevResult.interfaces[0]: 3 is not an object"),
    (dict(GOOD_RESULT, interfaces=[{"mac": "x"}]), "prevResult.interfaces[0].name: is required"),
    (dict(GOOD_RESULT, ips=[{"address": "10.1.20.2"}]), "prevResult.ips[0].address"),
    (dict(GOOD_RESULT, ips=[{"address": "10.1.20.2/24", "interface": 4}]), "prevResult.ips[0].interface: 4"),
    (dict(GOOD_RESULT, ips=[{"address": "10.1.20.2/24", "interface": True}]), "prevResult.ips[0].interface"),
    (dict(GOOD_RESULT, routes=[{"gw": "10.1.20.1"}]), "prevResult.routes[0].dst: is required"),
    (dict((k, v) for k, v in GOOD_RESULT.items() if k != "cniVersion"), "prevResult.cniVersion"),
    (dict(GOOD_RESULT, dns=[]), "prevResult.dns"),
], ids=["none", "empty", "string", "interfaces-number", "interfaces-string", "interface-number", "no-name",
        "address-no-prefix", "index-out-of-range", "index-bool", "route-no-dst", "no-version", "dns-list"])
def test_check_refuses_a_malformed_prev_result_before_comparing(previous, words):
    config = dict(CONFIG)
    if previous is not None:
        config["prevResult"] = previous
    code, msg = code_of(environ("CHECK"), json.dumps(config))
    assert code == cni.INVALID_CONFIG and words in msg, msg


def test_a_well_formed_prev_result_passes_the_schema():
    assert cni.check_prev_result(GOOD_RESULT) is GOOD_RESULT
