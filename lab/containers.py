"""Container sets and their networks: the lab (read from an inventory) and
the molecule scenarios' fixed sets, stood up and torn down with podman.

:class:`Session` is what one lab command acts on (the Debian release, the
inventory, the lab's layout); every room takes it as an argument.
"""

import json
import os
import shutil
import time

from lab import host
from lab.host import LABEL, MIXED, RELEASES, STATE, exec_in, log, podman

# The file in the lab's state that names the inventory of the lab stood up
# last: chaos, reboot and the other steps act on that lab unless told
# another (--inventory).
CURRENT = "inventory"
# The file in the lab's state that says its nodes were upgraded in place
# (lab/upgrade.py): {"from": <release>, "to": <release>}. Their containers
# still run the older release's image; the nodes run the newer release.
UPGRADED = "upgraded.json"
# The host's directory of Debian package repositories for in-place upgrades
# (lab/upgrade_repo.py builds one per release), seen read-only by every
# node of the lab at DEBS_MOUNT: the lab's networks are internal, so a node
# reaches no mirror. A bind mount: what is built there later shows too.
DEBS = os.path.join(STATE, "debs")
DEBS_MOUNT = "/srv/ovn4nfv-debs"


class LabSet:
    """Containers on podman networks of their own: ``networks`` is
    ``[(name, subnet)]``, ``nodes`` maps a container to ``(hostname,
    [(network, ip)])``, ``api`` is the container that runs the API stand-in
    on its first address, ``tx_off`` the containers whose veth must fill
    in TCP checksums itself, and ``kube`` those that are Kubernetes nodes
    (each registers its Node with the API, as its kubelet would)."""

    def __init__(self, name, networks, nodes, api=None, tx_off=(), upgraded=(), kube=()):
        self.name, self.networks, self.nodes = name, networks, nodes
        self.api, self.tx_off, self.upgraded, self.kube = api, tx_off, upgraded, kube

    def releases(self, debian):
        """The Debian release of each container: ``debian`` for all, or for
        ``mixed`` the older release everywhere but on ``upgraded``, which
        runs the newer (host.MIXED says why in that order)."""
        if debian == "mixed":
            return dict((name, MIXED[1] if name in self.upgraded else MIXED[0]) for name in self.nodes)
        if debian not in RELEASES:
            raise SystemExit("lab: DEBIAN must be one of %s or mixed, not %r" % (", ".join(RELEASES), debian))
        return dict((name, debian) for name in self.nodes)

    @property
    def label(self):
        return "%s=%s" % (LABEL, self.name)

    def address(self, name):
        return self.nodes[name][1][0][1]


SETS = {
    # The lab itself is read from an inventory (layout.py; Session.lab_set());
    # the molecule scenarios other than topology have fixed sets of their own.
    # A three-member RAFT central, a master (the watcher, and a chassis) and a
    # worker (a chassis): the molecule central_cluster scenario.
    "cluster": LabSet("cluster", [("ovn4nfv-cluster", "192.168.34.0/24")], {
        "ovn4nfv-central1": ("central1", [("ovn4nfv-cluster", "192.168.34.21")]),
        "ovn4nfv-central2": ("central2", [("ovn4nfv-cluster", "192.168.34.22")]),
        "ovn4nfv-central3": ("central3", [("ovn4nfv-cluster", "192.168.34.23")]),
        "ovn4nfv-cmaster": ("cmaster", [("ovn4nfv-cluster", "192.168.34.11")]),
        "ovn4nfv-cworker": ("cworker", [("ovn4nfv-cluster", "192.168.34.12")]),
    }, api="ovn4nfv-cmaster", upgraded=["ovn4nfv-cworker"], kube=["ovn4nfv-cmaster", "ovn4nfv-cworker"]),
    # One node that is everything at once: the molecule scenarios of the roles.
    "node": LabSet("node", [("ovn4nfv-node-underlay", "192.168.35.0/24"),
                            ("ovn4nfv-node-external", "192.168.36.0/24")], {
        "ovn4nfv-node": ("node", [("ovn4nfv-node-underlay", "192.168.35.11"),
                                  ("ovn4nfv-node-external", "192.168.36.11")]),
    }, api="ovn4nfv-node", kube=["ovn4nfv-node"]),
}


class Session:
    """What one lab command acts on: ``debian`` (a release of host.RELEASES
    or ``mixed``), the inventory it was given (else the running lab's, else
    the example's: :attr:`layout`), and ``set_name``, the set that ``up``,
    ``api`` and ``down`` act on (``lab``, or one of SETS)."""

    def __init__(self, debian=None, inventory=None, set_name="lab", state=STATE):
        self.debian = debian or host.DEFAULT_RELEASE
        self.chosen = os.path.abspath(inventory) if inventory else None
        self.set_name, self.state = set_name, state
        self._layout = None

    @property
    def layout(self):
        """The lab's :class:`lab.layout.Layout` (read once)."""
        if self._layout is None:
            from lab import layout as layout_module   # Ansible's inventory reader: not for ``down``
            chosen = self.chosen or self.running()
            try:
                self._layout = layout_module.Layout(chosen or None)
            except layout_module.LayoutError as error:
                raise SystemExit("lab: %s" % error)
        return self._layout

    def running(self):
        """The inventory of the lab standing now, or None."""
        current = os.path.join(self.state, CURRENT)
        if not os.path.exists(current):
            return None
        with open(current) as handle:
            return handle.read().strip() or None

    def lab_set(self, name=None):
        """The set ``name`` (default: the session's): the lab's from its
        inventory, or a fixed one."""
        name = name or self.set_name
        if name != "lab":
            return SETS[name]
        from lab import layout as layout_module
        lay = self.layout
        return LabSet("lab", lay.networks, lay.nodes, api=layout_module.API_CONTAINER,
                      tx_off=[lay.container(h) for h in lay.externals],
                      upgraded=[lay.container(h) for h in lay.workers[:1]], kube=lay.kube)

    def container(self, node):
        return self.layout.container(node)

    def path(self, *names):
        """A file of the lab's state (.cache/lab)."""
        os.makedirs(self.state, exist_ok=True)
        return os.path.join(self.state, *names)


def ensure_network(network, label):
    name, subnet = network
    if podman("network", "exists", name, check=False).returncode == 0:
        have = podman("network", "inspect", "--format", "{{range .Subnets}}{{.Subnet}} {{end}}", name,
                      capture=True).stdout.split()
        if subnet not in have:
            raise SystemExit("lab: the network %s has %s, not %s: make lab-down first" % (
                name, " ".join(have), subnet))
    else:
        # internal: no route off this machine; the lab talks only to itself.
        podman("network", "create", "--internal", "--disable-dns", "--label", label,
               "--subnet", subnet, name, capture=True)


def upgraded(state=STATE):
    """What the lab's nodes were upgraded from and to (:data:`UPGRADED`), or None."""
    path = os.path.join(state, UPGRADED)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return json.load(handle)


def ensure_container(name, hostname, networks, label, image, also=()):
    """The container ``name`` of ``image`` (or of an image of ``also``: a
    lab upgraded in place runs its nodes' newer release in containers of
    the older one's image), started."""
    if podman("container", "exists", name, check=False).returncode == 0:
        running = podman("container", "inspect", "--format", "{{.ImageName}}", name,
                         capture=True).stdout.strip()
        if running != image and running not in also:
            raise SystemExit("lab: %s runs %s, not %s: make lab-down first" % (name, running, image))
        podman("start", name, capture=True)
        return
    os.makedirs(DEBS, exist_ok=True)
    # systemd as PID 1, as on a real node (the image's CMD is /sbin/init)
    argv = ["run", "-d", "--name", name, "--hostname", hostname, "--label", label,
            "--privileged", "--systemd=always", "--volume", "%s:%s:ro" % (DEBS, DEBS_MOUNT)]
    # Name each NIC after its place in the list: podman does not otherwise
    # promise which network becomes eth0, and the inventories name them.
    for index, (net, ip) in enumerate(networks):
        argv += ["--network", "%s:ip=%s,interface_name=eth%d" % (net, ip, index)]
    podman(*argv, image, capture=True)


def wait_booted(name, timeout=120):
    """Until systemd in ``name`` has finished booting, every unit up
    (``running``); bounded. Its bus answers only a moment after the
    container starts."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(1, int(deadline - time.monotonic()))
        result = exec_in(name, "timeout", str(left), "systemctl", "is-system-running", "--wait", check=False)
        state = result.stdout.strip()
        if state == "running":
            return state
        # "offline" (or nothing) until PID 1's manager answers on its bus
        if state not in ("", "offline") or time.monotonic() > deadline:
            failed = exec_in(name, "systemctl", "--failed", "--no-legend", check=False).stdout.strip()
            raise SystemExit("lab: %s did not boot (systemd: %r) %s %s" % (
                name, state, result.stderr.strip(), failed))
        time.sleep(0.2)     # no bus yet


def up(session, lab=None):
    """The set's networks and containers, booted (the images built first)."""
    lab = lab or session.lab_set()
    if lab.name == "lab":
        running = session.running()
        if running and running != session.layout.inventory:
            raise SystemExit("lab: the running lab is %s's, not %s's: make lab-down first" % (
                running, session.layout.inventory))
    releases = lab.releases(session.debian)
    host.build_images(releases.values())
    for network in lab.networks:
        ensure_network(network, lab.label)
    moved = upgraded(session.state) if lab.name == "lab" else None
    for name, (hostname, networks) in lab.nodes.items():
        also = [host.node_image(moved["from"])] if moved and moved["to"] == releases[name] else []
        ensure_container(name, hostname, networks, lab.label, host.node_image(releases[name]), also)
    for name in lab.nodes:
        wait_booted(name)
    # The external host's NIC is a veth: the kernel leaves TCP checksums to
    # an offload that never happens, and the nodes' userspace datapath drops
    # such packets. A physical NIC fills them in; here the host must. The
    # lab's API stand-in is such a host on the underlay: OVS 3.1 (Debian 12)
    # let its answers reach a node's own address on br-phy, OVS 3.5 (a node
    # upgraded to Debian 13 in place, lab/upgrade.py) did not (the node's
    # TCP to the API stalled in SYN-SENT until its veth filled them in).
    for name in list(lab.tx_off) + ([lab.api] if lab.name == "lab" and lab.api else []):
        podman("exec", name, "ethtool", "-K", "eth0", "tx", "off", capture=True)
    if lab.name == "lab" and lab.tx_off:
        # the first external host: the gateways' addresses are one router's
        fabric(lab.tx_off[0], session.layout.provider_networks)
        with open(session.path(CURRENT), "w") as handle:
            handle.write(session.layout.inventory + "\n")


def fabric(name, networks):
    """The external host ``name`` as the provider networks' fabric: a VLAN
    switch on its NIC (an OVS bridge whose trunk is eth0) with an access
    port per network (``vlan<id>``, tagged) holding the network's gateway,
    as the operator's router would. OVS, because this kernel has no VLAN
    devices (8021q) and no VLAN-filtering bridge; on the userspace
    datapath, which leaves eth0's untagged frames (the host's own address)
    to the kernel too. Made again as it is when it is there."""
    if not networks:
        return
    exec_in(name, "systemctl", "start", "openvswitch-switch")
    argv = ["ovs-vsctl", "--may-exist", "add-br", "br-fabric", "--", "set", "bridge", "br-fabric",
            "datapath_type=netdev", "--", "--may-exist", "add-port", "br-fabric", "eth0"]
    for network in networks:
        port = "vlan%d" % network["vlan"]
        argv += ["--", "--may-exist", "add-port", "br-fabric", port, "tag=%d" % network["vlan"], "--", "set",
                 "interface", port, "type=internal"]
    exec_in(name, *argv)
    exec_in(name, "ovs-vsctl", "--timeout=30", "wait-until", "interface", "vlan%d" % networks[-1]["vlan"], "ofport>0")
    for network in networks:
        port, prefix = "vlan%d" % network["vlan"], network["subnet"].split("/")[1]
        exec_in(name, "ip", "addr", "replace", "%s/%s" % (network["gateway"], prefix), "dev", port)
        exec_in(name, "ip", "link", "set", port, "up")
        # an internal port is a tap: its checksums, as eth0's, filled in here
        exec_in(name, "ethtool", "-K", port, "tx", "off")


def down(session, name=None):
    """Remove the set's containers and networks, found by their label (and,
    for a fixed set, by name), and forget its API credentials."""
    name = name or session.set_name
    if shutil.which("podman") is None:
        log("down (%s): podman is not installed, so nothing of the lab runs" % name)
        return
    label = "%s=%s" % (LABEL, name)
    fixed = SETS.get(name)
    out = set(podman("ps", "-a", "--filter", "label=" + label, "--format", "{{.Names}}",
                     capture=True, check=False).stdout.split())
    out |= set(node for node in (fixed.nodes if fixed else ())
               if podman("container", "exists", node, check=False).returncode == 0)
    out = sorted(out)
    if out:
        podman("rm", "-f", "-t", "0", *out, capture=True, check=False)
    nets = set(podman("network", "ls", "--filter", "label=" + label, "--format", "{{.Name}}",
                      capture=True, check=False).stdout.split())
    nets |= set(net for net, _subnet in (fixed.networks if fixed else ())
                if podman("network", "exists", net, check=False).returncode == 0)
    for net in sorted(nets):
        podman("network", "rm", "-f", net, capture=True, check=False)
    shutil.rmtree(os.path.join(session.state, "api-" + name), ignore_errors=True)
    for state in (CURRENT, UPGRADED):
        current = os.path.join(session.state, state)
        if name == "lab" and os.path.exists(current):
            os.remove(current)
    log("down (%s): %d containers removed" % (name, len(out)))
