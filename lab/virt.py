"""What KubeVirt does for a VM in the lab, on one node: virt-controller's
part (the VirtualMachine's VMI, its launcher pod, the VMI's
``status.activePods``, a migration's target launcher), the kubelet's (the
launcher's sandbox, through kubelet.py and containerd's CRI) and
virt-handler's (the guest in QEMU, plugged into the launcher's interface
as KubeVirt's bridge binding does, by vmm.py).

    virt.py start VM NETWORK           the VM and its VMI (made when missing),
                                       its launcher on this node asking for
                                       an interface on NETWORK configured by
                                       DHCP, named in the VMI's activePods as
                                       virt-controller does before its
                                       sandbox is made, and its guest booted
                                       (when it does not run here); waits for
                                       the guest's DHCP lease
    virt.py check VM NAME=IP...        what the guest got by DHCP against
                                       what OVN holds for the VM's port (the
                                       launcher's ovnIfaceList), then a ping
                                       from the guest to each IP; rows
    virt.py receive VM NETWORK PORT    a migration's target: a launcher on
                                       this node (kubevirt.io/migrationJobUID),
                                       named in activePods, and QEMU waiting
                                       for the guest on TCP PORT
    virt.py send VM HOST:PORT          the guest migrated to HOST:PORT; then
                                       this node's launcher is done: out of
                                       activePods, Succeeded, its QEMU
                                       stopped and its pod deleted
    virt.py running VM                 the guest runs here (a migration's
                                       target once it is done), else the
                                       reason, from QEMU's and the guest's
                                       logs
    virt.py delete VM                  the guest stopped here and the
                                       VirtualMachine deleted (its VMI and
                                       launchers go with it)

The VM lives in the namespace ``default``; its launcher on a node is
``virt-launcher-<VM>-<node>`` (KubeVirt's has a random suffix: nothing of
the product reads it), its interface ``eth1``. Answers are JSON.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error

import kubelet

VMM = "/usr/lib/ovn4nfv/vmm.py"       # the node image's (lab/Containerfile)
NAMESPACE = "default"
KUBEVIRT = "/apis/kubevirt.io/v1/namespaces/%s/%%s" % NAMESPACE
INTERFACE = "eth1"
MERGE = "application/merge-patch+json"


def launcher_name(vm, node=None):
    return "virt-launcher-%s-%s" % (vm, node or socket.gethostname())


def vmm(*argv, check=True):
    """vmm.py's JSON answer (its state of the VM, named like the VM)."""
    done = subprocess.run([sys.executable, VMM] + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300, check=False)
    if check and done.returncode:
        raise SystemExit("virt: vmm.py %s failed: %s" % (argv[0], done.stderr.strip()[-2000:]))
    return done


def ensure(plural, body):
    """The object ``body`` names (``plural``), created when missing."""
    name = body["metadata"]["name"]
    try:
        return kubelet.api("POST", KUBEVIRT % plural, body)
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise
    return kubelet.api("GET", KUBEVIRT % plural + "/" + name)


def controller(obj):
    return {"apiVersion": "kubevirt.io/v1", "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def instance(vm):
    """The VM and its VMI: virt-controller's VMI for a running VM."""
    machine = ensure("virtualmachines", {"metadata": {"name": vm}, "spec": {"running": True}})
    return ensure("virtualmachineinstances", {"metadata": {"name": vm, "ownerReferences": [controller(machine)]},
                                              "spec": {}})


def active(vm, add=None, drop=None):
    """virt-controller's word on the VMI: ``status.activePods`` names the
    pod ``add`` (on this node) and no longer the UID ``drop``."""
    change = {}
    if add is not None:
        change[add["metadata"]["uid"]] = socket.gethostname()
    if drop is not None:
        change[drop] = None
    # a VMI has no status subresource: its object is patched
    kubelet.api("PATCH", KUBEVIRT % "virtualmachineinstances" + "/" + vm, {"status": {"activePods": change}},
                content_type=MERGE)


def launcher(vm, network, vmi, migration=None):
    """The VMI's launcher on this node, as virt-controller makes it and
    the kubelet runs it."""
    labels = {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": vmi["metadata"]["uid"],
              "vm.kubevirt.io/name": vm}
    if migration:
        labels["kubevirt.io/migrationJobUID"] = migration
    request = json.dumps([{"name": network, "interface": INTERFACE, "dhcp": True}])
    return kubelet.run(launcher_name(vm), request, labels, owners=[controller(vmi)],
                       created=lambda pod: active(vm, add=pod))


def status(vm):
    """vmm.py's status of the guest here (``{}`` when it cannot say)."""
    done = vmm("status", "--name", vm, check=False)
    return json.loads(done.stdout or "{}") if done.returncode == 0 else {}


def runs_here(vm, report=None):
    """Whether the guest runs on this node (its QEMU alive and running)."""
    report = status(vm) if report is None else report
    return bool(report.get("pid")) and report.get("status") == "running"


def running(vm):
    """The guest runs here, as a migration leaves it on its target; else
    why not (QEMU's log and the guest's console)."""
    report = status(vm)
    if not runs_here(vm, report):
        raise SystemExit("virt: %s does not run on this node (QEMU %s, status %s); %s" % (
            vm, report.get("pid") or "gone", report.get("status"), report.get("logs", "no state")))
    return {"vm": vm, "running": True, "pid": report["pid"]}


def start(vm, network):
    made = launcher(vm, network, instance(vm))
    booted = None
    if not runs_here(vm):
        booted = json.loads(vmm("start", "--name", vm, "--netns", os.path.join(kubelet.NETNS_DIR, made["pod"]),
                                "--interface", INTERFACE).stdout)
    lease = json.loads(vmm("wait-dhcp", "--name", vm).stdout)
    return {"vm": vm, "launcher": made["pod"], "node": made["node"], "booted": booted, "lease": lease}


def guest(vm, command):
    """``command`` in the guest: (exit code, output)."""
    done = vmm("console", "--name", vm, "--", command, check=False)
    return done.returncode, done.stdout


def check(vm, targets):
    """Rows (``{ok, line}``): the guest's address, gateway and MTU are what
    OVN holds and its network says, and it reaches each of ``targets``
    (``NAME=IP``)."""
    pod = kubelet.api("GET", "/api/v1/namespaces/%s/pods/%s" % (NAMESPACE, launcher_name(vm)))
    entry = json.loads(pod["metadata"]["annotations"]["ovnIfaceList"])[0]
    rows = []
    _code, shown = guest(vm, "ip -4 -o addr show dev eth0; ip route; cat /sys/class/net/eth0/mtu")
    words = shown.split()
    has = words[words.index("inet") + 1] if "inet" in words else None
    default = re.search(r"^default via %s( |$)" % re.escape(entry["gateway_ip"]), shown, re.M) is not None
    mtu = words[-1] if words else None
    want_mtu = str(entry.get("mtu"))        # the lab's VM network declares one
    ok = has == entry["ip_address"] and default and mtu == want_mtu
    rows.append({"ok": ok, "line": "%s vm %s dhcp: %s via %s mtu %s (OVN holds %s via %s mtu %s)" % (
        "OK  " if ok else "FAIL", vm, has, "the gateway" if default else "no gateway", mtu, entry["ip_address"],
        entry["gateway_ip"], want_mtu)})
    for target in targets:
        name, _sep, address = target.partition("=")
        code, output = guest(vm, "ping -c 3 -W 2 %s" % address)
        rows.append({"ok": code == 0, "line": "%s vm %s -> %s %s: %s" % (
            "OK  " if code == 0 else "FAIL", vm, name, address,
            "ping answered" if code == 0 else (output.strip().splitlines() or ["no answer"])[-1])})
    return rows


def receive(vm, network, port):
    """A migration's target here; undone (out of activePods, its pod gone)
    when its QEMU does not start. A guest that runs here is refused."""
    if runs_here(vm):
        raise SystemExit("virt: %s runs on this node already; it cannot be its own migration's target" % vm)
    vmi = kubelet.api("GET", KUBEVIRT % "virtualmachineinstances" + "/" + vm)
    made = launcher(vm, network, vmi, migration="lab-%d" % int(time.time()))
    vmm("stop", "--name", vm, check=False)          # what a failed earlier attempt left here
    try:
        target = json.loads(vmm("start", "--name", vm, "--netns", os.path.join(kubelet.NETNS_DIR, made["pod"]),
                                "--interface", INTERFACE, "--incoming", str(port)).stdout)
    except BaseException:
        pod = kubelet.api("GET", "/api/v1/namespaces/%s/pods/%s" % (NAMESPACE, made["pod"]))
        active(vm, drop=pod["metadata"]["uid"])
        kubelet.delete(made["pod"])
        raise
    return {"vm": vm, "launcher": made["pod"], "node": made["node"], "target": target}


def send(vm, destination):
    moved = json.loads(vmm("migrate", "--name", vm, "--to", destination).stdout)
    name = launcher_name(vm)
    pod = kubelet.api("GET", "/api/v1/namespaces/%s/pods/%s" % (NAMESPACE, name))
    active(vm, drop=pod["metadata"]["uid"])
    kubelet.api("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (NAMESPACE, name),
                {"status": {"phase": "Succeeded"}}, content_type=MERGE)
    vmm("stop", "--name", vm)
    kubelet.delete(name)
    return {"vm": vm, "migrated": moved, "source": name}


def delete(vm):
    vmm("stop", "--name", vm, check=False)
    try:
        kubelet.api("DELETE", KUBEVIRT % "virtualmachines" + "/" + vm)
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    return {"vm": vm, "deleted": True}


def main(argv):
    if argv[1:2] == ["start"] and len(argv) == 4:
        result = start(argv[2], argv[3])
    elif argv[1:2] == ["check"] and len(argv) >= 3:
        result = check(argv[2], argv[3:])
    elif argv[1:2] == ["receive"] and len(argv) == 5:
        result = receive(argv[2], argv[3], int(argv[4]))
    elif argv[1:2] == ["send"] and len(argv) == 4:
        result = send(argv[2], argv[3])
    elif argv[1:2] == ["running"] and len(argv) == 3:
        result = running(argv[2])
    elif argv[1:2] == ["delete"] and len(argv) == 3:
        result = delete(argv[2])
    else:
        raise SystemExit(__doc__)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
