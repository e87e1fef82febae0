"""network_picture through ansible-playbook, against a real NB and SB:
the cluster drawn as DOT on "the central", laid out by Graphviz where the
picture is wanted, written once (a second run changes nothing, check mode
writes nothing), and rendered by a real browser (headless Chromium): the
page carries every object, and the screenshot shows each object's shape,
filled in its kind's colour, where the SVG places it; the object a finding
names is drawn red."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import baseline, multi_policies
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import picture
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.pod_addresses import Pod
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import POLICY_FOR, check_policy
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_gateways, plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute, reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_switches import LogicalSwitchPort

from tests.harness.browser import chromium, colour, screenshot, shown
from tests.harness.playbook import run_playbook
from test_examples import example_tasks

DRIFT = {"class": "network_drift", "severity": "error", "layer": "nb", "objects": ["net2"],
         "message": "network net2 no longer matches its recorded settings", "repair": None}
KIND = {"switch:net1": "network", "switch:net2": "network", "switch:ovn4nfv-join": "join",
        "switch:ext-worker1": "other", "router:ovn4nfv-master": "router", "router:gr-worker1": "gateway",
        "chassis:worker1": "chassis", "chassis:worker2": "chassis", "pod:default/web": "pod",
        "pod:default/db": "pod", "switch:prov-v100": "network", "physnet:physnet-ext": "physnet"}


@pytest.fixture
def cluster(sandbox):
    """Two networks, the distributed router, the join switch, worker1's
    gateway; web (two interfaces) bound on worker1, db on worker2; a
    tenant's policy isolates web on net1, a baseline rule guards net2."""
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: plan_topology(v, {"join_subnet": "100.64.1.0/24"}, "merged"), write=True)
        execute(db, lambda v: plan_gateways(v, [("config[0]", {
            "node": "worker1", "external_ip": "192.168.50.12/24", "external_gateway": "192.168.50.1"})],
            "merged"), write=True)
        for name, subnet, extra in (("net1", "172.16.1.0/24", {}), ("net2", "172.16.2.0/24", {}),
                                    ("prov-v100", "192.168.100.0/24", {"physnet": "physnet-ext", "vlan": 100})):
            execute(db, lambda v, n=name, s=subnet, x=extra: vn.plan_networks(v, [("a", vn.check_network(
                dict({"name": n, "subnet": s}, **x), "a"))], "merged", "ovn", False), write=True)
        web, dbpod = Pod("default", "web", "u-web"), Pod("default", "db", "u-db")
        reconcile(LogicalSwitchPort(), [
            {"name": "default_web_net0", "switch": "net1", "addresses": ["0a:00:00:00:01:14 172.16.1.20"],
             "external_ids": web.marks("net0")},
            {"name": "default_web_net1", "switch": "net2", "addresses": ["0a:00:00:00:02:14 172.16.2.20"],
             "external_ids": web.marks("net1")},
            {"name": "default_db_net0", "switch": "net1", "addresses": ["0a:00:00:00:01:15 172.16.1.21"],
             "external_ids": dbpod.marks("net0")}], "merged", db)
        policy = check_policy({"metadata": {"namespace": "default", "name": "web-in", "annotations": {
            POLICY_FOR: "ovn4nfv.k8s/net1"}}, "spec": {"podSelector": {}, "ingress": []}})
        item = {"name": policy.key, "policy": policy, "switches": ["net1"], "members": ["default_web_net0"],
                "peers": {}}
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES + multi_policies.TABLES) as db:
        execute(db, lambda v: multi_policies.plan_policies(v, [("p", item)], "replaced"), write=True)
        execute(db, lambda v: baseline.plan_baseline(v, [("b", {"name": "apart", "network": "net2",
                                                                "peers": [{"network": "net1"}]})], "merged"),
                write=True)
    sandbox.nbctl("--wait=sb", "sync")
    for chassis, ip in (("worker1", "127.0.0.11"), ("worker2", "127.0.0.12")):
        sandbox.sbctl("chassis-add", chassis, "geneve", ip)
    for port, chassis in (("default_web_net0", "worker1"), ("default_web_net1", "worker1"),
                          ("default_db_net0", "worker2")):
        sandbox.sbctl("lsp-bind", port, chassis)
    return sandbox


def test_network_picture_draws_lays_out_and_a_browser_shows_it(cluster, collections_path, tmp_path):
    box = cluster
    dest, dry = str(tmp_path / "picture"), str(tmp_path / "dry")
    tasks = [
        {"name": "drawn", "register": "drawn", "ovn4nfv.k8s.network_picture": {
            "db": box.nb_db, "sb_db": box.sb_db, "findings": [DRIFT], "title": "the test's cluster"}},
        {"name": "laid_out", "ovn4nfv.k8s.network_picture": {
            "source": "{{ drawn.dot }}", "dest": dest, "title": "the test's cluster",
            "lines": ["ERROR   network_drift: network net2 no longer matches its recorded settings"]}},
        {"name": "again", "ovn4nfv.k8s.network_picture": {
            "source": "{{ drawn.dot }}", "dest": dest, "title": "the test's cluster",
            "lines": ["ERROR   network_drift: network net2 no longer matches its recorded settings"]}},
        {"name": "dry", "check_mode": True, "ovn4nfv.k8s.network_picture": {"source": "{{ drawn.dot }}",
                                                                            "dest": dry}},
    ]
    r, proc = run_playbook(collections_path, tasks)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert r["drawn"]["changed"] is False and r["drawn"]["paths"] == []
    assert r["drawn"]["objects"] == sorted(KIND)
    isolated = [line for line in r["drawn"]["dot"].splitlines() if "isolated: " in line]
    assert len(isolated) == 1 and "net0 172.16.1.20" in isolated[0] and "penwidth=3" in isolated[0], \
        "web's net1 interface alone is drawn isolated"
    assert r["laid_out"]["changed"] is True and r["again"]["changed"] is False
    assert r["dry"]["changed"] is True and not (tmp_path / "dry").exists(), "check mode wrote"
    assert r["laid_out"]["paths"] == [dest + "/topology.html", dest + "/topology.svg"]

    page = "file://" + dest + "/topology.html"
    dom = chromium("--dump-dom", page, profile=tmp_path / "profile")
    for ident in KIND:
        assert 'id="%s"' % ident in dom, ident
    for text in ("172.16.1.0/24", "gateway router", "net0 172.16.1.20", "127.0.0.12", "VLAN 100",
                 "network_drift: network net2 no longer matches", "isolated: ingress", "baseline: 1 rule"):
        assert text in dom, text

    seen, missing = shown(dest + "/topology.svg", str(tmp_path))
    assert missing == [] and seen == sorted(KIND)
    shapes, pixel = screenshot(dest + "/topology.svg", str(tmp_path))
    for ident, ((x, y), _fill) in sorted(shapes.items()):
        got, wanted = pixel(x, y), colour(picture.COLOURS[KIND[ident]])
        assert all(abs(a - b) <= 3 for a, b in zip(got, wanted)), (ident, (x, y), got, wanted)
    # the drifted network is outlined red: just outside its fill, toward its right edge
    (x, y), _fill = shapes["switch:net2"]
    assert pixel(x + 6, y)[0] > 150 and pixel(x + 6, y)[1] < 90, pixel(x + 6, y)


def test_network_picture_examples_run(cluster, collections_path, tmp_path):
    """The module's examples, as written but for where the databases are
    and where the picture goes; a second run writes nothing."""
    tasks = []
    for task in example_tasks(["network_picture"]):
        params = dict(task["ovn4nfv.k8s.network_picture"] or {})
        if "source" in params:
            params["dest"] = str(tmp_path / "picture")
        else:
            params.update(db=cluster.nb_db, sb_db=cluster.sb_db)
        tasks.append(dict(task, **{"ovn4nfv.k8s.network_picture": params}))
    for attempt in ("first", "second"):
        r, proc = run_playbook(collections_path, tasks)
        assert proc.returncode == 0, proc.stdout[-4000:]
        laid_out = r["network_picture #1: Laid out, with nothing found, where the picture is wanted"]
        assert laid_out["changed"] is (attempt == "first")
    assert (tmp_path / "picture" / "topology.svg").read_text().count('class="node"') == len(KIND)
