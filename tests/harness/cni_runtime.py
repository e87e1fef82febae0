"""Calling CNI plugins the way a container runtime does: the command and
its arguments in CNI_* environment variables, the network configuration on
stdin, the result or error as JSON on stdout."""

import json
import os
import subprocess
import sys
import uuid


def install_plugin(bin_dir, collections, name="ovn4nfv", socket_path=None):
    """Write the ovn4nfv plugin executable into ``bin_dir``, as the cni role
    installs it (``-IS``: no environment, no site-packages), running the
    entry point from the working tree and naming the node agent's socket
    (by default ``bin_dir``/agent.sock).

    The tree ``collections`` is not put on the plugin's ``sys.path``: the
    ``ansible_collections`` namespace package is found in it alone and
    registered, so the core's modules are imported from under it and
    nothing else the plugin imports is looked for there (``-I`` would
    ignore ``PYTHONPATH`` anyway)."""
    path = os.path.join(bin_dir, name)
    socket_path = socket_path or os.path.join(bin_dir, "agent.sock")
    with open(path, "w") as handle:
        handle.write("#!%s -IS\nimport importlib.machinery, importlib.util, sys\n"
                     "spec = importlib.machinery.PathFinder.find_spec('ansible_collections', [%r])\n"
                     "sys.modules['ansible_collections'] = importlib.util.module_from_spec(spec)\n"
                     "from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cni import main\n"
                     "raise SystemExit(main(socket_path=%r))\n" % (sys.executable, collections, socket_path))
    os.chmod(path, 0o755)
    return path


def call(plugin, command, config, netns="", ifname="net0", container_id=None, args="", extra_env=None,
         stdin=None, timeout=60, node=None):
    """Run ``plugin`` (inside the network namespace ``node``, the node's,
    when given); return (exit code, parsed stdout, stderr)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": command,
           "CNI_CONTAINERID": container_id if container_id is not None else uuid.uuid4().hex,
           "CNI_NETNS": netns, "CNI_IFNAME": ifname, "CNI_ARGS": args,
           "CNI_PATH": os.path.dirname(plugin) + ":/usr/lib/cni"}
    env.update(extra_env or {})
    argv = (["ip", "netns", "exec", node] if node else []) + [plugin]
    proc = subprocess.run(argv, input=stdin if stdin is not None else json.dumps(config), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=timeout, check=False)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None, proc.stderr
