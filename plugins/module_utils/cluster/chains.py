# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Network function chains: traffic from a source network to a destination
network through an ordered list of network functions, as logical router
policies on the distributed router (route-based chaining, as Akraino ICN's
Nodus did it).

For functions ``f0 .. fn-1``, each with a left and a right interface on a
virtual network, the chain is ``2n`` policies of the chain's priority:

* forward hop ``i``: what enters the router from the source network (hop
  0) or from ``f(i-1)``'s right network, from the source (its subnet, or
  the address set of the pods the chain's source selector picks) to the
  destination prefixes, is rerouted to ``fi``'s left addresses;
* reverse hop ``i``: the answers, from the destination prefixes to the
  source, entering from the destination network (hop 0) or from
  ``f(n-i)``'s left network, are rerouted to ``f(n-1-i)``'s right addresses.

Several ready pods of one function are ECMP next hops. A policy whose
function has none drops (the chain fails closed) or, when the chain says
``fail_open``, allows (traffic goes straight). :func:`plan_chains` declares
the policies (for the module); :func:`plan_hops` keeps their next hops and
the source address set current (for the watcher), and gives the functions'
chain interfaces MAC-only port security, so that they may forward traffic
that is not theirs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ..common import addressing
from ..common.errors import ValidationError
from ..common.marks import (
    CHAIN_ADDRESS_SET_PREFIX, K_CHAIN, K_CHAIN_FAIL, K_CHAIN_FUNCTION, K_CHAIN_HELD, K_CHAIN_HOP, K_CHAIN_SELECTOR,
    K_CHAIN_SPEC, OWNER_KEY, OWNER_VALUE)
from ..common.naming import interface_name, in_range
from ..common.selectors import label_map
from ..ovsdb.declared import CompositeKind, over_current, plan_declared
from ..ovsdb.execution import Batch
from ..ovsdb.plan import plan, validate_config
from ..resources.nb_policies import AddressSet, RouterPolicy
from ..resources.nb_switches import LogicalSwitchPort
from . import networks as vn
from .pod_addresses import held_addresses, port_security
from .topology import require_topology

TABLES = ("Logical_Router_Policy", "Address_Set")
DEFAULT_PRIORITY = 1000
OPTIONS = ("name", "source_network", "destination_network", "destination_prefixes", "source_selector",
           "namespace", "functions", "fail_open", "priority")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?\Z")


def address_set_name(chain):
    """``$ovn4nfv_chain_<name>``: OVN's names take no ``-``; chain names no ``_``."""
    return CHAIN_ADDRESS_SET_PREFIX + chain.replace("-", "_")


def _side(value, where):
    if not isinstance(value, dict) or set(value) - {"interface", "network"} or len(value) != 2:
        raise ValidationError("%s: give its interface and network, and nothing else" % where)
    interface_name(value["interface"], where + ".interface")
    return {"interface": value["interface"], "network": value["network"]}


def check_chain(item, where):
    """Check and normalise one chain without the database."""
    unknown = sorted(set(item) - set(OPTIONS))
    if unknown:
        raise ValidationError("%s: unknown options %s" % (where, ", ".join(unknown)))
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError("%s.name: %r: lower-case letters, digits and '-', at most 50" % (where, name))
    out = {"name": name}
    for option in ("source_network", "destination_network"):
        if not item.get(option):
            raise ValidationError("%s.%s: is required" % (where, option))
        out[option] = item[option]
    if out["source_network"] == out["destination_network"]:
        raise ValidationError("%s.destination_network: %r is the source network too" % (
            where, out["destination_network"]))
    out["destination_prefixes"] = [str(addressing.parse_cidr(p, "%s.destination_prefixes[%d]" % (where, i), 4))
                                   for i, p in enumerate(item.get("destination_prefixes") or [])]
    out["namespace"] = item.get("namespace") or "default"
    if item.get("source_selector") is not None:
        out["source_selector"] = label_map(item["source_selector"], where + ".source_selector")
    functions = item.get("functions")
    if not isinstance(functions, list) or not functions:
        raise ValidationError("%s.functions: a chain needs at least one function" % where)
    out["functions"] = []
    for index, function in enumerate(functions):
        field = "%s.functions[%d]" % (where, index)
        if not isinstance(function, dict):
            raise ValidationError("%s: %r is not a mapping" % (field, function))
        extra = sorted(set(function) - {"selector", "left", "right"})
        if extra:
            raise ValidationError("%s: unknown options %s" % (field, ", ".join(extra)))
        out["functions"].append({"selector": label_map(function.get("selector"), field + ".selector"),
                                 "left": _side(function.get("left"), field + ".left"),
                                 "right": _side(function.get("right"), field + ".right")})
    out["fail_open"] = bool(item.get("fail_open", False))
    out["priority"] = in_range(item.get("priority", DEFAULT_PRIORITY), 1, 32766, where + ".priority")
    return out


def _hops(chain):
    """``[(hop label, entering network, function, side)]`` in order."""
    functions = chain["functions"]
    out = []
    for i, function in enumerate(functions):
        entering = chain["source_network"] if i == 0 else functions[i - 1]["right"]["network"]
        out.append(("forward/%d" % i, entering, function, "left"))
    for i, function in enumerate(reversed(functions)):
        entering = chain["destination_network"] if i == 0 else functions[len(functions) - i]["left"]["network"]
        out.append(("reverse/%d" % i, entering, function, "right"))
    return out


def chain_items(chain, networks, topology, where="config"):
    """The policy items and the address-set item of one checked chain, after
    checking its networks against the NB's ``networks``."""
    for option in ("source_network", "destination_network"):
        if chain[option] not in networks:
            raise ValidationError("%s.%s: network %r does not exist" % (where, option, chain[option]))
    for index, function in enumerate(chain["functions"]):
        for side in ("left", "right"):
            if function[side]["network"] not in networks:
                raise ValidationError("%s.functions[%d].%s.network: network %r does not exist" % (
                    where, index, side, function[side]["network"]))
    for name in sorted(set([chain["source_network"], chain["destination_network"]] + [
            f[side]["network"] for f in chain["functions"] for side in ("left", "right")])):
        if networks[name].physnet:
            # a chain steers at the distributed router's ports: a provider
            # network's traffic never enters it, so nothing would be steered
            raise ValidationError("%s: network %s is a provider network (physnet %s), which the distributed router "
                                  "does not carry: a chain cannot steer or stop its traffic" % (
                                      where, name, networks[name].physnet))
    source = networks[chain["source_network"]]
    prefixes = chain["destination_prefixes"] or [str(networks[chain["destination_network"]].subnet)]
    dst = "{%s}" % ", ".join(prefixes)
    src = "$" + address_set_name(chain["name"]) if chain.get("source_selector") else str(source.subnet)
    action = "allow" if chain["fail_open"] else "drop"
    items = []
    for hop, entering, function, side in _hops(chain):
        port = networks[entering].router_port
        if hop.startswith("forward"):
            match = 'inport == "%s" && ip4.src == %s && ip4.dst == %s' % (port, src, dst)
        else:
            match = 'inport == "%s" && ip4.src == %s && ip4.dst == %s' % (port, dst, src)
        ids = {K_CHAIN: chain["name"], K_CHAIN_HOP: hop, K_CHAIN_FAIL: "open" if chain["fail_open"] else "closed",
               K_CHAIN_SELECTOR: json.dumps(dict(function[side], selector=function["selector"],
                                                 namespace=chain["namespace"]), sort_keys=True)}
        if hop == "forward/0":
            ids[K_CHAIN_SPEC] = json.dumps(chain, sort_keys=True)
        items.append({"router": topology.router, "priority": chain["priority"], "match": match,
                      "action": action, "external_ids": ids})
    sets = []
    if chain.get("source_selector"):
        sets.append({"name": address_set_name(chain["name"]), "external_ids": {
            K_CHAIN: chain["name"], K_CHAIN_SELECTOR: json.dumps({
                "selector": chain["source_selector"], "namespace": chain["namespace"],
                "network": chain["source_network"]}, sort_keys=True)}})
    return items, sets


def chain_of(current, table):
    ids = current.cols.get((table, "external_ids")) or {}
    return ids.get(K_CHAIN) if ids.get(OWNER_KEY) == OWNER_VALUE else None


def read_chains(view):
    """``{name: chain}`` as declared, from the chains' own records."""
    out = {}
    for row in view.rows("Logical_Router_Policy"):
        ids = row.external_ids
        if ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(K_CHAIN_SPEC):
            try:
                out[ids[K_CHAIN]] = json.loads(ids[K_CHAIN_SPEC])
            except ValueError:
                raise ValidationError("policy %s of chain %s has a damaged record; delete the chain" % (
                    row.uuid, ids.get(K_CHAIN)))
    return out


class Chains(CompositeKind):
    """Network function chains: every chain's policies are made exactly what
    its declaration says, in one transaction."""

    name = "network_chain"
    noun = "chain"

    def read(self, view):
        return read_chains(view)

    def complete(self, item, current, merge, where, view):
        return check_chain(over_current(item, current, merge), where)

    def realise(self, view, declaration, result):
        touched = declaration.record(result)
        if not touched:
            return
        policies, sets, problems = [], [], []
        if declaration.declared:
            topology = require_topology(view)
            networks = vn.read_network_settings(view)
            for name, (where, chain) in sorted(declaration.declared.items()):
                try:
                    p, s = chain_items(chain, networks, topology, where)
                except ValidationError as exc:
                    problems.extend(exc.problems)
                    continue
                policies += p
                sets += s
            if problems:
                raise ValidationError(problems)
        for resource, wanted in ((RouterPolicy(), policies), (AddressSet(), sets)):
            checked = validate_config(resource, wanted, "replaced")
            result.batch.add(plan(resource, checked, "overridden", view,
                                  scope=lambda cur, r=resource: chain_of(cur, r.table) in touched))


def plan_chains(view, items, state):
    """The :class:`~..ovsdb.execution.CompositePlan` of ``network_chain``
    (:class:`Chains`): ``items`` are (where, raw item) pairs."""
    return plan_declared(Chains(), view, items, state)


def _candidates(view, function, resolve):
    """The ports of the ready pods a function (or source) selector picks,
    on its network, with the ones on another network apart:
    ``(rows, mismatched)``."""
    rows, mismatched = [], []
    network = vn.read_network(view, function["network"])
    for pod, row in resolve(function["namespace"], function["selector"], function.get("interface")):
        _mac, ips = held_addresses(row)
        if network is not None and any(ip in network.subnet for ip in ips):
            rows.append((pod, row, [ip for ip in ips if ip.version == 4]))
        else:
            mismatched.append((pod, row))
    return rows, mismatched


def plan_hops(view, name, resolve):
    """What the watcher makes of chain ``name`` now: each policy's action
    and next hops, the source address set's addresses, and the chain
    interfaces' MAC-only port security. ``resolve(namespace, selector,
    interface)`` yields ``(pod, port row)`` of the ready pods the selector
    picks (with ``interface`` None: every port of each). Returns
    ``(Batch, mismatched)``: mismatched are ``(pod, port row, message)``
    of selected pods whose interface is not on the chain's network."""
    policies, sets, mismatched, functions = [], [], [], {}
    for row in view.rows("Logical_Router_Policy"):
        ids = row.external_ids
        if ids.get(OWNER_KEY) != OWNER_VALUE or ids.get(K_CHAIN) != name:
            continue
        function = json.loads(ids[K_CHAIN_SELECTOR])
        good, bad = _candidates(view, function, resolve)
        for pod, port in bad:
            mismatched.append((pod, port, "interface %s is not on network %s, which chain %s names" % (
                function["interface"], function["network"], name)))
        hops = sorted(set(str(ip) for _pod, _row, ips in good for ip in ips))
        action = "reroute" if hops else ("allow" if ids.get(K_CHAIN_FAIL) == "open" else "drop")
        router = view.referrers("Logical_Router", "policies").get(row.uuid)
        if not router:
            continue
        policies.append({"router": router[0].name, "priority": row.priority, "match": row.match,
                         "action": action, "nexthops": hops})
        for _pod, port, _ips in good:
            functions[port.name] = port
    for row in view.rows("Address_Set"):
        ids = row.external_ids
        if ids.get(OWNER_KEY) == OWNER_VALUE and ids.get(K_CHAIN) == name:
            source = json.loads(ids[K_CHAIN_SELECTOR])
            good, _bad = _candidates(view, dict(source, interface=None), resolve)
            sets.append({"name": row.name, "addresses": sorted(set(
                str(ip) for _pod, _row, ips in good for ip in ips))})
    batch = Batch()
    for resource, items in ((RouterPolicy(hops=True), policies), (AddressSet(addresses=True), sets)):
        if items:
            batch.add(plan(resource, validate_config(resource, items, "merged"), "merged", view))
    batch.add(_plan_function_ports(view, name, functions))
    return batch, mismatched


def _plan_function_ports(view, name, functions):
    """Mark the chain's function ports (MAC-only port security) and unmark
    those that are no longer (full port security again)."""
    items = []
    for row in view.rows("Logical_Switch_Port"):
        marked = row.external_ids.get(K_CHAIN_FUNCTION)
        chains = set(marked.split(",")) if marked else set()
        wanted = (chains | {name}) if row.name in functions else (chains - {name})
        if wanted == chains:
            continue
        mark = ",".join(sorted(wanted)) or None
        switch = view.referrers("Logical_Switch", "ports").get(row.uuid)
        if not switch:
            continue
        full = port_security(row, mac_only=False) or []
        items.append({"name": row.name, "switch": switch[0].name,
                      "external_ids": {K_CHAIN_FUNCTION: mark, K_CHAIN_HELD: full[0] if mark and full else None},
                      "port_security": port_security(row, mac_only=bool(mark)) or []})
    resource = LogicalSwitchPort()
    return plan(resource, validate_config(resource, items, "merged"), "merged", view)
