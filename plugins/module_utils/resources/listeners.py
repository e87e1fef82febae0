# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NB and SB databases' listeners (``Connection`` rows), with the SB's
RBAC role, as reconcile resources."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common import addressing
from ..common.errors import ValidationError
from ..common.naming import in_range
from ..ovsdb.connection import NB_SCHEMA, SB_SCHEMA
from ..ovsdb.fields import Field
from ..ovsdb.resource import Parent, Resource
from .nb_common import check_maps, external_ids_field


_LISTENER_KINDS = ("pssl", "ptcp", "punix", "ssl", "tcp", "unix")


def connection_target(value, where):
    """Check an OVSDB remote as ``ovsdb-server --remote`` takes it:
    ``pssl:PORT[:IP]``, ``ptcp:PORT[:IP]``, ``punix:PATH`` or an active
    ``ssl:``/``tcp:IP:PORT``, ``unix:PATH``; return it normalised."""
    text = str(value).strip()
    kind, _sep, rest = text.partition(":")
    if kind not in _LISTENER_KINDS or not rest:
        raise ValidationError("%s: %r is not an OVSDB remote (%s:...)" % (
            where, value, "|".join(_LISTENER_KINDS)))
    if kind in ("punix", "unix"):
        return "%s:%s" % (kind, rest)
    if kind.startswith("p"):
        port, _sep, host = rest.partition(":")
    else:
        host, _sep, port = rest.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValidationError("%s: %r has no valid port" % (where, value))
    if not host and not kind.startswith("p"):
        raise ValidationError("%s: %r names no address to connect to" % (where, value))
    if host:
        address = addressing.parse_ip(host.strip("[]"), where)
        host = "[%s]" % address if address.version == 6 else str(address)
    if kind.startswith("p"):
        return "%s:%d%s" % (kind, int(port), ":" + host if host else "")
    return "%s:%s:%d" % (kind, host, int(port))


class _Connection(Resource):
    """A listener (or outgoing connection) of an OVN database: a row of its
    ``Connection`` table, referenced from the one ``NB_Global``/``SB_Global``
    row, as ``ovn-nbctl set-connection`` and ``ovn-sbctl set-connection``
    write them, known by its target."""

    name = "connection"
    table = "Connection"
    identity = ("target",)

    def validate(self, item, where, state):
        if "target" not in item:
            raise ValidationError("%s.target: a target is required" % where)
        item["target"] = connection_target(item["target"], where + ".target")
        check_maps(item, where, ("other_config", "external_ids"))
        for option in ("inactivity_probe", "max_backoff"):
            if item.get(option) is not None:
                item[option] = in_range(item[option], 0, 2 ** 31 - 1, "%s.%s" % (where, option))
        return item


class NBConnection(_Connection):
    schema = NB_SCHEMA
    tables = ("NB_Global", "Connection")
    parent = Parent(None, "NB_Global", "connections", "NB_Global")
    fields = (
        Field("target", default=""),
        Field("inactivity_probe", kind="optional"),
        Field("max_backoff", kind="optional"),
        Field("other_config", kind="map"),
        external_ids_field(),
    )

    def validate(self, item, where, state):
        for option in ("role", "read_only"):
            if item.get(option) is not None:
                raise ValidationError("%s.%s: only a southbound listener has a %s" % (
                    where, option, option.replace("_", "-")))
        return _Connection.validate(self, item, where, state)


class SBConnection(_Connection):
    """A southbound listener; ``role: ovn-controller`` turns on SB RBAC for
    the clients that connect through it."""

    schema = SB_SCHEMA
    tables = ("SB_Global", "Connection")
    parent = Parent(None, "SB_Global", "connections", "SB_Global")
    fields = NBConnection.fields + (
        Field("role", default=""),
        Field("read_only", default=False),
    )

    def validate(self, item, where, state):
        item = _Connection.validate(self, item, where, state)
        if "role" in item and item["role"] is not None and not isinstance(item["role"], str):
            raise ValidationError("%s.role: %r is not a string" % (where, item["role"]))
        return item
