"""The podman lab: the machines of an inventory as containers.

``make lab`` runs ``python -m lab run`` from the checkout's root: install
what the machine lacks, build the node image from Debian's packages, start
the containers that the inventory describes (playbooks/inventory/example.yml,
a master, two workers and an external host, unless ``INVENTORY=path`` names
another; layout.py says how it is read) on an underlay and an external
podman network, stand the cluster up with the collection's own playbooks,
create pods the way kubelet would, run ``verify.yml``, and print what it
found. ``make lab-down`` runs ``python -m lab down``.

The containers play machines; Ansible reaches them through the podman
connection plugin. Nothing here configures OVS or OVN: the playbooks do.
The Kubernetes API is the test stand-in (``tests/harness/kube_api_standin.py``),
because no real API server can be installed on this machine.

This file is the command line only: :data:`COMMANDS` maps each command to
the room that does it. The rooms: ``host`` (the machine and the images),
``containers`` (container sets and their networks; the :class:`Session`
every room is given), ``credentials`` (the API's), ``playbooks`` (running
them, reading their output), ``workload`` (pods, Service, chain, tap,
policy and baseline) and ``scenarios`` (run, chaos, reboot).
"""

import argparse
import json
import os
import sys

from lab import containers, credentials, failover, host, hotplug, migration, playbooks, providers, qos, scenarios, \
    upgrade, vip, workload


def deps(session, args):
    host.install_host_packages()
    return 0


def image(session, args):
    deps(session, args)
    host.build_images(session.lab_set().releases(session.debian).values())
    return 0


def up(session, args):
    image(session, args)
    containers.up(session)
    return 0


def down(session, args):
    containers.down(session)
    return 0


def api(session, args):
    credentials.start_api(session)
    return 0


def pods(session, args):
    print(json.dumps(workload.run_pods(session)))
    workload.workloads(session)
    return 0


def show_playbook(session, args):
    """site, networks, verify, reset, audit: the playbook of that name on
    the lab, what it found, and a line with its time, exit code and recap."""
    extra = ()
    if args.command == "verify" and not args.links:
        extra = workload.verify_vars(session)
    elif args.command == "audit":
        extra = ("-e", "audit_state=repaired" if args.repair else "audit_state=audited")
    if args.limit:
        extra = tuple(extra) + ("--limit", args.limit)
    seconds, recap, proc = playbooks.playbook(session, args.command + ".yml", *extra, check=False)
    if args.command == "verify":
        print("\n".join(playbooks.every_row(proc) + playbooks.traces(proc)))
    if args.command == "audit":
        print("\n".join(playbooks.audit_findings(proc, playbooks.AUDIT_SHOWN)))
    for said in playbooks.failed_tasks(proc):
        print(said)
    print("%s: %.1fs rc=%d %s" % (args.command, seconds, proc.returncode, json.dumps(recap)))
    return proc.returncode


def picture(session, args):
    print(scenarios.draw(session))
    return 0


def run(session, args):
    return scenarios.run(session)


def chaos(session, args):
    return scenarios.chaos(session)


def migrate(session, args):
    return migration.migrate(session)


def check_failover(session, args):
    return failover.run(session)


def check_providers(session, args):
    return providers.run(session)


def check_hotplug(session, args):
    return hotplug.run(session)


def check_qos(session, args):
    if not session.layout.qos_cap:
        raise SystemExit("lab: qos needs a QoS cap on a pod network (qos_max in ovn4nfv_networks)")
    return qos.run(session)


def check_vip(session, args):
    if not session.layout.virtual_ips:
        raise SystemExit("lab: vip needs a virtual IP on a pod network (virtual_ips in ovn4nfv_networks)")
    return vip.run(session)


def check_upgrade(session, args):
    return upgrade.upgrade(session)


def reboot(session, args):
    hosts = session.layout.hosts()
    if args.node not in hosts:
        raise SystemExit("lab: reboot needs one of the lab's nodes: %s" % ", ".join(hosts))
    return scenarios.reboot(session, args.node)


# command: (what does it, its help). up, api and down act on --set; the
# others on the lab.
COMMANDS = {
    "deps": (deps, "install what the machine lacks (podman, debootstrap) and configure podman"),
    "image": (image, "deps, then build the node image of each Debian release the set runs"),
    "up": (up, "image, then start the set's networks and containers and wait until they have booted"),
    "down": (down, "remove the set's containers, networks and API credentials"),
    "api": (api, "start the API stand-in on the set's master and register its Kubernetes nodes"),
    "site": (show_playbook, "run playbooks/site.yml on the lab"),
    "networks": (show_playbook, "run playbooks/networks.yml on the lab"),
    "pods": (pods, "make the lab's pods as kubelet would, its Service and tenants' policy, then its chain, tap "
                   "and baseline"),
    "verify": (show_playbook, "run playbooks/verify.yml: every link, the Service, the chain, the tap and the policy"),
    "reset": (show_playbook, "run playbooks/reset.yml: take the product off the lab"),
    "audit": (show_playbook, "run playbooks/audit.yml and show what it found (--repair: and mended)"),
    "picture": (picture, "draw the lab (playbooks/topology.yml) and say where the page is"),
    "run": (run, "the whole lab from nothing, verified; one last line (make lab)"),
    "reboot": (reboot, "restart one node's container, no Ansible, and verify until OK (make lab-reboot)"),
    "chaos": (chaos, "one fault of each kind, audited, repaired, verified (make lab-chaos)"),
    "migrate": (migrate, "live-migrate the lab's VM to the other worker and back, probed from the master; "
                         "its last line: migration: lost= sent= interruption_ms= tcp_survived="),
    "failover": (check_failover, "with several masters: pods made while the leading watcher is SIGKILLed, then "
                                 "SIGSTOPped and continued, then its master cut off (br-phy down) and restored; "
                                 "its last line: failover: kill_s= stop_s= partition_s= double_writes= lost="),
    "providers": (check_providers, "check the provider networks from outside: the fabric's VLANs, no NAT, "
                                   "isolation, a VNF's trunk, the master's refusal; its last line: providers: provider_ok="),
    "hotplug": (check_hotplug, "a running pod gains a second network and loses it while its first carries "
                               "traffic; a bad request refused; its last line: hotplug: hotplug_ok="),
    "vip": (check_vip, "a VRRP pair (keepalived) holds a virtual IP in turn through OVN's virtual port; a pod "
                       "not allowed it is dropped; its last line: vip: vip_ok= failover_ms= lost="),
    "upgrade": (check_upgrade, "the nodes upgraded in place from Debian 12 to 13 by playbooks/upgrade.yml while "
                               "traffic runs (a bookworm lab stood up first if none stands), then audit, verify and "
                               "upgrade.yml again; its last line: upgrade: ... untouched_lost= audit_clean= links_ok="),
    "qos": (check_qos, "QoS per interface measured across the overlay (iperf3, DSCP read in the receiver); its "
                       "last line: qos: qos_ok= limited_kbps= free_kbps="),
}


def parser():
    made = argparse.ArgumentParser(prog="python -m lab", description=__doc__.splitlines()[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog="commands:\n" + "\n".join("  %-9s %s" % (name, said)
                                                                    for name, (_f, said) in COMMANDS.items()))
    made.add_argument("--set", choices=["lab"] + sorted(containers.SETS), default="lab",
                      help="which containers up, down and api act on (the molecule scenarios' own "
                           "sets; the other commands are the lab's)")
    made.add_argument("command", choices=list(COMMANDS), metavar="command", help="one of the commands below")
    made.add_argument("node", nargs="?", help="reboot: the node (master, worker1, ...)")
    made.add_argument("--limit", help="site, networks, reset: only these hosts (ansible-playbook's --limit)")
    made.add_argument("--links", action="store_true",
                      help="verify: the matrix of links only, not the Service, chain, tap and policy rows")
    made.add_argument("--repair", action="store_true",
                      help="audit: also mend what the product owns (audit_state=repaired)")
    made.add_argument("--debian", choices=list(host.RELEASES) + ["mixed"],
                      help="the nodes' Debian release (default: $OVN4NFV_DEBIAN, else %s)" % host.DEFAULT_RELEASE)
    made.add_argument("--inventory", help="the lab's inventory (default: $OVN4NFV_LAB_INVENTORY, else the one "
                      "the running lab was made from, else playbooks/inventory/example.yml)")
    return made


def main(argv=None):
    args = parser().parse_args(argv)
    # The environment is read here, once, as the defaults of the options
    # (molecule's scenarios give the release that way); the rooms are told.
    session = containers.Session(debian=args.debian or os.environ.get("OVN4NFV_DEBIAN"),
                                 inventory=args.inventory or os.environ.get("OVN4NFV_LAB_INVENTORY"),
                                 set_name=args.set)
    function, _help = COMMANDS[args.command]
    return function(session, args)


if __name__ == "__main__":
    sys.exit(main())
