"""Shared fixtures: the collection on an import path, and real daemons.

The working tree is exposed as ``ansible_collections/ovn4nfv/k8s`` through
a symlink in a temporary directory (:mod:`tests.harness.collection`), so
that tests, ``ansible-playbook`` and ``ansible-doc`` all use the code as it
is, not an installed copy. The checkout's root is on ``sys.path``
(``pythonpath = .`` in pytest.ini): shared code is imported as
``tests.harness.<name>``.
"""

import pytest

from tests.harness import collection
from tests.harness.sandbox import Sandbox

COLLECTIONS = collection.importable()


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
    # each pytest process, xdist's workers too, made its own tree
    collection.discard()
