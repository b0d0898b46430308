"""Memory near the device's capacity, reserved far above what is allocated, or leaking.

No step time is saved: the finding says what the headroom allows (a larger batch) or which
allocator setting to try. Near capacity: the allocated peak is at least ``NEAR_PCTG`` of the
device's memory (from the trace's ``deviceProperties``); cached (``memory_cached``): the reserved
peak exceeds the allocated peak by more than ``SLACK_PCTG`` of the reserved — memory the
allocator holds, not allocated. Whether it is *fragmentation* (free but in pieces too small)
only a memory snapshot's blocks say, so Kineto's memory events never make that claim. Leaking
(``memory_leak``): allocations of one site made in every step and never freed in the trace
(:func:`~..memory.lifetimes.steady_leaks`), one finding per device with the rank that leaks most;
where the device's memory is known, the steps its free memory lasts at that rate.

With a CUDA memory snapshot of the run: fragmented, the same test on the snapshot's segments
(reserved less allocated, more than ``SLACK_PCTG`` of the reserved; per device), and one
``memory_oom`` finding per out-of-memory the allocator's trace records, with the snapshot's
verdict (real shortage, fragmentation, cache held elsewhere) and what to try. A snapshot does
not record the device's capacity, so it gives no near-capacity finding.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...units import fmt_bytes, fmt_pct
from ..memory.lifetimes import leak_growth
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
                    "memory_cached", where,
                    f"reserved peak {fmt_bytes(reserved)}, allocated peak"
                    f" {fmt_bytes(row.peak_allocated)}: {fmt_pct(slack)} of the reserved is"
                    " cached by the allocator, not allocated, at the peak",
                    "no step time: the reserved against the allocated peak",
                    "a memory snapshot (torch.cuda.memory._dump_snapshot, read by"
                    " hta_lite.MemorySnapshot) says whether that cache is fragmented; if it is,"
                    " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                    rank=int(row.rank),
                ))  # fmt: skip
    return out + _leaks(ctx) + _snapshot(ctx)


def _leaks(ctx: Context) -> list[Finding]:
    """One ``memory_leak`` per device: the rank whose steps leave the most unfreed."""
    steady = ctx.memory_leaks
    if steady is None or steady.empty:
        return []
    out = []
    for device, per_rank in leak_growth(steady).groupby(level="device", sort=True, observed=True):
        (_, rank), grows = per_rank.index[0], int(per_rank.iloc[0])
        mine = steady[(steady["rank"] == rank) & (steady["device"] == device)]
        top = mine.iloc[0]
        named = [(k, top[k]) for k in ("operator", "annotation", "module") if top[k]]
        site = " in ".join(f"'{v}'" if k == "annotation" else str(v) for k, v in named)
        others = f" ({len(per_rank) - 1} other rank(s) leak too)" if len(per_rank) > 1 else ""
        evidence = (
            f"{fmt_bytes(grows)} allocated in each of {int(top['steps'])} steps and never freed"
            f" in the trace, {fmt_bytes(top['bytes_per_step'])} of it by"
            f" {site or 'an unnamed site'}{others}"
        )
        lasts = _steps_left(ctx, rank, str(device), grows)
        out.append(Finding(
            "memory_leak", f"rank {rank} {device}", evidence + lasts,
            "no step time: allocations of one site left unfreed by every step",
            "a tensor kept across steps: a list that grows (losses, outputs: append"
            " loss.item() or a .detach()ed tensor, not one that holds its graph), a cache"
            " without a bound; if it is a cache that stops growing, profile more steps to see"
            " it stop. get_memory_leaks() lists each step's unfreed allocations",
            rank=int(rank),
        ))  # fmt: skip
    return out


def _steps_left(ctx: Context, rank: int, device: str, grows: int) -> str:
    """``"; at that rate ..."``: how many steps the device's memory above the allocated peak
    lasts ("" where the trace does not give the device's memory)."""
    total = ctx.capacity(rank, device)
    peaks = ctx.memory_peaks
    if not (np.isfinite(total) and total > 0) or peaks is None or peaks.empty:
        return ""
    mine = peaks[(peaks["rank"] == rank) & (peaks["device"].astype(str) == device)]
    if mine.empty:
        return ""
    free = total - float(mine["peak_allocated"].max())
    return (
        f"; at that rate the {fmt_bytes(free)} above the allocated peak lasts"
        f" {max(0, int(free // grows)):,} more steps"
    )


def _snapshot(ctx: Context) -> list[Finding]:
    """The findings of the run's memory snapshot (module docstring)."""
    out, name = [], ctx.snapshot_name
    empty = pd.DataFrame()
    summary = empty if ctx.snapshot_summary is None else ctx.snapshot_summary
    for row in summary.itertuples(index=False):
        reserved, allocated = float(row.reserved_bytes), float(row.allocated_bytes)
        slack = 100 * (reserved - allocated) / reserved if reserved > 0 else 0.0
        if slack > SLACK_PCTG:
            out.append(Finding(
                "memory_fragmentation", f"snapshot {name} cuda:{row.device}",
                f"at the snapshot {fmt_bytes(reserved)} reserved, {fmt_bytes(allocated)}"
                f" allocated: {fmt_pct(slack)} of the reserved is cached but not in use; the"
                f" largest free block is {fmt_bytes(row.largest_free_block_bytes)}"
                f" ({fmt_pct(row.fragmentation_pctg)} of the free cached memory is in smaller"
                " blocks)",
                "no step time: the snapshot's segments and blocks",
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb);"
                " MemorySnapshot.oom() / would_fit() say whether a request fails for it",
            ))  # fmt: skip
    for row in (empty if ctx.snapshot_oom is None else ctx.snapshot_oom).itertuples(index=False):
        out.append(Finding(
            "memory_oom", f"snapshot {name} cuda:{row.device}",
            f"out of memory (the trace's entry {row.index}):"
            f" {fmt_bytes(row.requested_bytes)} requested on stream {row.stream};"
            f" CUDA had {fmt_bytes(row.device_free_bytes)} free, the allocator"
            f" {fmt_bytes(row.cached_free_bytes)} cached free"
            f" ({fmt_bytes(row.cached_free_same_bytes)} usable by this request), the largest"
            f" free block {fmt_bytes(row.largest_free_block_bytes)}: {row.verdict}",
            "no step time: the snapshot's state at the out-of-memory, walked back from its end",
            str(row.advice),
        ))  # fmt: skip
    return out
