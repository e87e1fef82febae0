"""CI job: the core's unit and functional tests on one Debian release's own
Python packages, OVS and OVN (``make test-debian13``: Debian 13's Python
3.13, python3-ovsdbapp, -pyroute2, -netaddr and -kubernetes, OVS 3.5, OVN
25.03).

They run in a container of the lab's node image of that release (built by
the lab's image room, lab/host.py) plus Debian's pytest
(.ci/Containerfile.core-tests), with no network but its own loopback, the
working tree mounted read-only. Run from the checkout's root with it on the
module path: ``PYTHONPATH=. python3 .ci/core_tests.py [--debian trixie]``.
The exit code is pytest's.
"""

import argparse
import os
import subprocess
import sys

from lab import host

CONTAINERFILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Containerfile.core-tests")
PATHS = ("tests/unit", "tests/functional")
# CI tooling that needs ansible-playbook, Ansible's module packaging
# (ansible-core), which the node image lacks, and the tiers behind a real
# containerd's CRI client (grpcio): the runtime, and the lab's kubelet
# (lab/kubelet.py), which is no part of the core, and upgrade.yml's template
# rendered by Jinja2 (ansible-core's): all run in the venv's suite
IGNORED = ("tests/functional/test_failure_summary.py", "tests/unit/test_payload.py",
           "tests/functional/test_cri_runtime.py", "tests/functional/test_lab_kubelet.py",
           "tests/unit/test_upgrade_playbook.py")


def test_image(release):
    """The node image of ``release`` with Debian's pytest on top, built
    again when either changed."""
    host.build_images([release])
    salt = host.image_id(host.node_image(release)).encode()
    return host.build_image("localhost/ovn4nfv-coretest:" + release, CONTAINERFILE, release, salt=salt)


def in_container(image, purpose):
    """The command that runs what follows it in a container of ``image``
    (labelled ``purpose``): no network but its own loopback, the working
    tree mounted read-only as its working directory (``benchmarks/watcher.py``
    runs its Debian 13 leg so too)."""
    return ["podman", "run", "--rm", "--privileged", "--network", "none", "--label", host.LABEL + "=" + purpose,
            "-v", "%s:/src:ro" % host.ROOT, "-w", "/src", "-e", "PYTHONDONTWRITEBYTECODE=1", image]


def core_tests(release, paths=PATHS):
    """pytest in a container of :func:`test_image`; its exit code."""
    image = test_image(release)
    argv = in_container(image, "core-tests") + [
        "python3", "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"]
    argv += list(paths)
    for ignored in IGNORED:
        argv += ["--ignore", ignored]
    host.log("the core's tests on Debian %s's packages" % release)
    return subprocess.run(argv, check=False, timeout=3600).returncode


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--debian", choices=host.RELEASES, default="trixie",
                        help="the Debian release whose packages the core is tested on")
    parser.add_argument("paths", nargs="*", default=list(PATHS), help="what pytest runs (default: %(default)s)")
    args = parser.parse_args(argv)
    host.install_host_packages()
    return core_tests(args.debian, args.paths)


if __name__ == "__main__":
    sys.exit(main())
