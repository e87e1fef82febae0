"""One address per interface: random pods with several interfaces on one
network, static and dynamic addresses mixed, planned against a real NB;
the NB is then read from outside (``ovn-nbctl``) and no two ports may
share an IP or a MAC.

A pod's plan used to choose each dynamic interface's address without
seeing what it had chosen for the pod's earlier interfaces: two dynamic
interfaces on one network got the same IP and the same MAC (issue 32)."""

import json
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_ports
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute

from tests.harness.nb_env import nb_with_networks

# Small pools, so that random static addresses meet dynamic ones often.
NETWORKS = {"u1": "172.18.1.0/27", "u2": "172.18.2.0/28"}


@pytest.fixture(scope="module")
def nb():
    with nb_with_networks([{"name": n, "subnet": s} for n, s in NETWORKS.items()]) as env:
        yield env


def pod_port_addresses(box):
    """``[(port, mac, [ips])]`` of every pod port, read by ovn-nbctl."""
    out = subprocess.run(["ovn-nbctl", "--db=" + box.nb_db, "--format=json", "--columns=name,addresses",
                          "list", "Logical_Switch_Port"], check=True, capture_output=True, text=True,
                         timeout=30).stdout
    found = []
    for name, addresses in json.loads(out)["data"]:
        texts = addresses[1] if isinstance(addresses, list) and addresses[0] == "set" else [addresses]
        for text in texts:
            words = text.split()
            if words and words[0] not in ("router", "dynamic", "unknown") and not name.startswith("rtos"):
                found.append((name, words[0], words[1:]))
    return found


ENTRY = st.fixed_dictionaries(
    {"name": st.sampled_from(sorted(NETWORKS))},
    optional={"ip": st.integers(2, 14), "mac": st.integers(1, 6)})


def entries_of(picked):
    out = []
    for index, entry in enumerate(picked):
        request = {"name": entry["name"], "interface": "net%d" % index}
        if "ip" in entry:
            request["ip_address"] = "%s.%d" % (NETWORKS[entry["name"]].rsplit(".", 1)[0], entry["ip"])
        if "mac" in entry:
            request["mac_address"] = "0a:00:00:00:99:%02x" % entry["mac"]
        out.append(request)
    return out


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pods=st.lists(st.lists(ENTRY, min_size=1, max_size=6), min_size=1, max_size=5))
def test_no_two_ports_share_an_ip_or_a_mac(nb, pods):
    box, db = nb
    uids, served = [], 0
    try:
        for number, picked in enumerate(pods):
            pod = pod_ports.Pod("default", "p%d" % number, "uid-p%d" % number)
            requests = ann.parse_requests({ann.OVN_NETWORK: json.dumps(entries_of(picked))})[1]
            uids.append(pod.uid)
            try:
                execute(db, lambda v: pod_ports.plan_pod(v, pod, requests), write=True)
                served += 1
            except ValidationError as exc:
                # refused whole: a static address held or asked twice, or a pool exhausted
                assert exc.reason in (pod_ports.INVALID, pod_ports.CONFLICT, pod_ports.EXHAUSTED), exc
        ports = pod_port_addresses(box)
        ips = [ip for _name, _mac, addresses in ports for ip in addresses]
        macs = [mac for _name, mac, _addresses in ports]
        assert len(ips) == len(set(ips)), "an IP is held twice: %s" % ports
        assert len(macs) == len(set(macs)), "a MAC is held twice: %s" % ports
    finally:
        for uid in uids:
            execute(db, lambda v, u=uid: pod_ports.plan_delete(v, u), write=True)


def test_two_dynamic_interfaces_on_one_network_get_two_addresses(nb):
    box, db = nb
    pod = pod_ports.Pod("default", "nfv", "uid-nfv")
    requests = ann.parse_requests({ann.OVN_NETWORK: json.dumps(
        [{"name": "u1", "interface": "net%d" % i} for i in range(3)])})[1]
    try:
        execute(db, lambda v: pod_ports.plan_pod(v, pod, requests), write=True)
        ports = pod_port_addresses(box)
        assert len(ports) == 3
        assert len(set(ip for _n, _m, ips in ports for ip in ips)) == 3
        assert len(set(mac for _n, mac, _i in ports)) == 3
    finally:
        execute(db, lambda v: pod_ports.plan_delete(v, pod.uid), write=True)


def test_one_static_address_asked_by_two_interfaces_is_refused_naming_both(nb):
    _box, db = nb
    pod = pod_ports.Pod("default", "twice", "uid-twice")
    requests = ann.parse_requests({ann.OVN_NETWORK: json.dumps(
        [{"name": "u1", "interface": "net0", "ip_address": "172.18.1.20"},
         {"name": "u1", "interface": "net1", "ip_address": "172.18.1.20"}])})[1]
    with pytest.raises(ValidationError) as err:
        execute(db, lambda v: pod_ports.plan_pod(v, pod, requests), write=True)
    assert "172.18.1.20" in str(err.value) and "ovnNetwork[0]" in str(err.value), str(err.value)
