# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One mark of each network's switch, as the watcher's NB listener last saw
it: whether a switch's event changed it (a network's ``physnet`` for the
Services, its ``policy_mode`` for the policies).

The watcher's listener is added after the NB's first load, so a switch's
mark is learnt only as the switch changes, and what it held before the
first change seen (since the watcher started) is not known. That first
change counts as a change, as a new network does: it costs one planning
again, where taking it for no change would miss a change made while the
watcher was down, or since it started, until the periodic resync.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading

from ..common.marks import NETWORK_KEY

UNSEEN = object()       # a switch whose mark this listener has not seen yet


class SwitchMarks:
    """The mark ``key`` (``external_ids``) of each network's switch, as last
    seen ("" for none); thread-safe."""

    def __init__(self, key):
        self.key = key
        self.lock = threading.Lock()
        self.seen = {}          # network switch -> its mark, as last seen

    def changed(self, event, row):
        """Whether the NB listener's ``event`` on switch ``row`` may have
        changed its mark: a new network's switch, the first sight of one,
        or another mark than last seen. A gateway's or the join switch (no
        network's) never."""
        ids = getattr(row, "external_ids", None) or {}
        if not ids.get(NETWORK_KEY):
            return False
        mark = None if event == "delete" else ids.get(self.key, "")
        with self.lock:
            before = self.seen.pop(row.name, UNSEEN)
            if mark is not None:
                self.seen[row.name] = mark
        return event == "create" or before is UNSEEN or (mark is not None and before != mark)
