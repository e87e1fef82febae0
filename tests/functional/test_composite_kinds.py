"""Every composite kind, driven through every state by random declared
lists against a real NB and a real OVS database, and judged from outside:
the databases are read with ``ovsdb-client dump``, not through the code
under test.

What must hold after every task:

- rows the product does not own (planted by another "tool" with the CLIs)
  are never changed or removed;
- the kind's objects are exactly what the state says (``merged`` and
  ``replaced`` add, ``overridden`` keeps only the declared,``deleted``
  removes the named or, with none named, everything the product owns;
  ``gathered`` and a plan that is not written change nothing);
- the same task run again has nothing to do, and writes nothing.

Inverting :func:`~.ovsdb.plan.wipes_everything` fails this test at once
(``merged`` then deletes, ``overridden`` keeps).
"""

import json
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import (
    chains, multi_policies, networks, remote_mirrors, wiring)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.policy_model import POLICY_FOR, check_policy
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import NETWORK_KEY
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import port_mirrors
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute

from tests.harness.sandbox import Sandbox

NAMES = ("a", "b", "c")
STATES = ("merged", "replaced", "overridden", "deleted", "gathered", "rendered")
# Tables the product never writes (ovn-nbctl's own bookkeeping).
VOLATILE = {"NB_Global"}
# Objects every task sees besides its own: the chains' networks (the
# product's, restored after each task) and another tool's network.
BASE = {"pk-base1", "pk-base2", "pk-foreign"}


def network_item(name, variant):
    index = NAMES.index(name)
    return {"name": "pk-" + name, "subnet": "172.30.%d.0/24" % index, "mtu": 1300 + variant}


def gateway_item(name, variant):
    index = NAMES.index(name)
    return {"node": "pk-" + name, "external_ip": "192.168.77.%d/24" % (10 + index),
            "external_gateway": "192.168.77.%d" % (1 + variant)}


def chain_item(name, variant):
    index = NAMES.index(name)
    return {"name": "pk-" + name, "source_network": "pk-base1", "destination_network": "pk-base2",
            "priority": 100 + index, "fail_open": bool(variant),
            "functions": [{"selector": {"app": "fw-" + name}, "left": {"interface": "eth0", "network": "pk-base1"},
                           "right": {"interface": "eth1", "network": "pk-base2"}}]}


def remote_tap_item(name, variant):
    index = NAMES.index(name)
    return {"name": "pk-" + name, "source": {"port": "pk-nosuch-%d" % variant}, "direction": "ingress",
            "collector": {"address": "192.0.2.%d" % (10 + index), "key": 100 + index}}


def port_tap_item(name, variant):
    return {"name": "pk-" + name, "source": {"port": "pk-nosuch-%d" % variant}, "collector": {"port": "pk-col"}}


def policy_item(name, variant):
    """A tenant's policy as the watcher resolves it (no pod selected here:
    the rows are the policy's own; the default deny is the dataplane's)."""
    checked = check_policy({"metadata": {"namespace": "pk", "name": "pk-" + name,
                                         "annotations": {POLICY_FOR: "ovn4nfv.k8s/pk-base1"}},
                            "spec": {"podSelector": {}, "ingress": [
                                {"from": [{"podSelector": {}}], "ports": [{"port": 80 + variant}]}]}})
    return {"name": checked.key, "policy": checked, "switches": ["pk-base1"], "members": [],
            "peers": {("ingress", 0): ["172.31.1.%d" % (10 + variant)]}}


# kind: (database, plan function, item maker, the option naming an object)
KINDS = {
    "networks": ("nb", lambda v, items, state: networks.plan_networks(v, items, state, "ovn"), network_item),
    "gateways": ("nb", wiring.plan_gateways, gateway_item),
    "chains": ("nb", chains.plan_chains, chain_item),
    "remote_taps": ("nb", remote_mirrors.plan_taps, remote_tap_item),
    "port_taps": ("ovs", port_mirrors.plan_taps, port_tap_item),
    "policies": ("nb", multi_policies.plan_policies, policy_item),
}


def dump(remote, database):
    """``{table: {uuid: row}}`` of a whole database, read by the CLI."""
    out = subprocess.run(["ovsdb-client", "-f", "json", "dump", remote, database], check=True,
                         capture_output=True, text=True, timeout=30).stdout
    tables = {}
    for text in out.strip().splitlines():
        table = json.loads(text)
        name = table["caption"].split(" ")[0]
        uuid = table["headings"].index("_uuid")
        tables[name] = dict((json.dumps(row[uuid]), json.dumps(row, sort_keys=True)) for row in table["data"])
    return tables


class World:
    """A sandbox's NB and OVS database, with rows another tool owns."""

    def __init__(self):
        self.box = Sandbox(vswitchd=False)
        try:
            self._plant()
        except Exception:
            self.box.stop()         # nothing left running when the set-up fails
            raise

    def _plant(self):
        # ovn-northd writes to the NB too (a router port's ``up``): stopped,
        # so that every write the test sees is the product's or its own.
        self.box.run("ovn-appctl", "-t", "%s/ovn-northd.ctl" % self.box.dir, "exit")
        nbctl = ["ovn-nbctl", "--db=" + self.box.nb_db]
        # The product's base: the topology and two networks the chains need.
        with self.nb() as db:
            execute(db, lambda v: wiring.plan_topology(v, {}, "merged"), write=True)
            execute(db, lambda v: networks.plan_networks(v, [
                ("b1", networks.check_network({"name": "pk-base1", "subnet": "172.31.1.0/24"}, "b1")),
                ("b2", networks.check_network({"name": "pk-base2", "subnet": "172.31.2.0/24"}, "b2"))],
                "merged", "ovn"), write=True)
        base = self.snapshot()
        # Rows of another tool: a switch that looks like a network but is
        # not the product's, a router, an address set, a policy, a mirror,
        # a port group and ACLs.
        self.box.run(*nbctl, "ls-add", "pk-foreign", "--", "set", "Logical_Switch", "pk-foreign",
                     "external_ids:%s=pk-foreign" % NETWORK_KEY, "other_config:subnet=10.77.0.0/24")
        self.box.run(*nbctl, "lsp-add", "pk-foreign", "pk-foreign-port")
        self.box.run(*nbctl, "lr-add", "pk-foreign-router")
        self.box.run(*nbctl, "create", "Address_Set", "name=pk_foreign", "addresses=10.77.0.5")
        self.box.run(*nbctl, "pg-add", "pk_foreign_pg", "pk-foreign-port")
        self.box.run(*nbctl, "acl-add", "pk_foreign_pg", "to-lport", "100", "outport == @pk_foreign_pg", "drop")
        self.box.run(*nbctl, "acl-add", "pk-foreign", "to-lport", "100", "ip4.src == 10.77.0.1", "allow-related")
        self.box.run(*nbctl, "lr-policy-add", "pk-foreign-router", "50", "ip4.src == 10.77.0.0/24", "allow")
        self.box.run(*nbctl, "create", "Mirror", "name=pk-foreign", "type=gre", "index=9", "filter=to-lport",
                     "sink=192.0.2.99")
        self.box.run("ovs-vsctl", "--no-wait", "--db=" + self.box.ovs_db, "set", "Open_vSwitch", ".",
                     "external_ids:pk-foreign=kept")
        planted = self.snapshot()
        # The rows another tool made; the Open_vSwitch root row is shared
        # (the node's taps are declared in it), so its key is checked alone.
        self.foreign = {}
        for db, tables in planted.items():
            self.foreign[db] = dict(
                (table, dict((uuid, row) for uuid, row in rows.items() if base[db].get(table, {}).get(uuid) != row))
                for table, rows in tables.items() if table not in VOLATILE and table != "Open_vSwitch")

    def nb(self):
        return ovsdb.Database(self.box.nb_db, ovsdb.NB_SCHEMA,
                              TABLES + chains.TABLES + remote_mirrors.TABLES + multi_policies.TABLES)

    def ovs(self):
        return ovsdb.Database(self.box.ovs_db, ovsdb.OVS_SCHEMA, port_mirrors.TABLES)

    def snapshot(self):
        return {"nb": dump(self.box.nb_db, "OVN_Northbound"), "ovs": dump(self.box.ovs_db, "Open_vSwitch")}

    def stop(self):
        self.box.stop()


@pytest.fixture(scope="module")
def world():
    w = World()
    try:
        yield w
    finally:
        w.stop()


def foreign_rows(snapshot, original):
    """The rows of ``original`` (the foreign ones) as they are in ``snapshot``."""
    return dict(((db, table, uuid), snapshot[db].get(table, {}).get(uuid))
                for db in original for table, rows in original[db].items() for uuid in rows)


def differences(one, other):
    """Where two snapshots differ: ``(database, table, uuid)``."""
    return sorted((db, table, uuid) for db in one for table in set(one[db]) | set(other[db])
                  for uuid in set(one[db].get(table, {})) | set(other[db].get(table, {}))
                  if one[db].get(table, {}).get(uuid) != other[db].get(table, {}).get(uuid))


def foreign_key_kept(world):
    out = subprocess.run(["ovs-vsctl", "--no-wait", "--db=" + world.box.ovs_db, "get", "Open_vSwitch", ".",
                          "external_ids:pk-foreign"], check=True, capture_output=True, text=True).stdout
    return out.strip().strip('"') == "kept"


def owned(world, kind, database):
    """The kind's objects as they are, by name."""
    return execute(database, lambda v: KINDS[kind][1](v, [], "gathered"), write=False).gathered


def names_of(gathered):
    """The objects' names (a policy's without its namespace)."""
    return set((g.get("name") or g.get("node")).split("/")[-1] for g in gathered)


TASK = st.tuples(st.sampled_from(sorted(KINDS)), st.sampled_from(STATES),
                 st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 1)), max_size=3,
                          unique_by=lambda t: t[0]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tasks=st.lists(TASK, min_size=1, max_size=4))
def test_every_kind_in_every_state_changes_only_what_it_owns_and_says(world, tasks):
    for kind, state, picks in tasks:
        where, compute, make = KINDS[kind]
        items = [("config[%d]" % i, make(name, variant)) for i, (name, variant) in enumerate(picks)]
        if state == "deleted":
            items = [(w, dict((k, item[k]) for k in ("name", "node") if k in item)) for w, item in items]
        if kind == "networks" and state != "deleted":
            items = [(w, networks.check_network(item, w)) for w, item in items]
        with (world.nb() if where == "nb" else world.ovs()) as db:
            before = names_of(owned(world, kind, db)) - BASE
            mode = "merged" if state == "rendered" else state
            write = state not in ("gathered", "rendered")
            outside = world.snapshot()
            plan = execute(db, lambda v: compute(v, items, mode), write=write)
            after = names_of(owned(world, kind, db)) - BASE
            declared = set("pk-" + name for name, _v in picks)
            expected = {
                "merged": before | declared, "replaced": before | declared, "overridden": declared,
                "deleted": (before - declared) if items else set(),
                "gathered": before, "rendered": before,
            }[state]
            assert after == expected, (kind, state, picks, before, after)
            now = world.snapshot()
            assert foreign_rows(now, world.foreign) == foreign_rows(world.foreign, world.foreign), \
                "%s %s changed a row the product does not own" % (kind, state)
            assert foreign_key_kept(world), "%s %s changed a key the product does not own" % (kind, state)
            if not write:
                assert not differences(now, outside), "%s %s wrote although it may not: %s" % (
                    kind, state, differences(now, outside))
                continue
            again = execute(db, lambda v: compute(v, items, mode), write=True)
            assert not again.changed, (kind, state, picks, again.operations())
            assert not differences(world.snapshot(), now), "%s %s run again wrote: %s" % (
                kind, state, differences(world.snapshot(), now))
        _restore_base(world)


def _restore_base(world):
    """A wipe of networks takes the chains' base networks too (they are the
    product's): declare them again, so that the next task starts whole."""
    with world.nb() as db:
        execute(db, lambda v: networks.plan_networks(v, [
            ("b1", networks.check_network({"name": "pk-base1", "subnet": "172.31.1.0/24"}, "b1")),
            ("b2", networks.check_network({"name": "pk-base2", "subnet": "172.31.2.0/24"}, "b2"))],
            "merged", "ovn"), write=True)
