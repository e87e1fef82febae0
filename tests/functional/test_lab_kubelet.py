"""The lab's kubelet (lab/kubelet.py) against the API stand-in, over HTTPS
as the lab's admin: ``policies`` makes the tenants' namespaces and
MultiNetworkPolicies as a tenant's kubectl would, a second run changes
nothing, one made different by someone else is put back, and what is not
shaped as it takes is refused, naming it, before the API is asked."""

import json
import shutil

import pytest

from lab import kubelet
from tests.harness.kube_api_standin import KubeAPIStandIn

POLICY_FOR = "k8s.v1.cni.cncf.io/policy-for"


@pytest.fixture
def api(tmp_path, monkeypatch):
    """The stand-in, and the kubelet pointed at it with the admin's token
    and the stand-in's CA, where the lab puts them on a node."""
    server = KubeAPIStandIn()
    try:
        credentials = tmp_path / "ovn4nfv-lab"
        credentials.mkdir()
        (credentials / "admin.token").write_text(server.admin_token)
        shutil.copy(server.ca_file, str(credentials / "ca.crt"))
        monkeypatch.setattr(kubelet, "CREDENTIALS", str(credentials))
        monkeypatch.setenv("LAB_API", server.url)
        yield server
    finally:
        server.stop()


def spec(ports=(7777, 7778)):
    """The lab's shape: two labelled namespaces, one policy (see lab/workload.py's tenancy)."""
    return {"namespaces": [{"name": "tenant-a", "labels": {"team": "a"}}, {"name": "tenant-b", "labels": {"team": "b"}}],
            "policies": [{"apiVersion": "k8s.cni.cncf.io/v1beta1", "kind": "MultiNetworkPolicy",
                          "metadata": {"name": "srv-in", "namespace": "tenant-a",
                                       "annotations": {POLICY_FOR: "ovn4nfv.k8s/ovn-net1"}},
                          "spec": {"podSelector": {"matchLabels": {"app": "srv"}}, "policyTypes": ["Ingress"],
                                   "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "cli"}}},
                                                         {"namespaceSelector": {"matchLabels": {"team": "b"}}},
                                                         {"ipBlock": {"cidr": "172.16.44.0/24"}}],
                                                "ports": [{"protocol": "TCP", "port": p} for p in ports]}]}}]}


def run(capsys, given):
    """``kubelet.py policies SPEC_JSON``, its command line; its JSON answer."""
    assert kubelet.main(["kubelet.py", "policies", json.dumps(given)]) == 0
    return json.loads(capsys.readouterr().out)


def labels(server, name):
    return dict((n["metadata"]["name"], n["metadata"]["labels"]) for n in server.namespaces())[name]


def test_made_once_then_a_second_run_changes_nothing(api, capsys):
    # as in the lab: the pods came first, and the stand-in made their namespace, unlabelled
    api.create_pod("tenant-a", "pol-srv", labels={"app": "srv"})
    first = run(capsys, spec())
    assert first == {"namespaces": {"tenant-a": "updated", "tenant-b": "created"},
                     "policies": {"tenant-a/srv-in": "created"}, "changed": 3}
    assert labels(api, "tenant-a") == {"team": "a", "kubernetes.io/metadata.name": "tenant-a"}
    assert labels(api, "tenant-b") == {"team": "b", "kubernetes.io/metadata.name": "tenant-b"}
    stored = api.policies[("tenant-a", "srv-in")]
    assert stored["spec"] == spec()["policies"][0]["spec"] and stored["metadata"]["generation"] == 1
    assert stored["metadata"]["annotations"] == {POLICY_FOR: "ovn4nfv.k8s/ovn-net1"}
    version = api.rv
    assert run(capsys, spec()) == {"namespaces": {"tenant-a": "unchanged", "tenant-b": "unchanged"},
                                   "policies": {"tenant-a/srv-in": "unchanged"}, "changed": 0}
    assert api.rv == version, "a run that changes nothing writes nothing"


def test_what_someone_else_changed_is_put_back_and_their_own_labels_kept(api, capsys):
    run(capsys, spec())
    # someone relabels tenant-b, and edits the policy: a rule of egress, a port less, the annotation gone
    api.label_namespace("tenant-b", {"team": "x", "keep": "me"})
    edited = dict(spec(ports=(7777,))["policies"][0]["spec"], egress=[{}], policyTypes=["Ingress", "Egress"])
    api.update_policy("tenant-a", "srv-in", spec=edited, annotations={"other": "1"})
    again = run(capsys, spec())
    assert again == {"namespaces": {"tenant-a": "unchanged", "tenant-b": "updated"},
                     "policies": {"tenant-a/srv-in": "updated"}, "changed": 2}
    assert labels(api, "tenant-b") == {"team": "b", "keep": "me", "kubernetes.io/metadata.name": "tenant-b"}
    stored = api.policies[("tenant-a", "srv-in")]
    assert stored["spec"] == spec()["policies"][0]["spec"], "exactly its spec: the egress the edit added is gone"
    assert stored["metadata"]["annotations"] == {POLICY_FOR: "ovn4nfv.k8s/ovn-net1", "other": "1"}
    assert stored["metadata"]["generation"] == 3
    assert run(capsys, spec())["changed"] == 0


def test_the_merge_patch_turns_the_old_into_the_new():
    old = {"a": {"b": 1, "c": 2}, "d": [1, 2], "e": 5}
    new = {"a": {"b": 1}, "d": [1], "f": {"g": 1}}
    assert kubelet.merge_diff(old, new) == {"a": {"c": None}, "d": [1], "e": None, "f": {"g": 1}}


@pytest.mark.parametrize("given, words", [
    ([], "SPEC_JSON is {"),
    ({"namespaces": [], "extra": 1}, "SPEC_JSON is {"),
    ({"namespaces": {"name": "a"}}, "SPEC_JSON's namespaces: a list"),
    ({"namespaces": [{"name": "Tenant_A"}]}, "namespaces[0].name: 'Tenant_A' is no namespace's name"),
    ({"namespaces": [{"name": "a", "labels": {"team": "a b"}}]}, "namespaces[0].labels: 'team': 'a b' is not a label's"),
    ({"namespaces": [{"name": "a", "uid": "x"}]}, "namespaces[0]: {name, labels} only"),
    ({"namespaces": [{"name": "a"}, {"name": "a"}]}, "the namespace a is given twice"),
    ({"policies": [{"kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": "a"}, "spec": {}}]},
     "policies[0]: a k8s.cni.cncf.io/v1beta1 MultiNetworkPolicy, not None NetworkPolicy"),
    ({"policies": [{"metadata": {"name": "p"}, "spec": {}}]}, "policies[0].metadata.namespace: None is no namespace's"),
    ({"policies": [{"metadata": {"name": "../p", "namespace": "a"}, "spec": {}}]},
     "policies[0].metadata.name: '../p' is no policy's name"),
    ({"policies": [{"metadata": {"name": "p", "namespace": "a", "uid": "x"}, "spec": {}}]},
     "policies[0].metadata: {name, namespace, annotations, labels} only"),
    ({"policies": [{"metadata": {"name": "p", "namespace": "a"}, "spec": {"podSelector": None}}]},
     "policies[0].spec: a map without nulls"),
    ({"policies": [{"metadata": {"name": "p", "namespace": "a"}, "spec": {}, "status": {}}]},
     "policies[0]: {apiVersion, kind, metadata, spec} only"),
    ({"policies": [{"metadata": {"name": "p", "namespace": "a"}, "spec": {}}] * 2}, "the policy a/p is given twice"),
])
def test_what_is_not_shaped_as_it_takes_is_refused_before_the_api_is_asked(api, given, words):
    version = api.rv
    with pytest.raises(SystemExit) as refused:
        kubelet.policies(given)
    assert str(refused.value).startswith("kubelet: ") and words in str(refused.value)
    assert api.rv == version


def test_what_the_api_refuses_is_said(api, capsys):
    wrong_type = spec()
    wrong_type["policies"][0]["spec"]["podSelector"] = "app=srv"
    with pytest.raises(SystemExit) as refused:
        kubelet.policies(wrong_type)
    assert "creating /apis/k8s.cni.cncf.io/v1beta1/namespaces/tenant-a/multi-networkpolicies/srv-in: 422" \
        in str(refused.value) and "spec.podSelector" in str(refused.value)
    # a field the CRD does not know is refused (fieldValidation=Strict), not pruned away silently
    unknown = spec()
    unknown["policies"][0]["spec"]["ingres"] = []
    with pytest.raises(SystemExit) as refused:
        kubelet.policies(unknown)
    assert ": 400 " in str(refused.value) and "ingres" in str(refused.value)
    assert ("tenant-a", "srv-in") not in api.policies
    with pytest.raises(SystemExit) as refused:
        kubelet.main(["kubelet.py", "policies", "{not json"])
    assert "SPEC_JSON is not JSON" in str(refused.value)


@pytest.mark.parametrize("ref, expected", [
    ("pod-w1a", ("default", "pod-w1a")), ("tenant-a/pol-srv", ("tenant-a", "pol-srv")),
    ("a/b/c", None), ("../x", None), ("tenant-a/", None), ("Pod", None), ("a_b/x", None)])
def test_a_pod_is_named_namespace_slash_name_or_name_alone(ref, expected):
    if expected:
        assert kubelet.pod_ref(ref) == expected
    else:
        with pytest.raises(SystemExit) as refused:
            kubelet.pod_ref(ref)
        assert "is no pod: [NAMESPACE/]NAME" in str(refused.value)
