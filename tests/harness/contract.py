"""The on-disk contract across an upgrade (issue 39): what the previous
release of the product wrote on a small cluster, recorded once by
``tests/contract/record.py`` (run by hand), and read back by
``tests/functional/test_contract.py`` with the code of this checkout.

The recording lives in ``tests/data/contract/<short commit>/``:

* :data:`NB_FILE`, :data:`SB_FILE`, :data:`OVS_FILE`: the northbound, the
  southbound and the node's Open vSwitch database, as ``ovsdb-client
  backup`` saved them (each one snapshot, in the schema of the OVS and OVN
  that ran the release);
* :data:`API_FILE`: every object of the API stand-in (namespaces, the node,
  pods with the interface lists the release's watcher wrote, the Service,
  the policy, the watchers' Lease), as
  :meth:`~tests.harness.kube_api_standin.KubeAPIStandIn.objects` gives them;
* :data:`CNI_FILE`: each pod's CNI ADD, as the runtime made it, and the
  result the release's plugin and node agent answered;
* :data:`META_FILE`: the commit, the versions and schemas it ran with.

The cluster itself (:data:`NETWORKS`, :data:`PODS`, ...) is defined here,
once, for the recorder that makes it and the test that names parts of it.
"""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The last commit before the upgrade work (issue 39): the release whose
# writing the current code must read. Moving it on is a new recording.
PREVIOUS_RELEASE = "b556f44b0c1d5f6f3e3f29b4c823d8e2b37dc16f"
DATA = os.path.join(ROOT, "tests", "data", "contract")
NB_FILE, SB_FILE, OVS_FILE = "ovnnb_db.db", "ovnsb_db.db", "conf.db"
API_FILE, CNI_FILE, META_FILE = "api.json", "cni.json", "recorded.json"

NODE = "node1"                   # the one node: its chassis' system-id and the pods' spec.nodeName
NODE_ADDRESS = "192.168.50.11"
JOIN_SUBNET = "100.64.1.0/24"
GATEWAY = {"node": NODE, "external_ip": "192.168.50.12/24", "external_gateway": "192.168.50.1"}
# Everything a network's record holds, on two overlays, and a provider
# network (a VLAN on a physical network) that no pod uses yet.
NETWORKS = [
    {"name": "blue", "subnet": "172.16.10.0/24", "exclude_ips": ["172.16.10.2..172.16.10.9"], "mtu": 1400,
     "dns": ["172.16.10.53"], "routes": [{"dst": "10.20.0.0/16"}], "dhcp": {"lease_time": 600, "domain": "blue.test"},
     "relaxed_port_security": [{"namespace": "nf", "level": "mac"}], "qos_max": {"rate": 20000, "burst": 2000}},
    {"name": "red", "subnet": "172.16.20.0/24", "gateway": "172.16.20.254"},
    {"name": "vlan100", "subnet": "192.168.100.0/24", "physnet": "physnet-prov", "vlan": 100},
]
HTTP = [{"name": "http", "containerPort": 8080}]
# (namespace, name, UID, labels, container ports, annotations' requests): a
# pod with a dynamic address, one with a static address and MAC and a QoS,
# one with two interfaces on two networks (a default route, routes of its
# own), one in OVN4NFV's later form and camelCase spelling, and a network
# function granted relaxed port security.
PODS = [
    ("default", "web-0", "00000000-0000-4000-8000-000000000001", {"app": "web"}, HTTP,
     {"ovnNetwork": [{"name": "blue", "interface": "net0"}]}),
    ("default", "web-1", "00000000-0000-4000-8000-000000000002", {"app": "web"}, HTTP,
     {"ovnNetwork": [{"name": "blue", "interface": "net0", "ip_address": "172.16.10.20",
                      "mac_address": "0a:00:00:10:00:14", "qos": {"rate": 10000, "burst": 1000}}]}),
    ("default", "multi", "00000000-0000-4000-8000-000000000003", {"app": "client"}, None,
     {"ovnNetwork": [{"name": "blue", "interface": "net0", "default_gateway": True,
                      "routes": [{"dst": "10.30.0.0/16"}]},
                     {"name": "red", "interface": "net1", "ip_address": "172.16.20.30"}]}),
    ("default", "nfn", "00000000-0000-4000-8000-000000000004", {"app": "client"}, None,
     {"k8s.plugin.opnfv.org/nfn-network": {"type": "ovn4nfv", "interface": [
         {"name": "red", "interface": "net2", "ipAddress": "172.16.20.40", "defaultGateway": "true"}]}}),
    ("nf", "router", "00000000-0000-4000-8000-000000000005", {"app": "router"}, None,
     {"ovnNetwork": [{"name": "blue", "interface": "net0", "port_security": "mac"},
                     {"name": "red", "interface": "net1", "port_security": "mac"}]}),
]
SERVICE = ("default", "web", "00000000-0000-4000-8000-000000000011",
           {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
           {"k8s.plugin.opnfv.org/service-network": "blue"})
POLICY = ("default", "web-in", {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [
    {"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"protocol": "TCP", "port": 8080}]}]},
    {"k8s.v1.cni.cncf.io/policy-for": "ovn4nfv.k8s/blue"})
# the pod the test deletes once the current watcher serves: two interfaces
# on two networks, a policy's peer
DELETED = ("default", "multi")


def directory(commit=PREVIOUS_RELEASE):
    """Where the recording of ``commit`` is kept."""
    return os.path.join(DATA, commit[:7])


class Recording:
    """A recording, as :func:`directory` keeps it: :meth:`path` of each
    file, :attr:`meta`, :attr:`objects` and :attr:`cni` (``{namespace/name:
    {"request": the ADD's, "result": its result}}``) parsed."""

    def __init__(self, commit=PREVIOUS_RELEASE):
        self.dir = directory(commit)
        with open(self.path(META_FILE)) as handle:
            self.meta = json.load(handle)
        with open(self.path(API_FILE)) as handle:
            self.objects = json.load(handle)
        with open(self.path(CNI_FILE)) as handle:
            self.cni = json.load(handle)

    def path(self, name):
        return os.path.join(self.dir, name)

    def of_kind(self, kind):
        return [o for o in self.objects if o["kind"] == kind]

    def pod(self, namespace, name):
        found = [o for o in self.of_kind("Pod") if (o["metadata"]["namespace"], o["metadata"]["name"]) ==
                 (namespace, name)]
        return found[0] if found else None
