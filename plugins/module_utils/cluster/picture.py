# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster as a picture: the product's switches and routers, the nodes
(chassis) with the pods bound on them, and what the audit found, as a
Graphviz graph.

:func:`dot` reads the northbound and southbound and writes the graph in
Graphviz's DOT language, which is pure text and needs no library: it is
made where the databases are. :func:`render` lays it out with Graphviz
(through pygraphviz, its Python binding) into SVG, and :func:`page` wraps
that SVG in one self-contained HTML page; they run where the picture is
wanted (the Ansible controller). No coordinate is placed by hand: the
layout is Graphviz's ``dot``.

Graph node ids are stable names (``switch:<name>``, ``router:<name>``,
``chassis:<name>``, ``pod:<namespace>/<name>``, ``physnet:<name>``: the
physical network a provider network sits on) and each SVG group carries
its id as its title, so a reader (or a test) can find an object by name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ..common.marks import (
    K_BASELINE_SPEC, K_DEFAULT_DENY, K_INTERFACE, K_NAMESPACE, K_POD, OWNER_KEY, OWNER_VALUE, PICTURE_MARK, ROLE_GATEWAY,
    ROLE_JOIN, ROLE_ROUTER)
from ..ovsdb.connection import DEFAULT_NB_DB
from ..ovsdb.task_databases import nb_and_sb, read_both
from . import networks as vn
from .pod_addresses import held_addresses, is_pod_port
from .topology import role_of

NB_TABLES = ("Logical_Switch", "Logical_Switch_Port", "Logical_Router", "Logical_Router_Port", "Port_Group", "ACL")
SB_TABLES = ("Chassis", "Encap", "Port_Binding")
FOUND = "#c62828"           # an object a finding names
ISOLATED = "#6a1b9a"        # a pod's interface a policy isolates
COLOURS = {"network": "#e3f2fd", "join": "#f3e5f5", "router": "#fff3e0", "gateway": "#ffe0b2",
           "other": "#eceff1", "pod": "#e8f5e9", "chassis": "#fafafa", "physnet": "#e0f2f1"}


def quote(text):
    """A DOT string: double-quoted, with its quotes and backslashes escaped."""
    return '"%s"' % str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _owned(row):
    return row.external_ids.get(OWNER_KEY) == OWNER_VALUE


def _node(ident, label, kind, marks, shape="box"):
    found = marks.get(ident)
    attrs = {"label": label, "shape": shape, "style": "filled,rounded" if shape == "box" else "filled",
             "fillcolor": COLOURS[kind], "id": ident, "tooltip": "; ".join(found) if found else ident}
    if found:
        attrs.update(color=FOUND, penwidth="3", fontcolor=FOUND)
    return "  %s [%s];" % (quote(ident), ", ".join("%s=%s" % (k, quote(v)) for k, v in sorted(attrs.items())))


def _edge(a, b, label="", style="solid", colour=None):
    extra = ", color=%s, fontcolor=%s, penwidth=3" % (quote(colour), quote(colour)) if colour else ""
    return "  %s -> %s [label=%s, style=%s, dir=none%s];" % (quote(a), quote(b), quote(label), style, extra)


def _switch_kind(row, networks):
    if row.name in networks:
        return "network"
    return "join" if role_of(row) == ROLE_JOIN else "other"


def _marks(nb, findings):
    """``{graph node id: [finding lines]}``: a finding's objects are ports
    (marked on their pod), switches, routers or chassis."""
    pod_of = dict((row.name, "pod:%s/%s" % (row.external_ids.get(K_NAMESPACE), row.external_ids.get(K_POD)))
                  for row in nb.rows("Logical_Switch_Port") if is_pod_port(row))
    out = {}
    for found in findings or ():
        line = "%s: %s" % (found.get("class"), found.get("message"))
        for name in found.get("objects") or ():
            for ident in (pod_of.get(name), "switch:" + name, "router:" + name, "chassis:" + name):
                if ident:
                    out.setdefault(ident, []).append(line)
    return out


def _isolated(nb):
    """``{switch port name: [directions]}`` of the interfaces some tenant's
    policy isolates: the members of the networks' default-deny groups."""
    out = {}
    for row in nb.rows("Port_Group"):
        direction = row.external_ids.get(K_DEFAULT_DENY) if _owned(row) else None
        if direction:
            for port in row.ports:
                out.setdefault(port.name, []).append(direction)
    return dict((name, sorted(directions)) for name, directions in out.items())


def _baseline_rules(nb):
    """``{switch name: number of the operator's baseline rules on it}``."""
    out = {}
    for row in nb.rows("Logical_Switch"):
        count = sum(1 for acl in row.acls if _owned(acl) and acl.external_ids.get(K_BASELINE_SPEC))
        if count:
            out[row.name] = count
    return out


def _chassis_of(sb):
    """``({chassis name: host}, {logical port: chassis name})``."""
    if sb is None:
        return {}, {}
    hosts = dict((row.name, (row.hostname or row.name, ", ".join(sorted(e.ip for e in row.encaps))))
                 for row in sb.rows("Chassis"))
    bound = {}
    for row in sb.rows("Port_Binding"):
        where = row.chassis[0] if isinstance(row.chassis, list) and row.chassis else row.chassis
        if where:
            bound[row.logical_port] = where.name
    return hosts, bound


def dot(nb, sb=None, findings=(), title="ovn4nfv.k8s"):
    """The cluster as DOT text: each owned switch (a network with its
    subnet and gateway, the join switch, a gateway's external switch),
    each owned router (the distributed router, each gateway router and the
    chassis it is pinned on), each chassis as a box holding the pods bound
    on it, and each pod's interfaces as edges to their networks, labelled
    with the interface, IP and MAC. Objects a finding names are drawn red,
    the finding in their tooltip. An interface a tenant's policy isolates
    is a bold purple edge that says in which directions; a network the
    operator's baseline guards says how many rules do."""
    networks = vn.read_network_settings(nb)
    isolated, guarded = _isolated(nb), _baseline_rules(nb)
    marks = _marks(nb, findings)
    hosts, bound = _chassis_of(sb)
    lines = ["graph_placeholder", "  graph [rankdir=TB, fontname=Helvetica, label=%s, labelloc=t, "
             "newrank=true, nodesep=0.4, ranksep=0.7];" % quote(title),
             "  node [fontname=Helvetica, fontsize=11];", "  edge [fontname=Helvetica, fontsize=9];"]
    switches = sorted((row for row in nb.rows("Logical_Switch") if _owned(row)), key=lambda r: r.name)
    routers = sorted((row for row in nb.rows("Logical_Router") if _owned(row)), key=lambda r: r.name)
    router_of_port = dict((port.name, router) for router in routers for port in router.ports)
    for row in switches:
        network = networks.get(row.name)
        label = "%s\n%s" % (row.name, network.subnet) if network else row.name
        if network and network.gateway:
            label += "\ngateway %s" % network.gateway
        if guarded.get(row.name):
            label += "\nbaseline: %d rule%s" % (guarded[row.name], "" if guarded[row.name] == 1 else "s")
        lines.append(_node("switch:" + row.name, label, _switch_kind(row, networks), marks))
        if network and network.physnet:
            # a provider network hangs off its physical network, not a router
            lines.append(_edge("switch:" + row.name, "physnet:" + network.physnet,
                               "VLAN %d" % network.vlan if network.vlan else "untagged"))
    for physnet in sorted(set(n.physnet for n in networks.values() if n.physnet)):
        lines.append(_node("physnet:" + physnet, "%s\nphysical network" % physnet, "physnet", marks))
    for row in routers:
        role = role_of(row)
        label = "%s\n%s" % (row.name, {ROLE_ROUTER: "distributed router", ROLE_GATEWAY: "gateway router"}.get(
            role, "router"))
        lines.append(_node("router:" + row.name, label, "gateway" if role == ROLE_GATEWAY else "router", marks,
                           shape="ellipse"))
        pinned = row.options.get("chassis")
        if pinned:
            lines.append(_edge("router:" + row.name, "chassis:" + pinned, "pinned on", "dashed"))
    for row in switches:
        for port in sorted(row.ports, key=lambda p: p.name):
            peer = router_of_port.get(port.options.get("router-port")) if port.type == "router" else None
            if peer is not None:      # drawn top down: the distributed router, networks, gateways, outside
                down = role_of(peer) != ROLE_GATEWAY or role_of(row) != ROLE_JOIN
                ends = ("router:" + peer.name, "switch:" + row.name)
                lines.append(_edge(*(ends if down else ends[::-1])))
    pods = {}
    for row in switches:
        for port in row.ports:
            if is_pod_port(port):
                ident = "pod:%s/%s" % (port.external_ids.get(K_NAMESPACE), port.external_ids.get(K_POD))
                pods.setdefault(ident, []).append((row.name, port))
    on = {}
    for ident, ports in sorted(pods.items()):
        chassis = sorted(set(bound[p.name] for _s, p in ports if p.name in bound))
        on.setdefault(chassis[0] if chassis else None, []).append(ident)
        for switch, port in sorted(ports, key=lambda item: item[1].name):
            mac, ips = held_addresses(port)
            label = "%s %s\n%s" % (port.external_ids.get(K_INTERFACE), " ".join(str(ip) for ip in ips), mac or "")
            if port.name in isolated:
                label += "\nisolated: %s" % ", ".join(isolated[port.name])
            lines.append(_edge("switch:" + switch, ident, label, colour=ISOLATED if port.name in isolated else None))
    for name in sorted(set(hosts) | set(k for k in on if k)):
        host, encaps = hosts.get(name, (name, ""))
        lines.append("  subgraph %s {" % quote("cluster_" + name))
        lines.append("    label=%s; style=rounded; color=\"#90a4ae\";" % quote("node %s (chassis %s)\n%s" % (
            host, name, encaps)))
        lines.append(_node("chassis:" + name, "%s\n%s" % (host, encaps), "chassis", marks, shape="component"))
        lines.extend(_pod_nodes(on.get(name, []), pods, marks))
        lines.append("  }")
    lines.extend(_pod_nodes(on.get(None, []), pods, marks))
    lines[0] = "digraph %s {" % quote(title)
    return "\n".join(lines + ["}"]) + "\n"


def objects(source):
    """The graph node ids DOT ``source`` declares (each object drawn)."""
    return sorted(set(re.findall(r'^\s+"((?:switch|router|chassis|pod|physnet):[^"]*)" \[', source, re.M)))


def _pod_nodes(idents, pods, marks):
    return [_node(ident, ident[len("pod:"):], "pod", marks) for ident in sorted(idents) if ident in pods]


def digest(source, title, lines):
    """What a picture shows, as a mark it carries: the DOT source, the
    title and the audit's lines."""
    import hashlib
    text = json.dumps([source, title, list(lines)], sort_keys=True)
    return PICTURE_MARK + " sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def render(source, mark=""):
    """The SVG of DOT ``source``, laid out by Graphviz's ``dot``, carrying
    ``mark`` (:func:`digest`) in a comment."""
    import pygraphviz
    graph = pygraphviz.AGraph(string=source)
    svg = graph.draw(format="svg", prog="dot").decode("utf-8")
    return svg.replace("<svg", "<!-- %s -->\n<svg" % mark, 1) if mark else svg


def page(svg, title, lines=()):
    """One self-contained HTML page: the picture, and the audit's lines."""
    import html
    body = svg[svg.index("<!-- " + PICTURE_MARK):] if "<!-- " + PICTURE_MARK in svg else svg[svg.index("<svg"):]
    found = "".join("<li class=\"found\">%s</li>" % html.escape(line) for line in lines) or "<li>nothing</li>"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>"
            "<style>body{font-family:Helvetica,sans-serif;margin:1em}svg{max-width:100%%;height:auto}"
            "li.found{color:#c62828}</style></head>\n<body><h1>%s</h1>\n%s\n<h2>What the audit found</h2>"
            "<ul id=\"findings\">%s</ul></body></html>\n" % (html.escape(title), html.escape(title), body, found))


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _write(path, text):
    """Write ``text`` to ``path`` whole: a reader never sees half a file."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory)
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.rename(path + ".tmp", path)


def run_picture(params, check_mode=False):
    """``network_picture``'s task, as a result dict: the cluster as DOT
    text, read from the northbound in ``db`` and the southbound in
    ``sb_db`` (or given as ``source``), and with ``dest`` laid out by
    Graphviz into an SVG and an HTML page there, written only when they
    differ (in check mode: said, not written). Without pygraphviz, where a
    layout is needed, ImportError names the library to install."""
    source = params["source"]
    if source is None:
        params = dict(params, db=params["db"] or DEFAULT_NB_DB)
        with nb_and_sb(params, NB_TABLES, SB_TABLES) as (nb, sb):
            source = read_both(nb, sb, lambda nb_view, sb_view: dot(
                nb_view, sb_view, params["findings"], params["title"]))
    result = dict(changed=False, dot=source, objects=objects(source), paths=[])
    if params["dest"]:
        # Graphviz lays the same source out the same, but may write its
        # groups in another order: the files record the source they show,
        # and are made again only when it differs
        mark = digest(source, params["title"], params["lines"] or [])
        paths = [os.path.join(params["dest"], name) for name in ("topology.html", "topology.svg")]
        result["paths"] = paths
        if any(mark not in (_read(path) or "") for path in paths):
            result["changed"] = True
            try:
                svg = render(source, mark)
            except ImportError:
                raise ImportError("pygraphviz (Debian: python3-pygraphviz)")
            if not check_mode:
                _write(paths[1], svg)
                _write(paths[0], page(svg, params["title"], params["lines"] or []))
    return result
