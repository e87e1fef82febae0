# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's settings (``daemons/watcher.py``): a JSON file, then
``OVN4NFV_WATCHER_<KEY>`` environment variables, then the defaults; its
leadership's among them (``daemons/leadership.py``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.errors import ValidationError
from ..ovsdb import connection as ovsdb
from . import leadership, settings as daemon


class Config(daemon.Settings):
    """The watcher's settings: a JSON file, then ``OVN4NFV_WATCHER_<KEY>``
    environment variables, then these defaults."""

    NAME = "watcher"
    ENV_PREFIX = "OVN4NFV_WATCHER_"
    LIBRARIES = ("ovsdbapp", "netaddr", "kubernetes", "jsonschema")
    DEFAULTS = dict(leadership.DEFAULTS, **{
        "kubeconfig": None,            # None: in-cluster credentials
        "nb_db": ovsdb.DEFAULT_NB_DB,
        "private_key": None,
        "certificate": None,
        "ca_cert": None,
        # the southbound, for the chassis' bridge mappings (PhysicalNetworkMissing); None: not read
        "sb_db": None,
        "sb_private_key": None,
        "sb_certificate": None,
        "sb_ca_cert": None,
        "default_network": None,       # for pods with only the legacy "ovn" annotation
        "workers": 16,                 # mostly waiting on OVN; more of them batch northd's work
        "batch_size": 64,              # the most pods' plans one NB transaction carries
        "resync_seconds": 300,
        "watch_seconds": 10,           # how long one watch request lasts
        "address_seconds": 30,         # how often to look again for an address OVN has not assigned
        "ovsdb_timeout": 10,
        "max_backoff_seconds": 30,
        "policies": True,              # serve MultiNetworkPolicy (k8s.cni.cncf.io/v1beta1)
        "policy_log_rate": 20,         # dropped-packet log lines a second, per network's default deny
    })

    def check(self):
        for key in ("workers", "batch_size", "resync_seconds", "watch_seconds", "address_seconds", "ovsdb_timeout",
                    "policy_log_rate"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ValidationError("watcher config: %s: %r is not a positive number" % (key, getattr(self, key)))
        ovsdb.parse_remote(self.nb_db, "nb_db")
        if self.sb_db is not None:
            ovsdb.parse_remote(self.sb_db, "sb_db")
        if not isinstance(self.policies, bool):
            raise ValidationError("watcher config: policies: %r is not true or false" % (self.policies,))
        leadership.check(self)
