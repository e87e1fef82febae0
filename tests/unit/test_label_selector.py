"""Label selectors as the API server checks and matches them
(``common/selectors.py``): every refusal names its field, every operator
selects what Kubernetes' own selects."""

import pytest
from hypothesis import given, strategies as st

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.selectors import (
    Selector, label_key, label_map, parse_selector)

WHERE = "spec.podSelector"


def problems(value):
    with pytest.raises(ValidationError) as caught:
        parse_selector(value, WHERE)
    return caught.value.problems


@pytest.mark.parametrize("key", ["app", "a", "app.kubernetes.io/name", "example.com/x_y", "A-b.c_D",
                                 "kubernetes.io/metadata.name", "x" * 63])
def test_valid_keys(key):
    assert label_key(key, "k") == key


@pytest.mark.parametrize("key", ["", "-app", "app-", "x" * 64, "Example.com/x", "a/b/c", "/x",
                                 "%s/x" % ("a" * 254), "a b", None, 3])
def test_invalid_keys(key):
    with pytest.raises(ValidationError, match=r"^k: .* is not a label key$"):
        label_key(key, "k")


@pytest.mark.parametrize("value, expected", [
    ({"matchLabels": {"app": "db", "tier": 3}},
     ["spec.podSelector.matchLabels.tier: 3 is not a label value"]),
    ({"matchLabels": {"app": "-db"}}, ["spec.podSelector.matchLabels.app: '-db' is not a label value"]),
    ({"matchLabels": ["app"]}, ["spec.podSelector.matchLabels: ['app'] is not a mapping of labels"]),
    ({"matchExpressions": {"key": "app"}},
     ["spec.podSelector.matchExpressions: {'key': 'app'} is not a list"]),
    ({"matchExpressions": [{"key": "app", "operator": "Is", "values": ["x"]}]},
     ["spec.podSelector.matchExpressions[0].operator: 'Is' is not one of In, NotIn, Exists, DoesNotExist"]),
    ({"matchExpressions": [{"key": "app", "operator": "In"}]},
     ["spec.podSelector.matchExpressions[0].values: In needs at least one value"]),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": []}]},
     ["spec.podSelector.matchExpressions[0].values: NotIn needs at least one value"]),
    ({"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]},
     ["spec.podSelector.matchExpressions[0].values: Exists takes no values, not ['x']"]),
    ({"matchExpressions": [{"key": "a b", "operator": "Exists"}]},
     ["spec.podSelector.matchExpressions[0].key: 'a b' is not a label key"]),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["ok", "not ok"]}]},
     ["spec.podSelector.matchExpressions[0].values[1]: 'not ok' is not a label value"]),
    ({"matchExpressions": ["app in (x)"]},
     ["spec.podSelector.matchExpressions[0]: 'app in (x)' is not a requirement (key, operator, values)"]),
    ("app=db", ["spec.podSelector: 'app=db' is not a label selector (a mapping)"]),
])
def test_each_refusal_names_its_field(value, expected):
    assert problems(value) == expected


def test_every_problem_is_reported_at_once():
    found = problems({"matchLabels": {"-a": "x"}, "matchExpressions": [
        {"key": "b", "operator": "Is"}, {"key": "c", "operator": "Exists"}, {"key": "d", "operator": "In"}]})
    assert [p.split(":")[0] for p in found] == [
        "spec.podSelector.matchLabels", "spec.podSelector.matchExpressions[0].operator",
        "spec.podSelector.matchExpressions[2].values"]


@pytest.mark.parametrize("selector, labels, selected", [
    ({}, {}, True),
    ({}, {"app": "x"}, True),
    (None, None, True),
    ({"matchLabels": {"app": "db"}}, {"app": "db", "x": "y"}, True),
    ({"matchLabels": {"app": "db"}}, {"app": "web"}, False),
    ({"matchLabels": {"app": "db"}}, {}, False),
    ({"matchLabels": {"app": ""}}, {"app": ""}, True),
    ({"matchLabels": {"app": ""}}, {}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "web"]}]}, {"app": "web"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "web"]}]}, {"app": "x"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}, {}, False),
    # NotIn selects an object without the key, as Kubernetes' does
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, {}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, {"app": "db"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, {"app": "web"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": ""}, True),
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"ap": "x"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"ap": "x"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "x"}, False),
    # matchLabels and every expression must all hold
    ({"matchLabels": {"tier": "be"}, "matchExpressions": [{"key": "app", "operator": "Exists"}]},
     {"app": "x"}, False),
    ({"matchLabels": {"tier": "be"}, "matchExpressions": [{"key": "app", "operator": "Exists"}]},
     {"app": "x", "tier": "be"}, True),
])
def test_matching(selector, labels, selected):
    assert parse_selector(selector, WHERE).matches(labels) is selected


def test_label_map_keeps_a_chains_non_empty_rule():
    with pytest.raises(ValidationError, match=r"^f: \{\} is not a non-empty mapping of labels$"):
        label_map({}, "f")
    assert label_map({}, "f", empty=True) == {}
    assert list(label_map({"b": "1", "a": "2"}, "f")) == ["a", "b"]


KEYS = st.sampled_from(["app", "tier", "example.com/role"])
VALUES = st.sampled_from(["", "a", "b", "c-1"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=3)
EXPRESSIONS = st.lists(st.one_of(
    st.builds(lambda k, o, v: {"key": k, "operator": o, "values": v}, KEYS, st.sampled_from(["In", "NotIn"]),
              st.lists(VALUES, min_size=1, max_size=3)),
    st.builds(lambda k, o: {"key": k, "operator": o}, KEYS, st.sampled_from(["Exists", "DoesNotExist"]))),
    max_size=3)


@given(LABELS, EXPRESSIONS, LABELS)
def test_the_canonical_form_selects_the_same_and_is_stable(match_labels, expressions, labels):
    selector = parse_selector({"matchLabels": match_labels, "matchExpressions": expressions}, WHERE)
    again = parse_selector(selector.to_dict(), WHERE)
    assert again == selector and again.to_dict() == selector.to_dict()
    assert again.matches(labels) is selector.matches(labels)
    # matchLabels is the same as one In requirement per label
    as_in = parse_selector({"matchExpressions": expressions + [
        {"key": k, "operator": "In", "values": [v]} for k, v in match_labels.items()]}, WHERE)
    assert as_in.matches(labels) is selector.matches(labels)
    assert selector.empty is (not match_labels and not expressions)


def test_equal_selectors_hash_alike():
    one = parse_selector({"matchLabels": {"b": "1", "a": "2"}}, WHERE)
    two = parse_selector({"matchLabels": {"a": "2", "b": "1"}}, WHERE)
    assert one == two and hash(one) == hash(two) and len({one, two}) == 1
    assert one != Selector({"a": "2"})
