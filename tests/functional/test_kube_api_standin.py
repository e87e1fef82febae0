"""The stand-in API server speaks the protocol the official Kubernetes
client expects: list, watch from a resourceVersion, 410 Gone, merge
patch, events, and 500s when told to."""

import ssl
import urllib.error
import urllib.request

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import kube
from tests.harness.kube_api_standin import KubeAPIStandIn, service_account_user


@pytest.fixture
def api(tmp_path):
    server = KubeAPIStandIn()
    try:
        # the admin's kubeconfig: these tests drive the protocol, not RBAC
        core = client.CoreV1Api(config.new_client_from_config(server.kubeconfig(str(tmp_path / "kc"))))
        yield server, core
    finally:
        server.stop()


def test_list_watch_patch(api):
    server, core = api
    server.create_pod("default", "a", {"ovnNetwork": "[]"})
    pods = core.list_pod_for_all_namespaces()
    assert [p.metadata.name for p in pods.items] == ["a"]
    rv = pods.metadata.resource_version
    server.create_pod("default", "b")
    seen = [(e["type"], e["object"].metadata.name)
            for e in watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=rv,
                                          timeout_seconds=1)]
    assert seen == [("ADDED", "b")]
    # the daemons' merge patch, through whichever client generation runs
    writer = kube.PodWriter(core, "test")
    writer.patch(client.V1ObjectMeta(name="a", namespace="default"), {"metadata": {"annotations": {"x": "1"}}})
    writer.patch(client.V1ObjectMeta(name="a", namespace="default"), {"metadata": {"annotations": {"y": "2"}}})
    assert server.pod("default", "a")["metadata"]["annotations"] == {"ovnNetwork": "[]", "x": "1", "y": "2"}
    # a JSON patch (what Debian 13's client sends for a dict by itself) is refused
    request = urllib.request.Request(server.url + "/api/v1/namespaces/default/pods/a", method="PATCH",
                                     data=b'{"metadata": {}}', headers={
                                         "Content-Type": "application/json-patch+json",
                                         "Authorization": "Bearer " + server.admin_token})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10, context=ssl.create_default_context(cafile=server.ca_file))
    assert err.value.code == 415


def test_watch_from_a_compacted_version_is_gone(api):
    server, core = api
    server.create_pod("default", "a")
    rv = core.list_pod_for_all_namespaces().metadata.resource_version
    server.create_pod("default", "b")
    server.compact()
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=2))
    assert err.value.status == 410


def test_events_and_failures(api):
    server, core = api
    core.create_namespaced_event("default", client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="a."), involved_object=client.V1ObjectReference(
            kind="Pod", name="a", namespace="default"), reason="Bad", message="m", type="Warning"))
    assert server.events[0]["reason"] == "Bad"
    server.fail_next(2)
    for _attempt in range(2):
        with pytest.raises(ApiException) as err:
            core.list_pod_for_all_namespaces()
        assert err.value.status == 500
    assert core.list_pod_for_all_namespaces().items == []


def test_namespaces_and_going_away(api):
    server, core = api
    server.create_pod("blue", "a")
    assert [n.metadata.name for n in core.list_namespace().items] == ["blue"]
    assert core.read_namespace("blue").metadata.name == "blue"
    server.go_away()
    with pytest.raises(Exception):
        core.list_pod_for_all_namespaces(_request_timeout=2)
    server.come_back()
    assert [p.metadata.name for p in core.list_pod_for_all_namespaces().items] == ["a"]


def test_rbac_is_evaluated_as_kubernetes_does():
    """Roles bind in their namespace only, ClusterRoles through a RoleBinding
    in its namespace only, through a ClusterRoleBinding everywhere;
    resourceNames limit get but not list; groups and wildcards count."""
    server = KubeAPIStandIn(rbac=())
    try:
        server.apply({"kind": "List", "items": [
            {"kind": "Role", "metadata": {"name": "r", "namespace": "blue"},
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]}]},
            {"kind": "RoleBinding", "metadata": {"name": "rb", "namespace": "blue"},
             "roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "ann"}]},
            {"kind": "ClusterRole", "metadata": {"name": "c"},
             "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}]},
            {"kind": "RoleBinding", "metadata": {"name": "crb", "namespace": "green"},
             "roleRef": {"kind": "ClusterRole", "name": "c"}, "subjects": [{"kind": "Group", "name": "g"}]},
            {"kind": "ClusterRoleBinding", "metadata": {"name": "everywhere"},
             "roleRef": {"kind": "ClusterRole", "name": "c"},
             "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "kube-system"}]}]})
        sa = service_account_user("kube-system/sa")
        cases = [
            (("ann", []), ("get", "", "pods", "blue", "a"), True),
            (("ann", []), ("get", "", "pods", "blue", "b"), False),
            (("ann", []), ("get", "", "pods", "green", "a"), False),
            (("ann", []), ("list", "", "pods", "blue", None), False),
            (("bob", ["g"]), ("list", "k8s.cni.cncf.io", "network-attachment-definitions", "green", None), True),
            (("bob", ["g"]), ("list", "", "pods", "blue", None), False),
            (("bob", ["g"]), ("list", "", "pods", None, None), False),
            (sa, ("list", "", "secrets", None, None), True),
            (sa, ("watch", "", "secrets", None, None), False),
            (("root", ["system:masters"]), ("delete", "", "nodes", None, "n1"), True)]
        for (user, groups), attributes, allowed in cases:
            assert server.authorize(user, groups, *attributes) is allowed, (user, attributes)
    finally:
        server.stop()


def test_services_have_the_servers_defaults_and_validation(api, tmp_path):
    """A Service created over HTTP as kubectl would: the server's defaults
    come back, in the shapes the official client deserialises; a port out
    of range or an unnamed second port is a 422, as kube-apiserver says it."""
    server, core = api
    made = core.create_namespaced_service("default", client.V1Service(
        metadata=client.V1ObjectMeta(name="web", annotations={"a": "b"}),
        spec=client.V1ServiceSpec(selector={"app": "web"}, session_affinity="ClientIP",
                                  ports=[client.V1ServicePort(port=80)])))
    assert made.metadata.uid and made.spec.cluster_ip.startswith("10.96.")
    # the client's generations name spec.clusterIPs differently
    assert (getattr(made.spec, "cluster_ips", None) or made.spec.cluster_i_ps) == [made.spec.cluster_ip]
    port = made.spec.ports[0]
    assert (port.protocol, port.target_port) == ("TCP", 80), "targetPort defaults to port"
    assert made.spec.session_affinity_config.client_ip.timeout_seconds == 10800
    assert made.spec.type == "ClusterIP"
    for bad, words in (([client.V1ServicePort(port=70000)], "spec.ports[0].port"),
                       ([client.V1ServicePort(port=80, name="a"), client.V1ServicePort(port=81)],
                        "spec.ports[1].name")):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_service("default", client.V1Service(
                metadata=client.V1ObjectMeta(name="bad"), spec=client.V1ServiceSpec(ports=bad)))
        assert err.value.status == 422 and words in err.value.body
    listed = core.list_service_for_all_namespaces()
    assert [s.metadata.name for s in listed.items] == ["web"]
    rv = listed.metadata.resource_version
    core.delete_namespaced_service("web", "default")
    seen = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        core.list_service_for_all_namespaces, resource_version=rv, timeout_seconds=1)]
    assert seen == [("DELETED", "web")]


def test_endpointslices_and_pod_readiness(api, tmp_path):
    """EndpointSlices in discovery.k8s.io/v1, named to their Service by
    label; a pod's readiness as the kubelet reports it (status subresource)."""
    server, core = api
    discovery = client.DiscoveryV1Api(core.api_client)
    server.create_endpointslice("default", "ext-1", "ext", ["172.16.1.50"], [{"name": "dns", "port": 53}])
    listed = discovery.list_endpoint_slice_for_all_namespaces()
    [found] = listed.items
    assert found.address_type == "IPv4" and found.metadata.labels == {"kubernetes.io/service-name": "ext"}
    assert found.endpoints[0].addresses == ["172.16.1.50"] and found.endpoints[0].conditions.ready is True
    assert (found.ports[0].name, found.ports[0].port, found.ports[0].protocol) == ("dns", 53, "TCP")
    server.delete_endpointslice("default", "ext-1")
    seen = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        discovery.list_endpoint_slice_for_all_namespaces,
        resource_version=listed.metadata.resource_version, timeout_seconds=1)]
    assert seen == [("DELETED", "ext-1")]

    server.create_pod("default", "p", labels={"app": "x"}, ports=[{"name": "http", "containerPort": 8080}])
    server.set_ready("default", "p")
    pod = core.list_pod_for_all_namespaces().items[0]
    assert pod.metadata.labels == {"app": "x"} and pod.status.phase == "Running"
    assert [(c.type, c.status) for c in pod.status.conditions] == [("Ready", "True")]
    assert pod.spec.containers[0].ports[0].container_port == 8080
    # the kubelet's status patch, over HTTP: only the status changes
    request = urllib.request.Request(
        server.url + "/api/v1/namespaces/default/pods/p/status", method="PATCH",
        data=b'{"status": {"conditions": [{"type": "Ready", "status": "False"}]}, '
             b'"metadata": {"labels": {"app": "y"}}}',
        headers={"Content-Type": "application/merge-patch+json", "Authorization": "Bearer " + server.admin_token})
    urllib.request.urlopen(request, timeout=10, context=ssl.create_default_context(cafile=server.ca_file))
    pod = server.pod("default", "p")
    assert pod["status"]["conditions"] == [{"type": "Ready", "status": "False"}]
    assert pod["metadata"]["labels"] == {"app": "x"}, "the status subresource changes only the status"
