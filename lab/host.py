"""The machine and the images: what the host must have installed, and the
node image of each Debian release, built from Debian's packages.

Also the lab's plumbing every room uses: where its files are, its log
line, and a subprocess that fails with the command's own words.
"""

import hashlib
import os
import shutil
import subprocess
import tempfile

from lab.guest import build as guest_build

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

CONTAINERS_CONF = """\
# Written by ovn4nfv.k8s's lab: runc (crun refuses this machine's hybrid
# cgroups) and ulimits below the hard limit (raising them is refused).
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
"""
HOST_PACKAGES = ["podman", "runc", "debootstrap", "catatonit", "netavark", "aardvark-dns"]


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


KUBELET_DIR = "/usr/local/lib/ovn4nfv-lab"


def kubelet_argv(name, tool="kubelet.py"):
    """lab/kubelet.py and its CRI client copied into the container
    ``name``, the client where the kubelet imports it from
    (``tests.harness.cri``, as everywhere), with lab/virt.py (KubeVirt's
    part; its vmm.py is the node image's), lab/steady.py (a migration's
    probe), lab/creator.py (the failover's) and lab/flows.py (an
    upgrade's traffic) beside it; the command that
    runs the kubelet (or ``tool``) there."""
    staged = os.path.join(STATE, "kubelet")
    harness = os.path.join(staged, "tests", "harness")
    os.makedirs(harness, exist_ok=True)
    for package in (os.path.dirname(harness), harness):
        open(os.path.join(package, "__init__.py"), "w").close()
    for script in ("kubelet.py", "virt.py", "steady.py", "creator.py", "flows.py"):
        shutil.copy(os.path.join(HERE, script), staged)
    # and the tests' frame maker (lab providers' trunk row, in a pod and on the fabric)
    for module in ("cri.py", "frames.py"):
        shutil.copy(os.path.join(ROOT, "tests", "harness", module), harness)
    podman("cp", staged + "/.", "%s:%s" % (name, KUBELET_DIR))     # one copy of the tree, as before of the file
    return ["python3", KUBELET_DIR + "/" + tool]


def exec_in(name, *argv, check=True):
    """``argv`` in the container ``name``; its output captured."""
    return podman("exec", name, *argv, capture=True, check=check)


def install_host_packages():
    """Debian's podman and what it needs, and a containers.conf this
    machine's kernel and limits accept (the one before it is kept)."""
    missing = [p for p in HOST_PACKAGES
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


def build_image(tag, containerfile, release, salt=b""):
    """``containerfile`` built as ``tag`` with the build argument
    ``DEBIAN=release``, again only when the file (or ``salt``: what it is
    built on) changed since the image was built; the image is labelled
    with that digest."""
    with open(containerfile, "rb") as handle:
        digest = hashlib.sha256(handle.read() + salt).hexdigest()[:16]
    built = podman("image", "inspect", "--format", "{{index .Labels \"ovn4nfv.containerfile\"}}",
                   tag, capture=True, check=False).stdout.strip()
    if built != digest:
        log("building %s" % tag)
        podman("build", "--quiet", "--build-arg", "DEBIAN=" + release,
               "--label", "ovn4nfv.containerfile=" + digest, "-t", tag,
               "-f", containerfile, os.path.dirname(containerfile))
    return tag


def node_salt():
    """What the node image holds besides the Containerfile's packages: the
    VM guest (lab/guest/build.py: built here first, once for every
    release, or found current) and lab/vmm.py, both copied in from the
    build context; the image is built again when either changed."""
    manifest = guest_build.build()
    with open(os.path.join(HERE, "vmm.py"), "rb") as handle:
        return manifest["key"].encode() + hashlib.sha256(handle.read()).hexdigest().encode()


def build_images(releases=(DEFAULT_RELEASE,)):
    """The node image of each release: a debootstrap of Debian (minbase),
    then lab/Containerfile on top, built again only when the Containerfile
    (or the guest, or vmm.py) changed."""
    salt = node_salt()
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
        build_image(node_image(release), os.path.join(HERE, "Containerfile"), release, salt=salt)


def image_id(tag):
    return podman("image", "inspect", "--format", "{{.Id}}", tag, capture=True).stdout.strip()
