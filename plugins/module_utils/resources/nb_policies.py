# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Logical router policies and address sets as reconcile resources.

A policy is known by its router, priority and match, as in
``ovn-nbctl lr-policy-add``. Its action and next hops are two resources'
business: :class:`RouterPolicy` sets them when it creates a policy and
leaves them alone after (a chain's declaration), :class:`PolicyHops` sets
only them (the watcher, as a chain's functions come and go)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.naming import in_range, ovn_name
from ..ovsdb.connection import NB_SCHEMA
from ..ovsdb.fields import Field
from ..ovsdb.operations import set_mutations
from ..ovsdb.resource import Parent, Resource
from .nb_common import check_maps, external_ids_field, required_name

ACTIONS = ("allow", "drop", "reroute")


def _hops(item, where):
    hops = []
    for index, value in enumerate(item.get("nexthops") or []):
        hops.append(str(addressing.parse_ip(value, "%s.nexthops[%d]" % (where, index))))
    item["nexthops"] = sorted(set(hops))
    action = item.get("action")
    if action not in ACTIONS:
        raise ValidationError("%s.action: %r is not one of %s" % (where, action, ", ".join(ACTIONS)))
    if (action == "reroute") != bool(hops):
        raise ValidationError("%s.nexthops: a reroute needs next hops, and only a reroute takes them" % where)


class RouterPolicy(Resource):
    """A policy. With ``hops`` false (a declaration), its action and next
    hops are written when it is created and left alone after; with
    ``hops`` true (whoever keeps the next hops current), they are managed
    like any other column."""

    name = "router_policy"
    schema = NB_SCHEMA
    table = "Logical_Router_Policy"
    tables = ("Logical_Router", "Logical_Router_Policy")
    identity = ("router", "priority", "match")
    parent = Parent("router", "Logical_Router", "policies", "router", ovn_name)
    base_fields = (
        Field("priority", default=0),
        Field("match", default=""),
        Field("options", kind="map"),
        external_ids_field(),
    )
    hop_fields = (
        Field("action", default="drop"),
        Field("nexthops", kind="set"),
    )

    def __init__(self, hops=False):
        self.hops = hops
        self.fields = self.base_fields + (self.hop_fields if hops else ())

    def validate(self, item, where, state):
        for option in ("router", "priority", "match"):
            if item.get(option) in (None, ""):
                raise ValidationError("%s.%s: is required" % (where, option))
        in_range(item["priority"], 0, 32767, where + ".priority")
        check_maps(item, where, ("options", "external_ids"))
        if state != "deleted":
            _hops(item, where)
        return item

    def make_current(self, row, parent_row, view):
        current = super(RouterPolicy, self).make_current(row, parent_row, view)
        if not self.hops:
            current.cols[(self.table, "action")] = row.action
        return current

    def wanted_cols(self, item, current, state):
        cols = super(RouterPolicy, self).wanted_cols(item, current, state)
        # a declaration's action is its fail mode: it applies while the
        # policy has no next hops, and leaves a reroute to its keeper
        if not self.hops and current is not None and current.cols[(self.table, "action")] != "reroute":
            cols[(self.table, "action")] = item["action"]
        return cols

    def create_ops(self, item, cols, parent_row, view):
        if not self.hops:
            cols = dict(cols)
            cols[(self.table, "action")] = item["action"]
            cols[(self.table, "nexthops")] = item["nexthops"]
        return super(RouterPolicy, self).create_ops(item, cols, parent_row, view)


class AddressSet(Resource):
    """An address set (``$name`` in a match). With ``addresses`` false (a
    declaration), its addresses are left to whoever keeps them current."""

    name = "address_set"
    schema = NB_SCHEMA
    table = "Address_Set"
    tables = ("Address_Set",)

    def __init__(self, addresses=False):
        self.addresses = addresses
        self.fields = (Field("name", default=""), external_ids_field()) + (
            (Field("addresses", kind="set"),) if addresses else ())

    def update_ops(self, current, cols, view):
        """Addresses added and removed as set mutations: a set of a
        thousand pods' addresses is not rewritten for one pod."""
        where = (self.table, "addresses")
        if not self.addresses:
            return super(AddressSet, self).update_ops(current, cols, view)
        want, have = set(cols[where]), set(current.cols.get(where) or [])
        ops = super(AddressSet, self).update_ops(current, dict((k, v) for k, v in cols.items() if k != where), view)
        return ops + set_mutations(self.table, current.rows[self.table], "addresses", have, want)

    def validate(self, item, where, state):
        required_name(item, where)
        check_maps(item, where, ("external_ids",))
        if state != "deleted" and "addresses" in item:
            item["addresses"] = sorted(set(
                str(addressing.parse_ip(a, "%s.addresses[%d]" % (where, i)))
                for i, a in enumerate(item.get("addresses") or [])))
        return item
