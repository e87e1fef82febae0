# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KubeVirt's virtual machines: a VM's interfaces belong to the VM, not to
the pod that runs it.

KubeVirt runs each VirtualMachineInstance (VMI) in a *launcher* pod (label
``kubevirt.io: virt-launcher``, a controller ownerReference to the VMI,
label ``kubevirt.io/created-by`` = the VMI's UID). A VM gets a new launcher
on every restart (and a new VMI, of the VM's name), and a live migration
runs a second launcher, the target, beside the first until the guest has
moved. What the guest was given (its MAC, its IP, which it keeps in its
DHCP lease) must outlive them all: the ports of a launcher's interfaces
are the VM's, named and marked after ``(namespace, VM)``, and every launcher
of the VM is served the same ones. They are freed when nothing of the VM
is left: no VirtualMachine, no VMI, no launcher.

A VM's owner is a :class:`~.pod_addresses.Pod` whose name is ``vm:<VM>``:
no pod can have it (a pod's name is a DNS subdomain, without ``:``), so a
VM's ports never meet a pod's, and everything that finds a pod's ports by
``(namespace, name, UID)`` finds a VM's the same way. Its UID is
``vm:<namespace>/<VM>``, stable across restarts.

Which chassis holds the port follows the launchers (:func:`binding`): the
node of the only live one; during a migration, both, the source's first
(``requested-chassis=<source>,<target>``) with OVN's
``activation-strategy=rarp``, so that the target's port forwards nothing
until the guest, moved, announces itself there (QEMU's RARP); then the
target's alone once the source has gone. Sources: KubeVirt's
``pkg/virt-controller/services/template.go`` (the launcher's labels) and
``pkg/virt-controller/watch/migration`` (the target pod); OVN's
``ovn-nb(5)`` (``requested-chassis``, ``activation-strategy``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.marks import K_VMI
from .pod_addresses import Pod

GROUP = "kubevirt.io"
LAUNCHER_LABEL, LAUNCHER = "kubevirt.io", "virt-launcher"
CREATED_BY = "kubevirt.io/created-by"
# a launcher KubeVirt runs for a while to provision the VM's disks
# (template.go): it is the VMI's, and no guest runs in it
EPHEMERAL = "kubevirt.io/ephemeral-provisioning"
VMI_KIND = "VirtualMachineInstance"
VM_PREFIX = "vm:"
TERMINAL = ("Succeeded", "Failed")     # a launcher in these phases runs no guest
REQUESTED_CHASSIS = "requested-chassis"
ACTIVATION = "activation-strategy"


def vm_owner(namespace, vm, vmi=None):
    """The owner of the VM ``namespace/vm``'s ports; as its VMI of UID
    ``vmi``'s launcher, with that mark (``K_VMI``) on what it makes."""
    return Pod(namespace, VM_PREFIX + vm, "%s%s/%s" % (VM_PREFIX, namespace, vm), {K_VMI: vmi} if vmi else None)


def vm_of(owner_name):
    """The VM's name if ``owner_name`` (a port's pod mark) is a VM's, else None."""
    return owner_name[len(VM_PREFIX):] if owner_name and owner_name.startswith(VM_PREFIX) else None


def _get(obj, attr, key):
    """A field of an object from the API: the client's model (``attr``) or
    its JSON (``key``)."""
    if obj is None:
        return None
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, attr, None)


def launched_vmi(meta):
    """``(VM, VMI UID)`` of a launcher's metadata, or None (:func:`launched_vm`)."""
    labels = _get(meta, "labels", "labels") or {}
    if labels.get(LAUNCHER_LABEL) != LAUNCHER or (_get(meta, "annotations", "annotations") or {}).get(EPHEMERAL):
        return None
    for ref in _get(meta, "owner_references", "ownerReferences") or ():
        if _get(ref, "kind", "kind") == VMI_KIND and _get(ref, "controller", "controller") and \
                (_get(ref, "api_version", "apiVersion") or "").split("/")[0] == GROUP and _get(ref, "name", "name"):
            if labels.get(CREATED_BY) not in (None, _get(ref, "uid", "uid")):
                return None
            return _get(ref, "name", "name"), _get(ref, "uid", "uid")
    return None


def launched_vm(meta):
    """The VM (its VMI's name) a pod's metadata (the client's model or the
    API's JSON) says it runs, or None: KubeVirt's launcher label and a
    controller ownerReference to a ``kubevirt.io`` VirtualMachineInstance,
    whose UID the ``created-by`` label repeats when it is there. Anything
    less is an ordinary pod."""
    found = launched_vmi(meta)
    return found[0] if found else None


def owner_of(meta):
    """Who a pod's ports belong to: its VM's owner (as its VMI's launcher)
    for a launcher, the pod itself otherwise."""
    found = launched_vmi(meta)
    namespace = _get(meta, "namespace", "namespace")
    if found is not None:
        return vm_owner(namespace, found[0], found[1])
    return Pod(namespace, _get(meta, "name", "name"), _get(meta, "uid", "uid"))


def running(pod):
    """Whether a launcher (the client's model or the API's JSON) may run
    its guest: not being deleted, not finished."""
    meta = _get(pod, "metadata", "metadata")
    status = _get(pod, "status", "status")
    return not _get(meta, "deletion_timestamp", "deletionTimestamp") and \
        _get(status, "phase", "phase") not in TERMINAL


def binding(launchers):
    """The options of a VM's ports for its ``launchers``, ``[(created,
    node)]`` of those that run and are scheduled: None (leave them) when
    there is none; the one node; or, during a migration, the oldest's node
    and the newest's with activation on the guest's RARP."""
    nodes = []
    for _created, node in sorted(launchers, key=lambda launcher: str(launcher[0])):
        if node and node not in nodes:
            nodes.append(node)
    if not nodes:
        return None
    if len(nodes) == 1:
        return {REQUESTED_CHASSIS: nodes[0], ACTIVATION: None}
    return {REQUESTED_CHASSIS: "%s,%s" % (nodes[0], nodes[-1]), ACTIVATION: "rarp"}
