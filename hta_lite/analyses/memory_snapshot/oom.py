"""Out of memory: a real shortage, or fragmentation? The allocator's state at each ``oom`` entry of
the trace (or at the snapshot, for a size asked about), and a verdict.

The state at an entry is the snapshot's walked back (:mod:`.timeline`): the blocks in use then
and the segments then (``segment_alloc`` / ``segment_free`` entries after it undone). The free
blocks are the gaps the blocks in use leave in the segments (the allocator merges neighbouring
free blocks, so a gap is one block). For a request of ``R`` bytes on a stream, with ``F`` bytes
free on the device (CUDA's figure, recorded on the ``oom`` entry):

- **fits in a cached block**: a free block of that stream and the default pool holds ``R``;
- **real shortage**: ``R`` > ``F`` + every cached free byte (all streams and pools);
- **fragmentation**: ``R`` <= ``F`` + the cached free memory of that stream and pool, but no block
  of it is large enough;
- **cache held elsewhere**: enough only with the free memory cached for other streams or for CUDA
  graphs' private pools, which this request cannot use.

Columns: ``device``, ``index``, ``time_us``, ``stream``, ``requested_bytes``,
``device_free_bytes``, ``cached_free_bytes`` (all streams and pools), ``cached_free_same_bytes``
(this stream, default pool), ``largest_free_block_bytes`` (this stream, default pool),
``active_bytes``, ``reserved_bytes``, ``verdict``, ``advice``.
"""

from __future__ import annotations

import bisect

import numpy as np
import pandas as pd

from ...kineto import SNAPSHOT_ACTIVE as ACTIVE
from ...kineto import SNAPSHOT_PENDING as PENDING

DEFAULT_POOL = "(0, 0)"
FITS, SHORTAGE = "fits in a cached block", "real shortage"
FRAGMENTATION, ELSEWHERE = "fragmentation", "cache held elsewhere"
NEW_SEGMENT = "fits in a new segment"
COLUMNS = ["device", "index", "time_us", "stream", "requested_bytes", "device_free_bytes",
           "cached_free_bytes", "cached_free_same_bytes", "largest_free_block_bytes",
           "active_bytes", "reserved_bytes", "verdict", "advice"]  # fmt: skip


def state_at(tables, device: int, index: int) -> tuple[dict, dict]:
    """``(live, segments)`` of ``device`` after its entry ``index`` (the snapshot's state for
    the last one): ``{address: size}`` of the blocks in use, ``{address: (size, stream,
    pool)}`` of the segments."""
    blocks = tables.blocks[tables.blocks["device"].to_numpy() == device]
    in_use = np.isin(blocks["state"].to_numpy(), [ACTIVE, *PENDING])
    live = dict(zip(blocks["address"].to_numpy()[in_use].tolist(),
                    blocks["size"].to_numpy()[in_use].tolist()))  # fmt: skip
    segs = tables.segments[tables.segments["device"].to_numpy() == device]
    segments = {
        a: (s, st, p)
        for a, s, st, p in zip(segs["address"].tolist(), segs["total_size"].tolist(),
                               segs["stream"].tolist(), segs["pool"].tolist())
    }  # fmt: skip
    entries = tables.entries
    later = entries[
        (entries["device"].to_numpy() == device) & (entries["index"].to_numpy() > index)
    ]
    for action, addr, size, stream in zip(
        later["action"].astype(str).tolist()[::-1], later["addr"].tolist()[::-1],
        later["size"].tolist()[::-1], later["stream"].tolist()[::-1],
    ):  # fmt: skip
        if action == "alloc":
            live.pop(addr, None)
        elif action == "free_completed":
            live[addr] = size
        elif action == "segment_alloc":
            segments.pop(addr, None)
        elif action == "segment_free":
            segments[addr] = (size, stream, DEFAULT_POOL)
    return live, segments


def free_blocks(live: dict, segments: dict) -> pd.DataFrame:
    """The gaps the blocks in use leave in the segments: ``address``, ``size``, ``stream``,
    ``pool`` (one row per free block)."""
    starts = sorted(segments)
    rows = []
    by_segment: dict = {s: [] for s in starts}
    for addr, size in sorted(live.items()):  # exact: addresses may pass 2**53
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0:
            start = starts[i]
            if addr < start + segments[start][0]:
                by_segment[start].append((addr, size))
    for start, used in by_segment.items():
        total, stream, pool = segments[start]
        cursor = start
        for addr, size in used:
            if addr > cursor:
                rows.append((cursor, addr - cursor, stream, pool))
            cursor = max(cursor, addr + size)
        if start + total > cursor:
            rows.append((cursor, start + total - cursor, stream, pool))
    return pd.DataFrame(rows, columns=["address", "size", "stream", "pool"])


ADVICE = {
    FITS: "a free block of this stream holds the request: the allocation succeeds at this state",
    NEW_SEGMENT: (
        "no cached block holds it, but CUDA has the memory free for a new segment: the"
        " allocation succeeds at this state (if that free memory is as given)"
    ),
    SHORTAGE: (
        "{short:,} bytes more than CUDA had free plus all the allocator caches: hold less at the"
        " peak (its largest allocation sites: peak().by_site), activation checkpointing, a"
        " smaller batch"
    ),
    FRAGMENTATION: (
        "enough memory is free, but no free block is large enough: set"
        " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place), or"
        " max_split_size_mb to keep large blocks from being split"
    ),
    ELSEWHERE: (
        "the free memory that would fit is cached for other streams or CUDA graphs' private"
        " pools, which this allocation cannot use: torch.cuda.empty_cache() returns the wholly"
        " free segments; allocate on one stream, or release graph pools"
    ),
}


def verdict(
    requested: int, device_free: int, free: pd.DataFrame, stream: int, failed: bool = True
) -> tuple:
    """``(cached_free, cached_free_same, largest_same, verdict, advice)`` for a request;
    ``failed``: it is an out-of-memory that happened (else a request asked about, which a new
    segment serves when CUDA has the memory free)."""
    sizes = free["size"].tolist()
    same = (free["stream"].to_numpy() == stream) & (free["pool"].to_numpy() == DEFAULT_POOL)
    same_sizes = [s for s, keep in zip(sizes, same.tolist()) if keep]
    cached, cached_same = sum(sizes), sum(same_sizes)
    largest = max(same_sizes, default=0)
    available = max(device_free, 0)
    if requested <= largest:
        kind = FITS
    elif not failed and requested <= available:
        kind = NEW_SEGMENT
    elif requested > available + cached:
        kind = SHORTAGE
    elif requested <= available + cached_same:
        kind = FRAGMENTATION
    else:
        kind = ELSEWHERE
    advice = ADVICE[kind].format(short=requested - available - cached)
    return cached, cached_same, largest, kind, advice


def oom_table(tables, replayed) -> pd.DataFrame:
    """A row per ``oom`` entry (``replayed``: the :func:`.timeline.replay` of the snapshot)."""
    entries = tables.entries
    rows = []
    for row in np.flatnonzero((entries["action"] == "oom").to_numpy()).tolist():
        e = entries.iloc[row]
        device, index = int(e["device"]), int(e["index"])
        live, segments = state_at(tables, device, index)
        free = free_blocks(live, segments)
        answer = verdict(int(e["size"]), int(e["device_free"]), free, int(e["stream"]))
        rows.append(
            [device, index, int(e["time_us"]), int(e["stream"]), int(e["size"]),
             int(e["device_free"]), *answer[:3], int(replayed.active[row]),
             replayed.reserved[row], *answer[3:]]
        )  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


#: columns of :func:`at_dump`
DUMP_COLUMNS = ["device", "reserved_bytes", "active_bytes", "cached_free_bytes",
                "largest_free_block_bytes", "fragmentation_pctg", "reading"]  # fmt: skip


def at_dump(tables) -> pd.DataFrame:
    """Per device, what the state at the dump implies for an allocation that fails there (a dump
    taken at an out-of-memory, with or without an ``oom`` entry): ``reserved_bytes``,
    ``active_bytes`` (blocks in use), ``cached_free_bytes`` (free blocks, every stream and pool),
    ``largest_free_block_bytes`` (stream 0, default pool: where most requests go),
    ``fragmentation_pctg`` (of the cached free memory, the share a request of the largest
    block's size cannot use), ``reading``: little cached (under 5 % of the reserved bytes): an
    allocation that fails is a **real shortage** (unless CUDA had memory free outside the
    allocator, which a snapshot does not record); much cached but split (fragmentation >= 50 %):
    a request above the largest block fails though memory is free: **fragmentation**; else a
    request fits up to the largest block, and above it CUDA's free memory decides."""
    rows = []
    for device in sorted(set(tables.segments["device"].tolist())):
        live, segments = state_at(tables, device, 2**63)
        free = free_blocks(live, segments)
        reserved = sum(size for size, _, _ in segments.values())
        active = sum(live.values())
        cached = int(free["size"].sum()) if len(free) else 0
        same = (free["stream"].to_numpy() == 0) & (free["pool"].to_numpy() == DEFAULT_POOL)
        largest = int(free.loc[same, "size"].max()) if same.any() else 0
        anywhere = int(free["size"].max()) if len(free) else 0
        frag = round(100.0 * (1 - anywhere / cached), 2) if cached else 0.0
        if cached < 0.05 * reserved:
            reading = (
                f"{SHORTAGE}: {cached:,} of {reserved:,} reserved bytes are cached free, the rest"
                " held by blocks in use; an allocation that fails here needs memory CUDA did not"
                " have (not recorded in a snapshot: would_fit(nbytes, device_free_bytes=...))"
            )
        elif frag >= 50:
            reading = (
                f"{FRAGMENTATION}: {cached:,} bytes are cached free but the largest free block is"
                f" {anywhere:,}: a request above it fails though the memory is free; "
                + ADVICE[FRAGMENTATION]
            )
        else:
            reading = (
                f"a request of up to {largest:,} bytes on stream 0 fits in a cached block; a"
                " larger one needs CUDA's free memory (would_fit(nbytes, device_free_bytes=...))"
            )
        rows.append([device, reserved, active, cached, largest, frag, reading])
    return pd.DataFrame(rows, columns=DUMP_COLUMNS)
