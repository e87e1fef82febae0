"""Property-based tests of the annotation parser (hypothesis): for any
annotations at all, the parser returns a valid request or raises a
ValidationError that names the annotation it refused; never another
exception. Bounded in examples and in time (pytest.ini's timeout)."""

import json
import string

from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError

KEYS = [ann.OVN_NETWORK, ann.NFN_NETWORK, ann.LEGACY, ann.ROUTES, ann.MULTUS_NETWORKS]
FIELDS = ["name", "interface", "ip_address", "ipAddress", "mac_address", "macAddress", "default_gateway",
          "defaultGateway", "routes", "dst", "gw", "dev", "type", "namespace", "ips", "mac", "default-route"]
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["net0", "net0\n", "n", "172.16.1.5", "172.16.1.5/24", "172.16.1.5/abc", "10.0.0.0/8",
                     "0a:00:00:00:00:01", "01:00:5e:00:00:01", "true", "false", "ovn4nfv", "maybe", ""]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=8)), inner, max_size=6)), max_leaves=30)
# entries shaped like real requests, so that deep paths are reached too
entries = st.fixed_dictionaries({"name": st.sampled_from(["n", "net1", "a b", ""]),
                                 "interface": st.sampled_from(["net0", "net1", "eth0", "net0\n", "x"])},
                                optional={"ip_address": scalars, "macAddress": scalars, "defaultGateway": scalars,
                                          "routes": st.lists(st.dictionaries(st.sampled_from(["dst", "gw"]),
                                                                             scalars), max_size=2)})
texts = st.one_of(
    values.map(json.dumps),
    st.lists(entries, max_size=12).map(json.dumps),
    st.text(alphabet=string.printable, max_size=60),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
)
annotation_sets = st.dictionaries(st.sampled_from(KEYS + ["other", "macvlan.default.kubernetes.io/ip_adress"]),
                                  texts, max_size=4)


def _named(error, annotations):
    return any(key in str(error) for key in list(annotations) + ["ovnNetwork", "ovn"])


@SETTINGS
@given(annotation_sets)
def test_parse_requests_either_plans_or_names_a_field(annotations):
    try:
        source, requests = ann.parse_requests(annotations, default_network="default")
    except ValidationError as exc:
        assert exc.problems and _named(exc, annotations), str(exc)
        return
    assert source in ann.FORMS or (source is None and requests == [])
    assert len(requests) <= ann.MAX_INTERFACES
    assert len(set(r.interface for r in requests)) == len(requests)
    for request in requests:
        assert ann._INTERFACE.match(request.interface) and "\n" not in request.interface
        assert request.prefix is None or 0 <= request.prefix <= 32 or request.ip.version == 6
    assert set(ann.unused_forms(annotations)) <= set(KEYS)


@SETTINGS
@given(st.lists(entries, max_size=12), st.lists(st.fixed_dictionaries(
    {"dst": scalars, "dev": st.sampled_from(["net0", "net1", "net9"])}, optional={"gw": scalars}), max_size=3))
def test_shaped_requests_with_routes(items, routes):
    annotations = {ann.OVN_NETWORK: json.dumps(items), ann.ROUTES: json.dumps(routes)}
    try:
        _source, requests = ann.parse_requests(annotations)
    except ValidationError as exc:
        assert _named(exc, annotations), str(exc)
        return
    interfaces = set(r.interface for r in requests)
    assert all(route["dev"] in interfaces for route in routes)


@SETTINGS
@given(st.one_of(texts, st.lists(st.sampled_from(["nad", "ns/nad", "nad@net1", "a b", "x/y/z", "@"]),
                                 max_size=4).map(",".join)))
def test_multus_selections_either_parse_or_name_the_annotation(text):
    try:
        selections = ann.parse_multus({ann.MULTUS_NETWORKS: text}, "default")
    except ValidationError as exc:
        assert ann.MULTUS_NETWORKS in str(exc), str(exc)
        return
    for selection in selections:
        assert selection["name"] and selection["namespace"] and selection["interface"]
