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
  is exact for annotations);
* events: create, list;
* network-attachment-definitions (``k8s.cni.cncf.io/v1``): get, list;
* namespaces: get, list (every namespace a pod or NAD was created in).

Tests drive it in-process: :meth:`KubeAPIStandIn.create_pod`,
:meth:`delete_pod`, :meth:`compact` (expire every older resourceVersion,
ending open watches with a 410), :meth:`drop_watches` (end open watches
without a word), :meth:`fail_next` (answer 500 for a while), :meth:`go_away`
and :meth:`come_back` (stop listening, then listen again on the same port).
It listens on 127.0.0.1 unless told otherwise.

The lab (``make lab``) runs it as a process on its master container, as
``python3 kube_api_standin.py --listen 192.168.33.11:6443``: there, pods are
created and deleted over HTTP (``POST`` and ``DELETE`` on the pods resource),
as ``kubectl`` would, and the stand-in assigns each its UID.
"""

import copy
import datetime
import json
import re
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

_POD = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/pods(?:/(?P<name>[^/]+))?$")
_EVENTS = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/events$")
_NAMESPACE = re.compile(r"^/api/v1/namespaces(?:/(?P<name>[^/]+))?$")
# The API server parses booleans with Go's strconv.ParseBool; older Python
# clients (Debian 12's 22.6) send "True".
_GO_TRUE = ("1", "t", "T", "true", "TRUE", "True")
_NAD = re.compile(r"^/apis/k8s.cni.cncf.io/v1(?:/namespaces/(?P<ns>[^/]+))?"
                  r"/network-attachment-definitions(?:/(?P<name>[^/]+))?$")


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


class KubeAPIStandIn:
    """The stand-in's state and its HTTP server."""

    def __init__(self, host="127.0.0.1", port=0):
        self.host = host
        self.lock = threading.Condition()
        self.rv = 1
        self.compacted = 0           # versions at or below this are gone
        self.pods = {}               # (ns, name) -> object
        self.nads = {}
        self.events = []
        self.history = []            # (rv, event type, object) for watches
        self.failures = 0
        self.targeted = {}          # (method, path suffix) -> (count, code)
        self.targeted_failed = 0
        self.watches = 0             # watch requests served so far
        self.requests = 0
        self.dropped = 0             # bumped to end open watches
        self.connections = set()     # open client sockets, closed by go_away
        self.created_at = {}         # (ns, name) -> monotonic time, for benchmarks
        self.annotated_at = {}       # (ns, name) -> first patch that wrote ovnIfaceList
        self.stopping = False
        self.port = port
        self._listen()

    def _listen(self):
        self.server = ThreadingHTTPServer((self.host, self.port), _handler(self))
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
        names = set(ns for ns, _n in list(self.pods) + list(self.nads))
        return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "uid": ns}}
                for ns in sorted(names)]

    @property
    def url(self):
        return "http://%s:%d" % (self.host, self.port)

    def kubeconfig(self, path):
        """Write a kubeconfig that points at this server; return its path."""
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "standin",
               "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
               "users": [{"name": "standin", "user": {"token": "standin"}}],
               "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "standin"}}]}
        with open(path, "w") as handle:
            json.dump(doc, handle)
        return path

    def stop(self):
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    # -- in-process control ------------------------------------------------
    def _bump(self, kind, obj):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, kind, copy.deepcopy(obj)))
        self.lock.notify_all()

    def create_pod(self, namespace, name, annotations=None, node="node1"):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                            "annotations": dict(annotations or {}), "creationTimestamp": _now()},
               "spec": {"nodeName": node, "containers": [{"name": "c", "image": "standin"}]},
               "status": {"phase": "Pending"}}
        with self.lock:
            self.pods[(namespace, name)] = pod
            self.created_at[(namespace, name)] = time.monotonic()
            self._bump("ADDED", pod)
            return copy.deepcopy(pod)

    def delete_pod(self, namespace, name):
        with self.lock:
            pod = self.pods.pop((namespace, name))
            self._bump("DELETED", pod)

    def set_annotations(self, namespace, name, annotations):
        with self.lock:
            pod = self.pods[(namespace, name)]
            pod["metadata"]["annotations"] = merge_patch(pod["metadata"].get("annotations"), annotations)
            self._bump("MODIFIED", pod)

    def add_nad(self, namespace, name, config):
        nad = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
               "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())},
               "spec": {"config": json.dumps(config)}}
        with self.lock:
            self.nads[(namespace, name)] = nad
            self._bump("ADDED", nad)

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


def _selected(obj, selector):
    """Whether ``obj`` passes a field selector (``metadata.name=x,...``)."""
    for term in (t for t in (selector or "").split(",") if t):
        field, _sep, value = term.partition("=")
        value = value.lstrip("=")
        if field == "metadata.name" and obj["metadata"]["name"] != value:
            return False
        if field == "metadata.namespace" and obj["metadata"]["namespace"] != value:
            return False
        if field == "spec.nodeName" and (obj.get("spec") or {}).get("nodeName") != value:
            return False
    return True


def _status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _handler(api):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def setup(self):
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

        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _failing(self):
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
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"null")

        def do_GET(self):
            if self._failing():
                return
            url = urlparse(self.path)
            query = dict((k, v[-1]) for k, v in parse_qs(url.query).items())
            routes = ((_POD, api.pods, "Pod"), (_NAD, api.nads, "NetworkAttachmentDefinition"))
            for pattern, store, kind in routes:
                match = pattern.match(url.path)
                if not match:
                    continue
                ns, name = match.group("ns"), match.group("name")
                if name:
                    with api.lock:
                        obj = store.get((ns, name))
                        body = copy.deepcopy(obj) if obj else None
                    if body is None:
                        return self._send(404, _status(404, "NotFound", "%s %s/%s not found" % (kind, ns, name)))
                    return self._send(200, body)
                if query.get("watch") in _GO_TRUE:
                    return self._watch(kind, ns, query)
                with api.lock:
                    items = [copy.deepcopy(o) for (o_ns, _n), o in sorted(store.items())
                             if (ns is None or o_ns == ns) and _selected(o, query.get("fieldSelector"))]
                    rv = str(api.rv)
                return self._send(200, {"kind": kind + "List", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": rv}, "items": items})
            match = _NAMESPACE.match(url.path)
            if match:
                with api.lock:
                    found = api.namespaces()
                if match.group("name"):
                    found = [n for n in found if n["metadata"]["name"] == match.group("name")]
                    if not found:
                        return self._send(404, _status(404, "NotFound", "namespace %s" % match.group("name")))
                    return self._send(200, found[0])
                return self._send(200, {"kind": "NamespaceList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": str(api.rv)}, "items": found})
            if _EVENTS.match(url.path):
                with api.lock:
                    return self._send(200, {"kind": "EventList", "apiVersion": "v1",
                                            "metadata": {"resourceVersion": str(api.rv)},
                                            "items": copy.deepcopy(api.events)})
            self._send(404, _status(404, "NotFound", url.path))

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
                                     and (ns is None or o["metadata"]["namespace"] == ns)
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
            match = _POD.match(urlparse(self.path).path)
            if not match or not match.group("name"):
                return self._send(404, _status(404, "NotFound", self.path))
            kind = self.headers.get("Content-Type", "")
            patch = self._body()
            if "merge-patch" not in kind:
                return self._send(415, _status(415, "UnsupportedMediaType",
                                               "the stand-in takes merge patches, not %s" % kind))
            key = (match.group("ns"), match.group("name"))
            with api.lock:
                pod = api.pods.get(key)
                if pod is None:
                    return self._send(404, _status(404, "NotFound", "pod %s/%s not found" % key))
                merged = merge_patch(pod, patch)
                merged["metadata"]["uid"] = pod["metadata"]["uid"]
                if "ovnIfaceList" in (merged["metadata"].get("annotations") or {}):
                    api.annotated_at.setdefault(key, time.monotonic())
                api.pods[key] = merged
                api._bump("MODIFIED", merged)
                body = copy.deepcopy(merged)
            self._send(200, body)

        def do_DELETE(self):
            if self._failing():
                return
            match = _POD.match(urlparse(self.path).path)
            if not match or not match.group("name"):
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
                return self._send(201, api.create_pod(ns, name, meta.get("annotations"), node=node))
            match = _EVENTS.match(urlparse(self.path).path)
            if not match:
                return self._send(404, _status(404, "NotFound", self.path))
            event = self._body()
            with api.lock:
                api.events.append(event)
                api.lock.notify_all()
            self._send(201, event)

    return Handler


def main(argv=None):
    """Run the stand-in as a process (the lab's API server)."""
    import argparse
    import signal
    parser = argparse.ArgumentParser(description="Kubernetes API STAND-IN (tests and lab only)")
    parser.add_argument("--listen", default="127.0.0.1:6443", help="ADDRESS:PORT")
    args = parser.parse_args(argv)
    host, _sep, port = args.listen.rpartition(":")
    api = KubeAPIStandIn(host, int(port))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_a: stop.set())
    signal.signal(signal.SIGINT, lambda *_a: stop.set())
    print("kube-api stand-in listening on %s" % api.url, flush=True)
    stop.wait()
    api.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
