# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A MultiNetworkPolicy, checked: the tenant's policy in the product's terms.

A ``MultiNetworkPolicy`` (``k8s.cni.cncf.io/v1beta1``) is a NetworkPolicy
for the networks its annotation ``k8s.v1.cni.cncf.io/policy-for`` names.
It comes from the API, written by a tenant: untrusted. :func:`check_policy`
turns one into a :class:`Policy` or refuses it with every problem, each
naming its field as the API names it
(``spec.ingress[0].from[1].ipBlock.except[0]``), so that the watcher can
say them in one Warning Event and apply nothing of that policy.

The semantics are Kubernetes' NetworkPolicy's, per network:

- ``policyTypes`` absent: ``Ingress`` always, ``Egress`` when the policy
  has egress rules (the API server defaults it so for a NetworkPolicy; a
  custom resource gets no defaulting, so it is done here).
- A rule with no peers admits every peer; with no ports, every port. A
  peer is pods (``podSelector`` in the policy's namespace,
  ``namespaceSelector`` alone: every pod of the namespaces picked, both:
  the pods picked in the namespaces picked) or an ``ipBlock`` (a CIDR,
  host bits allowed as the API allows them, less its ``except`` CIDRs,
  each strictly inside it).
- Ports: ``protocol`` TCP (default), UDP or SCTP; a numeric ``port``, with
  ``endPort`` a range. Named ports are refused: a name resolves per pod
  (its container ports), which this product does not track.

The networks: each name of the annotation (a comma list, as Multus reads
it) is a NetworkAttachmentDefinition, ``<namespace>/<name>`` or a bare
name in the policy's namespace; or, for a pod's OVN4NFV interfaces
(``ovnNetwork``), a virtual network named directly, as
``ovn4nfv.k8s/<network>`` (a dotted name is never a namespace, so other
controllers find no NAD there and leave it alone). Which switch a NAD is,
is the watcher's to resolve (``cluster/policy_render.py``); here the names
are only checked. Standard library and netaddr.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import VIRTUAL_NETWORK_SCOPE
from ..common.naming import ovn_name
from ..common.selectors import parse_selector

# Multus' annotation (another system's key, defined where it is used)
POLICY_FOR = "k8s.v1.cni.cncf.io/policy-for"
# how a problem with the annotation names its field
POLICY_FOR_FIELD = "metadata.annotations[%s]" % POLICY_FOR
# the reason of the Warning Event a refused policy gets
INVALID = "InvalidPolicy"

PROTOCOLS = ("TCP", "UDP", "SCTP")
INGRESS, EGRESS = "ingress", "egress"
_TYPES = {"Ingress": INGRESS, "Egress": EGRESS}

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(r"^(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


class NetworkRef:
    """One network a policy is for: a NAD (``namespace``, ``name``), or a
    virtual network by name (``namespace`` None)."""

    def __init__(self, namespace, name):
        self.namespace = namespace
        self.name = name

    @property
    def is_attachment(self):
        return self.namespace is not None

    def __str__(self):
        return "%s/%s" % (self.namespace if self.is_attachment else VIRTUAL_NETWORK_SCOPE, self.name)

    def __eq__(self, other):
        return isinstance(other, NetworkRef) and (self.namespace, self.name) == (other.namespace, other.name)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((self.namespace, self.name))

    def __repr__(self):
        return "NetworkRef(%r)" % str(self)


class Port:
    """``protocol`` with every port (``port`` None), one, or the range
    ``port``..``end``."""

    def __init__(self, protocol, port=None, end=None):
        self.protocol = protocol
        self.port = port
        self.end = end

    def to_dict(self):
        out = {"protocol": self.protocol}
        if self.port is not None:
            out["port"] = self.port
        if self.end is not None:
            out["endPort"] = self.end
        return out


class Peer:
    """Pods (``namespace``: the policy's own, or None when
    ``namespace_selector`` picks namespaces; ``pod_selector`` None: every
    pod there), or a block (``cidr`` less ``excepted``)."""

    def __init__(self, namespace=None, namespace_selector=None, pod_selector=None, cidr=None, excepted=()):
        self.namespace = namespace
        self.namespace_selector = namespace_selector
        self.pod_selector = pod_selector
        self.cidr = cidr
        self.excepted = tuple(excepted)

    @property
    def is_block(self):
        return self.cidr is not None

    def to_dict(self):
        if self.is_block:
            out = {"ipBlock": {"cidr": str(self.cidr)}}
            if self.excepted:
                out["ipBlock"]["except"] = [str(c) for c in self.excepted]
            return out
        out = {}
        if self.namespace_selector is not None:
            out["namespaceSelector"] = self.namespace_selector.to_dict()
        if self.pod_selector is not None:
            out["podSelector"] = self.pod_selector.to_dict()
        return out


class Rule:
    """One ingress or egress rule: ``peers`` (empty: every peer) and
    ``ports`` (empty: every port)."""

    def __init__(self, peers=(), ports=()):
        self.peers = tuple(peers)
        self.ports = tuple(ports)


class Policy:
    """A checked MultiNetworkPolicy."""

    def __init__(self, namespace, name, uid, generation, networks, pod_selector, types, ingress, egress):
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.generation = generation
        self.networks = tuple(networks)
        self.pod_selector = pod_selector
        self.types = frozenset(types)       # INGRESS and/or EGRESS: the directions it isolates
        self.ingress = tuple(ingress)
        self.egress = tuple(egress)

    @property
    def key(self):
        return "%s/%s" % (self.namespace, self.name)

    def rules(self, direction):
        """The rules of ``direction``; none where the policy does not
        isolate that direction (they would admit nothing more than an
        unisolated port already receives)."""
        if direction not in self.types:
            return ()
        return self.ingress if direction == INGRESS else self.egress

    def to_dict(self):
        """The policy in canonical form: what it means, not how it was
        written (equal policies give equal dicts)."""
        def rules(direction, peers_key):
            out = []
            for rule in self.rules(direction):
                one = {}
                if rule.peers:
                    one[peers_key] = _sorted_dicts(p.to_dict() for p in rule.peers)
                if rule.ports:
                    one["ports"] = _sorted_dicts(p.to_dict() for p in rule.ports)
                out.append(one)
            return out
        return {
            "namespace": self.namespace, "name": self.name,
            "networks": [str(n) for n in self.networks],
            "podSelector": self.pod_selector.to_dict(),
            "policyTypes": [t for t in ("Ingress", "Egress") if _TYPES[t] in self.types],
            "ingress": rules(INGRESS, "from"),
            "egress": rules(EGRESS, "to"),
        }

    def spec_text(self):
        """:meth:`to_dict` as compact, sorted JSON: what the product keeps
        beside what it made, so that a change is found without the API."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


def _sorted_dicts(dicts):
    """Dicts in one order whatever the order written, each once."""
    seen = dict((json.dumps(d, sort_keys=True), d) for d in dicts)
    return [seen[k] for k in sorted(seen)]


def parse_policy_for(text, namespace, field):
    """The networks of a ``policy-for`` annotation's value, in order, each
    once."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("%s: %r names no network" % (field, text))
    out, problems = [], []
    for index, word in enumerate(text.split(",")):
        word = word.strip()
        where = "%s[%d]" % (field, index)
        scope, slash, name = word.rpartition("/")
        try:
            if not slash:
                ref = NetworkRef(namespace, _attachment_name(word, where))
            elif scope == VIRTUAL_NETWORK_SCOPE:
                ref = NetworkRef(None, ovn_name(name, where))
            elif _DNS1123_LABEL.match(scope):
                ref = NetworkRef(scope, _attachment_name(name, where))
            else:
                raise ValidationError("%s: %r is not <namespace>/<name>, <name> or %s/<network>" % (
                    where, word, VIRTUAL_NETWORK_SCOPE))
        except ValidationError as exc:
            problems.extend(exc.problems)
            continue
        if ref not in out:
            out.append(ref)
    if problems:
        raise ValidationError(problems, reason=INVALID)
    return tuple(out)


def _attachment_name(name, where):
    if not _DNS1123_SUBDOMAIN.match(name):
        raise ValidationError("%s: %r is not a network attachment's name (a DNS-1123 subdomain)" % (where, name))
    return name


def check_policy(obj):
    """A :class:`Policy` from a MultiNetworkPolicy object (a dict in the
    API's form), or a ValidationError (reason ``InvalidPolicy``) with
    every problem."""
    if not isinstance(obj, dict):
        raise ValidationError("%r is not a MultiNetworkPolicy" % (obj,), reason=INVALID)
    meta = obj.get("metadata") or {}
    spec = obj.get("spec")
    namespace, name = meta.get("namespace"), meta.get("name")
    problems = []
    if not isinstance(namespace, str) or not _DNS1123_LABEL.match(namespace):
        problems.append("metadata.namespace: %r is not a namespace" % (namespace,))
    if not isinstance(name, str) or not _DNS1123_SUBDOMAIN.match(name):
        problems.append("metadata.name: %r is not a policy's name" % (name,))
    if problems:
        raise ValidationError(problems, reason=INVALID)
    networks = ()
    try:
        networks = parse_policy_for((meta.get("annotations") or {}).get(POLICY_FOR), namespace, POLICY_FOR_FIELD)
    except ValidationError as exc:
        problems.extend(exc.problems)
    if not isinstance(spec, dict):
        problems.append("spec: %r is not a policy's spec" % (spec,))
        raise ValidationError(problems, reason=INVALID)
    pod_selector = None
    if "podSelector" not in spec:
        problems.append("spec.podSelector: required ({} selects every pod of the namespace)")
    else:
        pod_selector = _collect(problems, parse_selector, spec["podSelector"], "spec.podSelector")
    ingress = _rules(problems, spec, "ingress", "from", namespace)
    egress = _rules(problems, spec, "egress", "to", namespace)
    types = _types(problems, spec)
    if problems:
        raise ValidationError(problems, reason=INVALID)
    generation = meta.get("generation")
    return Policy(namespace, name, meta.get("uid"), generation if isinstance(generation, int) else None,
                  networks, pod_selector, types, ingress, egress)


def _collect(problems, function, *args):
    try:
        return function(*args)
    except ValidationError as exc:
        problems.extend(exc.problems)
        return None


def _types(problems, spec):
    value = spec.get("policyTypes")
    if value is None:
        # NetworkPolicy's defaulting: Ingress always, Egress with egress rules
        return {INGRESS} | ({EGRESS} if spec.get("egress") else set())
    if not isinstance(value, list) or not value:
        problems.append("spec.policyTypes: %r is not a non-empty list of Ingress and Egress" % (value,))
        return set()
    types = set()
    for index, word in enumerate(value):
        if word not in _TYPES:
            problems.append("spec.policyTypes[%d]: %r is not Ingress or Egress" % (index, word))
        elif _TYPES[word] in types:
            problems.append("spec.policyTypes[%d]: %r is given twice" % (index, word))
        else:
            types.add(_TYPES[word])
    return types


def _rules(problems, spec, direction, peers_key, namespace):
    value = spec.get(direction)
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append("spec.%s: %r is not a list of rules" % (direction, value))
        return ()
    rules = []
    for index, rule in enumerate(value):
        where = "spec.%s[%d]" % (direction, index)
        if not isinstance(rule, dict):
            problems.append("%s: %r is not a rule" % (where, rule))
            continue
        before = len(problems)
        peers = _list(problems, rule, peers_key, where)
        ports = _list(problems, rule, "ports", where)
        peers = [_collect(problems, _peer, p, "%s.%s[%d]" % (where, peers_key, i), namespace)
                 for i, p in enumerate(peers)]
        ports = [_collect(problems, parse_port, p, "%s.ports[%d]" % (where, i)) for i, p in enumerate(ports)]
        if len(problems) == before:
            rules.append(Rule(peers, ports))
    return rules


def _list(problems, rule, key, where):
    value = rule.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append("%s.%s: %r is not a list" % (where, key, value))
        return []
    return value


def _peer(value, where, namespace):
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not a peer" % (where, value))
    block = value.get("ipBlock")
    pods, spaces = value.get("podSelector"), value.get("namespaceSelector")
    if block is not None:
        if pods is not None or spaces is not None:
            raise ValidationError("%s: an ipBlock stands alone, without podSelector or namespaceSelector" % where)
        return _block(block, where + ".ipBlock")
    if pods is None and spaces is None:
        raise ValidationError("%s: a peer needs a podSelector, a namespaceSelector or an ipBlock" % where)
    problems = []
    pod_selector = None if pods is None else _collect(problems, parse_selector, pods, where + ".podSelector")
    space_selector = None if spaces is None else _collect(
        problems, parse_selector, spaces, where + ".namespaceSelector")
    if problems:
        raise ValidationError(problems)
    return Peer(namespace=namespace if spaces is None else None, namespace_selector=space_selector,
                pod_selector=pod_selector)


def _block(value, where):
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not an ipBlock" % (where, value))
    cidr = addressing.parse_ip_interface(value.get("cidr"), where + ".cidr")[1].cidr
    excepted = []
    raw = value.get("except") or []
    if not isinstance(raw, list):
        raise ValidationError("%s.except: %r is not a list of CIDRs" % (where, raw))
    problems = []
    for index, text in enumerate(raw):
        field = "%s.except[%d]" % (where, index)
        try:
            inner = addressing.parse_ip_interface(text, field)[1].cidr
        except ValidationError as exc:
            problems.extend(exc.problems)
            continue
        if inner.version != cidr.version or inner not in cidr or inner.prefixlen <= cidr.prefixlen:
            problems.append("%s: %r is not strictly inside the cidr %s" % (field, text, cidr))
        elif inner not in excepted:
            excepted.append(inner)
    if problems:
        raise ValidationError(problems)
    return Peer(cidr=cidr, excepted=sorted(excepted))


def parse_port(value, where, end_key="endPort"):
    """A :class:`Port` from ``{protocol, port, <end_key>}`` (the API's
    ``endPort``; the baseline module's ``end_port``)."""
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not a port" % (where, value))
    protocol = value.get("protocol", "TCP")
    if protocol not in PROTOCOLS:
        raise ValidationError("%s.protocol: %r is not one of %s" % (where, protocol, ", ".join(PROTOCOLS)))
    port, end = value.get("port"), value.get(end_key)
    if isinstance(port, str):
        raise ValidationError("%s.port: %r is a named port; give its number (named ports resolve per pod, "
                              "which this product does not track)" % (where, port))
    if port is not None:
        _port_number(port, where + ".port")
    if end is not None:
        _port_number(end, "%s.%s" % (where, end_key))
        if port is None:
            raise ValidationError("%s.%s: %r needs a numeric port to start the range" % (where, end_key, end))
        if end < port:
            raise ValidationError("%s.%s: %r is below the port %r; the range is port..%s" % (
                where, end_key, end, port, end_key))
    return Port(protocol, port, end)


def _port_number(value, field):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ValidationError("%s: %r is not a port number (1-65535)" % (field, value))
