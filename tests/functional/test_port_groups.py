"""Port groups and ACLs as resources (resources/nb_acls.py), against a real
NB: create, members changed by mutation (never the whole set rewritten),
ACLs on a group and on a switch, idempotence, check mode, ``overridden``
touching only the product's rows, and bad input refused by field. Every
assertion reads the database from outside, with ``ovsdb-client``."""

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import OWNER_KEY, OWNER_VALUE
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import reconcile
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.operations import render_ops
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.resources.nb_acls import (
    Meter, PortGroup, PortGroupACL, SwitchACL)

ACL = {"group": "pg_web", "direction": "to-lport", "priority": 12000,
       "match": "outport == @pg_web && tcp.dst == 80", "action": "allow-related", "name": "mnp:a/web:in0"}


def run(sandbox, resource, config, state="merged", check_mode=False):
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, resource.tables) as db:
        return reconcile(resource, config, state, db, check_mode=check_mode)


def groups(sandbox):
    """``{name: set of member port names}``, read with ovsdb-client."""
    ports = dict((r["_uuid"], r["name"]) for r in sandbox.rows("nb", "Logical_Switch_Port"))
    return dict((r["name"], set(ports[u] for u in members(r["ports"]))) for r in sandbox.rows("nb", "Port_Group"))


def members(value):
    """A set column as ovsdb-client prints it: one member bare, more as a list."""
    return [value] if isinstance(value, str) else value


def acls(sandbox):
    return sorted((r["direction"], r["priority"], r["match"], r["action"]) for r in sandbox.rows("nb", "ACL"))


@pytest.fixture
def nb(sandbox):
    sandbox.nbctl("ls-add", "net1")
    for index in range(5):
        sandbox.nbctl("lsp-add", "net1", "p%d" % index)
    return sandbox


def test_members_change_by_mutation_and_a_second_run_changes_nothing(nb):
    plan = run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p0", "p1", "p2"]}])
    assert [c.action for c in plan.changes] == ["create"]
    assert groups(nb) == {"pg_web": {"p0", "p1", "p2"}}
    row, = nb.rows("nb", "Port_Group")
    assert row["external_ids"] == {OWNER_KEY: OWNER_VALUE}

    assert not run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p2", "p1", "p0"]}]).changed

    plan = run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p0", "p2", "p3"]}], state="rendered")
    ops = render_ops(plan.ops)
    assert [(o["op"], o["mutations"][0][1], len(o["mutations"][0][2][1])) for o in ops] == [
        ("mutate", "delete", 1), ("mutate", "insert", 1)], "one member out, one in: no whole-set update"
    assert groups(nb) == {"pg_web": {"p0", "p1", "p2"}}, "rendered writes nothing"

    run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p0", "p2", "p3"]}])
    assert groups(nb) == {"pg_web": {"p0", "p2", "p3"}}
    assert nb.rows("nb", "Port_Group")[0]["_uuid"] == row["_uuid"], "the same group, its members changed"

    # a declaration (members=False) leaves the members to their keeper
    assert not run(nb, PortGroup(members=False), [{"name": "pg_web"}]).changed
    assert groups(nb) == {"pg_web": {"p0", "p2", "p3"}}


def test_a_port_deleted_leaves_the_group_and_is_not_put_back_by_a_name(nb):
    run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p0", "p1"]}])
    nb.nbctl("lsp-del", "p1")
    assert groups(nb) == {"pg_web": {"p0"}}, "a weak reference: OVSDB drops it"
    with pytest.raises(ValidationError, match=r"config\[0\]\.ports: switch port 'p1' does not exist"):
        run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p0", "p1"]}])
    assert not run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p0"]}]).changed


def test_acls_on_a_group_and_on_a_switch(nb):
    run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p0"]}])
    egress = dict(ACL, direction="from-lport", match="inport == @pg_web && ip4", options={"apply-after-lb": "true"},
                  name="mnp:a/web:eg0")
    plan = run(nb, PortGroupACL(), [ACL, egress])
    assert [c.action for c in plan.changes] == ["create", "create"]
    run(nb, SwitchACL(), [{"switch": "net1", "direction": "to-lport", "priority": 12000,
                           "match": "ip4.src == 10.0.0.1", "action": "allow-related"}])
    assert acls(nb) == [("from-lport", 12000, "inport == @pg_web && ip4", "allow-related"),
                        ("to-lport", 12000, "ip4.src == 10.0.0.1", "allow-related"),
                        ("to-lport", 12000, "outport == @pg_web && tcp.dst == 80", "allow-related")]
    after_lb, = [r for r in nb.rows("nb", "ACL") if r["direction"] == "from-lport"]
    assert after_lb["options"] == {"apply-after-lb": "true"} and after_lb["name"] == "mnp:a/web:eg0"
    assert not run(nb, PortGroupACL(), [ACL, egress]).changed

    # an action changed: the same row updated, nothing else
    plan = run(nb, PortGroupACL(), [dict(ACL, action="drop", log=True, severity="info")])
    assert plan.operations() == [
        "update port_group_acl group=pg_web direction=to-lport priority=12000 "
        "match=outport == @pg_web && tcp.dst == 80: action 'allow-related' -> 'drop'; log False -> True; "
        "severity='info'"]

    # overridden on the group: the one declared stays, the other goes; the switch's is untouched
    run(nb, PortGroupACL(), [dict(ACL, action="drop", log=True, severity="info")], state="overridden")
    assert acls(nb) == [("to-lport", 12000, "ip4.src == 10.0.0.1", "allow-related"),
                        ("to-lport", 12000, "outport == @pg_web && tcp.dst == 80", "drop")]


def test_check_mode_and_other_owners(nb):
    nb.nbctl("pg-add", "theirs", "p4")
    nb.nbctl("acl-add", "theirs", "to-lport", "1000", "outport == @theirs", "drop")
    assert run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p0"]}], check_mode=True).changed
    assert groups(nb) == {"theirs": {"p4"}}, "check mode writes nothing"
    run(nb, PortGroup(), [{"name": "pg_web", "ports": ["p0"]}])
    run(nb, PortGroup(), [], state="overridden")
    assert groups(nb) == {"theirs": {"p4"}}, "overridden removes the product's group, never another's"
    assert acls(nb) == [("to-lport", 1000, "outport == @theirs", "drop")]


@pytest.mark.parametrize("resource, item, problem", [
    (PortGroup(), {"name": "pg-web"}, r"config\[0\]\.name: 'pg-web' is not a port group name"),
    (PortGroup(), {"name": "1pg"}, r"config\[0\]\.name: '1pg' is not a port group name"),
    (PortGroup(), {"name": "pg", "ports": "p0"}, r"config\[0\]\.ports: 'p0' is not a list of switch port names"),
    (PortGroup(), {"name": "pg", "ports": ["p0", "p 1"]}, r"config\[0\]\.ports\[1\]: 'p 1' is not a valid name"),
    (PortGroupACL(), dict(ACL, direction="both"), r"config\[0\]\.direction: 'both' is not one of from-lport, to-lport"),
    (PortGroupACL(), dict(ACL, priority=40000), r"config\[0\]\.priority: 40000 is out of range 0-32767"),
    (PortGroupACL(), dict(ACL, match=" "), r"config\[0\]\.match: ' ' is not a match"),
    (PortGroupACL(), dict(ACL, action="pass"), r"config\[0\]\.action: 'pass' is not one of allow, allow-related"),
    (PortGroupACL(), dict(ACL, name="n" * 64), r"config\[0\]\.name: 'n{64}' is not a name of at most 63"),
    (PortGroupACL(), dict(ACL, severity="loud"), r"config\[0\]\.severity: 'loud' is not one of alert"),
    (PortGroupACL(), dict(ACL, log="yes"), r"config\[0\]\.log: 'yes' is not true or false"),
    (PortGroupACL(), dict(ACL, group="no-such"), r"config\[0\]\.group: 'no-such' is not a port group name"),
    (PortGroupACL(), dict(ACL, group="pg_none"), r"config\[0\]\.group: port group 'pg_none' does not exist"),
    (SwitchACL(), {"direction": "to-lport", "priority": 1, "match": "ip", "action": "drop"},
     r"config\[0\]\.switch: the switch is required"),
])
def test_bad_input_is_refused_by_field_and_nothing_is_written(nb, resource, item, problem):
    before = (groups(nb), acls(nb))
    with pytest.raises(ValidationError, match=problem):
        run(nb, resource, [item])
    assert (groups(nb), acls(nb)) == before


def test_a_meter_with_its_band(nb):
    meter = {"name": "log-meter", "unit": "pktps", "fair": True, "rate": 20, "burst_size": 20}
    assert [c.action for c in run(nb, Meter(), [meter]).changes] == ["create"]
    row, = nb.rows("nb", "Meter")
    band, = nb.rows("nb", "Meter_Band")
    assert (row["name"], row["unit"], row["fair"], row["bands"]) == ("log-meter", "pktps", True, band["_uuid"])
    assert (band["action"], band["rate"], band["burst_size"]) == ("drop", 20, 20)
    assert not run(nb, Meter(), [meter]).changed
    plan = run(nb, Meter(), [dict(meter, rate=50)])
    assert plan.operations() == ["update meter log-meter: rate 20 -> 50"]
    assert nb.rows("nb", "Meter_Band")[0]["_uuid"] == band["_uuid"] and nb.rows("nb", "Meter_Band")[0]["rate"] == 50
    with pytest.raises(ValidationError, match=r"config\[0\]\.rate: 0 is out of range"):
        run(nb, Meter(), [dict(meter, rate=0)])
    run(nb, Meter(), [], state="overridden")
    assert nb.rows("nb", "Meter") == [] and nb.rows("nb", "Meter_Band") == []
