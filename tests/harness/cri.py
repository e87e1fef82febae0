"""A client of the Kubernetes Container Runtime Interface (CRI,
``runtime.v1.RuntimeService``): the calls a kubelet makes to run and
remove a pod's sandbox, over gRPC on the runtime's Unix socket.

Only the messages those calls carry are described, field for field as
``k8s.io/cri-api/pkg/apis/runtime/v1/api.proto`` numbers them (an enum is
sent as the varint it is on the wire). They are built at run time into a
descriptor pool, so that the client needs no generated code and runs with
the protobuf and grpcio of the venv as with Debian's (the lab's nodes).
Requests and answers are dicts, with the proto's field names.
"""

import json

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

PACKAGE = "runtime.v1"
SERVICE = "/runtime.v1.RuntimeService/"

# message: [(field, number, type)]; a type is a scalar, "map" (string to
# string), ".Name" (a message) or "*.Name" (repeated messages).
MESSAGES = {
    "VersionRequest": [("version", 1, "string")],
    "VersionResponse": [("version", 1, "string"), ("runtime_name", 2, "string"),
                        ("runtime_version", 3, "string"), ("runtime_api_version", 4, "string")],
    "PodSandboxMetadata": [("name", 1, "string"), ("uid", 2, "string"), ("namespace", 3, "string"),
                           ("attempt", 4, "uint32")],
    "LinuxPodSandboxConfig": [("cgroup_parent", 1, "string"), ("sysctls", 3, "map")],
    "PodSandboxConfig": [("metadata", 1, ".PodSandboxMetadata"), ("hostname", 2, "string"),
                         ("log_directory", 3, "string"), ("labels", 6, "map"), ("annotations", 7, "map"),
                         ("linux", 8, ".LinuxPodSandboxConfig")],
    "RunPodSandboxRequest": [("config", 1, ".PodSandboxConfig"), ("runtime_handler", 2, "string")],
    "RunPodSandboxResponse": [("pod_sandbox_id", 1, "string")],
    "StopPodSandboxRequest": [("pod_sandbox_id", 1, "string")],
    "StopPodSandboxResponse": [],
    "RemovePodSandboxRequest": [("pod_sandbox_id", 1, "string")],
    "RemovePodSandboxResponse": [],
    "PodSandboxStatusRequest": [("pod_sandbox_id", 1, "string"), ("verbose", 2, "bool")],
    "PodIP": [("ip", 1, "string")],
    "PodSandboxNetworkStatus": [("ip", 1, "string"), ("additional_ips", 2, "*.PodIP")],
    "PodSandboxStatus": [("id", 1, "string"), ("metadata", 2, ".PodSandboxMetadata"), ("state", 3, "int32"),
                         ("created_at", 4, "int64"), ("network", 5, ".PodSandboxNetworkStatus"),
                         ("labels", 7, "map"), ("annotations", 8, "map")],
    "PodSandboxStatusResponse": [("status", 1, ".PodSandboxStatus"), ("info", 2, "map")],
    "PodSandboxStateValue": [("state", 1, "int32")],
    "PodSandboxFilter": [("id", 1, "string"), ("state", 2, ".PodSandboxStateValue"),
                         ("label_selector", 3, "map")],
    "ListPodSandboxRequest": [("filter", 1, ".PodSandboxFilter")],
    "PodSandbox": [("id", 1, "string"), ("metadata", 2, ".PodSandboxMetadata"), ("state", 3, "int32"),
                   ("created_at", 4, "int64"), ("labels", 5, "map"), ("annotations", 6, "map")],
    "ListPodSandboxResponse": [("items", 1, "*.PodSandbox")],
}
# method: (request, response)
METHODS = {name: (name + "Request", name + "Response")
           for name in ("Version", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus",
                        "ListPodSandbox")}
SANDBOX_READY, SANDBOX_NOTREADY = 0, 1
# the labels a kubelet puts on every sandbox of a pod
POD_NAME, POD_NAMESPACE, POD_UID = "io.kubernetes.pod.name", "io.kubernetes.pod.namespace", "io.kubernetes.pod.uid"

_F = descriptor_pb2.FieldDescriptorProto
SCALARS = {"string": _F.TYPE_STRING, "uint32": _F.TYPE_UINT32, "int32": _F.TYPE_INT32, "int64": _F.TYPE_INT64,
           "bool": _F.TYPE_BOOL}


def _file():
    proto = descriptor_pb2.FileDescriptorProto(name="ovn4nfv_cri_client.proto", package=PACKAGE, syntax="proto3")
    for name, fields in MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field, number, kind in fields:
            entry = message.field.add(name=field, number=number, label=_F.LABEL_OPTIONAL)
            if kind in SCALARS:
                entry.type = SCALARS[kind]
                continue
            entry.type = _F.TYPE_MESSAGE
            if kind == "map":
                nested = "".join(part.capitalize() for part in field.split("_")) + "Entry"
                entry.label, entry.type_name = _F.LABEL_REPEATED, ".%s.%s.%s" % (PACKAGE, name, nested)
                mapped = message.nested_type.add(name=nested)
                mapped.options.map_entry = True
                for key, key_number in (("key", 1), ("value", 2)):
                    mapped.field.add(name=key, number=key_number, label=_F.LABEL_OPTIONAL, type=_F.TYPE_STRING)
            else:
                if kind.startswith("*"):
                    entry.label, kind = _F.LABEL_REPEATED, kind[1:]
                entry.type_name = "." + PACKAGE + kind
    return proto


def _classes():
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(_file().SerializeToString())
    make = getattr(message_factory, "GetMessageClass", None)       # protobuf 4.22 on
    if make is None:                                                  # Debian's 3.21
        make = message_factory.MessageFactory(pool).GetPrototype
    return {name: make(pool.FindMessageTypeByName(PACKAGE + "." + name)) for name in MESSAGES}


CLASSES = _classes()


class Runtime:
    """The CRI runtime service on ``socket_path`` (containerd's is
    ``/run/containerd/containerd.sock``); every call bounded by
    ``timeout`` seconds."""

    def __init__(self, socket_path, timeout=120):
        self.channel = grpc.insecure_channel("unix://" + socket_path)
        self.timeout = timeout

    def close(self):
        self.channel.close()

    def call(self, method, request=None):
        """``method`` of RuntimeService with the dict ``request``; the
        answer as a dict (a gRPC error raises ``grpc.RpcError``)."""
        request_name, response_name = METHODS[method]
        stub = self.channel.unary_unary(SERVICE + method, request_serializer=lambda m: m.SerializeToString(),
                                        response_deserializer=CLASSES[response_name].FromString)
        message = json_format.ParseDict(request or {}, CLASSES[request_name]())
        answer = stub(message, timeout=self.timeout)
        return json_format.MessageToDict(answer, preserving_proto_field_name=True)

    def version(self):
        return self.call("Version", {"version": "v1"})

    def run_pod_sandbox(self, config, runtime_handler=""):
        """Run the sandbox ``config`` (a PodSandboxConfig): the runtime
        makes its network namespace and calls the CNI plugin's ADD. Its id."""
        return self.call("RunPodSandbox", {"config": config, "runtime_handler": runtime_handler})["pod_sandbox_id"]

    def stop_pod_sandbox(self, sandbox_id):
        """The runtime calls the CNI plugin's DEL and stops the sandbox."""
        self.call("StopPodSandbox", {"pod_sandbox_id": sandbox_id})

    def remove_pod_sandbox(self, sandbox_id):
        self.call("RemovePodSandbox", {"pod_sandbox_id": sandbox_id})

    def pod_sandbox_status(self, sandbox_id, verbose=True):
        return self.call("PodSandboxStatus", {"pod_sandbox_id": sandbox_id, "verbose": verbose})

    def list_pod_sandbox(self, labels=None, state=None):
        """The sandboxes with all of ``labels`` (and in ``state``)."""
        selector = {"label_selector": labels or {}}
        if state is not None:
            selector["state"] = {"state": state}
        return self.call("ListPodSandbox", {"filter": selector}).get("items", [])


def sandbox_config(name, namespace, uid, attempt=0, labels=None, annotations=None, sysctls=None):
    """The PodSandboxConfig a kubelet sends for a pod: its metadata, its
    labels with the kubelet's own (:data:`POD_NAME`, :data:`POD_NAMESPACE`,
    :data:`POD_UID`), its annotations, and its sysctls
    (securityContext.sysctls)."""
    marks = {POD_NAME: name, POD_NAMESPACE: namespace, POD_UID: uid}
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid, "attempt": attempt},
            "hostname": name, "labels": dict(labels or {}, **marks), "annotations": dict(annotations or {}),
            "linux": {"sysctls": dict(sysctls or {})}}


def netns_path(status):
    """The network namespace the runtime made for a sandbox (what it passes
    as CNI_NETNS), from its verbose PodSandboxStatus answer."""
    info = json.loads(status["info"]["info"])
    return next(n["path"] for n in info["runtimeSpec"]["linux"]["namespaces"] if n["type"] == "network")
