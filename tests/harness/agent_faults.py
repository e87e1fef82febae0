"""The node agent with one fault injected where it meets the kernel, for the
failure-path tests of the steps no real state can make fail on demand.

    python -m tests.harness.agent_faults FAULTS --config AGENT.json

FAULTS is JSON, each fault fired once, then passed on:

- ``{"address": "172.16.1.77"}``: the first netlink request to add that
  address to an interface is answered as a kernel answers one it cannot
  take (ENOBUFS);
- ``{"mtu": 9000}``: the first request to set that MTU on an interface is
  refused (EINVAL), as a device whose limit is lower refuses it.

Everything else is the real agent against the real kernel, OVS and OVN;
the other steps' faults (a name taken, a route that exists, a port OVS
refuses, ovn-controller stopped) are real state the tests make.
"""

import errno
import json
import sys

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import node_agent
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.node import netns


def inject(faults):
    """Make the agent's netlink class (node.netns's, in every namespace) the faulty one."""
    fired = set()

    def fault(method, command, kwargs):
        if command == "add" and method == "addr" and kwargs.get("address") == faults.get("address"):
            return "address", errno.ENOBUFS, "No buffer space available"
        if command == "set" and method == "link" and "mtu" in kwargs and kwargs["mtu"] == faults.get("mtu"):
            return "mtu", errno.EINVAL, "Invalid argument"
        return None

    def faulty(method):
        direct = getattr(IPRoute, method, None)    # a method, or a proxy of pyroute2 0.9's

        def call(self, command, *args, **kwargs):
            found = fault(method, command, kwargs)
            if found and found[0] not in fired:
                fired.add(found[0])
                raise NetlinkError(found[1], "%s (injected for %s %s)" % (found[2], found[0], faults[found[0]]))
            if direct is not None:
                return direct(self, command, *args, **kwargs)
            return IPRoute.__getattr__(self, method)(command, *args, **kwargs)
        return call

    netns.IPRoute = type("FaultyIPRoute", (IPRoute,), {"addr": faulty("addr"), "link": faulty("link")})


if __name__ == "__main__":
    inject(json.loads(sys.argv[1]))
    sys.exit(node_agent.main(sys.argv[2:]))
