"""Run tasks through the real ``ansible-playbook`` and return their results.

Each task is registered; a last task writes every result to a JSON file,
so tests read exactly what a playbook author would see in ``register``.
"""

import json
import os
import subprocess
import sys
import tempfile

BIN = os.path.dirname(sys.executable)


def ansible_env(collections_path, home):
    env = dict(os.environ)
    env.update(
        ANSIBLE_COLLECTIONS_PATH=collections_path,
        ANSIBLE_HOME=home,
        ANSIBLE_LOCAL_TEMP=os.path.join(home, "tmp"),
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="false",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        PATH=BIN + os.pathsep + env.get("PATH", ""),
    )
    return env


def run_playbook(collections_path, tasks, extra_vars=None, module_defaults=None, diff=True,
                 timeout=300, netns=None, env=None):
    """Run ``tasks`` (a list of dicts, each with a ``name``) on localhost,
    inside the network namespace ``netns`` when given, with ``env`` added to
    ansible-playbook's environment.

    Returns ``(results, completed_process)``: ``results`` maps task name to
    its registered result.
    """
    with tempfile.TemporaryDirectory(prefix="ovn4nfv-play-") as work:
        registered = []
        play_tasks = []
        for index, task in enumerate(tasks):
            task = dict(task)
            var = task.setdefault("register", "task_%d" % index)
            registered.append((task["name"], var))
            play_tasks.append(task)
        out = os.path.join(work, "results.json")
        play_tasks.append({
            "name": "write results",
            "ansible.builtin.copy": {
                "dest": out,
                "content": "{{ {%s} | to_json }}" % ", ".join(
                    "%s: %s" % (json.dumps(name), var) for name, var in registered),
            },
        })
        play = [{"hosts": "localhost", "gather_facts": False, "connection": "local",
                 "module_defaults": module_defaults or {}, "tasks": play_tasks}]
        path = os.path.join(work, "play.yml")
        with open(path, "w") as handle:
            json.dump(play, handle)
        with open(os.path.join(work, "vars.json"), "w") as handle:
            json.dump(extra_vars or {}, handle)
        cmd = (["ip", "netns", "exec", netns] if netns else []) + [
            os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", path,
            "-e", "@" + os.path.join(work, "vars.json")]
        if diff:
            cmd.append("--diff")
        proc = subprocess.run(cmd, env=dict(ansible_env(collections_path, work), **(env or {})),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=timeout, check=False)
        if not os.path.exists(out):
            raise AssertionError("ansible-playbook did not finish:\n" + proc.stdout[-5000:])
        with open(out) as handle:
            return json.load(handle), proc
