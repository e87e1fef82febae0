# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the daemons write to the Kubernetes API about a pod: Events and
annotation patches, with the official client."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

try:
    from kubernetes import client as k8s_client
except ImportError:  # pragma: no cover - the daemons need it; modules do not
    k8s_client = None

MERGE_PATCH = "application/merge-patch+json"
POD_PATH = "/api/v1/namespaces/{namespace}/pods/{name}"


class PodWriter:
    """Events on pods and merge patches of them, for one component."""

    def __init__(self, core, component):
        self.core = core
        self.component = component
        # whether this client takes ``_content_type``: None until tried
        self.content_type = None

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
        """A JSON merge patch of the pod, whatever the client's generation.
        Clients that take ``_content_type`` are told the type. The others
        (Debian 12's 22.6 and Debian 13's 30.1) choose it themselves, and
        30.1 chooses a JSON patch for a dict, which an API server refuses:
        for them the same request goes through the client's own
        ``call_api`` with the type in its headers. Which kind the client is
        is learnt from its first answer (an ApiTypeError is raised before
        anything is sent) and kept."""
        if self.content_type is not False:
            try:
                self.core.patch_namespaced_pod(meta.name, meta.namespace, body, _content_type=MERGE_PATCH)
                self.content_type = True
                return
            except k8s_client.exceptions.ApiTypeError:
                if self.content_type:
                    raise
                self.content_type = False
        self.core.api_client.call_api(
            POD_PATH, "PATCH", path_params={"namespace": meta.namespace, "name": meta.name},
            query_params=[], header_params={"Accept": "application/json", "Content-Type": MERGE_PATCH},
            body=body, response_type="V1Pod", auth_settings=["BearerToken"], _return_http_data_only=True)
