# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A checked policy as OVN would enforce it: names, priority bands, matches.

The shape (docs/design/33-network-policy.md, section 1): a port group per
policy holds the ports of the pods it selects, on the networks it is for;
each of its rules is **one** ACL whose peers are address sets (one per
rule and IP family) and inline CIDRs; default-deny port groups per network
and direction hold every port some policy isolates there. Pods are only
port group members and address set entries, never ACLs: the number of
ACLs grows with policies and rules, not with pods.

Stages and bands. OVN 23.03 (the floor) has no ACL tiers, so precedence is
priority within one stage. Ingress lives in ``to-lport``, egress in
``from-lport`` after the load balancer (``options:apply-after-lb``), never
before it: every product ACL of a direction is in one priority space.

====================  ========  ============================================
band                  priority  ACLs
====================  ========  ============================================
operator baseline     20000+    rule *i* of the declared list at 29999 - *i*
tenant allow          12000     every rule of every policy; the anchor
default-deny holes    11001     ARP and neighbour discovery
default deny          11000     every port a policy isolates: drop, logged
the operator's own    < 10000   never touched
====================  ========  ============================================

The **anchor**: a stateful network with an isolated port gets one
``allow-related`` ACL from its own gateway addresses, so that OVN sends its
traffic through conntrack and the replies of a pod's own connections pass
(ovn-kubernetes #5667 and #4071: a switch whose ACLs are only drops has no
conntrack, and the replies hit the drop).

Everything here is a pure function of a checked policy and names: what
OVN rows they become is the composite kind's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import re

from ..common.marks import DENY_GROUP_PREFIX, METER_ACL_LOG, POLICY_GROUP_PREFIX
from .policy_model import EGRESS, INGRESS

BASELINE_TOP = 29999
BASELINE_BOTTOM = 20000
TENANT_ALLOW = 12000
DENY_HOLES = 11001
DEFAULT_DENY = 11000

# the ACL's stage per direction, and the side of a packet its peers are on
STAGE = {INGRESS: "to-lport", EGRESS: "from-lport"}
_PORT_SIDE = {INGRESS: "outport", EGRESS: "inport"}
_PEER_SIDE = {INGRESS: "src", EGRESS: "dst"}
_SHORT = {INGRESS: "in", EGRESS: "eg"}

# OVN's names of port groups and address sets are identifiers in matches
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")
_READABLE = 32
ACL_NAME_MAX = 63


def _digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def identifier(prefix, readable, identity):
    """``prefix`` + ``readable`` (as an identifier, cut) + ``_`` + 8 hex of
    ``identity``: unique by the digest, findable by eye by the rest."""
    return "%s%s_%s" % (prefix, _NOT_IDENTIFIER.sub("_", readable)[:_READABLE], _digest(identity))


def policy_group(policy_key):
    """The port group of the policy ``<namespace>/<name>``."""
    return identifier(POLICY_GROUP_PREFIX, policy_key.replace("/", "_"), policy_key)


def deny_group(network, direction):
    """The default-deny port group of ``network`` in ``direction``."""
    return identifier("%s%s_" % (DENY_GROUP_PREFIX, _SHORT[direction]), network,
                      "%s/%s" % (direction, network))


def peer_set(group, direction, index, family):
    """The address set of rule ``index``'s selector peers, per IP family
    (4 or 6)."""
    return "%s_%s%d_%d" % (group, direction[0], index, family)


def acl_name(text):
    """An ACL's ``name`` (shown in every drop log line): ``text``, or cut
    to 63 with its digest kept."""
    if len(text) <= ACL_NAME_MAX:
        return text
    return "%s~%s" % (text[:ACL_NAME_MAX - 9], _digest(text))


def subject_match(group, direction):
    """The ports a rule of ``direction`` guards: ``outport == @g`` (traffic
    to them) or ``inport == @g`` (from them)."""
    return "%s == @%s" % (_PORT_SIDE[direction], group)


def ports_match(ports, direction, field="dst"):
    """A rule's ports as one match (None: every port): the destination
    port of traffic to the subject (ingress) or from it (egress), grouped
    by protocol, single ports in one set, ranges apart; with ``field``
    ``src``, the same ports as the source (a reply's)."""
    if not ports:
        return None
    terms = []
    for protocol in ("TCP", "UDP", "SCTP"):
        chosen = [p for p in ports if p.protocol == protocol]
        if not chosen:
            continue
        name = protocol.lower()
        if any(p.port is None for p in chosen):
            terms.append(name)
            continue
        singles = sorted(set(p.port for p in chosen if p.end is None or p.end == p.port))
        ranges = sorted(set((p.port, p.end) for p in chosen if p.end is not None and p.end != p.port))
        parts = []
        if singles:
            parts.append("%s.%s == %s" % (name, field, singles[0] if len(singles) == 1 else
                                          "{%s}" % ", ".join(str(s) for s in singles)))
        parts.extend("%d <= %s.%s <= %d" % (low, name, field, high) for low, high in ranges)
        terms.append("%s && %s" % (name, parts[0]) if len(parts) == 1 else
                     "%s && (%s)" % (name, " || ".join(parts)))
    return terms[0] if len(terms) == 1 else " || ".join("(%s)" % t for t in terms)


def block_match(peer, direction, side=None):
    """An ipBlock peer inline: its CIDR less its excepts (``side``: the
    packet's field the peer is in, ``src`` or ``dst``; the rule's own by
    default)."""
    field = "ip%d.%s" % (peer.cidr.version, side or _PEER_SIDE[direction])
    text = "%s == %s" % (field, peer.cidr)
    if peer.excepted:
        text += " && %s != {%s}" % (field, ", ".join(str(c) for c in peer.excepted))
    return text


def peers_match(rule, group, direction, index, side=None):
    """A rule's peers as one match (None: every peer): its selector peers
    through the rule's two address sets, its blocks inline."""
    if not rule.peers:
        return None
    terms = []
    side = side or _PEER_SIDE[direction]
    if any(not p.is_block for p in rule.peers):
        terms.append("ip4.%s == $%s" % (side, peer_set(group, direction, index, 4)))
        terms.append("ip6.%s == $%s" % (side, peer_set(group, direction, index, 6)))
    terms.extend(block_match(p, direction, side) for p in rule.peers if p.is_block)
    return terms[0] if len(terms) == 1 else " || ".join("(%s)" % t if "&&" in t else t for t in terms)


def rule_match(rule, group, direction, index, reply=False):
    """The whole match of one rule's ACL; with ``reply``, of its mirror:
    the replies of what the rule admits (the subject and the peers swap
    sides, the ports are the source's), for a stateless network."""
    if reply:
        other = EGRESS if direction == INGRESS else INGRESS
        parts = [subject_match(group, other)]
        matched = (peers_match(rule, group, direction, index, _PEER_SIDE[other]),
                   ports_match(rule.ports, direction, "src"))
    else:
        parts = [subject_match(group, direction)]
        matched = (peers_match(rule, group, direction, index), ports_match(rule.ports, direction))
    for part in matched:
        if part is not None:
            parts.append("(%s)" % part if "||" in part else part)
    if len(parts) == 1:
        parts.append("ip")
    return " && ".join(parts)


def policy_acls(policy, stateful=True):
    """The ACLs of ``policy`` as dicts (``direction``, ``priority``,
    ``match``, ``action``, ``name``, ``options``, ``rule``): one per rule of
    each direction it isolates, whatever pods it selects; on a stateless
    network (``stateful`` false) ``allow-stateless``, each with its mirror
    for the replies."""
    group = policy_group(policy.key)
    action = "allow-related" if stateful else "allow-stateless"
    out = []
    for direction in (INGRESS, EGRESS):
        other = EGRESS if direction == INGRESS else INGRESS
        for index, rule in enumerate(policy.rules(direction)):
            name = "mnp:%s:%s%d" % (policy.key, _SHORT[direction], index)
            out.append(_acl(direction, TENANT_ALLOW, rule_match(rule, group, direction, index), action, name,
                            "%s/%d" % (direction, index)))
            if not stateful:
                # nothing remembers the connection: its replies are let back by a mirror
                out.append(_acl(other, TENANT_ALLOW, rule_match(rule, group, direction, index, reply=True),
                                action, acl_name(name + ":reply"), "%s/%d/reply" % (direction, index)))
    return out


def deny_acls(network, direction):
    """A network's default deny in ``direction`` and its holes: the drop
    is logged, at ``info``, through the product's meter (a bucket per
    ACL), so that a flood of refused packets cannot flood the log."""
    group = deny_group(network, direction)
    subject = subject_match(group, direction)
    name = "deny:%s:%s" % (_SHORT[direction], network)
    drop = _acl(direction, DEFAULT_DENY, subject, "drop", name, "deny")
    drop.update(log=True, severity="info", meter=METER_ACL_LOG)
    return [_acl(direction, DENY_HOLES, "%s && (arp || nd)" % subject, "allow", name, "holes"), drop]


def log_meter(rate):
    """The meter of the drop logs: ``rate`` log lines a second per ACL,
    and as many again in a burst."""
    return {"name": METER_ACL_LOG, "unit": "pktps", "fair": True, "rate": rate, "burst_size": rate}


def anchor_acl(network, gateway4=None, gateway6=None):
    """The conntrack anchor of a stateful network with isolated ports: an
    ``allow-related`` from the network's own gateway addresses (the router
    sends only ICMP errors and DHCP or RA answers from them)."""
    terms = []
    if gateway4:
        terms.append("ip4.src == %s" % gateway4)
    if gateway6:
        terms.append("ip6.src == %s" % gateway6)
    if not terms:
        return None
    return _acl(INGRESS, TENANT_ALLOW, " || ".join(terms), "allow-related", "anchor:%s" % network, "anchor")


def _acl(direction, priority, match, action, name, rule):
    return {"direction": STAGE[direction], "priority": priority, "match": match, "action": action,
            "name": acl_name(name), "options": {"apply-after-lb": "true"} if direction == EGRESS else {},
            "rule": rule}
