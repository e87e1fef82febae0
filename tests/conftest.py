"""Shared fixtures: the collection on an import path, and real daemons.

The working tree is exposed as ``ansible_collections/ovn4nfv/k8s`` through
a symlink in a temporary directory, so that tests, ``ansible-playbook`` and
``ansible-doc`` all use the code as it is, not an installed copy.
"""

import os
import shutil
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

COLLECTIONS = tempfile.mkdtemp(prefix="ovn4nfv-collections-")
os.makedirs(os.path.join(COLLECTIONS, "ansible_collections", "ovn4nfv"))
os.symlink(ROOT, os.path.join(COLLECTIONS, "ansible_collections", "ovn4nfv", "k8s"))
sys.path.insert(0, COLLECTIONS)

from sandbox import Sandbox  # noqa: E402  (needs the path above)


@pytest.fixture(scope="session")
def collections_path():
    return COLLECTIONS


@pytest.fixture
def sandbox():
    """Fresh OVS and OVN daemons for one test, stopped even if it fails."""
    box = Sandbox()
    try:
        yield box
    finally:
        box.stop()


def pytest_sessionfinish(session, exitstatus):
    # the link first, so that nothing can follow it into the tree; then the
    # directories (each pytest process, xdist's workers too, made its own)
    try:
        os.unlink(os.path.join(COLLECTIONS, "ansible_collections", "ovn4nfv", "k8s"))
    except OSError:
        pass
    shutil.rmtree(COLLECTIONS, ignore_errors=True)
