"""A VM's live migration between two workers of the lab, as its traffic
sees it: ``python -m lab migrate`` on the running lab (``make lab`` first).

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

import sys

from lab import lab


def main():
    return lab.main(["migrate"])


if __name__ == "__main__":
    sys.exit(main())
