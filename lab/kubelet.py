"""The kubelet's part of running a pod in the lab, on one worker, through
the node's container runtime: containerd's CRI, which makes the pod's
sandbox and network namespace and calls the CNI plugin itself.

    kubelet.py run POD ANNOTATION_JSON [LABELS_JSON [SYSCTLS_JSON]]
                                           create the pod on the API (as
                                           kubectl would), run its sandbox
                                           (CRI RunPodSandbox, with the pod's
                                           metadata, labels, annotations and
                                           sysctls: containerd calls the CNI
                                           ADD), report the pod Ready (status)
    kubelet.py delete POD                  StopPodSandbox (the runtime's CNI
                                           DEL) and RemovePodSandbox, then the
                                           pod deleted from the API
    kubelet.py vanish POD                  what a node leaves behind when the
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
    kubelet.py annotations POD             the pod's annotations, as the API has
                                           them
    kubelet.py request POD ANNOTATION_JSON the running pod's request changed (its
                                           ovnNetwork, merge-patched as kubectl
                                           annotate would)
    kubelet.py events POD REASON           the messages of the pod's Events of
                                           REASON (about this pod, by its UID),
                                           once there is one, or none after 10 s
    kubelet.py lease NAMESPACE/NAME        the Lease's spec (holderIdentity,
                                           leaseTransitions...), null when
                                           there is none
    kubelet.py policies SPEC_JSON          make namespaces (with labels) and
                                           MultiNetworkPolicies as a tenant's
                                           kubectl would: each created, or,
                                           when it exists and differs, merge-
                                           patched to what SPEC_JSON says;
                                           answers what changed (a second run
                                           changes nothing)

POD is ``NAME`` (in the namespace ``default``) or ``NAMESPACE/NAME``. SPEC_JSON
is ``{"namespaces": [{"name": N, "labels": {..}}], "policies": [a
MultiNetworkPolicy, ...]}``; what is not shaped so is refused, naming it.

The API is the lab's stand-in, over HTTPS with the lab's CA, as the lab's
admin (lab.py puts its address, the CA and the admin's token in
``/etc/ovn4nfv-lab`` on each node). The runtime is the one the
container_runtime role installed, its CRI client the tests'
(``tests/harness/cri.py``, copied beside this file by lab/host.py). Each pod's network namespace,
the one containerd made, is also named after the pod (``ip netns`` sees it
as ``NAME``, whatever its namespace: the lab's pod names are unique), so
that verify.yml enters it by the pod's name.
"""

import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

from tests.harness import cri

CREDENTIALS = "/etc/ovn4nfv-lab"
NAMESPACE = "default"
RUNTIME = "/run/containerd/containerd.sock"
NETNS_DIR = "/run/netns"
MERGE_PATCH = "application/merge-patch+json"
POLICY_API_VERSION, POLICY_KIND = "k8s.cni.cncf.io/v1beta1", "MultiNetworkPolicy"
POLICIES = "/apis/k8s.cni.cncf.io/v1beta1/namespaces/%s/multi-networkpolicies"
# a field the server does not know is refused, not pruned (kubectl's --validate=strict)
STRICT = "?fieldValidation=Strict"
# Kubernetes' names: a namespace is a DNS label, a pod or a policy a DNS
# subdomain; a label's key is an optional DNS subdomain prefix and a name,
# its value that name's form or empty.
_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
DNS_LABEL = re.compile(r"\A%s\Z" % _LABEL)
DNS_SUBDOMAIN = re.compile(r"\A(?=.{1,253}\Z)%s(\.%s)*\Z" % (_LABEL, _LABEL))
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY = re.compile(r"\A((?=[^/]{1,253}/)%s(\.%s)*/)?%s\Z" % (_LABEL, _LABEL, _LABEL_NAME))
LABEL_VALUE = re.compile(r"\A(%s)?\Z" % _LABEL_NAME)
# how many times an object changed by someone else between our read and
# our write is read again
WRITE_TRIES = 3


class Refused(SystemExit):
    """What this kubelet will not do, or the API would not: the reason."""

    def __init__(self, reason):
        super().__init__("kubelet: " + reason)


def pod_ref(ref):
    """``NAME`` or ``NAMESPACE/NAME``: (namespace, name), each checked."""
    namespace, _sep, name = ref.rpartition("/")
    namespace = namespace or NAMESPACE
    if not DNS_LABEL.match(namespace) or not DNS_SUBDOMAIN.match(name):
        raise Refused("%r is no pod: [NAMESPACE/]NAME, a DNS label and a DNS subdomain" % ref)
    return namespace, name


def api_url():
    """The lab's API: $LAB_API, else what lab.py wrote in /etc/ovn4nfv-lab/api."""
    if os.environ.get("LAB_API"):
        return os.environ["LAB_API"]
    with open(os.path.join(CREDENTIALS, "api")) as handle:
        return handle.read().strip()


def open_api(method, path, body=None, content_type="application/json", timeout=10):
    """The API's response to the request (open: a watch is read as it
    comes), as the lab's admin."""
    data = json.dumps(body).encode() if body is not None else None
    with open(os.path.join(CREDENTIALS, "admin.token")) as handle:
        token = handle.read().strip()
    request = urllib.request.Request(api_url() + path, data=data, method=method,
                                     headers={"Content-Type": content_type, "Authorization": "Bearer " + token})
    context = ssl.create_default_context(cafile=os.path.join(CREDENTIALS, "ca.crt"))
    return urllib.request.urlopen(request, timeout=timeout, context=context)


def api(method, path, body=None, content_type="application/json"):
    with open_api(method, path, body, content_type) as response:
        return json.loads(response.read() or b"null")


def said(exc):
    """What the API said in refusing a request (its Status's message)."""
    try:
        status = json.loads(exc.read() or b"{}")
    except ValueError:
        status = None
    return (status.get("message") if isinstance(status, dict) else None) or exc.reason


def sandboxes(runtime, namespace, name):
    """The pod's sandboxes the runtime holds, oldest attempt first."""
    found = runtime.list_pod_sandbox(labels={cri.POD_NAME: name, cri.POD_NAMESPACE: namespace})
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


def run(ref, annotation, labels=None, sysctls=None, owners=None, created=None):
    """Run the pod ``ref`` (``[NAMESPACE/]NAME``); a pod whose sandbox runs
    is left as it is. A sandbox the runtime holds but no longer runs (the
    node rebooted) is stopped and removed first, and the next attempt made,
    as the kubelet does. Once its sandbox runs the pod is Ready, as the
    kubelet reports it. ``owners``: its ownerReferences (a controller's
    pod); ``created(pod)`` is called once the API has it, before its
    sandbox is made (what a controller does on seeing it, lab/virt.py)."""
    namespace, name = pod_ref(ref)
    runtime = cri.Runtime(RUNTIME)
    meta = {"name": name, "annotations": {"ovnNetwork": annotation}, "labels": labels or {}}
    if owners:
        meta["ownerReferences"] = owners
    try:
        pod = api("POST", "/api/v1/namespaces/%s/pods" % namespace, {
            "metadata": meta, "spec": {"nodeName": socket.gethostname()}})
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise
        # the API has it (this node rebooted): a new sandbox for the same pod
        pod = api("GET", "/api/v1/namespaces/%s/pods/%s" % (namespace, name))
    if created is not None:
        created(pod)
    uid = pod["metadata"]["uid"]
    attempt = 0
    for old in sandboxes(runtime, namespace, name):
        running = old.get("state", cri.SANDBOX_READY) == cri.SANDBOX_READY
        if running and old.get("labels", {}).get(cri.POD_UID) == uid:
            return named(namespace, name, old["id"], runtime.pod_sandbox_status(old["id"]))
        runtime.stop_pod_sandbox(old["id"])
        runtime.remove_pod_sandbox(old["id"])
        attempt = old["metadata"].get("attempt", 0) + 1
    sandbox_id = runtime.run_pod_sandbox(cri.sandbox_config(
        name, namespace, uid, attempt, labels=labels, annotations=pod["metadata"].get("annotations"),
        sysctls=sysctls))
    made = named(namespace, name, sandbox_id, runtime.pod_sandbox_status(sandbox_id))
    api("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (namespace, name), {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        content_type=MERGE_PATCH)
    return made


def named(namespace, name, sandbox_id, status):
    """The sandbox's network namespace named after the pod; what the pod
    runs with, from its (verbose) PodSandboxStatus answer ``status``."""
    name_netns(name, cri.netns_path(status))
    network = status["status"].get("network", {})
    ips = [network["ip"]] if network.get("ip") else []
    return {"pod": name, "namespace": namespace, "node": socket.gethostname(), "sandbox": sandbox_id,
            "ips": ips + [extra["ip"] for extra in network.get("additional_ips", [])]}


def delete(ref, cni_del=True):
    """The pod's sandboxes stopped (the runtime's CNI DEL) and removed,
    its name for the network namespace dropped, and the pod deleted from
    the API. Unless ``cni_del``: the runtime loses the pod, see :func:`vanish`."""
    namespace, name = pod_ref(ref)
    runtime = cri.Runtime(RUNTIME)
    try:
        for sandbox in sandboxes(runtime, namespace, name):
            if cni_del:
                runtime.stop_pod_sandbox(sandbox["id"])
                runtime.remove_pod_sandbox(sandbox["id"])
            else:
                vanish(runtime, sandbox["id"])
    finally:
        # the name alone would keep the namespace alive
        unname_netns(name)
    try:
        api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (namespace, name))
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    return {"pod": name, "namespace": namespace, "deleted": True, "cni_del": cni_del}


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


def events(ref, reason, seconds=10):
    """The messages of the pod ``ref``'s Events of ``reason`` (the pod of
    this UID: an earlier pod of the name had its own), once there is one, or
    none after ``seconds``: whoever posts them does so on its own time."""
    namespace, name = pod_ref(ref)
    uid = api("GET", "/api/v1/namespaces/%s/pods/%s" % (namespace, name))["metadata"]["uid"]
    deadline = time.monotonic() + seconds
    while True:
        found = [e.get("message", "") for e in api("GET", "/api/v1/namespaces/%s/events" % namespace)["items"]
                 if e.get("reason") == reason and (e.get("involvedObject") or {}).get("uid") == uid]
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def lease(ref):
    """The Lease ``NAMESPACE/NAME``'s spec, or None when there is none."""
    try:
        return api("GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % pod_ref(ref))["spec"]
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    return None


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


def _labels(where, value, key_form=LABEL_KEY, value_form=LABEL_VALUE):
    """``value``, labels (or annotations: any value) as Kubernetes takes them; refused, naming ``where``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Refused("%s: not a map of strings" % where)
    for key, text in value.items():
        if not key_form.match(key) or not isinstance(text, str) or (value_form and not value_form.match(text)):
            raise Refused("%s: %r: %r is not a label's key and value" % (where, key, text))
    return dict(value)


def _null_in(value):
    if isinstance(value, dict):
        return any(v is None or _null_in(v) for v in value.values())
    if isinstance(value, list):
        return any(v is None or _null_in(v) for v in value)
    return False


def tenancy(spec):
    """SPEC_JSON's namespaces ``[(name, labels)]`` and policies ``[(namespace,
    name, annotations, labels, spec)]``, each checked for its shape (the API
    checks the rest): a field this kubelet does not take, a name that is no
    Kubernetes name, a null (which a merge patch reads as a removal) or a
    name given twice is refused, naming it."""
    if not isinstance(spec, dict) or set(spec) - {"namespaces", "policies"}:
        raise Refused("SPEC_JSON is {\"namespaces\": [...], \"policies\": [...]}, not %.200s" % json.dumps(spec))
    namespaces, objects = [], []
    for index, item in enumerate(_list(spec, "namespaces")):
        where = "namespaces[%d]" % index
        if not isinstance(item, dict) or set(item) - {"name", "labels"}:
            raise Refused("%s: {name, labels} only, not %.200s" % (where, json.dumps(item)))
        if not isinstance(item.get("name"), str) or not DNS_LABEL.match(item["name"]):
            raise Refused("%s.name: %r is no namespace's name (a DNS label)" % (where, item.get("name")))
        namespaces.append((item["name"], _labels(where + ".labels", item.get("labels"))))
    for index, item in enumerate(_list(spec, "policies")):
        where = "policies[%d]" % index
        if not isinstance(item, dict) or set(item) - {"apiVersion", "kind", "metadata", "spec"}:
            raise Refused("%s: {apiVersion, kind, metadata, spec} only, not %.200s" % (where, json.dumps(item)))
        if item.get("apiVersion", POLICY_API_VERSION) != POLICY_API_VERSION or \
                item.get("kind", POLICY_KIND) != POLICY_KIND:
            raise Refused("%s: a %s %s, not %s %s" % (
                where, POLICY_API_VERSION, POLICY_KIND, item.get("apiVersion"), item.get("kind")))
        meta = item.get("metadata")
        if not isinstance(meta, dict) or set(meta) - {"name", "namespace", "annotations", "labels"}:
            raise Refused("%s.metadata: {name, namespace, annotations, labels} only" % where)
        if not isinstance(meta.get("namespace"), str) or not DNS_LABEL.match(meta["namespace"]):
            raise Refused("%s.metadata.namespace: %r is no namespace's name" % (where, meta.get("namespace")))
        if not isinstance(meta.get("name"), str) or not DNS_SUBDOMAIN.match(meta["name"]):
            raise Refused("%s.metadata.name: %r is no policy's name (a DNS subdomain)" % (where, meta.get("name")))
        if not isinstance(item.get("spec"), dict) or _null_in(item["spec"]):
            raise Refused("%s.spec: a map without nulls is needed" % where)
        objects.append((meta["namespace"], meta["name"],
                        _labels(where + ".metadata.annotations", meta.get("annotations"), value_form=None),
                        _labels(where + ".metadata.labels", meta.get("labels")), item["spec"]))
    for what, keys in (("namespace", [n for n, _l in namespaces]), ("policy", ["%s/%s" % o[:2] for o in objects])):
        twice = sorted(set(k for k in keys if keys.count(k) > 1))
        if twice:
            raise Refused("the %s %s is given twice" % (what, ", ".join(twice)))
    return namespaces, objects


def _list(spec, key):
    value = spec.get(key, [])
    if not isinstance(value, list):
        raise Refused("SPEC_JSON's %s: a list, not %.200s" % (key, json.dumps(value)))
    return value


def merge_diff(old, new):
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: a
    key ``old`` has and ``new`` has not is null; lists are replaced whole."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch = dict((key, None) for key in old if key not in new)
    for key, value in new.items():
        if key not in old or old[key] != value:
            patch[key] = merge_diff(old.get(key), value)
    return patch


def apply(collection, name, body, differs, patch_of):
    """``body`` created in ``collection`` (``POST``), as ``kubectl create``
    does; when it exists (409), read, and merge-patched with
    ``patch_of(current)`` only when ``differs(current)``. The patch names
    the resourceVersion read, so that a write made in between is a 409 and
    is read again (at most WRITE_TRIES times). Returns ``created``,
    ``updated`` or ``unchanged``."""
    what = "%s/%s" % (collection, name)
    try:
        api("POST", collection + STRICT, body)
        return "created"
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise Refused("creating %s: %d %s" % (what, exc.code, said(exc)))
    for _try in range(WRITE_TRIES):
        try:
            current = api("GET", what)
            if not differs(current):
                return "unchanged"
            api("PATCH", what + STRICT, patch_of(current), content_type=MERGE_PATCH)
            return "updated"
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise Refused("updating %s: %d %s" % (what, exc.code, said(exc)))
    raise Refused("%s was changed by someone else %d times while it was being updated" % (what, WRITE_TRIES))


def _covers(current, wanted):
    """Whether the map ``current`` holds every key of ``wanted`` as it is there."""
    return all((current or {}).get(key) == value for key, value in wanted.items())


def policies(spec):
    """The namespaces and MultiNetworkPolicies of SPEC_JSON ``spec`` (see
    :func:`tenancy`), made as a tenant's kubectl would: namespaces first,
    with their labels (labels of theirs that others set are kept), then
    the policies, each with exactly its spec (and at least its annotations
    and labels). Returns what became of each, and how many changed."""
    namespaces, wanted = tenancy(spec)
    done = {"namespaces": dict((name, _namespace(name, labels)) for name, labels in namespaces),
            "policies": dict(("%s/%s" % (namespace, name), _policy(namespace, name, annotations, labels, policy_spec))
                             for namespace, name, annotations, labels, policy_spec in wanted)}
    done["changed"] = sum(1 for kind in ("namespaces", "policies") for outcome in done[kind].values()
                          if outcome != "unchanged")
    return done


def _namespace(name, labels):
    def differs(current):
        return not _covers(current["metadata"].get("labels"), labels)

    def patch_of(current):
        return {"metadata": {"labels": labels, "resourceVersion": current["metadata"].get("resourceVersion")}}
    return apply("/api/v1/namespaces", name, {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": name, "labels": labels}}, differs, patch_of)


def _policy(namespace, name, annotations, labels, policy_spec):
    meta = dict((key, value) for key, value in (("annotations", annotations), ("labels", labels)) if value)

    def differs(current):
        return current.get("spec") != policy_spec or not all(
            _covers(current["metadata"].get(key), value) for key, value in meta.items())

    def patch_of(current):
        return {"metadata": dict(meta, resourceVersion=current["metadata"].get("resourceVersion")),
                "spec": merge_diff(current.get("spec"), policy_spec)}
    return apply(POLICIES % namespace, name, {"apiVersion": POLICY_API_VERSION, "kind": POLICY_KIND,
                                              "metadata": dict(meta, name=name, namespace=namespace),
                                              "spec": policy_spec}, differs, patch_of)


def main(argv):
    if argv[1] == "run":
        result = run(argv[2], argv[3], json.loads(argv[4]) if len(argv) > 4 else None,
                     json.loads(argv[5]) if len(argv) > 5 else None)
    elif argv[1] == "delete":
        result = delete(argv[2])
    elif argv[1] == "vanish":
        result = delete(argv[2], cni_del=False)
    elif argv[1] == "annotations" and len(argv) == 3:
        result = api("GET", "/api/v1/namespaces/%s/pods/%s" % pod_ref(argv[2]))["metadata"].get("annotations") or {}
    elif argv[1] == "request" and len(argv) == 4:
        result = api("PATCH", "/api/v1/namespaces/%s/pods/%s" % pod_ref(argv[2]), {
            "metadata": {"annotations": {"ovnNetwork": argv[3]}}}, content_type=MERGE_PATCH)["metadata"]["uid"]
    elif argv[1] == "events" and len(argv) == 4:
        result = events(argv[2], argv[3])
    elif argv[1] == "register":
        result = register(argv[2])
    elif argv[1] == "lease" and len(argv) == 3:
        result = lease(argv[2])
    elif argv[1] == "service":
        result = service(json.loads(argv[2]))
    elif argv[1] == "policies" and len(argv) == 3:
        try:
            spec = json.loads(argv[2])
        except ValueError as exc:
            raise Refused("SPEC_JSON is not JSON: %s" % exc)
        result = policies(spec)
    else:
        raise SystemExit(__doc__)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
