"""Cache of parsed rank tables, so a folder parses once and then reopens in milliseconds.

Key: the file's size, modification time, a BLAKE2 hash of its first and last 64 KiB and a CRC32
of its whole content (isal's, ~8 GB/s: an edit anywhere changes the key, whatever the size and
time say), plus the loader options and the cache format version; a changed file gets a new key
and is never served stale. Entries are uncompressed Arrow IPC files, one per table (Feather v2:
readable by pyarrow, polars, duckdb), and one JSON file of metadata holding each table file's
CRC32 and its own, written to a temporary folder and renamed into place. A reopen maps the files
and turns a table into a DataFrame when an analysis first reads it, after checking that file's
CRC32: the cache never serves bytes it did not write. A corrupt, partial, edited or foreign
entry is rebuilt from the trace file and counted in the rank's health (``cache_rebuilt``);
nothing is unpickled.

Location: ``cache_dir=`` argument, else ``$HTA_LITE_CACHE_DIR``, else the user cache folder
(``$XDG_CACHE_HOME/hta_lite`` or ``~/.cache/hta_lite``), so read-only trace folders work.
``HTA_LITE_CACHE=off`` (or ``0``/``false``/``no``) or ``cache=False`` turns it off.

Size: after each load the least recently used entries are removed until the folder holds at
most ``$HTA_LITE_CACHE_MAX_GB`` (default 10) GB, except those the load itself used; an entry is
used when it is written or read.
``clear()`` (or ``hta-lite cache clear``) empties it; ``usage()`` (``hta-lite cache info``) says
what it holds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import msgspec
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
from isal.isal_zlib import crc32

from ..classify import RULES_KEY
from ..errors import TraceReadError
from .cache_folder import (  # noqa: F401 - the cache's interface is one module
    _TMP_PREFIX,
    MARKER,
    STALE_TMP_SECONDS,
    clear,
    entries,
    evict,
    max_bytes,
    usage,
)
from .columns import TEXT
from .finish import StepRule
from .gzip_text import open_regular
from .health_items import record
from .rank_trace import RankTrace, parse_parts

TEXT_DTYPE = pd.Index([], dtype=TEXT).dtype

FORMAT_VERSION = 27  # 2: kernel_counters; 3: zero-length nesting; 4: health codes; 5: op inputs;
# 6: collective args on cpu rows; 7: GPU-side waits; 8: allocator args of instants; 9: Arrow IPC;
# 10: checksums; 11: launched_kernel; 12: the entry marker; 13, 14: files of several ranks;
# 15: cpu.forward_row; 16: cpu.msg_bytes; 17: Nsight Systems' grouped NCCL calls and ranks;
# 18: overlaps on a stream that the launch allows (health codes); 19: steps cut at the record
# window's end; 20: Nsight Systems steps from the repeating GPU work; 21: from one host resume
# to the next; 22: Nsight Systems syncs named after their calls; 23: Kineto traces without
# ProfilerSteps take found steps too; 24: a last step range the program closed is kept; 25: no
# steps from GPU work or ranges repeating faster than MIN_STEP_NS; 26: an end that overruns the
# next event on its stream clipped; 27: ProfilerSteps out of number order dropped
TABLES = RankTrace.TABLES
_SAMPLE = 1 << 16


def enabled(cache: bool | str | Path | None) -> bool:
    """An explicit ``cache`` argument wins; by default (None) ``HTA_LITE_CACHE`` decides."""
    if cache is not None:
        return cache is not False
    return os.environ.get("HTA_LITE_CACHE", "on").strip().lower() not in ("off", "0", "false", "no")


def cache_dir(cache: bool | str | Path | None = None) -> Path:
    if isinstance(cache, (str, Path)):
        return Path(cache).expanduser()
    if os.environ.get("HTA_LITE_CACHE_DIR"):
        return Path(os.environ["HTA_LITE_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "hta_lite"


def entry_key(path: Path, include_last_profiler_step) -> str:
    """The cache entry's name for ``path``: its size, time and first and last bytes, the format
    version and the kernel-type rules (:data:`~hta_lite.classify.RULES_KEY`), hashed; a
    ``TraceReadError`` for a file that cannot be read or is not a regular file (a FIFO named
    like a trace is not opened for reading: that would wait for a writer)."""
    with open_regular(path) as f:
        st = os.fstat(f.fileno())
        digest = hashlib.blake2b(digest_size=20)
        digest.update(
            f"{FORMAT_VERSION}:{RULES_KEY}:{StepRule.of(include_last_profiler_step).key}"
            f":{st.st_size}:{st.st_mtime_ns}".encode()
        )
        digest.update(f.read(_SAMPLE))
        if st.st_size > _SAMPLE:
            f.seek(max(st.st_size - _SAMPLE, _SAMPLE))
            digest.update(f.read(_SAMPLE))
        f.seek(0)
        crc = 0
        for piece in iter(lambda: f.read(_PIECE), b""):
            crc = crc32(piece, crc)
        digest.update(f":{crc}".encode())
    return digest.hexdigest()


_PIECE = 1 << 20


class _Meta(msgspec.Struct):
    version: int
    key: str
    rank: int
    path: str
    metadata: dict
    events_read: dict[str, int]
    health: dict[str, int]
    tables: dict[str, int]  # CRC32 of each table's file
    part: int = 0  # which rank of its file (a fused file holds several)
    parts: int = 1  # how many ranks its file holds
    source_format: str = "kineto"
    check: int = 0  # CRC32 of this record with check = 0


def _checked(meta: _Meta) -> int:
    return crc32(msgspec.json.encode(msgspec.structs.replace(meta, check=0)))


def part_key(key: str, part: int) -> str:
    """The entry name of rank ``part`` of a file whose entry is ``key`` (part 0: ``key``)."""
    if part == 0:
        return key
    return hashlib.blake2b(f"{key}:{part}".encode(), digest_size=20).hexdigest()


def load(root: Path, key: str, path: Path, include_last_profiler_step: bool):
    """The cached ranks of the file (a list: one, or several for a file holding several), or
    None when absent (never raises); an entry that is there but unusable (cut, edited, of
    another version, a rank of the file missing) is :data:`REBUILD` (the caller parses the
    file and counts it). Tables are read when first used (memory-mapped Arrow files, their
    CRC32 checked, then DataFrames)."""
    first = _load_part(root, key, path, include_last_profiler_step, 0)
    if not isinstance(first, tuple):
        return first
    trace, parts = first
    out = [trace]
    for part in range(1, parts):
        more = _load_part(root, key, path, include_last_profiler_step, part)
        if not isinstance(more, tuple) or more[1] != parts:
            return REBUILD
        out.append(more[0])
    return out


def _load_part(root: Path, key: str, path: Path, include_last: bool, part: int):
    """``(trace, parts)`` of one rank's entry; None or :data:`REBUILD` as :func:`load` says."""
    name = part_key(key, part)
    folder = root / name
    try:
        text = (folder / "meta.json").read_bytes()
    except OSError:
        return None if part == 0 else REBUILD
    try:
        meta = msgspec.json.decode(text, type=_Meta)
        if (
            meta.version != FORMAT_VERSION
            or meta.key != name
            or meta.part != part
            or not 0 < meta.parts <= MAX_PARTS
            or meta.check != _checked(meta)
            or set(meta.tables) != set(TABLES)
        ):
            return REBUILD
    except (OSError, msgspec.MsgspecError, ValueError):
        return REBUILD
    try:
        os.utime(folder / "meta.json")  # last used now: the eviction order
    except OSError:
        pass  # a read-only cache is read, not refreshed
    build = _Tables(root, key, path, include_last, meta.tables, meta.health, part)
    trace = RankTrace.deferred(
        build,
        rank=meta.rank,
        path=meta.path,
        metadata=meta.metadata,
        events_read=meta.events_read,
        health=meta.health,
        source_format=meta.source_format,
        part=part,
    )
    return trace, meta.parts


#: the most ranks one file's entries may say it holds (a bound on what a meta.json can ask for)
MAX_PARTS = 1 << 20


def by_address(trace: RankTrace) -> RankTrace | None:
    """``trace`` without the tables it has read, when it was reopened from the cache (its
    tables then travel to a worker process as the entry's address, a few bytes, and are read
    there from the memory-mapped files); None for a trace that is not a cache entry."""
    build = trace.__dict__.get("_build")
    if not isinstance(build, _Tables):
        return None
    return RankTrace.deferred(build, **trace._fields())


#: what :func:`load` answers for an entry that is there but unusable
REBUILD = "rebuild"


class _Tables:
    """Reads the tables of one cache entry when first used: the Arrow file is memory-mapped
    (no copy) and converted to a DataFrame. Pickles as the entry's address, so a worker hands
    a reopened rank to the caller in a few bytes. A table file that is gone or unreadable by
    then means the trace file is parsed again (same key: same content) and the entry
    rewritten."""

    def __init__(
        self, root: Path, key: str, path: Path, include_last_profiler_step: bool,
        checksums: dict[str, int], health: dict[str, int], part: int = 0,
    ):  # fmt: skip
        self.address = (root, key, path, include_last_profiler_step, checksums, health, part)
        self.checksums, self.health = checksums, health
        self.parsed: RankTrace | None = None

    def __reduce__(self):
        return _Tables, self.address

    def __call__(self, name: str) -> pd.DataFrame:
        root, key, path, include_last = self.address[:4]
        part = self.address[6]
        if self.parsed is None:
            try:
                with pa.memory_map(str(root / part_key(key, part) / f"{name}.arrow")) as source:
                    data = source.read_buffer()
                    if crc32(memoryview(data)) != self.checksums.get(name):
                        raise ValueError("checksum")
                    table = ipc.open_file(data).read_all()
                return _text_categories(table.to_pandas())
            except (OSError, pa.ArrowException, ValueError, TypeError):
                parsed = _parse_same_version(path, key, include_last)
                store(root, key, parsed)
                self.parsed = parsed[part]
                record(self.health, "cache_rebuilt", 1, f"{name}.arrow")
        return getattr(self.parsed, name)


def _parse_same_version(path: Path, key: str, include_last: bool) -> list[RankTrace]:
    """The trace file parsed again for an entry whose tables are gone, if it is still the
    version the entry was made from (its key before and after the parse); otherwise a
    :class:`TraceReadError`: the tables already read came from the old version, and the new
    one's are never mixed with them."""
    if entry_key(path, include_last) == key:
        parsed = parse_parts(path, include_last)
        if entry_key(path, include_last) == key:
            return parsed
    raise TraceReadError(
        path,
        "the file changed after it was loaded, and its cached tables are gone (evicted):"
        " load it again for the new version's analyses",
    )


def _text_categories(df):
    """Empty text categoricals come back from Arrow with object categories: restore the text
    dtype."""
    for name in df.columns:
        col = df[name]
        if isinstance(col.dtype, pd.CategoricalDtype) and col.cat.categories.dtype != TEXT_DTYPE:
            dtype = pd.CategoricalDtype(pd.Index(col.cat.categories, dtype=TEXT))
            df[name] = pd.Categorical.from_codes(
                col.cat.codes, dtype=dtype
            )  # 10x cheaper than set_categories
    return df


def _arrow(df: pd.DataFrame) -> pa.Table:
    """Arrow table of ``df``; all-missing text categoricals get a string dictionary (Arrow would
    otherwise store a null dictionary, which pandas 2 reads back as plain objects)."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type) and pa.types.is_null(field.type.value_type):
            empty = pa.DictionaryArray.from_arrays(
                pa.nulls(len(table), pa.int32()), pa.array([], pa.string())
            )
            table = table.set_column(i, field.name, empty)
    return table


def store(root: Path, key: str, traces: list[RankTrace]) -> None:
    """Write the entries of a file's ranks (one each); failures (read-only disk, full disk)
    only mean no cache."""
    for part, trace in enumerate(traces):
        if not _store_part(root, part_key(key, part), trace, part, len(traces)):
            return


def _store_part(root: Path, name: str, trace: RankTrace, part: int, parts: int) -> bool:
    """Write one rank's entry; False when it could not be written."""
    tmp = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=root))
        (tmp / MARKER).write_bytes(b"")
        checksums = {}
        for table_name in TABLES:
            table = _arrow(getattr(trace, table_name))
            sink = pa.BufferOutputStream()
            with ipc.new_file(sink, table.schema) as writer:
                # one batch even when empty: an empty table has none, and would lose the
                # categories of its categoricals (a CPU-only trace's kernel_type)
                columns = [column.combine_chunks() for column in table.columns]
                writer.write_batch(pa.record_batch(columns, schema=table.schema))
            data = sink.getvalue()
            checksums[table_name] = crc32(memoryview(data))
            (tmp / f"{table_name}.arrow").write_bytes(memoryview(data))
        health = {k: v for k, v in trace.health.items() if not k.startswith("cache_rebuilt")}
        meta = _Meta(
            FORMAT_VERSION, name, trace.rank, trace.path, trace.metadata, trace.events_read,
            health, checksums, part, parts, trace.source_format,
        )  # fmt: skip
        meta.check = _checked(meta)
        (tmp / "meta.json").write_bytes(msgspec.json.encode(meta))
        target = root / name
        if target.exists():
            if not (target / MARKER).is_file():  # not ours: never replaced
                raise OSError(f"{target} exists and is not a cache entry")
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        return True
    except (OSError, pa.ArrowException, TypeError, ValueError):
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        return False
