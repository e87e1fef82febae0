"""cluster_topology, node_gateway and virtual_network through ansible-playbook,
against real daemons: create, re-run, check mode, update, every refusal,
forced delete, overridden, query, the OVS backend and auto discovery."""

from tests.harness.playbook import run_playbook
from tests.harness.sandbox import rows_from_json, stable_dump

NETS = [{"name": "net1", "subnet": "172.16.1.0/24", "exclude_ips": ["172.16.1.200..172.16.1.250"]},
        {"name": "net2", "subnet": "172.16.2.0/24", "provider": "macvlan.default"}]


def tasks(box):
    nb, ovs = box.nb_db, box.ovs_db

    def dump(name):
        return {"name": name, "ansible.builtin.command": {"argv": ["ovsdb-client", "dump", nb]},
                "changed_when": False}

    def table(name, table_name):
        return {"name": name, "ansible.builtin.command": {
            "argv": ["ovsdb-client", "-f", "json", "dump", nb, "OVN_Northbound", table_name]},
            "changed_when": False}

    def vnet(name, config, state="merged", check=False, fail=False, **extra):
        args = {"config": config, "state": state, "db": nb, "ovs_db": ovs, "ovs_datapath_type": "netdev"}
        args.update(extra)
        task = {"name": name, "ovn4nfv.k8s.virtual_network": args}
        if check:
            task["check_mode"] = True
        if fail:
            task["ignore_errors"] = True
        return task

    gateways = [{"node": "w1", "external_ip": "192.168.50.12/24", "external_gateway": "192.168.50.1"},
                {"node": "w2", "external_ip": "192.168.50.13/24", "external_gateway": "192.168.50.1"}]
    return [
        dump("dump0"),
        {"name": "topo_check", "check_mode": True,
         "ovn4nfv.k8s.cluster_topology": {"config": {"join_subnet": "100.64.1.0/24"}, "db": nb}},
        dump("dump1"),
        {"name": "topo", "ovn4nfv.k8s.cluster_topology": {"config": {"join_subnet": "100.64.1.0/24"}, "db": nb}},
        {"name": "topo_again", "ovn4nfv.k8s.cluster_topology": {"config": {"join_subnet": "100.64.1.0/24"},
                                                                "db": nb}},
        {"name": "gw", "ovn4nfv.k8s.node_gateway": {"config": gateways, "db": nb}},
        {"name": "gw_again", "ovn4nfv.k8s.node_gateway": {"config": gateways, "db": nb}},
        dump("dump2"),
        vnet("net_check", NETS, check=True),
        dump("dump3"),
        vnet("net", NETS),
        vnet("net_again", NETS),
        vnet("net_again_check", NETS, check=True),
        table("nat_after_create", "NAT"),
        vnet("net_update", [{"name": "net1", "mtu": 1400, "dns": ["172.16.1.53"], "gateway": "172.16.1.254",
                             "routes": [{"dst": "10.20.0.0/16"}]}]),
        vnet("net_update_again", [{"name": "net1", "mtu": 1400, "dns": ["172.16.1.53"],
                                   "gateway": "172.16.1.254", "routes": [{"dst": "10.20.0.0/16"}]}]),
        table("switches_after_update", "Logical_Switch"),
        {"name": "pod_port", "ovn4nfv.k8s.ovn_logical_switch_port": {"db": nb, "config": [
            {"name": "pod1", "switch": "net1", "addresses": ["0a:00:00:00:00:32 172.16.1.50"]}]}},
        dump("dump4"),
        vnet("refuse_shrink", [{"name": "net1", "subnet": "172.16.1.0/27", "exclude_ips": [], "routes": [],
                                "gateway": "172.16.1.1"}], fail=True),
        vnet("refuse_gateway", [{"name": "net1", "gateway": "172.16.1.50"}], fail=True),
        vnet("refuse_delete", [{"name": "net1"}], state="deleted", fail=True),
        {"name": "refuse_topology_delete", "ignore_errors": True,
         "ovn4nfv.k8s.cluster_topology": {"state": "deleted", "db": nb}},
        dump("dump5"),
        vnet("gathered", [], state="gathered"),
        vnet("rendered", [{"name": "net9", "subnet": "172.16.9.0/24"}], state="rendered"),
        dump("dump6"),
        vnet("force_delete", [{"name": "net1"}], state="deleted", force=True),
        vnet("delete_again", [{"name": "net1"}], state="deleted"),
        table("nat_after_delete", "NAT"),
        {"name": "foreign_switch", "ansible.builtin.command": {
            "argv": ["ovn-nbctl", "--db=" + nb, "ls-add", "foreign"]}},
        vnet("override", [{"name": "net3", "subnet": "172.16.3.0/24"}], state="overridden"),
        vnet("override_again", [{"name": "net3", "subnet": "172.16.3.0/24"}], state="overridden"),
        table("switches_after_override", "Logical_Switch"),
        {"name": "gw_delete", "ovn4nfv.k8s.node_gateway": {"config": [{"node": "w2"}], "state": "deleted",
                                                           "db": nb}},
        table("nat_after_gw_delete", "NAT"),
        vnet("ovs_net", [{"name": "ovsnet", "subnet": "10.50.0.0/24", "backend": "ovs", "vlan": 100}]),
        vnet("ovs_net_again", [{"name": "ovsnet", "subnet": "10.50.0.0/24", "backend": "ovs", "vlan": 100}]),
        {"name": "ovs_bridge", "ansible.builtin.command": {
            "argv": ["ovs-vsctl", "--db=" + ovs, "get", "bridge", "br-ovsnet", "external_ids"]},
            "changed_when": False},
        vnet("auto_falls_back_to_ovs", [{"name": "ovsnet2", "subnet": "10.51.0.0/24"}],
             db="unix:/nonexistent/nb.sock", timeout=2),
    ]


def vnet_task(nb, name, config, check=False, fail=False, **extra):
    """A virtual_network task against ``nb``, in check mode or let fail when asked."""
    task = {"name": name, "ovn4nfv.k8s.virtual_network": dict({"config": config, "db": nb}, **extra)}
    if check:
        task["check_mode"] = True
    if fail:
        task["ignore_errors"] = True
    return task


def table_task(nb, name, table_name):
    """A task that dumps one NB table as JSON (rows_from_json reads it)."""
    return {"name": name, "changed_when": False, "ansible.builtin.command": {
        "argv": ["ovsdb-client", "-f", "json", "dump", nb, "OVN_Northbound", table_name]}}


def nat_pairs(result):
    return sorted((n["external_ip"], n["logical_ip"]) for n in rows_from_json(result["stdout"]))


def test_networks_topology_and_gateways(sandbox, collections_path):
    r, proc = run_playbook(collections_path, tasks(sandbox))
    assert proc.returncode == 0, proc.stdout[-4000:]

    # topology and gateways: check mode writes nothing, re-runs change nothing
    assert r["topo_check"]["changed"] and r["topo_check"]["diff"]["after"]
    assert r["dump0"]["stdout"] == r["dump1"]["stdout"]
    assert r["topo"]["changed"] and not r["topo_again"]["changed"]
    assert r["gw"]["changed"] and not r["gw_again"]["changed"]
    assert [g["join_ip"] for g in r["gw"]["after"]] == ["100.64.1.2", "100.64.1.3"]

    # networks: check mode, create, idempotence
    assert r["net_check"]["changed"] and set(r["net_check"]["diff"]["after"]) == {"net1", "net2"}
    assert stable_dump(r["dump2"]["stdout"]) == stable_dump(r["dump3"]["stdout"])
    assert r["net"]["changed"] and r["net"]["backends"]["networks"] == {"net1": "ovn", "net2": "ovn"}
    assert r["net"]["backends"]["auto"].startswith("ovn:")
    assert not r["net_again"]["changed"] and not r["net_again_check"]["changed"]
    # SNAT of every network on every gateway, without a gateway task
    assert nat_pairs(r["nat_after_create"]) == [
        ("192.168.50.12", "172.16.1.0/24"), ("192.168.50.12", "172.16.2.0/24"),
        ("192.168.50.13", "172.16.1.0/24"), ("192.168.50.13", "172.16.2.0/24")]

    # update in place
    assert r["net_update"]["changed"] and not r["net_update_again"]["changed"]
    net1 = [s for s in rows_from_json(r["switches_after_update"]["stdout"]) if s["name"] == "net1"][0]
    assert net1["other_config"]["exclude_ips"] == "172.16.1.200..172.16.1.250 172.16.1.254"
    assert net1["external_ids"]["ovn4nfv-mtu"] == "1400"
    assert net1["external_ids"]["ovn4nfv-gateway"] == "172.16.1.254/24"

    # refusals name the port in the way, and write nothing
    assert r["refuse_shrink"]["failed"] and "pod1 (172.16.1.50)" in r["refuse_shrink"]["msg"]
    assert r["refuse_gateway"]["failed"] and "held by port pod1" in r["refuse_gateway"]["msg"]
    assert r["refuse_delete"]["failed"] and "still has ports: pod1" in r["refuse_delete"]["msg"]
    assert r["refuse_topology_delete"]["failed"]
    assert "network net1" in r["refuse_topology_delete"]["msg"]
    assert stable_dump(r["dump4"]["stdout"]) == stable_dump(r["dump5"]["stdout"])

    # query: usage and ports
    gathered = dict((n["name"], n) for n in r["gathered"]["gathered"])
    assert gathered["net1"]["ports"] == [{"name": "pod1", "addresses": ["0a:00:00:00:00:32 172.16.1.50"]}]
    assert gathered["net1"]["addresses_in_use"] == 1
    # 254 hosts - 51 excluded - the gateway - pod1
    assert gathered["net1"]["addresses_free"] == 254 - 51 - 1 - 1
    assert gathered["net2"]["provider"] == "macvlan.default"

    # rendered writes nothing
    assert r["rendered"]["rendered"] and not r["rendered"]["changed"]
    assert stable_dump(r["dump5"]["stdout"]) == stable_dump(r["dump6"]["stdout"])

    # forced delete takes the network's SNAT with it
    assert r["force_delete"]["changed"] and not r["delete_again"]["changed"]
    assert ("192.168.50.12", "172.16.1.0/24") not in nat_pairs(r["nat_after_delete"])

    # overridden: owned networks not listed go, a foreign switch stays
    assert r["override"]["changed"] and not r["override_again"]["changed"]
    names = set(s["name"] for s in rows_from_json(r["switches_after_override"]["stdout"]))
    assert {"net3", "foreign"} <= names and "net2" not in names

    # deleting a gateway removes its SNAT, and the others' stay
    assert nat_pairs(r["nat_after_gw_delete"]) == [("192.168.50.12", "172.16.3.0/24")]

    # the OVS backend, and auto falling back to it when the NB does not answer
    assert r["ovs_net"]["changed"] and not r["ovs_net_again"]["changed"]
    assert 'ovn4nfv-vlan="100"' in r["ovs_bridge"]["stdout"]
    auto = r["auto_falls_back_to_ovs"]
    assert auto["backends"]["networks"] == {"ovsnet2": "ovs"}
    assert auto["backends"]["auto"].startswith("ovs:") and "unix:/nonexistent/nb.sock" in auto["backends"]["auto"]


DHCP_NET = {"name": "vm-net", "subnet": "172.16.40.0/24", "subnet6": "fd00:40::/64", "mtu": 1400,
            "dns": ["172.16.40.53"],
            "dhcp": {"lease_time": 600, "domain": "vnf.example", "ipv6_address_mode": "dhcpv6_stateful"}}


def test_a_network_s_dhcp_through_the_module(sandbox, collections_path):
    """virtual_network's ``dhcp``: check mode writes nothing, the diff says
    what it turns on, a second run changes nothing, a port made meanwhile
    is pointed at the rows by the next run, and off removes it all."""
    nb = sandbox.nb_db

    def vnet(name, config, check=False):
        return vnet_task(nb, name, config, check)

    def table(name, table_name):
        return table_task(nb, name, table_name)

    r, proc = run_playbook(collections_path, [
        {"name": "topo", "ovn4nfv.k8s.cluster_topology": {"config": {}, "db": nb}},
        vnet("plain", [dict(DHCP_NET, dhcp={"enabled": False})]),
        {"name": "port", "ovn4nfv.k8s.ovn_logical_switch_port": {"db": nb, "config": [
            {"name": "vm1", "switch": "vm-net", "addresses": ["0a:00:00:00:28:0a 172.16.40.10"]}]}},
        vnet("on_check", [DHCP_NET], check=True),
        table("dhcp_after_check", "DHCP_Options"),
        vnet("on", [DHCP_NET]),
        vnet("on_again", [DHCP_NET]),
        table("dhcp_after_on", "DHCP_Options"),
        table("ports_after_on", "Logical_Switch_Port"),
        vnet("off", [{"name": "vm-net", "dhcp": {"enabled": False}}]),
        vnet("off_again", [{"name": "vm-net", "dhcp": {"enabled": False}}]),
        table("dhcp_after_off", "DHCP_Options"),
    ])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert r["on_check"]["changed"] and rows_from_json(r["dhcp_after_check"]["stdout"]) == []
    assert r["on_check"]["diff"]["after"]["vm-net"]["dhcp"] == {
        "lease_time": 600, "domain": "vnf.example", "ipv6_address_mode": "dhcpv6_stateful"}
    assert "dhcp" not in r["on_check"]["diff"]["before"]["vm-net"]
    assert "update dhcp_attachment port vm1: network='vm-net'" in r["on"]["operations"]
    assert r["on"]["changed"] and not r["on_again"]["changed"]
    rows = dict((row["cidr"], row) for row in rows_from_json(r["dhcp_after_on"]["stdout"]))
    assert sorted(rows) == ["172.16.40.0/24", "fd00:40::/64"]
    vm1 = next(p for p in rows_from_json(r["ports_after_on"]["stdout"]) if p["name"] == "vm1")
    assert vm1["dhcpv4_options"] == rows["172.16.40.0/24"]["_uuid"]
    assert vm1["dhcpv6_options"] == rows["fd00:40::/64"]["_uuid"]
    assert r["off"]["changed"] and not r["off_again"]["changed"]
    assert rows_from_json(r["dhcp_after_off"]["stdout"]) == []


PROVIDERS = [{"name": "prov-v100", "subnet": "192.168.100.0/24", "gateway": "192.168.100.1",
              "exclude_ips": ["192.168.100.2..192.168.100.99"], "physnet": "physnet-ext", "vlan": 100, "mtu": 1500},
             {"name": "prov-v200", "subnet": "192.168.200.0/24", "physnet": "physnet-ext", "vlan": 200}]


def test_provider_networks_through_the_module(sandbox, collections_path):
    """``physnet`` makes a provider network: a localnet port on the
    physical network with the VLAN as its access tag, no router port, no
    route, no SNAT. Check mode writes nothing, a second run changes
    nothing, every refusal writes nothing and names what is in the way; an
    overlay without ports becomes a provider network and back, its router
    wiring going and coming with it."""
    nb = sandbox.nb_db

    def vnet(name, config, check=False, fail=False, **extra):
        return vnet_task(nb, name, config, check, fail, **extra)

    def table(name, table_name):
        return table_task(nb, name, table_name)

    def dump(name):
        return {"name": name, "changed_when": False, "ansible.builtin.command": {"argv": ["ovsdb-client", "dump", nb]}}

    overlay = {"name": "ovl", "subnet": "172.16.7.0/24"}
    r, proc = run_playbook(collections_path, [
        {"name": "topo", "ovn4nfv.k8s.cluster_topology": {"config": {}, "db": nb}},
        {"name": "gw", "ovn4nfv.k8s.node_gateway": {"db": nb, "config": [
            {"node": "w1", "external_ip": "192.168.50.12/24", "external_gateway": "192.168.50.1"}]}},
        vnet("overlay", [overlay]),
        dump("dump0"),
        vnet("check", PROVIDERS, check=True),
        dump("dump1"),
        vnet("create", PROVIDERS),
        vnet("again", PROVIDERS),
        table("ports", "Logical_Switch_Port"),
        table("router_ports", "Logical_Router_Port"),
        table("nat", "NAT"),
        table("routes", "Logical_Router_Static_Route"),
        table("switches", "Logical_Switch"),
        dump("dump2"),
        vnet("refuse_vlan_alone", [{"name": "bad1", "subnet": "192.168.31.0/24", "vlan": 31}], fail=True),
        vnet("refuse_ovs", [{"name": "bad2", "subnet": "192.168.32.0/24", "physnet": "physnet-ext",
                             "backend": "ovs"}], fail=True, ovs_db=sandbox.ovs_db),
        vnet("refuse_segment_twice", [{"name": "bad3", "subnet": "192.168.33.0/24", "physnet": "physnet-ext",
                                       "vlan": 100}], fail=True),
        vnet("refuse_gateway_segment", [{"name": "bad4", "subnet": "192.168.34.0/24", "physnet": "physnet-ext"}],
             fail=True),
        vnet("refuse_ra", [{"name": "bad5", "subnet": "192.168.35.0/24", "subnet6": "fd00:35::/64",
                            "physnet": "physnet2", "dhcp": {"enabled": True}}], fail=True),
        vnet("refuse_name", [{"name": "bad6", "subnet": "192.168.36.0/24", "physnet": "phys:net"}], fail=True),
        {"name": "pod_port", "ovn4nfv.k8s.ovn_logical_switch_port": {"db": nb, "config": [
            {"name": "pod1", "switch": "prov-v200", "addresses": ["0a:00:00:00:c8:64 192.168.200.100"]}]}},
        dump("dump3"),
        vnet("refuse_conversion", [{"name": "prov-v200", "physnet": ""}], fail=True),
        vnet("refuse_retag", [{"name": "prov-v200", "vlan": 201}], fail=True),
        dump("dump4"),
        vnet("gathered", [], state="gathered"),
        vnet("convert", [dict(overlay, physnet="physnet2", vlan=7)]),
        vnet("convert_again", [dict(overlay, physnet="physnet2", vlan=7)]),
        table("nat_converted", "NAT"),
        table("router_ports_converted", "Logical_Router_Port"),
        vnet("back", [{"name": "ovl", "physnet": ""}]),
        vnet("back_again", [{"name": "ovl", "physnet": ""}]),
        table("nat_back", "NAT"),
        table("ports_back", "Logical_Switch_Port"),
        vnet("delete", [{"name": "prov-v100"}], state="deleted"),
        table("ports_deleted", "Logical_Switch_Port"),
        # its VLAN dropped (replaced): the localnet port's tag goes too
        vnet("untag", [{"name": "prov-v200", "subnet": "192.168.200.0/24", "physnet": "physnet-ext"}],
             state="replaced", fail=True),
        vnet("untag_other", [{"name": "prov-x", "subnet": "192.168.201.0/24", "physnet": "physnet9", "vlan": 9}]),
        vnet("untag_x", [{"name": "prov-x", "subnet": "192.168.201.0/24", "physnet": "physnet9"}], state="replaced"),
        vnet("untag_x_again", [{"name": "prov-x", "subnet": "192.168.201.0/24", "physnet": "physnet9"}],
             state="replaced"),
        table("ports_untagged", "Logical_Switch_Port"),
        # a gateway on a provider network's segment, or over its subnet, is refused
        {"name": "gw_on_segment", "ignore_errors": True, "ovn4nfv.k8s.node_gateway": {"db": nb, "config": [
            {"node": "w2", "external_ip": "192.168.60.12/24", "external_gateway": "192.168.60.1",
             "physnet": "physnet9"}]}},
        {"name": "gw_over_subnet", "ignore_errors": True, "ovn4nfv.k8s.node_gateway": {"db": nb, "config": [
            {"node": "w3", "external_ip": "192.168.201.12/24", "external_gateway": "192.168.201.1",
             "physnet": "physnet7"}]}},
        {"name": "topology_delete", "ignore_errors": True,
         "ovn4nfv.k8s.cluster_topology": {"state": "deleted", "db": nb}},
        # an IPv6 overlay serving DHCP becomes a provider network (its DHCP off): its router port goes
        vnet("v6", [{"name": "v6net", "subnet": "172.16.8.0/24", "subnet6": "fd00:8::/64", "dhcp": {"enabled": True}}]),
        vnet("v6_to_provider", [{"name": "v6net", "physnet": "physnet8", "dhcp": {"enabled": False}}]),
        vnet("v6_again", [{"name": "v6net", "physnet": "physnet8", "dhcp": {"enabled": False}}]),
        table("router_ports_v6", "Logical_Router_Port"),
        # a gateway's VLAN dropped (replaced): its localnet port's tag goes too
        {"name": "gw_tagged", "ovn4nfv.k8s.node_gateway": {"db": nb, "config": [
            {"node": "w5", "external_ip": "192.168.55.12/24", "external_gateway": "192.168.55.1",
             "physnet": "physnet5", "vlan": 300}]}},
        {"name": "gw_untagged", "ovn4nfv.k8s.node_gateway": {"db": nb, "state": "replaced", "config": [
            {"node": "w5", "external_ip": "192.168.55.12/24", "external_gateway": "192.168.55.1",
             "physnet": "physnet5"}]}},
        table("ports_gw_untagged", "Logical_Switch_Port"),
    ])
    assert proc.returncode == 0, proc.stdout[-4000:]

    # check mode: a diff a reviewer reads, nothing written
    assert r["check"]["changed"] and r["check"]["diff"]["after"]["prov-v100"]["physnet"] == "physnet-ext"
    assert r["check"]["diff"]["after"]["prov-v100"]["vlan"] == 100
    assert stable_dump(r["dump0"]["stdout"]) == stable_dump(r["dump1"]["stdout"])
    assert r["create"]["changed"] and not r["again"]["changed"]

    # a localnet port per network, tagged; no router port, no route, no SNAT
    ports = dict((p["name"], p) for p in rows_from_json(r["ports"]["stdout"]))
    assert ports["lnet-prov-v100"]["type"] == "localnet" and ports["lnet-prov-v100"]["tag"] == 100
    assert ports["lnet-prov-v100"]["options"] == {"network_name": "physnet-ext"}
    assert ports["lnet-prov-v100"]["addresses"] == "unknown"
    assert ports["lnet-prov-v200"]["tag"] == 200
    assert "stor-prov-v100" not in ports and "stor-ovl" in ports
    assert {p["name"] for p in rows_from_json(r["router_ports"]["stdout"])} >= {"rtos-ovl"}
    assert not {"rtos-prov-v100", "rtos-prov-v200"} & {p["name"] for p in rows_from_json(r["router_ports"]["stdout"])}
    assert nat_pairs(r["nat"]) == [("192.168.50.12", "172.16.7.0/24")]
    assert not [x for x in rows_from_json(r["routes"]["stdout"]) if x["ip_prefix"].startswith("192.168.")]
    switch = next(s for s in rows_from_json(r["switches"]["stdout"]) if s["name"] == "prov-v100")
    assert switch["other_config"]["exclude_ips"] == "192.168.100.2..192.168.100.99 192.168.100.1"
    assert switch["external_ids"]["ovn4nfv-physnet"] == "physnet-ext"
    assert switch["external_ids"]["ovn4nfv-vlan"] == "100"

    # refusals: each names what is wrong, none writes
    assert "give its physnet too" in r["refuse_vlan_alone"]["msg"]
    assert "applies to the ovn backend only" in r["refuse_ovs"]["msg"]
    assert "networks bad3, prov-v100 are all on physnet physnet-ext VLAN 100" in r["refuse_segment_twice"]["msg"]
    assert "network bad4: physnet physnet-ext untagged is node w1's gateway's" in r["refuse_gateway_segment"]["msg"]
    assert "fabric's router" in r["refuse_ra"]["msg"]
    assert "not a valid physical network name" in r["refuse_name"]["msg"]
    assert "cannot become an overlay while 1 port(s) are on it (pod1)" in r["refuse_conversion"]["msg"]
    assert "cannot move from physnet physnet-ext VLAN 200 to physnet physnet-ext VLAN 201 while 1 port(s)" in \
        r["refuse_retag"]["msg"]
    assert stable_dump(r["dump3"]["stdout"]) == stable_dump(r["dump4"]["stdout"])

    gathered = dict((n["name"], n) for n in r["gathered"]["gathered"])
    assert gathered["prov-v200"]["physnet"] == "physnet-ext" and gathered["prov-v200"]["vlan"] == 200
    # the localnet port is the network's, not a pod's
    assert gathered["prov-v200"]["ports"] == [{"name": "pod1", "addresses": ["0a:00:00:00:c8:64 192.168.200.100"]}]

    # an overlay without ports becomes a provider network: its router port and SNAT go; and back
    assert r["convert"]["changed"] and not r["convert_again"]["changed"]
    assert nat_pairs(r["nat_converted"]) == []
    assert "rtos-ovl" not in {p["name"] for p in rows_from_json(r["router_ports_converted"]["stdout"])}
    assert r["back"]["changed"] and not r["back_again"]["changed"]
    assert nat_pairs(r["nat_back"]) == [("192.168.50.12", "172.16.7.0/24")]
    names = {p["name"] for p in rows_from_json(r["ports_back"]["stdout"])}
    assert "stor-ovl" in names and "lnet-ovl" not in names

    # deleted with its localnet port
    assert r["delete"]["changed"]
    assert "lnet-prov-v100" not in {p["name"] for p in rows_from_json(r["ports_deleted"]["stdout"])}

    # untagged: physnet-ext untagged is the gateway's (refused); physnet9's port loses its tag
    assert "physnet physnet-ext untagged is node w1's gateway's" in r["untag"]["msg"]
    assert r["untag_x"]["changed"] and not r["untag_x_again"]["changed"]
    lnet = next(p for p in rows_from_json(r["ports_untagged"]["stdout"]) if p["name"] == "lnet-prov-x")
    assert lnet["tag"] == [] and lnet["options"] == {"network_name": "physnet9"}, lnet

    assert "physnet physnet9 untagged, is provider network prov-x's" in r["gw_on_segment"]["msg"]
    assert "overlaps" in r["gw_over_subnet"]["msg"] and "prov-x" in r["gw_over_subnet"]["msg"]
    assert r["topology_delete"]["failed"] and "network prov-x" in r["topology_delete"]["msg"]

    assert r["gw_untagged"]["changed"]
    ln = next(p for p in rows_from_json(r["ports_gw_untagged"]["stdout"]) if p["name"] == "ln-w5")
    assert ln["tag"] == [], ln

    assert r["v6_to_provider"]["changed"] and not r["v6_again"]["changed"]
    assert "rtos-v6net" not in {p["name"] for p in rows_from_json(r["router_ports_v6"]["stdout"])}


def test_relaxed_port_security_and_virtual_ips_through_the_module(sandbox, collections_path):
    """``relaxed_port_security`` and ``virtual_ips`` (issue 37): recorded on
    the switch, each virtual IP an OVN virtual port that no pod is handed
    the address of. Check mode writes nothing and shows the diff; a second
    run changes nothing; a virtual IP a port holds, outside the subnet or
    with a bad namespace is refused with nothing written; a virtual IP
    dropped loses its port, and the parents the watcher keeps survive a
    run that leaves the virtual IP be."""
    nb = sandbox.nb_db
    vnf = {"name": "vnf", "subnet": "172.16.50.0/24", "relaxed_port_security": [{"namespace": "vnf", "level": "mac"}],
           "virtual_ips": [{"address": "172.16.50.250", "namespaces": ["vnf", "edge"]}]}

    def vnet(name, config, check=False, fail=False, **extra):
        return vnet_task(nb, name, config, check, fail, **extra)

    def dump(name):
        return {"name": name, "changed_when": False, "ansible.builtin.command": {"argv": ["ovsdb-client", "dump", nb]}}

    r, proc = run_playbook(collections_path, [
        {"name": "topo", "ovn4nfv.k8s.cluster_topology": {"config": {}, "db": nb}},
        dump("dump0"),
        vnet("check", [vnf], check=True),
        dump("dump1"),
        vnet("create", [vnf]),
        vnet("again", [vnf]),
        table_task(nb, "ports", "Logical_Switch_Port"),
        table_task(nb, "switches", "Logical_Switch"),
        {"name": "pod_port", "ovn4nfv.k8s.ovn_logical_switch_port": {"db": nb, "config": [
            {"name": "pod1", "switch": "vnf", "addresses": ["0a:00:00:00:32:64 172.16.50.100"]}]}},
        # the watcher's part, by hand: the parents of the virtual port
        {"name": "parents", "ansible.builtin.command": {"argv": [
            "ovn-nbctl", "--db=" + nb, "set", "logical_switch_port", "vip-vnf-172.16.50.250",
            "options:virtual-parents=pod1"]}},
        dump("dump2"),
        vnet("refuse_held", [dict(vnf, virtual_ips=[{"address": "172.16.50.100", "namespaces": ["vnf"]}])],
             fail=True),
        vnet("refuse_outside", [dict(vnf, virtual_ips=[{"address": "172.16.51.1", "namespaces": ["vnf"]}])],
             fail=True),
        vnet("refuse_namespace", [dict(vnf, relaxed_port_security=[{"namespace": "Bad_NS", "level": "off"}])],
             fail=True),
        vnet("refuse_ovs", [{"name": "ovsvnf", "subnet": "172.16.52.0/24", "backend": "ovs",
                             "relaxed_port_security": [{"namespace": "vnf", "level": "off"}]}],
             fail=True, ovs_db=sandbox.ovs_db),
        dump("dump3"),
        vnet("mtu_only", [{"name": "vnf", "mtu": 1400}]),
        table_task(nb, "ports_kept", "Logical_Switch_Port"),
        vnet("drop", [{"name": "vnf", "virtual_ips": [], "relaxed_port_security": []}]),
        vnet("drop_again", [{"name": "vnf", "virtual_ips": [], "relaxed_port_security": []}]),
        table_task(nb, "ports_dropped", "Logical_Switch_Port"),
        table_task(nb, "switches_dropped", "Logical_Switch"),
    ])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert r["check"]["changed"] and r["dump0"]["stdout"] == r["dump1"]["stdout"], "check mode wrote"
    after = r["check"]["diff"]["after"]["vnf"]
    assert after["relaxed_port_security"] == [{"namespace": "vnf", "level": "mac"}]
    assert after["virtual_ips"] == [{"address": "172.16.50.250", "namespaces": ["edge", "vnf"]}]
    assert r["create"]["changed"] and not r["again"]["changed"]
    vport = next(p for p in rows_from_json(r["ports"]["stdout"]) if p["name"] == "vip-vnf-172.16.50.250")
    assert vport["type"] == "virtual" and vport["options"] == {"virtual-ip": "172.16.50.250"}
    switch = next(s for s in rows_from_json(r["switches"]["stdout"]) if s["name"] == "vnf")
    assert "172.16.50.250" in switch["other_config"]["exclude_ips"], "a pod is never handed the VIP"
    assert switch["external_ids"]["ovn4nfv-relaxed-security"] == '{"vnf": "mac"}'
    for name in ("refuse_held", "refuse_outside", "refuse_namespace", "refuse_ovs"):
        assert r[name].get("failed"), (name, r[name])
    assert "held by port pod1" in r["refuse_held"]["msg"]
    assert r["dump2"]["stdout"] == r["dump3"]["stdout"], "a refusal wrote"
    kept = next(p for p in rows_from_json(r["ports_kept"]["stdout"]) if p["name"] == "vip-vnf-172.16.50.250")
    assert kept["options"]["virtual-parents"] == "pod1", "the watcher's parents are kept"
    assert r["drop"]["changed"] and not r["drop_again"]["changed"]
    assert "vip-vnf-172.16.50.250" not in [p["name"] for p in rows_from_json(r["ports_dropped"]["stdout"])]
    ids = next(s for s in rows_from_json(r["switches_dropped"]["stdout"]) if s["name"] == "vnf")["external_ids"]
    assert "ovn4nfv-relaxed-security" not in ids and "ovn4nfv-virtual-ips" not in ids
