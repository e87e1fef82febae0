"""The daemons' settings (daemons/settings.py): what the environment
says is read as its default's type, and a value a setting cannot take is
refused naming it, before anything starts."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.settings import Settings
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.watcher_settings import Config


class Some(Settings):
    NAME = "some"
    ENV_PREFIX = "OVN4NFV_TEST_"
    DEFAULTS = {"flag": True, "count": 3, "seconds": 0.5, "name": None}


@pytest.mark.parametrize("text, value", [("false", False), ("0", False), ("No", False), ("off", False),
                                         ("true", True), ("1", True), ("yes", True), (" ON ", True)])
def test_booleans_from_the_environment(monkeypatch, text, value):
    monkeypatch.setenv("OVN4NFV_TEST_FLAG", text)
    assert Some().flag is value


def test_numbers_from_the_environment(monkeypatch):
    monkeypatch.setenv("OVN4NFV_TEST_COUNT", "7")
    monkeypatch.setenv("OVN4NFV_TEST_SECONDS", "1.25")
    some = Some()
    assert (some.count, some.seconds) == (7, 1.25)


@pytest.mark.parametrize("where", ["env", "file"])
def test_a_word_that_is_no_boolean_is_refused_naming_its_key(monkeypatch, where):
    if where == "env":
        monkeypatch.setenv("OVN4NFV_TEST_FLAG", "maybe")
        values = {}
    else:
        values = {"flag": "false"}      # a string in the JSON file, not false
    with pytest.raises(ValidationError, match="some config: flag: .* is not true or false"):
        Some(**values)


@pytest.mark.parametrize("values, field", [
    ({"lease_seconds": float("nan")}, "lease_seconds"),
    ({"retry_seconds": float("inf")}, "retry_seconds"),
    ({"lease_seconds": 2, "renew_seconds": 3}, "lease_seconds"),
    ({"renew_seconds": 0.5, "retry_seconds": 0.5}, "renew_seconds"),
    ({"nb_grace_seconds": 0}, "nb_grace_seconds"),
])
def test_the_watchers_election_durations_are_checked(values, field):
    with pytest.raises(ValidationError, match=field):
        Config(**values)


def test_the_watchers_defaults_hold():
    config = Config()
    assert config.leader_election is True
    assert (config.lease_seconds, config.renew_seconds, config.retry_seconds) == (6.0, 4.0, 0.5)
