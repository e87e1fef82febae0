"""The lab's machines and pods, read from an Ansible inventory.

``make lab INVENTORY=path`` stands up what that inventory describes: a
container for each host of ``masters``, ``workers``, ``ovn_central`` and
``external_hosts`` (named ``ovn4nfv-<host>``), on an underlay podman network
whose subnet is the one of the hosts' ``node_underlay_address`` and an
external one whose subnet is the one of the workers'
``node_gateway_external_ip``. A host's underlay NIC is its ``eth0`` and its
external NIC the next, as the inventories name them. The API stand-in gets a
container of its own on the underlay, at ``lab_api_address`` or else the
subnet's tenth address (the first free one from there).

Ansible itself reads the inventory (its InventoryManager, with the variable
precedence a playbook sees), so anything ``ansible-playbook -i`` takes
works. The addresses the lab needs must be literal there, not templates.

The lab's pods sit on the inventory's workers by position: the seed's pods
on the first two (``worker1``, ``worker2`` in the example), and a pod on
both networks on each further worker, so that every worker has links in
verify.yml's matrix. They, the Service, the chain and the tap go on the
first two networks of ``ovn4nfv_networks``, whatever their names and
subnets (``ovn-net1`` and ``ovn-net2`` in the example): :attr:`Layout.pod_networks`.

The seed's pods are in the namespace ``default``, the matrix's
(:data:`MATRIX_NAMESPACES`); the tenants' pods that a MultiNetworkPolicy
speaks of (:data:`POLICY_PODS`) are in labelled namespaces of their own
(:data:`TENANTS`), out of the matrix: what reaches them is the policy's
to say, and verify.yml's policy rows check it.
"""

import json
import os

import netaddr

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_INVENTORY = os.path.join(ROOT, "playbooks", "inventory", "example.yml")
UNDERLAY_NET, EXTERNAL_NET = "ovn4nfv-underlay", "ovn4nfv-external"
API_CONTAINER, API_HOSTNAME = "ovn4nfv-api", "api"
API_PORT = 6443
# What a pod asks for, by the index of each interface's network in
# Layout.pod_networks: BOTH is eth0 on the first and net1 on the second.
REQUESTS = {"BOTH": ((0, "eth0"), (1, "net1")), "NET1": ((0, "eth0"),), "NET2": ((1, "eth0"),)}
BOTH, NET1, NET2 = "BOTH", "NET1", "NET2"
WEB = {"app": "web"}
FWD = {"app": "fwd"}
# (worker index, pod, its networks, its labels): pods on both networks; the
# web Service's backends (on the first network only: a backend that also sat
# on the client's network would answer it straight, around the balancer); a
# client on the second only, for the Service's VIP; the chain's ends on the
# first worker and its forwarding function on the second, the worker that
# holds neither end; the tap's collector beside pod-w1a.
SEED_PODS = [(0, "pod-w1a", BOTH, {}), (0, "pod-w1b", BOTH, {}),
             (1, "pod-w2a", BOTH, {}), (1, "pod-w2b", BOTH, {}),
             (0, "web-w1", NET1, WEB), (1, "web-w2", NET1, WEB),
             (0, "cli-w1", NET2, {}),
             (0, "chain-src", NET1, {"app": "chain-src"}), (0, "chain-dst", NET2, {}),
             (1, "fwd-w2", BOTH, FWD), (0, "col-w1", NET1, {})]
DEFAULT_NAMESPACE = "default"
# The namespaces whose pods verify.yml's matrix covers (the lab's inventory
# says so: ovn4nfv_verify_namespaces); the tenants' are left to the policy rows.
MATRIX_NAMESPACES = [DEFAULT_NAMESPACE]
# The tenants' namespaces and their labels (a policy's namespaceSelector picks them).
SERVER_NS, OTHER_NS = "tenant-a", "tenant-b"
TENANTS = {SERVER_NS: {"team": "a"}, OTHER_NS: {"team": "b"}}
SERVER, CLIENT = {"app": "srv"}, {"app": "cli"}
# (worker index, pod, its networks, its labels, its namespace): the policy's
# server and the client its labels admit on different workers, so that the
# policy is proven across the overlay, and a pod of the other tenant beside
# the server; all on the first network only.
POLICY_PODS = [(1, "pol-srv", NET1, SERVER, SERVER_NS), (0, "pol-cli", NET1, CLIENT, SERVER_NS),
               (1, "pol-b", NET1, {}, OTHER_NS)]
# (worker index, VM, the index of its network in Layout.pod_networks, its
# peers): KubeVirt's shape (lab/virt.py), a VM on the second worker whose
# interface on the first network its guest configures by DHCP (the
# inventory's first network serves it), checked by pinging a pod on the
# first worker and the external hosts.
VMS = [(1, "vm1", 0, ["pod-w1a"])]
# Provider networks (issue 35): the inventory's networks with a physnet the
# workers' gateways map (the external NIC), in a namespace of their own so
# that verify.yml's matrix (the overlays' links, the gateways' SNAT) leaves
# them to lab/providers.py. (worker index, pod, the indexes of its
# networks in Layout.provider_networks, and whether it also has an
# interface on the first overlay network): one on each worker on the
# first, one on the second, and one on both and an overlay.
PROVIDER_NAMESPACE = "provider"
# the trunk pod: untagged, the second provider network; tagged 10 in the pod, the first (its wire VLAN is
# 100: OVN translates). Its native network is a provider network, not the overlay: a VLAN may not outgrow its
# trunk's MTU, and the overlay's is the underlay's less the tunnel's where the underlay is 1500
TRUNK_POD, TRUNK_VIDS = "prov-trunk", (10, None)
PROVIDER_PODS = [(0, "prov-w1", (0,), False), (1, "prov-w2", (0,), False), (1, "prov-v2", (1,), False),
                 (0, "prov-multi", (0, 1), True)]


class LayoutError(Exception):
    """The inventory does not describe a lab this module can stand up."""


def _literal(host, name, value):
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        raise LayoutError("%s: %s is a template (%s); the lab needs it literal" % (host, name, value))
    return value


class Layout:
    """The lab an inventory describes. ``nodes`` maps each container to
    ``(hostname, [(network, ip)])``, the API's first; ``networks`` is
    ``[(name, subnet)]``."""

    def __init__(self, inventory=None):
        self.inventory = os.path.abspath(inventory or DEFAULT_INVENTORY)
        if not os.path.exists(self.inventory):
            raise LayoutError("no inventory at %s" % self.inventory)
        groups, hostvars = _read(self.inventory)
        self.masters, self.workers = groups.get("masters", []), groups.get("workers", [])
        self.central, self.externals = groups.get("ovn_central", []), groups.get("external_hosts", [])
        if not self.central:
            raise LayoutError("%s: the group ovn_central has no host" % self.inventory)
        if len(self.workers) < 2:
            raise LayoutError("%s: the lab needs at least two workers (the chain's function sits on the "
                              "second, apart from its ends), not %d" % (self.inventory, len(self.workers)))
        kube = _unique(self.masters + self.workers + self.central)
        networks = [_literal(kube[0], "a network's name", network.get("name"))
                    for network in hostvars[kube[0]].get("ovn4nfv_networks") or []]
        if len(networks) < 2 or not all(networks[:2]):
            raise LayoutError("%s: the lab's pods need two networks in ovn4nfv_networks, which declares %d"
                              % (self.inventory, len(networks)))
        self.pod_networks = tuple(networks[:2])
        self.pod_subnets = tuple(_subnet(self.inventory, network)
                                 for network in hostvars[kube[0]]["ovn4nfv_networks"][:2])
        # the provider networks the fabric (the external hosts) terminates:
        # on the physical network of the workers' gateways
        physnet = hostvars[self.workers[0]].get("node_gateway_physnet") or "physnet-ext"
        self.provider_networks = [
            {"name": n["name"], "subnet": _subnet(self.inventory, n), "vlan": n["vlan"], "gateway": n.get("gateway")
             or str(netaddr.IPNetwork(_subnet(self.inventory, n))[1])}
            for n in hostvars[kube[0]]["ovn4nfv_networks"] if n.get("physnet") == physnet and n.get("vlan")]
        # the pod networks' VRRP virtual IPs (lab/vip.py): [{"network", "address", "namespaces"}]
        self.virtual_ips = [dict(v, network=n["name"]) for n in hostvars[kube[0]]["ovn4nfv_networks"][:2]
                            for v in n.get("virtual_ips") or []]
        # the QoS cap of a pod network (lab/qos.py): {"network", "rate", "burst"?}, or None
        self.qos_cap = next((dict(n["qos_max"], network=n["name"]) for n in hostvars[kube[0]]["ovn4nfv_networks"][:2]
                             if (n.get("qos_max") or {}).get("rate")), None)
        underlay, external, self.nodes = {}, {}, {}
        for host in kube + [h for h in self.externals if h not in kube]:
            if host == API_HOSTNAME:
                raise LayoutError("%s: the host name %r is the API stand-in's" % (self.inventory, host))
            nics = []
            address = _literal(host, "node_underlay_address", hostvars[host].get("node_underlay_address"))
            if host in kube:
                if not address:
                    raise LayoutError("%s: %s has no node_underlay_address" % (self.inventory, host))
                underlay[host] = _interface(host, "node_underlay_address", address)
                nics.append((UNDERLAY_NET, str(underlay[host].ip)))
            gateway = _literal(host, "node_gateway_external_ip", hostvars[host].get("node_gateway_external_ip"))
            if gateway:
                external[host] = _interface(host, "node_gateway_external_ip", gateway)
                nics.append((EXTERNAL_NET, str(external[host].ip)))
            elif host in self.externals:
                address = _literal(host, "external_address", hostvars[host].get("external_address"))
                if not address:
                    raise LayoutError("%s: the external host %s has no external_address" % (self.inventory, host))
                nics.append((EXTERNAL_NET, str(_interface(host, "external_address", address).ip)))
            self.nodes["ovn4nfv-" + host] = (host, nics)
        self.underlay = _one_subnet(self.inventory, "node_underlay_address", underlay)
        self.external = _one_subnet(self.inventory, "node_gateway_external_ip", external)
        for name, (host, nics) in self.nodes.items():
            for network, ip in nics:
                subnet = self.underlay if network == UNDERLAY_NET else self.external
                if subnet is None or netaddr.IPAddress(ip) not in subnet:
                    raise LayoutError("%s: %s's address %s is outside the %s subnet %s" % (
                        self.inventory, host, ip, network, subnet))
        self.api_address = self._api_address(hostvars[kube[0]].get("lab_api_address"))
        self.nodes = dict([(API_CONTAINER, (API_HOSTNAME, [(UNDERLAY_NET, self.api_address)]))]
                          + list(self.nodes.items()))
        self.kube = ["ovn4nfv-" + host for host in kube]

    def _api_address(self, wanted):
        taken = set(ip for _host, nics in self.nodes.values() for _net, ip in nics)
        if wanted:
            if str(netaddr.IPAddress(wanted)) in taken or netaddr.IPAddress(wanted) not in self.underlay:
                raise LayoutError("%s: lab_api_address %s is taken or outside %s" % (
                    self.inventory, wanted, self.underlay))
            return str(netaddr.IPAddress(wanted))
        for index in range(10, self.underlay.size - 1):
            if str(self.underlay[index]) not in taken:
                return str(self.underlay[index])
        raise LayoutError("%s: no address left on %s for the API stand-in" % (self.inventory, self.underlay))

    @property
    def networks(self):
        return [(UNDERLAY_NET, str(self.underlay)), (EXTERNAL_NET, str(self.external))]

    @property
    def api_url(self):
        return "https://%s:%d" % (self.api_address, API_PORT)

    def container(self, host):
        """The container that plays ``host``."""
        if "ovn4nfv-" + host not in self.nodes:
            raise LayoutError("the lab has no node %r (it has %s)" % (host, ", ".join(self.hosts())))
        return "ovn4nfv-" + host

    def hosts(self):
        return [hostname for hostname, _nics in self.nodes.values() if hostname != API_HOSTNAME]

    def external_address(self, index):
        """The external network's ``index``-th address (the Service's
        external IP is the 120th, as 192.168.50.120 in the seed)."""
        return str(self.external[index])

    def underlay_address(self, index):
        return str(self.underlay[index])

    def request(self, kind):
        """The ``ovnNetwork`` annotation of a pod of ``kind`` (BOTH, NET1,
        NET2): its interfaces on the lab's networks, the first one the
        default gateway."""
        interfaces = []
        for index, interface in REQUESTS[kind]:
            wanted = {"name": self.pod_networks[index], "interface": interface}
            if not interfaces:
                wanted["defaultGateway"] = "true"
            interfaces.append(wanted)
        return json.dumps(interfaces)

    def pods(self):
        """``[(worker, pod, networks JSON, labels, namespace)]``: the seed's
        pods on the first two workers, ``pod-w<n>a`` on both networks on
        each further worker (all in ``default``), then the policy's pods in
        the tenants' namespaces."""
        pods = [(self.workers[index], pod, kind, labels, DEFAULT_NAMESPACE)
                for index, pod, kind, labels in SEED_PODS]
        pods += [(worker, "pod-w%da" % (index + 1), BOTH, {}, DEFAULT_NAMESPACE)
                 for index, worker in enumerate(self.workers) if index >= 2]
        pods += [(self.workers[index], pod, kind, labels, namespace)
                 for index, pod, kind, labels, namespace in POLICY_PODS]
        return [(worker, pod, self.request(kind), labels, namespace)
                for worker, pod, kind, labels, namespace in pods] + self.provider_pods()

    def provider_pods(self):
        """:meth:`pods`' form of the provider networks' pods (none when
        the inventory has fewer than two provider networks)."""
        if len(self.provider_networks) < 2:
            return []
        out = []
        for index, pod, networks, overlay in PROVIDER_PODS:
            wanted = [self.provider_networks[n]["name"] for n in networks] + ([self.pod_networks[0]] if overlay else [])
            request = [{"name": name, "interface": "eth%d" % i} for i, name in enumerate(wanted)]
            out.append((self.workers[index], pod, json.dumps(request), {}, PROVIDER_NAMESPACE))
        # a VNF's trunk: the second provider network untagged, the first as VLAN 10 in the pod
        trunk = [{"name": self.provider_networks[1]["name"], "interface": "eth0", "vlans": [
            {"name": self.provider_networks[0]["name"], "vlan": TRUNK_VIDS[0]}]}]
        out.append((self.workers[0], TRUNK_POD, json.dumps(trunk), {}, PROVIDER_NAMESPACE))
        return out

    def vms(self):
        """``[(worker, VM, network, peers)]``: the lab's VMs (:data:`VMS`)."""
        return [(self.workers[index], vm, self.pod_networks[network], list(peers))
                for index, vm, network, peers in VMS]

    def connection_inventory(self, api_dir):
        """How Ansible reaches these containers, and the lab's API: the
        inventory that goes beside the topology's (lab/inventory.lab.yml is
        this for the example, for the molecule scenario)."""
        return {"all": {
            # lab/connection_plugins/podman_nsenter.py: nsenter, pipelined
            "vars": {"ansible_connection": "podman_nsenter", "ansible_pipelining": True,
                     "ansible_python_interpreter": "/usr/bin/python3",
                     "lab_api": self.api_url, "lab_api_dir": api_dir,
                     "cni_kubeconfig_content": "{{ lookup('ansible.builtin.file', lab_api_dir ~ '/node-agent.kubeconfig') }}",
                     "watcher_kubeconfig_content": "{{ lookup('ansible.builtin.file', lab_api_dir ~ '/watcher.kubeconfig') }}",
                     # the lab's pods are made through containerd's CRI (lab/kubelet.py)
                     "ovn4nfv_container_runtime": True,
                     # verify.yml's matrix: the seed's pods, not the tenants'
                     "ovn4nfv_verify_namespaces": MATRIX_NAMESPACES},
            "hosts": dict((host, {"ansible_host": self.container(host)}) for host in self.hosts())}}


def _unique(items):
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _interface(host, name, value):
    try:
        return netaddr.IPNetwork(value)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        raise LayoutError("%s: %s is not an address: %r" % (host, name, value))


def _subnet(inventory, network):
    """A lab network's IPv4 subnet (the policy admits the second one's)."""
    value = _literal(network.get("name"), "subnet", network.get("subnet"))
    try:
        subnet = netaddr.IPNetwork(value)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        subnet = None
    if subnet is None or subnet.version != 4 or subnet.ip != subnet.network:
        raise LayoutError("%s: the lab's network %s needs an IPv4 subnet, not %r" % (
            inventory, network.get("name"), value))
    return str(subnet)


def _one_subnet(inventory, name, interfaces):
    """The one subnet every host's ``name`` sits on (each written with its
    prefix, as the roles take it)."""
    subnets = set(str(interface.cidr) for interface in interfaces.values())
    if len(subnets) > 1:
        raise LayoutError("%s: the hosts' %s are on %d subnets (%s); the lab has one such network" % (
            inventory, name, len(subnets), ", ".join(sorted(subnets))))
    if not subnets:
        raise LayoutError("%s: no host has a %s" % (inventory, name))
    subnet = netaddr.IPNetwork(subnets.pop())
    if subnet.prefixlen > 29:
        raise LayoutError("%s: %s's subnet %s is too small for the lab" % (inventory, name, subnet))
    return subnet


def _read(path):
    """The inventory's groups and each host's variables, as Ansible reads them."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[path])
    if not inventory.hosts:
        raise LayoutError("%s: Ansible read no host from it" % path)
    variables = VariableManager(loader=loader, inventory=inventory)
    groups = dict((name, [host.name for host in group.get_hosts()]) for name, group in inventory.groups.items())
    hostvars = dict((name, variables.get_vars(host=host)) for name, host in inventory.hosts.items())
    return groups, hostvars
