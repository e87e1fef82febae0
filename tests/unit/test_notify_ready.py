"""systemd's readiness protocol, as the node agent speaks it (Type=notify):
one ``READY=1`` datagram on the socket ``$NOTIFY_SOCKET`` names, a path or
an abstract name (``@...``); nothing without it."""

import os
import socket

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons import settings


def _receive(address, monkeypatch, named):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(address)
        listener.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", named)
        assert settings.notify_ready() is True
        return listener.recv(64)


def test_ready_on_a_path(tmp_path, monkeypatch):
    path = str(tmp_path / "notify")
    assert _receive(path, monkeypatch, path) == b"READY=1"


def test_ready_on_an_abstract_name(monkeypatch):
    name = "ovn4nfv-notify-%d" % os.getpid()
    assert _receive("\0" + name, monkeypatch, "@" + name) == b"READY=1"


def test_nothing_to_tell_without_systemd(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert settings.notify_ready() is False
