"""The daemons read the API's objects from their JSON (kube.ApiObject), as
the client's own models read them: every field of every nested object,
whatever generation of the client is installed (Debian 12's, Debian 13's
or the venv's)."""

import json
import types

import pytest

from kubernetes import client as k8s_client

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import kube

POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
        "name": "cnf-1", "namespace": "red", "uid": "4b1c0f53-3c3a-4e0c-9f55-1d7d6c0b2a10",
        "resourceVersion": "1207", "generateName": "cnf-",
        "creationTimestamp": "2026-11-26T05:00:00Z", "deletionTimestamp": "2026-11-26T05:10:30Z",
        "deletionGracePeriodSeconds": 30,
        "labels": {"app": "cnf", "tier": "data"},
        "annotations": {"ovnNetwork": '[{"name": "left", "interface": "net0"}]', "k8s.v1.cni.cncf.io/networks": ""},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "cnf-abc",
                             "uid": "9a0f", "controller": True}],
        "finalizers": ["example.com/keep"],
    },
    "spec": {
        "nodeName": "worker1", "hostNetwork": False, "nodeSelector": {"kubernetes.io/os": "linux"},
        "containers": [{"name": "app", "image": "debian:13", "command": ["sleep", "infinity"],
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                                  {"containerPort": 9000}],
                        "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "64Mi"}}}],
    },
    "status": {
        "phase": "Running", "podIP": "10.240.1.5", "hostIP": "192.168.1.21",
        "podIPs": [{"ip": "10.240.1.5"}], "startTime": "2026-11-26T05:00:02Z",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-26T05:00:04Z"},
                       {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "image": "debian:13",
                               "imageID": "", "state": {"running": {"startedAt": "2026-11-26T05:00:03Z"}}}],
    },
}


def client_model(raw, kind):
    """The client's own model of ``raw``, made by its own deserializer."""
    api = k8s_client.ApiClient()
    text = json.dumps(raw)
    try:
        return api.deserialize(text, kind, "application/json")     # the pydantic generation
    except TypeError:
        return api.deserialize(types.SimpleNamespace(data=text), kind)


def same(ours, theirs, path):
    """``ours`` reads as ``theirs`` does, field by field, all the way down."""
    if hasattr(type(theirs), "openapi_types"):
        assert isinstance(ours, kube.ApiObject), path
        for name in type(theirs).openapi_types:
            same(getattr(ours, name), getattr(theirs, name), path + "." + name)
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), path
        for index, (mine, model) in enumerate(zip(ours, theirs)):
            same(mine, model, "%s[%d]" % (path, index))
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and sorted(ours) == sorted(theirs), path
        for key in theirs:
            same(ours[key], theirs[key], "%s[%r]" % (path, key))
    else:
        assert ours == theirs, "%s: %r, the client reads %r" % (path, ours, theirs)


@pytest.mark.parametrize("raw, kind", [
    (POD, "V1Pod"),
    ({"metadata": {"name": "bare"}}, "V1Pod"),
    ({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "77"}, "items": [POD, POD]},
     "V1PodList"),
    ({"metadata": {"name": "web", "namespace": "red", "uid": "s1"},
      "spec": {"clusterIP": "10.96.0.10", "externalIPs": ["192.168.50.100"], "selector": {"app": "cnf"},
               "sessionAffinity": "ClientIP", "publishNotReadyAddresses": True,
               "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}},
     "V1Service"),
    ({"metadata": {"name": "web-x1", "namespace": "red", "labels": {"kubernetes.io/service-name": "web"}},
      "addressType": "IPv4",
      "endpoints": [{"addresses": ["10.240.1.5"], "conditions": {"ready": True},
                     "targetRef": {"kind": "Pod", "name": "cnf-1", "namespace": "red", "uid": "4b1c"}}],
      "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]},
     "V1EndpointSlice"),
])
def test_an_object_read_from_its_json_reads_as_the_clients_model(raw, kind):
    same(kube.ApiObject(json.loads(json.dumps(raw)), getattr(k8s_client, kind)), client_model(raw, kind), kind)


def test_what_the_model_lacks_is_an_attribute_error_and_what_is_absent_is_none():
    pod = kube.ApiObject({"metadata": {"name": "bare"}}, k8s_client.V1Pod)
    assert pod.status is None and pod.metadata.annotations is None
    with pytest.raises(AttributeError):
        pod.podIP           # the JSON's name, not the model's
    assert getattr(pod.metadata, "no_such_field", "default") == "default"
    # the irregular names the client gives: pod_ip for podIP
    assert kube.ApiObject(POD, k8s_client.V1Pod).status.pod_ip == "10.240.1.5"


def test_an_object_that_is_not_a_json_object_is_refused():
    with pytest.raises(ValueError, match="V1Pod"):
        kube.ApiObject(["not", "a", "pod"], k8s_client.V1Pod)


def test_objects_compare_by_their_json():
    assert kube.ApiObject(POD, k8s_client.V1Pod) == kube.ApiObject(json.loads(json.dumps(POD)), k8s_client.V1Pod)
    assert kube.ApiObject(POD, k8s_client.V1Pod) != kube.ApiObject({"metadata": {}}, k8s_client.V1Pod)
