"""The catalogue of bad inputs: each one fails with a message that names the
field and the value, and leaves both databases exactly as they were.

All cases run in one ansible-playbook run; after every case the playbook
dumps the OVS and NB databases, and each dump must equal the one taken
before the first case.
"""

import shlex

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection as ovsdb
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from tests.harness.playbook import run_playbook
from tests.harness.sandbox import Sandbox, stable_dump
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.topology import TABLES
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.wiring import plan_gateways, plan_topology
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb.execution import execute

NB, OVS = "nb", "ovs"

# a Debian 12 node as node_upgrade gathers it
UPGRADE_NODE = {"debian": "bookworm", "installed": {"ovs": "3.1.0-2", "ovn": "23.03.1-1"},
                "running": {"ovs": "ovs-vswitchd (Open vSwitch) 3.1.0", "ovn_controller": "ovn-controller 23.03.1",
                            "northd": "ovn-northd 23.03.1"}, "pinned": False, "record": None}

# (id, module, arguments, db, substrings the message must contain)
CASES = [
    ("ls_malformed_cidr", "ovn_logical_switch",
     {"config": [{"name": "s", "subnet": "10.0.0.0/33"}]}, NB, ["config[0].subnet", "10.0.0.0/33"]),
    ("ls_host_bits_set", "ovn_logical_switch",
     {"config": [{"name": "s", "subnet": "10.0.0.5/24"}]}, NB, ["config[0].subnet", "10.0.0.5/24"]),
    ("ls_subnet_not_an_address", "ovn_logical_switch",
     {"config": [{"name": "s", "subnet": "banana"}]}, NB, ["config[0].subnet", "banana"]),
    ("ls_subnet_ipv6", "ovn_logical_switch",
     {"config": [{"name": "s", "subnet": "fd00::/64"}]}, NB, ["config[0].subnet", "fd00::/64"]),
    ("ls_exclude_inverted_range", "ovn_logical_switch",
     {"config": [{"name": "s", "subnet": "10.1.0.0/24", "exclude_ips": ["10.1.0.9..10.1.0.2"]}]}, NB,
     ["config[0].exclude_ips[0]", "10.1.0.9..10.1.0.2", "inverted"]),
    ("ls_exclude_outside_subnet", "ovn_logical_switch",
     {"config": [{"name": "s", "subnet": "10.1.0.0/24", "exclude_ips": ["10.2.0.5"]}]}, NB,
     ["config[0].exclude_ips[0]", "10.2.0.5", "10.1.0.0/24"]),
    ("ls_exclude_malformed", "ovn_logical_switch",
     {"config": [{"name": "s", "subnet": "10.1.0.0/24", "exclude_ips": ["10.1.0.x"]}]}, NB,
     ["config[0].exclude_ips[0]", "10.1.0.x"]),
    ("ls_bad_name", "ovn_logical_switch",
     {"config": [{"name": "bad name"}]}, NB, ["config[0].name", "bad name"]),
    ("ls_subnet_in_other_config", "ovn_logical_switch",
     {"config": [{"name": "s", "other_config": {"subnet": "10.0.0.0/24"}}]}, NB,
     ["config[0].other_config", "subnet"]),
    ("ls_owner_key_reserved", "ovn_logical_switch",
     {"config": [{"name": "s", "external_ids": {"ovn4nfv-owner": "me"}}]}, NB,
     ["config[0].external_ids", "ovn4nfv-owner"]),
    ("lsp_ip_outside_subnet", "ovn_logical_switch_port",
     {"config": [{"name": "q1", "switch": "sw1", "addresses": ["0a:00:00:00:00:01 10.9.9.9"]}]}, NB,
     ["config[0].addresses[0]", "10.9.9.9", "10.0.0.0/24"]),
    ("lsp_bad_mac", "ovn_logical_switch_port",
     {"config": [{"name": "q1", "switch": "sw1", "addresses": ["zz:00:00:00:00:01 10.0.0.5"]}]}, NB,
     ["config[0].addresses[0]", "zz:00:00:00:00:01"]),
    ("lsp_multicast_mac", "ovn_logical_switch_port",
     {"config": [{"name": "q1", "switch": "sw1", "addresses": ["01:00:5e:00:00:01 10.0.0.5"]}]}, NB,
     ["config[0].addresses[0]", "01:00:5e:00:00:01", "multicast"]),
    ("lsp_bad_ip", "ovn_logical_switch_port",
     {"config": [{"name": "q1", "switch": "sw1", "addresses": ["0a:00:00:00:00:01 10.0.0.300"]}]}, NB,
     ["config[0].addresses[0]", "10.0.0.300"]),
    ("lsp_unknown_switch", "ovn_logical_switch_port",
     {"config": [{"name": "q1", "switch": "nosuch"}]}, NB, ["config[0].switch", "nosuch"]),
    ("lsp_name_clash_other_switch", "ovn_logical_switch_port",
     {"config": [{"name": "p-on-sw1", "switch": "sw2"}]}, NB, ["config[0].switch", "p-on-sw1", "'sw1'", "'sw2'"]),
    ("lsp_vlan_tag_out_of_range", "ovn_logical_switch_port",
     {"config": [{"name": "ln", "switch": "sw1", "type": "localnet", "tag": 4096,
                  "options": {"network_name": "phys"}}]}, NB, ["config[0].tag", "4096"]),
    ("lsp_nested_without_tag", "ovn_logical_switch_port",
     {"config": [{"name": "child", "switch": "sw1", "parent_name": "q1"}]}, NB,
     ["config[0].tag", "parent_name"]),
    ("lsp_localnet_without_network", "ovn_logical_switch_port",
     {"config": [{"name": "ln", "switch": "sw1", "type": "localnet"}]}, NB,
     ["config[0].options", "network_name"]),
    ("lsp_bad_port_security", "ovn_logical_switch_port",
     {"config": [{"name": "q1", "switch": "sw1", "port_security": ["not-a-mac"]}]}, NB,
     ["config[0].port_security[0]", "not-a-mac"]),
    ("lsp_bad_type", "ovn_logical_switch_port",
     {"config": [{"name": "q1", "switch": "sw1", "type": "vif"}]}, NB, ["type", "vif"]),
    ("lrp_unknown_router", "ovn_logical_router_port",
     {"config": [{"name": "rp", "router": "nosuch", "mac": "0a:00:00:00:00:01",
                  "networks": ["10.0.0.1/24"]}]}, NB, ["config[0].router", "nosuch"]),
    ("lrp_network_without_prefix", "ovn_logical_router_port",
     {"config": [{"name": "rp", "router": "r1", "mac": "0a:00:00:00:00:01", "networks": ["10.0.0.1"]}]}, NB,
     ["config[0].networks[0]", "10.0.0.1"]),
    ("lrp_multicast_mac", "ovn_logical_router_port",
     {"config": [{"name": "rp", "router": "r1", "mac": "01:00:00:00:00:01", "networks": ["10.0.0.1/24"]}]},
     NB, ["config[0].mac", "01:00:00:00:00:01"]),
    ("lrp_new_port_without_mac", "ovn_logical_router_port",
     {"config": [{"name": "rp", "router": "r1", "networks": ["10.0.0.1/24"]}]}, NB, ["config[0]", "mac"]),
    ("lrp_gateway_priority_out_of_range", "ovn_logical_router_port",
     {"config": [{"name": "rp", "router": "r1", "mac": "0a:00:00:00:00:01", "networks": ["10.0.0.1/24"],
                  "gateway_chassis": [{"chassis_name": "ch1", "priority": 40000}]}]}, NB,
     ["config[0].gateway_chassis[0].priority", "40000"]),
    ("route_bad_prefix", "ovn_static_route",
     {"config": [{"router": "r1", "ip_prefix": "300.0.0.0/8", "nexthop": "10.0.0.1"}]}, NB,
     ["config[0].ip_prefix", "300.0.0.0/8"]),
    ("route_bad_nexthop", "ovn_static_route",
     {"config": [{"router": "r1", "ip_prefix": "0.0.0.0/0", "nexthop": "gw"}]}, NB,
     ["config[0].nexthop", "gw"]),
    ("route_unknown_router", "ovn_static_route",
     {"config": [{"router": "nosuch", "ip_prefix": "0.0.0.0/0", "nexthop": "10.0.0.1"}]}, NB,
     ["config[0].router", "nosuch"]),
    ("route_unknown_output_port", "ovn_static_route",
     {"config": [{"router": "r1", "ip_prefix": "0.0.0.0/0", "nexthop": "10.0.0.1",
                  "output_port": "ghost"}]}, NB, ["config[0].output_port", "ghost"]),
    ("nat_bad_external_ip", "ovn_nat",
     {"config": [{"router": "r1", "type": "snat", "external_ip": "1.2.3", "logical_ip": "10.0.0.0/24"}]},
     NB, ["config[0].external_ip", "1.2.3"]),
    ("nat_unknown_logical_port", "ovn_nat",
     {"config": [{"router": "r1", "type": "dnat_and_snat", "external_ip": "192.168.50.5",
                  "logical_ip": "10.0.0.5", "logical_port": "ghost", "external_mac": "0a:00:00:00:00:05"}]},
     NB, ["config[0].logical_port", "ghost"]),
    ("nat_mac_without_port", "ovn_nat",
     {"config": [{"router": "r1", "type": "dnat_and_snat", "external_ip": "192.168.50.5",
                  "logical_ip": "10.0.0.5", "external_mac": "0a:00:00:00:00:05"}]}, NB,
     ["config[0].external_mac", "0a:00:00:00:00:05", "logical_port"]),
    ("port_patch_without_peer", "ovs_port",
     {"config": [{"name": "pp", "bridge": "br0", "type": "patch"}]}, OVS,
     ["config[0].options", "peer", "patch"]),
    ("port_tag_out_of_range", "ovs_port",
     {"config": [{"name": "pp", "bridge": "br0", "tag": 5000}]}, OVS, ["config[0].tag", "5000"]),
    ("port_trunk_out_of_range", "ovs_port",
     {"config": [{"name": "pp", "bridge": "br0", "trunks": [10, 4096]}]}, OVS,
     ["config[0].trunks[1]", "4096"]),
    ("port_name_clash_other_bridge", "ovs_port",
     {"config": [{"name": "p-on-br0", "bridge": "br1"}]}, OVS, ["config[0].bridge", "p-on-br0", "'br0'"]),
    ("lrp_name_clash_other_router", "ovn_logical_router_port",
     {"config": [{"name": "rp-on-r1", "router": "r2", "mac": "0a:00:00:00:00:01",
                  "networks": ["10.0.0.1/24"]}]}, NB, ["config[0].router", "rp-on-r1", "'r1'"]),
    ("lsp_switch_missing", "ovn_logical_switch_port",
     {"config": [{"name": "q1"}]}, NB, ["config[0].switch", "required"]),
    ("port_unknown_bridge", "ovs_port",
     {"config": [{"name": "pp", "bridge": "nosuch"}]}, OVS, ["config[0].bridge", "nosuch"]),
    ("port_tunnel_without_remote", "ovs_port",
     {"config": [{"name": "vx", "bridge": "br0", "type": "vxlan"}]}, OVS,
     ["config[0].options", "remote_ip", "vxlan"]),
    ("port_tunnel_bad_remote", "ovs_port",
     {"config": [{"name": "gn", "bridge": "br0", "type": "geneve", "options": {"remote_ip": "x.y"}}]}, OVS,
     ["config[0].options.remote_ip", "x.y"]),
    ("port_name_too_long", "ovs_port",
     {"config": [{"name": "averyveryverylongname", "bridge": "br0"}]}, OVS,
     ["config[0].name", "averyveryverylongname"]),
    ("bridge_bad_datapath", "ovs_bridge",
     {"config": [{"name": "brz", "datapath_type": "fast"}]}, OVS, ["datapath_type", "fast"]),
    ("bridge_multicast_hwaddr", "ovs_bridge",
     {"config": [{"name": "brz", "other_config": {"hwaddr": "01:02:03:04:05:06"}}]}, OVS,
     ["config[0].other_config.hwaddr", "01:02:03:04:05:06"]),
    ("chassis_bad_encap_ip", "ovn_chassis",
     {"config": {"encap_ip": "999.1.1.1"}}, OVS, ["config.encap_ip", "999.1.1.1"]),
    ("chassis_bad_remote", "ovn_chassis",
     {"config": {"ovn_remote": "http://central:6642"}}, OVS, ["config.ovn_remote", "http://central:6642"]),
    ("chassis_bad_physnet", "ovn_chassis",
     {"config": {"bridge_mappings": {"phys:1": "br-ex"}}}, OVS, ["config.bridge_mappings", "phys:1"]),
    ("chassis_wait_before_clear_negative", "ovn_chassis",
     {"config": {"ofctrl_wait_before_clear": -5}}, OVS, ["config.ofctrl_wait_before_clear", "-5"]),
    # the upgrade's plan refuses before anything changes (it reads and writes no database)
    ("upgrade_outside_rolling_span", "upgrade_plan",
     {"to": "trixie", "nodes": [dict(UPGRADE_NODE, name="m", central=True, chassis=True)]}, None,
     ["OVN 23.03 -> 25.03 is outside OVN's rolling upgrade span", "upgrade_order=fail-safe"]),
    ("upgrade_downgrade", "upgrade_plan",
     {"to": "bookworm", "order": "fail-safe",
      "nodes": [dict(UPGRADE_NODE, name="m", central=True, chassis=True, debian="trixie")]}, None,
     ["m runs Debian 13 (trixie)", "a downgrade"]),
    ("upgrade_node_without_name", "upgrade_plan",
     {"to": "trixie", "order": "fail-safe", "nodes": [dict(UPGRADE_NODE, central=True)]}, None,
     ["nodes[0]", "needs its name"]),
    ("upgrade_record_without_mark", "node_upgrade",
     {"state": "recorded", "record": "/nonexistent/upgrade.json"}, OVS, ["mark", "state recorded needs a mark"]),
    ("upgrade_wait_zero", "node_upgrade", {"wait": 0}, OVS, ["wait", "0"]),
    ("duplicate_objects", "ovn_logical_switch",
     {"config": [{"name": "dup"}, {"name": "dup"}]}, NB, ["config[1]", "dup", "config[0]"]),
    ("half_valid_list_writes_nothing", "ovn_logical_switch",
     {"config": [{"name": "good"}, {"name": "bad", "subnet": "10.0.0.0/40"}]}, NB,
     ["config[1].subnet", "10.0.0.0/40"]),
    ("every_problem_reported", "ovn_logical_switch",
     {"config": [{"name": "a", "subnet": "x"}, {"name": "b", "subnet": "10.0.0.1/24"}]}, NB,
     ["config[0].subnet", "'x'", "config[1].subnet", "10.0.0.1/24"]),
    ("unreachable_unix_socket", "ovn_logical_switch",
     {"config": [{"name": "s"}], "db": "unix:/nonexistent/ovnnb_db.sock", "timeout": 3}, None,
     ["unix:/nonexistent/ovnnb_db.sock"]),
    ("unreachable_tcp_port", "ovn_logical_switch",
     {"config": [{"name": "s"}], "db": "tcp:127.0.0.1:1", "timeout": 3}, None, ["tcp:127.0.0.1:1"]),
    ("malformed_remote", "ovn_logical_switch",
     {"config": [{"name": "s"}], "db": "central.example:6641"}, None, ["db", "central.example:6641"]),
    ("ssl_remote_without_key", "ovn_logical_switch",
     {"config": [{"name": "s"}], "db": "ssl:127.0.0.1:6641"}, None, ["private_key", "ssl"]),
    # virtual networks, topology and gateways (a network netA 172.16.1.0/24 with
    # port podA at 172.16.1.50, gateway w1 at 192.168.50.12/24, join 100.64.1.0/24)
    ("vn_subnets_overlap_each_other", "virtual_network",
     {"config": [{"name": "n1", "subnet": "172.30.0.0/16"}, {"name": "n2", "subnet": "172.30.5.0/24"}]}, NB,
     ["network n1 (172.30.0.0/16) overlaps network n2 (172.30.5.0/24)"]),
    ("vn_subnet_overlaps_existing", "virtual_network",
     {"config": [{"name": "n3", "subnet": "172.16.1.128/25"}]}, NB, ["netA (172.16.1.0/24)", "n3"]),
    ("vn_subnet_overlaps_join", "virtual_network",
     {"config": [{"name": "n4", "subnet": "100.64.1.0/25"}]}, NB, ["n4", "join subnet", "100.64.1.0/24"]),
    ("vn_subnet_overlaps_external", "virtual_network",
     {"config": [{"name": "n5", "subnet": "192.168.50.0/25"}]}, NB, ["n5", "external network of node w1"]),
    ("vn_gateway_outside_subnet", "virtual_network",
     {"config": [{"name": "n6", "subnet": "172.31.0.0/24", "gateway": "172.31.1.1"}]}, NB,
     ["config[0].gateway", "172.31.1.1", "172.31.0.0/24"]),
    ("vn_gateway_inside_excludes", "virtual_network",
     {"config": [{"name": "n7", "subnet": "172.31.2.0/24", "exclude_ips": ["172.31.2.1..172.31.2.10"]}]}, NB,
     ["config[0].gateway", "172.31.2.1", "exclude_ips"]),
    ("vn_exclude_outside_subnet", "virtual_network",
     {"config": [{"name": "n8", "subnet": "172.31.3.0/24", "exclude_ips": ["172.31.4.5"]}]}, NB,
     ["config[0].exclude_ips[0]", "172.31.4.5", "172.31.3.0/24"]),
    ("vn_delete_with_ports", "virtual_network",
     {"config": [{"name": "netA"}], "state": "deleted"}, NB, ["netA", "podA", "force"]),
    ("vn_shrink_under_used_addresses", "virtual_network",
     {"config": [{"name": "netA", "subnet": "172.16.1.0/27"}]}, NB, ["netA", "172.16.1.0/27", "podA (172.16.1.50)"]),
    ("vn_gateway_onto_a_port", "virtual_network",
     {"config": [{"name": "netA", "gateway": "172.16.1.50"}]}, NB, ["netA", "172.16.1.50", "podA"]),
    ("vn_unknown_backend", "virtual_network",
     {"config": [{"name": "n9", "subnet": "172.31.9.0/24", "backend": "vpp"}]}, NB, ["backend", "vpp"]),
    ("vn_mtu_over_underlay", "virtual_network",
     {"config": [{"name": "n10", "subnet": "172.31.10.0/24", "mtu": 1500}], "underlay_mtu": 1500}, NB,
     ["config[0].mtu", "1500", "1442"]),
    ("vn_mtu_out_of_range", "virtual_network",
     {"config": [{"name": "n11", "subnet": "172.31.11.0/24", "mtu": 100}]}, NB, ["config[0].mtu", "100"]),
    ("vn_bad_provider", "virtual_network",
     {"config": [{"name": "n12", "subnet": "172.31.12.0/24", "provider": "Mac_vlan"}]}, NB,
     ["config[0].provider", "Mac_vlan"]),
    ("vn_provider_taken", "virtual_network",
     {"config": [{"name": "n13", "subnet": "172.31.13.0/24", "provider": "mv.default"},
                 {"name": "n14", "subnet": "172.31.14.0/24", "provider": "mv.default"}]}, NB,
     ["n14", "mv.default", "n13"]),
    ("vn_vlan_on_ovn_backend", "virtual_network",
     {"config": [{"name": "n15", "subnet": "172.31.15.0/24", "backend": "ovn", "vlan": 100}]}, NB,
     ["config[0].vlan", "100"]),
    ("vn_route_gateway_off_subnet", "virtual_network",
     {"config": [{"name": "n16", "subnet": "172.31.16.0/24", "routes": [{"dst": "10.0.0.0/8", "gw": "172.99.0.1"}]}]},
     NB, ["config[0].routes[0].gw", "172.99.0.1"]),
    ("vn_new_network_without_subnet", "virtual_network",
     {"config": [{"name": "n17"}]}, NB, ["config[0].subnet", "new network"]),
    ("vn_declared_twice", "virtual_network",
     {"config": [{"name": "n18", "subnet": "172.31.18.0/24"}, {"name": "n18", "subnet": "172.31.19.0/24"}]}, NB,
     ["twice", "n18"]),
    ("vn_bad_name", "virtual_network",
     {"config": [{"name": "bad net", "subnet": "172.31.20.0/24"}]}, NB, ["config[0].name", "bad net"]),
    ("vn_subnet6_not_a_64", "virtual_network",
     {"config": [{"name": "n21", "subnet": "172.31.21.0/24", "subnet6": "fd00:21::/48"}]}, NB,
     ["config[0].subnet6", "fd00:21::/48", "/64"]),
    ("vn_gateway6_outside_subnet6", "virtual_network",
     {"config": [{"name": "n22", "subnet": "172.31.22.0/24", "subnet6": "fd00:22::/64",
                  "gateway6": "fd00:99::1"}]}, NB, ["config[0].gateway6", "fd00:99::1", "fd00:22::/64"]),
    ("vn_ipv6_subnets_overlap", "virtual_network",
     {"config": [{"name": "n23", "subnet": "172.31.23.0/24", "subnet6": "fd00:23::/64"},
                 {"name": "n24", "subnet": "172.31.24.0/24", "subnet6": "fd00:23::/64"}]}, NB,
     ["n23 (IPv6)", "n24 (IPv6)", "fd00:23::/64"]),
    ("gw_next_hop_off_the_external_network", "node_gateway",
     {"config": [{"node": "w9", "external_ip": "192.168.60.5/24", "external_gateway": "192.168.61.1"}]}, NB,
     ["config[0].external_gateway", "192.168.61.1"]),
    ("gw_external_overlaps_a_network", "node_gateway",
     {"config": [{"node": "w9", "external_ip": "172.16.1.200/24", "external_gateway": "172.16.1.1"}]}, NB,
     ["external network of node", "overlaps", "netA"]),
    ("gw_join_ip_outside_join_subnet", "node_gateway",
     {"config": [{"node": "w9", "external_ip": "192.168.50.19/24", "external_gateway": "192.168.50.1",
                  "join_ip": "10.0.0.5"}]}, NB, ["w9", "join_ip", "10.0.0.5"]),
    ("gw_external_ip_taken", "node_gateway",
     {"config": [{"node": "w9", "external_ip": "192.168.50.12/24", "external_gateway": "192.168.50.1"}]}, NB,
     ["192.168.50.12", "w1"]),
    ("gw_without_external_ip", "node_gateway",
     {"config": [{"node": "w9", "external_gateway": "192.168.50.1"}]}, NB, ["config[0].external_ip", "required"]),
    ("topology_renumbered_under_networks", "cluster_topology",
     {"config": {"join_subnet": "100.65.0.0/24"}}, NB, ["100.65.0.0/24", "network netA", "node gateway w1"]),
    ("topology_deleted_under_networks", "cluster_topology",
     {"state": "deleted"}, NB, ["network netA", "force"]),
    # overridden makes config the whole of what the product owns: without one
    # it would delete everything (netA, gateway w1 and the topology are owned)
    ("overridden_without_config", "ovn_logical_switch",
     {"state": "overridden"}, NB, ["state: overridden needs a config", "state: deleted"]),
    ("overridden_with_empty_config", "ovn_logical_switch",
     {"state": "overridden", "config": []}, NB, ["state: overridden needs a config"]),
    ("ovs_overridden_without_config", "ovs_bridge",
     {"state": "overridden", "config": []}, OVS, ["state: overridden needs a config"]),
    ("vn_overridden_without_config", "virtual_network",
     {"state": "overridden"}, NB, ["state: overridden needs a config"]),
    ("gw_overridden_with_empty_config", "node_gateway",
     {"state": "overridden", "config": []}, NB, ["state: overridden needs a config"]),
    ("lb_backend_without_port", "ovn_load_balancer",
     {"config": [{"name": "lb", "vips": {"10.96.0.1:80": ["10.0.0.5"]}}]}, NB,
     ["config[0].vips['10.96.0.1:80'][0]", "has a port exactly when"]),
    ("lb_port_out_of_range", "ovn_load_balancer",
     {"config": [{"name": "lb", "vips": {"10.96.0.1:70000": ["10.0.0.5:80"]}}]}, NB,
     ["10.96.0.1:70000", "1-65535"]),
    ("lb_mixed_families", "ovn_load_balancer",
     {"config": [{"name": "lb", "vips": {"10.96.0.1:80": ["[fd00::5]:80"]}}]}, NB,
     ["[fd00::5]:80", "IPv4"]),
    ("lb_unknown_switch", "ovn_load_balancer",
     {"config": [{"name": "lb", "vips": {"10.96.0.1:80": ["10.0.0.5:80"]}, "switches": ["sw1", "nope"]}]},
     NB, ["config[0].switches[1]", "'nope' does not exist"]),
    ("lb_check_on_unknown_vip", "ovn_load_balancer",
     {"config": [{"name": "lb", "vips": {"10.96.0.1:80": ["10.0.0.5:80"]},
                  "health_checks": [{"vip": "10.96.0.2:80"}]}]}, NB,
     ["config[0].health_checks[0].vip", "10.96.0.2:80"]),
    ("lb_affinity_too_long", "ovn_load_balancer",
     {"config": [{"name": "lb", "vips": {"10.96.0.1:80": ["10.0.0.5:80"]}, "affinity_timeout": 70000}]},
     NB, ["config[0].affinity_timeout", "70000"]),
    ("lb_new_without_vips", "ovn_load_balancer",
     {"config": [{"name": "lb", "switches": ["sw1"]}]}, NB, ["config[0]", "needs vips"]),
    ("zero_timeout", "ovn_logical_switch",
     {"config": [{"name": "s"}], "timeout": 0}, NB, ["timeout", "0"]),
]


def build_cluster(box):
    """A topology, one gateway, one network with one port on it."""
    with ovsdb.Database(box.nb_db, ovsdb.NB_SCHEMA, TABLES) as db:
        for compute in (
                lambda v: plan_topology(v, {}, "merged"),
                lambda v: plan_gateways(v, [("c", {"node": "w1", "external_ip": "192.168.50.12/24",
                                                           "external_gateway": "192.168.50.1"})], "merged"),
                lambda v: vn.plan_networks(v, [("c", vn.check_network(
                    {"name": "netA", "subnet": "172.16.1.0/24", "provider": "a.default"}, "c"))],
                    "merged", "ovn")):
            execute(db, compute, write=True)
    box.nbctl("lsp-add", "netA", "podA", "--", "lsp-set-addresses", "podA", "0a:00:00:00:00:32 172.16.1.50")


@pytest.fixture(scope="module")
def catalogue(collections_path):
    """Run every case once, in one playbook, on one set of daemons."""
    box = Sandbox()
    try:
        box.nbctl("ls-add", "sw1", "--", "set", "Logical_Switch", "sw1",
                  "other_config:subnet=10.0.0.0/24")
        box.nbctl("ls-add", "sw2")
        box.nbctl("lsp-add", "sw1", "p-on-sw1")
        box.nbctl("lr-add", "r1")
        box.nbctl("lr-add", "r2")
        box.nbctl("lrp-add", "r1", "rp-on-r1", "0a:00:00:00:00:aa", "10.5.0.1/24")
        box.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")
        box.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath_type=netdev")
        box.vsctl("add-port", "br0", "p-on-br0", "--", "set", "interface", "p-on-br0", "type=internal")
        build_cluster(box)
        box.nbctl("--wait=sb", "sync")
        dump = " && ".join(" ".join(shlex.quote(a) for a in cmd)
                           for cmd in box.dump_commands("nb") + box.dump_commands("ovs"))
        tasks = [{"name": "dump_before", "ansible.builtin.shell": dump, "changed_when": False}]
        for case_id, module, args, db, _expected in CASES:
            args = dict(args)
            if db is not None:
                args.setdefault("db", box.nb_db if db == NB else box.ovs_db)
            if module == "virtual_network":
                args.setdefault("ovs_db", box.ovs_db)
            tasks.append({"name": case_id, "ovn4nfv.k8s." + module: args, "ignore_errors": True})
            tasks.append({"name": "dump_" + case_id, "ansible.builtin.shell": dump,
                          "changed_when": False})
        results, proc = run_playbook(collections_path, tasks)
        yield results
    finally:
        box.stop()


@pytest.mark.parametrize("case_id,module,args,db,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input(catalogue, case_id, module, args, db, expected):
    result = catalogue[case_id]
    assert result.get("failed") is True, "the task should fail: %r" % result
    # Ansible puts a placeholder in "exception"; a real traceback would be a bug
    assert "Traceback" not in result.get("msg", "") + result.get("exception", "")
    for text in expected:
        assert text in result["msg"], "%r not in %r" % (text, result["msg"])
    assert stable_dump(catalogue["dump_" + case_id]["stdout"]) == \
        stable_dump(catalogue["dump_before"]["stdout"]), "the databases changed"


def test_catalogue_size():
    assert len(CASES) >= 25
    networks = [c for c in CASES if c[1] in ("virtual_network", "node_gateway", "cluster_topology")]
    assert len(networks) >= 15
