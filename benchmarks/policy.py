"""Tenants' policies at scale, to the data plane: 1,000 pods on two
networks and 100 MultiNetworkPolicies on the API stand-in, served by the
watcher against a real node (ovs-vswitchd and ovn-controller).

Two of the pods are real: a server and a client, in namespaces of the
node, bound by ovn-controller. Each cycle, one at a time, timed from the
API's write until a new TCP connection from the client obeys it (probes
of 0.1 s, through one long-lived client, so no process starts per probe):

- a policy **created**, isolating the server (refused);
- the policy **changed** to admit the client by label (answered);
- the client's **label changed** away (refused), and back (answered).

The baseline, in the same run on the same node: the same four
transitions written by the core straight to the NB (the composite kind's
plan, as the watcher makes it, with no API and no watcher), timed to the
same probe. The ACLs: every ACL row in the NB, beside what a naive
per-pod rendering of the same policies would hold (one ACL per rule per
selected port, and a default deny and its holes per isolated port).

Usage: python -m benchmarks.policy [PODS] [POLICIES] [CYCLES]   (default 1000, 100 and 10)
Last line:
``policy: pods=1000 policies=100 apply_p50_ms=<a> apply_p99_ms=<b> acls=<n> naive_acls=<m>``
"""

import json
import shutil
import sys
import tempfile
import time

from benchmarks.common import Ansible, percentile

PODS = 1000
POLICIES = 100
CYCLES = 10
NAMESPACES = 10
APPS = 50
PORT = 8080
NETWORKS = [{"name": "net-a", "subnet": "10.1.0.0/16"}, {"name": "net-b", "subnet": "10.2.0.0/16"},
            {"name": "default-net", "subnet": "10.240.0.0/16"}]


def as_list(value):
    """A set column as ovsdb-client prints it: one member bare, more as a list."""
    return [value] if isinstance(value, str) else value


def pod_network(index):
    return "net-a" if index % 2 == 0 else "net-b"


def tenant_policy(index):
    """Policy ``index``: in namespace bench-<index % 10>, the pods labelled
    a<index % 50> (twenty of them, all on the policy's network) admit
    a<index+1 % 50> on TCP 80."""
    return ("bench-%d" % (index % NAMESPACES), "p%d" % index,
            {"podSelector": {"matchLabels": {"app": "a%d" % (index % APPS)}},
             "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "a%d" % ((index + 1) % APPS)}}}],
                          "ports": [{"protocol": "TCP", "port": 80}]}]},
            "ovn4nfv.k8s/" + pod_network(index))


ISOLATE = {"podSelector": {"matchLabels": {"app": "srv"}}, "ingress": []}
ADMIT = {"podSelector": {"matchLabels": {"app": "srv"}},
         "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}], "ports": [{"port": PORT}]}]}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    pods, policies, cycles = ([int(a) for a in argv] + [PODS, POLICIES, CYCLES][len(argv):])[:3]
    ansible = Ansible()      # only for its collection path
    collections = ansible.collections
    from tests.harness.dataplane import Node, Prober
    from tests.harness.watcher_env import Cluster
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import multi_policies
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import policy_render as render
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import (
        INGRESS, POLICY_FOR, check_policy)
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute

    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-policy-")
    node, env, prober = Node(), None, None
    try:
        node.join()
        env = Cluster(tmp, collections, networks=NETWORKS, box=node.box)
        api = env.api
        for n in range(NAMESPACES):
            api.create_namespace("bench-%d" % n, {"team": "t%d" % n})
        api.create_namespace("probe", {"team": "probe"})
        for i in range(pods):
            api.create_pod("bench-%d" % (i % NAMESPACES), "pod%d" % i,
                           {"ovnNetwork": json.dumps([{"name": pod_network(i), "interface": "eth0"}])},
                           labels={"app": "a%d" % (i % APPS)})
        for name, app in (("srv", "srv"), ("cli", "cli")):
            api.create_pod("probe", name, {"ovnNetwork": json.dumps([{"name": "net-a", "interface": "eth0"}])},
                           labels={"app": app})
        started = time.monotonic()
        done = api.wait(lambda a: len(a.annotated_at) >= pods + 2, 900)
        assert done, "not every pod was annotated:\n" + env.log_text()
        print("%d pods annotated in %.1f s" % (pods + 2, time.monotonic() - started))
        ports = dict(((p["external_ids"].get("ovn4nfv-pod-namespace"), p["external_ids"].get("ovn4nfv-pod-name")),
                      p["name"]) for p in env.pod_ports())
        netns, address = {}, {}
        for name in ("srv", "cli"):
            entry, = env.annotated("probe", name)
            address[name] = entry["ip_address"].split("/")[0]
            netns[name] = node.attach(name, "br-int", entry["mac_address"], entry["ip_address"],
                                      gateway="10.1.0.1", iface_id=ports[("probe", name)])
        node.wait_hv()
        for index in range(policies):
            namespace, name, spec, network = tenant_policy(index)
            api.create_policy(namespace, name, spec, {POLICY_FOR: network})
        groups = set(render.policy_group("%s/%s" % tenant_policy(i)[:2]) for i in range(policies))
        with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, multi_policies.TABLES) as db:
            full = db.wait_for(lambda idl: groups <= set(
                g.name for g in idl.tables["Port_Group"].rows.values() if len(g.ports) == pods // APPS), 600)
        assert full, "the policies' groups never held their pods:\n" + env.log_text()
        prober = Prober(netns["srv"], netns["cli"], address["srv"], PORT)
        assert prober.until(True), "the client never reached the server before any policy"

        def timed(samples, action, expected, what):
            start = time.monotonic()
            action()
            if not prober.until(expected):
                group = render.policy_group("probe/iso")
                acls = [(a["direction"], a["priority"], a["match"], a["action"]) for a in node.box.rows("nb", "ACL")
                        if group in a["match"] or "net-a" in (a["name"] or "")]
                sets = [(a["name"], a["addresses"]) for a in node.box.rows("nb", "Address_Set") if group in a["name"]]
                members = [(g["name"], g["ports"]) for g in node.box.rows("nb", "Port_Group") if g["name"] == group]
                raise AssertionError("%s (sample %d): the probe never %s; the probe's ACLs: %s; sets: %s; group: %s\n%s" % (
                    what, len(samples), "answered" if expected else "was refused", acls, sets, members,
                    env.log_text()[-4000:] if env is not None else ""))
            samples.append((time.monotonic() - start) * 1000)

        latencies = {"created": [], "changed": [], "label": []}
        for cycle in range(cycles):
            timed(latencies["created"], lambda: api.create_policy("probe", "iso", ISOLATE, {POLICY_FOR: "ovn4nfv.k8s/net-a"}),
                  False, "created")
            timed(latencies["changed"], lambda: api.update_policy("probe", "iso", ADMIT), True, "changed")
            timed(latencies["label"], lambda: api.set_labels("probe", "cli", {"app": "other"}), False, "label away")
            timed(latencies["label"], lambda: api.set_labels("probe", "cli", {"app": "cli"}), True, "label back")
            api.delete_policy("probe", "iso")
            assert prober.until(True), "deleted: the probe never answered"

        # every ACL in the NB; and naively, a group's ACLs once per member
        # port (the switches' own ACLs, the anchors, as they are)
        acls = len(node.box.rows("nb", "ACL"))
        naive = acls
        for group in node.box.rows("nb", "Port_Group"):
            held = len(as_list(group["acls"]))
            naive += held * len(as_list(group["ports"])) - held

        # the watcher's figures now: they stand whatever becomes of the baseline
        print("%d pods on two networks, %d policies; %d cycles of: a policy created, changed, a label changed "
              "away and back, each timed from the write until a new connection obeys it" % (pods, policies, cycles))
        for what, values in sorted(latencies.items()):
            print("  %-8s p50_ms=%.0f p99_ms=%.0f" % (what, percentile(values, 0.5), percentile(values, 0.99)))
        print("ACLs in the NB: %d; a naive per-pod rendering: %d" % (acls, naive), flush=True)

        # the baseline: the same transitions, written by the core straight to the NB
        srv = ports[("probe", "srv")]
        meta = {"namespace": "probe", "name": "iso", "annotations": {POLICY_FOR: "ovn4nfv.k8s/net-a"}}
        isolate, admit = check_policy({"metadata": meta, "spec": ISOLATE}), check_policy({"metadata": meta, "spec": ADMIT})

        def direct(checked, peers):
            item = {"name": checked.key, "policy": checked, "switches": ["net-a"], "members": [srv],
                    "peers": {(INGRESS, 0): peers} if checked.rules(INGRESS) else {}}
            with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, multi_policies.TABLES) as db:
                execute(db, lambda view: multi_policies.plan_policies(view, [("p", item)], "replaced"), write=True)

        def forget():
            with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, multi_policies.TABLES) as db:
                execute(db, lambda view: multi_policies.plan_policies(view, [("p", {"name": "probe/iso"})],
                                                                      "deleted"), write=True)
        code, env = env.stop(), None
        baseline = []
        for cycle in range(cycles):
            timed(baseline, lambda: direct(isolate, []), False, "baseline created")
            timed(baseline, lambda: direct(admit, [address["cli"]]), True, "baseline changed")
            timed(baseline, lambda: direct(admit, []), False, "baseline label away")
            timed(baseline, lambda: direct(admit, [address["cli"]]), True, "baseline label back")
            forget()
            assert prober.until(True), "baseline deleted: the probe never answered"
    finally:
        if prober is not None:
            prober.stop()
        if env is not None:
            env.stop()
        node.stop()
        ansible.close()
        shutil.rmtree(tmp, ignore_errors=True)
    assert code in (0, None), "the watcher did not stop cleanly (%r)" % (code,)
    every = [v for values in latencies.values() for v in values]
    print("baseline (the core writing the same changes to the NB itself): p50_ms=%.0f p99_ms=%.0f" % (
        percentile(baseline, 0.5), percentile(baseline, 0.99)))
    print("policy: pods=%d policies=%d apply_p50_ms=%.0f apply_p99_ms=%.0f acls=%d naive_acls=%d" % (
        pods, policies, percentile(every, 0.5), percentile(every, 0.99), acls, naive))


if __name__ == "__main__":
    main()
