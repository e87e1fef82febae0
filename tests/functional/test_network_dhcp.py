"""A virtual network's DHCP and router advertisements (cluster/dhcp.py),
planned by virtual_network's core against a real NB with ovn-northd: the
rows, the advertisements and the ports' references as the network
declares them, a second run that changes nothing, DHCP turned on under
running pods and off again, a moved subnet, a deleted network, the
watcher's new ports, and the audit finding and mending drift made by hand.
Every assertion reads the NB from outside, with ``ovsdb-client``."""

import json

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import audit, dhcp, pod_ports
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import annotations as ann
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import addressing
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import NETWORK_KEY
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.view import View

NET = {"name": "vmnet", "subnet": "10.60.0.0/24", "subnet6": "fd00:60::/64", "mtu": 1400,
       "dns": ["10.60.0.53", "fd00:60::53"], "routes": [{"dst": "192.168.70.0/24", "gw": "10.60.0.254"}],
       "dhcp": {"lease_time": 600, "domain": "Lab.Example.", "ipv6_address_mode": "dhcpv6_stateful"}}


def declare(db, *networks, state="merged", force=False):
    return execute(db, lambda v: vn.plan_networks(
        v, [(n["name"], vn.check_network(n, n["name"])) for n in networks], state, "ovn", force=force), write=True)


@pytest.fixture
def nb(sandbox):
    with ovsdb.Database(sandbox.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        execute(db, lambda v: plan_topology(v, {}, "merged"), write=True)
        yield db


def dhcp_rows(sandbox):
    """``{cidr: row}`` of the network's own DHCP_Options (not its ports'),
    read from outside."""
    return dict((r["cidr"], r) for r in sandbox.rows("nb", "DHCP_Options")
                if r["external_ids"].get(NETWORK_KEY) == "vmnet" and "ovn4nfv-dhcp-port" not in r["external_ids"])


def port(sandbox, name):
    return next(r for r in sandbox.rows("nb", "Logical_Switch_Port") if r["name"] == name)


def uuid_of(value):
    """An optional reference as the sandbox reads it: a uuid string, or an
    empty list."""
    return value or None


def add_pod(db, name, network="vmnet"):
    pod = pod_ports.Pod("default", name, "uid-" + name)
    reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([{"name": network, "interface": "net0"}])})[1]
    execute(db, lambda v: pod_ports.plan_pod(v, pod, reqs), write=True)
    return pod.port_name("net0")


def test_the_network_s_rows_advertisements_and_a_second_run(nb, sandbox):
    declare(nb, NET)
    rows = dhcp_rows(sandbox)
    assert set(rows) == {"10.60.0.0/24", "fd00:60::/64"}
    mac = addressing.mac_from_name("rtos-vmnet")
    assert rows["10.60.0.0/24"]["options"] == {
        "server_id": "10.60.0.1", "server_mac": mac, "router": "10.60.0.1", "lease_time": "600", "mtu": "1400",
        "dns_server": "{10.60.0.53}", "domain_name": '"lab.example"',
        # the network's route, then the default route a classless client would otherwise lose
        "classless_static_route": "{192.168.70.0/24,10.60.0.254,0.0.0.0/0,10.60.0.1}"}
    assert rows["fd00:60::/64"]["options"] == {"server_id": mac, "dns_server": "{fd00:60::53}",
                                               "domain_search": '"lab.example"'}
    lrp = next(r for r in sandbox.rows("nb", "Logical_Router_Port") if r["name"] == "rtos-vmnet")
    assert lrp["ipv6_ra_configs"] == {"address_mode": "dhcpv6_stateful", "send_periodic": "true", "mtu": "1400",
                                      "rdnss": "fd00:60::53", "dnssl": "lab.example"}
    switch = next(r for r in sandbox.rows("nb", "Logical_Switch") if r["name"] == "vmnet")
    assert json.loads(switch["external_ids"]["ovn4nfv-dhcp"]) == {
        "lease_time": 600, "domain": "lab.example", "ipv6_address_mode": "dhcpv6_stateful"}
    assert not declare(nb, NET).changed
    gathered = execute(nb, lambda v: vn.plan_networks(v, [("g", {"name": "vmnet"})], "gathered", "ovn"), write=False)
    assert gathered.gathered[0]["dhcp"] == {"lease_time": 600, "domain": "lab.example",
                                            "ipv6_address_mode": "dhcpv6_stateful"}


def test_ports_follow_dhcp_on_and_off(nb, sandbox):
    plain = dict(NET, dhcp={"enabled": False})
    declare(nb, plain)
    before = add_pod(nb, "early")
    assert uuid_of(port(sandbox, before)["dhcpv4_options"]) is None
    assert dhcp_rows(sandbox) == {}
    # turned on under a running pod: its port is pointed at the rows in the same transaction
    plan = declare(nb, dict(NET, dhcp={"ipv6_address_mode": "dhcpv6_stateless"}))
    assert "update dhcp_attachment port %s: network='vmnet'" % before in plan.operations()
    rows = dhcp_rows(sandbox)
    assert rows["fd00:60::/64"]["options"]["dhcpv6_stateless"] == "true"
    assert uuid_of(port(sandbox, before)["dhcpv4_options"]) == rows["10.60.0.0/24"]["_uuid"]
    assert uuid_of(port(sandbox, before)["dhcpv6_options"]) == rows["fd00:60::/64"]["_uuid"]
    # a pod made afterwards: the watcher's own transaction points it there
    after = add_pod(nb, "late")
    assert uuid_of(port(sandbox, after)["dhcpv4_options"]) == rows["10.60.0.0/24"]["_uuid"]
    # SLAAC: advertisements only, no DHCPv6 row, and the ports' DHCPv6 references go
    declare(nb, dict(NET, dhcp={}))
    assert set(dhcp_rows(sandbox)) == {"10.60.0.0/24"}
    assert uuid_of(port(sandbox, after)["dhcpv6_options"]) is None
    lrp = next(r for r in sandbox.rows("nb", "Logical_Router_Port") if r["name"] == "rtos-vmnet")
    assert lrp["ipv6_ra_configs"]["address_mode"] == "slaac"
    # a merged task that says nothing of dhcp keeps it
    assert not declare(nb, {"name": "vmnet", "mtu": 1400}).changed
    # off: rows, references and advertisements gone
    declare(nb, plain)
    assert dhcp_rows(sandbox) == {}
    assert uuid_of(port(sandbox, before)["dhcpv4_options"]) is None
    lrp = next(r for r in sandbox.rows("nb", "Logical_Router_Port") if r["name"] == "rtos-vmnet")
    assert lrp["ipv6_ra_configs"] == {}
    assert not declare(nb, plain).changed


def test_a_moved_subnet_moves_its_row_and_a_deleted_network_takes_its_rows(nb, sandbox):
    declare(nb, NET)
    declare(nb, dict(NET, subnet="10.61.0.0/24", routes=[]))
    rows = dhcp_rows(sandbox)
    assert set(rows) == {"10.61.0.0/24", "fd00:60::/64"}
    assert rows["10.61.0.0/24"]["options"]["router"] == "10.61.0.1"
    assert "classless_static_route" not in rows["10.61.0.0/24"]["options"]
    declare(nb, {"name": "vmnet"}, state="deleted")
    assert dhcp_rows(sandbox) == {}


def test_another_controller_s_rows_are_left_alone(nb, sandbox):
    sandbox.nbctl("dhcp-options-create", "10.60.0.0/24", "owner=someone-else")
    declare(nb, NET)
    declare(nb, dict(NET, dhcp={"enabled": False}))
    left = [r for r in sandbox.rows("nb", "DHCP_Options") if r["external_ids"].get("owner") == "someone-else"]
    assert len(left) == 1 and dhcp_rows(sandbox) == {}


@pytest.mark.parametrize("dhcp_value, problem", [
    ({"lease_time": 5}, "config[0].dhcp.lease_time: 5 is not a number of seconds from 60 to 4294967295"),
    ({"lease_time": "600"}, "config[0].dhcp.lease_time: '600' is not a number of seconds"),
    ({"ipv6_address_mode": "dhcp"}, "config[0].dhcp.ipv6_address_mode: 'dhcp' is not one of slaac, "
                                    "dhcpv6_stateless, dhcpv6_stateful"),
    ({"domain": "bad domain"}, "config[0].dhcp.domain: 'bad domain' is not a DNS domain name"),
    ({"relay": "10.0.0.1"}, "config[0].dhcp: unknown option(s) relay"),
    ("yes", "config[0].dhcp: 'yes' is not a dict"),
])
def test_bad_dhcp_settings_are_refused_and_nothing_is_written(nb, sandbox, dhcp_value, problem):
    with pytest.raises(ValidationError) as refused:
        vn.check_network(dict(NET, dhcp=dhcp_value), "config[0]")
    assert any(p.startswith(problem) for p in refused.value.problems), refused.value.problems
    assert dhcp_rows(sandbox) == {}


def test_an_ovs_network_takes_no_dhcp(nb):
    with pytest.raises(ValidationError) as refused:
        execute(nb, lambda v: vn.plan_networks(
            v, [("c", vn.check_network({"name": "br", "subnet": "10.9.0.0/24", "dhcp": {}}, "c"))],
            "merged", "ovs"), write=False)
    assert refused.value.problems == ["c.dhcp: OVN's DHCP applies to the ovn backend only"]


def test_the_audit_finds_and_mends_dhcp_drift(nb, sandbox):
    declare(nb, NET)
    name = add_pod(nb, "web")
    v4 = dhcp_rows(sandbox)["10.60.0.0/24"]["_uuid"]
    sandbox.nbctl("set", "DHCP_Options", v4, "options:lease_time=60")
    sandbox.nbctl("clear", "Logical_Switch_Port", name, "dhcpv4_options")
    sandbox.nbctl("remove", "Logical_Router_Port", "rtos-vmnet", "ipv6_ra_configs", "address_mode")
    # the last of the three edits, in the connection's cache
    nb.wait_for(lambda idl: all("address_mode" not in r.ipv6_ra_configs
                                for r in idl.tables["Logical_Router_Port"].rows.values() if r.name == "rtos-vmnet"), 10)
    findings = nb.read(lambda idl: audit.audit_networks(View(idl)))
    assert [f["class"] for f in findings] == ["network_drift"]
    message = findings[0]["message"]
    assert "lease_time '60' -> '600'" in message
    assert "update dhcp_attachment port %s" % name in message
    assert "update dhcp_attachment router port rtos-vmnet" in message
    execute(nb, lambda v: audit.plan_repair(v, findings), write=True)
    assert dhcp_rows(sandbox)["10.60.0.0/24"]["options"]["lease_time"] == "600"
    assert uuid_of(port(sandbox, name)["dhcpv4_options"]) == v4
    assert nb.read(lambda idl: audit.audit_networks(View(idl))) == []


def test_targets_name_the_rows_a_batch_makes(nb):
    network = vn.complete(vn.check_network(NET, "n"), None, False, "ovn", "n")
    plan = execute(nb, lambda v: vn.plan_networks(v, [("n", vn.check_network(NET, "n"))], "merged", "ovn"),
                   write=False)
    found = nb.read(lambda idl: dhcp.targets(View(idl), network, plan.ops))
    assert sorted(found) == [4, 6] and all(row is not None for row in found.values())


def test_an_interface_configured_by_dhcp_needs_a_network_that_serves_it(nb, sandbox):
    declare(nb, dict(NET, dhcp={"enabled": False}))
    pod = pod_ports.Pod("default", "vm", "uid-vm")
    reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([{"name": "vmnet", "interface": "net0", "dhcp": True}])})[1]
    with pytest.raises(ValidationError) as refused:
        execute(nb, lambda v: pod_ports.plan_pod(v, pod, reqs), write=True)
    assert refused.value.problems == [
        "ovnNetwork[0].dhcp: network vmnet serves no DHCP (virtual_network's dhcp option)"]
    assert refused.value.reason == pod_ports.INVALID
    assert [p for p in sandbox.rows("nb", "Logical_Switch_Port") if p["name"] == pod.port_name("net0")] == []
    declare(nb, NET)
    ipv6_route = ann.parse_requests({ann.OVN_NETWORK: json.dumps([{
        "name": "vmnet", "interface": "net0", "dhcp": True, "routes": [{"dst": "fd00:99::/64"}]}])})[1]
    with pytest.raises(ValidationError) as refused:
        execute(nb, lambda v: pod_ports.plan_pod(v, pod, ipv6_route), write=True)
    assert refused.value.problems == [
        "ovnNetwork[0].routes[0].dst: DHCPv4 carries IPv4 routes only; an interface configured by DHCP takes its "
        "IPv6 routes from the router advertisements"]
    execute(nb, lambda v: pod_ports.plan_pod(v, pod, reqs), write=True)
    entries = nb.wait_for(lambda idl: pod_ports.interface_list(View(idl), pod, reqs), 10)
    assert entries[0]["dhcp"] is True and entries[0]["routes"] == []


def vm_pod(db, name, **extra):
    pod = pod_ports.Pod("default", name, "uid-" + name)
    entry = dict({"name": "vmnet", "interface": "net0", "dhcp": True}, **extra)
    reqs = ann.parse_requests({ann.OVN_NETWORK: json.dumps([entry])})[1]
    execute(db, lambda v: pod_ports.plan_pod(v, pod, reqs), write=True)
    return pod


def port_rows(sandbox):
    """``{port: row}`` of the rows made for one port, read from outside."""
    return dict((r["external_ids"]["ovn4nfv-dhcp-port"], r) for r in sandbox.rows("nb", "DHCP_Options")
                if "ovn4nfv-dhcp-port" in r["external_ids"])


def test_a_pod_s_own_routes_and_default_route_get_its_port_a_row_of_its_own(nb, sandbox):
    declare(nb, NET)
    plain = vm_pod(nb, "plain")
    # its own route, and no default route: the guest's other interface carries that
    routed = vm_pod(nb, "routed", routes=[{"dst": "10.99.0.0/16"}], default_gateway=False)
    again = vm_pod(nb, "again", routes=[{"dst": "10.98.0.0/16", "gw": "10.60.0.250"}])
    own = port_rows(sandbox)
    assert sorted(own) == [again.port_name("net0"), routed.port_name("net0")]
    options = own[routed.port_name("net0")]["options"]
    assert "router" not in options
    assert options["classless_static_route"] == "{192.168.70.0/24,10.60.0.254,10.99.0.0/16,10.60.0.1}"
    assert own[again.port_name("net0")]["options"]["classless_static_route"] == (
        "{192.168.70.0/24,10.60.0.254,10.98.0.0/16,10.60.0.250,0.0.0.0/0,10.60.0.1}")
    assert own[again.port_name("net0")]["options"]["router"] == "10.60.0.1"
    network_row = dhcp_rows(sandbox)["10.60.0.0/24"]["_uuid"]
    assert port(sandbox, plain.port_name("net0"))["dhcpv4_options"] == network_row
    assert port(sandbox, routed.port_name("net0"))["dhcpv4_options"] == own[routed.port_name("net0")]["_uuid"]
    # the IPv6 side is the network's: routes there come from the advertisements
    assert port(sandbox, routed.port_name("net0"))["dhcpv6_options"] == dhcp_rows(sandbox)["fd00:60::/64"]["_uuid"]
    # the module leaves them as they are, and makes them again from the network when it changes
    assert not declare(nb, NET).changed
    declare(nb, dict(NET, mtu=1300))
    assert port_rows(sandbox)[routed.port_name("net0")]["options"]["mtu"] == "1300"
    assert port(sandbox, routed.port_name("net0"))["dhcpv4_options"] == own[routed.port_name("net0")]["_uuid"]
    # its row goes with its pod
    execute(nb, lambda v: pod_ports.plan_delete(v, routed.uid), write=True)
    assert sorted(port_rows(sandbox)) == [again.port_name("net0")]
    # a port deleted by hand leaves its row: the audit finds it, and the repair removes it
    sandbox.nbctl("lsp-del", again.port_name("net0"))
    nb.wait_for(lambda idl: all(r.name != again.port_name("net0")
                                for r in idl.tables["Logical_Switch_Port"].rows.values()), 10)
    findings = nb.read(lambda idl: audit.audit_networks(View(idl)))
    assert "delete dhcp_attachment dhcp_options of port %s" % again.port_name("net0") in findings[0]["message"]
    execute(nb, lambda v: audit.plan_repair(v, findings), write=True)
    assert port_rows(sandbox) == {}
    # DHCP off takes the ports' rows too
    vm_pod(nb, "last", routes=[{"dst": "10.97.0.0/16"}])
    declare(nb, dict(NET, dhcp={"enabled": False}))
    assert sandbox.rows("nb", "DHCP_Options") == []


def test_an_option_the_network_no_longer_sets_goes(nb, sandbox):
    """The rows' options are replaced whole: from stateless to stateful
    DHCPv6 the row loses dhcpv6_stateless (else OVN would answer no
    address while the advertisement says managed), and routes, DNS, domain
    and MTU dropped from the network leave its DHCPv4 row."""
    declare(nb, dict(NET, dhcp={"ipv6_address_mode": "dhcpv6_stateless", "domain": "lab.example"}))
    assert dhcp_rows(sandbox)["fd00:60::/64"]["options"]["dhcpv6_stateless"] == "true"
    declare(nb, dict(NET, dhcp={"ipv6_address_mode": "dhcpv6_stateful"}))
    assert "dhcpv6_stateless" not in dhcp_rows(sandbox)["fd00:60::/64"]["options"]
    declare(nb, {"name": "vmnet", "subnet": "10.60.0.0/24", "subnet6": "fd00:60::/64", "routes": [], "dns": [],
                 "dhcp": {}}, state="replaced")
    assert dhcp_rows(sandbox)["10.60.0.0/24"]["options"] == {
        "server_id": "10.60.0.1", "server_mac": addressing.mac_from_name("rtos-vmnet"), "router": "10.60.0.1",
        "lease_time": "3600"}
    # and the audit finds a key added by hand
    sandbox.nbctl("set", "DHCP_Options", dhcp_rows(sandbox)["10.60.0.0/24"]["_uuid"], "options:ntp_server=10.60.0.9")
    nb.wait_for(lambda idl: any("ntp_server" in r.options for r in idl.tables["DHCP_Options"].rows.values()), 10)
    findings = nb.read(lambda idl: audit.audit_networks(View(idl)))
    assert [f["class"] for f in findings] == ["network_drift"] and "ntp_server" in findings[0]["message"]


def test_a_port_made_again_under_its_name_takes_the_place_of_the_row_left_behind(nb, sandbox):
    declare(nb, NET)
    first = vm_pod(nb, "vm", routes=[{"dst": "10.99.0.0/16"}])
    sandbox.nbctl("lsp-del", first.port_name("net0"))        # by hand: its row stays
    nb.wait_for(lambda idl: all(r.name != first.port_name("net0")
                                for r in idl.tables["Logical_Switch_Port"].rows.values()), 10)
    vm_pod(nb, "vm", routes=[{"dst": "10.98.0.0/16"}])
    rows = [r for r in sandbox.rows("nb", "DHCP_Options") if "ovn4nfv-dhcp-port" in r["external_ids"]]
    assert len(rows) == 1 and "10.98.0.0/16" in rows[0]["options"]["classless_static_route"]
    assert port(sandbox, first.port_name("net0"))["dhcpv4_options"] == rows[0]["_uuid"]
    assert not declare(nb, NET).changed
    declare(nb, {"name": "vmnet"}, state="deleted", force=True)
    assert sandbox.rows("nb", "DHCP_Options") == []
