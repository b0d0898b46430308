"""Readers, one per input format, side by side behind one contract.

A reader turns one file into tables of the contract (:mod:`hta_lite.load.contract`): its
``read(path)`` gives one :class:`~hta_lite.load.finish.ReadRank` per rank the file holds, and
:func:`hta_lite.load.finish.finish` links each the same way for every format. The loader, the
cache and the batch pick a reader here, by the file's suffix and its first bytes
(:func:`reader_for`); adding a format is a module here and one line in :data:`READERS`
(docs/architecture.md).

- :mod:`.kineto`: PyTorch profiler (Kineto) JSON, one rank a file or several fused
  (:mod:`.fused`);
- :mod:`.nsys`: Nsight Systems SQLite exports, a rank per process that ran GPU work;
  :mod:`.nsys_report`: their reports, exported with ``nsys`` when it is on PATH;
- :mod:`.snapshot`: CUDA memory snapshots (``torch.cuda.memory._dump_snapshot`` pickles), read
  by :class:`hta_lite.MemorySnapshot`, not by the trace loader; :mod:`.memory_timeline`: the raw
  memory timeline ``export_memory_timeline_raw`` writes, read by ``MemoryAnalysis``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...errors import TraceError, TraceFormatError
from .. import gzip_text
from ..finish import ReadRank
from . import kineto, nsys, nsys_report


@dataclass(frozen=True)
class Reader:
    """One input format.

    Attributes:
        name: the format's name (said in health and errors).
        suffixes: file name endings a folder's files are picked by.
        looks_like: whether a file's first bytes (gunzipped) could be this format.
        read: ``read(path) -> [ReadRank, ...]``, one per rank in the file.
        magic: first bytes that only this format has: a file starting with them is read by
            this reader whatever its name.
    """

    name: str
    suffixes: tuple[str, ...]
    looks_like: Callable[[bytes], bool]
    read: Callable[[Path], list[ReadRank]]
    magic: bytes | None = None


#: the trace readers, in the order a file's suffix is matched
READERS: tuple[Reader, ...] = (
    Reader("kineto", kineto.SUFFIXES, kineto.looks_like, kineto.read),
    Reader("nsys", nsys.SUFFIXES, nsys.looks_like, nsys.read, nsys.MAGIC),
    Reader("nsys report", nsys.REPORT_SUFFIXES, lambda head: False, nsys_report.read),
)

#: every suffix a trace folder's files are picked by
TRACE_SUFFIXES: tuple[str, ...] = tuple(s for r in READERS for s in r.suffixes)

#: first bytes of formats no reader reads yet, and what to say
_NOT_READ = {
    b"PK\x03\x04": "a zip archive, not a trace",
    b"\x80": "a Python pickle (a memory snapshot? open it with hta_lite.MemorySnapshot)",
}
_HEAD_BYTES = 64
_GZIP_HEAD_BYTES = 4096  # compressed bytes read to inflate the first 64


def reader_for(path: str | Path) -> Reader:
    """The reader of ``path``: the one whose magic bytes the file starts with, else the one of
    its suffix (a file whose first bytes are a format no reader reads is a
    :class:`TraceFormatError` saying which), else the first whose ``looks_like`` accepts its
    first bytes."""
    path = Path(path)
    head = _head(path)
    for reader in READERS:
        if reader.magic and head.startswith(reader.magic):
            return reader
    for magic, said in _NOT_READ.items():
        if head.startswith(magic):
            raise TraceFormatError(path, said)
    for reader in READERS:
        if path.name.endswith(reader.suffixes):
            return reader
    for reader in READERS:
        if reader.looks_like(head):
            return reader
    raise TraceFormatError(path, "not a format hta_lite reads (" + ", ".join(
        f"{r.name}: {'/'.join(r.suffixes)}" for r in READERS) + ")")  # fmt: skip


def _head(path: Path) -> bytes:
    """The first bytes of the file's text (gunzipped); b"" when it cannot be read (the reader
    then names the problem)."""
    try:
        with gzip_text.open_regular(path) as f:
            raw = f.read(_GZIP_HEAD_BYTES)
    except (OSError, TraceError):
        return b""
    if raw[:2] != gzip_text.GZIP_MAGIC:
        return raw[:_HEAD_BYTES]
    try:
        return zlib.decompressobj(wbits=31).decompress(raw, _HEAD_BYTES)
    except zlib.error:
        return b""  # the reader's gunzip names the problem


def read(path: str | Path) -> list[ReadRank]:
    """Every rank of one file, read by its format's reader."""
    return reader_for(path).read(Path(path))
