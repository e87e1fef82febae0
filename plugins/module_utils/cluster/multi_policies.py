# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tenants' MultiNetworkPolicies as a composite kind: the rows that enforce them.

An item is a policy **resolved**: its ``name`` (``<namespace>/<name>``),
the checked :class:`~.policy_model.Policy`, the switches it is for, the switch ports of the pods it selects there, and
the addresses of each rule's selector peers. Resolving needs the API (which
pods a selector picks, which NAD is which switch): that is the watcher's.
Here the NB side is planned, in one transaction per plan, with the states
every composite kind has (``ovsdb/declared.py``): the watcher plans a
policy ``replaced`` when it changes, ``deleted`` when it goes, and
``overridden`` at a resync.

What a policy becomes (names and matches: ``policy_render.py``):

- its port group, with its members, and the policy as rendered recorded on
  it (``K_POLICY_SPEC``): the next plan, the audit and a restart compare
  against that, not against the API;
- an address set per rule and IP family for the rule's selector peers;
- one ACL per rule of each direction it isolates;

and, for every network whose isolation the plan changes, from every policy
as it will be:

- the network's default-deny group per direction, holding every port some
  policy isolates there in that direction, with its drop and its ARP/ND
  holes (none when no port is isolated: the group goes);
- the network's conntrack anchor while any of its ports is isolated.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json

from ..common.errors import ValidationError
from ..common.marks import (
    K_BASELINE, K_DEFAULT_DENY, K_POLICY, K_POLICY_RULE, K_POLICY_SPEC, NETWORK_KEY, OWNER_KEY, OWNER_VALUE, ROLE,
    ROLE_ACL_ANCHOR)
from ..common.selectors import parse_selector
from ..ovsdb.declared import CompositeKind, plan_declared
from ..ovsdb.operations import NewRow, Op
from ..ovsdb.plan import Change, Plan, plan, validate_config
from ..ovsdb.view import cell
from ..resources.nb_acls import Meter, PortGroup, PortGroupACL, SwitchACL
from ..resources.nb_policies import AddressSet
from . import networks as vn
from . import policy_render as render
from . import policy_model
from .policy_model import EGRESS, INGRESS, Policy

TABLES = ("Logical_Switch", "Logical_Switch_Port", "Port_Group", "ACL", "Address_Set", "Meter", "Meter_Band")
# drop log lines a second per default deny, by default (ovn-kubernetes' acl-logging rate)
LOG_RATE = 20
DIRECTIONS = (INGRESS, EGRESS)


def policy_rows(view, table):
    """``(row, external_ids)`` of the rows of ``table`` that are the
    product's and a policy's (its port group, address sets, ACLs)."""
    for row in view.rows(table):
        ids = cell(row, "external_ids")
        if ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(K_POLICY):
            yield row, ids


def policy_address_sets(view):
    """The product's address sets that admit or refuse pods by address:
    the tenants' policies' and the operator's baseline's."""
    for row in view.rows("Address_Set"):
        ids = cell(row, "external_ids")
        if ids.get(OWNER_KEY) == OWNER_VALUE and (ids.get(K_POLICY) or ids.get(K_BASELINE)):
            yield row


def read_policies(view):
    """``{<namespace>/<name>: object}`` of the policies the NB enforces:
    ``spec`` (as rendered), ``switches``, ``types`` and ``members``."""
    out = {}
    for row, ids in policy_rows(view, "Port_Group"):
        try:
            recorded = json.loads(ids.get(K_POLICY_SPEC) or "{}")
        except ValueError:
            recorded = {}
        out[ids[K_POLICY]] = {
            "name": ids[K_POLICY], "spec": recorded.get("policy"),
            "switches": sorted(recorded.get("switches") or []),
            "types": sorted(recorded.get("types") or []),
            "members": sorted(port.name for port in row.ports)}
    return out


def port_switches(view):
    """``{port name: switch name}`` of every switch port: one pass over the
    switches per view, however many policies a plan checks."""
    def make():
        out = {}
        for switch in view.rows("Logical_Switch"):
            for port in switch.ports:
                out[port.name] = switch.name
        return out
    return view.cached("port-switches", make)


class MultiNetworkPolicies(CompositeKind):
    """Resolved MultiNetworkPolicies, realised as port groups, address sets
    and ACLs, and the default denies and anchors of their networks."""

    name = "multi_network_policy"
    noun = "policy"

    def __init__(self, log_rate=LOG_RATE):
        self.log_rate = log_rate

    def read(self, view):
        return read_policies(view)

    def complete(self, item, current, merge, where, view):
        policy = item.get("policy")
        if not isinstance(policy, Policy):
            raise ValidationError("%s.policy: not a checked policy" % where)
        if item.get("name") != policy.key:
            raise ValidationError("%s.name: %r is not the policy's %r" % (where, item.get("name"), policy.key))
        problems = []
        switches = sorted(set(item.get("switches") or []))
        modes = {}
        for switch in switches:
            network = vn.read_network(view, switch)
            if network is None:
                problems.append("%s.switches: %r is not a virtual network of the product's" % (where, switch))
            else:
                modes.setdefault(network.policy_mode, []).append(switch)
        if len(modes) > 1:
            problems.append("%s: its networks keep state differently (%s): one policy's rules cannot be both; "
                            "give each policy_mode its own policy" % (policy_model.POLICY_FOR_FIELD, "; ".join(
                                "%s %s" % (mode, ", ".join(names)) for mode, names in sorted(modes.items()))))
        located = port_switches(view)
        members = sorted(set(item.get("members") or []))
        for port in members:
            if located.get(port) not in switches:
                problems.append("%s.members: switch port %r is not on a network the policy is for (%s)" % (
                    where, port, ", ".join(switches) or "none"))
        if problems:
            raise ValidationError(problems)
        peers = {}
        for (direction, index), addresses in (item.get("peers") or {}).items():
            peers[(direction, index)] = sorted(set(addresses))
        return {"name": policy.key, "spec": policy.to_dict(), "switches": switches,
                "types": sorted(policy.types), "members": members, "policy": policy, "peers": peers,
                "stateful": "stateless" not in modes}

    def realise(self, view, declaration, result):
        touched = declaration.record(result, _summary)
        if not touched:
            return
        groups, sets, acls = [], [], []
        for key, (_where, obj) in sorted(declaration.declared.items()):
            g, s, a = _policy_rows(obj)
            groups.append(g)
            sets.extend(s)
            acls.extend(a)
        # the networks whose default deny and anchor may change
        networks = set()
        for key in touched:
            for obj in (declaration.current.get(key), declaration.declared.get(key, (None, None))[1]):
                networks.update(obj["switches"] if obj else ())
        deny_groups, deny_acls, anchors = _deny_rows(view, declaration.after, networks)
        mine = set(touched)
        kept = set(declaration.declared)
        _add(result, view, PortGroup(), groups + deny_groups,
             lambda cur: _ids(cur, "Port_Group").get(K_POLICY) in mine or
             _ids(cur, "Port_Group").get(K_DEFAULT_DENY) and _ids(cur, "Port_Group").get(NETWORK_KEY) in networks)
        _add(result, view, AddressSet(addresses=True), sets,
             lambda cur: _ids(cur, "Address_Set").get(K_POLICY) in mine)
        # a group deleted takes its ACLs with it (strong references): only
        # the ACLs of groups that stay are planned
        _add(result, view, PortGroupACL(), acls + deny_acls,
             lambda cur: _ids(cur, "ACL").get(K_POLICY) in kept or
             _ids(cur, "ACL").get(K_DEFAULT_DENY) and _ids(cur, "ACL").get(NETWORK_KEY) in networks and
             cur.parent.name in set(g["name"] for g in deny_groups))
        _add(result, view, SwitchACL(), anchors,
             lambda cur: _ids(cur, "ACL").get(ROLE) == ROLE_ACL_ANCHOR and cur.parent.name in networks)
        if deny_acls:
            # the drops' meter: made with the first default deny, kept after
            meter = Meter()
            result.batch.add(plan(meter, validate_config(meter, [render.log_meter(self.log_rate)], "merged"),
                                  "merged", view))


def _ids(current, table):
    return current.cols.get((table, "external_ids")) or {}


def _add(result, view, resource, items, scope):
    checked = validate_config(resource, items, "replaced")
    result.batch.add(plan(resource, checked, "overridden", view, scope=scope))


def _summary(obj):
    """What a change report shows of a policy."""
    if obj is None:
        return None
    return {"name": obj["name"], "switches": obj["switches"], "members": obj["members"], "spec": obj["spec"]}


def _policy_rows(obj):
    """A declared policy's port group, address sets and ACLs."""
    policy = obj["policy"]
    group = render.policy_group(policy.key)
    mark = {K_POLICY: policy.key}
    spec = json.dumps({"policy": obj["spec"], "switches": obj["switches"], "types": obj["types"]},
                      sort_keys=True, separators=(",", ":"))
    sets = []
    for direction in DIRECTIONS:
        for index, rule in enumerate(policy.rules(direction)):
            if all(p.is_block for p in rule.peers):
                continue        # no selector peer: no address set in its match
            addresses = obj["peers"].get((direction, index), [])
            rule_mark = dict(mark, **{K_POLICY_RULE: "%s/%d" % (direction, index)})
            for family in (4, 6):
                sets.append({"name": render.peer_set(group, direction, index, family),
                             "addresses": [a for a in addresses if (":" in a) == (family == 6)],
                             "external_ids": rule_mark})
    acls = [_acl_item(acl, group, dict(mark, **{K_POLICY_RULE: acl["rule"]}))
            for acl in render.policy_acls(policy, obj.get("stateful", True))]
    return ({"name": group, "ports": obj["members"], "external_ids": dict(mark, **{K_POLICY_SPEC: spec})},
            sets, acls)


def _deny_rows(view, after, networks):
    """The default-deny groups and ACLs, and the anchors, of ``networks``
    from every policy in ``after``."""
    isolated = dict(((net, d), set()) for net in networks for d in DIRECTIONS)
    located = port_switches(view)
    for obj in after.values():
        for port in obj["members"]:
            net = located.get(port)
            for direction in obj["types"]:
                if net in obj["switches"] and (net, direction) in isolated:
                    isolated[(net, direction)].add(port)
    groups, acls, anchors = [], [], []
    for (net, direction), ports in sorted(isolated.items()):
        if not ports:
            continue
        group = render.deny_group(net, direction)
        mark = {K_DEFAULT_DENY: direction, NETWORK_KEY: net}
        groups.append({"name": group, "ports": sorted(ports), "external_ids": mark})
        acls.extend(_acl_item(acl, group, mark) for acl in render.deny_acls(net, direction))
    for net in sorted(networks):
        if not (isolated[(net, INGRESS)] or isolated[(net, EGRESS)]):
            continue
        network = vn.read_network(view, net)
        if network is not None and not network.stateful:
            continue        # a stateless network keeps no conntrack on
        acl = render.anchor_acl(net, network and network.gateway, network and network.gateway6)
        if acl is not None:
            item = _acl_item(acl, None, {ROLE: ROLE_ACL_ANCHOR, NETWORK_KEY: net})
            del item["group"]
            item["switch"] = net
            anchors.append(item)
    return groups, acls, anchors


def _acl_item(acl, group, marks):
    item = dict((k, acl[k]) for k in ("direction", "priority", "match", "action", "name", "options", "log",
                                      "severity", "meter") if k in acl)
    item.update(group=group, external_ids=marks)
    return item


@functools.lru_cache(maxsize=4096)
def _recorded(text):
    """``(namespace, pod selector, switches, directions)`` of a policy as
    its port group records it, or None; kept by the text, which every new
    port of every pod is checked against."""
    try:
        recorded = json.loads(text)
        spec = recorded["policy"]
        return (spec["namespace"], parse_selector(spec["podSelector"], "podSelector"),
                frozenset(recorded["switches"]), tuple(recorded["types"]))
    except (ValueError, KeyError, TypeError, ValidationError):
        return None


def groups_for(view, namespace, labels, switch):
    """The port groups a new port of a pod (of ``namespace``, with
    ``labels``) on ``switch`` joins in the transaction that makes it, so
    that it is isolated from its first packet: the group of each policy
    that selects it there, and the switch's default-deny groups of the
    directions those policies isolate (where they exist already; where
    they do not, the policy's own plan makes them next)."""
    groups, directions = [], set()
    for row, ids in policy_rows(view, "Port_Group"):
        recorded = _recorded(ids.get(K_POLICY_SPEC) or "")
        if recorded is None:
            continue
        space, selector, switches, types = recorded
        if space == namespace and switch in switches and selector.matches(labels):
            groups.append(row)
            directions.update(types)
    for direction in sorted(directions):
        deny = view.lookup("Port_Group", render.deny_group(switch, direction))
        if deny is not None and not isinstance(deny, (list, NewRow)):
            groups.append(deny)
    return groups


def plan_forget_addresses(view, addresses):
    """A plan that takes ``addresses`` (strings) out of every policy's (and
    the baseline's) address set that holds them: what a pod's deletion carries in its own
    transaction, so that no pod given the address next inherits what the
    gone one was allowed."""
    gone = set(addresses)
    result = Plan(AddressSet(addresses=True), "merged")
    if not gone:
        return result
    for row in policy_address_sets(view):
        held = sorted(gone & set(cell(row, "addresses")))
        if held:
            result.changes.append(Change("update", row.name, {"addresses": held}, {"addresses": []},
                                         [Op("mutate", "Address_Set", row, "addresses", held, "delete")]))
    return result


def plan_policies(view, items, state, log_rate=LOG_RATE):
    """The :class:`~..ovsdb.execution.CompositePlan` of resolved policies
    (``items``: (where, item) pairs) in ``state``; the default denies' drop
    logs at ``log_rate`` lines a second each."""
    return plan_declared(MultiNetworkPolicies(log_rate), view, items, state)
