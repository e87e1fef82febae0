# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's baseline: rules per virtual network that no tenant's
policy can override (``ovn4nfv.k8s.network_policy``).

A rule guards one network in one direction: traffic **to** its addresses
(``ingress``) or **from** them (``egress``), from or to its peers: other
networks (their subnets), CIDRs, and the pods of the namespaces a selector
picks (an address set per IP family, which the watcher keeps current).
``except`` takes networks or CIDRs back out of the peers: "the management
network accepts only from the operator's subnet" is a ``deny`` with no
peers (everyone) except that subnet. ``deny`` drops, logged through the
product's meter by default; ``allow`` lets through (``allow-related``:
the replies too), over any tenant's default deny.

Each rule is one ACL on its network's switch, in the baseline's band
(``policy_render``: NB priority 20000 + the rule's ``priority``, 1-9999),
above every tenant ACL (12000 and below) in the same stage: ingress in
``to-lport``, egress in ``from-lport`` after the load balancer. The ACL
records the rule as declared (``K_BASELINE_SPEC``), so the rules are read
back, changed, gathered and audited from the NB alone. Two rules of one
network and direction may not share a priority (OVN would pick either).

A guarded network is **stateful** (its ``policy_mode``, the default): the
baseline gives it a conntrack anchor (an ``allow-related`` ACL at the
band's floor, 20000, from the network's own gateway addresses), so that
every connection is tracked and the replies of the network's own
connections pass a deny (OVN lets an established connection's replies
through above every ACL). Without it a deny on a switch that has no
stateful ACL drops them too. On a **stateless** network there is no
anchor: an ``allow`` is ``allow-stateless`` with a mirror for its replies,
and a deny also drops the replies of the network's own connections from
the peers it denies.

Neighbour discovery is the link's, as ARP is (which is not IP): a network
with IPv6 gets a hole for it above the band (30000, in both stages), so
that a deny of everyone but a peer does not cut the peer's neighbour
solicitations and advertisements too.

Subjects are the network's **addresses** (its subnets), not its ports:
what a pod on the network sends out through the router to elsewhere is
not "to" the network, and the router's answers from elsewhere are. With
port security (every pod port has it) a port cannot claim another's
address.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import (
    BASELINE_SET_PREFIX, K_BASELINE, K_BASELINE_PEERS, K_BASELINE_SPEC, METER_ACL_LOG, NETWORK_KEY, OWNER_KEY,
    OWNER_VALUE, ROLE, ROLE_BASELINE_NETWORK)
from ..common.naming import in_range
from ..common.selectors import parse_selector
from ..ovsdb.declared import CompositeKind, over_current, plan_declared
from ..ovsdb.plan import plan, validate_config
from ..ovsdb.view import cell
from ..resources.nb_acls import Meter, SwitchACL
from ..resources.nb_policies import AddressSet
from . import networks as vn
from . import policy_render as render
from .policy_model import EGRESS, INGRESS, parse_port

TABLES = ("Logical_Switch", "ACL", "Address_Set", "Meter", "Meter_Band")
OPTIONS = ("name", "network", "direction", "action", "priority", "peers", "except", "ports", "log")
ACTIONS = ("deny", "allow")
DEFAULT_PRIORITY = 5000
PRIORITY_MAX = render.BASELINE_TOP - render.BASELINE_BOTTOM
# drop log lines a second, when this module makes the meter first
LOG_RATE = 20
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?\Z")
_PEER_KINDS = ("network", "cidr", "namespace_selector")


def address_set(rule, family):
    """The address set of rule ``rule``'s selector peers, for IP ``family``."""
    return "%s_%d" % (render.identifier(BASELINE_SET_PREFIX, rule, rule), family)


def _peer(value, where, selectors=True):
    kinds = _PEER_KINDS if selectors else _PEER_KINDS[:2]
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not a peer (one of %s)" % (where, value, ", ".join(kinds)))
    given = [k for k in kinds if value.get(k) is not None]
    extra = sorted(set(k for k, v in value.items() if v is not None) - set(kinds) - {"pod_selector"})
    if extra or len(given) != 1 or (value.get("pod_selector") is not None and given != ["namespace_selector"]):
        raise ValidationError("%s: give exactly one of %s%s" % (
            where, ", ".join(kinds), " (a pod_selector goes with a namespace_selector)" if selectors else ""))
    kind = given[0]
    if kind == "network":
        if not isinstance(value["network"], str) or not value["network"]:
            raise ValidationError("%s.network: %r is not a network's name" % (where, value["network"]))
        return {"network": value["network"]}
    if kind == "cidr":
        return {"cidr": str(addressing.parse_cidr(value["cidr"], where + ".cidr"))}
    problems, out = [], {}
    for key in ("namespace_selector", "pod_selector"):
        try:
            out[key] = parse_selector(value.get(key), "%s.%s" % (where, key)).to_dict()
        except ValidationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ValidationError(problems)
    return out


def _each(problems, values, where, check):
    out = []
    if values is None:
        return out
    if not isinstance(values, list):
        problems.append("%s: %r is not a list" % (where, values))
        return out
    for index, value in enumerate(values):
        try:
            out.append(check(value, "%s[%d]" % (where, index)))
        except ValidationError as exc:
            problems.extend(exc.problems)
    return out


def check_rule(item, where):
    """Check and normalise one rule without the database: every problem,
    each naming its field."""
    unknown = sorted(set(item) - set(OPTIONS))
    if unknown:
        raise ValidationError("%s: unknown options %s" % (where, ", ".join(unknown)))
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError("%s.name: %r: lower-case letters, digits and '-', at most 50" % (where, name))
    problems = []
    out = {"name": name}
    network = item.get("network")
    if not isinstance(network, str) or not network:
        problems.append("%s.network: the network the rule guards is required" % where)
    out["network"] = network
    out["direction"] = item.get("direction") or INGRESS
    if out["direction"] not in (INGRESS, EGRESS):
        problems.append("%s.direction: %r is not ingress or egress" % (where, out["direction"]))
    out["action"] = item.get("action") or "deny"
    if out["action"] not in ACTIONS:
        problems.append("%s.action: %r is not deny or allow" % (where, out["action"]))
    try:
        out["priority"] = in_range(item.get("priority", DEFAULT_PRIORITY), 1, PRIORITY_MAX, where + ".priority")
    except ValidationError as exc:
        problems.extend(exc.problems)
    out["peers"] = _each(problems, item.get("peers"), where + ".peers", _peer)
    out["except"] = _each(problems, item.get("except"), where + ".except",
                          lambda v, w: _peer(v, w, selectors=False))
    ports = _each(problems, item.get("ports"), where + ".ports", lambda v, w: parse_port(v, w, "end_port"))
    out["ports"] = [dict((("end_port" if k == "endPort" else k), v) for k, v in p.to_dict().items())
                    for p in ports]
    log = item.get("log")
    if log is not None and not isinstance(log, bool):
        problems.append("%s.log: %r is not true or false" % (where, log))
    out["log"] = (out["action"] == "deny") if log is None else log
    if problems:
        raise ValidationError(problems)
    return out


def _subnet(network, family):
    return network.subnet if family == 4 else network.subnet6


def _addresses(peers, networks, family):
    """The CIDRs of the network and CIDR ``peers`` in IP ``family``."""
    out = set()
    for peer in peers:
        if "network" in peer:
            subnet = _subnet(networks[peer["network"]], family)
            if subnet is not None:
                out.add(subnet)
        elif "cidr" in peer:
            cidr = addressing.parse_cidr(peer["cidr"], "cidr")
            if cidr.version == family:
                out.add(cidr)
    return sorted(out)


def _one_or_set(cidrs):
    return str(cidrs[0]) if len(cidrs) == 1 else "{%s}" % ", ".join(str(c) for c in cidrs)


def rule_match(rule, networks, where, reply=False):
    """The match of a rule's ACL, given the NB's ``{name: Network}``; with
    ``reply``, of its mirror on a stateless network: the replies of what
    it admits (the sides swap, the ports are the source's)."""
    own, other = ("dst", "src") if rule["direction"] == INGRESS else ("src", "dst")
    if reply:
        own, other = other, own
    network = networks[rule["network"]]
    terms = []
    for family in (4, 6):
        subject = _subnet(network, family)
        if subject is None:
            continue
        field = "ip%d.%s" % (family, other)
        alternatives = []
        cidrs = _addresses(rule["peers"], networks, family)
        if cidrs:
            alternatives.append("%s == %s" % (field, _one_or_set(cidrs)))
        if any("namespace_selector" in p for p in rule["peers"]):
            alternatives.append("%s == $%s" % (field, address_set(rule["name"], family)))
        if rule["peers"] and not alternatives:
            continue        # no peer of this family: the rule has nothing to say of it
        parts = ["ip%d.%s == %s" % (family, own, subject)]
        if alternatives:
            parts.append(alternatives[0] if len(alternatives) == 1 else "(%s)" % " || ".join(alternatives))
        excepted = _addresses(rule["except"], networks, family)
        if excepted:
            parts.append("%s != %s" % (field, _one_or_set(excepted)))
        terms.append(" && ".join(parts))
    if not terms:
        raise ValidationError("%s.peers: no peer has an address of the IP families of network %s" % (
            where, rule["network"]))
    match = terms[0] if len(terms) == 1 else " || ".join("(%s)" % t for t in terms)
    ports = render.ports_match([parse_port(dict(p, endPort=p.get("end_port")), where)
                                for p in rule["ports"]], rule["direction"], "src" if reply else "dst")
    if ports is None:
        return match
    return "%s && %s" % ("(%s)" % match if len(terms) > 1 else match, "(%s)" % ports if "||" in ports else ports)


def rule_rows(rule, networks, where):
    """A checked rule's ACL items (its own, and on a stateless network an
    allow's mirror) and its address-set items, after checking the networks
    it names against the NB's."""
    problems = []
    if rule["network"] not in networks:
        problems.append("%s.network: %r is not a virtual network" % (where, rule["network"]))
    for part in ("peers", "except"):
        for index, peer in enumerate(rule[part]):
            if "network" in peer and peer["network"] not in networks:
                problems.append("%s.%s[%d].network: %r is not a virtual network" % (
                    where, part, index, peer["network"]))
    if problems:
        raise ValidationError(problems)
    mark = {K_BASELINE: rule["name"]}
    stateful = networks[rule["network"]].stateful
    allow = "allow-related" if stateful else "allow-stateless"
    acl = {"switch": rule["network"], "direction": render.STAGE[rule["direction"]],
           "priority": render.BASELINE_BOTTOM + rule["priority"], "match": rule_match(rule, networks, where),
           "action": "drop" if rule["action"] == "deny" else allow,
           "name": render.acl_name("base:%s" % rule["name"]), "log": rule["log"],
           "options": {"apply-after-lb": "true"} if rule["direction"] == EGRESS else {},
           "external_ids": dict(mark, **{K_BASELINE_SPEC: json.dumps(rule, sort_keys=True,
                                                                     separators=(",", ":"))})}
    if rule["log"]:
        acl.update(severity="info", meter=METER_ACL_LOG)
    acls = [acl]
    if rule["action"] == "allow" and not stateful:
        # nothing remembers the connection: its replies are let back by a mirror
        back = EGRESS if rule["direction"] == INGRESS else INGRESS
        acls.append({"switch": rule["network"], "direction": render.STAGE[back], "priority": acl["priority"],
                     "match": rule_match(rule, networks, where, reply=True), "action": allow,
                     "name": render.acl_name("base:%s:reply" % rule["name"]), "log": False,
                     "options": {"apply-after-lb": "true"} if back == EGRESS else {}, "external_ids": dict(mark)})
    sets = []
    selectors = [p for p in rule["peers"] if "namespace_selector" in p]
    if selectors:
        peers = json.dumps(selectors, sort_keys=True, separators=(",", ":"))
        sets = [{"name": address_set(rule["name"], family), "external_ids": dict(mark, **{K_BASELINE_PEERS: peers})}
                for family in (4, 6)]
    return acls, sets


def network_acls(network):
    """The ACLs a guarded ``network`` (a ``Network``) gets from the baseline
    itself: its conntrack anchor (a stateful network's), and its neighbour
    discovery holes when it has IPv6."""
    marks = {ROLE: ROLE_BASELINE_NETWORK, NETWORK_KEY: network.name}
    out = []
    if network.stateful:
        anchor = render.anchor_acl(network.name, network.gateway, network.gateway6)
        out.append({"switch": network.name, "direction": anchor["direction"], "priority": render.BASELINE_BOTTOM,
                    "match": anchor["match"], "action": anchor["action"], "log": False, "options": {},
                    "name": render.acl_name("base-anchor:%s" % network.name), "external_ids": marks})
    if network.subnet6 is not None:
        for direction in (INGRESS, EGRESS):
            out.append({"switch": network.name, "direction": render.STAGE[direction],
                        "priority": render.BASELINE_TOP + 1, "match": "nd", "action": "allow", "log": False,
                        "options": {"apply-after-lb": "true"} if direction == EGRESS else {},
                        "name": render.acl_name("base-nd:%s" % network.name), "external_ids": marks})
    return out


def baseline_rows(view, table):
    """``(row, external_ids)`` of the baseline's rows of ``table``."""
    for row in view.rows(table):
        ids = cell(row, "external_ids")
        if ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(K_BASELINE):
            yield row, ids


def read_baseline(view):
    """``{name: rule}`` as declared, from the rules' ACLs."""
    out = {}
    for row, ids in baseline_rows(view, "ACL"):
        if K_BASELINE_SPEC not in ids:
            continue        # a rule's mirror (a stateless network's)
        try:
            out[ids[K_BASELINE]] = json.loads(ids.get(K_BASELINE_SPEC) or "")
        except ValueError:
            raise ValidationError("ACL %s of baseline rule %s has a damaged record; delete the rule" % (
                row.uuid, ids[K_BASELINE]))
    return out


def _ids(current, table):
    return current.cols.get((table, "external_ids")) or {}


class Baseline(CompositeKind):
    """The operator's baseline rules: each rule's ACL and address sets
    made exactly what its declaration says, in one transaction."""

    name = "network_policy"
    noun = "rule"

    def read(self, view):
        return read_baseline(view)

    def complete(self, item, current, merge, where, view):
        return check_rule(over_current(item, current, merge), where)

    def realise(self, view, declaration, result):
        touched = declaration.record(result)
        if not touched:
            return
        problems, taken = [], {}
        wheres = dict((name, where) for name, (where, _rule) in declaration.declared.items())
        for name, rule in sorted(declaration.after.items()):
            slot = (rule["network"], rule["direction"], rule["priority"])
            if slot in taken and (name in wheres or taken[slot] in wheres):
                mine = name if name in wheres else taken[slot]
                problems.append("%s.priority: %d is rule %s's too, on network %s %s; give each rule of a "
                                "network and direction its own" % (
                                    wheres[mine], rule["priority"], taken[slot] if mine == name else name,
                                    rule["network"], rule["direction"]))
            taken.setdefault(slot, name)
        acls, sets = [], []
        networks = vn.read_network_settings(view)
        for name, (where, rule) in sorted(declaration.declared.items()):
            try:
                rule_acls, rule_sets = rule_rows(rule, networks, where)
            except ValidationError as exc:
                problems.extend(exc.problems)
                continue
            acls.extend(rule_acls)
            sets.extend(rule_sets)
        if problems:
            raise ValidationError(problems)
        mine = set(touched)
        guarded = set(rule["network"] for rule in declaration.after.values())
        changed = set(rule["network"] for name in touched for rule in (
            declaration.current.get(name), declaration.after.get(name)) if rule)
        for network in sorted(guarded & changed & set(networks)):
            acls.extend(network_acls(networks[network]))
        scopes = {"ACL": lambda cur: (_ids(cur, "ACL").get(K_BASELINE) in mine or (
            _ids(cur, "ACL").get(ROLE) == ROLE_BASELINE_NETWORK and _ids(cur, "ACL").get(NETWORK_KEY) in changed)),
            "Address_Set": lambda cur: _ids(cur, "Address_Set").get(K_BASELINE) in mine}
        for resource, items, table in ((SwitchACL(), acls, "ACL"), (AddressSet(), sets, "Address_Set")):
            checked = validate_config(resource, items, "replaced")
            result.batch.add(plan(resource, checked, "overridden", view, scope=scopes[table]))
        if any(acl["log"] for acl in acls) and view.lookup("Meter", METER_ACL_LOG) is None:
            # the drops' meter, when no default deny made it first
            meter = Meter()
            result.batch.add(plan(meter, validate_config(meter, [render.log_meter(LOG_RATE)], "merged"),
                                  "merged", view))


def plan_baseline(view, items, state):
    """The :class:`~..ovsdb.execution.CompositePlan` of ``network_policy``
    (:class:`Baseline`): ``items`` are (where, raw item) pairs."""
    return plan_declared(Baseline(), view, items, state)


def plan_peer_sets(view, resolve):
    """What the watcher makes of the baseline's selector peers: each rule's
    address sets hold the addresses of the pods its selectors pick now.
    ``resolve(namespace selector, pod selector)`` yields the IP addresses
    (strings) of the pods picked."""
    items = []
    for row, ids in baseline_rows(view, "Address_Set"):
        try:
            selectors = json.loads(ids.get(K_BASELINE_PEERS) or "[]")
        except ValueError:
            continue        # the audit says a damaged record; the rule's next plan mends it
        v6 = row.name.endswith("_6")
        held = set()
        for peer in selectors:
            for address in resolve(parse_selector(peer.get("namespace_selector"), "namespace_selector"),
                                   parse_selector(peer.get("pod_selector"), "pod_selector")):
                if (":" in address) == v6:
                    held.add(address)
        items.append({"name": row.name, "addresses": sorted(held)})
    resource = AddressSet(addresses=True)
    return plan(resource, validate_config(resource, items, "merged"), "merged", view)
