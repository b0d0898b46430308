"""``MemorySnapshot``: one CUDA memory snapshot (``torch.cuda.memory._dump_snapshot``) and its views
(:mod:`hta_lite.analyses.memory_snapshot`). A snapshot is not a folder of ranks, so this is a small
facade of its own; every method delegates to one function."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from ..analyses.memory_snapshot import compare as cmp
from ..analyses.memory_snapshot import oom as oom_
from ..analyses.memory_snapshot import timeline as tl
from ..analyses.memory_snapshot.summary import summary as summarize
from ..errors import MissingDataError, SelectionError
from ..load.finish import finish_snapshot
from ..load.readers.snapshot import read as read_snapshot
from ..load.readers.snapshot_sites import stack_text
from .missing import table_view


@dataclass(frozen=True)
class SnapshotPeak:
    """The peak of one device: ``index`` (the trace entry after which it is reached, the last
    time it is; -1: before the trace), ``time_us``, ``active_bytes`` (block sizes in use),
    ``reserved_bytes`` (NaN where the trace records no segment event), ``before_trace_bytes``
    (memory the trace's first entry found in use), ``by_site``: the allocations live at the
    peak by site (``site``, ``bytes``, ``count``, largest first; what predates the trace is one
    row, ``<allocated before the trace>``)."""

    device: int
    index: int
    time_us: int
    active_bytes: int
    reserved_bytes: float
    before_trace_bytes: int
    by_site: pd.DataFrame


class MemorySnapshot:
    """A CUDA memory snapshot: is an OOM a real shortage or fragmentation, who holds the memory.

    Args:
        path: a ``.pickle`` written by ``torch.cuda.memory._dump_snapshot`` (gzip-compressed
            too). It is read by an unpickler that refuses every Python global, so no code from
            the file runs.

    Raises:
        SnapshotError: not a snapshot pickle (a ``torch.save`` zip, JSON, cut short), or a
            pickle naming a global (the message names it).

    Example:
        >>> snap = MemorySnapshot("tests/data/snapshots/medium_128_training.pickle.gz")
        >>> snap.summary()
    """

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._tables = finish_snapshot(read_snapshot(path), path)
        self.allocator_settings = self._tables.allocator_settings

    @property
    def traced(self) -> bool:
        """Whether the snapshot holds an allocator trace (alloc / free entries): without one,
        memory over time and the OOM entries are unknown, the state at the dump is known."""
        return self._tables.traced

    def __repr__(self) -> str:
        s, t = self.summary(), self._tables
        trace = f"{len(t.entries)} trace entries" if t.traced else "no allocator trace"
        layout = f"; {t.layout}" if t.layout else ""
        return (
            f"MemorySnapshot({self.path}): {len(s)} device(s), {int(s['segments'].sum())}"
            f" segments, {trace}{layout}"
        )

    def health(self) -> pd.DataFrame:
        """What was left out because it could not be read: ``item``, ``count`` (empty when
        everything was read)."""
        items = sorted(self._tables.problems.items())
        return pd.DataFrame(items, columns=["item", "count"])

    def summary(self, by: str = "device") -> pd.DataFrame:
        """Reserved, allocated, internal / external free bytes and fragmentation.

        Args:
            by: ``"device"``, ``"pool"`` (CUDA graphs' private pools apart), ``"stream"`` or
                ``"segment"`` (one row per segment: the segment map).

        Returns:
            DataFrame, columns in :mod:`hta_lite.analyses.memory_snapshot.summary`.
        """
        return summarize(self._tables.segments, self._tables.blocks, by)

    def segments(self) -> pd.DataFrame:
        """The segment map: one row per segment (columns in
        :mod:`hta_lite.load.readers.snapshot_tables`)."""
        return self._tables.segments.copy()

    def blocks(self, stack: bool = False) -> pd.DataFrame:
        """One row per block, with its allocation site; ``stack=True`` adds ``stack``, the whole
        allocation stack (innermost first, one frame a line)."""
        out = self._tables.blocks.copy()
        if stack:
            out["stack"] = [stack_text(f) for f in self._tables.block_frames]
        return out

    @cached_property
    def _replayed(self) -> tl.Replay:
        return tl.replay(self._tables.entries, self._tables.segments, self._tables.blocks)

    @table_view(tl.COLUMNS)
    def timeline(self, device: int | None = None) -> pd.DataFrame:
        """The allocator's trace replayed back from the snapshot: active and reserved bytes
        after each entry (columns in :mod:`hta_lite.analyses.memory_snapshot.timeline`).

        A snapshot that holds no trace (recorded without
        ``torch.cuda.memory._record_memory_history()``): no rows, ``attrs["why"]`` says so.

        Raises:
            SelectionError: ``device`` has no trace.
        """
        replayed, entries = self._need_trace(), self._tables.entries
        if device is None:
            return tl.timeline(entries, replayed)
        runs = dict(tl.device_runs(entries["device"].to_numpy()))
        if device not in runs:
            raise SelectionError(
                self.path, f"device {device} has no trace; devices: {sorted(runs)}"
            )
        return tl.timeline(entries, replayed, runs[device])

    def peaks(self) -> pd.DataFrame:
        """One row per device: its peak's ``index``, ``time_us``, ``active_bytes``,
        ``reserved_bytes``, ``before_trace_bytes``, ``final_active_bytes``. Without an
        allocator trace, the state at the dump (``index`` and ``time_us`` -1): the peak the
        snapshot can show."""
        t = self._tables
        if not t.traced:
            return tl.dump_peaks(t.segments, t.blocks)
        return tl.peaks(t.entries, self._need_trace(), t.segments, t.blocks)

    def peak(self, device: int | None = None) -> SnapshotPeak:
        """The peak of ``device`` (default: the device with the highest), and who holds it."""
        table = self.peaks()
        if device is None:
            device = int(table.loc[table["active_bytes"].astype(object).idxmax(), "device"])
        if device not in set(table["device"]):
            raise SelectionError(self.path, f"device {device} has no trace")
        row = table[table["device"] == device].iloc[0]
        frames = self._tables.entry_frames
        if not self._tables.traced:  # the blocks in use at the dump, by their sites
            by_site = tl.block_sites(self._tables.blocks, device)
        else:
            by_site = tl.peak_sites(
                self._tables.entries, lambda r: self._tables.sites.site(frames[r]), device,
                int(row["index"]), int(row["active_bytes"]),
            )  # fmt: skip
        return SnapshotPeak(
            device, int(row["index"]), int(row["time_us"]), int(row["active_bytes"]),
            float(row["reserved_bytes"]), int(row["before_trace_bytes"]), by_site,
        )  # fmt: skip

    @table_view(oom_.COLUMNS)
    def oom(self) -> pd.DataFrame:
        """One row per ``oom`` entry of the trace: the request, what CUDA had free, the cached
        free memory, the largest free block, and a verdict (**real shortage**,
        **fragmentation**, **cache held elsewhere**) with what to try (columns in
        :mod:`hta_lite.analyses.memory_snapshot.oom`).

        No out-of-memory in the trace: no rows, and ``attrs["why"]`` gives the reading at the
        dump (test a size with :meth:`would_fit`).
        """
        table = oom_.oom_table(self._tables, self._replayed) if self._tables.traced else None
        if table is None or table.empty:
            readings = "; ".join(
                f"device {r.device}: {r.reading}" for r in self.at_dump().itertuples()
            )
            raise MissingDataError(
                self.path,
                "no out-of-memory in an allocator trace ('oom' entry"
                + ("" if self._tables.traced else "; the snapshot holds no trace")
                + f"). At the dump: {readings}. Test a size with would_fit(nbytes,"
                " device_free_bytes=...)",
            )
        return table

    def at_dump(self) -> pd.DataFrame:
        """Per device, what the state at the dump implies for an allocation that fails there
        (a dump taken at an out-of-memory, with no ``oom`` entry): reserved, in use, cached free
        bytes, the largest free block, and a reading (**real shortage**, **fragmentation**, or
        up to which size a request fits; columns in
        :mod:`hta_lite.analyses.memory_snapshot.oom`). Needs no trace."""
        return oom_.at_dump(self._tables)

    def would_fit(
        self, nbytes: int, device: int = 0, stream: int = 0, device_free_bytes: int = 0
    ) -> pd.DataFrame:
        """Whether an allocation of ``nbytes`` on ``stream`` would succeed at the snapshot, as
        :meth:`oom` judges an out-of-memory (``device_free_bytes``: what CUDA has free besides
        the allocator's segments; a snapshot does not record it, 0 by default). One row.

        Raises:
            SelectionError: ``device`` has no segment in the snapshot."""
        devices = sorted(set(self._tables.segments["device"].tolist()))
        if device not in devices:
            raise SelectionError(
                self.path, f"device {device} has no segment in the snapshot; devices: {devices}"
            )
        live, segments = oom_.state_at(self._tables, device, 2**63)
        free = oom_.free_blocks(live, segments)
        cached, same, largest, verdict, advice = oom_.verdict(
            int(nbytes), int(device_free_bytes), free, stream, failed=False
        )
        return pd.DataFrame(
            [[device, stream, int(nbytes), int(device_free_bytes), cached, same, largest,
              verdict, advice]],
            columns=["device", "stream", "requested_bytes", "device_free_bytes",
                     "cached_free_bytes", "cached_free_same_bytes", "largest_free_block_bytes",
                     "verdict", "advice"],
        )  # fmt: skip

    def compare(self, other: MemorySnapshot, by: str = "site") -> pd.DataFrame:
        """This snapshot (``a``) against ``other`` (``b``): growth by allocation site, by block
        state, or the segments only in one (``by="site" | "state" | "segment"``; columns in
        :mod:`hta_lite.analyses.memory_snapshot.compare`)."""
        return cmp.compare(self._tables, other._tables, by)

    def _need_trace(self) -> tl.Replay:
        if not self._tables.traced:
            raise MissingDataError(
                self.path,
                "the snapshot holds no allocator trace (no alloc / free entry: recorded without"
                " torch.cuda.memory._record_memory_history(), or only the dump's own entry):"
                " summary(), peaks() and at_dump() give the state at the dump",
            )
        return self._replayed
