"""Running the collection's playbooks against the lab, and reading their
output: the recap, verify.yml's rows (links, Services, chains, taps,
policies) and traces, audit.yml's findings.
"""

import json
import os
import re
import subprocess
import sys
import time

from lab.host import ROOT

ROW_KINDS = ("service", "chain", "tap", "policy", "vm")
AUDIT_LINE = re.compile(r'"((?:WARNING|ERROR|REPAIRED) .*)",?$')
AUDIT_SHOWN = re.compile(r'"((?:WARNING|ERROR|REPAIRED|skipped) .*)",?$')
FAILED_TASK = "[ERROR]: Task failed: Action failed: "
# the inventories' ansible_connection, podman_nsenter
CONNECTION_PLUGINS = os.path.join(ROOT, "lab", "connection_plugins")


def inventories(session):
    """The lab's inventory and, beside it, how Ansible reaches the lab's
    containers and API (made from the lab's layout)."""
    lay = session.layout
    path = session.path("inventory.lab.yml")
    with open(path, "w") as handle:
        json.dump(lay.connection_inventory(session.path("api-lab")), handle, indent=2)
    return [lay.inventory, path]


def collections_path(session):
    """A collections tree whose ovn4nfv/k8s is this working tree, kept in
    the lab's state (the harness makes it)."""
    from tests.harness import collection
    return collection.build(session.path("collections"))


def playbook(session, name, *extra, check=True):
    """Run a playbook of the collection (or the one at the absolute path
    ``name``) against the lab; return (seconds, recap {host: {ok, changed,
    failed...}}, output). The output is kept in the lab's state as
    ``<playbook>.log``."""
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(session),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_PIPELINING="True", ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_CONNECTION_PLUGINS=CONNECTION_PLUGINS,
               PATH=bindir + ":" + os.environ.get("PATH", ""))
    argv = [os.path.join(bindir, "ansible-playbook")]
    for inventory in inventories(session):
        argv += ["-i", inventory]
    argv += [name if os.path.isabs(name) else os.path.join(ROOT, "playbooks", name)] + list(extra)
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=1800, check=False)
    seconds = time.monotonic() - started
    logged = session.path(os.path.basename(name) + ".log")
    with open(logged, "w") as handle:
        handle.write(proc.stdout)
    if check and proc.returncode:
        sys.stdout.write(proc.stdout[-6000:])
        raise SystemExit("lab: %s failed (exit %d); the whole output is in %s" % (name, proc.returncode, logged))
    return seconds, recap(proc), proc


def recap(proc):
    """The play recap: ``{host: {ok, changed, failed, ...}}``."""
    found = {}
    for line in proc.stdout.splitlines():
        match = re.match(r"^(\S+)\s+:\s+(.*)$", line)
        if match and "ok=" in match.group(2):
            found[match.group(1)] = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", match.group(2)))
    return found


def changed(*recaps):
    """How many tasks changed something, over every host of ``recaps``."""
    return sum(h.get("changed", 0) for one in recaps for h in one.values())


def matrix(proc, kind="link"):
    """verify.yml's rows of ``kind``: ``link`` (the connectivity matrix),
    or ``service``, ``chain``, ``tap``, ``policy`` (rows that read ``OK   <kind> ...``)."""
    lines = []
    for line in proc.stdout.splitlines():
        match = re.search(r'"((?:OK|FAIL) .*)",?$', line.strip())
        if match:
            word = match.group(1).split()[1]
            if (word if word in ROW_KINDS else "link") == kind:
                lines.append(match.group(1))
    return lines


def every_row(proc):
    """Every row verify.yml printed: links, then each kind of ROW_KINDS."""
    return matrix(proc) + [row for kind in ROW_KINDS for row in matrix(proc, kind)]


def traces(proc):
    """verify.yml's trace of each broken link: ``<link> trace: <hops> | <verdict>``."""
    return [m.group(1) for m in (re.search(r'"(\S+ -> \S+ .* trace: .*)",?$', line.strip())
                                 for line in proc.stdout.splitlines()) if m]


def audit_findings(proc, pattern=AUDIT_LINE):
    """audit.yml's finding and repair lines (``pattern``: which)."""
    return [m.group(1) for m in (pattern.search(line.strip()) for line in proc.stdout.splitlines()) if m]


def failed_tasks(proc):
    """What each failed task said."""
    return [line[len(FAILED_TASK):].strip() for line in proc.stdout.splitlines() if line.startswith(FAILED_TASK)]


def picture_line(proc):
    """topology.yml's ``picture: <where>`` line, or ``none``."""
    found = [m.group(1) for m in (re.search(r'"(picture: \S+)",?$', line.strip())
                                  for line in proc.stdout.splitlines()) if m]
    return found[0] if found else "none"
