# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every northbound resource shares: ``external_ids`` whose owner mark
the operator may not write, map options, and names."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import ValidationError
from ..common.marks import OWNER_KEY
from ..common.naming import ovn_name
from ..ovsdb.fields import Field, map_options


def external_ids_field():
    """``external_ids``, with the owner mark kept out of the operator's view."""
    return Field("external_ids", kind="map", exclude_keys=(OWNER_KEY,))


def check_maps(item, where, options):
    """Check ``item``'s map options, and refuse the owner mark in its
    ``external_ids``: only the product writes it."""
    map_options(item, where, options)
    if OWNER_KEY in (item.get("external_ids") or {}):
        raise ValidationError("%s.external_ids: the key %r is reserved for the product" % (
            where, OWNER_KEY))


def required_name(item, where, option="name"):
    """``item[option]``, which must be there and be a valid OVN name."""
    if option not in item:
        raise ValidationError("%s.%s: a name is required" % (where, option))
    return ovn_name(item[option], "%s.%s" % (where, option))
