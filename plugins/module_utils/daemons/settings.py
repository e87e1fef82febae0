# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the product's daemons (the watcher, the node agent) share: their
settings, read from a JSON file and the environment, and their start."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import logging
import os
import signal
import socket
import sys

from ..common import versions
from ..common.errors import Ovn4nfvError, ValidationError


class Settings:
    """Settings: a JSON file, then ``<ENV_PREFIX><KEY>`` environment
    variables, then :attr:`DEFAULTS`. Unknown keys are refused."""

    NAME = "daemon"
    ENV_PREFIX = "OVN4NFV_"
    DEFAULTS = {}
    # libraries whose floor (common.versions.FLOORS) is checked at start
    LIBRARIES = ()

    def __init__(self, **values):
        unknown = set(values) - set(self.DEFAULTS)
        if unknown:
            raise ValidationError("%s config: unknown keys %s" % (self.NAME, ", ".join(sorted(unknown))))
        settings = dict(self.DEFAULTS)
        settings.update(values)
        for key, default in self.DEFAULTS.items():
            env = os.environ.get(self.ENV_PREFIX + key.upper())
            if env is not None:
                settings[key] = _cast(env, default)
        wrong = sorted(key for key, default in self.DEFAULTS.items()
                       if isinstance(default, bool) and not isinstance(settings[key], bool))
        if wrong:
            raise ValidationError(["%s config: %s: %r is not true or false" % (self.NAME, key, settings[key])
                                   for key in wrong])
        self.__dict__.update(settings)
        self.check()

    def check(self):
        """Refuse bad values; a subclass adds its rules."""

    @classmethod
    def from_file(cls, path):
        try:
            with open(path) as handle:
                values = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ValidationError("%s config %s: %s" % (cls.NAME, path, exc))
        if not isinstance(values, dict):
            raise ValidationError("%s config %s: not a JSON object" % (cls.NAME, path))
        return cls(**values)


def _cast(text, default):
    """An environment variable's text as its default's type: a number or
    true/false; anything else as it is (a bad value is the check's to
    refuse, naming the key)."""
    if isinstance(default, bool):
        word = text.strip().lower()
        return True if word in ("true", "1", "yes", "on") else False if word in ("false", "0", "no", "off") else text
    for kind in (int, float):
        if isinstance(default, kind):
            try:
                return kind(text)
            except ValueError:
                return text
    return text


def run(prog, description, settings_class, make, argv=None):
    """Parse ``--config`` and ``--log-level``, build the daemon with
    ``make(settings)``, stop it on SIGTERM and SIGINT, and run it. Returns
    the exit code: 0, 2 when it could not start, or the one its ``run``
    returns (the watcher's 3: it lost its leadership)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", help="JSON settings file")
    parser.add_argument("--log-level", default=os.environ.get(settings_class.ENV_PREFIX + "LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        for library in settings_class.LIBRARIES:
            versions.require(library, feature=prog)
        settings = settings_class.from_file(args.config) if args.config else settings_class()
        daemon = make(settings)
    except Ovn4nfvError as exc:
        logging.getLogger(prog).error("%s", exc)
        return 2
    signal.signal(signal.SIGTERM, daemon.stop)
    signal.signal(signal.SIGINT, daemon.stop)
    return daemon.run() or 0


def notify_ready():
    """Tell systemd that the daemon serves, for a unit of ``Type=notify``:
    ``READY=1`` on the datagram socket ``$NOTIFY_SOCKET`` names (``@`` for
    the abstract namespace). Returns whether there was one to tell."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return False
    if path.startswith("@"):
        path = "\0" + path[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(path)
        sock.sendall(b"READY=1")
    return True


def kubernetes_api_client(kubeconfig, connections=None):
    """An API client from ``kubeconfig``, or from the in-cluster service
    account when it is None (as a daemon runs in a pod), keeping up to
    ``connections`` connections open (one per thread that calls the API;
    the client's default is five per CPU, and a connection it cannot keep
    is closed, so the next call pays a TLS handshake)."""
    from kubernetes import client, config  # noqa: only the daemons need it
    configuration = client.Configuration()
    if kubeconfig:
        config.load_kube_config(kubeconfig, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)
    if connections:
        configuration.connection_pool_maxsize = max(connections, configuration.connection_pool_maxsize or 0)
    return client.ApiClient(configuration)
