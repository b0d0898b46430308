"""The Kineto JSON reader: one ``*.json`` / ``*.json.gz`` trace (PyTorch profiler) -> one
:class:`~hta_lite.load.finish.ReadRank` per rank it holds.

A file holds one rank (the profiler's export), or several where the ranks' traces were fused
into one (:mod:`.fused`: processes named ``RANK n ...``). A top-level JSON list (the legacy
autograd profiler's ``export_chrome_trace``, Chrome's array format) is read as the events of a
file without metadata. The JSON is decoded by the C decoder in pieces where it is built
(:mod:`hta_lite.load.stream`), else by msgspec (:mod:`hta_lite.load.decode`); the tables are
built by :mod:`hta_lite.load.tables`.
"""

from __future__ import annotations

import gc
from pathlib import Path

from .. import decode as dec
from ..finish import ReadRank
from ..ranks import rank_from_metadata
from ..stream import decode_in_pieces
from ..tables import build_tables
from . import fused

SUFFIXES = (".json", ".json.gz")


def looks_like(head: bytes) -> bool:
    """The first bytes of a file (gunzipped) could start a Kineto JSON trace."""
    text = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    return text[:1] in (b"{", b"[") or not text


def read(path: Path) -> list[ReadRank]:
    """The ranks of one Kineto trace file, tables built, not linked."""
    gc_was_enabled = gc.isenabled()
    gc.disable()  # hundreds of thousands of short-lived containers, no cycles: ~10% faster
    try:
        decoded = decode_in_pieces(path)  # a large file, never whole in memory
        if decoded is None:
            decoded = dec.read_and_decode(path)
        tables, events_read, health = build_tables(decoded)
        del decoded.events
    finally:
        if gc_was_enabled:
            gc.enable()
    parts = fused.split(tables, decoded.metadata, health, path)
    if parts is not None:
        return parts
    rank = rank_from_metadata(decoded.metadata, path)
    kind = "kineto (event list)" if "event_list_file" in health else "kineto"
    return [ReadRank(tables, decoded.metadata, dict(events_read), health, rank, kind)]
