"""A VM's live migration between two workers of the lab, as its traffic
sees it: ``python -m lab migrate``, on the running lab, or on one this
benchmark stands up (the containers, the API, site.yml, networks.yml, the
pods and the VM) and takes down again.

A probe pod on the master (the third node) pings the VM every 10 ms and
keeps one TCP connection to the guest's echo server busy while QEMU moves
the guest to the other worker and back (lab/migration.py). The baseline,
in the same run, is the same probe for a window of its own with nothing
moving: what the path loses and pauses anyway.

Last line: ``migration: lost=<n> sent=<n> interruption_ms=<x>
tcp_survived=<yes|no> downtime_ms=<QEMU's> total_ms=<QEMU's> tcp_gap_ms=<x>
baseline_lost=<n> baseline_sent=<n> baseline_interruption_ms=<x>``
(the first move's; the move back's is the line before it).
"""

import subprocess
import sys

from lab import lab

MASTER = "ovn4nfv-master"


def running():
    return subprocess.run(["podman", "container", "exists", MASTER], check=False).returncode == 0


def main():
    made = not running()
    try:
        if made:
            for command in ("up", "api", "site", "networks", "pods"):
                code = lab.main([command])
                if code:
                    raise SystemExit("migration: lab %s failed (exit %s)" % (command, code))
        return lab.main(["migrate"])
    finally:
        if made:
            lab.main(["down"])


if __name__ == "__main__":
    sys.exit(main())
