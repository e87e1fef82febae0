"""CI's failure summary (.ci/failure_summary.py) on a real ansible-playbook
run: it names the task that failed and its message, and leaves out a
failure that was ignored."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PLAYBOOK = textwrap.dedent("""\
    - hosts: localhost
      gather_facts: false
      tasks:
        - name: A failure that is ignored
          ansible.builtin.command: "false"
          ignore_errors: true
        - name: A command that fails
          ansible.builtin.shell: "for i in $(seq 1 20); do echo line $i; done; echo broken >&2; exit 3"
    """)


def test_the_summary_names_the_failed_task_and_its_output(tmp_path):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default",
               PATH=bindir + ":" + os.environ.get("PATH", ""))
    with open(tmp_path / "run.log", "w") as log:
        play = subprocess.run([os.path.join(bindir, "ansible-playbook"), str(tmp_path / "play.yml")],
                              stdout=log, stderr=subprocess.STDOUT, env=env, timeout=120, check=False)
    assert play.returncode == 2

    summary = subprocess.run([sys.executable, os.path.join(ROOT, ".ci", "failure_summary.py"),
                              str(tmp_path / "run.log")], check=True, timeout=60,
                             stdout=subprocess.PIPE, universal_newlines=True).stdout
    assert "TASK [A command that fails]" in summary
    assert "rc: 3" in summary and "broken" in summary
    assert "line 20" in summary and "line 12" not in summary      # the output's last lines only
    assert "ignored" not in summary
