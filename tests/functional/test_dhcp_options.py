"""OVN's DHCP_Options as a resource (resources/nb_dhcp.py), against a real
NB: create, update, idempotence, check mode, ``deleted`` and ``overridden``
touching only the product's rows, and bad input refused by field. Every
assertion reads the database from outside, with ``ovsdb-client``."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import (
    NETWORK_KEY, OWNER_KEY, OWNER_VALUE)
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_dhcp import DHCPOptions

V4 = {"network": "net1", "cidr": "10.1.0.0/24",
      "options": {"server_id": "10.1.0.1", "server_mac": "0A:00:00:00:00:01", "lease_time": 3600,
                  "router": "10.1.0.1", "dns_server": "{10.1.0.2}"}}
V6 = {"network": "net1", "cidr": "fd00:1:0::/64", "options": {"server_id": "0a:00:00:00:00:01"}}


def run(sandbox, config, state="merged", check_mode=False):
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, DHCPOptions.tables) as db:
        return reconcile(DHCPOptions(), config, state, db, check_mode=check_mode)


def rows(sandbox):
    """``{(network, cidr): row}`` of every DHCP_Options row, read with ovsdb-client."""
    return dict(((r["external_ids"].get(NETWORK_KEY), r["cidr"]), r)
                for r in sandbox.rows("nb", "DHCP_Options"))


def foreign(sandbox, cidr, **options):
    """A row made as an operator or another controller makes one."""
    sandbox.nbctl("dhcp-options-create", cidr, "owner=someone-else")
    uuid = sandbox.nbctl("--bare", "--columns=_uuid", "find", "DHCP_Options", "cidr=%s" % cidr,
                         "external_ids:owner=someone-else").strip()
    if options:
        sandbox.nbctl("dhcp-options-set-options", uuid, *("%s=%s" % kv for kv in sorted(options.items())))
    return uuid


def test_create_update_and_a_second_run_changes_nothing(sandbox):
    plan = run(sandbox, [V4, V6])
    assert sorted(c.action for c in plan.changes) == ["create", "create"]
    found = rows(sandbox)
    assert set(found) == {("net1", "10.1.0.0/24"), ("net1", "fd00:1::/64")}
    v4 = found[("net1", "10.1.0.0/24")]
    # written in canonical form: the MAC lower case, the lease time a string
    assert v4["options"] == {"server_id": "10.1.0.1", "server_mac": "0a:00:00:00:00:01",
                             "lease_time": "3600", "router": "10.1.0.1", "dns_server": "{10.1.0.2}"}
    assert v4["external_ids"] == {OWNER_KEY: OWNER_VALUE, NETWORK_KEY: "net1"}
    assert found[("net1", "fd00:1::/64")]["options"] == {"server_id": "0a:00:00:00:00:01"}

    # one option changed under merged: the rest kept, the same row updated
    plan = run(sandbox, [{"network": "net1", "cidr": "10.1.0.0/24", "options": {"lease_time": "7200"}}])
    assert plan.operations() == ["update dhcp_options network=net1 cidr=10.1.0.0/24: "
                                 "options.lease_time '3600' -> '7200'"]
    after = rows(sandbox)[("net1", "10.1.0.0/24")]
    assert after["_uuid"] == v4["_uuid"]
    assert after["options"] == dict(v4["options"], lease_time="7200")

    # the same declaration again, spelled differently, changes nothing
    dump = sandbox.dump("nb")
    again = run(sandbox, [dict(V4, cidr="10.1.0.0/24", options=dict(V4["options"], lease_time="07200")), V6])
    assert not again.changed, again.operations()
    assert sandbox.dump("nb") == dump

    # replaced: options not given are gone
    run(sandbox, [{"network": "net1", "cidr": "10.1.0.0/24", "options": {"server_id": "10.1.0.1"}}], "replaced")
    assert rows(sandbox)[("net1", "10.1.0.0/24")]["options"] == {"server_id": "10.1.0.1"}
    gathered = run(sandbox, [], "gathered").gathered
    assert {"network": "net1", "cidr": "10.1.0.0/24", "options": {"server_id": "10.1.0.1"}} in gathered


def test_check_mode_and_rendered_write_nothing(sandbox):
    run(sandbox, [V4])
    dump = sandbox.dump("nb")
    changes = [{"network": "net1", "cidr": "10.1.0.0/24", "options": {"lease_time": "60"}},
               {"network": "net2", "cidr": "10.2.0.0/24"}]
    plan = run(sandbox, changes, check_mode=True)
    assert sorted(c.action for c in plan.changes if c.ops) == ["create", "update"]
    assert sandbox.dump("nb") == dump
    assert run(sandbox, changes, "rendered").changed
    assert sandbox.dump("nb") == dump
    plan = run(sandbox, [{"network": "net2", "cidr": "10.2.0.0/24"}], "overridden", check_mode=True)
    assert [c.action for c in plan.changes if c.ops] == ["create", "delete"]
    assert sandbox.dump("nb") == dump


def test_the_same_cidr_on_two_networks_is_two_objects(sandbox):
    run(sandbox, [{"network": "blue", "cidr": "10.5.0.0/24", "options": {"router": "10.5.0.1"}},
                  {"network": "red", "cidr": "10.5.0.0/24", "options": {"router": "10.5.0.254"}}])
    found = rows(sandbox)
    assert found[("blue", "10.5.0.0/24")]["options"] == {"router": "10.5.0.1"}
    assert found[("red", "10.5.0.0/24")]["options"] == {"router": "10.5.0.254"}
    run(sandbox, [{"network": "red", "cidr": "10.5.0.0/24"}], "deleted")
    assert set(rows(sandbox)) == {("blue", "10.5.0.0/24")}


def test_deleted_and_overridden_remove_only_the_products_rows(sandbox):
    planted = foreign(sandbox, "10.1.0.0/24", server_id="10.1.0.1", lease_time="60")
    run(sandbox, [V4, V6, {"network": "net2", "cidr": "10.2.0.0/24"}])
    assert len(rows(sandbox)) == 4

    # deleted with items: only those
    run(sandbox, [{"network": "net1", "cidr": "fd00:1::/64"}], "deleted")
    assert set(rows(sandbox)) == {("net1", "10.1.0.0/24"), ("net2", "10.2.0.0/24"), (None, "10.1.0.0/24")}

    # overridden: every owned object not declared goes; the planted row stays, untouched
    before = rows(sandbox)[(None, "10.1.0.0/24")]
    plan = run(sandbox, [{"network": "net2", "cidr": "10.2.0.0/24"}], "overridden")
    assert plan.operations() == ["delete dhcp_options network=net1 cidr=10.1.0.0/24"]
    found = rows(sandbox)
    assert set(found) == {("net2", "10.2.0.0/24"), (None, "10.1.0.0/24")}
    assert found[(None, "10.1.0.0/24")] == before
    assert before["_uuid"] == planted and before["external_ids"] == {"owner": "someone-else"}

    # a bare deleted: everything the product owns, nothing else
    run(sandbox, [], "deleted")
    assert list(rows(sandbox)) == [(None, "10.1.0.0/24")]
    assert rows(sandbox)[(None, "10.1.0.0/24")] == before
    assert not run(sandbox, [], "deleted").changed


BAD = [
    ({"cidr": "10.1.0.0/24"}, "config[0].network: a name is required"),
    ({"network": "bad name", "cidr": "10.1.0.0/24"}, "config[0].network: 'bad name' is not a valid name"),
    ({"network": "n"}, "config[0].cidr: is required"),
    ({"network": "n", "cidr": "10.1.0.0"}, "config[0].cidr: '10.1.0.0' is not a valid CIDR"),
    ({"network": "n", "cidr": "10.1.0.5/24"}, "config[0].cidr: '10.1.0.5/24' has host bits set"),
    ({"network": "n", "cidr": "10.1.0.0/24", "external_ids": {OWNER_KEY: "me"}},
     "config[0].external_ids: the key %r is reserved for the product" % OWNER_KEY),
    ({"network": "n", "cidr": "10.1.0.0/24", "external_ids": {NETWORK_KEY: "other"}},
     "config[0].external_ids: the key %r is set with the network option" % NETWORK_KEY),
    ({"network": "n", "cidr": "10.1.0.0/24", "options": {"router": ["10.1.0.1"]}},
     "config[0].options.router: ['10.1.0.1'] is not a string"),
    ({"network": "n", "cidr": "10.1.0.0/24", "options": {"server_id": "fd00::1"}},
     "config[0].options.server_id: 'fd00::1' is not an IPv4 address"),
    ({"network": "n", "cidr": "10.1.0.0/24", "options": {"server_mac": "zz"}},
     "config[0].options.server_mac: 'zz' is not a valid MAC address"),
    ({"network": "n", "cidr": "10.1.0.0/24", "options": {"lease_time": "-1"}},
     "config[0].options.lease_time: '-1' is not a lease time in seconds"),
    ({"network": "n", "cidr": "fd00::/64", "options": {"server_id": "10.1.0.1"}},
     "config[0].options.server_id: '10.1.0.1' is not a valid MAC address"),
]


def test_bad_input_is_refused_naming_the_field_and_nothing_is_written(sandbox):
    run(sandbox, [V4])
    dump = sandbox.dump("nb")
    for item, message in BAD:
        with pytest.raises(ValidationError) as err:
            run(sandbox, [item])
        assert message in str(err.value), (item, str(err.value))
    # one good and one bad item: nothing of either
    with pytest.raises(ValidationError):
        run(sandbox, [{"network": "ok", "cidr": "10.9.0.0/24"}, BAD[4][0]])
    # the same object declared twice
    with pytest.raises(ValidationError) as err:
        run(sandbox, [{"network": "n", "cidr": "10.9.0.0/24"}, {"network": "n", "cidr": "10.9.0.0/24"}])
    assert "config[1]: dhcp_options network=n cidr=10.9.0.0/24 is already declared at config[0]" in str(err.value)
    assert sandbox.dump("nb") == dump
