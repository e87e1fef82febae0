"""50 virtual networks with 20 ports each (1,000 ports) and the gateways of
3 nodes, declared in one cluster_network task.

Baseline, in the same run: the same topology built with single ovn-nbctl
calls, one per object (the commands that make up one object chained in
that object's call). Also times re-running the task when nothing changes.
Both results are checked to hold the same rows.

Last line: ``topology_s=<x> nbctl_s=<y> speedup=<y/x> noop_s=<z>``
"""

import time

from benchmarks.common import Ansible, Sandbox

NETWORKS, PORTS, NODES = 50, 20, 3
JOIN = "100.64.1"
ROUTER = "ovn4nfv-master"


def declaration():
    gateways = [{"node": "w%d" % n, "external_ip": "192.168.50.%d/24" % (10 + n),
                 "external_gateway": "192.168.50.1"} for n in range(1, NODES + 1)]
    networks = []
    for i in range(1, NETWORKS + 1):
        ports = [{"name": "n%d-p%d" % (i, p)} if p % 2 else
                 {"name": "n%d-p%d" % (i, p), "ip": "172.16.%d.%d" % (i, 10 + p)}
                 for p in range(PORTS)]
        networks.append({"name": "net%d" % i, "subnet": "172.16.%d.0/24" % i, "ports": ports})
    return {"topology": {"join_subnet": JOIN + ".0/24"}, "gateways": gateways, "networks": networks}


def nbctl_calls(decl):
    """One ovn-nbctl argument list per object, as an operator scripting it would."""
    def router_link(switch, lsp, lrp):
        return ["lsp-add", switch, lsp, "--", "lsp-set-type", lsp, "router", "--",
                "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port=" + lrp]
    calls = [["lr-add", ROUTER],
             ["ls-add", "ovn4nfv-join", "--", "set", "Logical_Switch", "ovn4nfv-join",
              "other_config:subnet=%s.0/24" % JOIN, "other_config:exclude_ips=%s.1" % JOIN],
             ["lrp-add", ROUTER, "rtoj", "0a:00:00:00:01:01", JOIN + ".1/24"],
             router_link("ovn4nfv-join", "jtor", "rtoj")]
    for n, gw in enumerate(decl["gateways"], start=2):
        node, ext = gw["node"], gw["external_ip"]
        calls += [["lr-add", "gr-" + node, "--", "set", "Logical_Router", "gr-" + node,
                   "options:chassis=" + node],
                  ["lrp-add", "gr-" + node, "gtoj-" + node, "0a:00:00:00:02:%02x" % n, "%s.%d/24" % (JOIN, n)],
                  router_link("ovn4nfv-join", "jtog-" + node, "gtoj-" + node),
                  ["ls-add", "ext-" + node],
                  ["lsp-add", "ext-" + node, "ln-" + node, "--", "lsp-set-type", "ln-" + node, "localnet",
                   "--", "lsp-set-addresses", "ln-" + node, "unknown", "--", "lsp-set-options",
                   "ln-" + node, "network_name=physnet-ext"],
                  ["lrp-add", "gr-" + node, "gtoe-" + node, "0a:00:00:00:03:%02x" % n, ext],
                  router_link("ext-" + node, "etog-" + node, "gtoe-" + node),
                  ["lr-route-add", "gr-" + node, "0.0.0.0/0", gw["external_gateway"]],
                  ["--ecmp", "lr-route-add", ROUTER, "0.0.0.0/0", "%s.%d" % (JOIN, n)]]
    for i, net in enumerate(decl["networks"], start=1):
        name, subnet = net["name"], net["subnet"]
        calls += [["ls-add", name, "--", "set", "Logical_Switch", name, "other_config:subnet=" + subnet,
                   "other_config:exclude_ips=172.16.%d.1" % i],
                  ["lrp-add", ROUTER, "rtos-" + name, "0a:00:00:01:00:%02x" % i, "172.16.%d.1/24" % i],
                  router_link(name, "stor-" + name, "rtos-" + name)]
        for gw in decl["gateways"]:
            calls += [["lr-route-add", "gr-" + gw["node"], subnet, JOIN + ".1"],
                      ["lr-nat-add", "gr-" + gw["node"], "snat", gw["external_ip"].split("/")[0], subnet]]
        for p, port in enumerate(net["ports"]):
            address = "0a:00:00:%02x:%02x:01 %s" % (i, p, port["ip"]) if port.get("ip") else "dynamic"
            calls.append(["lsp-add", name, port["name"], "--", "lsp-set-addresses", port["name"], address])
    return calls


def counts(box):
    return dict((table, len(box.rows("nb", table))) for table in (
        "Logical_Switch", "Logical_Switch_Port", "Logical_Router", "Logical_Router_Port",
        "Logical_Router_Static_Route", "NAT"))


def main():
    decl = declaration()
    ansible = Ansible()
    try:
        empty = ansible.empty()
        with Sandbox(ovs=False) as box:
            args = dict(decl, db=box.nb_db)
            task = [{"name": "cluster network", "ovn4nfv.k8s.cluster_network": {
                "db": box.nb_db, "topology": "{{ topology }}", "gateways": "{{ gateways }}",
                "networks": "{{ networks }}"}}]
            bulk = ansible.task_time(task, args)
            noop = ansible.task_time(task, args)
            module_rows = counts(box)
        with Sandbox(ovs=False) as box:
            calls = nbctl_calls(decl)
            start = time.monotonic()
            for call in calls:
                box.nbctl(*call)
            loop = time.monotonic() - start
            nbctl_rows = counts(box)
    finally:
        ansible.close()
    assert module_rows == nbctl_rows, (module_rows, nbctl_rows)
    print("rows built by each: %s" % module_rows)
    print("empty playbook: %.2f s (subtracted from each task time)" % empty)
    print("cluster_network task, %d networks x %d ports + %d gateways, one transaction: %.2f s" % (
        NETWORKS, PORTS, NODES, bulk))
    print("baseline, %d single ovn-nbctl calls: %.2f s" % (len(calls), loop))
    print("cluster_network again, nothing to change: %.2f s" % noop)
    print("topology_s=%.2f nbctl_s=%.2f speedup=%.1f noop_s=%.2f" % (bulk, loop, loop / bulk, noop))


if __name__ == "__main__":
    main()
