"""OVN's upgrade rules (cluster/releases.py), pair by pair, as
ovn-upgrades.rst states them."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import releases


@pytest.mark.parametrize("text,rel", [
    ("23.03.1-20.27.0-70.6", (23, 3)), ("ovn-controller 25.03.0\nOpen vSwitch Library 3.5.0", (25, 3)),
    ("24.09", (24, 9)), ("", None), (None, None), ("no version", None)])
def test_release(text, rel):
    assert releases.release(text) == rel


@pytest.mark.parametrize("rel,span", [
    ((22, 3), ((22, 3), (24, 3))), ((23, 3), ((22, 3), (24, 3))), ((23, 9), ((22, 3), (24, 3))),
    ((24, 3), ((24, 3), (26, 3))), ((25, 3), ((24, 3), (26, 3))), ((24, 9), ((24, 3), (26, 3)))])
def test_rolling_span(rel, span):
    assert releases.rolling_span(rel) == span


def test_lts():
    assert [r for r in [(21, 3), (22, 3), (22, 9), (23, 3), (24, 3), (25, 3), (26, 3)] if releases.is_lts(r)] == [
        (22, 3), (24, 3), (26, 3)]


@pytest.mark.parametrize("northd,controller,pinned,severity", [
    ("23.03.1-20.27.0-70.6", "23.03.1", False, None),          # the same release: patch levels may differ
    ("23.03.1", "23.03.3", False, None),
    ("23.03.1", "24.03.2", False, None),                      # the rolling order, controllers first, in span
    ("22.03.0", "24.03.0", False, None),                      # from an LTS to the next
    ("24.03.1", "25.03.0", False, None),
    ("23.03.1", "25.03.0", False, "warning"),                 # Debian 12 to 13: outside the span
    ("22.03.0", "24.09.0", False, "warning"),
    ("25.03.0", "23.03.1", False, "error"),                   # northd first, unpinned
    ("25.03.0", "23.03.1", True, "warning"),                  # pinned: the fail-safe order, waiting
    ("", "23.03.1", False, None),                             # nothing known: no verdict
])
def test_skew(northd, controller, pinned, severity):
    verdict = releases.skew(northd, controller, pinned)
    assert (verdict[0] if verdict else None) == severity, verdict


def test_skew_says_why():
    _severity, why = releases.skew("23.03.1", "25.03.0", False)
    assert "25.03 with ovn-northd 23.03 is outside OVN's rolling upgrade span" in why and "up to 24.03" in why
