"""The podman lab: the machines of an inventory as containers.

``make lab`` runs ``lab.py run``: install what the machine lacks, build the
node image from Debian's packages, start the containers that the inventory
describes (playbooks/inventory/example.yml, a master, two workers and an
external host, unless ``INVENTORY=path`` names another; layout.py says how
it is read) on an underlay and an external podman network, stand the cluster up with the collection's own
playbooks, create pods the way kubelet would, run ``verify.yml``, and print
what it found. ``make lab-down`` runs ``lab.py down``.

The containers play machines; Ansible reaches them through the podman
connection plugin. Nothing here configures OVS or OVN: the playbooks do.
The Kubernetes API is the test stand-in (``tests/kube_api_standin.py``), run
on the master, because no real API server can be installed on this machine.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STATE = os.path.join(ROOT, ".cache", "lab")

# The Debian releases a node may run (Debian 12 and 13). ``make lab`` builds
# the release an operator deploys today; ``DEBIAN=bookworm`` the older one,
# ``DEBIAN=mixed`` a cluster in the middle of an upgrade (see MIXED).
RELEASES = ("bookworm", "trixie")
DEFAULT_RELEASE = "trixie"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# A mixed cluster (DEBIAN=mixed) is one in the middle of a rolling upgrade
# from Debian 12 to 13, in the order of OVN's upgrade guide
# (Documentation/intro/install/ovn-upgrades.rst: ovn-controller first): each
# set's ``upgraded`` nodes, chassis only, already run the newer release's OVS
# and ovn-controller, while the central and the other nodes still run the
# older. deployment.rst says why this state, and not the fail-safe one.
MIXED = ("bookworm", "trixie")
LABEL = "ovn4nfv.lab"
API_PORT = 6443


def debian_default():
    """The release ``make lab DEBIAN=...`` asked for (the environment's
    OVN4NFV_DEBIAN), else the default."""
    return os.environ.get("OVN4NFV_DEBIAN") or DEFAULT_RELEASE


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
        runs the newer (MIXED says why in that order)."""
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
    # The lab itself is read from an inventory (layout.py; lab_set()); the
    # molecule scenarios other than topology have fixed sets of their own.
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
# The inventory of the lab that was stood up last: chaos, reboot and the
# other steps act on that lab unless told another (--inventory).
CURRENT = os.path.join(STATE, "inventory")
_LAYOUT = []


def lab_layout():
    """The lab's :class:`layout.Layout`: that of ``--inventory`` (the
    environment's OVN4NFV_LAB_INVENTORY), else of the lab stood up last,
    else of the example inventory."""
    if not _LAYOUT:
        import layout as layout_module
        chosen = os.environ.get("OVN4NFV_LAB_INVENTORY")
        if not chosen and os.path.exists(CURRENT):
            with open(CURRENT) as handle:
                chosen = handle.read().strip()
        try:
            _LAYOUT.append(layout_module.Layout(chosen or None))
        except layout_module.LayoutError as error:
            raise SystemExit("lab: %s" % error)
    return _LAYOUT[0]


def lab_set(name="lab"):
    """The set ``name``: the lab's from its inventory, or a fixed one."""
    if name != "lab":
        return SETS[name]
    import layout as layout_module
    lay = lab_layout()
    return LabSet("lab", lay.networks, lay.nodes, api=layout_module.API_CONTAINER,
                  tx_off=[lay.container(host) for host in lay.externals],
                  upgraded=[lay.container(host) for host in lay.workers[:1]], kube=lay.kube)


CONTAINERS_CONF = """\
# Written by ovn4nfv.k8s's lab: runc (crun refuses this machine's hybrid
# cgroups) and ulimits below the hard limit (raising them is refused).
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
"""


def log(message):
    print("lab: " + message, flush=True)


def sh(*argv, check=True, capture=False, timeout=900):
    result = subprocess.run(argv, check=False, text=True, timeout=timeout,
                            stdout=subprocess.PIPE if capture else None,
                            stderr=subprocess.PIPE if capture else None)
    if check and result.returncode:
        detail = (result.stderr or "").strip() if capture else ""
        raise SystemExit("lab: %s failed (exit %d) %s" % (" ".join(argv), result.returncode, detail))
    return result


def podman(*args, **kw):
    return sh("podman", *args, **kw)


# -- the machine ------------------------------------------------------------
def install_host_packages():
    wanted = ["podman", "runc", "debootstrap", "catatonit", "netavark", "aardvark-dns"]
    missing = [p for p in wanted
               if "install ok installed" not in sh("dpkg-query", "-W", "-f=${Status}", p,
                                                   check=False, capture=True).stdout]
    if missing:
        log("installing " + " ".join(missing))
        sh("apt-get", "update", "-qq")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing,
                       check=True, env=env)
    conf = "/etc/containers/containers.conf"
    current = open(conf).read() if os.path.exists(conf) else ""
    if "runtime = \"runc\"" not in current:
        os.makedirs(os.path.dirname(conf), exist_ok=True)
        if current:
            shutil.copy(conf, conf + ".before-ovn4nfv")
        with open(conf, "w") as handle:
            handle.write(CONTAINERS_CONF)


def image_exists(name):
    return podman("image", "exists", name, check=False).returncode == 0


def base_image(release):
    return "localhost/ovn4nfv-nodebase:" + release


def node_image(release):
    return "localhost/ovn4nfv-node:" + release


def build_images(releases=(DEFAULT_RELEASE,)):
    """The node image of each release: a debootstrap of Debian (minbase),
    then lab/Containerfile on top, built again only when the Containerfile
    changed."""
    containerfile = os.path.join(HERE, "Containerfile")
    with open(containerfile, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()[:16]
    for release in sorted(set(releases)):
        if not image_exists(base_image(release)):
            log("debootstrap of Debian %s (minbase)" % release)
            root = tempfile.mkdtemp(prefix="ovn4nfv-rootfs-")
            try:
                sh("debootstrap", "--variant=minbase", "--include=python3,iproute2",
                   release, root, DEBIAN_MIRROR, capture=True)
                tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
                subprocess.run(["podman", "import", "-", base_image(release)], stdin=tar.stdout,
                               check=True, stdout=subprocess.DEVNULL)
                tar.wait()
            finally:
                shutil.rmtree(root, ignore_errors=True)
        built = podman("image", "inspect", "--format", "{{index .Labels \"ovn4nfv.containerfile\"}}",
                       node_image(release), capture=True, check=False).stdout.strip()
        if built != digest:
            log("building the %s node image from Debian's packages" % release)
            podman("build", "--quiet", "--build-arg", "DEBIAN=" + release,
                   "--label", "ovn4nfv.containerfile=" + digest, "-t", node_image(release),
                   "-f", containerfile, HERE)


def core_tests(release, paths=("tests/unit", "tests/functional")):
    """The core's unit and functional tests on ``release``'s own Python
    packages, OVS and OVN: in a container of that release's node image plus
    Debian's pytest, with no network but its own loopback, the working tree
    mounted read-only. Returns pytest's exit code."""
    build_images([release])
    image = "localhost/ovn4nfv-coretest:" + release
    containerfile = os.path.join(HERE, "Containerfile.tests")
    node_id = podman("image", "inspect", "--format", "{{.Id}}", node_image(release), capture=True).stdout
    with open(containerfile, "rb") as handle:
        digest = hashlib.sha256(handle.read() + node_id.strip().encode()).hexdigest()[:16]
    built = podman("image", "inspect", "--format", "{{index .Labels \"ovn4nfv.containerfile\"}}",
                   image, capture=True, check=False).stdout.strip()
    if built != digest:
        log("building the %s test image" % release)
        podman("build", "--quiet", "--build-arg", "DEBIAN=" + release, "--label",
               "ovn4nfv.containerfile=" + digest, "-t", image, "-f", containerfile, HERE)
    argv = ["podman", "run", "--rm", "--privileged", "--network", "none", "--label", LABEL + "=core-tests",
            "-v", "%s:/src:ro" % ROOT, "-w", "/src", "-e", "PYTHONDONTWRITEBYTECODE=1", image,
            "python3", "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"]
    argv += list(paths) + ["--ignore", "tests/functional/test_failure_summary.py"]
    log("the core's tests on Debian %s's packages" % release)
    return subprocess.run(argv, check=False, timeout=3600).returncode


# -- networks and containers -------------------------------------------------
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


def ensure_container(name, hostname, networks, label, image):
    if podman("container", "exists", name, check=False).returncode == 0:
        running = podman("container", "inspect", "--format", "{{.ImageName}}", name,
                         capture=True).stdout.strip()
        if running != image:
            raise SystemExit("lab: %s runs %s, not %s: make lab-down first" % (name, running, image))
        podman("start", name, capture=True)
        return
    # systemd as PID 1, as on a real node (the image's CMD is /sbin/init)
    argv = ["run", "-d", "--name", name, "--hostname", hostname, "--label", label,
            "--privileged", "--systemd=always"]
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


def up(lab=None, debian=None):
    lab = lab or lab_set()
    if lab.name == "lab" and os.path.exists(CURRENT):
        with open(CURRENT) as handle:
            running = handle.read().strip()
        if running != lab_layout().inventory:
            raise SystemExit("lab: the running lab is %s's, not %s's: make lab-down first" % (
                running, lab_layout().inventory))
    releases = lab.releases(debian or debian_default())
    build_images(releases.values())
    for network in lab.networks:
        ensure_network(network, lab.label)
    for name, (hostname, networks) in lab.nodes.items():
        ensure_container(name, hostname, networks, lab.label, node_image(releases[name]))
    for name in lab.nodes:
        wait_booted(name)
    # The external host's NIC is a veth: the kernel leaves TCP checksums to
    # an offload that never happens, and the nodes' userspace datapath drops
    # such packets. A physical NIC fills them in; here the host must.
    for name in lab.tx_off:
        podman("exec", name, "ethtool", "-K", "eth0", "tx", "off", capture=True)
    if lab.name == "lab":
        os.makedirs(STATE, exist_ok=True)
        with open(CURRENT, "w") as handle:
            handle.write(lab_layout().inventory + "\n")


def down(name="lab"):
    """Remove the set's containers and networks, found by their label (and,
    for a fixed set, by name), and forget its API credentials."""
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
    shutil.rmtree(os.path.join(STATE, "api-" + name), ignore_errors=True)
    if name == "lab" and os.path.exists(CURRENT):
        os.remove(CURRENT)
    log("down (%s): %d containers removed" % (name, len(out)))


# -- the cluster ------------------------------------------------------------
SYSCTLS = {"fwd-w2": {"net.ipv4.ip_forward": "1"}}
WORKLOADS = os.path.join(HERE, "workloads.yml")
VERIFY_PORT = 7777          # verify.yml's probes answer here
SERVICE_VIP = "10.96.100.10"


def seed(name):
    """One of layout.py's names for the seed's pods (NET1, WEB, FWD, ...)."""
    import layout as layout_module
    return getattr(layout_module, name)


def pods():
    """``[(node, pod, its networks, its labels)]`` (layout.SEED_PODS says
    which and why)."""
    return lab_layout().pods()


def node_of(pod):
    return [node for node, name, _n, _l in pods() if name == pod][0]


def with_labels(labels):
    return [(node, pod) for node, pod, _n, have in pods() if have == labels]


def service():
    """The seeds' ExternalIP case: my-service on the external network's
    120th address (192.168.50.120 in the example), port 80, the pods
    labelled app=web behind it."""
    return {"metadata": {"name": "web", "annotations": {"k8s.plugin.opnfv.org/service-network": "ovn-net1",
                                                        "k8s.plugin.opnfv.org/service-vip": SERVICE_VIP}},
            "spec": {"selector": seed("WEB"), "externalIPs": [lab_layout().external_address(120)],
                     "ports": [{"name": "http", "port": 80, "targetPort": VERIFY_PORT}]}}


def verify_services(deleted=()):
    """verify.yml's ``verify_services``: what to reach of the lab's
    Service, from where, and which backends must answer."""
    spec = service()["spec"]
    backends = [pod for _node, pod in with_labels(spec["selector"])]
    return [{"name": "web", "vip": SERVICE_VIP, "external_ips": spec["externalIPs"], "port": spec["ports"][0]["port"],
             "backends": [b for b in backends if b not in deleted], "deleted": list(deleted),
             "clients": ["cli-w1"]}]


def verify_chains(closed=False):
    """verify.yml's ``verify_chains``: lab-chain's ends and function, and
    whether the function is deleted (the chain must then be closed)."""
    function = with_labels(seed("FWD"))[0]
    return [{"name": "lab-chain", "source": {"node": node_of("chain-src"), "pod": "chain-src"},
             "destination": {"pod": "chain-dst", "network": "ovn-net2"},
             "function": {"node": function[0], "pod": function[1], "interfaces": ["eth0", "net1"]},
             "closed": closed}]


def verify_taps():
    return [{"name": "lab-tap", "node": node_of("pod-w1a"), "source": "pod-w1a", "collector": "col-w1",
             "collector_interface": "eth0", "target": {"pod": "pod-w1b", "network": "ovn-net1"}}]


def verify_vars(deleted=()):
    closed = any(pod in deleted for _node, pod in with_labels(seed("FWD")))
    return "-e", json.dumps({"verify_services": verify_services([d for d in deleted if d.startswith("web")]),
                             "verify_chains": verify_chains(closed), "verify_taps": verify_taps()})


def inventories():
    """The lab's inventory and, beside it, how Ansible reaches the lab's
    containers and API (made from the lab's layout)."""
    lay = lab_layout()
    path = os.path.join(STATE, "inventory.lab.yml")
    os.makedirs(STATE, exist_ok=True)
    with open(path, "w") as handle:
        json.dump(lay.connection_inventory(os.path.join(STATE, "api-lab")), handle, indent=2)
    return [lay.inventory, path]


def container(node):
    return lab_layout().container(node)


def collections_path():
    """A collections tree whose ovn4nfv/k8s is this working tree."""
    tree = os.path.join(STATE, "collections")
    link = os.path.join(tree, "ansible_collections", "ovn4nfv", "k8s")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(ROOT, link)
    return tree


def playbook(name, *extra, check=True):
    """Run a playbook of the collection against the lab; return (seconds,
    recap {host: {ok, changed, failed...}}, output)."""
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_PIPELINING="True", ANSIBLE_STDOUT_CALLBACK="default",
               PATH=bindir + ":" + os.environ.get("PATH", ""))
    argv = [os.path.join(bindir, "ansible-playbook")]
    for inventory in inventories():
        argv += ["-i", inventory]
    argv += [name if os.path.isabs(name) else os.path.join(ROOT, "playbooks", name)] + list(extra)
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=1800, check=False)
    seconds = time.monotonic() - started
    os.makedirs(STATE, exist_ok=True)
    with open(os.path.join(STATE, os.path.basename(name) + ".log"), "w") as handle:
        handle.write(proc.stdout)
    recap = {}
    for line in proc.stdout.splitlines():
        match = re.match(r"^(\S+)\s+:\s+(.*)$", line)
        if match and "ok=" in match.group(2):
            recap[match.group(1)] = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", match.group(2)))
    if check and proc.returncode:
        sys.stdout.write(proc.stdout[-6000:])
        raise SystemExit("lab: %s failed (exit %d); the whole output is in %s" % (
            name, proc.returncode, os.path.join(STATE, name + ".log")))
    return seconds, recap, proc


def exec_in(name, *argv, check=True):
    return podman("exec", name, *argv, capture=True, check=check)


def api_credentials(lab):
    """The set's API credentials, made once per set (``down`` forgets them):
    a CA and the stand-in's certificate, a token file as kube-apiserver
    takes it (the admin, and the watcher's and the node agent's service
    accounts), and a kubeconfig for each, carrying the CA. The inventories
    read the kubeconfigs from here."""
    directory = os.path.join(STATE, "api-" + lab.name)
    if os.path.exists(os.path.join(directory, "node-agent.kubeconfig")):
        return directory
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import kube_api_standin as standin
    os.makedirs(directory, mode=0o700, exist_ok=True)
    ca, _cert, _key = standin.make_tls(directory, [lab.address(lab.api)])
    server = "https://%s:%d" % (lab.address(lab.api), API_PORT)
    accounts = {"admin": (standin.ADMIN, ["system:masters"]),
                "watcher": standin.service_account_user(standin.WATCHER),
                "node-agent": standin.service_account_user(standin.NODE_AGENT)}
    lines = []
    for name, (user, groups) in accounts.items():
        token = hashlib.sha256(os.urandom(32)).hexdigest()
        lines.append('%s,%s,%s,"%s"' % (token, user, user, ",".join(groups)))
        with open(os.path.join(directory, name + ".kubeconfig"), "w") as handle:
            json.dump(standin.kubeconfig_document(server, token, ca, name="lab"), handle, indent=2)
        if name == "admin":
            with open(os.path.join(directory, "admin.token"), "w") as handle:
                handle.write(token + "\n")
    with open(os.path.join(directory, "tokens.csv"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return directory


def start_api(lab=None):
    """The Kubernetes API stand-in, as a process on the set's master, over
    HTTPS and with RBAC: the product's manifests applied, the tokens of
    :func:`api_credentials`. Every container of the set gets the CA and
    the admin's token in /etc/ovn4nfv-lab, for the lab's kubelet."""
    lab = lab or lab_set()
    master, address = lab.api, lab.address(lab.api)
    directory = api_credentials(lab)
    for name in lab.nodes:
        exec_in(name, "mkdir", "-p", "-m", "0700", "/etc/ovn4nfv-lab")
        for item in ("ca.crt", "admin.token"):
            podman("cp", os.path.join(directory, item), "%s:/etc/ovn4nfv-lab/%s" % (name, item))
        exec_in(name, "sh", "-c", "echo https://%s:%d > /etc/ovn4nfv-lab/api" % (address, API_PORT))
    if exec_in(master, "test", "-e", "/run/ovn4nfv-lab-api.pid", check=False).returncode == 0:
        register_nodes(lab)
        return
    files = [(os.path.join(directory, n), n) for n in ("server.crt", "server.key", "tokens.csv")]
    files += [(os.path.join(ROOT, "roles", role, "files", "rbac.yaml"), role + "-rbac.yaml") for role in ("watcher", "cni")]
    exec_in(master, "mkdir", "-p", "-m", "0700", "/etc/kube-api-standin")
    for path, name in files:
        podman("cp", path, master + ":/etc/kube-api-standin/" + name)
    podman("cp", os.path.join(ROOT, "tests", "kube_api_standin.py"), master + ":/usr/local/lib/kube_api_standin.py")
    exec_in(master, "sh", "-c", "python3 /usr/local/lib/kube_api_standin.py --listen %s:%d "
            "--tls-cert-file /etc/kube-api-standin/server.crt --tls-private-key-file /etc/kube-api-standin/server.key "
            "--token-auth-file /etc/kube-api-standin/tokens.csv --rbac /etc/kube-api-standin/watcher-rbac.yaml "
            "--rbac /etc/kube-api-standin/cni-rbac.yaml "
            ">/var/log/kube-api-standin.log 2>&1 & echo $! > /run/ovn4nfv-lab-api.pid" % (address, API_PORT))
    exec_in(master, "python3", "-c", WAIT_HTTP % ("https://%s:%d/api/v1/pods" % (address, API_PORT)))
    register_nodes(lab)


def register_nodes(lab):
    """Each of the set's Kubernetes nodes registers its Node, as its kubelet
    would on start (one registered already is kept)."""
    for name in lab.kube:
        podman("cp", os.path.join(HERE, "kubelet.py"), name + ":/usr/local/bin/lab-kubelet")
        exec_in(name, "env", "LAB_API=https://%s:%d" % (lab.address(lab.api), API_PORT),
                "python3", "/usr/local/bin/lab-kubelet", "register", lab.address(name))


WAIT_HTTP = """
import ssl, time, urllib.error, urllib.request
token = open("/etc/ovn4nfv-lab/admin.token").read().strip()
context = ssl.create_default_context(cafile="/etc/ovn4nfv-lab/ca.crt")
deadline = time.monotonic() + 20
while True:
    try:
        request = urllib.request.Request(%r, headers={"Authorization": "Bearer " + token})
        urllib.request.urlopen(request, timeout=2, context=context).read()
        break
    except urllib.error.HTTPError:
        raise
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
"""


def run_pods(nodes=None):
    """Pods on each worker (or on ``nodes``), the way kubelet would make
    them; a pod the API has already is given its interfaces again."""
    made = []
    for node, pod, networks, labels in pods():
        if nodes is not None and node not in nodes:
            continue
        made.append(kubelet(node, "run", pod, networks, json.dumps(labels), json.dumps(SYSCTLS.get(pod, {}))))
    kubelet(lab_layout().workers[0], "service", json.dumps(service()))
    return made


def kubelet(node, *argv):
    """lab/kubelet.py on ``node``; its JSON answer."""
    name = container(node)
    podman("cp", os.path.join(HERE, "kubelet.py"), name + ":/usr/local/bin/lab-kubelet")
    result = exec_in(name, "python3", "/usr/local/bin/lab-kubelet", *argv, check=False)
    if result.returncode:
        print(underlay_state(), flush=True)
        raise SystemExit("lab: kubelet %s on %s failed (exit %d): %s" % (
            " ".join(argv[:2]), node, result.returncode, result.stderr.strip()[-3000:]))
    return json.loads(result.stdout)


UNDERLAY_COMMANDS = [["ip", "-br", "addr"], ["ip", "route"], ["ip", "neigh"],
                     ["ovs-vsctl", "list-ports", "br-phy"], ["ovs-appctl", "fdb/show", "br-phy"]]


def underlay_state():
    """What each node's underlay looks like, for a failure report."""
    out = []
    lab = lab_set()
    for name, (hostname, _networks) in lab.nodes.items():
        if name in lab.tx_off or name == lab.api:      # no underlay of theirs
            continue
        for argv in UNDERLAY_COMMANDS:
            result = exec_in(name, *argv, check=False)
            out.append("== %s: %s\n%s%s" % (hostname, " ".join(argv), result.stdout, result.stderr))
    return "\n".join(out)


def topology_text():
    master = container(lab_layout().central[0])
    nb = exec_in(master, "ovn-nbctl", "--no-leader-only", "show", check=False).stdout
    sb = exec_in(master, "ovn-sbctl", "--no-leader-only", "show", check=False).stdout
    return nb + sb


ROW_KINDS = ("service", "chain", "tap")


def matrix(proc, kind="link"):
    """verify.yml's rows of ``kind``: ``link`` (the connectivity matrix),
    or ``service``, ``chain``, ``tap`` (rows that read ``OK   <kind> ...``)."""
    lines = []
    for line in proc.stdout.splitlines():
        match = re.search(r'"((?:OK|FAIL) .*)",?$', line.strip())
        if match:
            word = match.group(1).split()[1]
            if (word if word in ROW_KINDS else "link") == kind:
                lines.append(match.group(1))
    return lines


def traces(proc):
    """verify.yml's trace of each broken link: ``<link> trace: <hops> | <verdict>``."""
    return [m.group(1) for m in (re.search(r'"(\S+ -> \S+ .* trace: .*)",?$', line.strip())
                                 for line in proc.stdout.splitlines()) if m]


def draw():
    """playbooks/topology.yml: the lab as a picture (SVG and a page) in
    .cache/lab/topology; returns the line that says where it is."""
    _s, _r, proc = playbook("topology.yml", "-e", "topology_dest=" + os.path.join(STATE, "topology"),
                            "-e", json.dumps({"topology_title": "ovn4nfv.k8s lab"}))
    found = [m.group(1) for m in (re.search(r'"(picture: \S+)",?$', line.strip())
                                  for line in proc.stdout.splitlines()) if m]
    return found[0] if found else "none"


def deletion_check():
    """A backend deleted stops receiving traffic, and a chain whose function
    is deleted fails closed, then mends when it is back: delete web-w2 and
    fwd-w2 as kubelet and kubectl would, run verify.yml with them named as
    deleted, make them again and run verify.yml once more. Returns the
    service and chain rows of those two runs that say so."""
    gone = with_labels(seed("FWD")) + [(node_of("web-w2"), "web-w2")]
    for node, pod in gone:
        kubelet(node, "delete", pod)
    try:
        _s, _r, deleted = playbook("verify.yml", *verify_vars([pod for _node, pod in gone]), check=False)
    finally:
        run_pods(sorted(set(node for node, _pod in gone)))
    _s, _r, back = playbook("verify.yml", *verify_vars(), check=False)
    for name, proc in (("verify-deleted", deleted), ("verify-back", back)):
        with open(os.path.join(STATE, name + ".log"), "w") as handle:
            handle.write(proc.stdout)
    service = [r for r in matrix(deleted, "service") if " deleted " in r]
    closed = [r for r in matrix(deleted, "chain") if " closed:" in r]
    mended = [r.replace(" crossed ", " mended, crossed ", 1) for r in matrix(back, "chain") if " crossed " in r]
    # a row verify.yml did not print is a check that did not pass
    missing = "FAIL %s: no %s row in " + os.path.join(STATE, "%s.log")
    return {"service": service or [missing % ("service", "deleted backend", "verify-deleted")],
            "chain": (closed or [missing % ("chain", "closed", "verify-deleted")])
            + (mended or [missing % ("chain", "crossed", "verify-back")])}


def run_all():
    phases = {}

    def phase(name, function, *args, **kwargs):
        started = time.monotonic()
        value = function(*args, **kwargs)
        phases[name] = time.monotonic() - started
        log("%s: %.1fs" % (name, phases[name]))
        return value

    phase("install", install_host_packages)
    lab = lab_set()
    releases = lab.releases(debian_default())
    phase("image", build_images, releases.values())
    phase("containers", up)
    phase("api", start_api)
    phase("site", playbook, "site.yml")
    phase("networks", playbook, "networks.yml")
    pods = phase("pods", run_pods)
    phase("workloads", playbook, WORKLOADS)
    _s, _r, verify = phase("verify", playbook, "verify.yml", *verify_vars(), check=False)
    after = phase("deletions", deletion_check)
    services = matrix(verify, "service") + after["service"]
    chains, taps = matrix(verify, "chain") + after["chain"], matrix(verify, "tap")
    picture = phase("picture", draw)
    rerun_s, recap, _p = phase("rerun", playbook, "site.yml")
    _w, recap_w, _p = phase("rerun-workloads", playbook, WORKLOADS)
    rows = matrix(verify)
    print("\n".join(["", "== connectivity matrix"] + rows))
    print("\n".join(["", "== services"] + services + ["", "== chains"] + chains + ["", "== taps"] + taps))
    print("\n== topology\n" + topology_text())
    print("== phases: " + " ".join("%s=%.1fs" % kv for kv in phases.items()))
    print("== picture: " + picture)
    print("== pods: " + ", ".join("%s@%s %s" % (p["pod"], p["node"], " ".join(p["ips"])) for p in pods))
    ok = sum(1 for r in rows if r.startswith("OK"))
    changed = sum(h.get("changed", 0) for h in list(recap.values()) + list(recap_w.values()))
    deploy = sum(phases[k] for k in ("install", "image", "containers", "api", "site", "networks", "pods",
                                     "workloads"))
    # what each node runs as PID 1, read from the node
    init = sorted(set(exec_in(name, "ps", "-p", "1", "-o", "comm=").stdout.strip() for name in lab.nodes))
    if verify.returncode:
        print("verify.yml failed; see %s" % os.path.join(STATE, "verify.yml.log"))
    print("== debian: " + " ".join("%s=%s" % (lab.nodes[n][0], r) for n, r in sorted(releases.items())))
    counts = dict((name, (sum(1 for r in found if r.startswith("OK")), len(found)))
                  for name, found in (("services", services), ("chains", chains), ("taps", taps)))
    print("lab: pods=%d links_ok=%d/%d deploy_s=%.0f rerun_s=%.0f rerun_changed=%d pid1=%s debian=%s "
          "services_ok=%d/%d chains_ok=%d/%d taps_ok=%d/%d" % (
              len(pods), ok, len(rows), deploy, rerun_s, changed, ",".join(init), debian_default(),
              counts["services"][0], counts["services"][1], counts["chains"][0], counts["chains"][1],
              counts["taps"][0], counts["taps"][1]))
    return 0 if verify.returncode == 0 and ok == len(rows) and rows and changed == 0 and init == ["systemd"] \
        and all(total and good == total for good, total in counts.values()) else 1


AUDIT_LINE = re.compile(r'"((?:WARNING|ERROR|REPAIRED) .*)",?$')
WATCHER_UNIT, AGENT_UNIT = "ovn4nfv-watcher", "ovn4nfv-agent"
VICTIM = "chaos-victim"


def victim_node():
    """chaos's victim pod sits on the second worker."""
    return lab_layout().workers[1]


def audit_lines(*extra):
    """audit.yml's finding and repair lines (it is told not to fail)."""
    _seconds, _recap, proc = playbook("audit.yml", "-e", "audit_fail=false", *extra, check=False)
    if proc.returncode:
        raise SystemExit("lab: audit.yml failed; see %s" % os.path.join(STATE, "audit.yml.log"))
    return [m.group(1) for m in (AUDIT_LINE.search(line.strip()) for line in proc.stdout.splitlines()) if m]


def injections():
    """One fault of each kind the lab can produce, made by hand on the
    running lab: ``[(what, finding class, a word its line carries)]``."""
    lay = lab_layout()
    victim, first, second = victim_node(), container(lay.workers[0]), container(lay.workers[1])
    master = container(lay.central[0])
    ports = exec_in(master, "ovn-nbctl", "--bare", "--columns=name", "find", "Logical_Switch_Port",
                    "external_ids:ovn4nfv-pod-name=pod-w1a").stdout.split()
    made = [("a pod's port deleted by hand", "missing_port", ports[0])]
    exec_in(master, "ovn-nbctl", "lsp-del", ports[0])
    kubelet(victim, "vanish", VICTIM)
    made.append(("a pod's namespace gone without a CNI DEL", "dead_interface", VICTIM))
    ghost = str(uuid.uuid4())
    exec_in(first, "ovs-vsctl", "add-port", "br-int", "chaos-stray", "--", "set", "Interface",
            "chaos-stray", "type=internal", "external_ids:iface-id=default_chaos-ghost_eth0",
            "external_ids:ovn4nfv-container-id=chaos", "external_ids:ovn4nfv-pod-uid=" + ghost)
    made.append(("a stray OVS port, a gone pod's", "stray_interface", "chaos-stray"))
    exec_in(master, "ovn-sbctl", "chassis-add", "chaos-gone", "geneve", lay.underlay_address(99))
    made.append(("a chassis whose node is gone", "stale_chassis", "chaos-gone"))
    exec_in(second, "ip", "link", "set", "br-phy", "down")
    made.append(("%s's tunnel down (br-phy)" % lay.workers[1], "tunnel_down", "br-phy"))
    return made


def chaos():
    """Break the running lab on purpose, one fault of each kind (see
    :func:`injections`), then audit, repair, audit again and run
    verify.yml. ``clean_after`` counts what the audit finds after the
    repair and did not find before the faults were made (a mixed-release
    lab's version_skew stands before and after, and is printed, not
    counted). The daemons that mend some of these on their own in time
    (the watcher's resync, the node agents' sweep) are stopped while the
    faults are made and mended, so that what is found and repaired is the
    audit's doing and the count is exact; they start again before
    verify.yml. Prints
    ``chaos: injected=<n> found=<k> repaired=<r> clean_after=<yes|no> links_ok=<a>/<b>``."""
    lay = lab_layout()
    kubelet(victim_node(), "run", VICTIM, seed("NET1"), "{}", "{}")
    before = audit_lines()
    units = [(container(host), WATCHER_UNIT) for host in lay.masters]
    units += [(name, AGENT_UNIT) for name in lay.kube]
    try:
        for name, unit in units:
            exec_in(name, "systemctl", "stop", unit)
        made = injections()
        found_lines = audit_lines()
        repaired_lines = [line for line in audit_lines("-e", "audit_state=repaired") if line.startswith("REPAIRED")]
        after = audit_lines()
    finally:
        for name, unit in units:
            exec_in(name, "systemctl", "start", unit, check=False)
        kubelet(victim_node(), "delete", VICTIM)
        exec_in(container(lay.workers[1]), "ip", "link", "set", "br-phy", "up", check=False)

    def seen(lines, kind, word):
        return any((" %s: " % kind) in line and word in line for line in lines)
    found = [m for m in made if seen(found_lines, m[1], m[2])]
    repaired = [m for m in found if not seen(after, m[1], m[2])]
    _s, _r, verify = playbook("verify.yml", *verify_vars(), check=False)
    rows = matrix(verify)
    ok = sum(1 for r in rows if r.startswith("OK"))
    left = [line for line in after if line not in before]
    said = ["%s: %s (%s)" % ("found" if m in found else "MISSED", m[0], m[1]) for m in made]
    report = ["", "== standing before chaos (not injected, not counted)"] + before + ["", "== injected"] + said
    report += ["", "== found"] + found_lines + ["", "== repaired"] + repaired_lines + ["", "== after"] + after
    print("\n".join(report + ["", "== connectivity matrix"] + rows + traces(verify)))
    print("chaos: injected=%d found=%d repaired=%d clean_after=%s links_ok=%d/%d" % (
        len(made), len(found), len(repaired), "yes" if not left else "no", ok, len(rows)))
    return 0 if len(found) == len(made) and not left and rows and ok == len(rows) else 1


def reboot(node, tries=5):
    """Restart ``node``'s container (systemd shuts down and boots again; no
    Ansible runs), re-create its pods as kubelet would, and run verify.yml
    until every link, the Service, the chain and the tap are OK (at most
    ``tries`` times). Prints
    ``reboot: node=<name> back_s=<x> links_ok=<k>/<m> checks_ok=<s>/<t>``,
    back_s from the restart to everything OK."""
    name = container(node)
    started = time.monotonic()
    podman("restart", "--time", "30", name, capture=True)
    wait_booted(name)
    run_pods([node])
    for attempt in range(tries):
        _seconds, _recap, verify = playbook("verify.yml", *verify_vars(), check=False)
        rows = matrix(verify)
        services = matrix(verify, "service") + matrix(verify, "chain") + matrix(verify, "tap")
        ok = sum(1 for row in rows if row.startswith("OK"))
        services_ok = sum(1 for row in services if row.startswith("OK"))
        if rows and ok == len(rows) and services_ok == len(services) and verify.returncode == 0:
            break
        log("reboot: verify %d of %d: %d/%d links, %d/%d service, chain and tap checks OK" % (
            attempt + 1, tries, ok, len(rows), services_ok, len(services)))
    back = time.monotonic() - started
    print("\n".join(rows + services))
    print("reboot: node=%s back_s=%.0f links_ok=%d/%d checks_ok=%d/%d" % (
        node, back, ok, len(rows), services_ok, len(services)))
    return 0 if rows and ok == len(rows) and services_ok == len(services) else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=["lab"] + sorted(SETS), default="lab",
                        help="which containers up, down and api act on (the molecule scenarios' own "
                             "sets; the other commands are the lab's)")
    parser.add_argument("command", choices=["deps", "image", "up", "down", "api", "site", "networks",
                                            "pods", "verify", "reset", "audit", "picture", "run", "reboot",
                                            "chaos",
                                            "core-tests"])
    parser.add_argument("node", nargs="?", help="reboot: the node (master, worker1, ...)")
    parser.add_argument("--repair", action="store_true",
                        help="audit: also mend what the product owns (audit_state=repaired)")
    parser.add_argument("--debian", choices=list(RELEASES) + ["mixed"],
                        help="the nodes' Debian release (default: $OVN4NFV_DEBIAN, else %s)" % DEFAULT_RELEASE)
    parser.add_argument("--inventory", help="the lab's inventory (default: $OVN4NFV_LAB_INVENTORY, else the one "
                        "the running lab was made from, else playbooks/inventory/example.yml)")
    args = parser.parse_args(argv)
    if args.debian:
        os.environ["OVN4NFV_DEBIAN"] = args.debian
    if args.inventory:
        os.environ["OVN4NFV_LAB_INVENTORY"] = os.path.abspath(args.inventory)
    if args.command in ("site", "networks", "verify", "reset", "audit"):
        extra = verify_vars() if args.command == "verify" else ()
        if args.command == "audit":
            extra = ("-e", "audit_state=repaired" if args.repair else "audit_state=audited")
        seconds, recap, proc = playbook(args.command + ".yml", *extra, check=False)
        if args.command == "verify":
            print("\n".join(matrix(proc) + [r for kind in ROW_KINDS for r in matrix(proc, kind)] + traces(proc)))
        if args.command == "audit":
            found = (re.search(r'"((?:WARNING|ERROR|REPAIRED|skipped) .*)",?$', line.strip())
                     for line in proc.stdout.splitlines())
            print("\n".join(m.group(1) for m in found if m))
        for line in proc.stdout.splitlines():
            if line.startswith("[ERROR]: Task failed: Action failed: "):
                print(line[len("[ERROR]: Task failed: Action failed: "):].strip())
        print("%s: %.1fs rc=%d %s" % (args.command, seconds, proc.returncode, json.dumps(recap)))
        return proc.returncode
    if args.command == "run":
        return run_all()
    if args.command == "chaos":
        return chaos()
    if args.command == "picture":
        print(draw())
        return 0
    if args.command == "core-tests":
        install_host_packages()
        return core_tests(debian_default())
    if args.command == "reboot":
        if args.node not in lab_layout().hosts():
            parser.error("reboot needs one of the lab's nodes: %s" % ", ".join(lab_layout().hosts()))
        return reboot(args.node)
    if args.command == "down":
        down(args.set)
    elif args.command == "api":
        start_api(lab_set(args.set))
    elif args.command == "pods":
        print(json.dumps(run_pods()))
        playbook(WORKLOADS)
    else:               # deps, image, up: each step includes those before it
        install_host_packages()
        if args.command in ("image", "up"):
            build_images(lab_set(args.set).releases(debian_default()).values())
        if args.command == "up":
            up(lab_set(args.set))
    return 0


if __name__ == "__main__":
    sys.exit(main())
