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
        become_success_timeout:
            description: Seconds to wait for become to succeed (the local connection's option).
            type: int
            default: 10
            vars:
                - name: ansible_local_become_success_timeout
        become_strip_preamble:
            description: Strip become's preamble from the output (the local connection's option).
            type: bool
            default: true
            vars:
                - name: ansible_local_become_strip_preamble
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


def _start_time(pid):
    """When process ``pid`` started (clock ticks since boot), or None."""
    try:
        with open("/proc/%s/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class Connection(local.Connection):
    """local's process handling and pipelining, each command entered into
    the container ``remote_addr`` names."""

    transport = "podman_nsenter"
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._first = None      # (pid, its start time): the container's first process

    def reset(self):
        self._first = None
        super().reset()

    def _container_pid(self):
        """The PID of the container's first process: asked of podman once
        a connection, and before each command checked to be the same
        process still (its start time, from /proc), else asked again: a
        container restarted within a task has another, and a PID reused
        could name a host process."""
        if self._first is not None and _start_time(self._first[0]) == self._first[1]:
            return self._first[0]
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
        self._first = (pid, _start_time(pid))
        return pid

    def _entered(self, cmd):
        """``cmd`` run by the container's shell, in the container's
        namespaces, root and working directory. The whole command is one
        quoted argument of that shell, whatever it holds (``raw``'s bare
        text too): nothing of it is read by the controller's shell."""
        if not isinstance(cmd, (str, bytes)):
            cmd = " ".join(shlex.quote(to_text(part)) for part in cmd)
        argv = ["nsenter", "--target=" + self._container_pid()] + list(NAMESPACES) + [
            "--root", "--wd", "--", "/usr/bin/env", "-i"] + list(ENVIRONMENT) + ["/bin/sh", "-c", to_text(cmd)]
        return " ".join(shlex.quote(part) for part in argv)

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
