"""What the roles may move through the controller, read from their tasks.

The watcher molecule scenario proves the same at run time (a second run with
--diff -v whose output holds no credential and no private key); this test
names the task that would break it, before any node is started.
"""

import glob
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READS_TO_CONTROLLER = ("ansible.builtin.slurp", "ansible.builtin.fetch")
WRITES = ("ansible.builtin.copy", "ansible.builtin.template")
SECRET_WORDS = ("kubeconfig_content", "private_key", "privkey")


def tasks(items):
    for task in items or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from tasks(task.get(key))


def role_tasks():
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))):
        with open(path) as handle:
            for task in tasks(yaml.safe_load(handle)):
                yield os.path.relpath(path, ROOT), task


def test_only_public_files_travel_and_nothing_that_travels_is_hidden():
    found = 0
    for where, task in role_tasks():
        for module in READS_TO_CONTROLLER:
            if module in task:
                found += 1
                args = yaml.safe_dump(task[module])
                assert "privkey" not in args and "key.pem" not in args, (where, task["name"])
                # hidden output would hide a key from the run-time check
                assert not task.get("no_log"), (where, task["name"])
    assert found >= 2


def test_every_write_of_a_secret_is_kept_out_of_logs_and_diffs():
    found = 0
    for where, task in role_tasks():
        for module in WRITES:
            args = task.get(module)
            if not isinstance(args, dict):
                continue
            text = yaml.safe_dump(args)
            if any(word in text for word in SECRET_WORDS):
                found += 1
                assert task.get("no_log") is True, (where, task["name"])
                assert task.get("diff") is False, (where, task["name"])
                assert args.get("mode") == "0600" and args.get("owner") == "root", (where, task["name"])
    assert found >= 3


def test_role_options_that_carry_a_credential_are_no_log():
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        with open(path) as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        for entry in specs.values():
            for name, option in entry.get("options", {}).items():
                if name.endswith("kubeconfig_content"):
                    assert option.get("no_log") is True, (path, name)
