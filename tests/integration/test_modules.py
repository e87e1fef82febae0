"""Every resource module through ansible-playbook, against real daemons.

One playbook per module walks the whole life of its objects:

    check-mode create (database dump unchanged, diff returned)
    -> create -> same again (no change) -> same again in check mode
    -> merged update -> replaced -> replaced again (no change)
    -> rendered (dump unchanged) -> gathered
    -> overridden (a row the product does not own survives) -> again
    -> deleted -> deleted again (no change)

Between steps the playbook reads the tables with ovsdb-client, so each
state is checked from outside the code under test.
"""

import pytest

from tests.harness.playbook import run_playbook
from tests.harness.sandbox import rows_from_json, stable_dump

OWNER = {"ovn4nfv-owner": "ovn4nfv.k8s"}


def as_list(value):
    """ovsdb-client prints a one-element set as the element itself."""
    return value if isinstance(value, list) else [value]


def by_name(tables, table):
    return dict((row["name"], row) for row in tables[table])


def by_uuid(tables, table):
    return dict((row["_uuid"], row) for row in tables[table])


def owned(ids, **keys):
    expected = dict(OWNER)
    expected.update(keys)
    return ids == expected


# --------------------------------------------------------------------------
# One scenario per module: setup (ovn-nbctl / ovs-vsctl), configs per step,
# and checks on the tables after each step.
# --------------------------------------------------------------------------

def ls_checks():
    def create(t):
        ls = by_name(t, "Logical_Switch")
        assert ls["ls-a"]["other_config"] == {
            "subnet": "10.10.0.0/24", "exclude_ips": "10.10.0.1 10.10.0.250..10.10.0.254"}
        assert owned(ls["ls-a"]["external_ids"], team="a", keep="x")
        assert ls["ls-b"]["other_config"] == {"mcast_snoop": "true"}

    def merge(t):
        ls = by_name(t, "Logical_Switch")["ls-a"]
        assert owned(ls["external_ids"], keep="x", tier="gold")
        assert ls["other_config"] == {"subnet": "10.10.0.0/24", "exclude_ips": "10.10.0.2"}

    def replace(t):
        ls = by_name(t, "Logical_Switch")["ls-a"]
        assert ls["other_config"] == {"subnet": "10.10.0.0/24"}
        assert owned(ls["external_ids"])

    def override(t):
        ls = by_name(t, "Logical_Switch")
        assert set(ls) == {"ls-b", "foreign"}
        assert ls["ls-b"]["other_config"] == {}
        assert ls["foreign"]["external_ids"] == {}

    def delete(t):
        assert set(by_name(t, "Logical_Switch")) == {"foreign"}
    return create, merge, replace, override, delete


def lsp_checks():
    def ports_of(t, switch):
        lsps = by_uuid(t, "Logical_Switch_Port")
        return dict((lsps[u]["name"], lsps[u]) for u in
                    as_list(by_name(t, "Logical_Switch")[switch]["ports"]))

    def create(t):
        sw1, sw2 = ports_of(t, "sw1"), ports_of(t, "sw2")
        assert set(sw1) == {"p1", "foreign"} and set(sw2) == {"p2"}
        assert as_list(sw1["p1"]["addresses"]) == ["dynamic"]
        assert as_list(sw2["p2"]["addresses"]) == ["0a:00:00:00:00:02 10.30.0.2"]
        assert as_list(sw2["p2"]["port_security"]) == ["0a:00:00:00:00:02 10.30.0.2"]
        assert sw2["p2"]["options"] == {"foo": "bar"}
        assert owned(sw2["p2"]["external_ids"], pod="x")

    def merge(t):
        p2 = ports_of(t, "sw2")["p2"]
        assert p2["options"] == {"baz": "q"}
        assert as_list(p2["addresses"]) == ["0a:00:00:00:00:02 10.30.0.2"]

    def replace(t):
        p2 = ports_of(t, "sw2")["p2"]
        assert as_list(p2["addresses"]) == [] and as_list(p2["port_security"]) == []
        assert p2["options"] == {} and owned(p2["external_ids"])

    def override(t):
        assert set(ports_of(t, "sw1")) == {"p1", "foreign"}
        assert ports_of(t, "sw2") == {}

    def delete(t):
        assert set(ports_of(t, "sw1")) == {"foreign"}
    return create, merge, replace, override, delete


def lr_checks():
    def create(t):
        lr = by_name(t, "Logical_Router")
        assert lr["r1"]["options"] == {"chassis": "ch1"}
        assert owned(lr["r2"]["external_ids"], a="b")

    def merge(t):
        assert by_name(t, "Logical_Router")["r1"]["options"] == {"always_learn_from_arp_request": "false"}

    def replace(t):
        r1 = by_name(t, "Logical_Router")["r1"]
        assert r1["options"] == {} and owned(r1["external_ids"])

    def override(t):
        assert set(by_name(t, "Logical_Router")) == {"r2", "foreign"}

    def delete(t):
        assert set(by_name(t, "Logical_Router")) == {"foreign"}
    return create, merge, replace, override, delete


def lrp_checks():
    def ports(t):
        lrps = by_uuid(t, "Logical_Router_Port")
        return dict((lrps[u]["name"], lrps[u]) for u in
                    as_list(by_name(t, "Logical_Router")["r1"]["ports"]))

    def chassis(t, port):
        gcs = by_uuid(t, "Gateway_Chassis")
        return dict((gcs[u]["chassis_name"], (gcs[u]["name"], gcs[u]["priority"]))
                    for u in as_list(port["gateway_chassis"]))

    def create(t):
        p = ports(t)
        assert set(p) == {"rp1", "rp2", "foreign"}
        assert p["rp1"]["mac"] == "0a:00:00:00:01:01"
        assert as_list(p["rp1"]["networks"]) == ["10.1.1.1/24"]
        assert chassis(t, p["rp1"]) == {"ch1": ("rp1-ch1", 20), "ch2": ("rp1-ch2", 10)}
        assert sorted(as_list(p["rp2"]["networks"])) == ["10.1.2.1/24", "10.1.3.1/24"]

    def merge(t):
        p = ports(t)
        assert chassis(t, p["rp1"]) == {"ch1": ("rp1-ch1", 5), "ch3": ("rp1-ch3", 7)}
        assert len(t["Gateway_Chassis"]) == 2, "the dropped chassis row must be deleted"
        assert as_list(p["rp2"]["networks"]) == ["10.1.2.1/24"]

    def replace(t):
        p = ports(t)
        assert chassis(t, p["rp1"]) == {} and t["Gateway_Chassis"] == []

    def override(t):
        assert set(ports(t)) == {"rp2", "foreign"}

    def delete(t):
        assert set(ports(t)) == {"foreign"}
    return create, merge, replace, override, delete


def route_checks():
    def routes(t):
        return dict(((r["ip_prefix"], r["nexthop"]), r) for r in t["Logical_Router_Static_Route"])

    def create(t):
        r = routes(t)
        assert set(r) == {("0.0.0.0/0", "10.0.0.1"), ("172.16.0.0/16", "10.0.0.2"),
                          ("192.168.0.0/16", "10.0.0.254")}
        assert r[("172.16.0.0/16", "10.0.0.2")]["output_port"] == "rp"
        assert as_list(r[("0.0.0.0/0", "10.0.0.1")]["policy"]) == []

    def merge(t):
        r = routes(t)[("172.16.0.0/16", "10.0.0.2")]
        assert owned(r["external_ids"], k="v") and r["output_port"] == "rp"

    def replace(t):
        r = routes(t)[("172.16.0.0/16", "10.0.0.2")]
        assert as_list(r["output_port"]) == [] and owned(r["external_ids"])

    def override(t):
        assert set(routes(t)) == {("0.0.0.0/0", "10.0.0.1"), ("192.168.0.0/16", "10.0.0.254")}

    def delete(t):
        assert set(routes(t)) == {("192.168.0.0/16", "10.0.0.254")}
    return create, merge, replace, override, delete


def nat_checks():
    def nats(t):
        return dict(((n["type"], n["logical_ip"] if n["type"] == "snat" else n["external_ip"]), n)
                    for n in t["NAT"])

    def create(t):
        n = nats(t)
        assert set(n) == {("snat", "10.1.0.0/24"), ("dnat_and_snat", "192.168.50.20"),
                          ("snat", "10.9.0.0/24")}
        assert n[("snat", "10.1.0.0/24")]["external_ip"] == "192.168.50.10"

    def merge(t):
        assert nats(t)[("snat", "10.1.0.0/24")]["external_ip"] == "192.168.50.11"

    def replace(t):
        n = nats(t)[("dnat_and_snat", "192.168.50.20")]
        assert n["logical_ip"] == "10.1.0.6" and n["logical_port"] == "vm1"
        assert n["external_mac"] == "0a:00:00:00:00:09"

    def override(t):
        assert set(nats(t)) == {("snat", "10.1.0.0/24"), ("snat", "10.9.0.0/24")}

    def delete(t):
        assert set(nats(t)) == {("snat", "10.9.0.0/24")}
    return create, merge, replace, override, delete


def lb_checks():
    def lbs(t):
        return dict((lb["name"], lb) for lb in t["Load_Balancer"])

    def holders(t, table, lb):
        return sorted(r["name"] for r in t[table] if lb["_uuid"] in as_list(r["load_balancer"]))

    def create(t):
        lb = lbs(t)
        assert set(lb) == {"foreign", "web", "dns"}
        web = lb["web"]
        assert web["protocol"] == "tcp" and web["options"]["affinity_timeout"] == "300"
        assert web["vips"] == {"10.96.0.10:80": "10.1.0.5:8080,10.1.0.6:8080"}
        assert holders(t, "Logical_Switch", web) == ["s1", "s2"]
        assert holders(t, "Logical_Router", web) == ["r1"]
        [hc] = t["Load_Balancer_Health_Check"]
        assert hc["vip"] == "10.96.0.10:80" and hc["options"] == {"interval": "5", "timeout": "3"}
        assert as_list(web["health_check"]) == [hc["_uuid"]]
        assert lb["dns"]["protocol"] == "udp" and owned(lb["dns"]["external_ids"])

    def merge(t):
        web = lbs(t)["web"]
        assert web["vips"] == {"10.96.0.10:80": "10.1.0.5:8080,10.1.0.6:8080",
                               "[fd00::10]:443": "[fd00::5]:8443"}
        assert holders(t, "Logical_Switch", web) == ["s2"]
        assert t["Load_Balancer_Health_Check"][0]["options"]["interval"] == "10"

    def replace(t):
        web = lbs(t)["web"]
        assert web["vips"] == {"10.96.0.10:80": "10.1.0.7:8080"}
        assert "affinity_timeout" not in web["options"] and as_list(web["health_check"]) == []
        assert t["Load_Balancer_Health_Check"] == [], "the check row went with its reference"
        assert holders(t, "Logical_Switch", web) == [] and holders(t, "Logical_Router", web) == []
        assert as_list(web["selection_fields"]) == ["ip_dst", "ip_src"]

    def override(t):
        assert set(lbs(t)) == {"foreign", "dns"}

    def delete(t):
        assert set(lbs(t)) == {"foreign"}
        foreign = lbs(t)["foreign"]
        assert holders(t, "Logical_Switch", foreign) == ["s1"], "a foreign balancer stays attached"
    return create, merge, replace, override, delete


def connection_checks():
    def conns(t):
        return dict((c["target"], c) for c in t["Connection"])

    def create(t):
        c = conns(t)
        assert set(c) == {"pssl:6642:127.0.0.1", "ptcp:6652:127.0.0.1", "ptcp:6699"}
        assert c["pssl:6642:127.0.0.1"]["role"] == "ovn-controller"
        assert c["pssl:6642:127.0.0.1"]["inactivity_probe"] == 60000
        assert c["ptcp:6652:127.0.0.1"]["read_only"] is True
        referenced = as_list(t["SB_Global"][0]["connections"])
        assert sorted(c[target]["_uuid"] for target in c) == sorted(referenced)

    def merge(t):
        c = conns(t)["pssl:6642:127.0.0.1"]
        assert c["inactivity_probe"] == 30000 and c["role"] == "ovn-controller"

    def replace(t):
        c = conns(t)["pssl:6642:127.0.0.1"]
        assert c["role"] == "" and c["inactivity_probe"] == []

    def override(t):
        assert set(conns(t)) == {"ptcp:6652:127.0.0.1", "ptcp:6699"}

    def delete(t):
        assert set(conns(t)) == {"ptcp:6699"}
    return create, merge, replace, override, delete


def bridge_checks():
    def create(t):
        br = by_name(t, "Bridge")
        ports = by_uuid(t, "Port")
        local = [ports[u] for u in as_list(br["br-a"]["ports"])]
        assert [p["name"] for p in local] == ["br-a"]
        iface = by_uuid(t, "Interface")[as_list(local[0]["interfaces"])[0]]
        assert iface["type"] == "internal"
        assert br["br-a"]["datapath_type"] == "netdev" and br["br-a"]["fail_mode"] == "secure"
        assert sorted(as_list(br["br-a"]["protocols"])) == ["OpenFlow10", "OpenFlow13"]
        assert owned(br["br-a"]["external_ids"], a="1", b="2")
        assert br["br-b"]["other_config"] == {"hwaddr": "0a:00:00:00:00:0b"}

    def merge(t):
        br = by_name(t, "Bridge")["br-a"]
        # two keys changed and one removed in one task: openvswitch_bridge cannot
        assert owned(br["external_ids"], b="3", c="4")
        assert br["fail_mode"] == "standalone"

    def replace(t):
        br = by_name(t, "Bridge")["br-a"]
        assert as_list(br["fail_mode"]) == [] and as_list(br["protocols"]) == []
        assert owned(br["external_ids"])

    def override(t):
        assert set(by_name(t, "Bridge")) == {"br-b", "foreign"}
        assert "br-a" not in by_name(t, "Port"), "the bridge's ports go with it"
        assert by_name(t, "Bridge")["br-b"]["other_config"] == {}

    def delete(t):
        assert set(by_name(t, "Bridge")) == {"foreign"}
    return create, merge, replace, override, delete


def port_checks():
    def ports(t):
        all_ports = by_uuid(t, "Port")
        return dict((all_ports[u]["name"], all_ports[u])
                    for u in as_list(by_name(t, "Bridge")["brx"]["ports"]))

    def iface(t, name):
        return by_name(t, "Interface")[name]

    def create(t):
        p = ports(t)
        assert set(p) == {"brx", "foreignp", "pa", "pb"}
        assert p["pa"]["tag"] == 10 and owned(p["pa"]["external_ids"])
        assert iface(t, "pa")["type"] == "internal"
        assert iface(t, "pa")["external_ids"] == {"iface-id": "lsp-a"}
        assert iface(t, "pb")["type"] == "patch" and iface(t, "pb")["options"] == {"peer": "pb-peer"}

    def merge(t):
        assert ports(t)["pa"]["tag"] == 11
        assert iface(t, "pa")["external_ids"] == {"iface-id": "lsp-a", "extra": "x"}

    def replace(t):
        assert as_list(ports(t)["pa"]["tag"]) == []
        assert iface(t, "pa")["external_ids"] == {} and iface(t, "pa")["type"] == "internal"

    def override(t):
        assert set(ports(t)) == {"brx", "foreignp", "pb"}
        assert "pa" not in by_name(t, "Interface")

    def delete(t):
        assert set(ports(t)) == {"brx", "foreignp"}
    return create, merge, replace, override, delete


def chassis_checks():
    def ids(t):
        return t["Open_vSwitch"][0]["external_ids"]

    def create(t):
        assert ids(t) == {
            "hostname": "h1", "system-id": "ch1", "ovn-remote": "tcp:127.0.0.1:6642",
            "ovn-encap-type": "geneve", "ovn-encap-ip": "127.0.0.1",
            "ovn-bridge-mappings": "phys0:br-old,phys1:br-ex",
            "ovn-bridge-datapath-type": "netdev", "ovn-cms-options": "enable-chassis-as-gw",
            "ovn-match-northd-version": "true"}

    def merge(t):
        assert ids(t)["ovn-bridge-mappings"] == "phys1:br-ex,phys2:br-2"
        assert ids(t)["ovn-match-northd-version"] == "false"
        assert ids(t)["ovn-ofctrl-wait-before-clear"] == "8000"
        assert ids(t)["ovn-encap-ip"] == "127.0.0.2" and ids(t)["hostname"] == "h1"

    def replace(t):
        assert ids(t) == {"hostname": "h1", "system-id": "ch1", "ovn-encap-ip": "127.0.0.3"}

    def override(t):
        assert ids(t) == {"hostname": "h1", "system-id": "ch1"}

    def delete(t):
        assert ids(t) == {"hostname": "h1"}
    return create, merge, replace, override, delete


SCENARIOS = {
    "ovn_logical_switch": dict(
        db="nb", tables=["Logical_Switch"],
        setup=[["ls-add", "foreign"]],
        create=[{"name": "ls-a", "subnet": "10.10.0.0/24",
                 "exclude_ips": ["10.10.0.1", "10.10.0.250..10.10.0.254"],
                 "external_ids": {"team": "a", "keep": "x"}},
                {"name": "ls-b", "other_config": {"mcast_snoop": "true"}}],
        merge=[{"name": "ls-a", "exclude_ips": ["10.10.0.2"],
                "external_ids": {"team": None, "tier": "gold"}}],
        replace=[{"name": "ls-a", "subnet": "10.10.0.0/24"}],
        override=[{"name": "ls-b"}],
        delete=[{"name": "ls-b"}],
        checks=ls_checks()),
    "ovn_logical_switch_port": dict(
        db="nb", tables=["Logical_Switch", "Logical_Switch_Port"],
        setup=[["ls-add", "sw1"], ["set", "Logical_Switch", "sw1", "other_config:subnet=10.20.0.0/24"],
               ["ls-add", "sw2"], ["lsp-add", "sw1", "foreign"]],
        create=[{"name": "p1", "switch": "sw1", "addresses": ["dynamic"]},
                {"name": "p2", "switch": "sw2", "addresses": ["0A:00:00:00:00:02 10.30.0.2"],
                 "port_security": ["0a:00:00:00:00:02 10.30.0.2"], "options": {"foo": "bar"},
                 "external_ids": {"pod": "x"}}],
        merge=[{"name": "p2", "switch": "sw2", "options": {"foo": None, "baz": "q"}}],
        replace=[{"name": "p2", "switch": "sw2"}],
        override=[{"name": "p1", "switch": "sw1", "addresses": ["dynamic"]}],
        delete=[{"name": "p1"}],
        checks=lsp_checks()),
    "ovn_logical_router": dict(
        db="nb", tables=["Logical_Router"],
        setup=[["lr-add", "foreign"]],
        create=[{"name": "r1", "options": {"chassis": "ch1"}},
                {"name": "r2", "external_ids": {"a": "b"}}],
        merge=[{"name": "r1", "options": {"chassis": None, "always_learn_from_arp_request": "false"}}],
        replace=[{"name": "r1"}],
        override=[{"name": "r2", "external_ids": {"a": "b"}}],
        delete=[{"name": "r2"}],
        checks=lr_checks()),
    "ovn_logical_router_port": dict(
        db="nb", tables=["Logical_Router", "Logical_Router_Port", "Gateway_Chassis"],
        setup=[["lr-add", "r1"], ["lrp-add", "r1", "foreign", "0a:00:00:00:00:f0", "10.99.0.1/24"]],
        create=[{"name": "rp1", "router": "r1", "mac": "0A:00:00:00:01:01", "networks": ["10.1.1.1/24"],
                 "gateway_chassis": [{"chassis_name": "ch1", "priority": 20},
                                     {"chassis_name": "ch2", "priority": 10}]},
                {"name": "rp2", "router": "r1", "mac": "0a:00:00:00:01:02",
                 "networks": ["10.1.2.1/24", "10.1.3.1/24"]}],
        merge=[{"name": "rp1", "router": "r1",
                "gateway_chassis": [{"chassis_name": "ch1", "priority": 5},
                                    {"chassis_name": "ch3", "priority": 7}]},
               {"name": "rp2", "router": "r1", "networks": ["10.1.2.1/24"]}],
        replace=[{"name": "rp1", "router": "r1", "mac": "0a:00:00:00:01:01", "networks": ["10.1.1.1/24"]}],
        override=[{"name": "rp2", "router": "r1", "mac": "0a:00:00:00:01:02", "networks": ["10.1.2.1/24"]}],
        delete=[{"name": "rp2"}],
        checks=lrp_checks()),
    "ovn_static_route": dict(
        db="nb", tables=["Logical_Router_Static_Route"],
        setup=[["lr-add", "r1"], ["lrp-add", "r1", "rp", "0a:00:00:00:00:01", "10.0.0.100/24"],
               ["lr-route-add", "r1", "192.168.0.0/16", "10.0.0.254"]],
        create=[{"router": "r1", "ip_prefix": "0.0.0.0/0", "nexthop": "10.0.0.1"},
                {"router": "r1", "ip_prefix": "172.16.0.0/16", "nexthop": "10.0.0.2", "output_port": "rp"}],
        merge=[{"router": "r1", "ip_prefix": "172.16.0.0/16", "nexthop": "10.0.0.2",
                "external_ids": {"k": "v"}}],
        replace=[{"router": "r1", "ip_prefix": "172.16.0.0/16", "nexthop": "10.0.0.2"}],
        override=[{"router": "r1", "ip_prefix": "0.0.0.0/0", "nexthop": "10.0.0.1"}],
        delete=[{"router": "r1", "ip_prefix": "0.0.0.0/0", "nexthop": "10.0.0.1"}],
        checks=route_checks()),
    "ovn_nat": dict(
        db="nb", tables=["NAT"],
        setup=[["lr-add", "r1"], ["lr-nat-add", "r1", "snat", "192.168.50.9", "10.9.0.0/24"],
               ["ls-add", "s"], ["lsp-add", "s", "vm1"]],
        create=[{"router": "r1", "type": "snat", "external_ip": "192.168.50.10", "logical_ip": "10.1.0.0/24"},
                {"router": "r1", "type": "dnat_and_snat", "external_ip": "192.168.50.20",
                 "logical_ip": "10.1.0.5"}],
        merge=[{"router": "r1", "type": "snat", "external_ip": "192.168.50.11", "logical_ip": "10.1.0.0/24"}],
        replace=[{"router": "r1", "type": "dnat_and_snat", "external_ip": "192.168.50.20",
                  "logical_ip": "10.1.0.6", "logical_port": "vm1", "external_mac": "0a:00:00:00:00:09"}],
        override=[{"router": "r1", "type": "snat", "external_ip": "192.168.50.11", "logical_ip": "10.1.0.0/24"}],
        delete=[{"router": "r1", "type": "snat", "logical_ip": "10.1.0.0/24"}],
        checks=nat_checks()),
    "ovn_load_balancer": dict(
        db="nb", tables=["Load_Balancer", "Load_Balancer_Health_Check", "Logical_Switch",
                         "Logical_Router"],
        setup=[["ls-add", "s1"], ["ls-add", "s2"], ["lr-add", "r1"],
               ["lb-add", "foreign", "10.96.0.99:53", "10.1.0.9:53", "udp"],
               ["ls-lb-add", "s1", "foreign"]],
        create=[{"name": "web", "vips": {"10.96.0.10:80": ["10.1.0.6:8080", "10.1.0.5:8080"]},
                 "switches": ["s2", "s1"], "routers": ["r1"], "affinity_timeout": 300,
                 "health_checks": [{"vip": "10.96.0.10:80", "interval": 5, "timeout": 3}],
                 "ip_port_mappings": {"10.1.0.5": "p5:10.1.0.2"}},
                {"name": "dns", "protocol": "udp", "vips": {"10.96.0.53:53": ["10.1.0.8:53"]}}],
        merge=[{"name": "web", "vips": {"[fd00::10]:443": ["[fd00::5]:8443"]}, "switches": ["s2"],
                "health_checks": [{"vip": "10.96.0.10:80", "interval": 10, "timeout": 3}]}],
        replace=[{"name": "web", "vips": {"10.96.0.10:80": ["10.1.0.7:8080"]},
                  "selection_fields": ["ip_src", "ip_dst"]}],
        override=[{"name": "dns", "protocol": "udp", "vips": {"10.96.0.53:53": ["10.1.0.8:53"]}}],
        delete=[{"name": "dns"}],
        checks=lb_checks()),
    "ovn_connection": dict(
        db="sb", tables=["SB_Global", "Connection"], args={"database": "southbound"},
        setup=[["--", "--id=@c", "create", "Connection", "target=\"ptcp:6699\"", "--",
                "add", "SB_Global", ".", "connections", "@c"]],
        create=[{"target": "pssl:6642:127.0.0.1", "role": "ovn-controller", "inactivity_probe": 60000},
                {"target": "ptcp:6652:127.0.0.1", "read_only": True}],
        merge=[{"target": "pssl:6642:127.0.0.1", "inactivity_probe": 30000}],
        replace=[{"target": "pssl:6642:127.0.0.1"}],
        override=[{"target": "ptcp:6652:127.0.0.1", "read_only": True}],
        delete=[{"target": "ptcp:6652:127.0.0.1"}],
        checks=connection_checks()),
    "ovs_bridge": dict(
        db="ovs", tables=["Bridge", "Port", "Interface"],
        setup=[["add-br", "foreign", "--", "set", "bridge", "foreign", "datapath_type=netdev"]],
        create=[{"name": "br-a", "datapath_type": "netdev", "fail_mode": "secure",
                 "protocols": ["OpenFlow13", "OpenFlow10"], "external_ids": {"a": "1", "b": "2"}},
                {"name": "br-b", "datapath_type": "netdev", "other_config": {"hwaddr": "0A:00:00:00:00:0B"}}],
        merge=[{"name": "br-a", "fail_mode": "standalone", "external_ids": {"a": None, "b": "3", "c": "4"}}],
        replace=[{"name": "br-a", "datapath_type": "netdev"}],
        override=[{"name": "br-b", "datapath_type": "netdev"}],
        delete=[{"name": "br-b"}],
        checks=bridge_checks()),
    "ovs_port": dict(
        db="ovs", tables=["Bridge", "Port", "Interface"],
        setup=[["add-br", "brx", "--", "set", "bridge", "brx", "datapath_type=netdev"],
               ["add-port", "brx", "foreignp", "--", "set", "interface", "foreignp", "type=internal"]],
        create=[{"name": "pa", "bridge": "brx", "type": "internal", "tag": 10,
                 "external_ids": {"iface-id": "lsp-a"}},
                {"name": "pb", "bridge": "brx", "type": "patch", "options": {"peer": "pb-peer"}}],
        merge=[{"name": "pa", "bridge": "brx", "tag": 11, "external_ids": {"extra": "x"}}],
        replace=[{"name": "pa", "bridge": "brx", "type": "internal"}],
        override=[{"name": "pb", "bridge": "brx", "type": "patch", "options": {"peer": "pb-peer"}}],
        delete=[{"name": "pb"}],
        checks=port_checks()),
    "ovn_chassis": dict(
        db="ovs", tables=["Open_vSwitch"], single=True,
        setup=[["set", "open_vswitch", ".", "external_ids:hostname=h1",
                "external_ids:ovn-bridge-mappings=phys0:br-old"]],
        create={"system_id": "ch1", "ovn_remote": "tcp:127.0.0.1:6642", "encap_type": ["geneve"],
                "encap_ip": "127.0.0.1", "bridge_mappings": {"phys1": "br-ex"},
                "bridge_datapath_type": "netdev", "cms_options": ["enable-chassis-as-gw"],
                "match_northd_version": True},
        merge={"bridge_mappings": {"phys0": None, "phys2": "br-2"}, "encap_ip": "127.0.0.2",
               "match_northd_version": False, "ofctrl_wait_before_clear": 8000},
        replace={"system_id": "ch1", "encap_ip": "127.0.0.3"},
        override={"system_id": "ch1"},
        delete={},
        checks=chassis_checks()),
}


def lifecycle_tasks(module, scenario, remote, dump_cmds, schema):
    fqcn = "ovn4nfv.k8s." + module

    def step(name, config, state="merged", check=False):
        task = {"name": name, fqcn: dict(scenario.get("args", {}), config=config, state=state, db=remote)}
        if check:
            task["check_mode"] = True
        return task

    def dump(name):
        return {"name": name, "ansible.builtin.command": {"argv": "{{ item }}"},
                "loop": dump_cmds, "changed_when": False}

    def tables(name):
        return {"name": name, "ansible.builtin.command": {
            "argv": ["ovsdb-client", "-f", "json", "dump", remote, schema, "{{ item }}"]},
            "loop": scenario["tables"], "changed_when": False}

    s = scenario
    return [
        dump("dump0"),
        step("create_check", s["create"], check=True),
        dump("dump1"),
        step("create", s["create"]),
        tables("after_create"),
        step("create_again", s["create"]),
        step("create_again_check", s["create"], check=True),
        step("merge", s["merge"]),
        tables("after_merge"),
        step("replace", s["replace"], "replaced"),
        tables("after_replace"),
        step("replace_again", s["replace"], "replaced"),
        dump("dump2"),
        step("rendered", s["create"], "rendered"),
        step("replace_check", s["create"], "replaced", check=True),
        dump("dump3"),
        {"name": "gathered", fqcn: dict(s.get("args", {}), state="gathered", db=remote)},
        step("override", s["override"], "overridden"),
        tables("after_override"),
        step("override_again", s["override"], "overridden"),
        step("delete", s["delete"], "deleted"),
        tables("after_delete"),
        step("delete_again", s["delete"], "deleted"),
    ]


def stdouts(result):
    return [stable_dump(r["stdout"]) for r in result["results"] if r["cmd"][0] == "ovsdb-client"]


def table_state(result, names):
    return dict((name, rows_from_json(r["stdout"])) for name, r in zip(names, result["results"]))


@pytest.mark.parametrize("module", sorted(SCENARIOS))
def test_module_lifecycle(module, sandbox, collections_path):
    scenario = SCENARIOS[module]
    which = scenario["db"]
    ctl = {"nb": sandbox.nbctl, "sb": sandbox.sbctl, "ovs": sandbox.vsctl}[which]
    for args in scenario["setup"]:
        ctl(*args)
    remote = {"nb": sandbox.nb_db, "sb": sandbox.sb_db, "ovs": sandbox.ovs_db}[which]
    schema = {"nb": "OVN_Northbound", "sb": "OVN_Southbound", "ovs": "Open_vSwitch"}[which]
    dump_cmds = sandbox.dump_commands(which)
    if which != "ovs":
        # let ovn-northd settle first, so that only the module can change the dump
        dump_cmds = [["ovn-nbctl", "--db=" + sandbox.nb_db, "--wait=sb", "sync"]] + dump_cmds
    results, proc = run_playbook(collections_path,
                                 lifecycle_tasks(module, scenario, remote, dump_cmds, schema))
    assert proc.returncode == 0, proc.stdout[-4000:]
    r = results
    check_create, check_merge, check_replace, check_override, check_delete = scenario["checks"]

    # check mode: predicted change and diff, database byte-for-byte unchanged
    assert r["create_check"]["changed"] is True
    assert r["create_check"]["diff"]["after"] and r["create_check"]["operations"]
    assert stdouts(r["dump0"]) == stdouts(r["dump1"])

    assert r["create"]["changed"] is True
    assert r["create"]["operations"] == r["create_check"]["operations"]
    check_create(table_state(r["after_create"], scenario["tables"]))
    assert r["create_again"]["changed"] is False and r["create_again"]["operations"] == []
    assert r["create_again_check"]["changed"] is False

    assert r["merge"]["changed"] is True
    check_merge(table_state(r["after_merge"], scenario["tables"]))

    assert r["replace"]["changed"] is True
    check_replace(table_state(r["after_replace"], scenario["tables"]))
    assert r["replace_again"]["changed"] is False

    # rendered: RFC 7047 operations, and nothing written
    assert r["rendered"]["changed"] is False
    assert r["rendered"]["rendered"], "the create config differs from the replaced state"
    for op in r["rendered"]["rendered"]:
        assert op["op"] in ("insert", "update", "mutate", "delete") and op["table"]
    assert r["replace_check"]["changed"] is True and r["replace_check"]["diff"]["after"]
    assert stdouts(r["dump2"]) == stdouts(r["dump3"])

    gathered = r["gathered"]["gathered"]
    assert gathered, "gathered returns the current objects"

    assert r["override"]["changed"] is True
    check_override(table_state(r["after_override"], scenario["tables"]))
    assert r["override_again"]["changed"] is False

    assert r["delete"]["changed"] is True
    check_delete(table_state(r["after_delete"], scenario["tables"]))
    assert r["delete_again"]["changed"] is False
