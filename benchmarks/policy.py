"""Tenants' policies at scale, to the data plane: 1,000 pods on two
networks and 100 MultiNetworkPolicies on the API stand-in, served by the
watcher against a real node (ovs-vswitchd and ovn-controller).

Two of the pods are real: a server and a client, in namespaces of the
node, bound by ovn-controller. Each cycle, one at a time, timed from the
API's write until new TCP connections from the client obey it, three in
a row (probes of 0.2 s, through one long-lived client, so no process
starts per probe; the time is the first of the three's):

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

import os
import sys
import time

from benchmarks.common import Ansible, percentile

PODS = 1000
POLICIES = 100
CYCLES = 10
# a probe's connection is given this long: a refusal costs it, and a busy
# node (1,000 pods' flows being installed) may make an allowed one miss it
PROBE_TIMEOUT = 0.2


def as_list(value):
    """A set column as ovsdb-client prints it: one member bare, more as a list."""
    return [value] if isinstance(value, str) else value


def tenant_policy(index, apps, namespaces, pod_network):
    """Policy ``index``: in namespace bench-<index % 10>, the pods labelled
    a<index % 50> (twenty of them, all on the policy's network) admit
    a<index+1 % 50> on TCP 80."""
    return ("bench-%d" % (index % namespaces), "p%d" % index,
            {"podSelector": {"matchLabels": {"app": "a%d" % (index % apps)}},
             "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "a%d" % ((index + 1) % apps)}}}],
                          "ports": [{"protocol": "TCP", "port": 80}]}]},
            "ovn4nfv.k8s/" + pod_network(index))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    pods, policies, cycles = ([int(a) for a in argv] + [PODS, POLICIES, CYCLES][len(argv):])[:3]
    ansible = Ansible()      # only for its collection path
    from tests.harness import policy_env
    from tests.harness.policy_env import ADMIT, ISOLATE, PROBE_NETWORK, PolicyNode
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import multi_policies
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import policy_render as render
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import (
        INGRESS, POLICY_FOR, check_policy)
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute

    def policy_of(index):
        return tenant_policy(index, policy_env.APPS, policy_env.NAMESPACES, policy_env.pod_network)

    started = time.monotonic()
    try:
        lab = PolicyNode(ansible.collections, pods)
    except Exception:
        ansible.close()
        raise
    try:
        print("%d pods annotated and the probe's two bound in %.1f s" % (pods + 2, time.monotonic() - started))
        node, api = lab.node, lab.api
        for index in range(policies):
            namespace, name, spec, network = policy_of(index)
            api.create_policy(namespace, name, spec, {POLICY_FOR: network})
        groups = set(render.policy_group("%s/%s" % policy_of(i)[:2]) for i in range(policies))
        with ovsdb.Database(node.box.nb_db, ovsdb.NB_SCHEMA, multi_policies.TABLES) as db:
            full = db.wait_for(lambda idl: groups <= set(
                g.name for g in idl.tables["Port_Group"].rows.values()
                if len(g.ports) == pods // policy_env.APPS), 600)
        assert full, "the policies' groups never held their pods:\n" + lab.log_text()
        assert lab.obeys(True), "the client never reached the server before any policy"

        def timed(samples, action, expected, what):
            """The time from ``action`` until the first of HOLD probes in
            a row that obey it."""
            start = time.monotonic()
            action()
            since = lab.prober.settle(expected, hold=policy_env.HOLD, timeout=PROBE_TIMEOUT)
            if since is None:
                raise AssertionError("%s (sample %d): the probe never %s %d times in a row; %s\n%s" % (
                    what, len(samples), "answered" if expected else "was refused", policy_env.HOLD, state(),
                    lab.log_text()[-4000:]))
            samples.append((since - start) * 1000)

        def state():
            """The probe policy's rows in the NB and the SB, and whether a
            slow probe obeys (a failure's report)."""
            group = render.policy_group("probe/iso")
            acls = [(a["direction"], a["priority"], a["match"], a["action"]) for a in node.box.rows("nb", "ACL")
                    if group in a["match"] or "net-a" in (a["name"] or "")]
            sets = [(a["name"], a["addresses"]) for a in node.box.rows("nb", "Address_Set") if group in a["name"]]
            members = [(g["name"], g["ports"]) for g in node.box.rows("nb", "Port_Group") if g["name"] == group]
            sb_sets = [(a["name"], a["addresses"]) for a in node.box.rows("sb", "Address_Set") if group in a["name"]]
            sb_groups = [(g["name"], len(as_list(g["ports"]))) for g in node.box.rows("sb", "Port_Group")
                         if group in g["name"]]
            flows = [f["match"] for f in node.box.rows("sb", "Logical_Flow") if group in f["match"]]
            slow = lab.prober.reaches(timeout=3.0)
            # the datapath's cached flows for the client's packets to the
            # server, then the same probe with that cache purged
            vswitchd = ["ovs-appctl", "-t", os.path.join(node.box.dir, "ovs-vswitchd.ctl")]
            dumped = node.run_in_node(*vswitchd + ["dpctl/dump-flows"], check=False)
            cached = [f for f in dumped.stdout.splitlines() if lab.address["cli"] in f and lab.address["srv"] in f]
            purged = node.run_in_node(*vswitchd + ["revalidator/purge"], check=False).returncode == 0
            logs = []
            for name in ("ovs-vswitchd.log", "ovn-controller.log"):
                with open(os.path.join(node.box.dir, name)) as handle:
                    logs.append("== %s (its last lines)\n%s" % (name, "".join(handle.readlines()[-25:])))
            return ("the probe's ACLs: %s; sets: %s; group: %s; SB sets: %s; SB groups: %s; SB flows naming the "
                    "group: %s; a 3-s probe answered: %s; the datapath's flows client->server: %s %s; "
                    "a 3-s probe after they were purged (%s) answered: %s\n%s" % (
                        acls, sets, members, sb_sets, sb_groups, flows, slow, cached[:6], dumped.stderr[-300:],
                        purged, lab.prober.reaches(timeout=3.0), "\n".join(logs)))

        latencies = {"created": [], "changed": [], "label": []}
        for _cycle in range(cycles):
            timed(latencies["created"], lambda: api.create_policy("probe", "iso", ISOLATE, {POLICY_FOR: PROBE_NETWORK}),
                  False, "created")
            timed(latencies["changed"], lambda: api.update_policy("probe", "iso", ADMIT), True, "changed")
            timed(latencies["label"], lambda: api.set_labels("probe", "cli", {"app": "other"}), False, "label away")
            timed(latencies["label"], lambda: api.set_labels("probe", "cli", {"app": "cli"}), True, "label back")
            api.delete_policy("probe", "iso")
            assert lab.obeys(True), "deleted: the probe never answered"

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
        srv = lab.ports[("probe", "srv")]
        meta = {"namespace": "probe", "name": "iso", "annotations": {POLICY_FOR: PROBE_NETWORK}}
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
        code = lab.stop_watcher()
        baseline = []
        for _cycle in range(cycles):
            timed(baseline, lambda: direct(isolate, []), False, "baseline created")
            timed(baseline, lambda: direct(admit, [lab.address["cli"]]), True, "baseline changed")
            timed(baseline, lambda: direct(admit, []), False, "baseline label away")
            timed(baseline, lambda: direct(admit, [lab.address["cli"]]), True, "baseline label back")
            forget()
            assert lab.obeys(True), "baseline deleted: the probe never answered"
    finally:
        lab.stop()
        ansible.close()
    assert code in (0, None), "the watcher did not stop cleanly (%r)" % (code,)
    every = [v for values in latencies.values() for v in values]
    print("baseline (the core writing the same changes to the NB itself): p50_ms=%.0f p99_ms=%.0f" % (
        percentile(baseline, 0.5), percentile(baseline, 0.99)))
    print("policy: pods=%d policies=%d apply_p50_ms=%.0f apply_p99_ms=%.0f acls=%d naive_acls=%d" % (
        pods, policies, percentile(every, 0.5), percentile(every, 0.99), acls, naive))


if __name__ == "__main__":
    main()
