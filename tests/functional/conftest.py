"""Fixtures the functional tests share."""

import pytest

from tests.harness.watcher_env import Cluster


@pytest.fixture
def k8s(tmp_path, collections_path):
    """The watcher as a process against a real NB and the API stand-in;
    SIGTERM must stop it cleanly."""
    env = Cluster(str(tmp_path), collections_path)
    try:
        yield env
    finally:
        code = env.stop()
    assert code == 0, "SIGTERM must stop the watcher cleanly (exit %r)" % code
    assert env.api.denied == [], "the watcher asked for what its RBAC manifest does not grant"
