# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's Ansible connection to its podman nodes: nsenter into the
container's namespaces, with pipelining.

containers.podman.podman runs ``podman exec`` three or four times a task
(it refuses pipelining), and each costs about 0.3 s of CPU; on the two
cores CI has, that was most of every converge. This enters the namespaces
of the container's PID 1 (mount, UTS, IPC, network, PID, cgroup) straight
from the controller, with the container's root and a clean environment
(nothing of the controller's leaks in), so a task is one short process on
the node. Measured: 25 tasks on one node, 36 s with podman exec, 13 s
without pipelining, less with it (lab.rst, "How Ansible reaches the
nodes").

Ansible finds it through ANSIBLE_CONNECTION_PLUGINS (lab/playbooks.py and
the molecule scenarios set it); ``ansible_host`` is the container's name.
"""

from __future__ import annotations

DOCUMENTATION = """
    name: podman_nsenter
    short_description: run tasks in a lab node's podman container through nsenter
    description:
        - Enters the namespaces of the container's first process with nsenter, as root, with the container's
          root directory and an environment of its own.
    author: ovn4nfv.k8s developers
    options:
        podman_executable:
            description: The podman binary that names the container's first process.
            default: podman
            vars:
                - name: ansible_podman_executable
    extends_documentation_fragment:
        - connection_pipelining
"""

import shlex
import subprocess

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.connection import local

NAMESPACES = ("--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup")
# what a process started by the node's init would see, not the controller's
ENVIRONMENT = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8")


class Connection(local.Connection):
    """local's process handling and pipelining, each command entered into
    the container ``remote_addr`` names."""

    transport = "podman_nsenter"
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pid = None

    def _connect(self):
        if self._pid is None:
            container = self._play_context.remote_addr
            try:
                proc = subprocess.run([self.get_option("podman_executable"), "container", "inspect",
                                       "--format", "{{.State.Pid}}", container],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise AnsibleConnectionFailure("podman inspect %s: %s" % (container, exc)) from exc
            pid = to_text(proc.stdout).strip()
            if proc.returncode or not pid.isdigit() or pid == "0":
                raise AnsibleConnectionFailure("container %s is not running: %s"
                                               % (container, to_text(proc.stderr).strip() or pid))
            self._pid = pid
        return super()._connect()

    def _entered(self, cmd):
        """``cmd`` (a shell string, as the action plugins give it) run in the
        container, with the container's root and working directory."""
        prefix = ["nsenter", "--target=" + self._pid] + list(NAMESPACES) + ["--root", "--wd", "--",
                                                                            "/usr/bin/env", "-i"]
        prefix += list(ENVIRONMENT)
        if not isinstance(cmd, (str, bytes)):
            cmd = " ".join(shlex.quote(to_text(part)) for part in cmd)
        return " ".join(shlex.quote(part) for part in prefix) + " " + to_text(cmd)

    def exec_command(self, cmd, in_data=None, sudoable=True):
        self._connect()
        return super().exec_command(self._entered(cmd), in_data=in_data, sudoable=sudoable)

    def put_file(self, in_path, out_path):
        self._connect()
        with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as handle:
            data = handle.read()
        command = "/bin/sh -c %s" % shlex.quote("cat > " + shlex.quote(out_path))
        rc, _out, err = self.exec_command(command, in_data=data, sudoable=False)
        if rc:
            raise AnsibleError("copying %s to %s:%s failed: %s"
                               % (in_path, self._play_context.remote_addr, out_path, to_text(err).strip()))

    def fetch_file(self, in_path, out_path):
        self._connect()
        rc, out, err = self.exec_command("cat " + shlex.quote(in_path), sudoable=False)
        if rc:
            raise AnsibleError("fetching %s:%s failed: %s"
                               % (self._play_context.remote_addr, in_path, to_text(err).strip()))
        with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as handle:
            handle.write(out)
