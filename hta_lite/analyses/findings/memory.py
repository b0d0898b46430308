"""Memory near the device's capacity, or reserved far above what is allocated.

No step time is saved: the finding says what the headroom allows (a larger batch) or which
allocator setting to try. Near capacity: the allocated peak is at least ``NEAR_PCTG`` of the
device's memory (from the trace's ``deviceProperties``); fragmented: the reserved peak exceeds
the allocated peak by more than ``SLACK_PCTG`` of the reserved.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_bytes, fmt_pct
from .context import Context
from .finding import Finding

NEAR_PCTG, SLACK_PCTG = 85.0, 25.0


def find(ctx: Context) -> list[Finding]:
    peaks = ctx.memory_peaks
    if peaks is None or peaks.empty:
        return []
    gpu = peaks[peaks["device"].astype(str) != "cpu"]
    out = []
    for row in gpu.itertuples(index=False):
        total = ctx.capacity(int(row.rank), str(row.device))
        where = f"rank {row.rank} {row.device}"
        if np.isfinite(total) and total > 0 and 100 * row.peak_allocated / total >= NEAR_PCTG:
            out.append(Finding(
                "memory_near_capacity", where,
                f"allocated peak {fmt_bytes(row.peak_allocated)} is"
                f" {fmt_pct(100 * row.peak_allocated / total)} of {fmt_bytes(total)}",
                "no step time: the allocated peak against the device's memory",
                "little headroom for a larger batch; activation checkpointing, a smaller micro"
                " batch or FSDP / ZeRO sharding lower the peak",
                rank=int(row.rank),
            ))  # fmt: skip
        reserved = float(row.peak_reserved)
        if np.isfinite(reserved) and reserved > 0:
            slack = 100 * (reserved - row.peak_allocated) / reserved
            if slack > SLACK_PCTG:
                out.append(Finding(
                    "memory_fragmentation", where,
                    f"reserved peak {fmt_bytes(reserved)}, allocated peak"
                    f" {fmt_bytes(row.peak_allocated)}: {fmt_pct(slack)} of the reserved is"
                    " not allocated at the peak",
                    "no step time: the reserved against the allocated peak",
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; a memory snapshot"
                    " (hta_lite.MemorySnapshot) says whether an OOM is fragmentation",
                    rank=int(row.rank),
                ))  # fmt: skip
    return out
