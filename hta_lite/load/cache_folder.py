"""The cache's folder: which entries are ours, their sizes, eviction of the least recently used,
what it holds and clearing it (:mod:`hta_lite.load.cache` writes and reads the entries).

Only folders this cache created are ever listed, counted or removed: an entry (its name a key,
holding :data:`MARKER` and a ``meta.json`` naming that key) or a store's temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import msgspec

from ..settings import env_limit

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
