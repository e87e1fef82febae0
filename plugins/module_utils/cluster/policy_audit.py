# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit of what enforces the tenants' policies, from the NB alone.

A policy's port group records the policy as it was rendered
(``K_POLICY_SPEC``); its members and its peers' addresses are in the NB
too. So what the policy should be made of can be planned again without the
API, and a plan that changes anything is drift: an ACL edited, added or
deleted by hand, a default-deny group that lost or gained a member, an
anchor gone. The repair is that plan. The operator's baseline rules record
themselves on their ACLs (``cluster/baseline.py``): one edited by hand is
found and made again the same way. Separately, an address in a policy's
address set that no switch port holds is stale: a pod that went, whose
address another pod may be given next (and inherit what it was allowed).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import ValidationError
from ..ovsdb.execution import Batch
from ..ovsdb.view import cell
from . import baseline, multi_policies
from . import policy_render as render
from .pod_addresses import held_addresses
from .policy_model import POLICY_FOR, check_policy

POLICY_DRIFT = "policy_drift"
STALE_ADDRESS = "policy_address_stale"
BASELINE_DRIFT = "baseline_drift"
CLASSES = (POLICY_DRIFT, STALE_ADDRESS, BASELINE_DRIFT)


def _recorded_item(view, current):
    """The resolved policy as the NB holds it: the recorded spec, its
    switches, its group's members and its address sets' addresses."""
    spec = current["spec"] or {}
    policy = check_policy({
        "metadata": {"namespace": spec.get("namespace"), "name": spec.get("name"),
                     "annotations": {POLICY_FOR: ", ".join(spec.get("networks") or [])}},
        "spec": dict((k, spec[k]) for k in ("podSelector", "policyTypes", "ingress", "egress") if k in spec)})
    group = render.policy_group(policy.key)
    peers = {}
    for direction in multi_policies.DIRECTIONS:
        for index, _rule in enumerate(policy.rules(direction)):
            held = []
            for family in (4, 6):
                row = view.lookup("Address_Set", render.peer_set(group, direction, index, family))
                if row is not None and not isinstance(row, list):
                    held.extend(cell(row, "addresses"))
            peers[(direction, index)] = held
    return {"name": policy.key, "policy": policy, "switches": current["switches"], "members": current["members"],
            "peers": peers}


def drift_plan(view, key, current):
    """The plan that makes policy ``key`` what its records say (empty when
    it is), or the reason it cannot be planned: ``(plan, why)``."""
    try:
        item = _recorded_item(view, current)
        return multi_policies.plan_policies(view, [(key, item)], "replaced"), None
    except ValidationError as exc:
        return None, "; ".join(exc.problems)


def _stale(view):
    """``{address set name: [addresses no switch port holds]}``."""
    held = set()
    for row in view.rows("Logical_Switch_Port"):
        held.update(str(ip) for ip in held_addresses(row)[1])
    out = {}
    for row in multi_policies.policy_address_sets(view):
        gone = sorted(a for a in cell(row, "addresses") if a not in held)
        if gone:
            out[row.name] = gone
    return out


def audit_policies(view, finding):
    """The findings (made with the audit's ``finding``) of the policies'
    rows."""
    out = []
    for key, current in sorted(multi_policies.read_policies(view).items()):
        plan, why = drift_plan(view, key, current)
        if why is not None:
            out.append(finding(POLICY_DRIFT, "error", "nb", [key], "policy %s cannot be made again from what "
                               "the NB records of it: %s" % (key, why)))
        elif plan.changed:
            out.append(finding(POLICY_DRIFT, "error", "nb", [key], "policy %s no longer matches what was made "
                               "of it: %s" % (key, "; ".join(plan.batch.operations())),
                               "make policy %s as recorded" % key))
    try:
        rules = baseline.read_baseline(view)
    except ValidationError as exc:
        rules = {}
        out.append(finding(BASELINE_DRIFT, "error", "nb", [], "%s" % exc))
    for name, rule in sorted(rules.items()):
        try:
            plan = baseline.plan_baseline(view, [(name, rule)], "replaced")
        except ValidationError as exc:
            out.append(finding(BASELINE_DRIFT, "error", "nb", [name], "baseline rule %s cannot be made again "
                               "from what its ACL records: %s" % (name, "; ".join(exc.problems))))
            continue
        if plan.changed:
            out.append(finding(BASELINE_DRIFT, "error", "nb", [name], "baseline rule %s no longer matches what "
                               "was made of it: %s" % (name, "; ".join(plan.batch.operations())),
                               "make baseline rule %s as recorded" % name))
    for name, addresses in sorted(_stale(view).items()):
        out.append(finding(STALE_ADDRESS, "warning", "nb", [name],
                           "address set %s holds %s, which no switch port holds: a pod given it next would "
                           "inherit what it admits" % (name, ", ".join(addresses)),
                           "take %s out of %s" % (", ".join(addresses), name)))
    return out


def plan_policy_repair(view, findings):
    """The plans that mend the policies' rows the findings name."""
    batch = Batch()
    drifted = set(o for f in findings if f["class"] == POLICY_DRIFT and f["repair"] for o in f["objects"])
    items = []
    for key, current in sorted(multi_policies.read_policies(view).items()):
        if key in drifted:
            try:
                items.append((key, _recorded_item(view, current)))
            except ValidationError:
                continue        # the finding says why it cannot be mended
    if items:
        # one plan for them all: policies on one network share its default deny
        for part in multi_policies.plan_policies(view, items, "replaced").batch.plans:
            batch.add(part)
    rules = sorted(set(o for f in findings if f["class"] == BASELINE_DRIFT and f["repair"] for o in f["objects"]))
    if rules:
        recorded = baseline.read_baseline(view)
        for part in baseline.plan_baseline(view, [(n, recorded[n]) for n in rules if n in recorded],
                                           "replaced").batch.plans:
            batch.add(part)
    if any(f["class"] == STALE_ADDRESS and f["repair"] for f in findings):
        gone = sorted(set(a for addresses in _stale(view).values() for a in addresses))
        batch.add(multi_policies.plan_forget_addresses(view, gone))
    return batch
