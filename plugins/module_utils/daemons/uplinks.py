# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's uplinks, put back at boot: ``ovn4nfv-uplink@<bridge>``.

A node's NIC on ``br-phy`` (its underlay address moved to the bridge) or on
``br-ext`` (a gateway's external NIC) is kernel state as much as OVS state:
after a reboot OVS still has the port, but the address is back on the NIC
(or nowhere) and the bridge's interface has none, so the node's tunnels have
no way out. The roles write what ``ovs_uplink`` made, one JSON file per
bridge (``/etc/ovn4nfv/uplinks/<bridge>.json``), and a systemd unit runs
this after Open vSwitch and before ovn-controller at every boot, with the
same core function the module uses (:func:`..node.uplink.apply_uplink`).

Debian's ifupdown integration of Open vSwitch could describe the bridge, but
not move an address the NIC got from somewhere else (a DHCP lease, a
container's network), and it would be a second implementation of the move.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import logging
import sys

from ..common.errors import Ovn4nfvError, ValidationError
from ..common.marks import UPLINK_PROGRAM
from ..node import uplink, vlan_interfaces
from ..ovsdb import connection as ovsdb
from ..resources.ovs import Bridge

LOG = logging.getLogger("ovn4nfv.uplinks")
KEYS = ("interface", "bridge", "datapath_type", "move_addresses", "addresses", "vlan_interfaces")


def read(path):
    """The uplink a file describes, its VLAN interfaces (None: not
    managed), the OVS database to use and the time to wait for links."""
    try:
        with open(path) as handle:
            values = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ValidationError("uplink %s: %s" % (path, exc))
    if not isinstance(values, dict) or not set(values) <= set(KEYS + ("ovs_db", "link_timeout")):
        raise ValidationError("uplink %s: a JSON object of %s" % (path, ", ".join(KEYS)))
    wanted = uplink.Uplink(values.get("interface"), values.get("bridge"), values.get("datapath_type", "netdev"),
                           values.get("move_addresses", True), values.get("addresses", []), where=path)
    vlans = values.get("vlan_interfaces")
    if vlans is not None:
        if not isinstance(vlans, list):
            raise ValidationError("uplink %s: vlan_interfaces is a list" % path)
        vlans = vlan_interfaces.parse(wanted, vlans, where=path + ": vlan_interfaces")
    return wanted, vlans, values.get("ovs_db", ovsdb.DEFAULT_OVS_DB), int(values.get("link_timeout", 30))


def restore(path):
    """Put the uplink of ``path`` back; returns whether anything changed."""
    wanted, vlans, ovs_db, link_timeout = read(path)
    with ovsdb.Database(ovs_db, ovsdb.OVS_SCHEMA, Bridge().tables, timeout=link_timeout) as database:
        with uplink.netlink() as ipr:
            changed, _before, after, _operations = vlan_interfaces.apply_with_uplink(
                ipr, database, wanted, vlans, False, link_timeout)
    LOG.info("%s on %s: %s", wanted.interface, wanted.bridge,
             ("restored: %s" % after) if changed else "as configured")
    return changed


def main(argv=None):
    parser = argparse.ArgumentParser(prog=UPLINK_PROGRAM, description=__doc__.split("\n", 1)[0])
    parser.add_argument("config", help="the uplink's JSON file")
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    try:
        restore(args.config)
    except Ovn4nfvError as exc:
        LOG.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
