"""The NB's own transaction history, read from its database file.

What the watcher replicas wrote is judged from the file ovsdb-server keeps,
not from an update stream (which loses what happens while a client
reconnects, and names no writer): each record of a standalone database
(``OVSDB JSON <length> <sha1>`` then the record) is one committed
transaction, in order, with its comment. Every transaction a watcher
commits carries ``marks.TERM_COMMENT`` with its term and identity, and
the takeover that advanced the term says so (``ovsdb/fence.py``).

:func:`read` yields :class:`Record` s; :func:`stale_writes` names the
watcher records made under a term that was no longer the one in force
when they were committed; :func:`port_inserts` counts the pod ports
inserted per ``(pod uid, interface)``.
"""

import collections
import json
import re

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import marks

_HEADER = re.compile(rb"^OVSDB JSON (\d+) [0-9a-f]+$")
_COMMENT = re.compile(r"^%s(\d+) holder=(\S+)( takes over)?$" % re.escape(marks.TERM_COMMENT))


class Record(collections.namedtuple("Record", "index comment term holder takes_over tables")):
    """One committed transaction: its comment, the term and holder its
    comment names (None for a transaction no watcher made), whether it
    took the term, and ``{table: {uuid: row or None}}`` as stored (a row
    of an update is the changed columns only)."""


def read(path, base=False):
    """Every transaction record of the standalone database file at
    ``path``, after its schema. A clustered file is refused: this reader
    knows only the standalone format. ``base``: the file began with a
    snapshot (``ovsdb-tool convert`` made it), its first record, the state
    it started from; any later one is a compaction."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data.startswith(b"OVSDB CLUSTER"):
        raise ValueError("%s is a clustered database file; only standalone files are read here" % path)
    records, offset, index = [], 0, 0
    while offset < len(data):
        end = data.index(b"\n", offset)
        match = _HEADER.match(data[offset:end])
        if not match:
            raise ValueError("%s: no record header at byte %d" % (path, offset))
        length = int(match.group(1))
        body = json.loads(data[end + 1:end + 1 + length])
        offset = end + 1 + length
        while offset < len(data) and data[offset:offset + 1] == b"\n":
            offset += 1
        if index > (1 if base else 0) and not body.get("_is_diff"):
            # a snapshot: ovsdb-server compacted the file, and what it
            # held before is gone; nothing is judged from a part
            raise ValueError("%s was compacted (record %d is a snapshot): its history is incomplete" % (path, index))
        if index > 0:       # the first record is the schema
            comment = body.get("_comment")
            said = _COMMENT.match(comment or "")
            tables = dict((k, v) for k, v in body.items() if not k.startswith("_"))
            records.append(Record(index, comment, int(said.group(1)) if said else None,
                                  said.group(2) if said else None, bool(said and said.group(3)), tables))
        index += 1
    return records


def stale_writes(records):
    """The watcher records whose term was not the one in force when they
    were committed (the last term taken before them)."""
    in_force, stale = None, []
    for record in records:
        if record.takes_over:
            in_force = record.term
        elif record.term is not None and record.term != in_force:
            stale.append(record)
    return stale


def _ids(row):
    value = (row or {}).get("external_ids")
    return dict(value[1]) if isinstance(value, list) and value and value[0] == "map" else {}


def port_inserts(records):
    """``{(pod uid, interface): number of times a pod port for it was
    inserted}``, and for each, the terms of the records that did it."""
    seen, counts, terms = set(), collections.Counter(), collections.defaultdict(list)
    for record in records:
        for uuid, row in record.tables.get("Logical_Switch_Port", {}).items():
            if row is None:
                seen.discard(uuid)
                continue
            if uuid in seen:
                continue            # an update of a row inserted before
            seen.add(uuid)
            ids = _ids(row)
            if ids.get(marks.ROLE) == marks.ROLE_POD:
                key = (ids.get(marks.K_UID), ids.get(marks.K_INTERFACE))
                counts[key] += 1
                terms[key].append(record.term)
    return counts, terms


def takeovers(records):
    """``[(term, holder)]`` in the order they were taken."""
    return [(r.term, r.holder) for r in records if r.takes_over]


def live_twice(records):
    """The ``(pod uid, interface)`` s that ever had two pod ports at once
    (a port inserted while another for it was still there): a double
    write. A port deleted and made again later (an interface removed
    from a running pod and asked for anew) is not one."""
    key_of, live, twice = {}, collections.Counter(), []
    for record in records:
        rows = record.tables.get("Logical_Switch_Port", {})
        for uuid, row in rows.items():          # deletions of the record first
            if row is None and uuid in key_of:
                live[key_of.pop(uuid)] -= 1
        for uuid, row in rows.items():
            if row is None or uuid in key_of:
                continue
            ids = _ids(row)
            if ids.get(marks.ROLE) != marks.ROLE_POD:
                continue
            key = (ids.get(marks.K_UID), ids.get(marks.K_INTERFACE))
            key_of[uuid] = key
            live[key] += 1
            if live[key] > 1:
                twice.append(key)
    return twice


def unattributed(records):
    """The records that inserted or deleted a pod port with no watcher's
    term in their comment: a write that went round the fence."""
    out, pod_ports = [], set()
    for record in records:
        touched = False
        for uuid, row in record.tables.get("Logical_Switch_Port", {}).items():
            if row is None:
                touched = touched or uuid in pod_ports
                pod_ports.discard(uuid)
            elif uuid not in pod_ports and _ids(row).get(marks.ROLE) == marks.ROLE_POD:
                pod_ports.add(uuid)
                touched = True
        if touched and record.term is None:
            out.append(record)
    return out
