"""The stand-in API server speaks the protocol the official Kubernetes
client expects: list, watch from a resourceVersion, 410 Gone, merge
patch, events, and 500s when told to; namespaces are objects with labels;
MultiNetworkPolicies are served as their CRD serves them (pruning, type
validation, generation)."""

import json
import ssl
import threading
import urllib.error
import urllib.request

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import kube
from tests.harness.kube_api_standin import KubeAPIStandIn, request_attributes, service_account_user


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
    # a JSON patch whose body is an object (what Debian 13's client sends for a dict by itself) is refused
    request = urllib.request.Request(server.url + "/api/v1/namespaces/default/pods/a", method="PATCH",
                                     data=b'{"metadata": {}}', headers={
                                         "Content-Type": "application/json-patch+json",
                                         "Authorization": "Bearer " + server.admin_token})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10, context=ssl.create_default_context(cafile=server.ca_file))
    assert err.value.code == 400 and json.loads(err.value.read())["reason"] == "BadRequest"


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


def _watch(function, *args, rv):
    """The events of a watch from ``rv``, ending after a second: (type, kind, name)."""
    seen = []
    for event in watch.Watch().stream(function, *args, resource_version=rv, timeout_seconds=1):
        obj = event["object"]
        meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
        seen.append((event["type"], meta["name"] if isinstance(obj, dict) else meta.name))
    return seen


def test_namespaces_are_objects_with_labels(api):
    """Namespaces are created (with labels, over POST as kubectl would),
    relabelled and watched; each has the label the server sets, which no
    write takes away; a pod in a namespace never created makes it first."""
    server, core = api
    made = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name="blue", labels={"tenant": "blue"})))
    assert made.metadata.uid and made.status.phase == "Active"
    assert made.metadata.labels == {"tenant": "blue", "kubernetes.io/metadata.name": "blue"}
    with pytest.raises(ApiException) as err:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="blue")))
    assert err.value.status == 409
    with pytest.raises(KeyError):
        server.create_namespace("blue")
    listed = core.list_namespace()
    assert [n.metadata.name for n in listed.items] == ["blue"]
    rv = listed.metadata.resource_version

    server.label_namespace("blue", {"tenant": "green", "kubernetes.io/metadata.name": "other"})
    server.label_namespace("blue", {"tenant": "green"})           # as it is: no event
    server.create_namespace("red", {"team": "r"})
    server.create_pod("green", "a")                               # its namespace first
    assert _watch(core.list_namespace, rv=rv) == [("MODIFIED", "blue"), ("ADDED", "red"), ("ADDED", "green")]
    assert core.read_namespace("blue").metadata.labels == {"tenant": "green", "kubernetes.io/metadata.name": "blue"}
    assert core.read_namespace("green").metadata.labels == {"kubernetes.io/metadata.name": "green"}
    kinds = [(t, o["kind"], o["metadata"]["name"]) for _rv, t, o in server.history]
    assert kinds.index(("ADDED", "Namespace", "green")) < kinds.index(("ADDED", "Pod", "a"))
    assert [n["metadata"]["name"] for n in server.namespaces()] == ["blue", "green", "red"]
    with pytest.raises(ApiException) as err:
        core.read_namespace("nowhere")
    assert err.value.status == 404

    # a pod's labels replaced, as a tenant's relabelling
    rv = core.list_pod_for_all_namespaces().metadata.resource_version
    server.set_labels("green", "a", {"app": "web"})
    assert _watch(core.list_pod_for_all_namespaces, rv=rv) == [("MODIFIED", "a")]
    assert core.read_namespaced_pod("a", "green").metadata.labels == {"app": "web"}

    # deleted: Terminating, what is in it, then the namespace
    rv = core.list_namespace().metadata.resource_version
    server.delete_namespace("green")
    assert _watch(core.list_namespace, rv=rv) == [("MODIFIED", "green"), ("DELETED", "green")]
    assert server.pod("green", "a") is None


GROUP, VERSION, PLURAL = "k8s.cni.cncf.io", "v1beta1", "multi-networkpolicies"


def _policy(name, spec, namespace=None, annotations=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": GROUP + "/" + VERSION, "kind": "MultiNetworkPolicy", "metadata": meta, "spec": spec}


def _post(server, path, body, query=""):
    request = urllib.request.Request(server.url + path + query, method="POST", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + server.admin_token})
    context = ssl.create_default_context(cafile=server.ca_file)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, json.loads(response.read()), response.headers.get_all("Warning") or []
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), []


def test_multi_network_policies_are_served_as_the_crd_serves_them(api):
    """MultiNetworkPolicy (k8s.cni.cncf.io/v1beta1) through the official
    client's custom objects API: create (201, 409), list (cluster-wide and
    namespaced), get, watch, merge patch, delete; the server's metadata
    (uid, generation), and nothing in v1beta2."""
    server, core = api
    custom = client.CustomObjectsApi(core.api_client)
    spec = {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}], "ports": [{"protocol": "TCP", "port": 5432}]}]}
    code, made, _warnings = _post(server, "/apis/k8s.cni.cncf.io/v1beta1/namespaces/blue/multi-networkpolicies",
                                  _policy("db", spec, annotations={"k8s.v1.cni.cncf.io/policy-for": "blue/net"}))
    assert code == 201, made
    assert made["metadata"]["uid"] and made["metadata"]["creationTimestamp"] and made["metadata"]["resourceVersion"]
    assert (made["metadata"]["namespace"], made["metadata"]["generation"]) == ("blue", 1)
    assert made["spec"] == spec and "status" not in made
    assert [n.metadata.name for n in core.list_namespace().items] == ["blue"], "its namespace, made first"
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, _policy("db", spec))
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "AlreadyExists"
    server.create_policy("red", "web", {"podSelector": {}})
    listed = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert listed["kind"] == "MultiNetworkPolicyList" and listed["apiVersion"] == "k8s.cni.cncf.io/v1beta1"
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in listed["items"]] == [
        ("blue", "db"), ("red", "web")]
    assert [p["metadata"]["name"] for p in custom.list_namespaced_custom_object(
        GROUP, VERSION, "red", PLURAL)["items"]] == ["web"]
    got = custom.get_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "db")
    assert got["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/policy-for": "blue/net"}
    rv = listed["metadata"]["resourceVersion"]

    # generation: +1 for a change of the spec, not for the metadata's, nor for nothing
    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "db", {
        "spec": {"ingress": [{"ports": [{"port": 5433}]}]}})
    assert patched["metadata"]["generation"] == 2 and patched["spec"]["ingress"] == [{"ports": [{"port": 5433}]}]
    annotated = custom.patch_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "db", {
        "metadata": {"annotations": {"note": "x"}}})
    assert annotated["metadata"]["generation"] == 2
    assert annotated["metadata"]["resourceVersion"] != patched["metadata"]["resourceVersion"]
    again = custom.patch_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "db", {
        "metadata": {"annotations": {"note": "x"}}})
    assert again["metadata"]["resourceVersion"] == annotated["metadata"]["resourceVersion"], "a no-op"
    with pytest.raises(ApiException) as err:       # written against an older version
        custom.patch_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "db", {
            "metadata": {"resourceVersion": patched["metadata"]["resourceVersion"]}, "spec": {"podSelector": {}}})
    assert err.value.status == 409
    assert server.update_policy("red", "web", spec={"podSelector": {"matchLabels": {"a": "b"}}})[
        "metadata"]["generation"] == 2
    assert server.update_policy("red", "web", annotations={"k": "v"})["metadata"]["generation"] == 2

    deleted = custom.delete_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "db")
    assert deleted["metadata"]["name"] == "db"
    for attempt in (lambda: custom.get_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "db"),
                    lambda: custom.delete_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "db"),
                    lambda: custom.patch_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "db", {}),
                    lambda: custom.list_cluster_custom_object(GROUP, "v1beta2", PLURAL),
                    lambda: custom.create_namespaced_custom_object(GROUP, "v1beta2", "red", PLURAL, dict(
                        _policy("web", {"podSelector": {}}), apiVersion=GROUP + "/v1beta2")),
                    lambda: custom.get_namespaced_custom_object(GROUP, "v1beta2", "red", PLURAL, "web")):
        with pytest.raises(ApiException) as err:
            attempt()
        assert err.value.status == 404
    server.delete_policy("red", "web")
    assert _watch(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL, rv=rv) == [
        ("MODIFIED", "db"), ("MODIFIED", "db"), ("MODIFIED", "web"), ("MODIFIED", "web"),
        ("DELETED", "db"), ("DELETED", "web")]


def test_multi_network_policies_are_pruned_and_type_checked(api):
    """As a structural CRD: fields the schema does not declare are dropped
    (with the server's warning; refused under fieldValidation=Strict),
    endPort and a named port are kept, a value of the wrong type is a 422
    naming the field, and semantics are not checked (a reversed range, a
    bad CIDR are stored)."""
    server, core = api
    custom = client.CustomObjectsApi(core.api_client)
    path = "/apis/k8s.cni.cncf.io/v1beta1/namespaces/blue/multi-networkpolicies"
    spec = {"podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"], "x": 1}]},
            "unknownField": True,
            "egress": [{"to": [{"ipBlock": {"cidr": "not a cidr", "except": []}, "peer": "?"}],
                        "ports": [{"port": 9000, "endPort": 8000, "flavour": "x"}, {"port": "http"}]}]}
    code, made, warnings = _post(server, path, dict(_policy("p", spec), status={"ok": True}))
    assert code == 201, made
    assert made["spec"] == {
        "podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]},
        "egress": [{"to": [{"ipBlock": {"cidr": "not a cidr", "except": []}}],
                    "ports": [{"port": 9000, "endPort": 8000}, {"port": "http"}]}]}
    assert "status" not in made
    # as kube-apiserver's Warning headers: 299 - "<text>"
    assert sorted(json.loads(w.partition("299 - ")[2]) for w in warnings) == sorted('unknown field "%s"' % f for f in (
        "spec.podSelector.matchExpressions[0].x", "spec.unknownField", "spec.egress[0].to[0].peer",
        "spec.egress[0].ports[0].flavour", "status")), warnings
    assert server.create_policy("blue", "q", {"podSelector": {}, "extra": 1})["spec"] == {"podSelector": {}}
    code, body, _warnings = _post(server, path, _policy("strict", {"podSelector": {}, "extra": 1}),
                                  "?fieldValidation=Strict")
    assert code == 400 and 'unknown field "spec.extra"' in body["message"]

    for spec, field, message in (
            ({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "endPort": "90"}]}]},
             "spec.ingress[0].ports[0].endPort", 'Invalid value: "string"'),
            ({"podSelector": {}, "ingress": [{"ports": [{"port": {"n": 1}}]}]},
             "spec.ingress[0].ports[0].port", 'Invalid value: "object"'),
            ({"podSelector": {}, "ingress": {"ports": []}}, "spec.ingress", 'Invalid value: "object"'),
            ({"podSelector": {"matchLabels": {"a": 1}}}, "spec.podSelector.matchLabels.a",
             'Invalid value: "integer"'),
            ({"podSelector": {}, "policyTypes": "Ingress"}, "spec.policyTypes", 'Invalid value: "string"'),
            ({"podSelector": {}, "egress": [{"to": [{"ipBlock": {"except": []}}]}]},
             "spec.egress[0].to[0].ipBlock.cidr", "Required value"),
            ({"ingress": []}, "spec.podSelector", "Required value")):
        with pytest.raises(ApiException) as err:
            custom.create_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, _policy("bad", spec))
        status = json.loads(err.value.body)
        assert err.value.status == 422 and status["reason"] == "Invalid", status
        assert "%s: %s" % (field, message) in status["message"], status["message"]
        assert [c["field"] for c in status["details"]["causes"]] == [field]
        with pytest.raises(ValueError):
            server.create_policy("blue", "bad", spec)
    with pytest.raises(ApiException) as err:       # a patch is checked as well
        custom.patch_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "p", {
            "spec": {"egress": [{"ports": [{"endPort": "x"}]}]}})
    assert err.value.status == 422 and "spec.egress[0].ports[0].endPort: Invalid value" in err.value.body
    assert custom.get_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "p")["metadata"]["generation"] == 1
    assert sorted(p["metadata"]["name"] for p in custom.list_cluster_custom_object(
        GROUP, VERSION, PLURAL)["items"]) == ["p", "q"]


def test_policies_and_namespaces_are_authorized_by_resource(tmp_path):
    """RBAC sees multi-networkpolicies in k8s.cni.cncf.io and namespaces in
    the core group, as kube-apiserver's request info resolver names them."""
    assert request_attributes("GET", "/apis/k8s.cni.cncf.io/v1beta1/multi-networkpolicies", {"watch": "true"}) == (
        "watch", "k8s.cni.cncf.io", "multi-networkpolicies", None, None)
    assert request_attributes("PATCH", "/apis/k8s.cni.cncf.io/v1beta1/namespaces/blue/multi-networkpolicies/p",
                              {}) == ("patch", "k8s.cni.cncf.io", "multi-networkpolicies", "blue", "p")
    assert request_attributes("GET", "/api/v1/namespaces", {}) == ("list", "", "namespaces", None, None)
    assert request_attributes("GET", "/api/v1/namespaces/blue", {}) == ("get", "", "namespaces", "blue", "blue")
    server = KubeAPIStandIn(rbac=())
    try:
        server.apply({"kind": "List", "items": [
            {"kind": "ClusterRole", "metadata": {"name": "reader"}, "rules": [
                {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["multi-networkpolicies"], "verbs": ["list", "watch"]},
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}]},
            {"kind": "ClusterRoleBinding", "metadata": {"name": "reader"},
             "roleRef": {"kind": "ClusterRole", "name": "reader"},
             "subjects": [{"kind": "ServiceAccount", "name": "w", "namespace": "kube-system"}]}]})
        server.create_policy("blue", "p", {"podSelector": {}})
        api_client = config.new_client_from_config(server.kubeconfig(str(tmp_path / "kc"), "kube-system/w"))
        custom, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
        listed = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        assert [p["metadata"]["name"] for p in listed["items"]] == ["p"]
        server.create_policy("blue", "q", {"podSelector": {}})
        assert _watch(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                      rv=listed["metadata"]["resourceVersion"]) == [("ADDED", "q")]
        assert [n.metadata.name for n in core.list_namespace().items] == ["blue"]
        for attempt in (lambda: custom.get_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "p"),
                        lambda: custom.delete_namespaced_custom_object(GROUP, VERSION, "blue", PLURAL, "p"),
                        lambda: core.list_namespace(watch=True, timeout_seconds=1),
                        lambda: core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="x")))):
            with pytest.raises(ApiException) as err:
                attempt()
            assert err.value.status == 403
        assert [(d["verb"], d["group"], d["resource"]) for d in server.denied] == [
            ("get", "k8s.cni.cncf.io", "multi-networkpolicies"), ("delete", "k8s.cni.cncf.io", "multi-networkpolicies"),
            ("watch", "", "namespaces"), ("create", "", "namespaces")]
    finally:
        server.stop()


# -- Leases, held requests, JSON Patch -------------------------------------------

def _call(server, method, path, body, content_type="application/json", token=None):
    """One request over HTTPS with the admin's token (or ``token``): its
    status and JSON answer."""
    request = urllib.request.Request(server.url + path, method=method, data=json.dumps(body).encode(), headers={
        "Content-Type": content_type, "Authorization": "Bearer " + (token or server.admin_token)})
    context = ssl.create_default_context(cafile=server.ca_file)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


def _lease(name, holder, **spec):
    return client.V1Lease(metadata=client.V1ObjectMeta(name=name), spec=client.V1LeaseSpec(
        holder_identity=holder, lease_duration_seconds=spec.pop("duration", 2), **spec))


def test_leases_are_served_as_kube_apiserver_serves_them(api):
    """coordination.k8s.io/v1 leases through the official client: get (404
    when absent), create (201, 409), replace (200; 409 on a stale
    resourceVersion; unconditional without one; 404 when absent), list,
    delete (a Status); 422 for a duration below 1 s, 400 for a field of the
    wrong type; MicroTimes written back with microseconds and Z."""
    server, core = api
    leases = client.CoordinationV1Api(core.api_client)
    with pytest.raises(ApiException) as err:
        leases.read_namespaced_lease("w", "kube-system")
    assert err.value.status == 404 and json.loads(err.value.body)["reason"] == "NotFound"
    code, made = _call(server, "POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                "metadata": {"name": "w"}, "spec": {
                                                    "holderIdentity": "a", "leaseDurationSeconds": 2,
                                                    "renewTime": "2026-01-02T03:04:05.5+01:00", "nosuch": 1}})
    assert code == 201, made
    assert made["metadata"]["uid"] and made["metadata"]["resourceVersion"] and made["metadata"]["namespace"] == \
        "kube-system"
    assert made["spec"] == {"holderIdentity": "a", "leaseDurationSeconds": 2,
                            "renewTime": "2026-01-02T02:04:05.500000Z"}, "normalised, the unknown field dropped"
    assert server.lease("kube-system", "w") == made and server.lease("kube-system", "nosuch") is None
    with pytest.raises(ApiException) as err:
        leases.create_namespaced_lease("kube-system", _lease("w", "b"))
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "AlreadyExists"
    read = leases.read_namespaced_lease("w", "kube-system")
    assert (read.spec.holder_identity, read.metadata.resource_version) == ("a", made["metadata"]["resourceVersion"])
    read.spec.holder_identity = "b"
    renewed = leases.replace_namespaced_lease("w", "kube-system", read)
    assert renewed.spec.holder_identity == "b"
    assert int(renewed.metadata.resource_version) > int(made["metadata"]["resourceVersion"])
    read.spec.holder_identity = "c"        # still the first version: a lost race
    with pytest.raises(ApiException) as err:
        leases.replace_namespaced_lease("w", "kube-system", read)
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    assert server.lease("kube-system", "w")["spec"]["holderIdentity"] == "b"
    code, forced = _call(server, "PUT", LEASES + "/w", {"metadata": {"name": "w"}, "spec": {"holderIdentity": "c"}})
    assert (code, forced["spec"]) == (200, {"holderIdentity": "c"}), "no resourceVersion: unconditional"
    code, same = _call(server, "PUT", LEASES + "/w", {"metadata": {"name": "w"}, "spec": {"holderIdentity": "c"}})
    assert (code, same["metadata"]["resourceVersion"]) == (200, forced["metadata"]["resourceVersion"]), \
        "a write that changes nothing makes no new version"
    with pytest.raises(ApiException) as err:
        leases.replace_namespaced_lease("x", "kube-system", _lease("x", "a"))
    assert err.value.status == 404, "an update creates no Lease"
    assert _call(server, "PUT", LEASES + "/w", {"metadata": {"name": "v"}})[0] == 400
    for spec, code, field in (({"leaseDurationSeconds": 0}, 422, "spec.leaseDurationSeconds"),
                              ({"leaseTransitions": -1}, 422, "spec.leaseTransitions"),
                              ({"leaseDurationSeconds": "6"}, 400, "leaseDurationSeconds"),
                              ({"renewTime": "yesterday"}, 400, "renewTime")):
        for method, path in (("POST", LEASES), ("PUT", LEASES + "/w")):
            answer = _call(server, method, path, {"metadata": {"name": "w" if method == "PUT" else "new"},
                                                  "spec": spec})
            assert answer[0] == code and field in answer[1]["message"], answer
            if code == 422:
                assert answer[1]["reason"] == "Invalid" and answer[1]["details"]["causes"][0]["field"] == field
    assert server.lease("kube-system", "new") is None
    server.set_lease("kube-system", "other", {"holderIdentity": "z"})
    assert [lease.metadata.name for lease in leases.list_namespaced_lease("kube-system").items] == ["other", "w"]
    code, status = _call(server, "DELETE", LEASES + "/w", {})
    assert (code, status["kind"], status["status"], status["details"]["kind"]) == (200, "Status", "Success", "leases")
    assert server.lease("kube-system", "w") is None
    with pytest.raises(ApiException) as err:
        leases.delete_namespaced_lease("w", "kube-system")
    assert err.value.status == 404


def test_leases_are_authorized_by_resource_name(tmp_path):
    """A Role that grants create on leases and get and update on one named
    lease: creating any lease is allowed, reading or writing another is
    not, nor listing them."""
    assert request_attributes("PUT", LEASES + "/w", {}) == ("update", "coordination.k8s.io", "leases",
                                                            "kube-system", "w")
    server = KubeAPIStandIn(rbac=())
    try:
        server.apply({"kind": "List", "items": [
            {"kind": "Role", "metadata": {"name": "elect", "namespace": "kube-system"}, "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"],
                 "resourceNames": ["w"]}]},
            {"kind": "RoleBinding", "metadata": {"name": "elect", "namespace": "kube-system"},
             "roleRef": {"kind": "Role", "name": "elect"},
             "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "kube-system"}]}]})
        leases = client.CoordinationV1Api(config.new_client_from_config(
            server.kubeconfig(str(tmp_path / "kc"), "kube-system/sa")))
        for name in ("w", "x"):
            leases.create_namespaced_lease("kube-system", _lease(name, "a"))
        read = leases.read_namespaced_lease("w", "kube-system")
        read.spec.holder_identity = "b"
        assert leases.replace_namespaced_lease("w", "kube-system", read).spec.holder_identity == "b"
        for attempt in (lambda: leases.read_namespaced_lease("x", "kube-system"),
                        lambda: leases.replace_namespaced_lease("x", "kube-system", _lease("x", "b")),
                        lambda: leases.list_namespaced_lease("kube-system"),
                        lambda: leases.delete_namespaced_lease("w", "kube-system"),
                        lambda: leases.create_namespaced_lease("default", _lease("w", "a"))):
            with pytest.raises(ApiException) as err:
                attempt()
            assert err.value.status == 403
        assert [(d["verb"], d["namespace"], d["name"]) for d in server.denied] == [
            ("get", "kube-system", "x"), ("update", "kube-system", "x"), ("list", "kube-system", None),
            ("delete", "kube-system", "w"), ("create", "default", None)]
    finally:
        server.stop()


def test_held_requests_stall_without_failing(api):
    """hold_matching stalls the matching requests, answered in full once
    the rule is cleared or their time is up; others pass meanwhile."""
    server, core = api
    leases = client.CoordinationV1Api(core.api_client)
    server.set_lease("kube-system", "w", {"holderIdentity": "a"})
    server.hold_matching("GET", "/leases/w", 60)
    answers = []
    reader = threading.Thread(target=lambda: answers.append(leases.read_namespaced_lease("w", "kube-system")))
    reader.start()
    try:
        assert server.wait(lambda a: a.held == 1, 30)
        assert leases.list_namespaced_lease("kube-system").items, "another request passes"
        assert reader.is_alive() and not answers, "held, not answered"
    finally:
        server.hold_matching("GET", "/leases/w", 0)
        reader.join(30)
    assert [a.spec.holder_identity for a in answers] == ["a"]
    server.hold_matching("PUT", "/leases/w", 0.2)
    read = leases.read_namespaced_lease("w", "kube-system")
    read.spec.holder_identity = "b"
    assert leases.replace_namespaced_lease("w", "kube-system", read).spec.holder_identity == "b"
    assert server.held == 2, "the PUT was held for its time, then served"


JSON_PATCH = "application/json-patch+json"


def test_pods_take_json_patches_all_or_nothing(api):
    """RFC 6902 on pods: add, replace, remove and test, ~1 and ~0 escaped;
    a failed test or a missing path is the server's 422 and changes
    nothing; a body that is not a list of operations, or an unknown one, is
    a 400; a patch of either kind that changes the UID is a 422."""
    server, core = api
    pod = server.create_pod("default", "a", {"k8s.v1.cni.cncf.io/networks": "n1", "a~b": "1"})
    path, uid = "/api/v1/namespaces/default/pods/a", pod["metadata"]["uid"]
    code, patched = _call(server, "PATCH", path, [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "n1"},
        {"op": "test", "path": "/metadata/annotations/absent", "value": None},
        {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "n2"},
        {"op": "add", "path": "/metadata/annotations/ovnIfaceList", "value": "[]"},
        {"op": "remove", "path": "/metadata/annotations/a~0b"},
        {"op": "add", "path": "/spec/containers/-", "value": {"name": "d"}},
        {"op": "add", "path": "/spec/containers/0", "value": {"name": "b"}}], JSON_PATCH)
    assert code == 200, patched
    assert patched["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "n2", "ovnIfaceList": "[]"}
    assert [c["name"] for c in patched["spec"]["containers"]] == ["b", "c", "d"]
    assert server.pod("default", "a") == patched
    for operations in ([{"op": "add", "path": "/metadata/annotations/x", "value": "1"},
                        {"op": "test", "path": "/metadata/annotations/ovnIfaceList", "value": "[1]"}],
                       [{"op": "remove", "path": "/metadata/annotations/nosuch"}],
                       [{"op": "replace", "path": "/metadata/labels/nosuch", "value": "v"}],
                       [{"op": "add", "path": "/metadata/nosuch/key", "value": "v"}],
                       [{"op": "remove", "path": "/spec/containers/3"}]):
        code, refused = _call(server, "PATCH", path, operations, JSON_PATCH)
        assert code == 422 and refused["reason"] == "Invalid", refused
        assert refused["message"] == "the server rejected our request due to an error in our request"
        assert refused["details"]["causes"][0]["reason"] == "UnexpectedServerResponse"
        assert server.pod("default", "a") == patched, "all or nothing"
    assert "test failed" in _call(server, "PATCH", path, [
        {"op": "test", "path": "/metadata/annotations/ovnIfaceList", "value": "[1]"}], JSON_PATCH)[1][
            "details"]["causes"][0]["message"]
    for body in ({"metadata": {}}, [{"op": "move", "from": "/a", "path": "/b"}], ["add"]):
        assert _call(server, "PATCH", path, body, JSON_PATCH)[0] == 400, body
    for body, content_type in (([{"op": "replace", "path": "/metadata/uid", "value": "other"}], JSON_PATCH),
                               ({"metadata": {"uid": "other"}}, kube.MERGE_PATCH)):
        code, refused = _call(server, "PATCH", path, body, content_type)
        assert (code, refused["reason"]) == (422, "Invalid"), refused
        assert refused["message"] == 'Pod "a" is invalid: metadata.uid: Invalid value: "other": field is immutable'
    assert server.pod("default", "a") == patched
    code, same = _call(server, "PATCH", path, {"metadata": {"uid": uid, "annotations": {"x": "1"}}}, kube.MERGE_PATCH)
    assert code == 200 and same["metadata"]["uid"] == uid and same["metadata"]["annotations"]["x"] == "1"
    code, same = _call(server, "PATCH", path, {"metadata": {"uid": None}}, kube.MERGE_PATCH)
    assert code == 200 and same["metadata"]["uid"] == uid, "a patch that drops the UID keeps it"
