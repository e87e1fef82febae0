"""``module_defaults`` reach every module through the collection's action
groups, as meta/runtime.yml declares them."""

import glob
import os

import yaml

from tests.harness.playbook import run_playbook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def group_members(groups, name):
    members = set()
    for entry in groups[name]:
        if isinstance(entry, dict):
            for extended in entry.get("metadata", {}).get("extend_group", []):
                members |= group_members(groups, extended.rpartition(".")[2])
        else:
            members.add(entry)
    return members


def test_every_ovsdb_module_is_in_the_ovsdb_group():
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as handle:
        groups = yaml.safe_load(handle)["action_groups"]
    speaks_ovsdb = set()
    for path in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")):
        with open(path) as handle:
            text = handle.read()
            if any(word in text for word in ("connection_argument_spec", "run_resource_module", "run_info_module")):
                speaks_ovsdb.add(os.path.basename(path)[:-3])
    assert "ovn_connection" in speaks_ovsdb
    assert speaks_ovsdb <= group_members(groups, "ovsdb"), speaks_ovsdb - group_members(groups, "ovsdb")
    # a group that sets db must not reach ovn_connection, whose db follows its database option
    assert "ovn_connection" not in group_members(groups, "ovn_nb") | group_members(groups, "ovs")


def test_ovsdb_group_defaults_reach_ovn_connection(collections_path, tmp_path):
    """TLS and timeout set once for group/ovsdb arrive at ovn_connection: a
    CA file that does not exist fails it, naming that file."""
    missing = str(tmp_path / "no-such-ca.pem")
    tasks = [{"name": "listener", "ignore_errors": True, "ovn4nfv.k8s.ovn_connection": {
        "database": "southbound", "db": "ssl:127.0.0.1:1", "state": "merged",
        "config": [{"target": "ptcp:6642:127.0.0.1"}]}}]
    defaults = {"group/ovn4nfv.k8s.ovsdb": {"private_key": missing, "certificate": missing, "ca_cert": missing}}
    results, proc = run_playbook(collections_path, tasks, module_defaults=defaults)
    result = results["listener"]
    assert result.get("failed") is True, proc.stdout[-3000:]
    assert missing in result["msg"], result["msg"]
