# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names the product accepts for OVS and OVN objects."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from .errors import ValidationError

# OVN names end up in flows, logs and ovn-nbctl arguments: keep them to
# characters that need no quoting anywhere.
_OVN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,252}\Z")
# Kernel interface names: at most 15 bytes, no '/', ':' or white space.
_IFNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}\Z")
# A physical network's name, as ovn-bridge-mappings (``physnet:bridge,...``)
# and a localnet port's options:network_name carry it: no ':' or ','.
_PHYSNET = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")


def ovn_name(value, field):
    """Refuse a name OVN tools would mangle or that would need quoting."""
    if not isinstance(value, str) or not _OVN_NAME.match(value):
        raise ValidationError(
            "%s: %r is not a valid name (letters, digits, '_', '.', ':' and '-', "
            "at most 253 characters, not starting with '.', ':' or '-')" % (field, value))
    return value


def interface_name(value, field):
    """Refuse a name the kernel would refuse for a network interface."""
    if not isinstance(value, str) or not _IFNAME.match(value):
        raise ValidationError(
            "%s: %r is not a valid interface name (1-15 letters, digits, '_', '.' or '-')" % (
                field, value))
    return value


def physnet_name(value, field):
    """Refuse a physical network name ovn-bridge-mappings cannot carry."""
    if not isinstance(value, str) or not _PHYSNET.match(value):
        raise ValidationError(
            "%s: %r is not a valid physical network name (1-64 letters, digits, '_', '.' or '-'; "
            "no ':' or ',', which ovn-bridge-mappings uses)" % (field, value))
    return value


def in_range(value, low, high, field):
    """An integer within ``low``..``high``, or a problem naming the field."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError("%s: %r is out of range %d-%d" % (field, value, low, high))
    return value
