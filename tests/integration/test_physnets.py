"""ovn_chassis' owned_bridge_mappings through ansible-playbook against a
real ovsdb-server: the product's provider-network mappings on a node are
exactly the inventory's, one it set before and no longer lists goes, and
another tool's mappings and every other key of external_ids stay as they
were. Check mode writes nothing; a second run changes nothing."""

from tests.harness.playbook import run_playbook
from tests.harness.sandbox import stable_dump


def test_the_product_s_own_mappings_and_nothing_else(sandbox, collections_path):
    ovs = sandbox.ovs_db
    sandbox.vsctl("set", "open_vswitch", ".", "external_ids:hostname=h1", "external_ids:some-tool=kept",
                  "external_ids:ovn-bridge-mappings=foreign:br-f")

    def chassis(name, config, state="merged", check=False, fail=False):
        task = {"name": name, "ovn4nfv.k8s.ovn_chassis": {"config": config, "state": state, "db": ovs}}
        if check:
            task["check_mode"] = True
        if fail:
            task["ignore_errors"] = True
        return task

    def ids(name):
        return {"name": name, "changed_when": False, "ansible.builtin.command": {
            "argv": ["ovs-vsctl", "--db=" + ovs, "get", "open_vswitch", ".", "external_ids"]}}

    def dump(name):
        return {"name": name, "changed_when": False, "ansible.builtin.command": {"argv": ["ovsdb-client", "dump", ovs]}}

    first = {"owned_bridge_mappings": {"physnet-a": "br-a", "physnet-b": "br-b"}}
    r, proc = run_playbook(collections_path, [
        dump("dump0"),
        chassis("check", first, check=True),
        dump("dump1"),
        chassis("set", first),
        chassis("again", first),
        ids("ids_set"),
        # node_gateway's merged mapping beside: neither writer undoes the other's order
        chassis("gateway", {"bridge_mappings": {"gw": "br-gw"}}),
        chassis("owned_after_gateway", first),
        chassis("gateway_again", {"bridge_mappings": {"gw": "br-gw"}}),
        chassis("drop_a", {"owned_bridge_mappings": {"physnet-b": "br-b2"}}),
        ids("ids_dropped"),
        chassis("gathered", None, state="gathered"),
        chassis("both", {"owned_bridge_mappings": {"x": "br-x"}, "bridge_mappings": {"y": "br-y"}}, fail=True),
        chassis("bad_name", {"owned_bridge_mappings": {"phys,1": "br-x"}}, fail=True),
        chassis("bad_bridge", {"owned_bridge_mappings": {"physnet-c": None}}, fail=True),
        chassis("take_over", {"owned_bridge_mappings": {"physnet-b": "br-b2", "foreign": "br-mine"}}, fail=True),
        ids("ids_refused"),
        chassis("delete", {"owned_bridge_mappings": {}}, state="deleted"),
        chassis("delete_again", {"owned_bridge_mappings": {}}, state="deleted"),
        ids("ids_deleted"),
    ])
    assert proc.returncode == 0, proc.stdout[-4000:]

    assert r["check"]["changed"] and stable_dump(r["dump0"]["stdout"]) == stable_dump(r["dump1"]["stdout"])
    assert r["check"]["diff"]["after"]["open_vswitch"]["owned_bridge_mappings"] == first["owned_bridge_mappings"]
    assert r["set"]["changed"] and not r["again"]["changed"]
    assert 'ovn-bridge-mappings="foreign:br-f,physnet-a:br-a,physnet-b:br-b"' in r["ids_set"]["stdout"]
    assert 'ovn4nfv-physnets="physnet-a,physnet-b"' in r["ids_set"]["stdout"]
    for kept in ('hostname=h1', 'some-tool=kept'):
        assert kept in r["ids_set"]["stdout"]

    # physnet-a no longer listed: gone; physnet-b's bridge changed; foreign stays
    assert r["drop_a"]["changed"]
    assert not r["owned_after_gateway"]["changed"] and not r["gateway_again"]["changed"]
    assert 'ovn-bridge-mappings="foreign:br-f,physnet-b:br-b2,gw:br-gw"' in r["ids_dropped"]["stdout"]
    assert 'ovn4nfv-physnets=physnet-b' in r["ids_dropped"]["stdout"]
    assert r["drop_a"]["diff"]["before"]["open_vswitch"]["owned_bridge_mappings"] == {
        "physnet-a": "br-a", "physnet-b": "br-b"}
    assert r["gathered"]["gathered"]["owned_bridge_mappings"] == {"physnet-b": "br-b2"}
    assert r["gathered"]["gathered"]["bridge_mappings"] == {"foreign": "br-f", "physnet-b": "br-b2", "gw": "br-gw"}

    # another tool's mapping is not taken over: refused, nothing written
    assert "physnet foreign is mapped already (to br-f)" in r["take_over"]["msg"]
    assert r["ids_refused"]["stdout"] == r["ids_dropped"]["stdout"]

    assert "not both" in r["both"]["msg"]
    assert "not a valid physical network name" in r["bad_name"]["msg"]
    assert r["bad_bridge"]["failed"] and "physnet-c" in r["bad_bridge"]["msg"]

    # deleted: the product's mappings and its record go, the rest stays
    assert r["delete"]["changed"] and not r["delete_again"]["changed"]
    assert 'ovn-bridge-mappings="foreign:br-f,gw:br-gw"' in r["ids_deleted"]["stdout"]
    assert "ovn4nfv-physnets" not in r["ids_deleted"]["stdout"]
    assert "some-tool=kept" in r["ids_deleted"]["stdout"]
