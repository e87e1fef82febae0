# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The daemons and the Kubernetes API, with the official client: what
they write about an object (Events, annotation patches), and the one
list-then-watch loop every cache of theirs is fed by."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import logging
import re
import threading
import time

from ..common.workqueue import Backoff

try:
    from kubernetes import client as k8s_client
    from kubernetes import watch as k8s_watch
    from kubernetes.client.rest import ApiException
except ImportError:  # pragma: no cover - the daemons need it; modules do not
    k8s_client = k8s_watch = None

    class ApiException(Exception):
        """Stands for the client's exception where the client is missing."""
        status = None

LOG = logging.getLogger("ovn4nfv.kube")
# What a relist returns when the API does not serve its kind (a CRD that is
# not installed): the ListWatch lists again after resync_seconds, quietly.
ABSENT = object()

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
POD_PATH = "/api/v1/namespaces/{namespace}/pods/{name}"


_LIST = re.compile(r"^[Ll]ist\[(.+)\]$")
_MAP = re.compile(r"^(?:dict\(str, (.+)\)|Dict\[str, (.+)\])$")
_PLAIN = frozenset(("str", "int", "bool", "float", "object", "bytes", "bytearray", "date"))


def _typed(value, kind):
    """``value``, from the API's JSON, as the client's models type ``kind``
    (their ``openapi_types`` spelling, old or new: ``list[X]`` or
    ``List[X]``, ``dict(str, X)`` or ``Dict[str, X]``)."""
    if value is None or kind in _PLAIN:
        return value
    match = _LIST.match(kind)
    if match:
        inner = match.group(1)
        return value if inner in _PLAIN else [_typed(item, inner) for item in value]
    match = _MAP.match(kind)
    if match:
        inner = match.group(1) or match.group(2)
        return value if inner in _PLAIN else dict((k, _typed(v, inner)) for k, v in value.items())
    if kind == "datetime":
        try:
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except (AttributeError, ValueError):
            return value        # still says it is set, which is what is asked of it
    model = getattr(k8s_client, kind, None)
    return ApiObject(value, model) if hasattr(model, "attribute_map") else value


class ApiObject:
    """A Kubernetes object as the API sent it (its parsed JSON), read as
    the client's ``model`` class reads: the same attribute names (the
    model's ``attribute_map``), None for a field that is absent, nested
    objects, lists and maps typed as the model types them, timestamps as
    datetimes; an attribute the model lacks raises AttributeError. Each
    field is made when first read: a watched pod is read for its metadata
    and little else, and the client's model of it, every field built and
    checked, costs about 100 µs more than the JSON parse (measured in the
    watcher's burst, twice per pod)."""

    def __init__(self, raw, model):
        if not isinstance(raw, dict):
            raise ValueError("a %s from the API is not a JSON object: %r" % (model.__name__, raw))
        self.__dict__["_raw"] = raw
        self.__dict__["_model"] = model

    def __getattr__(self, name):
        model = self.__dict__["_model"]
        kind = model.openapi_types.get(name)
        if kind is None:
            raise AttributeError("%s has no attribute %r" % (model.__name__, name))
        value = _typed(self.__dict__["_raw"].get(model.attribute_map[name]), kind)
        self.__dict__[name] = value
        return value

    def __eq__(self, other):
        return isinstance(other, ApiObject) and (self._model, self._raw) == (other._model, other._raw)

    __hash__ = None

    def __repr__(self):
        return "%s(%s)" % (self._model.__name__, json.dumps(self._raw, sort_keys=True))


def listed(call, kind):
    """What the client's list function ``call`` answers, as an
    :class:`ApiObject` of the model ``kind`` (``V1PodList``, say), or as
    its JSON where ``kind`` is None (a custom resource's list)."""
    data = json.loads(call(_preload_content=False).data)
    return data if kind is None else ApiObject(data, getattr(k8s_client, kind))


def _drain(response):
    """Read an answer whose content is not wanted (the patched pod: the
    watch brings it anyway, and making the client's model of it cost more
    than the request), so that its connection serves the next request."""
    response.read()
    response.release_conn()


class Said:
    """What a daemon has said (posted as Events), so that each thing is said
    once: ``{key: {reason: what}}``, shared by the threads that report on
    one object (a lock around every read and write)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.said = {}

    def fresh(self, key, reason, what):
        """Whether ``what`` of ``reason`` on ``key`` is not said yet."""
        with self.lock:
            return self.said.get(key, {}).get(reason) != what

    def mark(self, key, reason, what):
        with self.lock:
            self.said.setdefault(key, {})[reason] = what

    def unsay(self, key, reasons=None, keep=()):
        """Forget ``reasons`` said of ``key`` (every one but ``keep`` when
        None): said again, should they recur."""
        with self.lock:
            said = self.said.get(key)
            if said is not None:
                self.said[key] = dict((r, v) for r, v in said.items()
                                      if r in keep or (reasons is not None and r not in reasons))
                if not self.said[key]:
                    del self.said[key]


class PodWriter:
    """Events on pods and merge patches of them, for one component."""

    def __init__(self, core, component):
        self.core = core
        self.component = component
        # whether this client takes ``_content_type``: None until tried
        self.content_type = None
        # acting(what): raises when this process may not write now (a
        # watcher that does not lead); None: it always may
        self.acting = None

    def event(self, obj, reason, message, kind="Warning", involved="Pod", api_version="v1"):
        """An Event of ``reason`` on ``obj`` (a pod, or the ``involved``
        kind of object, of ``api_version``), ``message`` cut to 1 KiB."""
        if self.acting is not None:
            self.acting("Event %s" % reason)
        meta = obj.metadata
        now = datetime.datetime.now(datetime.timezone.utc)
        self.core.create_namespaced_event(meta.namespace, k8s_client.CoreV1Event(
            metadata=k8s_client.V1ObjectMeta(generate_name=meta.name + ".", namespace=meta.namespace),
            involved_object=k8s_client.V1ObjectReference(
                kind=involved, api_version=api_version, name=meta.name, namespace=meta.namespace, uid=meta.uid),
            reason=reason, message=message[:1024], type=kind, count=1,
            first_timestamp=now, last_timestamp=now,
            source=k8s_client.V1EventSource(component=self.component)))

    def annotate(self, meta, annotations, read=None):
        """Write ``annotations`` on the pod of ``meta`` with an RFC 6902
        JSON Patch that applies only to the very pod read (``test`` of its
        UID) still asking what it asked when read (``test`` of each of
        ``read``, ``{annotation: value}``): a pod deleted and made again
        under its name, or a request changed meanwhile (a value of None:
        the form was absent, and must still be), makes the API server
        refuse the whole patch (422), and the caller's retry reads the pod
        anew. So a list written late, by a deposed leader among others,
        never lands on a pod it was not made for."""
        def pointer(key):
            return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
        ops = [{"op": "test", "path": "/metadata/uid", "value": meta.uid}]
        if meta.annotations:
            ops += [{"op": "test", "path": pointer(k), "value": v} for k, v in sorted((read or {}).items())]
            ops += [{"op": "add", "path": pointer(k), "value": v} for k, v in sorted(annotations.items())]
        else:
            # "add" needs the map, and a test below a missing one fails: a pod read
            # without annotations gets them whole, if it still has none (no form either)
            ops.append({"op": "test", "path": "/metadata/annotations", "value": None})
            ops.append({"op": "add", "path": "/metadata/annotations", "value": dict(annotations)})
        self.patch(meta, ops, JSON_PATCH)

    def patch(self, meta, body, content_type=MERGE_PATCH):
        """A patch of the pod (a JSON merge patch unless ``content_type``
        says otherwise), whatever the client's generation.
        Clients that take ``_content_type`` are told the type. The others
        (Debian 12's 22.6 and Debian 13's 30.1) choose it themselves, and
        30.1 chooses a JSON patch for a dict, which an API server refuses:
        for them the same request goes through the client's own
        ``call_api`` with the type in its headers. Which kind the client is
        is learnt from its first answer (an ApiTypeError is raised before
        anything is sent) and kept."""
        if self.acting is not None:
            self.acting("the patch of pod %s/%s" % (meta.namespace, meta.name))
        if self.content_type is not False:
            try:
                _drain(self.core.patch_namespaced_pod(meta.name, meta.namespace, body, _content_type=content_type,
                                                      _preload_content=False))
                self.content_type = True
                return
            except k8s_client.exceptions.ApiTypeError:
                if self.content_type:
                    raise
                self.content_type = False
        _drain(self.core.api_client.call_api(
            POD_PATH, "PATCH", path_params={"namespace": meta.namespace, "name": meta.name},
            query_params=[], header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body, response_type=None, auth_settings=["BearerToken"], _return_http_data_only=True,
            _preload_content=False))


if k8s_watch is not None:
    class _JsonWatch(k8s_watch.Watch):
        """The client's watch, its events' objects left as the API's JSON
        (every generation of the client leaves them so when it knows no
        model to make): ListWatch makes them :class:`ApiObject`."""

        def get_return_type(self, func):
            return None


class ListWatch:
    """List, then watch from the list's resourceVersion, for ever: the
    informer loop of client-go, for one kind. ``relist()`` lists (and
    takes the list into its cache) and returns the resourceVersion;
    ``list_call`` is the client's list function, streamed as a watch;
    ``observe(obj, deleted)`` takes each event, an :class:`ApiObject` of
    the model ``kind`` (``V1Pod``, say), or its JSON where ``kind`` is None
    (a custom resource, which the client has no model of). It lists again at start,
    after 410 Gone and every ``resync_seconds``; an unreachable or failing
    API server is retried with backoff. :meth:`stop` ends it."""

    def __init__(self, what, kind, relist, list_call, observe, stopping, resync_seconds, watch_seconds,
                 max_backoff):
        self.what = what
        self.kind = kind
        self.relist = relist
        self.list_call = list_call
        self.observe = observe
        self.stopping = stopping
        self.resync_seconds = resync_seconds
        self.watch_seconds = watch_seconds
        self.max_backoff = max_backoff
        self._watch = None

    def stop(self):
        watch = self._watch
        if watch is not None:
            watch.stop()
            response = getattr(watch, "_resp", None)
            if response is not None:
                try:
                    response.close()
                except Exception:  # noqa: the stream is being torn down anyway
                    pass

    def run(self):
        backoff = Backoff(self.max_backoff)
        version, listed_at = None, 0.0
        while not self.stopping.is_set():
            try:
                if version is None or time.monotonic() - listed_at > self.resync_seconds:
                    version = self.relist()
                    listed_at = time.monotonic()
                    if version is ABSENT:
                        version = None
                        self.stopping.wait(self.resync_seconds)
                        continue
                self._watch = _JsonWatch()
                model = getattr(k8s_client, self.kind) if self.kind else None
                for event in self._watch.stream(self.list_call, resource_version=version,
                                                timeout_seconds=self.watch_seconds):
                    if model is None:
                        obj = event["object"]
                        version = (obj.get("metadata") or {}).get("resourceVersion")
                    else:
                        obj = ApiObject(event["object"], model)
                        version = obj.metadata.resource_version
                    self.observe(obj, event["type"] == "DELETED")
                    if self.stopping.is_set():
                        break
                backoff.reset()
            except ApiException as exc:
                if exc.status == 410:
                    LOG.info("the %s watch expired (410 Gone); listing again", self.what)
                    version = None
                    continue
                self._retry_later(backoff, "the API server answered %s" % exc.status)
            except Exception as exc:  # noqa: connection errors of every kind; retried
                if self.stopping.is_set():
                    break
                self._retry_later(backoff, "the API server is unreachable: %s" % exc)
            finally:
                self._watch = None

    def _retry_later(self, backoff, why):
        delay = backoff.next()
        LOG.warning("%s: %s; retrying in %.1fs", self.what, why, delay)
        self.stopping.wait(delay)


def start_threads(watches, work, name):
    """The threads of ``watches`` (:class:`ListWatch`) and one worker
    running ``work``, named ``name``, started; returned, to be joined."""
    threads = [threading.Thread(target=w.run, name="watch-" + w.what, daemon=True) for w in watches]
    threads.append(threading.Thread(target=work, name=name, daemon=True))
    for thread in threads:
        thread.start()
    return threads


def stop_threads(queue, watches):
    """End a worker's ``queue`` and its ``watches``."""
    queue.shutdown()
    for watch in watches:
        watch.stop()
