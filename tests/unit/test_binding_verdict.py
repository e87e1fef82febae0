"""What the node agent concludes from the southbound's Port_Binding rows
about a pod's interface list (cluster.pod_addresses.binding_verdict)."""

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster.pod_addresses import Pod, binding_verdict
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import K_UID

POD = Pod("ns", "web", "uid-1")
ENTRY = {"interface": "net0", "mac_address": "0a:00:00:00:00:05", "ip_address": "10.1.1.5/24"}


def binding(uid="uid-1", security="0a:00:00:00:00:05 10.1.1.5 fe80::800:ff:fe00:5", mac="dynamic"):
    return {"logical_port": "ns_web_net0", "mac": mac, "port_security": security,
            "external_ids": {K_UID: uid}}


def test_confirmed_by_port_security():
    assert binding_verdict(POD, [ENTRY], [binding()]) == []
    assert binding_verdict(POD, [dict(ENTRY, mac_address="0A:00:00:00:00:05")], [binding()]) == []


def test_waits_while_the_binding_is_absent_of_an_older_pod_or_unsecured():
    assert binding_verdict(POD, [ENTRY], []) is None
    assert binding_verdict(POD, [ENTRY], [binding(uid="uid-0", security="0a:00:00:00:00:09 10.1.1.9")]) is None
    assert binding_verdict(POD, [ENTRY], [binding(security=[])]) is None


def test_a_different_ip_or_mac_is_refused_with_both_named():
    for forged in (dict(ENTRY, ip_address="10.1.1.6/24"), dict(ENTRY, mac_address="0a:00:00:00:00:06")):
        wrong = binding_verdict(POD, [forged], [binding()])
        assert len(wrong) == 1 and "ns_web_net0" in wrong[0] and forged["ip_address"] in wrong[0]


def test_a_prefix_of_the_ip_is_not_the_ip():
    assert binding_verdict(POD, [dict(ENTRY, ip_address="10.1.1.50/24")], [binding()])


def test_mac_only_security_falls_back_on_static_addresses():
    row = binding(security="0a:00:00:00:00:05", mac=["0a:00:00:00:00:05 10.1.1.5"])
    assert binding_verdict(POD, [ENTRY], [row]) == []
    assert binding_verdict(POD, [dict(ENTRY, ip_address="10.1.1.7/24")], [row])


def test_ip_alone_for_another_plugins_address():
    entry = dict(ENTRY, mac_address=None)
    assert binding_verdict(POD, [entry], [binding()], macs=False) == []
    assert binding_verdict(POD, [entry], [binding()]) != []


def test_one_wrong_entry_refuses_even_while_another_is_awaited():
    other = dict(ENTRY, interface="net1")
    assert binding_verdict(POD, [dict(ENTRY, ip_address="10.1.1.6/24"), other], [binding()])


def test_a_chain_functions_relaxed_port_is_confirmed_by_what_the_chain_held():
    """A network function's chain interface has MAC-only port security; the
    watcher keeps the port security it replaced beside it, and that, not
    the pod's word, confirms the address."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import K_CHAIN_HELD
    row = binding(security="0a:00:00:00:00:05")
    row["external_ids"][K_CHAIN_HELD] = "0a:00:00:00:00:05 10.1.1.5 fe80::800:ff:fe00:5"
    assert binding_verdict(POD, [ENTRY], [row]) == []
    assert binding_verdict(POD, [dict(ENTRY, ip_address="10.1.1.7/24")], [row])
    assert binding_verdict(POD, [ENTRY], [binding(security="0a:00:00:00:00:05")]), "without it: refused"


def test_a_trunk_vlan_must_be_what_ovn_nests():
    """A trunk's VLAN (``parent``, ``vlan``) is a nested port in OVN
    (``parent_port``, ``tag``): the node makes no device for it and a veth
    for any other, so a list that calls one the other is refused."""
    child = dict(ENTRY, interface="net0.10", parent="net0", vlan=10)
    row = dict(binding(), logical_port="ns_web_net0.10")
    nested = dict(row, parent_port="ns_web_net0", tag=10)
    assert binding_verdict(POD, [child], [nested]) == []
    for forged, held in ((dict(child, vlan=11), nested), (dict(child, parent="net1"), nested), (child, row),
                         (dict(child, parent=None, vlan=None), nested)):
        wrong = binding_verdict(POD, [forged], [held])
        assert len(wrong) == 1 and "ns_web_net0.10" in wrong[0] and "VLAN" in wrong[0], (forged, wrong)
    # as a plain select gives empty optional columns
    assert binding_verdict(POD, [ENTRY], [dict(binding(), parent_port=[], tag=[])]) == []


def test_a_port_granted_no_security_is_confirmed_by_its_addresses_alone():
    """K_SECURITY off (issue 37): an empty port_security is the grant, not
    a port still waiting for it; its addresses say what it holds."""
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import K_SECURITY
    row = dict(binding(security=[], mac=["0a:00:00:00:00:05 10.1.1.5"]), external_ids={K_UID: "uid-1", K_SECURITY: "off"})
    assert binding_verdict(POD, [ENTRY], [row]) == []
    assert binding_verdict(POD, [dict(ENTRY, ip_address="10.1.1.7/24")], [row]), "a forged address is still refused"
    waiting = dict(row, external_ids={K_UID: "uid-1", K_SECURITY: "mac"})
    assert binding_verdict(POD, [ENTRY], [waiting]) is None, "only off stands for no port security"
