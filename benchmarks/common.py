"""Shared by the benchmarks: the collection on a path, timed playbooks and
percentiles. Each benchmark runs as a module from the checkout's root
(``python -m benchmarks.<name>``), so that it imports the harness as
``tests.harness``.

A task's time is the wall time of ``ansible-playbook`` running it, minus
the wall time of an empty playbook measured in the same run, so that
Ansible's own start-up is not counted.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from tests.harness import collection
from tests.harness.playbook import ansible_env
from tests.harness.sandbox import Sandbox

__all__ = ["Ansible", "Sandbox", "cpu_seconds", "percentile"]


def percentile(values, fraction):
    """The value at ``fraction`` (0.5: the median, 0.99: p99) of ``values``,
    nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def cpu_seconds(pids):
    """CPU seconds (user and system) each of ``pids`` (``{label: pid}``)
    has used so far, read from ``/proc``; this process's own, as ``this``;
    and every process's on the host together, as ``host``."""
    out = {}
    for label, pid in pids.items():
        with open("/proc/%d/stat" % pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        out[label] = (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))
    times = os.times()
    out["this"] = times.user + times.system
    with open("/proc/stat") as handle:
        # user nice system idle iowait irq softirq steal: every process's busy time
        ticks = [int(v) for v in handle.readline().split()[1:9]]
    out["host"] = (sum(ticks) - ticks[3] - ticks[4]) / float(os.sysconf("SC_CLK_TCK"))
    return out


class Ansible:
    """Runs playbooks against the working tree, timing them."""

    def __init__(self):
        self.work = tempfile.mkdtemp(prefix="ovn4nfv-bench-")
        self.collections = collection.build(os.path.join(self.work, "collections"))
        self.env = ansible_env(self.collections, self.work)
        self._empty = None

    def run(self, tasks, extra_vars=None):
        """Run a play of ``tasks``; return its wall time in seconds."""
        play = [{"hosts": "localhost", "gather_facts": False, "connection": "local",
                 "tasks": tasks}]
        path = os.path.join(self.work, "play.json")
        with open(path, "w") as handle:
            json.dump(play, handle)
        vars_path = os.path.join(self.work, "vars.json")
        with open(vars_path, "w") as handle:
            json.dump(extra_vars or {}, handle)
        start = time.monotonic()
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                               "-i", "localhost,", path, "-e", "@" + vars_path],
                              env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=1800, check=False)
        elapsed = time.monotonic() - start
        if proc.returncode != 0:
            raise RuntimeError("ansible-playbook failed:\n" + proc.stdout[-3000:])
        return elapsed

    def empty(self):
        """Median wall time of an empty playbook (three runs)."""
        if self._empty is None:
            self._empty = statistics.median(self.run([]) for _i in range(3))
        return self._empty

    def task_time(self, tasks, extra_vars=None):
        return max(self.run(tasks, extra_vars) - self.empty(), 0.0)

    def close(self):
        subprocess.run(["rm", "-rf", self.work], check=False)
