"""NCCL's NVTX payloads in an Nsight Systems export: each call's communicator and message size.

NCCL (2.19 and later) pushes an NVTX range around each API call (``ncclAllReduce``, ...,
``ncclCommInitRank``) with a binary payload that a schema declares (NCCL's
``src/include/nvtx_payload_schemas.h``): ``NCCL communicator ID`` (uint64, the communicator's
hash: the same on every rank of it), ``Message size [bytes]`` (count x type size of the call: a
reduce_scatter's output, every other collective's input; ``Bytes`` in older NCCL's send / recv)
and, at a communicator's creation, ``No. of ranks`` and ``Rank``. ``nsys export --type sqlite
--include-blobs=true`` writes each payload in ``NVTX_EVENTS.binaryData`` (a 32-byte header: domain
id, schema id, payload size; then the payload) and the schemas in ``NVTX_PAYLOAD_SCHEMAS``
(``payloadSize``) and ``NVTX_PAYLOAD_SCHEMA_ENTRIES`` (``name``, ``type``, ``offset`` of each
entry; NULL offsets laid out by natural alignment). An export of NCCL kernels without them has no
sizes or communicators for its calls (health: ``nccl_payloads_absent``, said by the reader).

Hostile input: a blob shorter than its header or its schema's payload, an entry past the payload
or of a type that is not an integer, a schema declared twice: skipped and counted
(``nccl_payload_unreadable``); nothing read from a blob sizes an allocation.
"""

from __future__ import annotations

import json
import struct
from collections import Counter

import numpy as np

from ..health_items import note
from ..tables import BYTES_LIMIT

HEADER = 32
#: NVTX payload entry types that are integers: size in bytes and signedness
#: (nvToolsExtPayload.h: CHAR 1 ... ULONGLONG 10, INT8 11 ... UINT64 18, SIZE 22, ADDRESS 23)
INT_TYPES = {
    1: (1, True), 2: (1, False), 3: (2, True), 4: (2, False), 5: (4, True), 6: (4, False),
    7: (8, True), 8: (8, False), 9: (8, True), 10: (8, False), 11: (1, True), 12: (1, False),
    13: (2, True), 14: (2, False), 15: (4, True), 16: (4, False), 17: (8, True), 18: (8, False),
    22: (8, False), 23: (8, False),
}  # fmt: skip
FIELDS = {  # entry name -> what it is
    "NCCL communicator ID": "comm",
    "Message size [bytes]": "bytes",
    "Bytes": "bytes",
    "No. of ranks": "nranks",
    "Rank": "rank",
}
MAX_RANKS = 1 << 24
JSON_LIMIT, JSON_DEPTH = 1 << 16, 4  # characters of one JSON payload; nesting looked into


def read(db, rowids: np.ndarray, domains: np.ndarray, names: np.ndarray,
         problems: Counter) -> dict[str, np.ndarray]:  # fmt: skip
    """For the NVTX_EVENTS rows ``rowids`` (of NVTX domains ``domains``, named ``names``):
    ``msg_bytes`` (int64, -1 unknown), ``comm`` (the communicator, ``"NCCL comm 0x..."`` text or
    None), ``nranks`` (its size from any of its ranges that records it, -1 unknown) and ``rank``
    (the process's rank in it, where its creation's range records it; -1 elsewhere)."""
    n = len(rowids)
    out = {"msg_bytes": np.full(n, -1, np.int64), "comm": np.full(n, None, object),
           "nranks": np.full(n, -1, np.int64), "rank": np.full(n, -1, np.int64)}  # fmt: skip
    at = {r: i for i, r in enumerate(rowids.tolist())}
    size_of: dict[str, int] = {}
    for i, fields in (*_blob_fields(db, at, domains, problems), *_json_fields(db, at, names)):
        if fields is None:
            note(problems, "nccl_payload_unreadable", 1)
            continue
        size = fields.get("bytes", -1)
        if 0 <= size <= BYTES_LIMIT:
            out["msg_bytes"][i] = size
        elif size > BYTES_LIMIT:
            note(problems, "nccl_payload_unreadable", 1)  # past 16 TiB: not a message size
        if "comm" in fields:
            out["comm"][i] = f"NCCL comm {fields['comm']:#018x}"
            if 0 < fields.get("nranks", 0) <= MAX_RANKS:
                size_of[out["comm"][i]] = fields["nranks"]
                if 0 <= fields.get("rank", -1) < fields["nranks"]:
                    out["rank"][i] = fields["rank"]
    out["nranks"] = np.array([size_of.get(c, -1) for c in out["comm"]], np.int64)
    return out


def _blob_fields(db, at: dict, domains: np.ndarray, problems: Counter) -> list[tuple]:
    """``(row, fields or None)`` of each binary payload (``--include-blobs``) of the rows ``at``
    (NVTX_EVENTS rowid -> row)."""
    if "binaryData" not in db.columns.get("NVTX_EVENTS", ()):
        return []
    blobs = db.con.execute(
        "SELECT rowid, binaryData FROM NVTX_EVENTS WHERE binaryData IS NOT NULL"
    ).fetchall()
    schemas = _schemas(db, problems) if blobs else {}
    if not schemas:  # the reader says once that the sizes are unknown (nccl_payloads_absent)
        return []
    return [(at[r], _decode(blob, int(domains[at[r]]), schemas)) for r, blob in blobs if r in at]


def _json_fields(db, at: dict, names: np.ndarray) -> list[tuple]:
    """``(row, fields or None)`` of each JSON payload (``--include-json``: ``jsonText``, or
    ``jsonTextId`` into ``StringIds``) of an NCCL range (named ``nccl...``) without a binary
    one: the values of NCCL's entry names, looked up as keys (:func:`_from_json`; the layout nsys
    gives them is not documented)."""
    columns = db.columns.get("NVTX_EVENTS", set())
    sources = ['"jsonText"'] if "jsonText" in columns else []
    if "jsonTextId" in columns and db.has("StringIds"):
        sources.append("(SELECT value FROM StringIds WHERE id = jsonTextId)")
    if not sources:
        return []
    doc = f"coalesce({', '.join(sources)}, NULL)"
    blob = " AND binaryData IS NULL" if "binaryData" in columns else ""
    rows = db.con.execute(
        f"SELECT rowid, {doc} FROM NVTX_EVENTS WHERE {doc} IS NOT NULL{blob}"
    ).fetchall()
    out = []
    for r, text in rows:
        i = at.get(r)
        name = names[i] if i is not None else None
        if isinstance(name, str) and name.startswith("nccl"):
            out.append((i, _from_json(text)))
    return out


def _schemas(db, problems: Counter) -> dict[tuple, tuple[int, list]]:
    """(domain id, schema id) -> (payload size, [(field, offset, size, signed), ...]) of the
    fields read. Schema ids are per domain: another library's static schema may reuse NCCL's."""
    if not (db.has("NVTX_PAYLOAD_SCHEMAS") and db.has("NVTX_PAYLOAD_SCHEMA_ENTRIES")):
        return {}
    sizes = {}
    for domain, schema, size in db.con.execute(
        "SELECT domainId, schemaId, payloadSize FROM NVTX_PAYLOAD_SCHEMAS"
    ):
        if isinstance(schema, int) and isinstance(size, int) and 0 <= size <= 1 << 20:
            if sizes.setdefault((domain, schema), size) != size:
                note(problems, "nccl_payload_unreadable", 1)  # two sizes for one schema
    entries: dict[tuple, list] = {}
    rows = db.con.execute(
        'SELECT domainId, schemaId, idx, name, type, "offset" FROM NVTX_PAYLOAD_SCHEMA_ENTRIES'
        " ORDER BY domainId, schemaId, idx"
    ).fetchall()
    for domain, schema, _, name, kind, offset in rows:
        entries.setdefault((domain, schema), []).append((name, kind, offset))
    out = {}
    for schema, size in sizes.items():
        fields, end = [], 0
        for position, (name, kind, offset) in enumerate(entries.get(schema, [])):
            width, signed = INT_TYPES.get(kind, (8, False))
            if not isinstance(offset, int) or (offset <= 0 and position > 0):
                offset = -(-end // width) * width  # natural alignment after the previous entry
            end = offset + width
            if FIELDS.get(name) and kind in INT_TYPES and 0 <= offset and end <= size:
                fields.append((FIELDS[name], offset, width, signed))
            elif FIELDS.get(name):
                note(problems, "nccl_payload_unreadable", 1)
        out[schema] = (size, fields)
    return out


def _from_json(doc) -> dict | None:
    """NCCL's fields in one JSON payload: the first value of each entry name found as a key (at
    most :data:`JSON_DEPTH` deep), an integer or its decimal / hex text; None when it is not
    JSON or past :data:`JSON_LIMIT` characters."""
    if not isinstance(doc, str) or len(doc) > JSON_LIMIT:
        return None
    try:
        value = json.loads(doc)
    except (ValueError, RecursionError):
        return None
    fields: dict[str, int] = {}
    stack = [(value, 0)]
    while stack:
        value, depth = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, x in items:
            number = _integer(x) if key in FIELDS else None
            if number is not None:
                fields.setdefault(FIELDS[key], number)
            elif isinstance(x, (dict, list)) and depth < JSON_DEPTH:
                stack.append((x, depth + 1))
    return fields


def _integer(value) -> int | None:
    """A JSON value as an integer in [0, 2**64): an integer, or its decimal or ``0x`` text."""
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value < 1 << 64 else None


def _decode(blob, domain: int, schemas: dict) -> dict | None:
    """The fields of one payload of NVTX domain ``domain``, None when it cannot be read."""
    if isinstance(blob, str):  # a text column read as text: hex, as some tools write it
        try:
            blob = bytes.fromhex(blob)
        except ValueError:
            return None
    if not isinstance(blob, bytes) or len(blob) < HEADER:
        return None
    (schema,) = struct.unpack_from("<Q", blob, 8)
    if (domain, schema) not in schemas:
        return None
    size, fields = schemas[domain, schema]
    if len(blob) < HEADER + size:
        return None
    return {
        name: int.from_bytes(blob[HEADER + at : HEADER + at + width], "little", signed=signed)
        for name, at, width, signed in fields
    }
