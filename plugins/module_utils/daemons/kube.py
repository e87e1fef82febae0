# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the daemons write to the Kubernetes API about a pod: Events and
annotation patches, with the official client."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

from ..common import versions

try:
    from kubernetes import client as k8s_client
except ImportError:  # pragma: no cover - the daemons need it; modules do not
    k8s_client = None

MERGE_PATCH = "application/merge-patch+json"
# the client release that first takes ``_content_type``
CONTENT_TYPE_SINCE = "24.2.0"


class PodWriter:
    """Events on pods and merge patches of them, for one component."""

    def __init__(self, core, component):
        self.core = core
        self.component = component
        self.content_type = versions.too_old("kubernetes", CONTENT_TYPE_SINCE) is None

    def event(self, pod, reason, message, kind="Warning"):
        """An Event of ``reason`` on ``pod``, ``message`` cut to 1 KiB."""
        meta = pod.metadata
        now = datetime.datetime.now(datetime.timezone.utc)
        self.core.create_namespaced_event(meta.namespace, k8s_client.CoreV1Event(
            metadata=k8s_client.V1ObjectMeta(generate_name=meta.name + ".", namespace=meta.namespace),
            involved_object=k8s_client.V1ObjectReference(
                kind="Pod", api_version="v1", name=meta.name, namespace=meta.namespace, uid=meta.uid),
            reason=reason, message=message[:1024], type=kind, count=1,
            first_timestamp=now, last_timestamp=now,
            source=k8s_client.V1EventSource(component=self.component)))

    def patch(self, meta, body):
        """A JSON merge patch of the pod. Clients before 24.2 (such as
        Debian 12's 22.6) take no ``_content_type`` and send a dict as a
        strategic merge patch, which for annotations is the same thing."""
        if self.content_type:
            self.core.patch_namespaced_pod(meta.name, meta.namespace, body, _content_type=MERGE_PATCH)
        else:
            self.core.patch_namespaced_pod(meta.name, meta.namespace, body)
