"""A snapshot's segments and blocks as tables, from every layout PyTorch has written since 1.10.

- **PyTorch 2.1 and later**: blocks carry ``address``, ``size``, ``requested_size``, ``state``
  and ``frames``.
- **PyTorch 2.0**: blocks carry ``size``, ``state`` and, when the history was recorded, a
  ``history`` (``[{addr, real_size, frames}]``, the latest allocation first); no address.
- **PyTorch 1.10-1.13** (``torch.cuda.memory_snapshot()``, often pickled as a bare list of
  segments): blocks carry ``size`` and ``state`` only.

Where a block carries no address it is implied by its place: a segment's blocks are listed in
address order and tile it, so a block starts where the ones before it end (as
``torch.cuda._memory_viz`` reads them). Requested bytes are ``requested_size``, else the
history's ``real_size``, else the block's size; frames are ``frames``, else the history's.

Each segment's own sums (``allocated_size``: the sizes of its allocated blocks, ``active_size``:
those and the blocks pending a free, ``requested_size`` where written) are checked against its
blocks'; a segment whose blocks do not add up is counted in ``problems``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ...kineto import SNAPSHOT_ACTIVE as ACTIVE
from ...kineto import SNAPSHOT_PENDING as PENDING
from .snapshot_sites import Sites

SEGMENT_INTS = ("address", "total_size", "allocated_size", "active_size", "requested_size")
#: the layouts :func:`layout` names
CURRENT, HISTORY, SIZES_ONLY = (
    "PyTorch 2.1+ (blocks with address, requested size and frames)",
    "PyTorch 2.0 (blocks with a history; addresses implied by their order)",
    "PyTorch 1.x (blocks with size and state; addresses implied by their order)",
)
_MISMATCH = "segment whose {} is not its blocks' sum (the blocks are used)"


def segment_tables(raw: list, sites: Sites, problems: Counter):
    """``(segments, blocks, block_frames, layout)`` of a snapshot's ``segments`` list (columns
    in :mod:`.snapshot_tables`; ``layout``: one of the names above, "" without a block)."""
    seg_rows, block_rows, block_frames = [], [], []
    layouts = Counter()
    for seg in raw:
        ints = [_int(seg.get(k)) if isinstance(seg, dict) else None for k in SEGMENT_INTS[:2]]
        if not isinstance(seg, dict) or None in ints or not isinstance(seg.get("blocks"), list):
            problems["segment without address, total_size or blocks (left out)"] += 1
            continue
        row = len(seg_rows)
        pool = _pool(seg.get("segment_pool_id"), problems)
        stream = _int(seg.get("stream")) or 0
        device = _int(seg.get("device")) or 0
        start, total = ints
        offset, sums, kept = 0, Counter(), 0
        for block in seg["blocks"]:
            parsed = _block(block, start + offset)
            if parsed is None:
                problems["block without size or state (left out)"] += 1
                continue
            address, size, requested, state, frames, kind = parsed
            layouts[kind] += 1
            block_rows.append((device, row, address, size, requested, state, stream, pool))
            block_frames.append(frames)
            kept += 1
            offset = address - start + size
            sums["total_size"] += size
            sums["allocated_size"] += size if state == ACTIVE else 0
            sums["active_size"] += size if state == ACTIVE or state in PENDING else 0
            sums["requested_size"] += requested if state == ACTIVE else 0
        own = {k: _int(seg.get(k)) for k in SEGMENT_INTS[1:]}
        for name in SEGMENT_INTS[1:]:
            complete = kept == len(seg["blocks"]) > 0  # blocks left out are counted already
            if complete and own[name] is not None and own[name] != sums[name]:
                problems[_MISMATCH.format(name)] += 1
        seg_rows.append(
            (device, start, total, *(own[k] if own[k] is not None else sums[k]
                                     for k in SEGMENT_INTS[2:]), stream,
             _text(seg.get("segment_type"), "segment_type", problems), pool,
             seg.get("is_expandable") is True, kept,
             sites.site(seg.get("frames") or []))
        )  # fmt: skip
    names = ["device", *SEGMENT_INTS, "stream", "segment_type", "pool", "is_expandable", "blocks",
             "site"]  # fmt: skip
    segments = frame(seg_rows, names, ints=["device", *SEGMENT_INTS, "stream", "blocks"])
    blocks = frame(
        block_rows,
        ["device", "segment", "address", "size", "requested_size", "state", "stream", "pool"],
        ints=["device", "segment", "address", "size", "requested_size", "stream"],
    )
    blocks["site"] = pd.Series([sites.site(f) for f in block_frames], dtype="str")
    shown = max(layouts, key=lambda k: layouts[k]) if layouts else ""
    return segments, blocks, block_frames, shown


def _block(block, implied_address: int) -> tuple | None:
    """``(address, size, requested_size, state, frames, layout)`` of a block of any layout."""
    if not isinstance(block, dict):
        return None
    size, state = _int(block.get("size")), block.get("state")
    if size is None or size < 0 or not isinstance(state, str):
        return None
    address = _int(block.get("address"))
    history = block.get("history")
    if "frames" in block or not isinstance(history, list):
        requested = _int(block.get("requested_size"))
        frames = block.get("frames") or []
        kind = CURRENT if address is not None else SIZES_ONLY
    else:  # PyTorch 2.0: the latest allocation of the block first
        first = history[0] if history and isinstance(history[0], dict) else {}
        requested, frames = _int(first.get("real_size")), first.get("frames") or []
        kind = HISTORY
    if address is None:
        address = implied_address
    return address, size, size if requested is None else requested, state, frames, kind


def _int(value) -> int | None:
    return value if type(value) is int else None


def _text(value, name: str, problems: Counter) -> str:
    """``value`` when it is text; else "" (a list nested 100,000 deep is never turned into
    text), counted unless absent."""
    if isinstance(value, str):
        return value
    if value is not None:
        problems[f"{name} that is not text (read as absent)"] += 1
    return ""


def _pool(pool_id, problems: Counter) -> str:
    """``segment_pool_id`` as text, ``"(0, 0)"`` (the default pool) when absent; a pool id that
    is not a few integers is the default pool, counted."""
    if pool_id is None or pool_id == 0:
        return "(0, 0)"
    if (
        isinstance(pool_id, (list, tuple))
        and len(pool_id) <= 4
        and all(type(v) is int for v in pool_id)
    ):
        return str(tuple(pool_id))
    if type(pool_id) is int:
        return str(pool_id)
    problems["segment_pool_id that is not integers (default pool assumed)"] += 1
    return "(0, 0)"


def frame(rows: list, names: list[str], ints: list[str]) -> pd.DataFrame:
    """A table of ``rows`` (tuples), the ``ints`` columns int64 (also when empty)."""
    columns = list(zip(*rows)) if rows else [()] * len(names)
    out = {}
    for name, values in zip(names, columns):
        values = list(values)
        if name in ints or (values and type(values[0]) is int):
            out[name] = np.array(values, dtype=np.int64)
        else:
            out[name] = np.array(values, dtype=object)
    return pd.DataFrame(out, columns=names)
