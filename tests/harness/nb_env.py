"""A northbound database with the cluster topology and some virtual
networks, made by the product's own planning: what a test of pods' ports
starts from."""

import contextlib

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from tests.harness.sandbox import Sandbox


@contextlib.contextmanager
def nb_with_networks(networks):
    """``(sandbox, database)``: a sandbox's NB (with ovn-northd) holding the
    topology and ``networks`` (declarations as ``virtual_network`` takes
    them), and a connection to it; everything stopped afterwards."""
    box = Sandbox(ovs=False)
    try:
        with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
            execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
            execute(db, lambda v: vn.plan_networks(v, [(n["name"], vn.check_network(n, n["name"])) for n in networks],
                                                   "merged", "ovn"), write=True)
            yield box, db
    finally:
        box.stop()
