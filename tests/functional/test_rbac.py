"""Least privilege, proven: the watcher and the node agent run against the
API stand-in with RBAC enforced, each with its own service account's token
and the manifest its role installs. The full manifests let every scenario
finish without one refusal; taking away any one verb of any rule makes the
component ask for it and be refused (so no rule is there for nothing); and
anything a manifest does not grant is refused over HTTP. The watcher's
leader election is proven the same way with its own Role: the elector
creates, reads and renews the Lease, and is refused each without its verb."""

import json
import ssl
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml

from tests.harness.cni_env import Env
from tests.harness.kube_api_standin import NODE_AGENT, PRODUCT_RBAC, WATCHER, KubeAPIStandIn, service_account_user
from tests.harness.watcher_env import Cluster, ovn_network
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_render import policy_group
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import settings
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.election import Elector, LeaseStore
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.lease import Timing
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb

WATCHER_USER = service_account_user(WATCHER)[0]
AGENT_USER = service_account_user(NODE_AGENT)[0]


def manifest(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def role_in(path, kind="ClusterRole"):
    """The first role of ``kind`` (ClusterRole or Role) in ``path``."""
    return [d for d in manifest(path)["items"] if d["kind"] == kind][0]


def verbs_of(path, kind="ClusterRole"):
    """Every (rule index, verb) of the ``kind`` role in ``path``."""
    return [(index, verb) for index, rule in enumerate(role_in(path, kind)["rules"]) for verb in rule["verbs"]]


def without(api, path, index, verb, kind="ClusterRole"):
    """Apply ``path``'s ``kind`` role less ``verb`` of rule ``index``;
    return what that verb was for: (verb, API group, resource)."""
    role = role_in(path, kind)
    rule = role["rules"][index]
    rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    api.apply(role)
    return verb, rule["apiGroups"][0], rule["resources"][0]


def refused(api, user, what, timeout=60):
    verb, group, resource = what
    return api.wait(lambda a: [d for d in a.denied if d["user"] == user
                               and (d["verb"], d["group"], d["resource"]) == (verb, group, resource)], timeout)


# -- the watcher ---------------------------------------------------------------

@pytest.fixture(scope="module")
def watcher(tmp_path_factory, collections_path):
    env = Cluster(str(tmp_path_factory.mktemp("rbac-watcher")), collections_path)
    env.api.add_nad("default", "ovnnet", {"cniVersion": "1.0.0", "type": "ovn4nfv"})
    try:
        yield env
    finally:
        env.stop()


def watcher_scenario(env, tag):
    """Restart the watcher (a fresh list and watch) and give it a pod to
    annotate, a pod to refuse with an Event, a pod that names a NAD, and a
    policy (for net1, selecting the first) to serve."""
    env.terminate()
    env.start()
    env.api.create_policy("default", "pol-" + tag, {"podSelector": {"matchLabels": {"app": tag}}, "ingress": []},
                          {"k8s.v1.cni.cncf.io/policy-for": "ovn4nfv.k8s/net1"})
    env.api.create_pod("default", "good-" + tag, ovn_network({"name": "net1", "interface": "eth1"}),
                       labels={"app": tag})
    env.api.create_pod("default", "bad-" + tag, ovn_network({"name": "nosuch", "interface": "eth1"}))
    env.api.create_pod("default", "nad-" + tag, {ann.MULTUS_NETWORKS: "ovnnet"})


def test_the_watchers_manifest_is_enough(watcher):
    watcher.api.apply(manifest(PRODUCT_RBAC[0]))
    before = len(watcher.api.denied)
    watcher_scenario(watcher, "full")
    watcher.annotated("default", "good-full")
    watcher.annotated("default", "nad-full")
    assert watcher.api.wait(lambda api: watcher.events_for("bad-full"), 30), watcher.log_text()
    group = policy_group("default/pol-full")
    with ovsdb.Database(watcher.box.nb_db, ovsdb.NB_SCHEMA, ("Logical_Switch_Port", "Port_Group")) as db:
        assert db.wait_for(lambda idl: [g for g in idl.tables["Port_Group"].rows.values()
                                        if g.name == group and [p.name for p in g.ports]], 30), \
            "the policy was not served: " + watcher.log_text()
    assert watcher.api.denied[before:] == []


@pytest.mark.parametrize("index,verb", verbs_of(PRODUCT_RBAC[0]))
def test_each_verb_the_watcher_is_granted_is_needed(watcher, index, verb):
    try:
        what = without(watcher.api, PRODUCT_RBAC[0], index, verb)
        watcher_scenario(watcher, "%d-%s" % (index, verb))
        assert refused(watcher.api, WATCHER_USER, what), (what, watcher.log_text())
    finally:
        watcher.api.apply(manifest(PRODUCT_RBAC[0]))


# -- the watchers' leader election ------------------------------------------------

@pytest.fixture(scope="module")
def election(tmp_path_factory):
    api = KubeAPIStandIn()
    try:
        yield api, api.kubeconfig(str(tmp_path_factory.mktemp("rbac-election") / "kc"), WATCHER)
    finally:
        api.stop()


def election_scenario(api, kubeconfig, timeout=30):
    """With no Lease, run an elector as the watcher until it has created
    the Lease (create), read it and renewed it (get, update), or has been
    refused; then release it. Returns whether it renewed."""
    if api.lease("kube-system", "ovn4nfv-watcher") is not None:
        api.delete_lease("kube-system", "ovn4nfv-watcher")
    denied = len(api.denied)
    store = LeaseStore(settings.kubernetes_api_client(kubeconfig))
    elector = Elector(store, Timing(2, 1.5, 0.25), lambda: True, lambda: None, lambda reason: None)
    first = []

    def renewed(a):
        lease = a.lease("kube-system", "ovn4nfv-watcher")
        if lease is None or lease["spec"].get("holderIdentity") != elector.identity:
            return False
        first[:] = first or [lease["metadata"]["resourceVersion"]]
        return lease["metadata"]["resourceVersion"] != first[0]
    elector.start()
    try:
        api.wait(lambda a: len(a.denied) > denied or renewed(a), timeout)
        return renewed(api)
    finally:
        elector.release()
        store.close()


def test_the_election_role_is_enough(election):
    api, kubeconfig = election
    api.apply(manifest(PRODUCT_RBAC[0]))
    before, started = len(api.denied), time.monotonic()
    assert election_scenario(api, kubeconfig), "the elector never renewed its Lease"
    assert api.denied[before:] == []
    assert api.lease("kube-system", "ovn4nfv-watcher")["spec"]["holderIdentity"] == "", "released"
    print("rbac: election created and renewed in %.2f s" % (time.monotonic() - started))


@pytest.mark.parametrize("index,verb", verbs_of(PRODUCT_RBAC[0], "Role"))
def test_each_verb_the_election_is_granted_is_needed(election, index, verb):
    api, kubeconfig = election
    try:
        what = without(api, PRODUCT_RBAC[0], index, verb, "Role")
        assert not election_scenario(api, kubeconfig), "elected without %s" % (what,)
        assert refused(api, WATCHER_USER, what), what
    finally:
        api.apply(manifest(PRODUCT_RBAC[0]))


# -- the node agent -------------------------------------------------------------

@pytest.fixture(scope="module")
def node(tmp_path_factory, collections_path):
    env = Env(str(tmp_path_factory.mktemp("rbac-agent")), collections_path)
    try:
        yield env
    finally:
        env.stop()


def agent_scenario(env, tag):
    """Restart the agent (its sweep lists the node's pods), then an ADD
    that finds the pod without its interface list, so it must watch."""
    env.stop_agent()
    env.start_agent()
    netns, patch = env.unannounced_pod("a-" + tag, {"name": "net1", "interface": "net0"})
    watches, denied = env.api.watches, len(env.api.denied)
    outcome = {}
    adding = threading.Thread(target=lambda: outcome.update(answer=env.cni("ADD", "a-" + tag, netns, "ctr-" + tag)))
    adding.start()
    try:
        env.api.wait(lambda api: api.watches > watches or len(api.denied) > denied, 30)
        env.api.set_annotations("default", "a-" + tag, patch)
    finally:
        adding.join(60)
    return outcome["answer"]


def test_the_agents_manifest_is_enough(node):
    node.api.apply(manifest(PRODUCT_RBAC[1]))
    before = len(node.api.denied)
    code, result, _err = agent_scenario(node, "full")
    assert code == 0, (result, node.log_text())
    assert node.api.denied[before:] == []


@pytest.mark.parametrize("index,verb", verbs_of(PRODUCT_RBAC[1]))
def test_each_verb_the_agent_is_granted_is_needed(node, index, verb):
    try:
        what = without(node.api, PRODUCT_RBAC[1], index, verb)
        code, result, _err = agent_scenario(node, "%d-%s" % (index, verb))
        assert refused(node.api, AGENT_USER, what), (what, node.log_text())
        assert code != 0, "the ADD cannot succeed without it"
    finally:
        node.api.apply(manifest(PRODUCT_RBAC[1]))


# -- what no manifest grants ----------------------------------------------------

RESOURCES = {("", "pods"): "/api/v1/namespaces/default/pods",
             ("", "events"): "/api/v1/namespaces/default/events",
             ("", "namespaces"): "/api/v1/namespaces",
             ("", "secrets"): "/api/v1/namespaces/default/secrets",
             ("", "nodes"): "/api/v1/nodes",
             ("", "services"): "/api/v1/namespaces/default/services",
             ("discovery.k8s.io", "endpointslices"): "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
             ("k8s.cni.cncf.io", "network-attachment-definitions"):
                 "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions",
             ("k8s.cni.cncf.io", "multi-networkpolicies"):
                 "/apis/k8s.cni.cncf.io/v1beta1/namespaces/default/multi-networkpolicies",
             # in the election's namespace: any lease may be created there, only its own read and written
             ("coordination.k8s.io", "leases"): "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"}
VERBS = {"get": ("GET", "/x"), "list": ("GET", ""), "watch": ("GET", "?watch=true&timeoutSeconds=1"),
         "create": ("POST", ""), "update": ("PUT", "/x"), "patch": ("PATCH", "/x"), "delete": ("DELETE", "/x")}
GRANTED = {WATCHER: {("", "pods", "list"), ("", "pods", "watch"), ("", "pods", "patch"), ("", "events", "create"),
                     ("k8s.cni.cncf.io", "network-attachment-definitions", "get"),
                     ("", "services", "list"), ("", "services", "watch"),
                     ("discovery.k8s.io", "endpointslices", "list"), ("discovery.k8s.io", "endpointslices", "watch"),
                     ("k8s.cni.cncf.io", "multi-networkpolicies", "list"),
                     ("k8s.cni.cncf.io", "multi-networkpolicies", "watch"),
                     ("", "namespaces", "list"), ("", "namespaces", "watch"),
                     ("coordination.k8s.io", "leases", "create"),
                     ("", "nodes", "list")},     # ovn4nfv-audit's: network_audit with the watcher's kubeconfig
           NODE_AGENT: {("", "pods", "list"), ("", "pods", "watch")}}


def http(api, token, method, path, context):
    request = urllib.request.Request(api.url + path, method=method, data=b"{}" if method in ("POST", "PUT", "PATCH")
                                     else None, headers={"Content-Type": "application/merge-patch+json",
                                                         **({"Authorization": "Bearer " + token} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@pytest.mark.parametrize("account", [WATCHER, NODE_AGENT])
def test_each_component_is_refused_what_its_manifest_does_not_grant(account):
    api = KubeAPIStandIn()
    try:
        context = ssl.create_default_context(cafile=api.ca_file)
        token = api.service_account_token(account)
        allowed = set()
        for (group, resource), path in RESOURCES.items():
            for verb, (method, suffix) in VERBS.items():
                code, body = http(api, token, method, path + suffix, context)
                if code == 403:
                    assert body["reason"] == "Forbidden" and service_account_user(account)[0] in body["message"]
                else:
                    allowed.add((group, resource, verb))
        assert allowed == GRANTED[account]
        assert http(api, None, "GET", RESOURCES[("", "pods")], context)[0] == 401
        assert http(api, "forged", "GET", RESOURCES[("", "pods")], context)[0] == 401
    finally:
        api.stop()


def test_the_api_is_https_with_the_labs_own_ca(tmp_path):
    api = KubeAPIStandIn()
    try:
        with pytest.raises(urllib.error.URLError) as err:
            urllib.request.urlopen(api.url + "/api/v1/pods", timeout=10, context=ssl.create_default_context())
        assert "CERTIFICATE_VERIFY_FAILED" in str(err.value)
        plain = urllib.request.Request("http://%s:%d/api/v1/pods" % (api.host, api.port))
        with pytest.raises(Exception):
            urllib.request.urlopen(plain, timeout=10).read()
        kubeconfig = json.load(open(api.kubeconfig(str(tmp_path / "kc"), WATCHER)))
        assert kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
        assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")
    finally:
        api.stop()
