"""``analysis.t``: the reference's ``Trace`` object, as far as notebooks use it.

HTA notebooks reach into ``analyzer.t.get_trace(rank)`` for the raw event frame (after
``t.decode_symbol_ids()``, with names in ``s_name`` / ``s_cat``). hta_lite keeps typed tables per
event family instead (``analysis.cpu_events(rank)``, ``analysis.gpu_events(rank)``); this adapter
builds the reference's single frame from them, and any other attribute of the reference's
``Trace`` is an error that names the hta_lite equivalent.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..classify import short_name
from ..load.links import first_row_by_key, gather, lookup

EQUIVALENTS = {
    "traces": "analysis.traces (per-rank RankTrace tables) or analysis.t.get_all_traces()",
    "symbol_table": "nothing: names are decoded already (columns name / s_name, cat / s_cat)",
    "meta_data": "analysis.metadata(rank)",
    "trace_files": "{r: analysis.trace(r).path for r in analysis.ranks}",
    "get_raw_trace_for_one_rank": "analysis.trace(rank).path (the file) and hta_lite.tools.writer",
    "convert_time_series_to_events": "analysis.generate_trace_with_counters()",
}
COLUMNS = [
    "index", "cat", "name", "pid", "tid", "ts", "dur", "end", "stream", "correlation", "bytes",
    "memory_bw_gbps", "external_id", "iteration", "index_correlation", "s_name", "s_cat",
]  # fmt: skip


class HtaTrace:
    """The subset of ``hta.common.trace.Trace`` that notebooks use, over hta_lite's tables."""

    def __init__(self, analysis):
        self._analysis = analysis
        self._shorten = False

    def get_ranks(self) -> list[int]:
        return self._analysis.ranks

    def get_iterations(self, rank: int | None = None) -> list[int]:
        return self._analysis.get_profiler_steps(rank=rank)

    def decode_symbol_ids(self, use_shorten_name: bool = True) -> None:
        """Names are decoded already; this chooses whether ``s_name`` is shortened."""
        self._shorten = use_shorten_name

    def get_all_traces(self) -> dict[int, pd.DataFrame]:
        return {rank: self.get_trace(rank) for rank in self._analysis.ranks}

    def get_trace(self, rank: int) -> pd.DataFrame:
        """All CPU and GPU complete events of a rank in one frame, sorted by start, with the
        reference's columns: ``ts``, ``dur``, ``end`` in µs (float, exact) from the earliest
        event of all ranks, ``stream`` -1 on the CPU, ``index_correlation`` the ``index`` of
        the linked launch call (for GPU events) or of the first GPU event (for launch calls),
        ``name`` / ``s_name`` and ``cat`` / ``s_cat`` as text (``s_name`` shortened after
        ``decode_symbol_ids()``)."""
        trace = self._analysis.trace(rank)
        cpu, gpu = trace.cpu, trace.gpu
        tables = [t for r in self._analysis.traces.values() for t in (r.cpu, r.gpu) if len(t)]
        origin = min((int(t["ts"].min()) for t in tables), default=0)
        frame = pd.concat(
            [
                _common(cpu, stream=np.full(len(cpu), -1), bytes_=np.full(len(cpu), -1)),
                _common(gpu, stream=gpu["stream"].to_numpy(), bytes_=gpu["bytes"].to_numpy()),
            ],
            ignore_index=True,
        )
        # links, as positions in the concatenated frame (cpu rows first, then gpu rows)
        gpu_link = gpu["launch_row"].to_numpy()
        index, first = first_row_by_key(gpu_link, np.flatnonzero(gpu_link >= 0))
        first_gpu = lookup(index, first, np.arange(len(cpu)))
        links = np.concatenate([np.where(first_gpu >= 0, first_gpu + len(cpu), -1), gpu_link])
        order = np.argsort(frame["ts"].to_numpy(), kind="stable")
        position = np.empty(len(order), np.int64)
        position[order] = np.arange(len(order))
        frame["index_correlation"] = gather(position, links, -1)
        frame = frame.iloc[order].reset_index(drop=True)
        frame["index_correlation"] = frame["index_correlation"].to_numpy()
        frame.insert(0, "index", np.arange(len(frame)))
        for column in ("ts", "dur"):
            frame[column] = (frame[column] - (origin if column == "ts" else 0)) / 1000.0
        frame["end"] = frame["ts"] + frame["dur"]
        rename = short_name if self._shorten else str
        names = frame["name"].astype("category")
        frame["s_name"] = names.cat.categories.map(rename).to_numpy()[names.cat.codes]
        frame["s_cat"] = frame["cat"]
        return frame[COLUMNS]

    def __getattr__(self, name: str):
        hint = EQUIVALENTS.get(name, "analysis.cpu_events(rank), analysis.gpu_events(rank)")
        raise AttributeError(
            f"hta_lite's analysis.t has no {name!r} (only get_trace, get_all_traces, get_ranks,"
            f" get_iterations, decode_symbol_ids); in hta_lite use {hint}"
        )


def _common(table: pd.DataFrame, stream: np.ndarray, bytes_: np.ndarray) -> pd.DataFrame:
    bandwidth = table["memory_bw_gbps"] if "memory_bw_gbps" in table else np.nan
    return pd.DataFrame(
        {
            "cat": table["cat"].astype(object),
            "name": table["name"].astype(object),
            "pid": table["pid"].to_numpy(),
            "tid": table["tid"].to_numpy(),
            "ts": table["ts"].to_numpy(),
            "dur": table["dur"].to_numpy(),
            "stream": stream,
            "correlation": table["correlation"].to_numpy(),
            "bytes": bytes_,
            "memory_bw_gbps": bandwidth,
            "external_id": table["external_id"].to_numpy(),
            "iteration": table["iteration"].to_numpy(),
        }
    )
