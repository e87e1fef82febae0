"""A STAND-IN for the Kubernetes API server, for tests only.

No kube-apiserver can be installed on these machines, so the watcher's tests
run it against this server, which speaks the same HTTP protocol for the
resources the watcher uses, and nothing more:

* pods: list (all namespaces or one, with ``metadata.name`` and
  ``metadata.namespace`` field selectors) with ``resourceVersion``; watch as a
  chunked stream of JSON events from a ``resourceVersion``, ending after
  ``timeoutSeconds``; ``410 Gone`` (an ``ERROR`` event with code 410, as the
  real server sends it) when that version has been compacted away; get;
  patch (JSON merge patch, and strategic merge patch treated as one, which
  is exact for annotations); create (``POST``), delete;
* events: create, list;
* pods' status: patch (``/pods/<name>/status``), as the kubelet reports
  readiness;
* pods: JSON Patch too (RFC 6902, ``application/json-patch+json``: ``add``,
  ``replace``, ``remove``, ``test``, with ``~1`` and ``~0`` escapes, applied
  all or nothing); a failed ``test`` or an operation on a missing path is
  kube-apiserver's 422 ("the server rejected our request due to an error in
  our request", the reason in ``details.causes``), a body that is not a
  list of operations a 400; a merge or JSON patch that would change
  ``metadata.uid`` is refused (422, the field is immutable);
* services: list, watch, get, create (the server's defaults: a clusterIP
  from 10.96.0.0/16, ``protocol: TCP``, ``targetPort`` = ``port``,
  ``sessionAffinity: None``, ClientIP's 10800 s timeout; and its
  validation: 422 for a port out of range or a name reused in ``ports``),
  delete;
* endpointslices (``discovery.k8s.io/v1``): list, watch, get, create,
  delete; a slice names its Service in the label
  ``kubernetes.io/service-name``;
* network-attachment-definitions (``k8s.cni.cncf.io/v1``): get, list;
* namespaces (cluster-scoped objects): list, watch, get, create (``POST``,
  with labels), patch (their labels), delete; each carries the label
  ``kubernetes.io/metadata.name`` as the server sets it. An object created
  in a namespace that does not exist creates it first (an ``ADDED``
  Namespace before the object's), as a cluster has the namespace before its
  pods;
* multi-networkpolicies (``k8s.cni.cncf.io/v1beta1``, the
  MultiNetworkPolicy CRD; v1beta2 is not served): list (all namespaces or
  one), watch, get, create (201, 409), patch (JSON merge patch only, as
  for any custom resource; 409 for an older ``metadata.resourceVersion``),
  delete (200 with the object). As a structural CRD's server does, fields
  the schema (:data:`POLICY_SCHEMA`) does not declare are pruned, with a
  ``Warning`` header (400 under ``fieldValidation=Strict``), a value of the
  wrong JSON type or a missing required field is a 422 naming the field,
  and nothing is checked beyond the types (a reversed port range or a bad
  CIDR is stored); ``metadata.generation`` is 1 at create and grows with
  every change of ``spec`` only; there is no status;
* nodes (cluster-scoped): list, get, create (as each kubelet registers its
  node, with the ``kubernetes.io/hostname`` label and the node's
  addresses), delete;
* leases (``coordination.k8s.io/v1``), as leader election uses them: get
  (404 when absent), list, create (201; 409 AlreadyExists), replace
  (``PUT``: 409 Conflict when the body's ``metadata.resourceVersion`` is
  not the stored one, unconditional when it names none, 404 when there is
  no such lease: a Lease is not created by an update), delete (a Status,
  as for any kind whose registry does not return the deleted object);
  422 for a ``spec.leaseDurationSeconds`` below 1, 400 for a field of the
  wrong JSON type; the MicroTimes (``acquireTime``, ``renewTime``) kept as
  the server writes them, with microseconds and ``Z``;
* KubeVirt's virtualmachines and virtualmachineinstances
  (``kubevirt.io/v1``, CRDs): list (all namespaces or one), watch, get,
  create (201, 409), merge patch, delete -- which, as the API server's garbage collector does
  for a background deletion, deletes what the object controls (an
  ownerReference with ``controller: true`` to its UID): a VM its VMI, a
  VMI its launcher pods. As KubeVirt's CRDs declare, a VirtualMachine has
  a ``status`` subresource (a patch of the object leaves its status alone)
  and a VMI has none (a patch of the object writes its status too, and
  ``/status`` is not found). Nothing else of KubeVirt runs: tests and the
  lab do what virt-controller would (the VMI's ``status.activePods``, a
  migration's target pod).

Tests drive it in-process: :meth:`KubeAPIStandIn.create_pod`,
:meth:`delete_pod`, :meth:`set_labels` (a pod's), :meth:`create_namespace`,
:meth:`label_namespace`, :meth:`delete_namespace`, :meth:`create_policy`,
:meth:`update_policy`, :meth:`delete_policy` (MultiNetworkPolicies, through
the same pruning and validation as over HTTP) -- of these, a write that
changes nothing makes no event, as with a real server --, :meth:`compact`
(expire every older resourceVersion, ending open watches with a 410), :meth:`drop_watches` (end open watches
without a word), :meth:`fail_next` (answer 500 for a while), :meth:`fail_matching` (fail some requests),
:meth:`hold_matching` (stall some requests, without failing them: a slow or hung API), :meth:`lease` and
:meth:`set_lease` (read or write a Lease as another writer would), :meth:`go_away`
and :meth:`come_back` (stop listening, then listen again on the same port).
It listens on 127.0.0.1 unless told otherwise.

Like a real API server it serves HTTPS only, with a certificate from a CA
of its own (:func:`make_tls`; :attr:`KubeAPIStandIn.ca_file`), and every
request must carry a bearer token: tokens name users, and service accounts
get tokens as ``TokenRequest`` would give them
(:meth:`KubeAPIStandIn.service_account_token`). Requests are authorized
against ``Role``, ``ClusterRole``, ``RoleBinding`` and
``ClusterRoleBinding`` objects as Kubernetes' RBAC authorizer does (verbs,
API groups, resources, resource names, namespaces; ``system:masters`` may
do anything): 401 without a known token, 403 with Kubernetes' own message
otherwise. The product's two manifests (the watcher's and the node
agent's, from the roles) are applied at start, so a component given its
service account's kubeconfig (:meth:`KubeAPIStandIn.kubeconfig`) may do
exactly what its manifest grants. :attr:`KubeAPIStandIn.denied` records
every refusal.

The lab (``make lab``) runs it as a process on its master container, as
``python3 kube_api_standin.py --listen 192.168.33.11:6443 --tls-cert-file ...
--tls-private-key-file ... --token-auth-file ... --rbac ...`` (the options of
kube-apiserver's that it has; the admin's token is one of the file's):
there, pods are created and deleted over
HTTPS (``POST`` and ``DELETE`` on the pods resource), as ``kubectl`` would
with the admin's token, and the stand-in assigns each its UID.
"""

import base64
import copy
import csv
import datetime
import json
import os
import re
import secrets
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

_POD = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/pods(?:/(?P<name>[^/]+))?$")
_EVENTS = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/events$")
_NAMESPACE = re.compile(r"^/api/v1(?P<ns>)/namespaces(?:/(?P<name>[^/]+))?$")     # cluster-scoped
_POD_STATUS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/status$")
_SERVICE = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/services(?:/(?P<name>[^/]+))?$")
_LEASE = re.compile(r"^/apis/coordination.k8s.io/v1(?:/namespaces/(?P<ns>[^/]+))?/leases(?:/(?P<name>[^/]+))?$")
_SLICE = re.compile(r"^/apis/discovery.k8s.io/v1(?:/namespaces/(?P<ns>[^/]+))?"
                    r"/endpointslices(?:/(?P<name>[^/]+))?$")
API_VERSIONS = {"EndpointSlice": "discovery.k8s.io/v1", "Lease": "coordination.k8s.io/v1",
                "NetworkAttachmentDefinition": "k8s.cni.cncf.io/v1",
                "MultiNetworkPolicy": "k8s.cni.cncf.io/v1beta1",
                "VirtualMachine": "kubevirt.io/v1", "VirtualMachineInstance": "kubevirt.io/v1"}
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
# The API server parses booleans with Go's strconv.ParseBool; older Python
# clients (Debian 12's 22.6) send "True".
_GO_TRUE = ("1", "t", "T", "true", "TRUE", "True")
_NODE = re.compile(r"^/api/v1(?P<ns>)/nodes(?:/(?P<name>[^/]+))?$")     # cluster-scoped: no namespace
_NAD = re.compile(r"^/apis/k8s.cni.cncf.io/v1(?:/namespaces/(?P<ns>[^/]+))?"
                  r"/network-attachment-definitions(?:/(?P<name>[^/]+))?$")
_POLICY = re.compile(r"^/apis/k8s.cni.cncf.io/v1beta1(?:/namespaces/(?P<ns>[^/]+))?"
                     r"/multi-networkpolicies(?:/(?P<name>[^/]+))?$")
_VM = re.compile(r"^/apis/kubevirt.io/v1(?:/namespaces/(?P<ns>[^/]+))?/virtualmachines(?:/(?P<name>[^/]+))?"
                 r"(?P<status>/status)?$")
_VMI = re.compile(r"^/apis/kubevirt.io/v1(?:/namespaces/(?P<ns>[^/]+))?/virtualmachineinstances"
                  r"(?:/(?P<name>[^/]+))?(?P<status>/status)?$")
# What a 404 names, as the real server does: the resource (and its group).
_RESOURCE_NAMES = {"Pod": "pods", "Service": "services", "Node": "nodes", "Namespace": "namespaces",
                   "EndpointSlice": "endpointslices.discovery.k8s.io", "Lease": "leases.coordination.k8s.io",
                   "NetworkAttachmentDefinition": "network-attachment-definitions.k8s.cni.cncf.io",
                   "MultiNetworkPolicy": "multi-networkpolicies.k8s.cni.cncf.io",
                   "VirtualMachine": "virtualmachines.kubevirt.io",
                   "VirtualMachineInstance": "virtualmachineinstances.kubevirt.io"}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# The MultiNetworkPolicy CRD's structural schema (k8snetworkplumbingwg/
# multi-networkpolicy scheme.yml, v1beta1, as served since v1.0.1 with
# endPort), reduced to what pruning and type validation read: "type",
# "properties", "additionalProperties", "items", "required", and
# "int-or-string" for x-kubernetes-int-or-string.
_LABEL_SELECTOR = {"type": "object", "properties": {
    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
    "matchExpressions": {"type": "array", "items": {
        "type": "object", "required": ["key", "operator"], "properties": {
            "key": {"type": "string"}, "operator": {"type": "string"},
            "values": {"type": "array", "items": {"type": "string"}}}}}}}
_POLICY_PORTS = {"type": "array", "items": {"type": "object", "properties": {
    "protocol": {"type": "string"}, "port": {"int-or-string": True}, "endPort": {"type": "integer"}}}}
_POLICY_PEERS = {"type": "array", "items": {"type": "object", "properties": {
    "podSelector": _LABEL_SELECTOR, "namespaceSelector": _LABEL_SELECTOR,
    "ipBlock": {"type": "object", "required": ["cidr"], "properties": {
        "cidr": {"type": "string"}, "except": {"type": "array", "items": {"type": "string"}}}}}}}
POLICY_SCHEMA = {"type": "object", "properties": {
    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
    "metadata": {"type": "object"},           # ObjectMeta: the server's, not the schema's
    "spec": {"type": "object", "required": ["podSelector"], "properties": {
        "podSelector": _LABEL_SELECTOR,
        "policyTypes": {"type": "array", "items": {"type": "string"}},
        "ingress": {"type": "array", "items": {"type": "object", "properties": {
            "ports": _POLICY_PORTS, "from": _POLICY_PEERS}}},
        "egress": {"type": "array", "items": {"type": "object", "properties": {
            "ports": _POLICY_PORTS, "to": _POLICY_PEERS}}}}}}}


_RESOURCE = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/[^/]+)"
                       r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)"
                       r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?/?$")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The product's RBAC manifests: the watcher's and the node agent's.
PRODUCT_RBAC = (os.path.join(ROOT, "roles", "watcher", "files", "rbac.yaml"),
                os.path.join(ROOT, "roles", "cni", "files", "rbac.yaml"))
ADMIN = "kubernetes-admin"
WATCHER = "kube-system/ovn4nfv-watcher"
NODE_AGENT = "kube-system/ovn4nfv-node-agent"


def make_tls(directory, hosts):
    """A CA and a server certificate for ``hosts`` (IP addresses or names)
    signed by it, made with openssl in ``directory``; returns the paths
    ``(ca, certificate, key)``."""
    ca_key, ca = os.path.join(directory, "ca.key"), os.path.join(directory, "ca.crt")
    key, csr, cert = (os.path.join(directory, n) for n in ("server.key", "server.csr", "server.crt"))
    names = ",".join(("IP:%s" if re.match(r"^[0-9.]+$|:", h) else "DNS:%s") % h for h in hosts)
    extensions = os.path.join(directory, "server.ext")
    with open(extensions, "w") as handle:
        # What a strict verifier (Python 3.13's default context, as on Debian
        # 13) requires of a leaf, as kube-apiserver's own certificates have.
        handle.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n"
                     "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n" % names)

    def openssl(*argv):
        subprocess.run(("openssl",) + argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key,
            "-out", ca, "-days", "30", "-subj", "/CN=kube-api-standin-ca",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
            "-out", csr, "-subj", "/CN=kube-apiserver")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
            "-days", "30", "-extfile", extensions)
    return ca, cert, key


def kubeconfig_document(server, token, ca_file=None, name="standin"):
    """A kubeconfig (a dict) for ``server`` with a bearer ``token`` and the
    CA certificate inline, as a real cluster's kubeconfig carries it."""
    cluster = {"server": server}
    if ca_file:
        with open(ca_file, "rb") as handle:
            cluster["certificate-authority-data"] = base64.b64encode(handle.read()).decode()
    return {"apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}


def service_account_user(account):
    """``namespace/name`` as the user name and groups Kubernetes gives a
    service account's token."""
    namespace, _sep, name = account.partition("/")
    return ("system:serviceaccount:%s:%s" % (namespace, name),
            ["system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"])


def request_attributes(method, path, query):
    """What RBAC authorizes a request on: (verb, API group, resource,
    namespace, name), from its method and path, as Kubernetes' request
    info resolver does for resource requests."""
    match = _RESOURCE.match(path)
    if not match:
        return None
    group = "" if match.group("core") else match.group("group")
    resource, name, namespace = match.group("resource"), match.group("name"), match.group("ns")
    if match.group("sub"):
        resource += "/" + match.group("sub")       # a subresource: pods/status
    if resource == "namespaces" and namespace is None and name:
        namespace = name
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch") in _GO_TRUE else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())
    return verb, group, resource, namespace, name


def _rule_allows(rule, verb, group, resource, name):
    def has(values, value):
        return "*" in (values or []) or value in (values or [])
    return (has(rule.get("verbs"), verb) and has(rule.get("apiGroups"), group)
            and has(rule.get("resources"), resource)
            and (not rule.get("resourceNames") or (name is not None and name in rule["resourceNames"])))


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Invalid(ValueError):
    """A 422 as the API server words it; ``causes``: ``(field, reason,
    message)`` triples, as in the Status's ``details.causes``."""

    def __init__(self, kind, name, causes):
        self.kind, self.name, self.causes = kind, name, list(causes)
        said = ["%s: %s" % (field, message) for field, _reason, message in self.causes]
        detail = said[0] if len(said) == 1 else "[%s]" % ", ".join(said)
        super().__init__('%s "%s" is invalid: %s' % (kind, name, detail))

    def status(self):
        group = self.kind.partition(".")[2]
        return _status(422, "Invalid", str(self), details={
            "name": self.name, "group": group, "kind": self.kind.partition(".")[0],
            "causes": [{"reason": reason, "message": message, "field": field}
                       for field, reason, message in self.causes]})


class Conflict(Exception):
    """A 409 Conflict: a write made against an older resourceVersion."""


class Malformed(ValueError):
    """A 400 BadRequest: a body the server cannot decode into its kind (a
    field of the wrong JSON type, a JSON Patch that is not a list of
    operations), worded as Go's decoder words it."""


class PatchFailed(ValueError):
    """A JSON Patch that does not apply (a failed ``test``, a missing path):
    kube-apiserver's 422, which names no field and carries the patch
    library's reason as a cause."""

    def status(self):
        return _status(422, "Invalid", "the server rejected our request due to an error in our request",
                       details={"causes": [{"reason": "UnexpectedServerResponse", "message": str(self)}]})


def _pointer(path):
    """RFC 6901: the reference tokens of a JSON pointer, ``~1`` read as
    ``/`` and then ``~0`` as ``~`` (in that order, as the RFC says)."""
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise Malformed("invalid JSON pointer: %r" % (path,))
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]


def _index(array, token, path, size):
    """An array index of a JSON Patch, within ``0..size-1`` (``size`` is
    one more for ``add``, which may insert at the end)."""
    if not re.match(r"^(0|[1-9][0-9]*)$", token) or int(token) >= size:
        raise PatchFailed("doc is missing path: \"%s\": missing value" % path)
    return int(token)


def _child(parent, token, path):
    if isinstance(parent, dict) and token in parent:
        return parent[token]
    if isinstance(parent, list):
        return parent[_index(parent, token, path, len(parent))]
    raise PatchFailed("doc is missing path: \"%s\": missing value" % path)


def _canonical(value):
    return json.dumps(value, sort_keys=True)


def json_patch(doc, operations):
    """``doc`` patched by an RFC 6902 JSON Patch of ``add``, ``remove``,
    ``replace`` and ``test`` operations, applied in order to a copy: all of
    them or none (:class:`PatchFailed`, :class:`Malformed`), as
    kube-apiserver applies one. A ``test`` of a missing member for null
    passes, as in the patch library the server uses."""
    if not isinstance(operations, list):
        raise Malformed("json: cannot unmarshal %s into Go value of type jsonpatch.Patch" % _json_type(operations))
    doc = copy.deepcopy(doc)
    for operation in operations:
        if not isinstance(operation, dict):
            raise Malformed("json: cannot unmarshal %s into Go value of type jsonpatch.Operation"
                            % _json_type(operation))
        kind, path = operation.get("op"), operation.get("path")
        if kind not in ("add", "remove", "replace", "test"):
            raise Malformed("Unexpected kind: %s" % kind)
        tokens = _pointer(path)
        value = copy.deepcopy(operation.get("value"))
        if not tokens:
            if kind == "remove":
                raise PatchFailed("remove operation does not apply: the whole document")
            if kind == "test" and _canonical(doc) != _canonical(value):
                raise PatchFailed("testing value %s failed: test failed" % path)
            doc = doc if kind == "test" else value
            continue
        parent = doc
        for token in tokens[:-1]:
            parent = _child(parent, token, path)
        last = tokens[-1]
        if kind == "test":
            present = (isinstance(parent, dict) and last in parent) or isinstance(parent, list)
            actual = _child(parent, last, path) if present else None
            if _canonical(actual) != _canonical(value):
                raise PatchFailed("testing value %s failed: test failed" % path)
        elif isinstance(parent, dict):
            if kind != "add" and last not in parent:
                raise PatchFailed("%s operation does not apply: doc is missing key: %s: missing value" % (kind, path))
            if kind == "remove":
                del parent[last]
            else:
                parent[last] = value
        elif isinstance(parent, list):
            if kind == "add":
                parent.insert(len(parent) if last == "-" else _index(parent, last, path, len(parent) + 1), value)
            elif kind == "remove":
                del parent[_index(parent, last, path, len(parent))]
            else:
                parent[_index(parent, last, path, len(parent))] = value
        else:
            raise PatchFailed("%s operation does not apply: doc is missing path: \"%s\": missing value" % (kind, path))
    return doc


# LeaseSpec's fields (coordination.k8s.io/v1), as JSON types; a field the
# kind does not have is dropped, as the server's decoder drops it.
_LEASE_FIELDS = {"holderIdentity": "string", "leaseDurationSeconds": "integer", "acquireTime": "string",
                 "renewTime": "string", "leaseTransitions": "integer", "preferredHolder": "string",
                 "strategy": "string"}


def _micro_time(value, field):
    """A MicroTime as the server writes it back: UTC, six decimals, ``Z``."""
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Malformed('parsing time "%s" as "2006-01-02T15:04:05.000000Z07:00": cannot parse (spec.%s)'
                        % (value, field))
    if moment.tzinfo is None:
        raise Malformed('parsing time "%s": no time zone (spec.%s)' % (value, field))
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_spec(name, spec):
    """A Lease's spec as the server stores it, or :class:`Malformed` (400:
    a field of the wrong JSON type, an unreadable time) or :class:`Invalid`
    (422: a duration below 1 s, negative transitions), as kube-apiserver's
    decoder and ``ValidateLeaseSpec`` refuse them."""
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise Malformed("json: cannot unmarshal %s into Go struct field Lease.spec of type v1.LeaseSpec"
                        % _json_type(spec))
    out = {}
    for field, value in spec.items():
        wanted = _LEASE_FIELDS.get(field)
        if wanted is None or value is None:
            continue
        if _json_type(value) != wanted:
            raise Malformed("json: cannot unmarshal %s into Go struct field LeaseSpec.spec.%s of type %s" % (
                _json_type(value), field, "int32" if wanted == "integer" else "string"))
        out[field] = _micro_time(value, field) if field in ("acquireTime", "renewTime") else value
    causes = []
    if out.get("leaseDurationSeconds", 1) < 1:
        causes.append(("spec.leaseDurationSeconds", "FieldValueInvalid",
                       "Invalid value: %d: must be greater than 0" % out["leaseDurationSeconds"]))
    if out.get("leaseTransitions", 0) < 0:
        causes.append(("spec.leaseTransitions", "FieldValueInvalid",
                       "Invalid value: %d: must be greater than or equal to 0" % out["leaseTransitions"]))
    if causes:
        raise Invalid("Lease.coordination.k8s.io", name, causes)
    return out


class StrictlyUnknown(ValueError):
    """A 400 for unknown fields under ``fieldValidation=Strict``."""

    def __init__(self, unknown):
        super().__init__("strict decoding error: " + ", ".join('unknown field "%s"' % f for f in unknown))


def _json_type(value):
    """A JSON value's type, in the words of OpenAPI's validation messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    for python, name in ((float, "number"), (str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, python):
            return name
    return type(value).__name__


def prune(value, schema, path, causes, unknown):
    """``value`` as a structural CRD's schema keeps it: fields it does not
    declare are dropped (their paths appended to ``unknown``), as are
    nulls where the schema is not nullable; a value of the wrong JSON type,
    or a required field missing, appends a cause to ``causes``, in the
    words of kube-apiserver's OpenAPI validation. Semantics (a port range,
    a CIDR) are not the schema's business."""
    if schema.get("int-or-string"):
        wanted, ok = "integer,string", _json_type(value) in ("integer", "string")
    else:
        wanted = schema.get("type")
        ok = wanted is None or _json_type(value) == wanted
    if not ok:
        actual = _json_type(value)
        causes.append((path, "FieldValueTypeInvalid", 'Invalid value: "%s": %s in body must be of type %s: "%s"'
                       % (actual, path, wanted, actual)))
        return copy.deepcopy(value)
    if wanted == "object":
        properties, extra = schema.get("properties"), schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            where = "%s.%s" % (path, key) if path else key
            if properties is not None and key in properties:
                child = properties[key]
            elif extra is not None:
                child = extra
            elif properties is None:
                out[key] = copy.deepcopy(item)       # nothing declared: kept as it is
                continue
            else:
                unknown.append(where)
                continue
            if item is not None:                     # not nullable: a null is pruned
                out[key] = prune(item, child, where, causes, unknown)
        for key in schema.get("required", ()):
            if key not in out:
                causes.append(("%s.%s" % (path, key) if path else key, "FieldValueRequired", "Required value"))
        return out
    if wanted == "array":
        return [prune(item, schema.get("items") or {}, "%s[%d]" % (path, index), causes, unknown)
                for index, item in enumerate(value)]
    return value


# ObjectMeta's fields a client may set and the stand-in keeps.
_CLIENT_META = ("labels", "annotations", "finalizers", "ownerReferences")


def _client_meta(meta):
    """The fields of ``meta`` a client writes, as a custom resource's
    server keeps them: malformed ones dropped (as kube-apiserver drops
    them from a custom resource's metadata), empty ones omitted."""
    out = {}
    for key in _CLIENT_META:
        value = meta.get(key) if isinstance(meta, dict) else None
        if key in ("labels", "annotations"):
            if not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
                continue
        elif not isinstance(value, list):
            continue
        if value:
            out[key] = copy.deepcopy(value)
    return out


class KubeAPIStandIn:
    """The stand-in's state and its HTTP server."""

    def __init__(self, host="127.0.0.1", port=0, rbac=PRODUCT_RBAC, tls=True, tls_files=None):
        """``rbac``: manifests to apply at start (YAML or JSON). ``tls``:
        serve HTTPS with a CA made for this server, or with ``tls_files``,
        ``(certificate, key)`` (the CA is then the caller's)."""
        self.host = host
        self.lock = threading.Condition()
        self.rv = 1
        self.compacted = 0           # versions at or below this are gone
        self.pods = {}               # (ns, name) -> object
        self.nads = {}
        self.services = {}
        self.slices = {}
        self.nodes = {}              # (None, name) -> object
        self.namespace_objects = {}  # (None, name) -> Namespace
        self.policies = {}           # (ns, name) -> MultiNetworkPolicy
        self.vms = {}                # (ns, name) -> VirtualMachine (kubevirt.io/v1)
        self.vmis = {}               # (ns, name) -> VirtualMachineInstance
        self.leases = {}             # (ns, name) -> Lease (coordination.k8s.io/v1)
        self.next_cluster_ip = 10
        self.events = []
        self.history = []            # (rv, event type, object) for watches
        self.failures = 0
        self.targeted = {}          # (method, path suffix) -> (count, code)
        self.targeted_failed = 0
        self.holds = {}              # (method, path suffix) -> seconds each matching request is held
        self.held = 0                # requests held so far
        self.watches = 0             # watch requests served so far
        self.requests = 0
        self.dropped = 0             # bumped to end open watches
        self.connections = set()     # open client sockets, closed by go_away
        self.created_at = {}         # (ns, name) -> monotonic time, for benchmarks
        self.annotated_at = {}       # (ns, name) -> first patch that wrote ovnIfaceList
        self.iface_lists = {}        # (ns, name) -> every value ovnIfaceList took, in order (a change appended)
        self.stopping = False
        self.tokens = {}             # bearer token -> (user, [groups])
        self.roles = {}              # (kind, namespace or None, name) -> rules
        self.bindings = []           # (kind, namespace or None, name, roleRef, subjects)
        self.denied = []             # every refusal: dicts of user, verb, group, resource, namespace
        self.admin_token = self.add_token(ADMIN, ["system:masters", "system:authenticated"])
        self.ssl_context, self.ca_file, self._tls_dir = None, None, None
        if tls:
            if tls_files is None:
                self._tls_dir = tempfile.mkdtemp(prefix="kube-api-standin-tls-")
                self.ca_file, cert, key = make_tls(self._tls_dir, [host])
            else:
                cert, key = tls_files
            self.ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ssl_context.load_cert_chain(cert, key)
        for manifest in rbac or ():
            self.apply_file(manifest)
        self.port = port
        self._listen()

    def _listen(self):
        self.server = _Server((self.host, self.port), _handler(self))
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def go_away(self):
        """Stop listening and close every open connection: the server is gone."""
        self.drop_watches()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
        with self.lock:
            open_sockets = list(self.connections)
        for sock in open_sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def come_back(self):
        """Listen again, on the same port, with the same state."""
        self._listen()

    def drop_watches(self):
        """End every open watch stream, as a load balancer might."""
        with self.lock:
            self.dropped += 1
            self.lock.notify_all()

    def namespaces(self):
        """Every Namespace object (copies), by name."""
        with self.lock:
            return [copy.deepcopy(o) for _key, o in sorted(self.namespace_objects.items())]

    @property
    def url(self):
        return "%s://%s:%d" % ("https" if self.ssl_context else "http", self.host, self.port)

    def kubeconfig(self, path, account=None):
        """Write a kubeconfig that points at this server, with the token of
        service account ``account`` (``namespace/name``, such as
        :data:`WATCHER`), or the admin's when None; return its path."""
        token = self.service_account_token(account) if account else self.admin_token
        with open(path, "w") as handle:
            json.dump(kubeconfig_document(self.url, token, self.ca_file), handle)
        return path

    # -- authentication and RBAC ---------------------------------------------
    def add_token(self, user, groups, token=None):
        """Make ``token`` (a new random one when None) name ``user``."""
        token = token or secrets.token_urlsafe(24)
        with self.lock:
            self.tokens[token] = (user, list(groups))
        return token

    def service_account_token(self, account):
        """A token of service account ``namespace/name``."""
        user, groups = service_account_user(account)
        with self.lock:
            for token, (known, _groups) in self.tokens.items():
                if known == user:
                    return token
        return self.add_token(user, groups)

    def load_token_file(self, path):
        """kube-apiserver's ``--token-auth-file``: ``token,user,uid,"group1,group2"``."""
        with open(path) as handle:
            for row in csv.reader(handle):
                if row and not row[0].startswith("#"):
                    groups = [g for g in (row[3] if len(row) > 3 else "").split(",") if g]
                    self.add_token(row[1], groups + ["system:authenticated"], token=row[0])

    def apply_file(self, path):
        with open(path) as handle:
            text = handle.read()
        try:
            doc = json.loads(text)
        except ValueError:
            import yaml  # noqa: only for YAML manifests
            doc = yaml.safe_load(text)
        self.apply(doc)

    def apply(self, doc):
        """Take RBAC objects as ``kubectl apply`` would: a ``List`` or one
        object; an object of the same kind and name is replaced."""
        if doc.get("kind") == "List":
            for item in doc.get("items") or []:
                self.apply(item)
            return
        kind, meta = doc.get("kind"), doc.get("metadata") or {}
        namespace = meta.get("namespace") if kind in ("Role", "RoleBinding") else None
        with self.lock:
            if kind in ("Role", "ClusterRole"):
                self.roles[(kind, namespace, meta["name"])] = copy.deepcopy(doc.get("rules") or [])
            elif kind in ("RoleBinding", "ClusterRoleBinding"):
                self.bindings = [b for b in self.bindings if b[:3] != (kind, namespace, meta["name"])]
                self.bindings.append((kind, namespace, meta["name"], copy.deepcopy(doc["roleRef"]),
                                      copy.deepcopy(doc.get("subjects") or [])))

    def rules_of(self, kind, name, namespace=None):
        """The rules of a role, as applied (a copy)."""
        with self.lock:
            return copy.deepcopy(self.roles[(kind, namespace, name)])

    def authorize(self, user, groups, verb, group, resource, namespace, name):
        """Whether RBAC lets ``user`` do it, as Kubernetes decides."""
        if "system:masters" in groups:
            return True
        with self.lock:
            for kind, bound_ns, _name, ref, subjects in self.bindings:
                if kind == "RoleBinding" and bound_ns != namespace:
                    continue
                if not any(self._subject_is(s, user, groups) for s in subjects):
                    continue
                role_ns = bound_ns if ref.get("kind") == "Role" else None
                for rule in self.roles.get((ref.get("kind"), role_ns, ref.get("name")), []):
                    if _rule_allows(rule, verb, group, resource, name):
                        return True
        return False

    @staticmethod
    def _subject_is(subject, user, groups):
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            return user == "system:serviceaccount:%s:%s" % (subject.get("namespace"), subject.get("name"))
        if kind == "User":
            return user == subject.get("name")
        return kind == "Group" and subject.get("name") in groups

    def stop(self):
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
        if self._tls_dir:
            import shutil
            shutil.rmtree(self._tls_dir, ignore_errors=True)

    # -- in-process control ------------------------------------------------
    def _bump(self, kind, obj):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, kind, copy.deepcopy(obj)))
        self.lock.notify_all()

    def create_pod(self, namespace, name, annotations=None, node="node1", labels=None, ports=None, owners=None,
                   uid=None):
        """A pending pod; ``ports``: its container's ports, as
        ``[{"name": ..., "containerPort": ...}]``; ``owners``, its
        ``metadata.ownerReferences``; ``uid``, its UID (a new random one
        when None, as the server assigns it)."""
        container = {"name": "c", "image": "standin"}
        if ports:
            container["ports"] = [dict({"protocol": "TCP"}, **p) for p in ports]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4()),
                            "annotations": dict(annotations or {}), "labels": dict(labels or {}),
                            "creationTimestamp": _now()},
               "spec": {"nodeName": node, "containers": [container]},
               "status": {"phase": "Pending"}}
        if owners:
            pod["metadata"]["ownerReferences"] = copy.deepcopy(owners)
        with self.lock:
            self._ensure_namespace(namespace)
            self.pods[(namespace, name)] = pod
            self.created_at[(namespace, name)] = time.monotonic()
            self._bump("ADDED", pod)
            return copy.deepcopy(pod)

    def set_ready(self, namespace, name, ready=True):
        """What the kubelet reports: the pod runs, and is Ready or not."""
        self.patch_status(namespace, name, {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True" if ready else "False",
             "lastTransitionTime": _now()}]}})

    def patch_status(self, namespace, name, patch):
        """A merge patch of a pod's status (the status subresource: only
        ``status`` changes)."""
        with self.lock:
            pod = self.pods[(namespace, name)]
            pod["status"] = merge_patch(pod.get("status"), (patch or {}).get("status") or {})
            self._bump("MODIFIED", pod)
            return copy.deepcopy(pod)

    def create_service(self, namespace, name, spec, annotations=None, uid=None):
        """Create a Service as the API server would, with its defaults
        (``uid``: its UID, a new random one when None); a ValueError
        carries the server's 422 message."""
        spec = copy.deepcopy(spec or {})
        ports = spec.get("ports") or []
        seen = set()
        for index, port in enumerate(ports):
            for field in ("port", "targetPort"):
                value = port.get(field)
                if isinstance(value, int) and not 1 <= value <= 65535:
                    raise ValueError("Service %r is invalid: spec.ports[%d].%s: Invalid value: %d: "
                                     "must be between 1 and 65535, inclusive" % (name, index, field, value))
            if port.get("name", "") in seen:
                raise ValueError("Service %r is invalid: spec.ports[%d].name: Duplicate value: %r" % (
                    name, index, port.get("name", "")))
            seen.add(port.get("name", ""))
            if len(ports) > 1 and not port.get("name"):
                raise ValueError("Service %r is invalid: spec.ports[%d].name: Required value" % (name, index))
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["sessionAffinity"] == "ClientIP":
            spec.setdefault("sessionAffinityConfig", {"clientIP": {"timeoutSeconds": 10800}})
        with self.lock:
            if (namespace, name) in self.services:
                raise KeyError("services %s/%s exists" % (namespace, name))
            self._ensure_namespace(namespace)
            if "clusterIP" not in spec:
                spec["clusterIP"] = "10.96.%d.%d" % divmod(self.next_cluster_ip, 256)
                self.next_cluster_ip += 1
            if spec["clusterIP"] != "None":
                spec["clusterIPs"] = [spec["clusterIP"]]
                spec.update(ipFamilies=["IPv4"], ipFamilyPolicy="SingleStack")
            service = {"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4()),
                                    "annotations": dict(annotations or {}), "creationTimestamp": _now()},
                       "spec": spec, "status": {"loadBalancer": {}}}
            self.services[(namespace, name)] = service
            self._bump("ADDED", service)
            return copy.deepcopy(service)

    def set_service_annotations(self, namespace, name, annotations):
        """A merge patch of a Service's annotations (MODIFIED)."""
        with self.lock:
            service = self.services[(namespace, name)]
            service["metadata"]["annotations"] = merge_patch(service["metadata"].get("annotations"), annotations)
            self._bump("MODIFIED", service)

    def delete_service(self, namespace, name):
        with self.lock:
            self._bump("DELETED", self.services.pop((namespace, name)))

    def create_endpointslice(self, namespace, name, service, addresses, ports, ready=True):
        """An EndpointSlice of ``service``: one endpoint per address."""
        slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                  "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                               "labels": {SERVICE_NAME_LABEL: service}, "creationTimestamp": _now()},
                  "addressType": "IPv4",
                  "endpoints": [{"addresses": [a], "conditions": {
                      "ready": ready, "serving": ready, "terminating": False}} for a in addresses],
                  "ports": [dict({"protocol": "TCP"}, **p) for p in ports]}
        with self.lock:
            self._ensure_namespace(namespace)
            self.slices[(namespace, name)] = slice_
            self._bump("ADDED", slice_)
            return copy.deepcopy(slice_)

    def delete_endpointslice(self, namespace, name):
        with self.lock:
            self._bump("DELETED", self.slices.pop((namespace, name)))

    def create_node(self, name, addresses=()):
        """A Node as its kubelet registers it: ``addresses``, its
        InternalIP addresses. KeyError when it exists."""
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": _now(),
                             "labels": {"kubernetes.io/hostname": name}},
                "spec": {},
                "status": {"addresses": [{"type": "InternalIP", "address": a} for a in addresses]
                           + [{"type": "Hostname", "address": name}]}}
        with self.lock:
            if (None, name) in self.nodes:
                raise KeyError("nodes %s exists" % name)
            self.nodes[(None, name)] = node
            self._bump("ADDED", node)
            return copy.deepcopy(node)

    def delete_node(self, _namespace, name):
        with self.lock:
            self._bump("DELETED", self.nodes.pop((None, name)))

    def delete_pod(self, namespace, name):
        with self.lock:
            pod = self.pods.pop((namespace, name))
            self._bump("DELETED", pod)

    def set_annotations(self, namespace, name, annotations):
        with self.lock:
            pod = self.pods[(namespace, name)]
            pod["metadata"]["annotations"] = merge_patch(pod["metadata"].get("annotations"), annotations)
            self._bump("MODIFIED", pod)

    def set_labels(self, namespace, name, labels):
        """Replace a pod's labels (MODIFIED); labels as they are make no
        new version and no event, as with a real server. Returns the pod."""
        with self.lock:
            pod = self.pods[(namespace, name)]
            labels = dict(labels or {})
            if pod["metadata"].get("labels") != labels:
                pod["metadata"]["labels"] = labels
                self._bump("MODIFIED", pod)
            return copy.deepcopy(pod)

    # -- every object at once: a cluster's state saved, and served again -------
    def _stores(self):
        """``{kind: the dict that holds its objects}``."""
        return {"Namespace": self.namespace_objects, "Node": self.nodes, "Pod": self.pods,
                "Service": self.services, "EndpointSlice": self.slices, "NetworkAttachmentDefinition": self.nads,
                "MultiNetworkPolicy": self.policies, "VirtualMachine": self.vms,
                "VirtualMachineInstance": self.vmis, "Lease": self.leases}

    def objects(self):
        """Every object stored (copies), namespaces first, each kind's in
        the order of its keys: what :meth:`load` takes."""
        with self.lock:
            return [copy.deepcopy(obj) for _kind, store in self._stores().items()
                    for _key, obj in sorted(store.items(), key=lambda item: (item[0][0] or "", item[0][1]))]

    def load(self, objects):
        """Store ``objects`` (:meth:`objects`' output, from this stand-in or
        one before it) as they are -- UIDs, annotations, status --, each
        ADDED with a resourceVersion of this server's: a cluster that was
        made by other means, served again. KeyError for a kind the
        stand-in does not keep, or an object of that name already there."""
        stores = self._stores()
        with self.lock:
            for obj in objects:
                obj = copy.deepcopy(obj)
                meta = obj["metadata"]
                store = stores[obj["kind"]]
                key = (None if obj["kind"] in ("Namespace", "Node") else meta["namespace"], meta["name"])
                if key in store:
                    raise KeyError("%s %s/%s exists" % (obj["kind"], key[0], key[1]))
                if key[0] is not None:
                    self._ensure_namespace(key[0])
                meta.pop("resourceVersion", None)
                store[key] = obj
                self._bump("ADDED", obj)

    # -- namespaces ----------------------------------------------------------
    def _ensure_namespace(self, namespace):
        """(With the lock.) Create ``namespace`` (ADDED) if it does not
        exist: an object is created in a namespace the cluster has."""
        if namespace and (None, namespace) not in self.namespace_objects:
            self._add_namespace(namespace, None)

    def _add_namespace(self, name, labels):
        labels = dict(labels or {})
        labels[NAMESPACE_NAME_LABEL] = name
        namespace = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": _now(),
                                  "labels": labels},
                     "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
        self.namespace_objects[(None, name)] = namespace
        self._bump("ADDED", namespace)
        return namespace

    def create_namespace(self, name, labels=None):
        """A Namespace with ``labels``, and ``kubernetes.io/metadata.name``
        as the server sets it (ADDED); KeyError when it exists."""
        with self.lock:
            if (None, name) in self.namespace_objects:
                raise KeyError('namespaces "%s" already exists' % name)
            return copy.deepcopy(self._add_namespace(name, labels))

    def label_namespace(self, name, labels):
        """Replace a Namespace's labels (MODIFIED); its
        ``kubernetes.io/metadata.name`` label stays, as the server sets it
        on every write. Labels as they are make no event. KeyError when
        there is no such namespace. Returns the namespace."""
        with self.lock:
            namespace = self.namespace_objects[(None, name)]
            labels = dict(labels or {})
            labels[NAMESPACE_NAME_LABEL] = name
            if namespace["metadata"]["labels"] != labels:
                namespace["metadata"]["labels"] = labels
                self._bump("MODIFIED", namespace)
            return copy.deepcopy(namespace)

    def delete_namespace(self, name):
        """Delete a namespace as the server does, at once: it turns
        Terminating (MODIFIED), everything in it is deleted (DELETED each),
        then it is (DELETED). Returns it as it was when Terminating."""
        with self.lock:
            namespace = self.namespace_objects[(None, name)]
            namespace["metadata"]["deletionTimestamp"] = _now()
            namespace["status"]["phase"] = "Terminating"
            self._bump("MODIFIED", namespace)
            terminating = copy.deepcopy(namespace)
            for store in (self.pods, self.services, self.slices, self.nads, self.policies, self.vms, self.vmis,
                          self.leases):
                for key in sorted(k for k in store if k[0] == name):
                    self._bump("DELETED", store.pop(key))
            del self.namespace_objects[(None, name)]
            self._bump("DELETED", namespace)
            return terminating

    # -- MultiNetworkPolicies (k8s.cni.cncf.io/v1beta1) ------------------------
    @staticmethod
    def _policy(namespace, name, body, old=None):
        """The MultiNetworkPolicy a server stores for ``body`` (a dict):
        pruned and type-checked by the CRD's schema (:class:`Invalid`), with
        the server's metadata (``generation`` 1, or ``old``'s, +1 when the
        spec changes), and no resourceVersion yet. Returns it and the
        pruned fields' paths."""
        body = dict(body)
        meta = body.pop("metadata", None)
        causes, unknown = [], []
        pruned = prune(body, POLICY_SCHEMA, "", causes, unknown)
        if causes:
            raise Invalid("MultiNetworkPolicy.k8s.cni.cncf.io", name, causes)
        policy = {"apiVersion": API_VERSIONS["MultiNetworkPolicy"], "kind": "MultiNetworkPolicy",
                  "metadata": dict(_client_meta(meta), name=name, namespace=namespace)}
        if "spec" in pruned:
            policy["spec"] = pruned["spec"]
        if old is None:
            policy["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        else:
            policy["metadata"].update(
                uid=old["metadata"]["uid"], creationTimestamp=old["metadata"]["creationTimestamp"],
                generation=old["metadata"]["generation"] + (old.get("spec") != policy.get("spec")))
        return policy, unknown

    def create_policy(self, namespace, name, spec, annotations=None, labels=None):
        """Create a MultiNetworkPolicy (ADDED) as the server would: returns
        the stored object, pruned; :class:`Invalid` (a ValueError) for a
        value of the wrong type, KeyError when it exists."""
        body = {"metadata": {"annotations": annotations, "labels": labels}}
        if spec is not None:
            body["spec"] = spec
        return self._create_policy(namespace, name, body)[0]

    def _create_policy(self, namespace, name, body, strict=False):
        with self.lock:
            policy, unknown = self._policy(namespace, name, body)
            if strict and unknown:
                raise StrictlyUnknown(unknown)
            if (namespace, name) in self.policies:
                raise KeyError('multi-networkpolicies.k8s.cni.cncf.io "%s" already exists' % name)
            self._ensure_namespace(namespace)
            self.policies[(namespace, name)] = policy
            self._bump("ADDED", policy)
            return copy.deepcopy(policy), unknown

    def update_policy(self, namespace, name, spec=None, annotations=None):
        """Replace a MultiNetworkPolicy's spec and/or annotations (MODIFIED;
        ``generation`` +1 when the spec changes); a write that changes
        nothing makes no new version and no event, as with a real server.
        Returns the stored object; KeyError when there is none."""
        with self.lock:
            old = self.policies[(namespace, name)]
            body = copy.deepcopy(old)
            if spec is not None:
                body["spec"] = copy.deepcopy(spec)
            if annotations is not None:
                body["metadata"]["annotations"] = dict(annotations)
            return self._replace_policy(old, body)[0]

    def patch_policy(self, namespace, name, patch, strict=False):
        """A JSON merge patch of a MultiNetworkPolicy, as ``PATCH`` does:
        :class:`Conflict` when it names an older ``resourceVersion``.
        Returns the object and the pruned fields."""
        with self.lock:
            old = self.policies[(namespace, name)]
            meta = patch.get("metadata") if isinstance(patch.get("metadata"), dict) else {}
            if meta.get("resourceVersion") not in (None, old["metadata"]["resourceVersion"]):
                raise Conflict('Operation cannot be fulfilled on multi-networkpolicies.k8s.cni.cncf.io "%s": '
                               "the object has been modified; please apply your changes to the latest "
                               "version and try again" % name)
            return self._replace_policy(old, merge_patch(old, patch), strict)

    def _replace_policy(self, old, body, strict=False):
        namespace, name = old["metadata"]["namespace"], old["metadata"]["name"]
        policy, unknown = self._policy(namespace, name, body, old)
        if strict and unknown:
            raise StrictlyUnknown(unknown)
        unchanged = dict(old, metadata=dict(old["metadata"]))
        unchanged["metadata"].pop("resourceVersion", None)
        if policy == unchanged:
            return copy.deepcopy(old), unknown
        self.policies[(namespace, name)] = policy
        self._bump("MODIFIED", policy)
        return copy.deepcopy(policy), unknown

    def delete_policy(self, namespace, name):
        """Delete a MultiNetworkPolicy (DELETED); returns it. KeyError when
        there is none."""
        with self.lock:
            policy = self.policies.pop((namespace, name))
            self._bump("DELETED", policy)
            return copy.deepcopy(policy)

    # -- KubeVirt (kubevirt.io/v1) ---------------------------------------------
    def _kubevirt_store(self, kind):
        return self.vms if kind == "VirtualMachine" else self.vmis

    def create_kubevirt(self, kind, namespace, body):
        """Create a VirtualMachine or VirtualMachineInstance from ``body``
        (its metadata and spec, and status as a controller would set it);
        KeyError when it exists. Returns it."""
        meta = dict(_client_meta(body.get("metadata")), name=(body.get("metadata") or {}).get("name"),
                    namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=_now())
        obj = {"apiVersion": "kubevirt.io/v1", "kind": kind, "metadata": meta,
               "spec": copy.deepcopy(body.get("spec") or {}), "status": copy.deepcopy(body.get("status") or {})}
        with self.lock:
            store = self._kubevirt_store(kind)
            if (namespace, meta["name"]) in store:
                raise KeyError('%s "%s" already exists' % (_RESOURCE_NAMES[kind], meta["name"]))
            self._ensure_namespace(namespace)
            store[(namespace, meta["name"])] = obj
            self._bump("ADDED", obj)
            return copy.deepcopy(obj)

    def patch_kubevirt(self, kind, namespace, name, patch, status=False):
        """A merge patch of a VM or VMI, or of a VM's status subresource
        (``status``: only ``status`` changes). A VMI has no status
        subresource: a patch of it writes its status too. KeyError when
        there is none."""
        with self.lock:
            store = self._kubevirt_store(kind)
            obj = store[(namespace, name)]
            if status or kind == "VirtualMachineInstance":
                merged = dict(obj, status=merge_patch(obj.get("status"), (patch or {}).get("status") or {}))
                if not status:
                    merged = dict(merge_patch(obj, dict(patch or {}, status=None)), status=merged["status"])
                    merged["metadata"].update(uid=obj["metadata"]["uid"], name=name, namespace=namespace)
            else:
                merged = merge_patch(obj, dict(patch or {}, status=None))
                merged["status"] = obj.get("status") or {}
                merged["metadata"].update(uid=obj["metadata"]["uid"], name=name, namespace=namespace)
            if merged != obj:
                store[(namespace, name)] = merged
                self._bump("MODIFIED", merged)
            return copy.deepcopy(merged)

    def delete_kubevirt(self, kind, namespace, name):
        """Delete a VM or VMI, and, as the garbage collector does, what it
        controls: a VM's VMI, a VMI's pods. Returns it; KeyError when there
        is none."""
        with self.lock:
            obj = self._kubevirt_store(kind).pop((namespace, name))
            self._bump("DELETED", obj)
            self._collect(namespace, obj["metadata"]["uid"])
            return copy.deepcopy(obj)

    def _collect(self, namespace, uid):
        """(With the lock.) Delete what the object of ``uid`` controls."""
        for kind, store in (("VirtualMachineInstance", self.vmis), ("Pod", self.pods)):
            for key, obj in sorted(store.items()):
                refs = obj["metadata"].get("ownerReferences") or []
                if key[0] == namespace and any(r.get("uid") == uid and r.get("controller") for r in refs):
                    del store[key]
                    self._bump("DELETED", obj)
                    self._collect(namespace, obj["metadata"]["uid"])

    # -- Leases (coordination.k8s.io/v1) ---------------------------------------
    def lease(self, namespace, name):
        """The Lease as stored (a copy), or None."""
        with self.lock:
            lease = self.leases.get((namespace, name))
            return copy.deepcopy(lease) if lease else None

    @staticmethod
    def _lease(namespace, name, body, old=None):
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        lease = {"apiVersion": API_VERSIONS["Lease"], "kind": "Lease",
                 "metadata": dict(_client_meta(meta), name=name, namespace=namespace),
                 "spec": lease_spec(name, body.get("spec"))}
        if old is None:
            lease["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=_now())
        else:
            lease["metadata"].update(uid=old["metadata"]["uid"], creationTimestamp=old["metadata"]["creationTimestamp"])
        return lease

    def create_lease(self, namespace, name, body):
        """Create a Lease from ``body`` (ADDED), as ``POST`` does; KeyError
        when it exists, :class:`Invalid` or :class:`Malformed` for a bad
        spec. Returns it."""
        with self.lock:
            lease = self._lease(namespace, name, body)
            if (namespace, name) in self.leases:
                raise KeyError('leases.coordination.k8s.io "%s" already exists' % name)
            self._ensure_namespace(namespace)
            self.leases[(namespace, name)] = lease
            self._bump("ADDED", lease)
            return copy.deepcopy(lease)

    def replace_lease(self, namespace, name, body):
        """Replace a Lease with ``body``, as ``PUT`` does: :class:`Conflict`
        when the body names a resourceVersion that is not the stored one
        (none: unconditional, as a Lease's strategy allows), KeyError when
        there is no such lease (an update does not create one). A body that
        changes nothing makes no new version. Returns the stored object."""
        with self.lock:
            old = self.leases[(namespace, name)]
            version = (body.get("metadata") or {}).get("resourceVersion")
            if version not in (None, "", old["metadata"]["resourceVersion"]):
                raise Conflict('Operation cannot be fulfilled on leases.coordination.k8s.io "%s": the object has '
                               "been modified; please apply your changes to the latest version and try again" % name)
            lease = self._lease(namespace, name, body, old)
            lease["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            if lease != old:
                self.leases[(namespace, name)] = lease
                self._bump("MODIFIED", lease)
            return copy.deepcopy(self.leases[(namespace, name)])

    def set_lease(self, namespace, name, spec):
        """Write a Lease's ``spec`` as another writer would, unconditionally
        (created when absent). Returns it."""
        with self.lock:
            if (namespace, name) in self.leases:
                return self.replace_lease(namespace, name, {"spec": spec})
            return self.create_lease(namespace, name, {"spec": spec})

    def delete_lease(self, namespace, name):
        """Delete a Lease (DELETED); returns it. KeyError when there is none."""
        with self.lock:
            lease = self.leases.pop((namespace, name))
            self._bump("DELETED", lease)
            return copy.deepcopy(lease)

    def add_nad(self, namespace, name, config):
        nad = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
               "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())},
               "spec": {"config": json.dumps(config)}}
        with self.lock:
            self._ensure_namespace(namespace)
            self.nads[(namespace, name)] = nad
            self._bump("ADDED", nad)

    def patch_pod(self, namespace, name, patch, json_patch_ops=False):
        """A merge patch of a pod, or a JSON Patch (``json_patch_ops``), as
        ``PATCH`` does: KeyError when there is no such pod,
        :class:`PatchFailed` or :class:`Malformed` for a JSON Patch that
        does not apply, :class:`Invalid` for one that would change the
        pod's UID (immutable; a patch that drops it keeps it, as the server
        fills an empty UID from the stored object). Returns the pod."""
        with self.lock:
            pod = self.pods[(namespace, name)]
            if json_patch_ops:
                # applied to the object as kube-apiserver encodes it: ObjectMeta's maps are
                # omitempty, so an empty one is absent (a test of it for null passes)
                doc = copy.deepcopy(pod)
                for field in ("annotations", "labels"):
                    if not doc["metadata"].get(field):
                        doc["metadata"].pop(field, None)
                patched = json_patch(doc, patch)
                if isinstance(patched, dict) and isinstance(patched.get("metadata"), dict):
                    for field in ("annotations", "labels"):
                        patched["metadata"].setdefault(field, {})
            else:
                patched = merge_patch(pod, patch)
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                raise Malformed("the patched object is not a Pod")
            uid = patched["metadata"].get("uid")
            if uid not in (None, "", pod["metadata"]["uid"]):
                raise Invalid("Pod", name, [("metadata.uid", "FieldValueInvalid",
                                             'Invalid value: "%s": field is immutable' % uid)])
            patched["metadata"]["uid"] = pod["metadata"]["uid"]
            written = (patched["metadata"].get("annotations") or {}).get("ovnIfaceList")
            if written is not None:
                self.annotated_at.setdefault((namespace, name), time.monotonic())
                values = self.iface_lists.setdefault((namespace, name), [])
                if not values or values[-1] != written:
                    values.append(written)
            self.pods[(namespace, name)] = patched
            self._bump("MODIFIED", patched)
            return copy.deepcopy(patched)

    def pod(self, namespace, name):
        with self.lock:
            pod = self.pods.get((namespace, name))
            return copy.deepcopy(pod) if pod else None

    def wait(self, predicate, timeout):
        """Block until ``predicate(self)`` is true (woken by every change);
        return its last value."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                value = predicate(self)
                remaining = deadline - time.monotonic()
                if value or remaining <= 0:
                    return value
                self.lock.wait(remaining)

    def compact(self):
        """Forget history: a watch from an older version gets 410 Gone, and
        the open ones end with a 410 now."""
        with self.lock:
            self.compacted = self.rv
            self.history = []
            self.lock.notify_all()

    def fail_next(self, count, code=500):
        """Answer the next ``count`` requests with ``code``."""
        with self.lock:
            self.failures = count
            self.failure_code = code

    def fail_matching(self, method, path, count, code=500):
        """Answer the next ``count`` ``method`` requests whose path ends
        with ``path`` (e.g. ``PATCH``, ``/pods/web``) with ``code``; 0
        clears the rule."""
        with self.lock:
            self.targeted[(method, path)] = (count, code)

    def hold_matching(self, method, path, seconds):
        """Hold every ``method`` request whose path ends with ``path`` for
        ``seconds`` before serving it (an API server that stalls, neither
        answering nor failing); 0 clears the rule and lets the held ones
        go at once. :attr:`held` counts the requests held so far."""
        with self.lock:
            if seconds > 0:
                self.holds[(method, path)] = seconds
            else:
                self.holds.pop((method, path), None)
            self.lock.notify_all()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass        # a client that went away, or failed the TLS handshake


def _selected(obj, selector):
    """Whether ``obj`` passes a field selector (``metadata.name=x,...``)."""
    for term in (t for t in (selector or "").split(",") if t):
        field, _sep, value = term.partition("=")
        value = value.lstrip("=")
        if field == "metadata.name" and obj["metadata"]["name"] != value:
            return False
        if field == "metadata.namespace" and obj["metadata"].get("namespace") != value:
            return False
        if field == "spec.nodeName" and (obj.get("spec") or {}).get("nodeName") != value:
            return False
    return True


def _status(code, reason, message, details=None):
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": message, "reason": reason, "code": code}
    if details:
        status["details"] = details
    return status


def _name_required(kind):
    return Invalid(kind, "", [("metadata.name", "FieldValueRequired",
                               "Required value: name or generateName is required")]).status()


def _handler(api):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body are two writes: with Nagle's algorithm the body
        # waits for the client's delayed ACK of the headers, 40 ms a request
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def setup(self):
            if api.ssl_context is not None:
                # the handshake in this connection's thread, not the server's
                self.request.settimeout(30)
                self.request = api.ssl_context.wrap_socket(self.request, server_side=True)
                self.request.settimeout(None)
            super().setup()
            with api.lock:
                api.connections.add(self.connection)

        def finish(self):
            with api.lock:
                api.connections.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        def _send(self, code, body, warnings=()):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            for warning in warnings:
                # as kube-apiserver warns of what it pruned (fieldValidation=Warn, its default)
                self.send_header("Warning", '299 - %s' % json.dumps(warning))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refused(self):
            """401 without a known bearer token, 403 where RBAC says no. The
            body is read first: a connection closed with it unread would be
            reset, and the client would never see the answer."""
            self._raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            url = urlparse(self.path)
            header = self.headers.get("Authorization") or ""
            token = header[len("Bearer "):] if header.startswith("Bearer ") else None
            with api.lock:
                identity = api.tokens.get(token)
            if identity is None:
                self._send(401, _status(401, "Unauthorized", "Unauthorized"))
                return True
            user, groups = identity
            query = dict((k, v[-1]) for k, v in parse_qs(url.query).items())
            attributes = request_attributes(self.command, url.path, query)
            if attributes is None or api.authorize(user, groups, *attributes):
                return False
            verb, group, resource, namespace, name = attributes
            with api.lock:
                api.denied.append({"user": user, "verb": verb, "group": group, "resource": resource,
                                   "namespace": namespace, "name": name})
                api.lock.notify_all()
            where = 'in the namespace "%s"' % namespace if namespace else "at the cluster scope"
            message = '%s%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s" %s' % (
                resource, ' "%s"' % name if name else "", user, verb, resource, group, where)
            self._send(403, _status(403, "Forbidden", message))
            return True

        def _hold(self):
            """Stall as :meth:`KubeAPIStandIn.hold_matching` says: until its
            time is up, the rule is cleared or the server stops."""
            path = urlparse(self.path).path
            with api.lock:
                rule = next((r for r in api.holds if r[0] == self.command and path.endswith(r[1])), None)
                if rule is None:
                    return
                api.held += 1
                api.lock.notify_all()
                deadline = time.monotonic() + api.holds[rule]
                while rule in api.holds and not api.stopping:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    api.lock.wait(remaining)

        def _failing(self):
            if self._refused():
                return True
            self._hold()
            with api.lock:
                api.requests += 1
                path = urlparse(self.path).path
                rule = next((r for r in api.targeted if r[0] == self.command and path.endswith(r[1])
                             and api.targeted[r][0] > 0), None)
                if rule is not None:
                    count, code = api.targeted[rule]
                    api.targeted[rule] = (count - 1, code)
                    api.targeted_failed += 1
                    api.lock.notify_all()
                elif api.failures > 0:
                    api.failures -= 1
                    code = api.failure_code
                else:
                    return False
            self._send(code, _status(code, "InternalError", "the stand-in was told to fail"))
            return True

        def _body(self):
            return json.loads(self._raw or b"null")

        def do_GET(self):
            if self._failing():
                return
            url = urlparse(self.path)
            query = dict((k, v[-1]) for k, v in parse_qs(url.query).items())
            routes = ((_POD, api.pods, "Pod"), (_NAD, api.nads, "NetworkAttachmentDefinition"),
                      (_SERVICE, api.services, "Service"), (_SLICE, api.slices, "EndpointSlice"),
                      (_NODE, api.nodes, "Node"), (_NAMESPACE, api.namespace_objects, "Namespace"),
                      (_POLICY, api.policies, "MultiNetworkPolicy"), (_VM, api.vms, "VirtualMachine"),
                      (_VMI, api.vmis, "VirtualMachineInstance"), (_LEASE, api.leases, "Lease"))
            for pattern, store, kind in routes:
                match = pattern.match(url.path)
                if not match:
                    continue
                ns, name = match.group("ns") or None, match.group("name")
                if name:
                    with api.lock:
                        obj = store.get((ns, name))
                        body = copy.deepcopy(obj) if obj else None
                    if body is None:
                        return self._send(404, _status(404, "NotFound", '%s "%s" not found' % (
                            _RESOURCE_NAMES[kind], name), details={"name": name, "kind": _RESOURCE_NAMES[
                                kind].partition(".")[0]}))
                    return self._send(200, body)
                if query.get("watch") in _GO_TRUE:
                    return self._watch(kind, ns, query)
                with api.lock:
                    items = [copy.deepcopy(o) for (o_ns, _n), o in sorted(store.items())
                             if (ns is None or o_ns == ns) and _selected(o, query.get("fieldSelector"))]
                    rv = str(api.rv)
                return self._send(200, {"kind": kind + "List", "apiVersion": API_VERSIONS.get(kind, "v1"),
                                        "metadata": {"resourceVersion": rv}, "items": items})
            if _EVENTS.match(url.path):
                with api.lock:
                    return self._send(200, {"kind": "EventList", "apiVersion": "v1",
                                            "metadata": {"resourceVersion": str(api.rv)},
                                            "items": copy.deepcopy(api.events)})
            self._send(404, _status(404, "NotFound", url.path))

        def _create_service(self, ns, body):
            meta = body["metadata"]
            return api.create_service(ns, meta["name"], body.get("spec"), meta.get("annotations"))

        def _create_slice(self, ns, body):
            meta = body["metadata"]
            with api.lock:
                if (ns, meta["name"]) in api.slices:
                    raise KeyError("endpointslices %s/%s exists" % (ns, meta["name"]))
                slice_ = dict(copy.deepcopy(body), apiVersion="discovery.k8s.io/v1", kind="EndpointSlice")
                slice_["metadata"] = dict(meta, namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=_now())
                api._ensure_namespace(ns)
                api.slices[(ns, meta["name"])] = slice_
                api._bump("ADDED", slice_)
                return copy.deepcopy(slice_)

        def _create_node(self, _ns, body):
            addresses = (body.get("status") or {}).get("addresses") or []
            return api.create_node(body["metadata"]["name"],
                                   [a["address"] for a in addresses if a.get("type") == "InternalIP"])

        def _chunk(self, data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _watch(self, kind, ns, query):
            with api.lock:
                api.watches += 1
                api.lock.notify_all()
            since = int(query.get("resourceVersion") or 0)
            deadline = time.monotonic() + float(query.get("timeoutSeconds") or 60)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = since
            generation = api.dropped
            try:
                while True:
                    with api.lock:
                        if api.dropped != generation:
                            break
                        if since and since < api.compacted or sent < api.compacted:
                            gone = _status(410, "Expired", "too old resource version: %d (%d)" % (
                                sent, api.compacted))
                            lines = [{"type": "ERROR", "object": gone}]
                            done = True
                        else:
                            lines = [{"type": t, "object": copy.deepcopy(o)} for rv, t, o in api.history
                                     if rv > sent and o.get("kind") == kind
                                     and (ns is None or o["metadata"].get("namespace") == ns)
                                     and _selected(o, query.get("fieldSelector"))]
                            sent = api.rv
                            done = False
                        if not lines and not done:
                            remaining = deadline - time.monotonic()
                            if remaining <= 0 or api.stopping:
                                break
                            api.lock.wait(min(remaining, 1.0))
                            continue
                    for line in lines:
                        self._chunk(json.dumps(line).encode() + b"\n")
                    if done:
                        break
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_PATCH(self):
            if self._failing():
                return
            kind = self.headers.get("Content-Type", "")
            path = urlparse(self.path).path
            pod = _POD.match(path)
            ops = "json-patch+json" in kind and pod and pod.group("ns") and pod.group("name")
            if "merge-patch" not in kind and not ops:
                return self._send(415, _status(415, "UnsupportedMediaType",
                                               "the stand-in takes merge patches (and JSON patches of pods), "
                                               "not %s" % kind))
            query = dict((k, v[-1]) for k, v in parse_qs(urlparse(self.path).query).items())
            if _POLICY.match(path) or _NAMESPACE.match(path):
                return self._patch_cluster_object(path, query, kind)
            for pattern, what in ((_VM, "VirtualMachine"), (_VMI, "VirtualMachineInstance")):
                match = pattern.match(path)
                if match and match.group("ns") and match.group("name") and \
                        not (pattern is _VMI and match.group("status")):        # a VMI has no status subresource
                    try:
                        return self._send(200, api.patch_kubevirt(what, match.group("ns"), match.group("name"),
                                                                  self._body(), status=bool(match.group("status"))))
                    except KeyError:
                        return self._send(404, _status(404, "NotFound", '%s "%s" not found' % (
                            _RESOURCE_NAMES[what], match.group("name"))))
            status = _POD_STATUS.match(path)
            if status:
                try:
                    return self._send(200, api.patch_status(status.group("ns"), status.group("name"),
                                                            self._body()))
                except KeyError:
                    return self._send(404, _status(404, "NotFound", "pods %s/%s not found" % (
                        status.group("ns"), status.group("name"))))
            match = _POD.match(urlparse(self.path).path)
            if not match or not match.group("name"):
                return self._send(404, _status(404, "NotFound", self.path))
            key = (match.group("ns"), match.group("name"))
            try:
                body = api.patch_pod(key[0], key[1], self._body(), json_patch_ops=bool(ops))
            except KeyError:
                return self._send(404, _status(404, "NotFound", "pod %s/%s not found" % key))
            except Malformed as exc:
                return self._send(400, _status(400, "BadRequest", str(exc)))
            except (PatchFailed, Invalid) as exc:
                return self._send(422, exc.status())
            self._send(200, body)

        def _patch_cluster_object(self, path, query, content_type):
            """PATCH of a MultiNetworkPolicy (a custom resource: no strategic
            merge patch) or of a Namespace (its labels)."""
            policy = _POLICY.match(path)
            if policy and "strategic-merge-patch" in content_type:
                return self._send(415, _status(415, "UnsupportedMediaType", (
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")))
            match = policy or _NAMESPACE.match(path)
            ns, name = match.group("ns") or None, match.group("name")
            if not name or (policy and not ns):
                return self._send(405, _status(405, "MethodNotAllowed", path))
            patch = self._body()
            if not isinstance(patch, dict):
                return self._send(400, _status(400, "BadRequest", "the patch is not a JSON object"))
            if not policy:
                with api.lock:
                    namespace = api.namespace_objects.get((None, name))
                    labels = namespace and merge_patch(namespace, patch)["metadata"].get("labels")
                    body = namespace and api.label_namespace(name, labels if isinstance(labels, dict) else {})
                if body is None:
                    return self._send(404, _status(404, "NotFound", 'namespaces "%s" not found' % name))
                return self._send(200, body)
            try:
                body, unknown = api.patch_policy(ns, name, patch, strict=query.get("fieldValidation") == "Strict")
            except KeyError:
                return self._send(404, _status(404, "NotFound", 'multi-networkpolicies.k8s.cni.cncf.io "%s" not found'
                                               % name, details={"name": name, "kind": "multi-networkpolicies"}))
            except Invalid as exc:
                return self._send(422, exc.status())
            except StrictlyUnknown as exc:
                return self._send(400, _status(400, "BadRequest", str(exc)))
            except Conflict as exc:
                return self._send(409, _status(409, "Conflict", str(exc)))
            self._send(200, body, self._unknown_warnings(unknown, query))

        @staticmethod
        def _unknown_warnings(unknown, query):
            if query.get("fieldValidation") == "Ignore":
                return []
            return ['unknown field "%s"' % field for field in unknown]

        def do_PUT(self):
            if self._failing():
                return
            match = _LEASE.match(urlparse(self.path).path)
            if not (match and match.group("ns") and match.group("name")):
                return self._send(405, _status(405, "MethodNotAllowed", "the stand-in replaces Leases only"))
            ns, name = match.group("ns"), match.group("name")
            body = self._lease_body(ns, name)
            if body is None:
                return
            try:
                return self._send(200, api.replace_lease(ns, name, body))
            except KeyError:
                return self._send(404, _status(404, "NotFound", 'leases.coordination.k8s.io "%s" not found' % name,
                                               details={"name": name, "group": "coordination.k8s.io",
                                                        "kind": "leases"}))
            except Conflict as exc:
                return self._send(409, _status(409, "Conflict", str(exc), details={
                    "name": name, "group": "coordination.k8s.io", "kind": "leases"}))
            except Malformed as exc:
                return self._send(400, _status(400, "BadRequest", str(exc)))
            except Invalid as exc:
                return self._send(422, exc.status())

        def _lease_body(self, ns, name=None):
            """The request's Lease, or None when it was refused (400, 422)
            as the server refuses a body that is not one, or one that names
            another kind, namespace or (``name``, for PUT) name."""
            body = self._body()
            if not isinstance(body, dict):
                self._send(400, _status(400, "BadRequest", "the body is not a Lease object"))
                return None
            meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
            for field, expected in (("apiVersion", API_VERSIONS["Lease"]), ("kind", "Lease")):
                if body.get(field) not in (None, expected):
                    self._send(400, _status(400, "BadRequest", "the %s in the data (%s) does not match the "
                                            "expected %s (%s)" % (field, body.get(field), field, expected)))
                    return None
            if meta.get("namespace") not in (None, ns):
                self._send(400, _status(400, "BadRequest", "the namespace of the provided object does not "
                                        "match the namespace sent on the request"))
                return None
            if name is None and not (isinstance(meta.get("name"), str) and meta.get("name")):
                self._send(422, _name_required("Lease.coordination.k8s.io"))
                return None
            if name is not None and meta.get("name") != name:
                self._send(400, _status(400, "BadRequest", "the name of the object (%s) does not match the name "
                                        "on the URL (%s)" % (meta.get("name"), name)))
                return None
            return body

        def _post_lease(self, ns):
            body = self._lease_body(ns)
            if body is None:
                return
            name = body["metadata"]["name"]
            try:
                return self._send(201, api.create_lease(ns, name, body))
            except KeyError as exc:
                return self._send(409, _status(409, "AlreadyExists", exc.args[0], details={
                    "name": name, "group": "coordination.k8s.io", "kind": "leases"}))
            except Malformed as exc:
                return self._send(400, _status(400, "BadRequest", str(exc)))
            except Invalid as exc:
                return self._send(422, exc.status())

        def do_DELETE(self):
            if self._failing():
                return
            lease = _LEASE.match(urlparse(self.path).path)
            if lease and lease.group("ns") and lease.group("name"):
                name = lease.group("name")
                details = {"name": name, "group": "coordination.k8s.io", "kind": "leases"}
                try:
                    removed = api.delete_lease(lease.group("ns"), name)
                except KeyError:
                    return self._send(404, _status(404, "NotFound", 'leases.coordination.k8s.io "%s" not found'
                                                   % name, details=details))
                # a Status, as the registry of a kind that returns no deleted object answers
                return self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                        "details": dict(details, uid=removed["metadata"]["uid"])})
            for pattern, store, remove, kind in (
                    (_SERVICE, api.services, api.delete_service, "Service"),
                    (_SLICE, api.slices, api.delete_endpointslice, "EndpointSlice"),
                    (_NODE, api.nodes, api.delete_node, "Node"),
                    (_NAMESPACE, api.namespace_objects, lambda _ns, name: api.delete_namespace(name), "Namespace"),
                    (_POLICY, api.policies, api.delete_policy, "MultiNetworkPolicy"),
                    (_VM, api.vms, lambda ns, name: api.delete_kubevirt("VirtualMachine", ns, name), "VirtualMachine"),
                    (_VMI, api.vmis, lambda ns, name: api.delete_kubevirt("VirtualMachineInstance", ns, name),
                     "VirtualMachineInstance")):
                match = pattern.match(urlparse(self.path).path)
                if match and (match.group("ns") or pattern in (_NODE, _NAMESPACE)) and match.group("name"):
                    key = (match.group("ns") or None, match.group("name"))
                    with api.lock:
                        obj = copy.deepcopy(store.get(key))
                        removed = remove(*key) if obj is not None else None
                    if obj is None:
                        return self._send(404, _status(404, "NotFound", '%s "%s" not found' % (
                            _RESOURCE_NAMES[kind], key[1])))
                    return self._send(200, removed if removed is not None else obj)
            match = _POD.match(urlparse(self.path).path)
            if not match:
                return self._send(404, _status(404, "NotFound", self.path))
            if not match.group("name"):
                return self._send(405, _status(405, "MethodNotAllowed", self.path))
            ns, name = match.group("ns"), match.group("name")
            with api.lock:
                pod = copy.deepcopy(api.pods.get((ns, name)))
            if pod is None:
                return self._send(404, _status(404, "NotFound", "pods %s/%s not found" % (ns, name)))
            api.delete_pod(ns, name)
            self._send(200, pod)

        def do_POST(self):
            if self._failing():
                return
            match = _POD.match(urlparse(self.path).path)
            if match and match.group("ns") and not match.group("name"):
                body = self._body() or {}
                meta = body.get("metadata") or {}
                name, ns = meta.get("name"), match.group("ns")
                if not name:
                    return self._send(422, _status(422, "Invalid", "metadata.name is required"))
                with api.lock:
                    exists = (ns, name) in api.pods
                if exists:
                    return self._send(409, _status(409, "AlreadyExists", "pods %s/%s exists" % (ns, name)))
                node = (body.get("spec") or {}).get("nodeName") or "node1"
                containers = (body.get("spec") or {}).get("containers") or [{}]
                return self._send(201, api.create_pod(ns, name, meta.get("annotations"), node=node,
                                                      labels=meta.get("labels"),
                                                      ports=containers[0].get("ports"),
                                                      owners=meta.get("ownerReferences")))
            path = urlparse(self.path).path
            if _NAMESPACE.match(path) and not _NAMESPACE.match(path).group("name"):
                return self._post_namespace()
            match = _POLICY.match(path)
            if match and match.group("ns") and not match.group("name"):
                return self._post_policy(match.group("ns"))
            match = _LEASE.match(path)
            if match and match.group("ns") and not match.group("name"):
                return self._post_lease(match.group("ns"))
            for pattern, create in ((_SERVICE, self._create_service), (_SLICE, self._create_slice),
                                    (_NODE, self._create_node),
                                    (_VM, lambda ns, body: api.create_kubevirt("VirtualMachine", ns, body)),
                                    (_VMI, lambda ns, body: api.create_kubevirt("VirtualMachineInstance", ns, body))):
                match = pattern.match(urlparse(self.path).path)
                if match and (match.group("ns") or pattern is _NODE) and not match.group("name"):
                    body = self._body() or {}
                    if not (body.get("metadata") or {}).get("name"):
                        return self._send(422, _status(422, "Invalid", "metadata.name is required"))
                    try:
                        return self._send(201, create(match.group("ns"), body))
                    except ValueError as exc:
                        return self._send(422, _status(422, "Invalid", str(exc)))
                    except KeyError as exc:
                        return self._send(409, _status(409, "AlreadyExists", str(exc)))
            match = _EVENTS.match(urlparse(self.path).path)
            if not match:
                return self._send(404, _status(404, "NotFound", self.path))
            event = self._body()
            if not isinstance(event, dict):
                # as kube-apiserver: a create without an object is a bad request
                return self._send(400, _status(400, "BadRequest", "the body is not an Event object"))
            with api.lock:
                api.events.append(event)
                api.lock.notify_all()
            self._send(201, event)

        def _post_namespace(self):
            body = self._body()
            if not isinstance(body, dict):
                return self._send(400, _status(400, "BadRequest", "the body is not a Namespace object"))
            meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
            name = meta.get("name")
            if not name or not isinstance(name, str):
                return self._send(422, _name_required("Namespace"))
            try:
                return self._send(201, api.create_namespace(name, _client_meta(meta).get("labels")))
            except KeyError as exc:
                return self._send(409, _status(409, "AlreadyExists", exc.args[0], details={
                    "name": name, "kind": "namespaces"}))

        def _post_policy(self, ns):
            query = dict((k, v[-1]) for k, v in parse_qs(urlparse(self.path).query).items())
            body = self._body()
            if not isinstance(body, dict):
                return self._send(400, _status(400, "BadRequest", "the body is not a MultiNetworkPolicy object"))
            meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
            for field, expected in (("apiVersion", API_VERSIONS["MultiNetworkPolicy"]),
                                    ("kind", "MultiNetworkPolicy")):
                if body.get(field) not in (None, expected):
                    return self._send(400, _status(400, "BadRequest", "the %s in the data (%s) does not match the "
                                                   "expected %s (%s)" % (field, body.get(field), field, expected)))
            if meta.get("namespace") not in (None, ns):
                return self._send(400, _status(400, "BadRequest", "the namespace of the provided object does not "
                                               "match the namespace sent on the request"))
            name = meta.get("name")
            if not name or not isinstance(name, str):
                return self._send(422, _name_required("MultiNetworkPolicy.k8s.cni.cncf.io"))
            try:
                created, unknown = api._create_policy(ns, name, body,
                                                      strict=query.get("fieldValidation") == "Strict")
            except Invalid as exc:
                return self._send(422, exc.status())
            except StrictlyUnknown as exc:
                return self._send(400, _status(400, "BadRequest", str(exc)))
            except KeyError as exc:
                return self._send(409, _status(409, "AlreadyExists", exc.args[0], details={
                    "name": name, "group": "k8s.cni.cncf.io", "kind": "multi-networkpolicies"}))
            self._send(201, created, self._unknown_warnings(unknown, query))

    return Handler


def main(argv=None):
    """Run the stand-in as a process (the lab's API server), with
    kube-apiserver's options for what it has."""
    import argparse
    import signal
    parser = argparse.ArgumentParser(description="Kubernetes API STAND-IN (tests and lab only)")
    parser.add_argument("--listen", default="127.0.0.1:6443", help="ADDRESS:PORT")
    parser.add_argument("--tls-cert-file", required=True)
    parser.add_argument("--tls-private-key-file", required=True)
    parser.add_argument("--token-auth-file", required=True, help="token,user,uid,\"group,...\" lines")
    parser.add_argument("--rbac", action="append", default=[], help="an RBAC manifest to apply (repeatable)")
    args = parser.parse_args(argv)
    host, _sep, port = args.listen.rpartition(":")
    api = KubeAPIStandIn(host, int(port), rbac=args.rbac, tls_files=(args.tls_cert_file, args.tls_private_key_file))
    api.load_token_file(args.token_auth_file)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_a: stop.set())
    signal.signal(signal.SIGINT, lambda *_a: stop.set())
    print("kube-api stand-in listening on %s" % api.url, flush=True)
    stop.wait()
    api.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
