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
import re
import shutil
import tempfile
import time
from pathlib import Path

import msgspec
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
from isal.isal_zlib import crc32

from ..errors import TraceReadError
from ..settings import env_limit
from .columns import TEXT
from .gzip_text import open_regular
from .health_items import record
from .rank_trace import RankTrace, parse_file

TEXT_DTYPE = pd.Index([], dtype=TEXT).dtype

FORMAT_VERSION = 12  # 2: kernel_counters; 3: zero-length nesting; 4: health codes; 5: op inputs;
# 6: collective args on cpu rows; 7: GPU-side waits; 8: allocator args of instants; 9: Arrow IPC;
# 10: checksums; 11: launched_kernel; 12: the entry marker
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


def entry_key(path: Path, include_last_profiler_step: bool) -> str:
    """The cache entry's name for ``path``: its size, time and first and last bytes, hashed; a
    ``TraceReadError`` for a file that cannot be read or is not a regular file (a FIFO named
    like a trace is not opened for reading: that would wait for a writer)."""
    with open_regular(path) as f:
        st = os.fstat(f.fileno())
        digest = hashlib.blake2b(digest_size=20)
        digest.update(
            f"{FORMAT_VERSION}:{include_last_profiler_step}:{st.st_size}:{st.st_mtime_ns}".encode()
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
    check: int = 0  # CRC32 of this record with check = 0


def _checked(meta: _Meta) -> int:
    return crc32(msgspec.json.encode(msgspec.structs.replace(meta, check=0)))


def load(root: Path, key: str, path: Path, include_last_profiler_step: bool) -> RankTrace | None:
    """The cached trace, or None when absent (never raises); an entry that is there but
    unusable (cut, edited, of another version) is :data:`REBUILD` (the caller parses the file
    and counts it). Its tables are read when first used (memory-mapped Arrow files, their CRC32
    checked, then DataFrames)."""
    folder = root / key
    try:
        text = (folder / "meta.json").read_bytes()
    except OSError:
        return None
    try:
        meta = msgspec.json.decode(text, type=_Meta)
        if (
            meta.version != FORMAT_VERSION
            or meta.key != key
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
    return RankTrace.deferred(
        _Tables(root, key, path, include_last_profiler_step, meta.tables, meta.health),
        rank=meta.rank,
        path=meta.path,
        metadata=meta.metadata,
        events_read=meta.events_read,
        health=meta.health,
    )


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
        checksums: dict[str, int], health: dict[str, int],
    ):  # fmt: skip
        self.address = (root, key, path, include_last_profiler_step, checksums, health)
        self.checksums, self.health = checksums, health
        self.parsed: RankTrace | None = None

    def __reduce__(self):
        return _Tables, self.address

    def __call__(self, name: str) -> pd.DataFrame:
        root, key, path, include_last = self.address[:4]
        if self.parsed is None:
            try:
                with pa.memory_map(str(root / key / f"{name}.arrow")) as source:
                    data = source.read_buffer()
                    if crc32(memoryview(data)) != self.checksums.get(name):
                        raise ValueError("checksum")
                    table = ipc.open_file(data).read_all()
                return _text_categories(table.to_pandas())
            except (OSError, pa.ArrowException, ValueError, TypeError):
                self.parsed = _parse_same_version(path, key, include_last)
                store(root, key, self.parsed)
                record(self.health, "cache_rebuilt", 1, f"{name}.arrow")
        return getattr(self.parsed, name)


def _parse_same_version(path: Path, key: str, include_last: bool) -> RankTrace:
    """The trace file parsed again for an entry whose tables are gone, if it is still the
    version the entry was made from (its key before and after the parse); otherwise a
    :class:`TraceReadError`: the tables already read came from the old version, and the new
    one's are never mixed with them."""
    if entry_key(path, include_last) == key:
        parsed = parse_file(path, None, include_last)
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


def store(root: Path, key: str, trace: RankTrace) -> None:
    """Write the entry; failures (read-only disk, full disk) only mean no cache."""
    tmp = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=root))
        (tmp / MARKER).write_bytes(b"")
        checksums = {}
        for name in TABLES:
            table = _arrow(getattr(trace, name))
            sink = pa.BufferOutputStream()
            with ipc.new_file(sink, table.schema) as writer:
                # one batch even when empty: an empty table has none, and would lose the
                # categories of its categoricals (a CPU-only trace's kernel_type)
                columns = [column.combine_chunks() for column in table.columns]
                writer.write_batch(pa.record_batch(columns, schema=table.schema))
            data = sink.getvalue()
            checksums[name] = crc32(memoryview(data))
            (tmp / f"{name}.arrow").write_bytes(memoryview(data))
        health = {k: v for k, v in trace.health.items() if not k.startswith("cache_rebuilt")}
        meta = _Meta(
            FORMAT_VERSION,
            key,
            trace.rank,
            trace.path,
            trace.metadata,
            trace.events_read,
            health,
            checksums,
        )
        meta.check = _checked(meta)
        (tmp / "meta.json").write_bytes(msgspec.json.encode(meta))
        target = root / key
        if target.exists():
            if not (target / MARKER).is_file():  # not ours: never replaced
                raise OSError(f"{target} exists and is not a cache entry")
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except (OSError, pa.ArrowException, TypeError, ValueError):
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


DEFAULT_MAX_GB = 10.0


def max_bytes() -> float:
    """The size cap: ``$HTA_LITE_CACHE_MAX_GB`` (default 10; ``inf``: no cap) in bytes; a value
    that is not a positive number is a :class:`~hta_lite.errors.SettingError`."""
    return env_limit("HTA_LITE_CACHE_MAX_GB", DEFAULT_MAX_GB) * 1e9


#: an entry's folder name (the key: 40 hex digits) and the file that marks it as ours; a store
#: in progress (or killed) is a folder named ``.hta_lite-tmp-*`` holding the marker too
_ENTRY_NAME = re.compile(r"[0-9a-f]{40}")
MARKER = "hta_lite-cache-entry"
_TMP_PREFIX = ".hta_lite-tmp-"
#: a temporary folder older than this is a killed store's leftover (a store takes seconds)
STALE_TMP_SECONDS = 600.0


class _Key(msgspec.Struct):
    key: str


def _owned(folder: str, name: str) -> bool:
    """A folder this cache created: an entry (its name a key, our marker, a meta.json naming
    that key) or a store's temporary folder (its prefix and our marker). Nothing else in the
    cache folder is ever listed, counted or removed."""
    if not os.path.isfile(os.path.join(folder, MARKER)):
        return False
    if name.startswith(_TMP_PREFIX):
        return True
    if not _ENTRY_NAME.fullmatch(name):
        return False
    try:
        with open(os.path.join(folder, "meta.json"), "rb") as f:
            return msgspec.json.decode(f.read(1 << 24), type=_Key).key == name
    except (OSError, msgspec.MsgspecError):
        return False


def _size(folder: str) -> int:
    return sum(f.stat().st_size for f in os.scandir(folder) if f.is_file(follow_symlinks=False))


def entries(root: Path, leftovers: bool = False) -> list[tuple[Path, int, float]]:
    """``(folder, bytes, last used)`` of every entry this cache created, least recently used
    first; with ``leftovers`` the temporary folders of stores instead (time: last changed)."""
    out = []
    try:
        listed = list(os.scandir(root))
    except OSError:
        return []
    for entry in listed:
        if entry.name.startswith(_TMP_PREFIX) != leftovers:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or not _owned(entry.path, entry.name):
                continue
            stamp = entry.path if leftovers else os.path.join(entry.path, "meta.json")
            out.append((Path(entry.path), _size(entry.path), os.stat(stamp).st_mtime))
        except OSError:
            continue  # removed meanwhile
    return sorted(out, key=lambda e: e[2])


def evict(root: Path, limit: float | None = None, keep_since: float | None = None) -> int:
    """Remove least recently used entries until ``root`` holds at most ``limit`` bytes (default
    :func:`max_bytes`; ``inf``: no limit) and the leftovers of killed stores; returns the bytes
    freed. Never raises. Entries used at or after ``keep_since`` (a time.time()) stay even above
    the limit: a load's ranks read their tables from their entries after the load returns, so a
    load larger than the cap keeps its own entries until a later load evicts them. Only folders
    this cache created are touched."""
    limit = max_bytes() if limit is None else limit
    freed = 0
    for folder, size, changed in entries(root, leftovers=True):
        if changed < time.time() - STALE_TMP_SECONDS:
            shutil.rmtree(folder, ignore_errors=True)
            freed += size
    listed = entries(root)
    total = sum(size for _, size, _ in listed)
    for folder, size, used in listed:
        if total <= limit or (keep_since is not None and used >= keep_since):
            break
        shutil.rmtree(folder, ignore_errors=True)
        total -= size
        freed += size
    return freed


def usage(root: Path) -> dict:
    """``{"folder", "entries", "bytes", "max_bytes", "leftovers", "leftover_bytes"}`` of the
    cache (leftovers: temporary folders of stores in progress or killed)."""
    listed, leftovers = entries(root), entries(root, leftovers=True)
    return {
        "folder": str(root),
        "entries": len(listed),
        "bytes": sum(size for _, size, _ in listed),
        "max_bytes": max_bytes(),
        "leftovers": len(leftovers),
        "leftover_bytes": sum(size for _, size, _ in leftovers),
    }


def clear(root: Path) -> int:
    """Remove every entry and the leftovers of interrupted stores, nothing else; returns the
    entries removed."""
    listed = entries(root)
    for folder, _, _ in listed + entries(root, leftovers=True):
        shutil.rmtree(folder, ignore_errors=True)
    return len(listed)
