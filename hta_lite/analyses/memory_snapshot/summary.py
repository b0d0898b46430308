"""How the allocator's memory is used at the snapshot, per device (or pool, stream, segment).

Columns: the key (``device``; with ``by="pool"`` also ``pool``, with ``by="stream"`` also
``stream``, with ``by="segment"`` also ``segment``, the row of ``segments()``, and its
``address``: the segment map), ``segments``, ``blocks``, ``reserved_bytes`` (the segments'
``total_size``), ``allocated_bytes`` (``requested_size`` of the ``active_allocated`` blocks:
what tensors asked for), ``active_blocks_bytes`` (those blocks' sizes), ``free_internal_bytes``
(their rounding: size - requested), ``free_external_bytes`` (every other block: cached by the
allocator, not in use; ``awaiting_free_bytes`` of it freed but waiting for a stream to finish:
``active_pending_free``),
``largest_free_block_bytes``, ``fragmentation_pctg`` (the share of the external free memory an
allocation of the largest free block's size cannot use: 100 x (1 - largest / external free); 0
with no free memory). ``reserved = allocated + internal + external`` exactly (as
``torch.cuda._memory_viz.segsum`` counts them). Sums are exact: int64 columns, or Python
integers (object) in every byte column when a value passes int64.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import SelectionError
from ...kineto import SNAPSHOT_ACTIVE as ACTIVE
from ...kineto import SNAPSHOT_PENDING as PENDING

BYTES = ["reserved_bytes", "allocated_bytes", "active_blocks_bytes", "free_internal_bytes",
         "free_external_bytes", "awaiting_free_bytes", "largest_free_block_bytes"]  # fmt: skip
KEYS = {"device": ["device"], "pool": ["device", "pool"], "stream": ["device", "stream"],
        "segment": ["device", "segment"]}  # fmt: skip


def summary(segments: pd.DataFrame, blocks: pd.DataFrame, by: str = "device") -> pd.DataFrame:
    if by not in KEYS:
        raise SelectionError(None, f"by must be one of {list(KEYS)}, not {by!r}")
    keys = KEYS[by]
    segments = segments.assign(segment=np.arange(len(segments)))
    active = blocks["state"].to_numpy() == ACTIVE
    size = blocks["size"].to_numpy().astype(object)
    requested = blocks["requested_size"].to_numpy().astype(object)
    per_block = pd.DataFrame(
        {
            **{k: blocks[k].to_numpy() for k in keys},
            "blocks": 1,
            "allocated_bytes": np.where(active, requested, 0),
            "active_blocks_bytes": np.where(active, size, 0),
            "free_internal_bytes": np.where(active, size - requested, 0),
            "free_external_bytes": np.where(active, 0, size),
            "awaiting_free_bytes": np.where(np.isin(blocks["state"].to_numpy(), PENDING), size, 0),
            "largest_free_block_bytes": np.where(active, 0, size),
        }
    )
    agg = {c: "sum" for c in per_block.columns if c not in keys}
    agg["largest_free_block_bytes"] = "max"
    by_blocks = per_block.groupby(keys, sort=True).agg(agg)
    per_segment = pd.DataFrame(
        {**{k: segments[k].to_numpy() for k in keys}, "segments": 1,
         "reserved_bytes": segments["total_size"].to_numpy().astype(object)}
    ).groupby(keys, sort=True).sum()  # fmt: skip
    out = per_segment.join(by_blocks, how="outer").reset_index()
    out[["blocks", "segments"]] = out[["blocks", "segments"]].fillna(0).astype(np.int64)
    exact = {c: [int(v) if v == v else 0 for v in out[c]] for c in BYTES}  # NaN -> 0
    fits = all(-(2**63) <= v <= 2**63 - 1 for values in exact.values() for v in values)
    for column, values in exact.items():  # int64, or Python integers in every byte column
        out[column] = np.array(values, dtype=np.int64 if fits else object)
    external = np.array(out["free_external_bytes"], dtype=object)
    largest = np.array(out["largest_free_block_bytes"], dtype=object)
    out["fragmentation_pctg"] = [
        round(100.0 * (1 - int(lg) / int(ext)), 2) if ext else 0.0
        for lg, ext in zip(largest, external)
    ]
    if by == "segment":  # the segment map: each segment with its address
        out.insert(2, "address", segments["address"].to_numpy()[out["segment"].to_numpy()])
        keys = [*keys, "address"]
    return out[[*keys, "segments", "blocks", *BYTES, "fragmentation_pctg"]]
