"""The kubelet's part of running a pod in the lab, on one worker.

    kubelet.py run NAME ANNOTATION_JSON [LABELS_JSON [SYSCTLS_JSON]]
                                           create the pod on the API (as
                                           kubectl would), make its network
                                           namespace (with the pod's sysctls),
                                           call the CNI plugin ADD, report the
                                           pod Ready (status)
    kubelet.py delete NAME                 CNI DEL, remove the namespace and
                                           the pod
    kubelet.py vanish NAME                 what a node leaves behind when the
                                           runtime lost a pod: its namespace
                                           goes without a CNI DEL, and the
                                           pod is deleted from the API
                                           (kubectl delete --force); the
                                           OVS port stays
    kubelet.py register ADDRESS            register this node's Node (its
                                           name, the host's; ADDRESS, its
                                           InternalIP), as kubelet does on
                                           start; one registered is kept
    kubelet.py service SERVICE_JSON        create a Service (as kubectl
                                           would); one that exists is kept

The API is the lab's stand-in, over HTTPS with the lab's CA, as the lab's
admin (lab.py puts its address, the CA and the admin's token in
``/etc/ovn4nfv-lab`` on each node). The CNI plugin and its configuration
are the ones the cni role installed.
"""

import json
import os
import socket
import ssl
import subprocess
import sys
import urllib.request
import uuid

CREDENTIALS = "/etc/ovn4nfv-lab"
NAMESPACE = "default"
CNI_CONF = "/etc/cni/net.d/10-ovn4nfv.conf"
CNI_BIN = "/opt/cni/bin"
STATE = "/run/ovn4nfv-lab"


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


def cni(command, name, container_id):
    with open(CNI_CONF) as handle:
        conf = json.load(handle)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command,
           "CNI_CONTAINERID": container_id, "CNI_NETNS": "/run/netns/" + name,
           "CNI_IFNAME": "eth0", "CNI_PATH": CNI_BIN,
           "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;"
                       "K8S_POD_INFRA_CONTAINER_ID=%s" % (NAMESPACE, name, container_id)}
    proc = subprocess.run([os.path.join(CNI_BIN, conf["type"])], input=json.dumps(conf),
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, check=False)
    if proc.returncode:
        raise SystemExit("CNI %s of %s failed (%d): %s %s" % (command, name, proc.returncode,
                                                              proc.stdout, proc.stderr))
    return json.loads(proc.stdout) if proc.stdout.strip() else None


def run(name, annotation, labels=None, sysctls=None):
    """Run the pod; a pod this node already runs is left as it is. Once its
    interfaces are made it is Ready, as the kubelet reports it."""
    from pyroute2 import netns
    os.makedirs(STATE, exist_ok=True)
    done = os.path.join(STATE, name + ".json")
    if os.path.exists(done) and name in netns.listnetns():
        with open(done) as handle:
            return json.load(handle)
    try:
        api("POST", "/api/v1/namespaces/%s/pods" % NAMESPACE, {
            "metadata": {"name": name, "annotations": {"ovnNetwork": annotation}, "labels": labels or {}},
            "spec": {"nodeName": socket.gethostname()}})
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise
        # the API has it (this node rebooted): a new sandbox for the same pod
    if name not in netns.listnetns():
        netns.create(name)
    for key, value in sorted((sysctls or {}).items()):
        # as the kubelet applies securityContext.sysctls, in the pod's namespace
        subprocess.run(["ip", "netns", "exec", name, "sysctl", "-qw", "%s=%s" % (key, value)], check=True,
                       timeout=30)
    container_id = uuid.uuid4().hex
    with open(os.path.join(STATE, name), "w") as handle:
        handle.write(container_id)
    result = cni("ADD", name, container_id)
    api("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (NAMESPACE, name), {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        content_type="application/merge-patch+json")
    summary = {"pod": name, "node": socket.gethostname(),
               "ips": [ip["address"] for ip in (result or {}).get("ips", [])]}
    with open(done, "w") as handle:
        json.dump(summary, handle)
    return summary


def delete(name, cni_del=True):
    """The pod's CNI DEL (unless ``cni_del`` is false: the runtime lost
    it), its namespace removed, and the pod deleted from the API."""
    from pyroute2 import netns
    path = os.path.join(STATE, name)
    if os.path.exists(path) and cni_del:
        with open(path) as handle:
            cni("DEL", name, handle.read().strip())
        os.unlink(path)
    if os.path.exists(path + ".json") and cni_del:
        os.unlink(path + ".json")
    if name in netns.listnetns():
        netns.remove(name)
    try:
        api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (NAMESPACE, name))
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    return {"pod": name, "deleted": True, "cni_del": cni_del}


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
