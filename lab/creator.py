"""The failover's creator and witness (``python -m lab failover``), run in
the API stand-in's container beside lab/kubelet.py, whose API client it
uses (the lab's admin, over HTTPS with the lab's CA):

    creator.py run NODES_JSON ANNOTATION STATE STOP SECONDS
    creator.py clean                  delete every pod of the namespace

Every 0.2 s a pod ``fo-<n>`` in the namespace ``failover`` (made when
missing) with the ``ovnNetwork`` ANNOTATION, on the NODES in turn, as
kubectl would create it (no sandbox: what is measured is the watcher's
answer, its ``ovnIfaceList``); one operation in four deletes the oldest
pod it made instead. A watch on the namespace's pods records, on this
clock (the host's: containers share its kernel), when each pod's list
first appears and every value it takes. STATE is written again (whole,
by a rename) every 0.5 s. Creation ends once STOP exists or after
SECONDS; the watch goes on until every pod made and not deleted has its
list, or SERVED_S more; then STATE is written a last time and printed:
``{"pods": {name: {"uid", "created", "deleted", "first", "values"}}, "errors"}``.
"""

import json
import os
import sys
import threading
import time
import urllib.error

from kubelet import api, open_api

NAMESPACE = "failover"
PODS = "/api/v1/namespaces/%s/pods" % NAMESPACE
IFACE_LIST = "ovnIfaceList"
EVERY_S = 0.2
WATCH_S = 30
SERVED_S = 60


class Record:
    def __init__(self):
        self.lock = threading.Lock()
        self.pods, self.errors = {}, []
        # name -> [(uid, list, when)] seen before the creator recorded the pod: the watch
        # may bring a pod's list before its POST's answer is back
        self.early = {}
        self.done = threading.Event()

    def seen(self, pod, at):
        name = pod["metadata"]["name"]
        value = (pod["metadata"].get("annotations") or {}).get(IFACE_LIST)
        with self.lock:
            entry = self.pods.get(name)
            if entry is None and value:
                self.early.setdefault(name, []).append((pod["metadata"]["uid"], value, at))
            if entry is None or entry["uid"] != pod["metadata"]["uid"] or not value:
                return
            self._took(entry, value, at)

    @staticmethod
    def _took(entry, value, at):
        if entry["first"] is None:
            entry["first"] = at
        if value not in entry["values"]:
            entry["values"].append(value)

    def made(self, name, uid, at):
        """The creator's own record of a pod it made, with what the watch
        saw of it first."""
        with self.lock:
            entry = self.pods[name] = {"uid": uid, "created": at, "deleted": None, "first": None, "values": []}
            for seen_uid, value, when in self.early.pop(name, []):
                if seen_uid == uid:
                    self._took(entry, value, when)

    def unserved(self):
        with self.lock:
            return [n for n, p in self.pods.items() if p["first"] is None and p["deleted"] is None]

    def write(self, path):
        with self.lock:
            text = json.dumps({"pods": self.pods, "errors": self.errors[-20:]})
        with open(path + ".new", "w") as handle:
            handle.write(text)
        os.replace(path + ".new", path)
        return text


def watch(record):
    """The namespace's pods, listed then watched (a 410 lists again), until
    the run is done; each pod seen is given to ``record``."""
    version = None
    while not record.done.is_set():
        try:
            if version is None:
                listed = api("GET", PODS)
                for pod in listed["items"]:
                    record.seen(pod, time.time())
                version = listed["metadata"]["resourceVersion"]
            with open_api("GET", "%s?watch=1&resourceVersion=%s&timeoutSeconds=%d" % (PODS, version, WATCH_S),
                          timeout=WATCH_S + 10) as stream:
                for line in stream:
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        version = None
                        break
                    version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        record.seen(event["object"], time.time())
                    if record.done.is_set():
                        break
        except (OSError, ValueError, KeyError) as exc:
            with record.lock:
                record.errors.append("watch: %s" % exc)
            version = None
            record.done.wait(0.5)       # the API's moment, not a fixed wait: ended early when done


def create(record, nodes, annotation, index):
    name = "fo-%d" % index
    asked = time.time()         # before the POST: a pod is "made after" a fault only if asked for after it
    made = api("POST", PODS, {"metadata": {"name": name, "annotations": {"ovnNetwork": annotation}},
                              "spec": {"nodeName": nodes[index % len(nodes)]}})
    record.made(name, made["metadata"]["uid"], asked)


def delete(record):
    with record.lock:
        live = [n for n, p in sorted(record.pods.items(), key=lambda kv: kv[1]["created"]) if p["deleted"] is None]
    if not live:
        return
    try:
        api("DELETE", "%s/%s" % (PODS, live[0]))
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    with record.lock:
        record.pods[live[0]]["deleted"] = time.time()


def run(nodes, annotation, state, stop, seconds):
    try:
        api("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise
    record = Record()
    watcher = threading.Thread(target=watch, args=(record,), daemon=True)
    watcher.start()
    started = time.monotonic()
    index, written = 0, 0.0
    for step in range(int(seconds / EVERY_S) + 1):
        if os.path.exists(stop) or time.monotonic() - started > seconds:
            break
        try:
            if step % 4 == 3:
                delete(record)
            else:
                create(record, nodes, annotation, index)
                index += 1
        except (OSError, urllib.error.HTTPError) as exc:
            with record.lock:
                record.errors.append("step %d: %s" % (step, exc))
        if time.monotonic() - written >= 0.5:
            record.write(state)
            written = time.monotonic()
        # the creator's pace: what it makes, not what it waits for
        time.sleep(max(0.0, started + (step + 1) * EVERY_S - time.monotonic()))
    # what was made is served on the watcher's time: until each pod has its list, bounded
    deadline = time.monotonic() + SERVED_S
    while record.unserved() and time.monotonic() < deadline:
        record.write(state)
        time.sleep(0.2)
    record.done.set()           # the watch thread (a daemon) ends with the process
    return record.write(state)


def clean():
    """Every pod of the namespace deleted (what a run left)."""
    gone = []
    for pod in api("GET", PODS)["items"]:
        try:
            api("DELETE", "%s/%s" % (PODS, pod["metadata"]["name"]))
            gone.append(pod["metadata"]["name"])
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
    return {"deleted": len(gone)}


def main(argv):
    if argv[1] == "run" and len(argv) == 7:
        print(run(json.loads(argv[2]), argv[3], argv[4], argv[5], float(argv[6])))
        return 0
    if argv[1] == "clean" and len(argv) == 2:
        print(json.dumps(clean()))
        return 0
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
