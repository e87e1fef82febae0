# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The databases a task names in its parameters, opened and closed.

A task's parameters (a module's, or anyone's who runs the audit, the
picture or the trace) name a remote in ``db`` (and, for the cluster's
reads, the southbound's in ``sb_db``), a ``timeout`` in seconds and the
TLS files ``private_key``, ``certificate`` and ``ca_cert``. This is the
one place they become :class:`Database` connections; an error is raised
as the product's, for the caller to report (a module, through its one
error path).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib

from ..common.errors import ValidationError
from .connection import NB_SCHEMA, SB_SCHEMA, TLS, Database
from .view import View


def tls_of(params):
    """The TLS files the parameters name (none: a plain connection)."""
    return TLS(params["private_key"], params["certificate"], params["ca_cert"])


def open_database(params, tables, schema, field="db", where=None):
    """The database at the remote in ``params[field]``, monitoring
    ``tables`` (``where``: see :class:`Database`), with the parameters'
    timeout and TLS files."""
    if params["timeout"] <= 0:
        raise ValidationError("timeout: %r must be a positive number of seconds" % params["timeout"])
    return Database(params[field], schema, tables, timeout=params["timeout"], tls=tls_of(params),
                    field=field, where=where)


@contextlib.contextmanager
def opened(params, tables, schema, field="db", where=None):
    """:func:`open_database` for the ``with`` block, closed after it."""
    database = open_database(params, tables, schema, field, where)
    try:
        yield database
    finally:
        database.close()


@contextlib.contextmanager
def nb_and_sb(params, nb_tables, sb_tables):
    """The northbound in ``db``, and the southbound in ``sb_db`` (None
    when ``sb_db`` is ""), for the ``with`` block; both closed after it."""
    sb = open_database(params, sb_tables, SB_SCHEMA, "sb_db") if params["sb_db"] else None
    try:
        with opened(params, nb_tables, NB_SCHEMA) as nb:
            yield nb, sb
    finally:
        if sb is not None:
            sb.close()


def read_both(nb, sb, function):
    """``function(northbound view, southbound view or None)``, with both
    databases held still."""
    if sb is None:
        return nb.read(lambda idl: function(View(idl), None))
    return nb.read(lambda idl: sb.read(lambda sb_idl: function(View(idl), View(sb_idl))))
