"""The marks (``common/marks.py``) are the product's on-disk contract:
defined there once, each documented (its kind, where it is written, who
writes it, who reads it), none sharing a value with another of its kind,
none that a release wrote ever dropped, and no ``ovn4nfv-`` string written
anywhere else in the core.

What counts as a string: every string constant of the code, f-strings'
parts included, found with ``ast`` (so comments never count). Docstrings do
not count: they are prose for a reader, never written to a database, and
may name a key to explain it (naming the constant is preferred)."""

import ast
import glob
import os
import re

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import marks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORE = os.path.join(ROOT, "plugins", "module_utils")
MARKS = os.path.join(CORE, "common", "marks.py")
PRODUCT = "ovn4nfv-"

# Every value a release has written, as it wrote it. An upgrade reads what
# the release before it wrote: a value may be added to marks.py (and here),
# never renamed or dropped there; that is a migration, kept for a release.
WRITTEN = {
    "ovn4nfv-sandbox", "ovn4nfv-entry",
    "ovn4nfv-relaxed-security", "ovn4nfv-virtual-ips", "ovn4nfv-port-security", "ovn4nfv-vips",
    "ovn4nfv-owner", "ovn4nfv.k8s", "ovn4nfv-role", "cluster-router", "join-switch", "node-gateway",
    "gateway-wiring", "pod-port", "ovn4nfv-node", "ovn4nfv-external-ip", "ovn4nfv-external-gateway",
    "ovn4nfv-physnet", "ovn4nfv-join-ip", "ovn4nfv-master", "ovn4nfv-join", "ovn4nfv-network",
    "ovn4nfv-gateway", "ovn4nfv-gateway6", "ovn4nfv-subnet", "ovn4nfv-subnet6", "ovn4nfv-exclude-ips",
    "ovn4nfv-mtu", "ovn4nfv-dns", "ovn4nfv-routes", "ovn4nfv-provider", "ovn4nfv-backend", "ovn4nfv-vlan",
    "ovn4nfv-pod-namespace", "ovn4nfv-pod-name", "ovn4nfv-pod-uid", "ovn4nfv-interface",
    "ovn4nfv-container-id", "ovn4nfv-pod", "ovn4nfv-chains", "ovn4nfv-chain-held", "ovn4nfv-service",
    "ovn4nfv-service-uid", "ovn4nfv-service-part", "ovn4nfv-chain", "ovn4nfv-chain-hop",
    "ovn4nfv-chain-function", "ovn4nfv-chain-spec", "ovn4nfv-chain-fail", "ovn4nfv_chain_", "ovn4nfv-tap",
    "ovn4nfv-tap-source", "ovn4nfv-tap:", "ovn4nfv-tap-", "ovn4nfv-uplink", "ovn4nfv", "ovn4nfv-ipam",
    "/run/ovn4nfv/agent.sock", "ovn4nfv-watcher", "ovn4nfv-node-agent", "ovn4nfv-uplink@", "ovn4nfv-agent",
    "ovn4nfv-picture", "ovn4nfv ", "ovn4nfv_mnp_", "ovn4nfv_deny_",
    "ovn4nfv-policy", "ovn4nfv-policy-spec", "ovn4nfv-policy-rule", "ovn4nfv-default-deny", "policy-conntrack",
    "ovn4nfv-acl-log", "ovn4nfv-baseline", "ovn4nfv-baseline-spec", "ovn4nfv-baseline-peers", "ovn4nfv_base_",
    "baseline-network", "ovn4nfv-policy-mode", "ovn4nfv-dhcp", "ovn4nfv-dhcp-port", "ovn4nfv-dhcp-override",
    "ovn4nfv-launchers", "ovn4nfv-vmi", "ovn4nfv-physnets", "ovn4nfv-vlan-interface",
    "ovn4nfv-qos-max-rate", "ovn4nfv-qos-max-burst", "pod-qos", "ovn4nfv-qos-port",
    "ovn4nfv-term", "ovn4nfv-term-holder", "ovn4nfv-watcher term=",
    "ovn4nfv-upgrade.conf",
}


def core_files():
    return sorted(p for p in glob.glob(os.path.join(CORE, "**", "*.py"), recursive=True)
                  if os.path.abspath(p) != os.path.abspath(MARKS))


def docstrings(tree):
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out.add(id(body[0].value))
    return out


def product_strings(text):
    """``[(line, string)]``: the string constants of ``text``'s code (not
    its docstrings) that hold a product's mark."""
    tree = ast.parse(text)
    prose = docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in prose and PRODUCT in node.value]


def defined_marks():
    """``{name: value}``: the public string constants marks.py defines."""
    with open(MARKS) as handle:
        tree = ast.parse(handle.read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and not target.id.startswith(("_", "KIND_")):
                    out[target.id] = node.value.value
    return out


@pytest.mark.parametrize("path", core_files(), ids=lambda p: os.path.relpath(p, CORE))
def test_no_product_string_outside_the_marks(path):
    with open(path) as handle:
        found = product_strings(handle.read())
    assert not found, "%s: import these from common/marks.py: %r" % (os.path.relpath(path, ROOT), found)


def test_the_scan_finds_a_mark_in_code_and_not_in_prose():
    """The scan above must see what it is there to catch."""
    text = ('"""A key, ``ovn4nfv-owner``, named in prose."""\n'
            '# ovn4nfv-owner in a comment\n'
            'def f(name):\n'
            '    """ovn4nfv-role, named."""\n'
            '    return {"ovn4nfv-x": name, "y": f"ovn4nfv-{name}", "z": "ovn4nfv.k8s"}\n')
    assert product_strings(text) == [(5, "ovn4nfv-x"), (5, "ovn4nfv-")]


def test_every_mark_is_documented():
    defined = defined_marks()
    assert set(marks.CONTRACT) == set(defined), (
        "undocumented: %s; documented but not defined: %s" % (
            sorted(set(defined) - set(marks.CONTRACT)), sorted(set(marks.CONTRACT) - set(defined))))
    for name, entry in marks.CONTRACT.items():
        assert len(entry) == 4, name
        kind, where, writers, readers = entry
        assert kind in marks.KINDS, (name, kind)
        for part, label in ((where, "where"), (writers, "writer"), (readers, "reader")):
            assert isinstance(part, str) and len(part.strip()) > 3, "%s: no %s" % (name, label)


def test_keys_are_greppable():
    """A key's constant says it is one: ``K_*``, ``*_KEY`` or ``ROLE``."""
    for name, (kind, _where, _writer, _reader) in marks.CONTRACT.items():
        if kind in (marks.KIND_KEY, marks.KIND_KEY_PREFIX):
            assert name.startswith("K_") or name.endswith("_KEY") or name == "ROLE", name


def test_no_two_marks_share_a_value():
    """Within a kind (external_ids keys and key prefixes together), no
    two names for one value; a key never starts with a key prefix. A key
    and a program may share a word (``ovn4nfv-uplink``): they never meet."""
    defined = defined_marks()
    kinds = {}
    for name, value in defined.items():
        kind = marks.CONTRACT[name][0]
        group = "keys" if kind in (marks.KIND_KEY, marks.KIND_KEY_PREFIX) else kind
        kinds.setdefault(group, {}).setdefault(value, []).append(name)
    shared = dict((v, n) for group in kinds.values() for v, n in group.items() if len(n) > 1)
    assert not shared
    keys = [v for n, v in defined.items() if marks.CONTRACT[n][0] == marks.KIND_KEY]
    prefixes = [v for n, v in defined.items() if marks.CONTRACT[n][0] == marks.KIND_KEY_PREFIX]
    assert not [(k, p) for k in keys for p in prefixes if k.startswith(p)]


def test_no_written_mark_is_dropped_or_renamed():
    values = set(defined_marks().values())
    assert WRITTEN <= values, "gone from marks.py (a migration, not an edit): %s" % sorted(WRITTEN - values)
    assert values <= WRITTEN, "new marks: add them to WRITTEN as well: %s" % sorted(values - WRITTEN)


def test_keys_are_the_product_s():
    """A key the product writes starts with ``ovn4nfv-``: never one of
    another system's (``iface-id``, ``ovn-*``, ``neutron:*``)."""
    for name, (kind, _where, _writer, _reader) in marks.CONTRACT.items():
        if kind in (marks.KIND_KEY, marks.KIND_KEY_PREFIX):
            assert re.match(r"^ovn4nfv-[a-z0-9-]+:?\Z", getattr(marks, name)), name
