# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which database a virtual network lives in, and one plan across both.

A network's backend is ``ovn`` (a logical switch in the northbound
database) or ``ovs`` (a plain OVS bridge on the node). ``auto`` takes OVN
where the northbound database answers and holds the cluster topology, and
the local OVS otherwise; the reason for the choice is reported, so that an
operator sees why a network went where it did.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import Ovn4nfvError, ValidationError
from ..ovsdb.execution import CompositePlan, execute
from ..ovsdb.view import View
from .networks import BACKENDS, check_network, plan_networks
from .topology import read_topology


def check_items(config):
    """``config`` checked item by item, as (where, item) pairs; a network
    declared twice is refused."""
    items = [("config[%d]" % i, check_network(item, "config[%d]" % i)) for i, item in enumerate(config or [])]
    names = [item["name"] for _where, item in items]
    twice = sorted(set(n for n in names if names.count(n) > 1))
    if twice:
        raise ValidationError("config: networks declared twice: %s" % ", ".join(twice))
    return items


def wanted_backends(items):
    """The backends ``items`` ask for, ``auto`` included."""
    return set(item.get("backend", "auto") for _where, item in items) or {"auto"}


def choose_auto(databases, errors, remotes):
    """``(backend, reason)`` for ``auto``. ``databases`` maps a backend to
    its open database, ``errors`` to why it could not be opened, and
    ``remotes`` to its address, for the reason's text."""
    nb = databases.get("ovn")
    if nb is not None and nb.read(lambda idl: read_topology(View(idl)) is not None):
        return "ovn", "ovn: the northbound database at %s answers and holds the cluster topology" % (
            remotes["ovn"])
    if "ovs" in databases:
        return "ovs", "ovs: %s; the local OVS database at %s answers" % (
            errors.get("ovn") or "the northbound database holds no cluster topology", remotes["ovs"])
    raise Ovn4nfvError("backend auto: no backend answers. ovn: %s. ovs: %s" % (
        errors.get("ovn") or "no cluster topology", errors.get("ovs")))


def plan_by_backend(databases, errors, items, state, mode, auto, write, **options):
    """Plan ``items`` on each backend's database (and apply each plan when
    ``write``), then combine them. Returns ``(plan, {network: backend})``.
    ``options`` go to :func:`.networks.plan_networks`."""
    groups = {}
    for where, item in items:
        backend = item.get("backend") if item.get("backend") in BACKENDS else auto
        groups.setdefault(backend, []).append((where, item))
    if not items:
        groups = dict((b, []) for b in (databases if state == "gathered" else [auto]))
    combined, backends = CompositePlan("virtual_network"), {}
    for backend, group in sorted(groups.items()):
        if backend not in databases:
            raise Ovn4nfvError("backend %s: its database does not answer: %s" % (backend, errors.get(backend)))
        one = execute(databases[backend], lambda view, g=group, b=backend: plan_networks(
            view, g, mode, b, options.get("force", False), options.get("underlay_mtu"),
            options.get("datapath_type", "system")), write)
        combined.batch.plans.extend(one.batch.plans)
        combined.changes.extend(one.changes)
        combined.gathered.extend(one.gathered)
        backends.update((item["name"], backend) for _where, item in group)
    return combined, backends
