"""The on-disk contract across an upgrade (issue 39): every mark,
annotation and database row the previous release wrote is read by this
checkout's code.

The previous release's own code made a small cluster
(``tests/contract/record.py``, ``tests/harness/contract.py``): its NB, SB
and node's Open vSwitch database and its API objects are kept in
``tests/data/contract/<release>/``. Here they are served again as an
upgrade finds them: the databases by real ``ovsdb-server`` s, converted to
the installed schemas first when those differ (as the packages' upgrade
converts them), with no ``ovn-northd`` or ``ovs-vswitchd`` (nothing but the
product writes, so every write seen is the product's); the API objects by
the stand-in, under this checkout's RBAC manifests (as the upgraded roles
apply them). Then, with this checkout's code:

(a) the watcher starts, resyncs and writes nothing: the NB's own file holds
    no transaction after the load but the leadership's new term, the NB's
    dump is the one loaded, and the stand-in's history holds no patch of a
    pod;
(b) the cluster audit (``network_audit``'s core, as the module calls it)
    finds nothing, with every class run;
(c) the readers take every recorded mark and annotation: each mark is one
    this code defines; the CNI side reads each pod's interface list; the
    node audit, the node agent's follower and its naming read the OVS
    ports' marks; the modules find the networks, the topology, the
    gateway and the chassis as they were declared;
(d) a pod deleted after the upgrade has all its rows freed by the new
    watcher, which takes them for its own, and its address is free again.

Each test says which break of the contract it catches.
"""

import json
import threading
import types

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils import cni
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import pod_changes, pod_ports, services, vms
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.audit_task import run_cluster_audit
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import POLICY_FOR
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_gateways, plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import marks
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import node_agent, pod_follow
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node.host_audit import run_host_audit
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute, reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.ovs import Chassis
from tests.harness import contract, nb_history
from tests.harness.kube_api_standin import KubeAPIStandIn
from tests.harness.sandbox import Sandbox, decode
from tests.harness.watcher_env import Cluster

TIMEOUT = 30
# the sentinels' namespace: its pod's key sorts after every recorded one in the resync
SENTINELS = "zz-contract"
DATABASES = {"ovnnb_db": contract.NB_FILE, "ovnsb_db": contract.SB_FILE, "conf": contract.OVS_FILE}
TLS = {"private_key": None, "certificate": None, "ca_cert": None}


class Upgrade:
    """The recorded cluster served again, and the current watcher on it."""

    def __init__(self, tmp, collections, recording):
        self.tmp, self.recording = tmp, recording
        self.box = self.api = self.env = self.audit = None
        try:
            self.box = Sandbox(vswitchd=False, northd=False,
                               files=dict((name, recording.path(f)) for name, f in DATABASES.items()))
            self.api = KubeAPIStandIn()
            self.api.load(recording.objects)
            # the pods' queue's sentinel (one worker): a request the watcher refuses with an
            # Event and no write, served after every recorded pod's key
            self.api.create_pod(SENTINELS, "pods", {ann.OVN_NETWORK: json.dumps([
                {"name": "blue", "interface": "not-an-interface"}])}, node=contract.NODE)
            self.nb_loaded = self.box.dump("nb")
            self.files_loaded = dict((name, self.read(name)) for name in DATABASES)
            self.api_loaded = self.api.rv
            self.env = Cluster(tmp, collections, api=self.api, box=self.box, sb=True, plan=False, workers=1)
            # why the watcher did not come to serve the recorded cluster, if it did not: (a)
            # and (d) fail on it, the audit and the readers judge the recording all the same
            self.unsettled = self.settle()
        except Exception:
            self.stop()
            raise

    def read(self, name):
        with open(self.box.db_file(name), "rb") as handle:
            return handle.read()

    def said(self, kind, name, reason):
        """Block until the watcher says ``reason`` of the sentinel ``name``
        (a ``kind``); whether it did."""
        def found(api):
            return [e for e in api.events if e["involvedObject"]["namespace"] == SENTINELS and
                    (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) == (kind, name, reason)]
        return bool(self.api.wait(found, TIMEOUT))

    def settle(self):
        """Until every key the resync queued is served, each queue passed by a
        sentinel queued after it, one at a time: the pods' (the pods served
        queue the Services and policies that select them), then the
        Services', then the policies'. Each sentinel is refused with an
        Event, and writes nothing. Returns why not, or None."""
        if not self.env.wait_ready(TIMEOUT):
            return "the watcher did not start"
        api = self.api
        sentinels = [
            ("Pod", "pods", "InvalidNetworkRequest", None),         # in the API before the watcher started
            ("Service", "services", services.INVALID, lambda: api.create_service(
                SENTINELS, "services", {"ports": [{"port": 80}], "externalIPs": ["127.0.0.9"]},
                {services.NETWORK_ANNOTATION: "blue"})),
            ("MultiNetworkPolicy", "policies", "InvalidPolicy", lambda: api.create_policy(
                SENTINELS, "policies", {"podSelector": {}, "ingress": [{"ports": [{"port": 90, "endPort": 80}]}]},
                {POLICY_FOR: "ovn4nfv.k8s/blue"}))]
        problem = None
        for kind, name, reason, make in sentinels:
            if make is not None:
                make()
            if not self.said(kind, name, reason):
                problem = "the watcher never said %s of the sentinel %s %s/%s" % (reason, kind, SENTINELS, name)
                break
        # the recorded cluster again, for the audit and the readers
        for store, remove in ((api.policies, api.delete_policy), (api.services, api.delete_service),
                              (api.pods, api.delete_pod)):
            for key in [k for k in list(store) if k[0] == SENTINELS]:
                remove(*key)
        return problem

    def cluster_audit(self):
        """The cluster audit (``network_audit`` with ``layer: cluster``) of
        the recorded cluster, made once, with the admin's kubeconfig."""
        if self.audit is None:
            kubeconfig = self.api.kubeconfig(self.tmp + "/admin.kubeconfig")
            self.audit = run_cluster_audit(dict(TLS, db=self.box.nb_db, sb_db=self.box.sb_db, kubeconfig=kubeconfig,
                                                state="audited", timeout=10))
        return self.audit

    def require_settled(self):
        if self.unsettled:
            pytest.fail("%s:\n%s" % (self.unsettled, self.env.log_text()))

    def history(self):
        """The NB's transactions since it was loaded, its own file read."""
        records = nb_history.read(self.box.db_file("ovnnb_db"), base="ovnnb_db" in self.box.converted)
        return records[1:]

    def stop(self):
        code = self.env.stop() if self.env is not None else None
        if self.api is not None:
            self.api.stop()
        if self.box is not None:
            self.box.stop()
        return code


@pytest.fixture(scope="module")
def upgrade(tmp_path_factory, collections_path):
    done = Upgrade(str(tmp_path_factory.mktemp("contract")), collections_path, contract.Recording())
    try:
        yield done
    finally:
        code = done.stop()
    assert code == 0, "SIGTERM must stop the watcher cleanly (exit %r)" % code
    assert done.api.denied == [], "the watcher asked for what its RBAC manifest does not grant"


def rows(path):
    """``{table: [row]}`` of a recorded database file (a backup's one record), decoded."""
    record, = nb_history.read(path)
    return dict((table, [dict((k, decode(v)) for k, v in row.items()) for row in found.values()])
                for table, found in record.tables.items())


def ids(row, column="external_ids"):
    return row.get(column) if isinstance(row.get(column), dict) else {}


def as_set(value):
    """A set column's value as decoded (a list, or its one atom) as a set."""
    return set(value) if isinstance(value, list) else {value} if value not in (None, "") else set()


# -- (a) the watcher writes nothing -----------------------------------------------

def test_the_watcher_starts_on_the_old_cluster_and_writes_nothing(upgrade):
    """Catches any mark, name or annotation the watcher no longer reads as
    the release wrote it: a port it would make again, mend or delete, a
    balancer, group, ACL, address set, QoS row or DHCP option it would
    rewrite, an interface list it would write again; or one it cannot
    read at all (it never comes to serve)."""
    upgrade.require_settled()
    records = upgrade.history()
    # one transaction: the new leader's term, which is all it touches (NB_Global)
    assert [(r.takes_over, sorted(r.tables)) for r in records] == [(True, ["NB_Global"])], [
        (r.comment, r.tables) for r in records]
    assert records[0].term == int(rows(upgrade.recording.path(contract.NB_FILE))["NB_Global"][0]["external_ids"][
        marks.K_TERM]) + 1, "the term the release's watcher took is read, and the next one taken"
    # the same from outside: the dump (without NB_Global) is the one loaded
    assert upgrade.box.dump("nb") == upgrade.nb_loaded
    assert upgrade.read("ovnsb_db") == upgrade.files_loaded["ovnsb_db"]
    assert nb_history.unattributed(records) == []
    patched = [(o["metadata"]["namespace"], o["metadata"]["name"]) for rv, event, o in upgrade.api.history
               if rv > upgrade.api_loaded and o["kind"] == "Pod" and event == "MODIFIED"]
    assert patched == [] and upgrade.api.iface_lists == {}, "no pod's interface list is written again"
    # what it said of the recorded objects (a request, a Service or a policy misread says so):
    # the one refusal the release said too (nf/router asks for relaxed port security on red,
    # which does not allow it)
    said = sorted(set((e["involvedObject"]["namespace"], e["involvedObject"]["name"], e["reason"])
                      for e in upgrade.api.events if e["involvedObject"]["namespace"] != SENTINELS))
    assert said == [("nf", "router", "PortSecurityRefused")], said


# -- (b) the audit ---------------------------------------------------------------

def test_the_audit_finds_nothing(upgrade):
    """Catches a mark the audit no longer reads (a port taken for leaked or
    missing, a network for drifted, a policy's, QoS or port security's rows
    for wrong) and an interface list it misreads."""
    result = upgrade.cluster_audit()
    assert result["skipped"] == [], "every class is judged (the API, the SB and the nodes are there)"
    assert result["findings"] == [], result["lines"]


# -- (c) the readers -------------------------------------------------------------

def test_every_mark_the_release_wrote_is_one_this_code_defines(upgrade):
    """Catches a mark renamed or dropped in common/marks.py: every
    ``ovn4nfv`` key, value and name in the three recorded databases."""
    defined = dict((name, value) for name, value in vars(marks).items() if name.isupper() and isinstance(value, str))
    kinds = dict((name, entry[0]) for name, entry in marks.CONTRACT.items())
    keys = set(v for n, v in defined.items() if kinds.get(n) == marks.KIND_KEY)
    key_prefixes = tuple(v for n, v in defined.items() if kinds.get(n) == marks.KIND_KEY_PREFIX)
    values = set(v for n, v in defined.items() if kinds.get(n) in (marks.KIND_VALUE, marks.KIND_NAME))
    prefixes = tuple(v for n, v in defined.items() if kinds.get(n) == marks.KIND_PREFIX)
    found = set()
    unknown = []
    for name in DATABASES.values():
        for table, found_rows in rows(upgrade.recording.path(name)).items():
            for row in found_rows:
                for column in ("external_ids", "other_config", "options"):
                    for key, value in ids(row, column).items():
                        if not key.startswith("ovn4nfv"):
                            continue
                        found.add(key)
                        if key not in keys and not key.startswith(key_prefixes):
                            unknown.append((name, table, column, key))
                        if key in (marks.ROLE, marks.OWNER_KEY) and value not in values:
                            unknown.append((name, table, column, key, value))
                # (the SB's names are ovn-northd's, made from the NB's: a fair meter's per ACL)
                text = row.get("name") if isinstance(row.get("name"), str) and name != contract.SB_FILE else ""
                if text.startswith("ovn4nfv") and text not in values and not text.startswith(prefixes):
                    unknown.append((name, table, "name", text))
    assert unknown == []
    assert {marks.OWNER_KEY, marks.ROLE, marks.K_UID, marks.K_CONTAINER, marks.K_ENTRY, marks.K_POLICY,
            marks.K_SERVICE, marks.K_QOS_PORT, marks.K_DHCP, marks.K_TERM} <= found, "the recording holds them"


def test_the_cni_side_reads_every_interface_list(upgrade):
    """Catches an interface list the node agent or the plugin no longer
    reads as the release's watcher wrote it (a field renamed or taken
    otherwise: an address, a gateway, a route, the default route, a MAC),
    a runtime's request the plugin no longer takes as the release took it,
    a veth named otherwise, and a list the watcher no longer takes for
    what it told. The release's own answer to each pod's ADD is the
    measure: this code's, from the same list, is the same."""
    assert sorted(upgrade.recording.cni) == sorted("%s/%s" % (p[0], p[1]) for p in contract.PODS)
    for key, added in sorted(upgrade.recording.cni.items()):
        namespace, name = key.split("/")
        pod = upgrade.recording.pod(namespace, name)
        found = pod["metadata"]["annotations"]
        entries = ann.parse_iface_list(found[ann.IFACE_LIST])
        assert found[ann.OVN_INTERFACES] == found[ann.IFACE_LIST]
        assert pod_changes.served(found) == entries, "the watcher reads back what it told the pod"
        asked, told = added["request"], added["result"]
        request = cni.parse_request({"CNI_COMMAND": "ADD", "CNI_CONTAINERID": asked["container_id"],
                                     "CNI_NETNS": asked["netns"], "CNI_IFNAME": asked["ifname"],
                                     "CNI_ARGS": asked["args"]}, json.dumps(asked["config"]), open_path=False)
        assert request["args"]["K8S_POD_UID"] == pod["metadata"]["uid"]
        chosen = cni.devices(cni.select_entries(entries, request["ifname"], bool(request["config"].get("provider"))))
        hosts = [(i["name"], i["mac"]) for i in told["interfaces"] if "sandbox" not in i]
        assert [h for h, _mac in hosts] == [cni.host_ifname(pod["metadata"]["uid"], e["interface"]) for e in chosen]
        assert cni.result(request["version"], chosen, request["netns"], hosts, request["ifname"]) == told, key


def test_the_node_reads_its_ports(upgrade):
    """Catches a mark of the node agent's (K_CONTAINER, K_UID, K_INTERFACE,
    K_POD_REF, K_SANDBOX, K_ENTRY) or a naming (the veth's, the logical
    port's) no longer read as the release wrote it: the node audit would
    find stray or dead interfaces, the follower would change a running
    pod's interfaces, a DEL or the sweep would miss them."""
    audit = upgrade.cluster_audit()         # what it hands down to the nodes' audit
    result = run_host_audit(dict(TLS, db=upgrade.box.ovs_db, node=contract.NODE, bridge="br-int", state="audited",
                                 timeout=10, known_ports=audit["ports"], live_pods=audit["live_pods"],
                                 port_mtus=audit["port_mtus"], physnet_mtus=audit["physnet_mtus"],
                                 northd_version=audit["northd_version"], ovn_rundir=upgrade.box.dir))
    assert result["findings"] == [], result["lines"]
    assert set(result["skipped"]) == {"tunnel_down", "version_skew"}, "only what looks at the host itself"

    agent = types.SimpleNamespace(config=node_agent.AgentConfig(ovs_db=upgrade.box.ovs_db, node_name=contract.NODE),
                                  stopping=threading.Event(), node_name=contract.NODE, core=None)
    follower = pod_follow.Follower(agent)
    with ovsdb.Database(upgrade.box.ovs_db, ovsdb.OVS_SCHEMA, ("Interface",)) as db:
        agent.ovs = db
        interfaces = db.read(lambda idl: [(i.name, dict(i.external_ids)) for i in idl.tables["Interface"].rows.values()
                                          if i.external_ids.get(marks.K_CONTAINER)])
        assert len(interfaces) == 7
        for pod in upgrade.recording.of_kind("Pod"):
            meta = pod["metadata"]
            key = "%s/%s" % (meta["namespace"], meta["name"])
            entries = ann.parse_iface_list(meta["annotations"][ann.IFACE_LIST])
            # the follower's own reading of the pod's rows, and its verdict: nothing to change
            containers = follower._rows(key, meta["uid"])
            assert list(containers) == ["ctr-%s-%s" % (meta["namespace"], meta["name"])], (key, containers)
            (container, found), = containers.items()
            recorded = dict((i, json.loads(marked[marks.K_ENTRY])) for i, (_name, marked) in found.items())
            desired = dict((e["interface"], e) for e in cni.devices(entries))
            assert pod_follow.plan(recorded, desired) == ([], [], [], []), key
            owner = vms.owner_of(meta)
            for interface, (name, marked) in found.items():
                assert name == cni.host_ifname(meta["uid"], interface), "the veth of the name ADD gives it"
                assert marked["iface-id"] == owner.port_name(interface), "the logical port of the name the watcher gives it"
                assert set(json.loads(marked[marks.K_SANDBOX])) >= {"netns", "id"}
    assert upgrade.read("conf") == upgrade.files_loaded["conf"], "the node's database was only read"


def test_the_modules_find_what_they_declared_as_declared(upgrade):
    """Catches a network's, the topology's, a gateway's or the chassis'
    record read otherwise than the release wrote it: re-running the same
    declarations (the operator's playbooks after the upgrade) would change
    the cluster. Their core, as the modules call it, in check mode."""
    with ovsdb.Database(upgrade.box.nb_db, ovsdb.NB_SCHEMA, TABLES) as nb:
        plans = [
            execute(nb, lambda view: plan_topology(view, {"join_subnet": contract.JOIN_SUBNET}, "merged"), False),
            execute(nb, lambda view: plan_gateways(view, [("config[0]", dict(contract.GATEWAY))], "merged"), False),
            execute(nb, lambda view: vn.plan_networks(view, [(n["name"], vn.check_network(dict(n), n["name"]))
                                                             for n in contract.NETWORKS], "merged", "ovn"), False)]
    with ovsdb.Database(upgrade.box.ovs_db, ovsdb.OVS_SCHEMA, Chassis.tables) as ovs:
        plans.append(reconcile(Chassis(), [{"system_id": contract.NODE, "encap_type": ["geneve"],
                                            "encap_ip": "127.0.0.1", "bridge_datapath_type": "netdev"}],
                               "merged", ovs, check_mode=True))
    assert [p.operations() for p in plans if p.changed] == []


# -- (d) a pod deleted after the upgrade -----------------------------------------

def test_a_pod_deleted_after_the_upgrade_has_its_rows_freed(upgrade):
    """Catches a pod's row the new watcher does not take for the pod's own
    (its ports, its addresses in a policy's set, its address held): it
    would stay, and its address stay taken; and a deletion that touches
    what is not the pod's."""
    upgrade.require_settled()
    namespace, name = contract.DELETED
    pod = upgrade.recording.pod(namespace, name)
    uid = pod["metadata"]["uid"]
    entries = ann.parse_iface_list(pod["metadata"]["annotations"][ann.IFACE_LIST])
    addresses = set(e["ip_address"].split("/")[0] for e in entries)
    # the NB as the deletion finds it (as loaded, if the watcher wrote nothing)
    ports = dict((r["name"], r["_uuid"]) for r in upgrade.box.rows("nb", "Logical_Switch_Port")
                 if ids(r).get(marks.K_UID) == uid)
    sets = upgrade.box.rows("nb", "Address_Set")
    assert sorted(ports) == sorted(vms.owner_of(pod["metadata"]).port_name(e["interface"]) for e in entries)
    before = len(upgrade.history())
    upgrade.api.delete_pod(namespace, name)
    upgrade.env.wait_ports_gone(list(ports))

    def address_sets(idl):
        return dict((s.name, set(s.addresses)) for s in idl.tables["Address_Set"].rows.values())
    with ovsdb.Database(upgrade.box.nb_db, ovsdb.NB_SCHEMA, ("Address_Set",)) as db:
        freed = db.wait_for(lambda idl: not any(a & addresses for a in address_sets(idl).values()), TIMEOUT)
        assert freed, db.read(address_sets)
        assert db.read(address_sets) == dict((s["name"], as_set(s["addresses"]) - addresses)
                                             for s in sets), "the sets lost its addresses, only"
    # the NB's file: the deletion removed its two ports (from their switches) and its
    # addresses from the sets, and nothing else
    records = upgrade.history()[before:]
    assert set(t for r in records for t in r.tables) <= {"Logical_Switch_Port", "Logical_Switch", "Address_Set"}
    assert set((uuid, row is None) for r in records for uuid, row in r.tables.get("Logical_Switch_Port", {}).items()) \
        == set((uuid, True) for uuid in ports.values())
    assert nb_history.unattributed(upgrade.history()) == [], "the watcher's, under its term"
    for table in ("Logical_Switch_Port", "QoS", "DHCP_Options", "Port_Group", "Load_Balancer", "ACL"):
        for row in upgrade.box.rows("nb", table):
            assert ids(row).get(marks.K_UID) != uid and not set(ports.values()) & set(as_set(row.get("ports"))), (
                table, row)
    # its static address on red is free again: a new pod asking for it is served with it
    static = next(e["ip_address"] for e in entries if e["interface"] == "net1")
    upgrade.api.create_pod(namespace, "after", {ann.OVN_NETWORK: json.dumps([
        {"name": "red", "interface": "net0", "ip_address": static.split("/")[0]}])}, node=contract.NODE)
    assert upgrade.env.annotated(namespace, "after")[0]["ip_address"] == static
    with ovsdb.Database(upgrade.box.nb_db, ovsdb.NB_SCHEMA, ("Logical_Switch_Port",)) as db:
        owned = db.read(lambda idl: pod_ports.owned_pods(View(idl)))
    assert uid not in owned and len(owned) == len(contract.PODS)
