# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The versions of the libraries the core runs on, and their floors.

Each floor is what Debian 12, the oldest supported node, ships; the core's
tests run on those versions as well as on the newest. A feature that needs
more than the floor asks :func:`require` first, so that an older node fails
with a message naming the library, the version found and the one needed,
not with an AttributeError deep in a transaction.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from .errors import Ovn4nfvError

# library (distribution name) -> the oldest version supported
FLOORS = {
    "ovsdbapp": "2.1.0",
    "netaddr": "0.8.0",
    "pyroute2": "0.7.2",
    "kubernetes": "22.6.0",
    "jsonschema": "4.10.3",
}


def parse(text):
    """A version string as a tuple of numbers, for comparison: ``"0.7.2"``
    -> ``(0, 7, 2)``; what follows the numbers (``rc1``, ``.post2``) is
    ignored, which is conservative for a floor."""
    numbers = []
    for part in str(text).split("."):
        match = re.match(r"\d+", part)
        if not match:
            break
        numbers.append(int(match.group(0)))
        if match.group(0) != part:
            break
    return tuple(numbers)


def installed(library):
    """The installed version of ``library`` as a string, or None."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return None


def too_old(library, needed=None, found=None):
    """Why ``library`` cannot serve (older than ``needed``, by default its
    floor), or None when it can or its version cannot be told."""
    needed = needed or FLOORS[library]
    found = found if found is not None else installed(library)
    if found is None or parse(found) >= parse(needed):
        return None
    return "%s %s is installed; %s or newer is needed" % (library, found, needed)


def require(library, needed=None, feature=None, found=None):
    """Raise :class:`Ovn4nfvError` when ``library`` is older than ``needed``
    (by default its floor), naming ``feature`` when given."""
    problem = too_old(library, needed, found)
    if problem:
        raise Ovn4nfvError("%s%s" % ("%s: " % feature if feature else "", problem))
