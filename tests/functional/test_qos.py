"""QoS per interface (issue 37) on a real data plane: the watcher as a
process against a real NB and the API stand-in, one node (ovs-vswitchd's
userspace datapath, ovn-controller; ``dataplane.Node``) whose pods are
namespaces bound to the ports the watcher made.

The network ``qnet`` caps its interfaces at :data:`CAP`. Four pods on it:
``lim`` asks for four times the cap (served at the cap, with a
``QoSCapped`` Event), ``free`` asks for nothing, ``mark`` for a DSCP mark
only, and ``sink`` receives. What ``lim`` sends reaches ``sink`` at the
cap's rate (iperf3, UDP sent at three times it: OVN's bandwidth is OVS's
meter, a policer, which drops the excess); what ``free`` sends is not
limited; what ``mark`` sends carries its DSCP in the IP header as a
capture on ``sink`` sees it. Then the rows follow the pods: a changed
``qos`` is made in place (the port stays, the new rate is measured), a
row changed by hand is put back, a ``qos`` dropped takes its row, a pod
deleted takes its rows, and the audit reports a port whose row is not
what its request asks.

Traffic goes only between the test's own namespaces.
"""

import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import audit, pod_ports, port_qos
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.pod_addresses import Pod
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import K_QOS_PORT
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View
from tests.harness.dataplane import Node, ip, ns_name
from tests.harness.watcher_env import Cluster, ovn_network

NS = "qos"
CAP = {"rate": 10000, "burst": 1000}        # kbit/s, kbit: 10 Mbit/s, a tenth of a second's burst
NETWORKS = [{"name": "qnet", "subnet": "10.7.0.0/24", "qos_max": CAP}]
ASKED = {"rate": 4 * CAP["rate"], "burst": 4 * CAP["burst"]}
DSCP = 46                                   # EF: the IP header's TOS byte 0xb8
IPERF_PORT = 5201
SECONDS = 5


def entry(qos=None):
    out = {"name": "qnet", "interface": "eth0"}
    if qos is not None:
        out["qos"] = qos
    return out


def port(name):
    return Pod(NS, name, None).port_name("eth0")


def rows(idl):
    """``{port name: (bandwidth, action, match, direction, uuid)}`` of the
    product's pod QoS rows, and the uuids in ``qnet``'s ``qos_rules``."""
    switch = next(s for s in idl.tables["Logical_Switch"].rows.values() if s.name == "qnet")
    held = set(str(r.uuid) for r in switch.qos_rules)
    return dict((r.external_ids.get(K_QOS_PORT), (dict(r.bandwidth), dict(r.action), r.match, r.direction,
                                                  str(r.uuid) in held))
                for r in idl.tables["QoS"].rows.values() if port_qos.is_pod_qos(r))


def lsp_uuid(idl, name):
    return next((str(r.uuid) for r in idl.tables["Logical_Switch_Port"].rows.values() if r.name == name), None)


class Lab:
    """The node, the watcher and the four pods; :meth:`stop` (or the
    context) removes every namespace, daemon and process it started."""

    def __init__(self, collections):
        self.tmp = tempfile.mkdtemp(prefix="ovn4nfv-qos-")
        self.node, self.env, self.db, self.procs, self.iperf = Node(), None, None, [], None
        try:
            self.node.join()
            self.env = Cluster(self.tmp, collections, networks=NETWORKS, box=self.node.box)
            self.api = self.env.api
            self.api.create_namespace(NS)
            for name, qos in (("lim", ASKED), ("free", None), ("mark", {"dscp": DSCP}), ("sink", None)):
                self.api.create_pod(NS, name, ovn_network(entry(qos)))
            self.netns, self.address = {}, {}
            for name in ("lim", "free", "mark", "sink"):
                served, = self.env.annotated(NS, name)
                self.address[name] = served["ip_address"].split("/")[0]
                self.netns[name] = self.node.attach(name, "br-int", served["mac_address"], served["ip_address"],
                                                    gateway=served["gateway_ip"], iface_id=port(name))
            self.db = ovsdb.Database(self.node.box.nb_db, ovsdb.NB_SCHEMA, audit.NB_TABLES)
            self.node.wait_hv()
        except Exception:
            self.stop()
            raise

    def wait_rows(self, predicate, timeout=30):
        """The QoS rows (:func:`rows`) once ``predicate`` holds of them,
        woken by the NB's updates; asserts it does within ``timeout``."""
        seen = []
        done = self.db.wait_for(lambda idl: seen.append(rows(idl)) or predicate(seen[-1]), timeout)
        assert done, "QoS rows %s; watcher log:\n%s" % (seen[-1] if seen else None, self.env.log_text())
        return seen[-1]

    def start(self, netns, *argv, ready=None):
        """A process in ``netns``, stopped by :meth:`stop`; with ``ready``,
        once it wrote a line holding that text (on stdout or stderr; bounded)."""
        proc = subprocess.Popen(["ip", "netns", "exec", ns_name(netns)] + list(argv), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True)
        self.procs.append(proc)
        deadline, said = time.monotonic() + 15, b""
        while ready is not None and ready.encode() not in said and time.monotonic() < deadline:
            # the pipes' own descriptors: what is read here is never left in a Python buffer
            readable, _w, _x = select.select([proc.stdout, proc.stderr], [], [], deadline - time.monotonic())
            said += b"".join(os.read(stream.fileno(), 4096) for stream in readable)
        assert ready is None or ready.encode() in said, "%s did not say %r: %r" % (argv[0], ready, said)
        return proc

    def received_kbits(self, sender, send_kbits, seconds=SECONDS):
        """The rate (kbit/s) at which ``sink`` received UDP that ``sender``
        sent at ``send_kbits`` for ``seconds`` (iperf3's receiver side)."""
        if self.iperf is None:
            self.iperf = self.start(self.netns["sink"], "iperf3", "-s", "-B", self.address["sink"], "-p",
                                    str(IPERF_PORT), "-i", "0", "--forceflush", ready="Server listening")
        for _attempt in range(5):       # the server may still be closing the previous test
            out = ip("iperf3", "-c", self.address["sink"], "-B", self.address[sender], "-p", str(IPERF_PORT), "-u",
                     "-b", "%dK" % send_kbits, "-l", "1400", "-t", str(seconds), "-J", netns=self.netns[sender],
                     check=False)
            report = json.loads(out.stdout)
            if "busy" not in report.get("error", ""):
                break
        assert "error" not in report, report["error"]
        return report["end"]["sum_received"]["bits_per_second"] / 1000.0

    def dscp_of(self, sender, tries=20):
        """The DSCP values of the UDP packets from ``sender`` a capture on
        ``sink`` sees (tcpdump, the IP header's TOS byte), three packets."""
        capture = self.start(self.netns["sink"], "tcpdump", "-i", "eth0", "-nn", "-v", "-l", "-c", "3",
                             "udp and dst port 9999 and src host %s" % self.address[sender], ready="listening on")
        send = "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); " \
               "[s.sendto(b'qos', ('%s', 9999)) for _ in range(3)]" % self.address["sink"]
        for _attempt in range(tries):
            if capture.poll() is not None:
                break
            ip("python3", "-c", send, netns=self.netns[sender])
            try:
                capture.wait(0.5)
            except subprocess.TimeoutExpired:
                continue
        out, _err = capture.communicate(timeout=10)
        return sorted(set(int(tos, 16) >> 2 for tos in re.findall(r"\(tos (0x[0-9a-f]+)", out)))

    def stop(self):
        try:
            for proc in self.procs:
                if proc.poll() is None:
                    proc.kill()
                proc.communicate(timeout=10)
            if self.db is not None:
                self.db.close()
            if self.env is not None:
                self.env.stop()
        finally:
            self.node.stop()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()


def within(measured, wanted, share=0.10):
    return abs(measured - wanted) <= share * wanted


def test_rate_burst_and_dscp_per_interface_on_a_real_data_plane(collections_path):
    with Lab(collections_path) as lab:
        api, env = lab.api, lab.env
        # the rows: lim's at the cap, mark's its DSCP, none for those that ask for nothing
        match = 'inport == "%s"'
        found = lab.wait_rows(lambda r: set(r) == {port("lim"), port("mark")})
        assert found == {port("lim"): (CAP, {}, match % port("lim"), "from-lport", True),
                         port("mark"): ({}, {"dscp": DSCP}, match % port("mark"), "from-lport", True)}
        capped = [e for e in env.events_for("lim") if e["reason"] == port_qos.CAPPED]
        assert len(capped) == 1 and capped[0]["type"] == "Warning", env.events_for("lim")
        assert "asked for rate 40000 kbit/s, burst 4000 kbit; network qnet allows at most rate 10000 kbit/s, " \
               "burst 1000 kbit: it gets rate 10000 kbit/s, burst 1000 kbit" in capped[0]["message"]
        assert not [e for e in env.events_for("free") + env.events_for("mark") if e["reason"] == port_qos.CAPPED]

        # served again, nothing changes
        for name in ("lim", "free", "mark", "sink"):
            pod = api.pod(NS, name)
            requests = ann.parse_requests(pod["metadata"]["annotations"])[1]
            owner = Pod(NS, name, pod["metadata"]["uid"])
            again = lab.db.read(lambda idl: pod_ports.plan_port_security(View(idl), owner, requests))
            assert not again.changed, (name, again.operations())

        # the data plane: lim at the cap, free not limited, mark's DSCP on the wire
        limited = lab.received_kbits("lim", 3 * CAP["rate"])
        unlimited = lab.received_kbits("free", 3 * CAP["rate"])
        print("qos: lim (capped at %d kbit/s) received %.0f kbit/s; free received %.0f kbit/s" % (
            CAP["rate"], limited, unlimited))
        assert within(limited, CAP["rate"]), "lim: %.0f kbit/s, not within 10%% of %d" % (limited, CAP["rate"])
        assert unlimited > 2 * CAP["rate"], "free: %.0f kbit/s is limited" % unlimited
        assert lab.dscp_of("mark") == [DSCP], "mark's packets carry DSCP %d" % DSCP
        assert lab.dscp_of("free") == [0], "free's packets are not marked"

        # a changed qos is made in place: the port stays, the row follows, the rate too
        before = lab.db.read(lambda idl: lsp_uuid(idl, port("lim")))
        api.set_annotations(NS, "lim", ovn_network(entry({"rate": CAP["rate"] // 2})))
        found = lab.wait_rows(lambda r: r.get(port("lim"), ())[:1] == ({"rate": 5000, "burst": 1000},))
        assert lab.db.read(lambda idl: lsp_uuid(idl, port("lim"))) == before, "the port was not replaced"
        lab.node.wait_hv()
        halved = lab.received_kbits("lim", 3 * CAP["rate"])
        print("qos: lim at %d kbit/s received %.0f kbit/s" % (CAP["rate"] // 2, halved))
        assert within(halved, CAP["rate"] // 2), "lim: %.0f kbit/s, not within 10%% of 5000" % halved
        assert len([e for e in env.events_for("lim") if e["reason"] == port_qos.CAPPED]) == 1, "within the cap"

        # a row changed by hand is put back
        uuid = lab.db.read(lambda idl: next(str(r.uuid) for r in idl.tables["QoS"].rows.values()
                                            if r.external_ids.get(K_QOS_PORT) == port("lim")))
        lab.node.box.run("ovn-nbctl", "--db=" + lab.node.box.nb_db, "set", "QoS", uuid, "bandwidth:rate=1")
        lab.wait_rows(lambda r: r.get(port("lim"), ())[:1] == ({"rate": 5000, "burst": 1000},))

        # a qos dropped takes its row; a pod deleted takes its rows
        api.set_annotations(NS, "mark", ovn_network(entry()))
        lab.wait_rows(lambda r: set(r) == {port("lim")})
        api.delete_pod(NS, "lim")
        lab.wait_rows(lambda r: not r)
        env.wait_ports_gone([port("lim")])

        # the audit: nothing while the watcher serves; a request it has not served yet, reported
        def pods():
            return [audit.pod_of(api.pod(NS, name)) for name in ("free", "mark", "sink")]
        assert lab.db.read(lambda idl: [f for f in audit.audit_pods(View(idl), pods())
                                        if f["class"] == port_qos.DRIFT]) == []
        assert env.terminate() == 0, "SIGTERM stops the watcher cleanly"
        api.set_annotations(NS, "sink", ovn_network(entry({"dscp": 10})))
        drift = lab.db.read(lambda idl: [f for f in audit.audit_pods(View(idl), pods())
                                         if f["class"] == port_qos.DRIFT])
        assert [(f["objects"], f["repair"]) for f in drift] == [([port("sink")], None)], drift
        assert "has no QoS row; its request asks for dscp 10" in drift[0]["message"]
        assert lab.node.log_errors() == [], "the daemons logged errors"


def test_the_operator_s_cap_with_check_mode_and_diff():
    """virtual_network's ``qos_max``: planned without writing (check mode)
    it says what it would do and writes nothing; written, it is recorded on
    the switch; a second run changes nothing; a run that does not give it
    keeps it; a new cap is a diff of the old; an empty one removes it."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
    from tests.harness.nb_env import nb_with_networks

    def declare(write, state="merged", **options):
        item = dict({"name": "qnet"}, **options)
        return execute(db, lambda v: vn.plan_networks(v, [("qnet", vn.check_network(item, "config[0]"))], state,
                                                      "ovn"), write=write)

    def records():
        switch = next((r for r in box.rows("nb", "Logical_Switch") if r["name"] == "qnet"), None)
        return None if switch is None else dict((k, v) for k, v in switch["external_ids"].items() if "qos" in k)

    with nb_with_networks([]) as (box, db):
        checked = declare(False, subnet="10.7.0.0/24", qos_max=CAP)
        assert checked.changed and checked.diff()["after"]["qnet"]["qos_max"] == CAP
        assert records() is None, "check mode writes nothing"
        declare(True, subnet="10.7.0.0/24", qos_max=CAP)
        assert records() == {"ovn4nfv-qos-max-rate": "10000", "ovn4nfv-qos-max-burst": "1000"}
        assert not declare(True, subnet="10.7.0.0/24", qos_max=CAP).changed, "a second run changes nothing"
        assert not declare(True).changed, "merged without qos_max keeps the cap"
        gathered = execute(db, lambda v: vn.plan_networks(v, [], "gathered", "ovn"), write=False).gathered
        assert gathered[0]["qos_max"] == CAP
        raised = declare(True, qos_max={"rate": 20000, "burst": None})
        assert (raised.diff()["before"]["qnet"]["qos_max"], raised.diff()["after"]["qnet"]["qos_max"]) == (
            CAP, {"rate": 20000})
        assert "update virtual_network qnet: qos_max.burst removed (was 1000); qos_max.rate 10000 -> 20000" in \
            raised.operations()
        assert records() == {"ovn4nfv-qos-max-rate": "20000"}
        removed = declare(True, qos_max={"rate": None, "burst": None})
        assert "qos_max" not in removed.diff()["after"]["qnet"] and records() == {}


def test_a_lowered_cap_brings_the_rows_above_it_down_at_once():
    """What the watcher's grants worker does when a network's cap is
    lowered (port_qos.plan_capped): every pod row above the new cap is
    brought down to it in one plan, a row within it and another network's
    are left, and a second plan changes nothing. A pod's QoS rows are found
    by their match, through an index (port_qos._rows_of)."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
    from tests.harness.sandbox import Sandbox

    box = Sandbox(ovs=False)
    try:
        with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES + port_qos.TABLES) as db:
            from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
            execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
            execute(db, lambda v: vn.plan_networks(v, [(n["name"], vn.check_network(n, n["name"])) for n in (
                dict(NETWORKS[0]), {"name": "other", "subnet": "10.8.0.0/24"})], "merged", "ovn"), write=True)
            served = {}
            for name, network, qos in (("hi", "qnet", {"rate": 9000, "burst": 900}),
                                       ("lo", "qnet", {"rate": 2000, "dscp": DSCP}),
                                       ("far", "other", {"rate": 9000})):
                pod = Pod(NS, name, "uid-" + name)
                reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([dict(entry(qos), name=network)])})[1]
                execute(db, lambda v: pod_ports.plan_pod(v, pod, reqs), write=True)
                execute(db, lambda v: pod_ports.plan_port_security(v, pod, reqs), write=True)
                served[name] = (pod, reqs)

            def bandwidth():
                return dict((r["external_ids"][K_QOS_PORT], r["bandwidth"]) for r in box.rows("nb", "QoS"))
            assert bandwidth() == {port("hi"): {"rate": 9000, "burst": 900}, port("lo"): {"rate": 2000, "burst": 1000},
                                   port("far"): {"rate": 9000}}
            execute(db, lambda v: vn.plan_networks(v, [("qnet", vn.check_network(
                {"name": "qnet", "qos_max": {"rate": 5000, "burst": 500}}, "qnet"))], "merged", "ovn"), write=True)
            db.wait_for(lambda idl: any(r.external_ids.get("ovn4nfv-qos-max-rate") == "5000"
                                        for r in idl.tables["Logical_Switch"].rows.values()), 10)
            lowered = execute(db, lambda v: port_qos.plan_capped(v, "qnet"), write=True)
            assert lowered.changed
            assert bandwidth() == {port("hi"): {"rate": 5000, "burst": 500}, port("lo"): {"rate": 2000, "burst": 500},
                                   port("far"): {"rate": 9000}}
            assert not execute(db, lambda v: port_qos.plan_capped(v, "qnet"), write=False).changed
            # the pods' own serving agrees with what the worker wrote: nothing more to do
            for pod, reqs in served.values():
                assert not execute(db, lambda v: pod_ports.plan_port_security(v, pod, reqs), write=False).changed
            # a deleted port's row goes with it, found by its match
            execute(db, lambda v: pod_ports.plan_delete(v, "uid-hi"), write=True)
            assert port("hi") not in bandwidth()
    finally:
        box.stop()
