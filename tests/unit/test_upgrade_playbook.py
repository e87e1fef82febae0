"""playbooks/upgrade.yml's own files, as Debian's tools and Ansible read
them: the policy-rc.d its template renders (run with sh, as invoke-rc.d
and deb-systemd-invoke run it), and the pattern of its preflight's find.
Jinja2 comes with ansible-core: these run in the venv's suite only."""

import os
import re
import subprocess

import jinja2
import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "playbooks")


def test_policy_rc_refuses_the_network_daemons_only(tmp_path):
    """The upgrade's policy-rc.d (playbooks/templates/policy-rc.d.j2 with
    playbooks/vars/upgrade.yml), run as invoke-rc.d and deb-systemd-invoke
    run it: the network's daemons are the playbook's to restart (101),
    every other one restarts as its package says (0)."""
    root = ROOT
    with open(os.path.join(root, "vars", "upgrade.yml")) as handle:
        values = yaml.safe_load(handle)
    saved = tmp_path / "policy-rc.d.saved"
    values["upgrade_policy_saved"] = str(saved)
    with open(os.path.join(root, "templates", "policy-rc.d.j2")) as handle:
        script = tmp_path / "policy-rc.d"
        script.write_text(jinja2.Template(handle.read()).render(**values))
    assert values["upgrade_policy_mark"] in script.read_text()

    def asked(*argv):
        return subprocess.run(["sh", str(script)] + list(argv), check=False, timeout=10).returncode
    for name in ("openvswitch-switch", "ovs-vswitchd.service", "ovn-controller", "ovn-ovsdb-server-sb.service",
                 "containerd.service", "ovn4nfv-agent.service", "ovn4nfv-uplink@br-phy.service"):
        assert asked(name, "restart") == 101, name
    assert asked("--quiet", "ovn-northd", "start") == 101
    for name in ("ssh", "ssh.service", "cron", "systemd-resolved.service", "ovsx", "my-ovn-controller"):
        assert asked(name, "restart") == 0, name
    # the node's own policy-rc.d, kept aside, answers for every other daemon
    saved.write_text("#!/bin/sh\n[ \"$1\" = --quiet ] && shift\n[ \"$1\" = cron ] && exit 101\nexit 0\n")
    saved.chmod(0o755)
    assert asked("cron", "restart") == 101 and asked("--quiet", "cron", "start") == 101
    assert asked("ssh", "restart") == 0 and asked("ovn-controller", "restart") == 101


def test_the_preflight_finds_other_apt_entries_of_the_old_release(tmp_path):
    """upgrade.yml's find pattern, as Ansible's find applies it (re.match,
    line by line): an entry that names the old release stops the run."""
    with open(os.path.join(ROOT, "upgrade.yml")) as handle:
        plays = yaml.safe_load(handle)
    task = next(t for play in plays for t in play.get("tasks", []) if "ansible.builtin.find" in t)
    pattern = re.compile(task["ansible.builtin.find"]["contains"].replace(
        "{{ upgrade_node.node.debian | regex_escape }}", "bookworm"))
    assert task["ansible.builtin.find"]["follow"] is True
    for line in ("deb http://deb.debian.org/debian bookworm main\n", "Suites: bookworm bookworm-updates\n",
                 "Suites:bookworm\n", "deb http://deb.debian.org/debian bookworm-proposed-updates main\n",
                 "deb-src http://security.debian.org/debian-security bookworm-security main\n"):
        assert pattern.match(line), line
    for line in ("# deb http://deb.debian.org/debian bookworm main\n", "Suites: trixie trixie-updates\n",
                 "Signed-By: /usr/share/keyrings/debian-archive-bookworm-stable.gpg\n",
                 "URIs: http://mirror.example/bookworm/debian\n"):
        assert not pattern.match(line), line
