"""Calling CNI plugins the way a container runtime does: the command and
its arguments in CNI_* environment variables, the network configuration on
stdin, the result or error as JSON on stdout.

Held to what containerd's CRI (libcni) passes by
``tests/functional/test_cri_runtime.py``: the same CNI_* variables, the
kubelet's CNI_ARGS keys (:func:`runtime_args`), and on DEL the ADD's
result as ``prevResult``, from a result cache kept as libcni keeps its own
(per network, container and interface; from CNI 0.4.0).
"""

import json
import os
import subprocess
import sys
import uuid

# libcni's result cache, for this process: (network, container, ifname) -> result
_RESULTS = {}
_CACHED_FROM = ("0.4.0", "1.0.0", "1.1.0")


def runtime_args(namespace, name, container_id, uid=None):
    """CNI_ARGS as containerd's CRI passes them for a pod's sandbox (the
    kubelet's pod metadata; the order of the keys varies there)."""
    args = [("IgnoreUnknown", "1"), ("K8S_POD_NAMESPACE", namespace), ("K8S_POD_NAME", name),
            ("K8S_POD_INFRA_CONTAINER_ID", container_id)] + ([("K8S_POD_UID", uid)] if uid else [])
    return ";".join("%s=%s" % pair for pair in args)


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
    key = (config.get("name"), env["CNI_CONTAINERID"], ifname) if isinstance(config, dict) else None
    if command == "DEL" and stdin is None and key in _RESULTS and "prevResult" not in config:
        config = dict(config, prevResult=_RESULTS[key])       # as libcni passes its cached result
    argv = (["ip", "netns", "exec", node] if node else []) + [plugin]
    proc = subprocess.run(argv, input=stdin if stdin is not None else json.dumps(config), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=timeout, check=False)
    out = json.loads(proc.stdout) if proc.stdout.strip() else None
    if key is not None and proc.returncode == 0:
        if command == "ADD" and stdin is None and config.get("cniVersion") in _CACHED_FROM:
            _RESULTS[key] = out
        elif command == "DEL":
            _RESULTS.pop(key, None)
    return proc.returncode, out, proc.stderr
