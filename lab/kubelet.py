"""The kubelet's part of running a pod in the lab, on one worker, through
the node's container runtime: containerd's CRI, which makes the pod's
sandbox and network namespace and calls the CNI plugin itself.

    kubelet.py run NAME ANNOTATION_JSON [LABELS_JSON [SYSCTLS_JSON]]
                                           create the pod on the API (as
                                           kubectl would), run its sandbox
                                           (CRI RunPodSandbox, with the pod's
                                           metadata, labels, annotations and
                                           sysctls: containerd calls the CNI
                                           ADD), report the pod Ready (status)
    kubelet.py delete NAME                 StopPodSandbox (the runtime's CNI
                                           DEL) and RemovePodSandbox, then the
                                           pod deleted from the API
    kubelet.py vanish NAME                 what a node leaves behind when the
                                           runtime lost a pod: its sandbox is
                                           killed and forgotten by containerd
                                           (no CNI DEL), its namespace goes,
                                           and the pod is deleted from the API
                                           (kubectl delete --force); the OVS
                                           port stays
    kubelet.py register ADDRESS            register this node's Node (its
                                           name, the host's; ADDRESS, its
                                           InternalIP), as kubelet does on
                                           start; one registered is kept
    kubelet.py service SERVICE_JSON        create a Service (as kubectl
                                           would); one that exists is kept

The API is the lab's stand-in, over HTTPS with the lab's CA, as the lab's
admin (lab.py puts its address, the CA and the admin's token in
``/etc/ovn4nfv-lab`` on each node). The runtime is the one the
container_runtime role installed, its CRI client the tests'
(``tests/harness/cri.py``, copied beside this file by lab/host.py). Each pod's network namespace,
the one containerd made, is also named after the pod (``ip netns`` sees it
as ``NAME``), so that verify.yml enters it by the pod's name.
"""

import json
import os
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

from tests.harness import cri

CREDENTIALS = "/etc/ovn4nfv-lab"
NAMESPACE = "default"
RUNTIME = "/run/containerd/containerd.sock"
NETNS_DIR = "/run/netns"


def api_url():
    """The lab's API: $LAB_API, else what lab.py wrote in /etc/ovn4nfv-lab/api."""
    if os.environ.get("LAB_API"):
        return os.environ["LAB_API"]
    with open(os.path.join(CREDENTIALS, "api")) as handle:
        return handle.read().strip()


def api(method, path, body=None, content_type="application/json"):
    data = json.dumps(body).encode() if body is not None else None
    with open(os.path.join(CREDENTIALS, "admin.token")) as handle:
        token = handle.read().strip()
    request = urllib.request.Request(api_url() + path, data=data, method=method,
                                     headers={"Content-Type": content_type, "Authorization": "Bearer " + token})
    context = ssl.create_default_context(cafile=os.path.join(CREDENTIALS, "ca.crt"))
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        return json.loads(response.read() or b"null")


def sandboxes(runtime, name):
    """The pod's sandboxes the runtime holds, oldest attempt first."""
    found = runtime.list_pod_sandbox(labels={cri.POD_NAME: name, cri.POD_NAMESPACE: NAMESPACE})
    return sorted(found, key=lambda s: s["metadata"].get("attempt", 0))


def name_netns(name, path):
    """``/run/netns/NAME``: the sandbox's namespace, bound under the pod's name."""
    target = os.path.join(NETNS_DIR, name)
    unname_netns(name)
    os.makedirs(NETNS_DIR, exist_ok=True)
    open(target, "w").close()
    subprocess.run(["mount", "--bind", path, target], check=True, timeout=30)


def unname_netns(name):
    target = os.path.join(NETNS_DIR, name)
    if os.path.exists(target):
        subprocess.run(["umount", target], check=False, timeout=30, stderr=subprocess.DEVNULL)
        os.unlink(target)


def run(name, annotation, labels=None, sysctls=None):
    """Run the pod; a pod whose sandbox runs is left as it is. A sandbox the
    runtime holds but no longer runs (the node rebooted) is stopped and
    removed first, and the next attempt made, as the kubelet does. Once its
    sandbox runs the pod is Ready, as the kubelet reports it."""
    runtime = cri.Runtime(RUNTIME)
    try:
        pod = api("POST", "/api/v1/namespaces/%s/pods" % NAMESPACE, {
            "metadata": {"name": name, "annotations": {"ovnNetwork": annotation}, "labels": labels or {}},
            "spec": {"nodeName": socket.gethostname()}})
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise
        # the API has it (this node rebooted): a new sandbox for the same pod
        pod = api("GET", "/api/v1/namespaces/%s/pods/%s" % (NAMESPACE, name))
    uid = pod["metadata"]["uid"]
    attempt = 0
    for old in sandboxes(runtime, name):
        running = old.get("state", cri.SANDBOX_READY) == cri.SANDBOX_READY
        if running and old.get("labels", {}).get(cri.POD_UID) == uid:
            return named(name, old["id"], runtime.pod_sandbox_status(old["id"]))
        runtime.stop_pod_sandbox(old["id"])
        runtime.remove_pod_sandbox(old["id"])
        attempt = old["metadata"].get("attempt", 0) + 1
    sandbox_id = runtime.run_pod_sandbox(cri.sandbox_config(
        name, NAMESPACE, uid, attempt, labels=labels, annotations=pod["metadata"].get("annotations"),
        sysctls=sysctls))
    made = named(name, sandbox_id, runtime.pod_sandbox_status(sandbox_id))
    api("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (NAMESPACE, name), {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        content_type="application/merge-patch+json")
    return made


def named(name, sandbox_id, status):
    """The sandbox's namespace named after the pod; what the pod runs
    with, from its (verbose) PodSandboxStatus answer ``status``."""
    name_netns(name, cri.netns_path(status))
    network = status["status"].get("network", {})
    ips = [network["ip"]] if network.get("ip") else []
    return {"pod": name, "node": socket.gethostname(), "sandbox": sandbox_id,
            "ips": ips + [extra["ip"] for extra in network.get("additional_ips", [])]}


def delete(name, cni_del=True):
    """The pod's sandboxes stopped (the runtime's CNI DEL) and removed,
    its name for the namespace dropped, and the pod deleted from the API.
    Unless ``cni_del``: the runtime loses the pod, see :func:`vanish`."""
    runtime = cri.Runtime(RUNTIME)
    try:
        for sandbox in sandboxes(runtime, name):
            if cni_del:
                runtime.stop_pod_sandbox(sandbox["id"])
                runtime.remove_pod_sandbox(sandbox["id"])
            else:
                vanish(runtime, sandbox["id"])
    finally:
        # the name alone would keep the namespace alive
        unname_netns(name)
    try:
        api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (NAMESPACE, name))
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    return {"pod": name, "deleted": True, "cni_del": cni_del}


def vanish(runtime, sandbox_id):
    """containerd loses the sandbox: its task killed and its container
    deleted behind the CRI's back (``ctr``), containerd restarted so that
    the CRI forgets it, and the namespace it had mounted unmounted. No CNI
    DEL is ever called; the namespace, and with it the pod's end of each
    veth, is gone."""
    path = cri.netns_path(runtime.pod_sandbox_status(sandbox_id))
    ctr = ["ctr", "--address", RUNTIME, "--namespace", "k8s.io"]
    for argv in (["task", "kill", "--signal", "SIGKILL", sandbox_id], ["task", "delete", "--force", sandbox_id],
                 ["containers", "delete", sandbox_id]):
        subprocess.run(ctr + argv, check=False, timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["systemctl", "restart", "containerd"], check=True, timeout=120)
    subprocess.run(["umount", path], check=False, timeout=30, stderr=subprocess.DEVNULL)
    if os.path.exists(path):
        os.unlink(path)


def register(address):
    name = socket.gethostname()
    try:
        api("POST", "/api/v1/nodes", {"metadata": {"name": name},
                                      "status": {"addresses": [{"type": "InternalIP", "address": address}]}})
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise
        return {"node": name, "registered": False}
    return {"node": name, "registered": True}


def service(spec):
    """Create the Service ``spec`` (a Service object) unless it exists."""
    try:
        made = api("POST", "/api/v1/namespaces/%s/services" % NAMESPACE, spec)
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise
        return {"service": spec["metadata"]["name"], "created": False}
    return {"service": made["metadata"]["name"], "created": True, "clusterIP": made["spec"]["clusterIP"]}


def main(argv):
    if argv[1] == "run":
        result = run(argv[2], argv[3], json.loads(argv[4]) if len(argv) > 4 else None,
                     json.loads(argv[5]) if len(argv) > 5 else None)
    elif argv[1] == "delete":
        result = delete(argv[2])
    elif argv[1] == "vanish":
        result = delete(argv[2], cni_del=False)
    elif argv[1] == "register":
        result = register(argv[2])
    elif argv[1] == "service":
        result = service(json.loads(argv[2]))
    else:
        raise SystemExit(__doc__)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
