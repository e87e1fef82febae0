# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's one error type and its kinds.

Errors cross the core as these exceptions; the Ansible layer turns them
into ``fail_json`` in one place and the daemons into Events and log lines.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class Ovn4nfvError(Exception):
    """Base of every error the core raises on purpose."""


class ValidationError(Ovn4nfvError):
    """Bad input. Holds every problem found, each naming field and value.

    Raised before anything is written, so a caller may rely on the
    database being untouched when it sees this error.
    """

    def __init__(self, problems, reason=None):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        # what kind of bad input, for whoever reports it (a daemon's Event
        # reason); None: the reporter's general one
        self.reason = reason
        super(ValidationError, self).__init__("; ".join(self.problems))


class DatabaseUnreachable(Ovn4nfvError):
    """The OVSDB remote could not be reached or synced within the timeout."""


class TransactionFailed(Ovn4nfvError):
    """The server refused or did not finish the transaction."""


class Fenced(Ovn4nfvError):
    """A watcher that is no longer the leader tried to write: its term is
    not the NB's (``ovsdb/fence.py``). Nothing of the transaction was
    applied. ``refused`` says the NB itself refused it (the transaction
    had left, under the old term); otherwise it was stopped before it was
    sent."""

    def __init__(self, message, refused=False):
        self.refused = refused
        super(Fenced, self).__init__(message)
