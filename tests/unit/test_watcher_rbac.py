"""The watcher role's RBAC manifest grants exactly what the watcher uses."""

import os

import yaml

MANIFEST = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "watcher", "files", "rbac.yaml")


def test_least_privilege():
    manifest = yaml.safe_load(open(MANIFEST))
    assert manifest["kind"] == "List"
    docs = manifest["items"]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"]
    role = [d for d in docs if d["kind"] == "ClusterRole"][0]
    granted = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted[(group, resource)] = sorted(rule["verbs"])
                assert "*" not in rule["verbs"] and "*" not in rule["resources"]
    assert granted == {
        ("", "pods"): ["get", "list", "patch", "watch"],
        ("", "events"): ["create"],
        ("", "namespaces"): ["get", "list", "watch"],
        ("k8s.cni.cncf.io", "network-attachment-definitions"): ["get", "list", "watch"],
    }
    binding = [d for d in docs if d["kind"] == "ClusterRoleBinding"][0]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert [s["name"] for s in binding["subjects"]] == ["ovn4nfv-watcher"]
