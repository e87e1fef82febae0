# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The logical path of one link, by OVN's own tracer.

:func:`microflow` builds, from the southbound database, the packet a pod
interface would send to an address: its port, MAC and address as OVN binds
them, and the next hop's MAC (the destination's on the same network, its
gateway's otherwise). :func:`run` hands it to ``ovn-trace`` (``--detailed``)
against the live southbound database, and :func:`parse` reads the trace:
the hops (each datapath the packet enters, switch or router, with the
stages that acted on it: routes, policies, NAT, load balancers, ACLs) and a
verdict: ``delivered`` (to a pod's port, or out of OVN through a localnet
port), ``dropped`` (and the datapath and stage that dropped it), or
``unresolved`` (a router that has no MAC for the next hop and asks for it).

A trace follows logical flows only: a link that traces ``delivered`` but
carries nothing is broken below OVN (a tunnel, a node's OVS, a veth); the
verdict names the chassis the destination port is bound on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import subprocess

from ..common import addressing
from ..common.errors import Ovn4nfvError, ValidationError
from ..common.naming import in_range, interface_name, ovn_name
from ..ovsdb.connection import SB_SCHEMA
from ..ovsdb.task_databases import opened
from ..ovsdb.view import View
from .pod_addresses import binding_entries

TABLES = ("Port_Binding", "Datapath_Binding", "Chassis")
PROTOCOLS = ("icmp", "tcp", "udp")
# stages worth naming in a hop, by the kind of thing they do
_EVENTS = (
    ("policy", re.compile(r"^lr_in_policy$")),
    ("route", re.compile(r"^lr_in_ip_routing$")),
    ("nat", re.compile(r"^lr_(in_dnat|in_unsnat|out_snat|out_undnat)$")),
    ("load balancer", re.compile(r"^l[sr]_in_(lb|dnat)$")),
    # before and after the load balancer (from-lport with apply-after-lb), and to-lport
    ("acl", re.compile(r"^ls_(in|out)_acl(_after_lb)?(_eval)?$")),
)
# a logged ACL's name, in its flow's actions: the product's say which
# policy, rule or network's default deny
_ACL_NAME = re.compile(r'log\(name="([^"]+)"')
_HEADER = re.compile(r'^(ingress|egress)\(dp="([^"]+)", inport="([^"]*)"(?:, outport="([^"]*)")?\)$')
_STAGE = re.compile(r"^\s*\d+\. (\w+) \([^)]*\): (.*), priority (\d+), uuid \w+$")
_OUTPUT = re.compile(r'^\s*/\* output to "([^"]+)", type "([^"]*)" \*/$')
# output to a port of these types leaves the logical path here
_DELIVERING = ("", "localnet", "l2gateway", "virtual", "external")
# what a packet for the fabric is addressed to on a provider network (its
# router's MAC is not OVN's to know): a locally administered one no port holds
FABRIC_MAC = "02:00:00:00:00:01"


def _port_of(value, where):
    """A trace's end given as a port: ``{port}`` or ``{pod, interface[,
    namespace]}`` -> the logical port's name."""
    if value.get("port"):
        return ovn_name(value["port"], where + ".port")
    interface_name(value["interface"], where + ".interface")
    return "%s_%s_%s" % (value.get("namespace") or "default", value["pod"], value["interface"])


def check_link(source, destination, protocol, port, where=""):
    """The request, checked before anything is read."""
    problems = []
    for name, end, forms in (("source", source, ("port", "pod", "address")),
                             ("destination", destination, ("port", "pod", "address"))):
        if not isinstance(end, dict) or sum(1 for f in forms if end.get(f)) != 1:
            problems.append("%s%s: give a port, a pod and its interface, or an address" % (where, name))
        elif end.get("pod") and not end.get("interface"):
            problems.append("%s%s.interface: a pod's end names its interface" % (where, name))
        elif name == "source" and end.get("address") and not end.get("network"):
            problems.append("%s%s.network: a source address is looked up on its network" % (where, name))
    if protocol not in PROTOCOLS:
        problems.append("%sprotocol: %r is not one of %s" % (where, protocol, ", ".join(PROTOCOLS)))
    elif protocol == "icmp" and port is not None:
        problems.append("%sport: icmp has no port" % where)
    elif protocol != "icmp":
        try:
            in_range(port, 1, 65535, where + "port")
        except ValidationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ValidationError(problems)


def _bindings(view):
    return dict((row.logical_port, row) for row in view.rows("Port_Binding"))


def _addresses(row):
    """``(mac, [IPAddress, ...])`` of a Port_Binding: the first of its
    :func:`binding_entries` with an address (a dynamic port's are in its
    port security, which the watcher sets to what OVN assigned; a chain
    function's in what it gave up). Link-local addresses come last."""
    for entry in binding_entries(row.mac, row.port_security, row.external_ids):
        words = entry.split()
        ips = [addressing.parse_ip(w.split("/")[0], "mac") for w in words[1:]]
        if ips:
            return words[0], sorted(ips, key=lambda ip: ip.is_link_local())
    return None, []


def _uuid(row):
    return getattr(row, "uuid", None)


def _datapath_name(row):
    datapath = row.datapath
    return datapath.external_ids.get("name") if datapath is not None else None


def _chassis(row):
    chassis = row.chassis[0] if isinstance(row.chassis, list) and row.chassis else row.chassis
    return getattr(chassis, "name", None) if chassis else None


def microflow(view, source, destination, protocol="icmp", port=None):
    """The source switch and the ``ovn-trace`` microflow for the request;
    raises :class:`ValidationError` naming what the database does not have."""
    bindings = _bindings(view)
    if source.get("address"):
        ip = addressing.parse_ip(source["address"], "source.address")
        found = [row for row in bindings.values()
                 if _datapath_name(row) == source["network"] and ip in _addresses(row)[1]]
        if not found:
            raise ValidationError("source: no port on network %s holds %s" % (source["network"], ip))
        src = found[0]
    else:
        name = _port_of(source, "source")
        src = bindings.get(name)
        if src is None:
            raise ValidationError("source: port %s is not bound in the southbound database" % name)
    mac, ips = _addresses(src)
    if mac is None or not ips:
        raise ValidationError("source: port %s has no address yet" % src.logical_port)
    switch = _datapath_name(src)
    dst_row = None
    if destination.get("address"):
        dst_ip = addressing.parse_ip(destination["address"], "destination.address")
    else:
        name = _port_of(destination, "destination")
        dst_row = bindings.get(name)
        if dst_row is None or not _addresses(dst_row)[1]:
            raise ValidationError("destination: port %s is not bound, or has no address" % name)
        dst_ip = _addresses(dst_row)[1][0]
    src_ip = next((a for a in ips if a.version == dst_ip.version), None)
    if src_ip is None:
        raise ValidationError("source: port %s has no IPv%d address" % (src.logical_port, dst_ip.version))
    # the next hop: the destination itself on the same network, else the gateway
    here = _uuid(src.datapath)
    gateway, local = None, True
    for row in bindings.values():
        if _uuid(row.datapath) == here and row.type == "patch" and row.options.get("peer"):
            peer = bindings.get(row.options["peer"])
            for entry in (peer.mac if peer is not None else []):
                words = entry.split()
                for word in (w for w in words[1:] if "/" in w):
                    network = addressing.parse_ip_interface(word, "mac")[1]
                    if src_ip in network:
                        gateway, local = words[0], dst_ip in network
    # a provider network: what no port of it holds is the fabric's, out of its localnet port
    fabric = gateway is None and any(_uuid(row.datapath) == here and row.type == "localnet"
                                     for row in bindings.values())
    if local or gateway is None:
        found = dst_row if dst_row is not None and _uuid(dst_row.datapath) == here else next(
            (row for row in bindings.values() if _uuid(row.datapath) == here and dst_ip in _addresses(row)[1]),
            None)
        if found is None and not fabric:
            raise ValidationError("destination: no port on network %s holds %s%s" % (
                switch, dst_ip, "" if gateway else ", and it has no gateway to route through"))
        eth_dst = _addresses(found)[0] if found is not None else FABRIC_MAC
    else:
        eth_dst = gateway
    family = "ip4" if dst_ip.version == 4 else "ip6"
    flow = ['inport == "%s"' % src.logical_port, "eth.src == %s" % mac, "eth.dst == %s" % eth_dst,
            "%s.src == %s" % (family, src_ip), "%s.dst == %s" % (family, dst_ip), "ip.ttl == 64"]
    if protocol == "icmp":
        flow.append("icmp4.type == 8" if family == "ip4" else "icmp6.type == 128")
    else:
        flow.append("%s.dst == %d" % (protocol, port))
    return {"switch": switch, "flow": " && ".join(flow), "source_port": src.logical_port,
            "source_ip": str(src_ip), "destination_ip": str(dst_ip)}


def run(remote, switch, flow, timeout=30, tls=None):
    """``ovn-trace --detailed`` against the southbound database ``remote``;
    its text. A follower of a RAFT cluster answers too (reading is all)."""
    args = ["ovn-trace", "--db=" + remote, "--no-leader-only", "--detailed"]
    for option, path in zip(("--private-key", "--certificate", "--ca-cert"), tls or ()):
        if path:
            args.append("%s=%s" % (option, path))
    try:
        done = subprocess.run(args + [switch, flow], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Ovn4nfvError("ovn-trace could not run: %s" % exc)
    if done.returncode != 0:
        raise Ovn4nfvError("ovn-trace failed (%d): %s" % (done.returncode, done.stderr.strip()[-2000:]))
    return done.stdout


def _refuses(actions):
    """Whether an ACL stage's actions refuse the packet: ``drop`` or
    ``reject``, or (a logged ACL, or a drop of a connection conntrack
    knows, which OVN writes as a commit that blocks it) a log that says so."""
    text = " ".join(actions)
    return any(a.startswith(("drop", "reject")) for a in actions) or "verdict=drop" in text or \
        "verdict=reject" in text or "ct_mark.blocked = 1" in text


def _event(stage, match, priority, actions):
    if priority == 0 or match == "1":
        return None
    for kind, pattern in _EVENTS:
        if pattern.match(stage):
            if kind == "load balancer" and not any("ct_lb" in a for a in actions):
                kind = "nat" if stage.startswith("lr_") else None
            if kind == "acl" and not _refuses(actions):
                return None
            if not kind:
                return None
            event = {"kind": kind, "stage": stage, "match": match,
                     "actions": [a for a in actions if not a.startswith("/*")]}
            named = _ACL_NAME.search(" ".join(actions)) if kind == "acl" else None
            if named:
                event["acl"] = named.group(1)
            return event
    return None


def parse(text, chassis_of=None):
    """The hops and the verdict of an ``ovn-trace --detailed`` text."""
    hops, stage, delivered, dropped, unresolved = [], None, None, None, None

    def close_stage():
        if stage is not None and hops:
            event = _event(*stage)
            if event is not None:
                hops[-1]["events"].append(event)
    lines = text.splitlines()
    for index, line in enumerate(lines):
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if re.match(r"^[a-z][a-z0-9_]*$", line.strip()) and following and set(following) == {"-"}:
            break           # a packet OVN makes in answer (an ARP request, an ICMP error): not the one traced
        header = _HEADER.match(line.strip())
        if header:
            close_stage()
            stage = None
            direction, datapath, inport, outport = header.groups()
            hops.append({"datapath": datapath, "direction": direction, "inport": inport,
                         "outport": outport, "type": None, "events": []})
            continue
        found = _STAGE.match(line)
        if found and hops:
            close_stage()
            name, match, priority = found.group(1), found.group(2), int(found.group(3))
            hops[-1]["type"] = hops[-1]["type"] or ("router" if name.startswith("lr_") else "switch")
            stage = (name, match, priority, [])
            continue
        words = line.strip()
        if not words or stage is None:
            continue
        stage[3].append(words.rstrip(";"))
        output = _OUTPUT.match(line)
        if output and output.group(2) in _DELIVERING and delivered is None:
            delivered = {"port": output.group(1), "type": output.group(2) or "vif",
                         "datapath": hops[-1]["datapath"]}
        elif words == "drop;" and dropped is None:
            dropped = {"datapath": hops[-1]["datapath"], "stage": stage[0], "match": stage[1]}
        elif words == "/* No MAC binding. */" and unresolved is None:
            unresolved = {"datapath": hops[-1]["datapath"], "stage": stage[0]}
    close_stage()
    if delivered is not None:
        chassis = (chassis_of or {}).get(delivered["port"])
        verdict, where = "delivered", "to %s %s on %s%s" % (
            "port" if delivered["type"] == "vif" else delivered["type"] + " port", delivered["port"],
            delivered["datapath"], (" (bound on %s)" % chassis) if chassis else "")
    elif unresolved is not None:
        verdict, where = "unresolved", "%s has no MAC for the next hop (%s asks for it)" % (
            unresolved["datapath"], unresolved["stage"])
    elif dropped is not None:
        verdict, where = "dropped", "by %s %s (%s)" % (dropped["datapath"], dropped["stage"], dropped["match"])
    else:
        last = hops[-1] if hops else None
        refused = [e for e in (last or {}).get("events", ()) if e["kind"] == "acl"]
        if refused:
            # a logged ACL drops without a drop action: its log says so
            acl = refused[-1]
            verdict, where = "dropped", "by %s %s%s (%s)" % (
                last["datapath"], acl["stage"], (" ACL %s" % acl["acl"]) if acl.get("acl") else "", acl["match"])
        else:
            verdict, where = "dropped", ("after %s: no stage output it" % last["datapath"]) if last else \
                "before the first stage: the source port matches no flow"
    return {"hops": hops, "verdict": verdict, "where": where}


def summary(result):
    """One readable line per hop, and the verdict."""
    lines = []
    for hop in result["hops"]:
        if hop["direction"] != "ingress":
            continue
        events = "".join("; %s %s" % (e["kind"], e["match"]) for e in hop["events"])
        lines.append("%s %s from %s%s" % (hop["type"] or "datapath", hop["datapath"], hop["inport"], events))
    lines.append("%s %s" % (result["verdict"], result["where"]))
    return lines


def trace(view, remote, source, destination, protocol="icmp", port=None, timeout=30, tls=None):
    """The whole trace of one link: the microflow, the hops, the verdict."""
    check_link(source, destination, protocol, port)
    flow = microflow(view, source, destination, protocol, port)
    text = run(remote, flow["switch"], flow["flow"], timeout, tls)
    chassis_of = dict((row.logical_port, _chassis(row)) for row in view.rows("Port_Binding"))
    result = parse(text, chassis_of)
    result.update(flow)
    result["lines"] = summary(result)
    return result


def _given(end):
    """The fields of one end of a task's request that it sets."""
    return dict((k, v) for k, v in (end or {}).items() if v is not None)


def run_trace(params, check_mode=False):
    """``network_trace``'s task, as a result dict: the request
    (``source``, ``destination``, ``protocol``, ``port``) checked before
    anything connects, then the southbound database in ``db`` read and the
    link traced (``timeout`` and the TLS files serve ovn-trace too). A
    read: check mode is the same run, and nothing is changed."""
    source, destination = _given(params["source"]), _given(params["destination"])
    check_link(source, destination, params["protocol"], params["port"])
    with opened(params, TABLES, SB_SCHEMA) as database:
        result = database.read(lambda idl: trace(
            View(idl), params["db"], source, destination, params["protocol"], params["port"], params["timeout"],
            (params["private_key"], params["certificate"], params["ca_cert"])))
    return dict(result, changed=False)
