"""One set of versions: the floors the core checks are the ones
requirements.txt declares, and an older library is refused by name."""

import os
import re

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import versions
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import Ovn4nfvError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_floors_are_the_requirements():
    with open(os.path.join(ROOT, "requirements.txt")) as handle:
        declared = dict(re.findall(r"^([A-Za-z0-9_.-]+)>=([0-9.]+)\s*$", handle.read(), re.M))
    assert declared == versions.FLOORS


@pytest.mark.parametrize("text,parsed", [("0.7.2", (0, 7, 2)), ("2.10.0", (2, 10, 0)), ("1.3.0.post1", (1, 3, 0)),
                                         ("35.0.0rc1", (35, 0, 0)), ("0.9.5a0", (0, 9, 5))])
def test_parse(text, parsed):
    assert versions.parse(text) == parsed


def test_newer_and_equal_pass_older_is_refused_by_name():
    assert versions.too_old("pyroute2", found="0.7.2") is None
    assert versions.too_old("pyroute2", found="0.10.1") is None
    assert versions.too_old("ovsdbapp", "2.10.0", found="2.9.1") == \
        "ovsdbapp 2.9.1 is installed; 2.10.0 or newer is needed"
    with pytest.raises(Ovn4nfvError) as caught:
        versions.require("netaddr", feature="exclude_ips ranges", found="0.7.19")
    assert str(caught.value) == "exclude_ips ranges: netaddr 0.7.19 is installed; 0.8.0 or newer is needed"


def test_the_libraries_this_python_runs_meet_their_floors():
    """Run by both the venv (newest releases) and Debian's python3 (the floors)."""
    for library in versions.FLOORS:
        if versions.installed(library) is not None:
            assert versions.too_old(library) is None, library
