# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster audit: what the Kubernetes API, the northbound and the
southbound say about the product's objects, correlated, as findings.

Each finding is data: a ``class``, a ``severity`` (``error``: traffic is
or will be wrong; ``warning``: something is left behind), the ``layer``
where it shows, the ``objects`` involved, a ``message``, and the
``repair`` the audit would make, or None when mending it is not the
product's to decide (which of two holders of one address keeps it?) or is
another part's job (the watcher makes a pod's missing port, and says why
it does not in the pod's Events).

The audit reads; :func:`plan_repair` is the one transaction on the
northbound that mends what the product owns: it deletes the ports of pods
that are gone, makes a running pod's missing port again with the
addresses the pod was told (its ``ovnIfaceList``), and makes a drifted
network what its records say. :func:`plan_sb_repair` is the one on the
southbound: it deletes the chassis of nodes that are gone. Classes that
need the API are skipped, and said so, when there is none; those that need
the southbound likewise; the stale chassis class also when the API lists
no nodes (a cluster always has some: an empty list is a reader that may
not see them, and no chassis is judged on it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import ValidationError
from ..common.marks import K_INTERFACE, K_NAMESPACE, K_POD, K_UID, NETWORK_KEY, OWNER_KEY, OWNER_VALUE
from ..ovsdb.execution import Batch, execute
from ..ovsdb.operations import Op
from ..ovsdb.plan import Change, Plan
from . import annotations, multi_policies, networks as vn, policy_audit, port_qos, provider_audit, security_audit, vms
from .pod_addresses import Pod, held_addresses, is_pod_port
from .pod_changes import pinned, served
from .pod_ports import plan_delete, plan_pod
from .topology import TABLES, role_of

# the topology's (a network's drift is planned as the network would be), and the policies'
NB_TABLES = TABLES + tuple(t for t in multi_policies.TABLES if t not in TABLES) + port_qos.TABLES
SB_TABLES = ("Port_Binding", "Chassis", "Chassis_Private", "Encap", "SB_Global")
LEAKED = "leaked_port"
MISSING = "missing_port"
DUPLICATE_IP = "duplicate_ip"
DUPLICATE_MAC = "duplicate_mac"
OUTSIDE = "address_outside_network"
UNBOUND = "port_not_bound"
ELSEWHERE = "port_bound_elsewhere"
GATEWAY = "gateway_on_missing_chassis"
DRIFT = "network_drift"
STALE = "stale_chassis"
CLASSES = (LEAKED, MISSING, DUPLICATE_IP, DUPLICATE_MAC, OUTSIDE, DRIFT) + security_audit.CLASSES + port_qos.CLASSES + \
    policy_audit.CLASSES + (UNBOUND, ELSEWHERE, GATEWAY, STALE) + provider_audit.CLASSES


def finding(kind, severity, layer, objects, message, repair=None):
    return {"class": kind, "severity": severity, "layer": layer, "objects": sorted(objects),
            "message": message, "repair": repair}


def pod_of(obj):
    """The audit's view of a pod object from the API: namespace, name, UID,
    node and annotations, and who its ports belong to (``owner``: the
    pod's own UID, or its VM's, :func:`.vms.owner_of`)."""
    meta = obj.get("metadata") or {}
    owner = vms.owner_of(meta)
    return {"namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
            "owner": owner.uid, "port_owner": [owner.namespace, owner.name], "running": vms.running(obj),
            "node": (obj.get("spec") or {}).get("nodeName"), "annotations": meta.get("annotations") or {}}


def vm_of(obj):
    """The audit's view of a KubeVirt VirtualMachine or VMI from the API
    (``obj``; None: they could not be listed): what keeps its VM's ports
    alive without a launcher. ``obj`` None stands for every VM."""
    meta = (obj or {}).get("metadata") or {}
    owner = vms.vm_owner(meta.get("namespace"), meta.get("name")) if obj is not None else None
    active = ((obj or {}).get("status") or {}).get("activePods") if (obj or {}).get("kind") == vms.VMI_KIND else None
    return {"namespace": meta.get("namespace"), "name": meta.get("name"), "uid": None, "node": None,
            "owner": owner.uid if owner else vms.VM_PREFIX, "annotations": {}, "vm": True,
            "active": sorted(active) if isinstance(active, dict) else []}


def _live(pods):
    """``{owner UID: pod}`` of ``pods``, a pod before a VM's own entry, and
    whether every VM is alive (they could not be listed)."""
    live = {}
    for pod in sorted(pods, key=lambda p: bool(p.get("vm"))):
        live.setdefault(pod["owner"], pod)
    return live, vms.VM_PREFIX in live


def _served(pods):
    """The pods the watcher serves: every pod but a VM's launcher that does
    not run or that its VMI does not name among its active pods."""
    active = set(uid for p in pods if p.get("vm") for uid in p.get("active", ()))
    return [p for p in pods if not p.get("vm") and (
        not vms.vm_of(p["port_owner"][1]) or (p.get("running") and p["uid"] in active))]


def _identity(pod):
    return Pod(pod["port_owner"][0], pod["port_owner"][1], pod["owner"])


def _ports(nb):
    return [row for row in nb.rows("Logical_Switch_Port") if is_pod_port(row)]


def _switch_of(nb):
    return dict((port.uuid, switch) for switch in nb.rows("Logical_Switch") for port in switch.ports)


def audit_pods(nb, pods):
    """Ports of pods that are gone, and requested interfaces with no port."""
    out = []
    live, every_vm = _live(pods)
    leaked = {}
    for row in _ports(nb):
        if every_vm and vms.vm_of(row.external_ids.get(K_POD)):
            continue            # its VM cannot be looked up: never judged gone on a guess
        if row.external_ids.get(K_UID) not in live:
            leaked.setdefault(row.external_ids.get(K_UID), []).append(row)
    for uid, rows in sorted(leaked.items()):
        ids = rows[0].external_ids
        vm = vms.vm_of(ids.get(K_POD))
        out.append(finding(LEAKED, "warning", "nb", [r.name for r in rows],
                           "VM %s/%s is gone (no VirtualMachine, VMI or launcher pod), its ports are not" % (
                               ids.get(K_NAMESPACE), vm) if vm else "pod %s/%s (uid %s) is gone, its ports are not" % (
                               ids.get(K_NAMESPACE), ids.get(K_POD), uid),
                           "delete the ports %s" % ", ".join(sorted(r.name for r in rows))))
    have = set((r.external_ids.get(K_UID), r.external_ids.get(K_INTERFACE)) for r in _ports(nb))
    for pod in sorted(_served(pods), key=lambda p: (p["namespace"], p["name"])):
        try:
            _source, requests = annotations.parse_requests(pod["annotations"])
        except ValidationError:
            continue            # refused, and said so in the pod's Events: not a drift
        identity = _identity(pod)
        missing = [r for r in requests if (pod["owner"], r.interface) not in have]
        if missing:
            names = [identity.port_name(r.interface) for r in missing]
            told = [r for r in pinned(nb, identity, missing, pod["annotations"]) if r.ip is not None]
            out.append(finding(MISSING, "error", "nb", names, "pod %s asks for %s and has no port for it%s" % (
                identity, ", ".join(r.interface for r in missing),
                "" if len(told) == len(missing) else " (see its Events)"),
                "make the ports %s with the addresses the pod was told" % ", ".join(names)
                if len(told) == len(missing) else None))
        out += port_qos.audit(nb, identity, requests, finding)      # its ports' QoS rows (the watcher's to mend)
    return out


def audit_addresses(nb):
    """One IP held twice on a switch, one MAC held twice anywhere, and an
    address outside its network's subnet."""
    out = []
    switch_of = _switch_of(nb)
    settings = vn.read_network_settings(nb)
    by_ip, by_mac = {}, {}
    for row in _ports(nb):
        switch = switch_of.get(row.uuid)
        mac, ips = held_addresses(row)
        if mac:
            by_mac.setdefault(mac, []).append(row.name)
        network = settings.get(switch.name) if switch is not None else None
        for ip in ips:
            by_ip.setdefault((switch.name if switch is not None else None, str(ip)), []).append(row.name)
            subnet = (network.subnet if ip.version == 4 else network.subnet6) if network else None
            if subnet is not None and ip not in subnet:
                out.append(finding(OUTSIDE, "error", "nb", [row.name], "port %s holds %s, outside %s's %s" % (
                    row.name, ip, switch.name, subnet)))
    for (switch, ip), names in sorted(by_ip.items()):
        if len(names) > 1:
            out.append(finding(DUPLICATE_IP, "error", "nb", names, "%s is held by %s on %s" % (
                ip, " and ".join(sorted(names)), switch)))
    for mac, names in sorted(by_mac.items()):
        if len(names) > 1:
            out.append(finding(DUPLICATE_MAC, "error", "nb", names, "%s is held by %s" % (
                mac, " and ".join(sorted(names)))))
    return out


def northd_version(sb):
    """``ovn-northd``'s version as it writes it in the southbound
    (``SB_Global.options:northd_internal_version``), for the nodes' audit;
    None without a southbound or before northd wrote it."""
    rows = sb.rows("SB_Global") if sb is not None else []
    return rows[0].options.get("northd_internal_version") if rows else None


def port_mtus(nb):
    """``{logical port: MTU}`` of the ports on networks that set one, for
    the nodes' audit."""
    settings = vn.read_network_settings(nb)
    out = {}
    for switch in nb.rows("Logical_Switch"):
        network = settings.get(switch.name)
        if network is not None and network.mtu:
            out.update((port.name, int(network.mtu)) for port in switch.ports)
    return out


def _drift_plan(nb, row):
    """The plan that makes the network ``row`` what its records say (empty
    when it is), or the reason it cannot be planned."""
    network = vn.network_of(row, recorded=True)
    item = vn.check_network(network.config(), row.name)
    try:
        # force: the recorded settings are the truth here; a port that breaks them is its own finding
        return vn.plan_networks(nb, [(row.name, item)], "merged", "ovn", force=True), None
    except ValidationError as exc:
        return None, "; ".join(exc.problems)


def _owned_networks(nb):
    return sorted((row for row in nb.rows("Logical_Switch")
                   if row.external_ids.get(NETWORK_KEY) and row.external_ids.get(OWNER_KEY) == OWNER_VALUE),
                  key=lambda row: row.name)


def audit_networks(nb):
    """A network whose switch, router port or routes no longer match the
    settings recorded when it was declared (someone changed them by hand)."""
    out = []
    for row in _owned_networks(nb):
        plan_, why = _drift_plan(nb, row)
        if why is not None:
            out.append(finding(DRIFT, "error", "nb", [row.name], "network %s no longer matches its recorded "
                               "settings, and cannot be made so here: %s" % (row.name, why)))
        elif plan_.changed:
            out.append(finding(DRIFT, "error", "nb", [row.name],
                               "network %s no longer matches its recorded settings: %s" % (
                                   row.name, "; ".join(plan_.batch.operations())),
                               "make network %s as recorded" % row.name))
    return out


def _chassis_names(sb):
    """``{chassis name: (name, hostname)}`` of the registered chassis: a
    node is known by either (its system-id, or the host's name)."""
    return dict((row.name, (row.name, row.hostname or row.name)) for row in sb.rows("Chassis"))


def _for_another_plugin(pod, row):
    """Whether ``row`` is ``pod``'s address for another CNI plugin's device
    (ovn4nfv-ipam under host-device, SR-IOV, macvlan): a port its
    interface list does not name, holding an address its annotations hand
    to another plugin. That device carries its traffic outside OVN: no
    node binds the port, and none is to."""
    if row.external_ids.get(K_INTERFACE) in [entry.get("interface") for entry in served(pod["annotations"])]:
        return False
    return bool(set(str(ip) for ip in held_addresses(row)[1]) & annotations.other_plugin_addresses(pod["annotations"]))


def audit_bindings(nb, sb, pods):
    """A running pod's port not bound (one that holds an address for
    another CNI plugin's device is not judged so), or bound to another
    node's chassis than the pod's; a gateway router pinned to a chassis
    that is not registered."""
    out = []
    chassis = _chassis_names(sb)
    bound = {}
    for row in sb.rows("Port_Binding"):
        where = row.chassis[0] if isinstance(row.chassis, list) and row.chassis else row.chassis
        bound[row.logical_port] = chassis.get(where.name, (where.name,)) if where else None
    if pods is not None:
        live, _every_vm = _live(_served(pods))
        for row in _ports(nb):
            pod = live.get(row.external_ids.get(K_UID))
            if pod is None or not pod.get("node"):
                continue
            host = bound.get(row.name)
            # a VM's port is bound where the watcher put it: on one of its launchers' nodes
            nodes = (row.options.get(vms.REQUESTED_CHASSIS) or "").split(",") if vms.vm_of(
                row.external_ids.get(K_POD)) else [pod["node"]]
            if host is None:
                if not _for_another_plugin(pod, row):
                    out.append(finding(UNBOUND, "error", "sb", [row.name],
                                       "port %s of pod %s/%s on %s is bound to no chassis" % (
                                           row.name, pod["namespace"], pod["name"], pod["node"])))
            elif not set(nodes) & set(host):
                out.append(finding(ELSEWHERE, "error", "sb", [row.name],
                                   "port %s of pod %s/%s on %s is bound on %s" % (
                                       row.name, pod["namespace"], pod["name"], pod["node"], host[-1])))
    for router in nb.rows("Logical_Router"):
        pinned = router.options.get("chassis")
        if role_of(router) and pinned and pinned not in chassis:
            out.append(finding(GATEWAY, "error", "sb", [router.name],
                               "gateway router %s is pinned to chassis %s, which is not registered" % (
                                   router.name, pinned)))
    return out


def audit_chassis(sb, nodes):
    """A chassis whose node the API no longer has (known by either its
    name or its hostname): its encapsulations stay, and every other node
    keeps a tunnel to it."""
    out = []
    for row in sorted(sb.rows("Chassis"), key=lambda r: r.name):
        if row.name not in nodes and (row.hostname or row.name) not in nodes:
            encaps = ", ".join(sorted("%s %s" % (e.type, e.ip) for e in row.encaps))
            out.append(finding(STALE, "warning", "sb", [row.name], "chassis %s (host %s, %s) has no node in the "
                               "API" % (row.name, row.hostname or "unknown", encaps or "no encap"),
                               "delete chassis %s and its encapsulations" % row.name))
    return out


def audit(nb, sb=None, pods=None, nodes=None):
    """Every finding, and the classes skipped for want of a layer.
    ``nodes``, the names of the API's nodes (None or empty: not known)."""
    findings, skipped = audit_addresses(nb) + audit_networks(nb) + policy_audit.audit_policies(nb, finding), []
    findings += security_audit.audit_port_security(nb, finding)
    if pods is not None:
        findings += audit_pods(nb, pods)
    else:
        skipped += [LEAKED, MISSING] + list(port_qos.CLASSES)
    if sb is not None:
        findings += audit_bindings(nb, sb, pods) + provider_audit.audit_provider_mappings(nb, sb, finding)
    if sb is None:
        skipped += [UNBOUND, ELSEWHERE, GATEWAY]
    elif pods is None:
        skipped += [UNBOUND, ELSEWHERE]
    if sb is not None and nodes:
        findings += audit_chassis(sb, set(nodes))
    else:
        skipped.append(STALE)
    if sb is None:
        skipped += list(provider_audit.CLASSES)
    return sorted(findings, key=lambda f: (CLASSES.index(f["class"]), f["objects"])), skipped


def plan_repair(nb, findings, pods=()):
    """The one northbound transaction that mends what the product owns:
    the ports of pods that are gone, and a running pod's missing ports
    (``pods``, the API's) with the addresses it was told."""
    batch = Batch()
    missing = set(name for f in findings if f["class"] == MISSING and f["repair"] for name in f["objects"])
    made = set()            # a VM's ports are made once, from one of its launchers
    for pod in sorted(_served(pods or ()), key=lambda p: (p["namespace"], p["name"])):
        identity = _identity(pod)
        if identity.uid in made:
            continue
        made.add(identity.uid)
        try:
            requests = [r for r in annotations.parse_requests(pod["annotations"])[1]
                        if identity.port_name(r.interface) in missing]
            if requests:
                batch.add(plan_pod(nb, identity, pinned(nb, identity, requests, pod["annotations"])))
        except ValidationError:
            continue        # the addresses were taken meanwhile: the finding stays, and says so
    # drifted networks first: their plans may update a leaked port (its DHCP
    # reference) that the leak's plan then deletes, never the other way round
    drifted = set(name for f in findings if f["class"] == DRIFT and f["repair"] for name in f["objects"])
    for row in _owned_networks(nb):
        if row.name in drifted:
            plan_, _why = _drift_plan(nb, row)
            for resource_plan in (plan_.batch.plans if plan_ is not None else []):
                batch.add(resource_plan)
    leaked = [row for row in _ports(nb) if any(f["class"] == LEAKED and row.name in f["objects"] for f in findings)]
    for uid in sorted(set(row.external_ids.get(K_UID) for row in leaked)):
        for plan_ in plan_delete(nb, uid).plans:
            batch.add(plan_)
    for resource_plan in policy_audit.plan_policy_repair(nb, findings).plans + \
            security_audit.plan_security_repair(nb, findings, [row.name for row in leaked]).plans:
        batch.add(resource_plan)
    return batch


class _Chassis:
    """What :func:`plan_sb_repair`'s changes are said of."""
    name, identity = "chassis", ()


def plan_sb_repair(sb, findings):
    """The one southbound transaction: delete the chassis of nodes that
    are gone, with their ``Chassis_Private`` rows (their encapsulations go
    with them, as nothing else refers to those)."""
    stale = set(name for f in findings if f["class"] == STALE and f["repair"] for name in f["objects"])
    plan_ = Plan(_Chassis, "deleted")
    private = dict((row.name, row) for row in sb.rows("Chassis_Private"))
    for row in sorted(sb.rows("Chassis"), key=lambda r: r.name):
        if row.name in stale:
            ops = [Op("delete", "Chassis", row)] + ([Op("delete", "Chassis_Private", private[row.name])]
                                                    if row.name in private else [])
            plan_.changes.append(Change("delete", row.name, {"name": row.name}, None, ops))
    return Batch([plan_])


def lines(findings, skipped=()):
    """One readable line per finding, and the classes not looked at."""
    out = ["%-7s %s: %s%s" % (f["severity"].upper(), f["class"], f["message"],
                              (" (repair: %s)" % f["repair"]) if f["repair"] else "") for f in findings]
    if skipped:
        out.append("skipped %s" % ", ".join(skipped))
    return out


def audit_and_mend(audited, repairs, state, write, settle=None):
    """One audit and its repair, for either layer (the cluster's, the
    host's). ``audited()`` returns the findings first in a tuple; with
    ``state: repaired``, each ``(database, plan_repair)`` of ``repairs``
    mends in one transaction on its database, ``plan_repair(view,
    findings)`` (written when ``write``), or without a database (netlink),
    ``plan_repair(findings)``; ``settle()``, when given, waits for what the
    repair asked to be done (within the database's timeout) before the
    audit is made again. Returns that tuple, the repairs as one
    :class:`Batch` (None when auditing only), and the findings left: the
    audit again when it wrote."""
    first = audited()
    if state != "repaired":
        return first, None, first[0]
    repair = Batch([execute(database, lambda view, plan_=plan_repair: plan_(view, first[0]), write)
                    if database is not None else plan_repair(first[0]) for database, plan_repair in repairs])
    if write and repair.changed and settle is not None:
        settle()
    return first, repair, audited()[0] if write and repair.changed else first[0]


def audit_result(findings, skipped, ports, live_pods, repair, left, handed=None):
    """The audit's result dict, for either layer; ``left``, the findings
    after the repair (the audit again, when it wrote); ``handed``, what
    the cluster run hands down to the nodes' (``port_mtus``,
    ``northd_version``)."""
    result = dict(changed=bool(repair and repair.changed), findings=findings, skipped=skipped,
                  lines=lines(findings, skipped), ports=ports, live_pods=live_pods, left=left,
                  repaired=repair.operations() if repair is not None and repair.changed else [],
                  port_mtus={}, northd_version=None, physnet_mtus={})
    result.update(handed or {})
    return result
