"""CUPTI range-profiler counters per kernel, with the operators that launched each kernel.

In CUPTI range-profiler mode the profiler replays each launched kernel and writes one
``cuda_profiler_range`` event per kernel, in launch order, with the counters as args; these
events carry no correlation id. So the n-th range is the kernel of the n-th kernel launch call
(``kineto.KERNEL_LAUNCH_NAMES``) of the rank, in time order (the reference pairs them the same
way, counting ``cudaLaunchKernel`` only). A count that differs is an error: pairing them anyway
would attribute counters to the wrong kernels.

Columns: ``rank``, ``name`` (the range's kernel name), ``ts``, ``dur`` (ns, the profiler's replay),
``correlation`` and ``launch_row`` (the launch call), ``op_stack`` (names of the enclosing
``cpu_op`` events of the launch call, outermost first), ``top_level_op``, ``bottom_level_op``,
``flops`` (2 per fused multiply-add plus 1 per add or multiply, from the
``smsp__sass_thread_inst_executed_op_*_pred_on.sum`` counters when the trace has them; NaN
otherwise), then one column per counter.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..kineto import CPU_OP_CATEGORY, KERNEL_LAUNCH_NAMES
from ..load.rank_trace import RankTrace

#: FLOPs per instruction of the SASS instruction counters (fused multiply-add counts two)
SASS_FLOPS = {
    f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum": 2 if "fma" in op else 1
    for op in ("ffma", "fmul", "fadd", "hfma", "hmul", "hadd", "dfma", "dmul", "dadd")
}
FIXED_COLUMNS = [
    "rank", "name", "ts", "dur", "correlation", "launch_row", "op_stack", "top_level_op",
    "bottom_level_op", "flops",
]  # fmt: skip


def op_stacks(trace: RankTrace, rows: np.ndarray) -> list[list[str]]:
    """Names of the ``cpu_op`` ancestors of each CPU row of ``rows``, outermost first."""
    cpu = trace.cpu
    parent = cpu["parent_row"].to_numpy()
    is_op = np.asarray(cpu["cat"] == CPU_OP_CATEGORY)
    names = cpu["name"].astype(str).to_numpy()
    stacks: list[list[str]] = [[] for _ in rows]
    current = parent[rows] if len(rows) else rows
    while (current >= 0).any():  # one pass per nesting level, all rows at once
        for i in np.flatnonzero((current >= 0) & is_op[np.maximum(current, 0)]).tolist():
            stacks[i].append(names[current[i]])
        current = np.where(current >= 0, parent[np.maximum(current, 0)], -1)
    return [stack[::-1] for stack in stacks]


def counter_data_with_operators(trace: RankTrace) -> pd.DataFrame:
    """One row per profiled kernel of a rank (columns in the module docstring); no rows when
    the rank has no ``cuda_profiler_range`` event."""
    ranges = trace.kernel_counters.sort_values("ts", kind="stable", ignore_index=True)
    cpu = trace.cpu
    launches = np.flatnonzero(np.asarray(cpu["name"].isin(KERNEL_LAUNCH_NAMES)))
    launches = launches[np.argsort(cpu["ts"].to_numpy()[launches], kind="stable")]
    if len(ranges) and len(launches) != len(ranges):
        raise TraceError(
            trace.path,
            f"{len(ranges)} CUPTI profiler ranges but {len(launches)} kernel launch calls:"
            " cannot tell which counters belong to which kernel",
        )
    launches = launches[: len(ranges)]
    stacks = op_stacks(trace, launches)
    counters = [c for c in ranges.columns if c not in ("ts", "dur", "name", "pid", "tid")]
    sass = [c for c in counters if c in SASS_FLOPS]
    flops = (
        sum(ranges[c].to_numpy() * SASS_FLOPS[c] for c in sass) if sass else np.nan
    )  # fmt: skip
    out = pd.DataFrame(
        {
            "rank": trace.rank,
            "name": ranges["name"],
            "ts": ranges["ts"],
            "dur": ranges["dur"],
            "correlation": cpu["correlation"].to_numpy()[launches],
            "launch_row": launches,
            "op_stack": stacks,
            "top_level_op": [s[0] if s else "" for s in stacks],
            "bottom_level_op": [s[-1] if s else "" for s in stacks],
            "flops": flops,
        },
        columns=FIXED_COLUMNS,
    )
    return pd.concat([out, ranges[counters]], axis=1)


def main_counter(df: pd.DataFrame) -> str:
    """The column to chart: ``flops`` when the SASS instruction counters are there, else the
    first counter."""
    counters = list(df.columns[len(FIXED_COLUMNS) :])
    return "flops" if df["flops"].notna().any() or not counters else counters[0]


def by_operator(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Per rank and operator (the innermost ``cpu_op`` of the launches): ``rank, operator,
    kernels``, and the sum over its kernels of ``flops`` and of every counter; by FLOPs."""
    if not frames:
        return pd.DataFrame(columns=["rank", "operator", "kernels", "flops"])
    data = pd.concat(frames, ignore_index=True).rename(columns={"bottom_level_op": "operator"})
    counters = ["flops", *[c for c in data.columns[len(FIXED_COLUMNS) :] if c != "operator"]]
    grouped = data.groupby(["rank", "operator"])
    out = grouped[counters].sum(min_count=1)
    out.insert(0, "kernels", grouped.size())
    return out.reset_index().sort_values(
        ["rank", "flops"], ascending=[True, False], ignore_index=True
    )
