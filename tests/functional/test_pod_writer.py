"""How the watcher writes a pod's interface list (daemons/kube.py
``PodWriter.annotate``): a JSON Patch that lands only on the very pod it
was made for, still asking what it asked. Against the API stand-in over
HTTPS, as the watcher's service account; what the pod holds is read
back from the stand-in."""

import types

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import kube, settings
from tests.harness.kube_api_standin import WATCHER, KubeAPIStandIn

REQUEST = '[{"name": "net1", "interface": "eth1"}]'
LIST = {ann.IFACE_LIST: '[{"interface": "eth1", "ip_address": "172.16.1.5/24"}]'}


@pytest.fixture
def writer(tmp_path):
    api = KubeAPIStandIn()
    try:
        client = settings.kubernetes_api_client(api.kubeconfig(str(tmp_path / "kc"), WATCHER))
        yield api, kube.PodWriter(kube.k8s_client.CoreV1Api(client), "test")
        client.close()
    finally:
        api.stop()


def read(api, name):
    """The pod as the watcher's cache would hold it: its metadata."""
    pod = api.pod("default", name)
    meta = pod["metadata"]
    return types.SimpleNamespace(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"],
                                 annotations=dict(meta.get("annotations") or {}))


def annotations_of(api, name):
    return api.pod("default", name)["metadata"].get("annotations") or {}


def refused(writer_, meta):
    with pytest.raises(kube.ApiException) as exc:
        writer_.annotate(meta, LIST, ann.request_forms(meta.annotations))
    return exc.value.status


def test_the_list_lands_on_the_pod_read(writer):
    api, writer_ = writer
    api.create_pod("default", "a", {ann.OVN_NETWORK: REQUEST, "keep": "me"})
    meta = read(api, "a")
    writer_.annotate(meta, LIST, ann.request_forms(meta.annotations))
    assert annotations_of(api, "a") == dict(LIST, **{ann.OVN_NETWORK: REQUEST, "keep": "me"})


def changed_request(api, name):
    api.set_annotations("default", name, {ann.OVN_NETWORK: '[{"name": "net2", "interface": "eth1"}]'})


def form_added(api, name):
    api.set_annotations("default", name, {ann.MULTUS_NETWORKS: "macvlan-net"})


def made_again(api, name):
    api.delete_pod("default", name)
    api.create_pod("default", name, {ann.OVN_NETWORK: REQUEST})


@pytest.mark.parametrize("meanwhile", [changed_request, form_added, made_again])
def test_a_list_is_refused_when_the_pod_read_is_no_longer_so(writer, meanwhile):
    """Its request changed, a request form was added (one absent when
    read), or the pod was made again under its name: nothing is written."""
    api, writer_ = writer
    api.create_pod("default", "b", {ann.OVN_NETWORK: REQUEST})
    meta = read(api, "b")
    meanwhile(api, "b")
    assert refused(writer_, meta) == 422
    assert ann.IFACE_LIST not in annotations_of(api, "b")


def test_a_pod_read_without_annotations_keeps_those_it_gained(writer):
    """A pod read with no annotations gets the map whole, but only if it
    still has none: one written since is never wiped."""
    api, writer_ = writer
    api.create_pod("default", "e", {})
    meta = read(api, "e")
    writer_.annotate(meta, LIST, ann.request_forms(meta.annotations))
    assert annotations_of(api, "e") == LIST
    api.create_pod("default", "f", {})
    meta = read(api, "f")
    api.set_annotations("default", "f", {"k8s.v1.cni.cncf.io/network-status": "[]"})
    assert refused(writer_, meta) == 422
    assert annotations_of(api, "f") == {"k8s.v1.cni.cncf.io/network-status": "[]"}
