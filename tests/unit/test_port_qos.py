"""QoS per interface, its rules: what a request's ``qos`` may say (and each
refusal naming the field), the network's cap (``qos_max``) as the operator
gives it and as the switch records it, and what a request gets under a cap.
The rows on a real NB and the rates on a real data plane are
``tests/functional/test_qos.py``'s."""

import json

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import port_qos
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import K_QOS_MAX_BURST, K_QOS_MAX_RATE


def requests(qos, **entry):
    return ann.parse_requests({ann.OVN_NETWORK: json.dumps([dict({"name": "n", "interface": "net0", "qos": qos},
                                                                 **entry)])})[1]


@pytest.mark.parametrize("qos, expected", [
    ({"rate": 10000}, {"rate": 10000}),
    ({"rate": 10000, "burst": 1000, "dscp": 46}, {"rate": 10000, "burst": 1000, "dscp": 46}),
    ({"dscp": 0}, {"dscp": 0}),
    ({"rate": 1, "dscp": 63}, {"rate": 1, "dscp": 63}),
    ({"rate": port_qos.MAX_RATE}, {"rate": port_qos.MAX_RATE}),
])
def test_a_request_s_qos_is_read_as_whole_numbers(qos, expected):
    request, = requests(qos)
    assert request.qos == expected


def test_no_qos_is_none_and_qos_is_no_part_of_the_port_s_shape():
    """A change of qos is made in place: two requests that differ only in
    it are served the same port."""
    plain, = ann.parse_requests({ann.OVN_NETWORK: json.dumps([{"name": "n", "interface": "net0"}])})[1]
    limited, = requests({"rate": 5000, "dscp": 10})
    assert plain.qos is None
    assert plain.shape() == limited.shape()


@pytest.mark.parametrize("qos, field, words", [
    ({}, "ovnNetwork[0].qos", "a rate or a dscp"),
    ({"burst": 100}, "ovnNetwork[0].qos", "a rate or a dscp"),
    ({"dscp": 10, "burst": 100}, "ovnNetwork[0].qos.burst", "a burst needs a rate beside it"),
    ({"rate": 0}, "ovnNetwork[0].qos.rate", "a rate in kbit/s"),
    ({"rate": port_qos.MAX_RATE + 1}, "ovnNetwork[0].qos.rate", "a rate in kbit/s"),
    ({"rate": 10, "burst": 0}, "ovnNetwork[0].qos.burst", "a burst in kbit"),
    ({"dscp": 64}, "ovnNetwork[0].qos.dscp", "a DSCP value, 0-63"),
    ({"dscp": -1}, "ovnNetwork[0].qos.dscp", "a DSCP value"),
    ({"rate": "10000"}, "ovnNetwork[0].qos.rate", "a whole number"),
    ({"rate": 10.5}, "ovnNetwork[0].qos.rate", "a whole number"),
    ({"rate": True}, "ovnNetwork[0].qos.rate", "a whole number"),
    ({"rate": 10, "ceil": 20}, "ovnNetwork[0].qos", "unknown key 'ceil'"),
    ({"rat": 10}, "ovnNetwork[0].qos", "did you mean 'rate'?"),
    ([10000], "ovnNetwork[0].qos", "is not an object"),
])
def test_a_bad_qos_is_refused_naming_its_field(qos, field, words):
    with pytest.raises(ValidationError) as caught:
        requests(qos)
    assert field + ":" in str(caught.value) and words in str(caught.value), str(caught.value)
    problems = caught.value.problems
    assert len(set(problems)) == len(problems), "each said once: %s" % problems


def test_a_whole_float_passing_the_schema_is_still_refused():
    """JSON Schema's "integer" takes 10000.0; a kbit/s count is an int."""
    with pytest.raises(ValidationError) as caught:
        requests({"rate": 10000.0})
    assert str(caught.value) == "ovnNetwork[0].qos.rate: 10000.0 is not a whole number"


def test_the_later_ovn4nfv_form_takes_qos_too():
    _source, reqs = ann.parse_requests({ann.NFN_NETWORK: json.dumps({"type": "ovn4nfv", "interface": [
        {"name": "n", "interface": "net1", "qos": {"dscp": 26}}]})})
    assert reqs[0].qos == {"dscp": 26}


@pytest.mark.parametrize("qos, cap, got, over", [
    # no cap: as asked
    ({"rate": 50000, "burst": 9000}, None, {"rate": 50000, "burst": 9000}, []),
    # within the cap: as asked (the cap's burst where it gave none)
    ({"rate": 5000, "burst": 500}, {"rate": 10000, "burst": 1000}, {"rate": 5000, "burst": 500}, []),
    ({"rate": 5000}, {"rate": 10000, "burst": 1000}, {"rate": 5000, "burst": 1000}, []),
    ({"rate": 5000}, {"rate": 10000}, {"rate": 5000}, []),
    # above it: served at it
    ({"rate": 40000}, {"rate": 10000}, {"rate": 10000}, ["rate"]),
    ({"rate": 40000, "burst": 4000, "dscp": 46}, {"rate": 10000, "burst": 1000},
     {"rate": 10000, "burst": 1000, "dscp": 46}, ["rate", "burst"]),
    ({"rate": 5000, "burst": 4000}, {"rate": 10000, "burst": 1000}, {"rate": 5000, "burst": 1000}, ["burst"]),
    ({"rate": 10000, "burst": 1000}, {"rate": 10000, "burst": 1000}, {"rate": 10000, "burst": 1000}, []),
    # a DSCP mark is never capped, nor given a rate
    ({"dscp": 46}, {"rate": 10000, "burst": 1000}, {"dscp": 46}, []),
])
def test_what_a_request_gets_under_its_network_s_cap(qos, cap, got, over):
    assert port_qos.applied(qos, cap) == (got, over)


@pytest.mark.parametrize("value, expected", [
    (None, None), ({}, False), ({"rate": None, "burst": None}, False),
    ({"rate": 1000000}, {"rate": 1000000}), ({"rate": 1000000, "burst": 10000, }, {"rate": 1000000, "burst": 10000}),
    ({"rate": 1000000, "burst": None}, {"rate": 1000000}),
])
def test_the_operator_s_cap(value, expected):
    assert port_qos.check_cap(value, "config[0].qos_max") == expected


@pytest.mark.parametrize("value, words", [
    ({"burst": 100}, "config[0].qos_max.rate: a cap needs a rate"),
    ({"rate": 0}, "config[0].qos_max.rate: 0 is out of range"),
    ({"rate": port_qos.MAX_RATE + 1}, "config[0].qos_max.rate"),
    ({"rate": 10, "burst": -1}, "config[0].qos_max.burst"),
    ({"rate": 10, "dscp": 1}, "config[0].qos_max: unknown option(s) dscp"),
    ("1G", "config[0].qos_max: '1G' is not a dict"),
])
def test_a_bad_cap_is_refused(value, words):
    with pytest.raises(ValidationError) as caught:
        port_qos.check_cap(value, "config[0].qos_max")
    assert words in str(caught.value)


def test_the_cap_on_the_switch_and_back():
    assert port_qos.cap_records({"rate": 10000, "burst": 1000}) == {K_QOS_MAX_RATE: "10000", K_QOS_MAX_BURST: "1000"}
    assert port_qos.cap_records(None) == {K_QOS_MAX_RATE: None, K_QOS_MAX_BURST: None}
    assert port_qos.cap_of({K_QOS_MAX_RATE: "10000", K_QOS_MAX_BURST: "1000"}) == {"rate": 10000, "burst": 1000}
    assert port_qos.cap_of({K_QOS_MAX_RATE: "10000"}) == {"rate": 10000}
    # a record written by hand that is no number is no cap
    assert port_qos.cap_of({K_QOS_MAX_RATE: "10M"}) is None and port_qos.cap_of({}) is None


def network(**options):
    return vn.complete(vn.check_network(dict({"name": "n", "subnet": "10.0.0.0/24"}, **options), "config[0]"),
                       None, False, "ovn", "config[0]")


def test_a_network_records_its_cap_and_reads_it_back():
    declared = network(qos_max={"rate": 10000, "burst": None})
    assert declared.config()["qos_max"] == {"rate": 10000}
    records = declared.records()
    assert records[K_QOS_MAX_RATE] == "10000" and records[K_QOS_MAX_BURST] is None
    read = vn._from_records("n", dict((k, v) for k, v in records.items() if v is not None), declared.subnet, "ovn")
    assert read.config() == declared.config()
    assert "qos_max" not in network().config() and network().records()[K_QOS_MAX_RATE] is None


def test_merged_keeps_a_cap_unless_it_is_given_empty():
    current = network(qos_max={"rate": 10000, "burst": 1000})
    kept = vn.complete(vn.check_network({"name": "n", "mtu": 1400}, "c"), current, True, "ovn", "c")
    assert kept.qos_max == {"rate": 10000, "burst": 1000}
    gone = vn.complete(vn.check_network({"name": "n", "qos_max": {}}, "c"), current, True, "ovn", "c")
    assert gone.qos_max is None and "qos_max" not in gone.config()


def test_an_ovs_network_has_no_qos_cap():
    with pytest.raises(ValidationError) as caught:
        vn.complete(vn.check_network({"name": "n", "subnet": "10.0.0.0/24", "qos_max": {"rate": 10}}, "c"),
                    None, False, "ovs", "c")
    assert "c.qos_max: OVN's QoS applies to the ovn backend only" in str(caught.value)


class _Switch:
    def __init__(self, ids):
        self.external_ids = ids


class _View:
    """What :func:`port_qos.capped` looks up: switches by name."""

    def __init__(self, switches):
        self.switches = switches

    def lookup(self, table, name):
        assert table == "Logical_Switch"
        return self.switches.get(name)


def test_the_event_names_the_interface_what_it_asked_the_cap_and_what_it_got():
    view = _View({"n": _Switch({K_QOS_MAX_RATE: "10000", K_QOS_MAX_BURST: "1000"}), "free": _Switch({})})
    reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([
        {"name": "n", "interface": "net0", "qos": {"rate": 40000, "burst": 4000, "dscp": 46}},
        {"name": "n", "interface": "net1", "qos": {"rate": 5000}},
        {"name": "free", "interface": "net2", "qos": {"rate": 40000}},
        {"name": "n", "interface": "net3"}])})[1]
    assert port_qos.capped(view, reqs) == [
        "interface net0 (ovnNetwork[0].qos) asked for rate 40000 kbit/s, burst 4000 kbit, dscp 46; network n "
        "allows at most rate 10000 kbit/s, burst 1000 kbit: it gets rate 10000 kbit/s, burst 1000 kbit, dscp 46"]
