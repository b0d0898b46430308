"""Trace diff: what changed between a control and a test trace (pure functions over rank traces).

``ops_summary`` / ``compare_ops`` / ``ops_changes``: the reference's per-name counts and durations
of the selected ranks and steps; ``compare_ranks``: temporal, kernel-type, top-kernel and per-step
diffs of one rank of each, the regression gate (:mod:`.diff_gate`: step time by default, or GPU
busy, idle, exposed communication, kernel types, memory peak) and a text summary.
:class:`hta_lite.TraceDiff` is the facade.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..classify import short_name
from ..errors import SelectionError
from ..load.rank_trace import RankTrace
from . import diff_gate, kernels, steps, temporal
from .common import us


class DeviceType(enum.Enum):
    """Which events a diff compares: CPU events, GPU events or both (the reference's enum)."""

    CPU = "CPU"
    GPU = "GPU"
    ALL = "ALL"


def selected_iterations(
    traces: Mapping[int, RankTrace], ranks: list[int], iteration, label: str, where=None
) -> list[int] | None:
    """Steps to compare: the given ones, else the first profiled step; None = whole trace (no
    steps). An iteration the trace does not have is a :class:`SelectionError` naming the trace
    and the iterations it has."""
    present = sorted(set().union(*(set(steps.profiled_steps(traces[r])["step"]) for r in ranks)))
    if iteration is None:
        return present[:1] or None
    wanted = [iteration] if isinstance(iteration, (int, np.integer)) else list(iteration)
    if not wanted:
        raise SelectionError(where, f"{label}: an empty list of iterations selects nothing")
    missing = sorted(set(wanted) - set(present))
    if missing:
        in_file = {int(s) for r in ranks for s in traces[r].steps["step"]}
        dropped = sorted(set(missing) & in_file)
        why = (
            f"; {dropped} left out at load as the last ProfilerStep (pass the folder to TraceDiff,"
            " or load with include_last_profiler_step=True)"
            if dropped
            else ""
        )
        raise SelectionError(
            where,
            f"{label}: iteration(s) {missing} not in rank(s) {ranks}; iterations: {present}{why}",
        )
    return wanted


def ops_summary(
    traces: Mapping[int, RankTrace],
    ranks: list[int],
    iterations: list[int] | None,
    device_type: DeviceType,
    use_short_name: bool,
) -> pd.DataFrame:
    """Counts and total duration (µs) per name over the selected ranks and steps."""
    frames = []
    for rank in ranks:
        trace = traces[rank]
        tables = {
            DeviceType.CPU: [trace.cpu],
            DeviceType.GPU: [trace.gpu],
            DeviceType.ALL: [trace.cpu, trace.gpu],
        }[device_type]
        for table in tables:
            rows = table if iterations is None else table[table["iteration"].isin(iterations)]
            frames.append(
                pd.DataFrame(
                    {"name": rows["name"].astype(str).to_numpy(), "dur": rows["dur"].to_numpy()}
                )
            )
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"name": [], "dur": []})
    if use_short_name:
        data["name"] = data["name"].map(short_name)
    summary = data.groupby("name")["dur"].agg(["count", "sum"])
    summary.columns = ["counts", "total_duration"]
    summary["total_duration"] = us(summary["total_duration"].to_numpy())
    return summary


@dataclass
class Comparison:
    """Everything ``TraceDiff.compare`` found; ``summary`` is the text for humans."""

    ranks: str
    ops: pd.DataFrame
    temporal: pd.DataFrame
    kernel_types: pd.DataFrame
    top_kernels: pd.DataFrame
    steps: pd.DataFrame
    gate: dict
    summary: str
    #: which findings appeared, grew or disappeared (:mod:`.findings.changes`); None without
    #: ProfilerSteps
    findings: pd.DataFrame | None = None


def compare_ops(
    control: pd.DataFrame, test: pd.DataFrame, control_label: str, test_label: str, index_name: str
) -> pd.DataFrame:
    """The reference's comparison of two :func:`ops_summary` tables: ``<label>_counts``,
    ``<label>_total_duration`` (µs) of each side, ``diff_counts``, ``diff_duration`` (test minus
    control) and ``counts_change_categories`` ('+', '-', '='), indexed by name."""
    comp = pd.concat(
        [control.add_prefix(f"{control_label}_"), test.add_prefix(f"{test_label}_")], axis=1
    ).fillna(0)
    for label in (control_label, test_label):
        comp[f"{label}_counts"] = comp[f"{label}_counts"].astype("int64")
    comp.index.name = index_name
    comp["diff_counts"] = comp[f"{test_label}_counts"] - comp[f"{control_label}_counts"]
    comp["diff_duration"] = (
        comp[f"{test_label}_total_duration"] - comp[f"{control_label}_total_duration"]
    )
    comp["counts_change_categories"] = np.where(
        comp["diff_counts"] > 0, "+", np.where(comp["diff_counts"] < 0, "-", "=")
    )
    return comp.sort_index()


def ops_changes(comp: pd.DataFrame, control_label: str, test_label: str) -> dict[str, list[str]]:
    """Names ``added``, ``deleted``, ``increased``, ``decreased`` (in count), ``unchanged``."""
    c, t, d = comp[f"{control_label}_counts"], comp[f"{test_label}_counts"], comp["diff_counts"]
    return {
        "added": comp.index[(c == 0) & (t > 0)].tolist(),
        "deleted": comp.index[(c > 0) & (t == 0)].tolist(),
        "increased": comp.index[(c > 0) & (d > 0)].tolist(),
        "decreased": comp.index[(t > 0) & (d < 0)].tolist(),
        "unchanged": comp.index[(t > 0) & (d == 0)].tolist(),
    }


def compare_ranks(
    control: RankTrace,
    test: RankTrace,
    ops: pd.DataFrame,
    note: str,
    threshold: float,
    top: int,
    metrics=("step",),
) -> Comparison:
    """Temporal, kernel-type, top-kernel and per-step diffs of one rank of each trace, the
    regression gate over ``metrics`` (:mod:`.diff_gate`) and a text summary. A side without
    GPU events has empty GPU tables; the gate says what it could not compare."""
    c_tr, t_tr = {control.rank: control}, {test.rank: test}
    temporal_diff = side_by_side(
        temporal.temporal_breakdown(c_tr).drop(columns="rank").iloc[0],
        temporal.temporal_breakdown(t_tr).drop(columns="rank").iloc[0],
        fill=False,
    )
    c_types, c_kernels = kernels.gpu_kernel_breakdown(c_tr, num_kernels=10**9)
    t_types, t_kernels = kernels.gpu_kernel_breakdown(t_tr, num_kernels=10**9)
    type_diff = side_by_side(
        c_types.set_index("kernel_type")["sum"], t_types.set_index("kernel_type")["sum"]
    )
    top_diff = side_by_side(
        c_kernels.groupby("name")["sum (us)"].sum(), t_kernels.groupby("name")["sum (us)"].sum()
    )
    top_diff = top_diff.reindex(top_diff["change"].abs().sort_values(ascending=False).index).head(
        top
    )
    c_steps, t_steps = steps.step_breakdown(c_tr), steps.step_breakdown(t_tr)
    per_step = steps.COLUMNS[2:-1]
    step_diff = (
        side_by_side(c_steps[per_step].median(), t_steps[per_step].median())
        if len(c_steps) and len(t_steps)
        else pd.DataFrame()
    )
    gate = diff_gate.regression_check(control, test, threshold, metrics)
    summary = summary_text(note, gate, temporal_diff, top_diff)
    return Comparison(note, ops, temporal_diff, type_diff, top_diff, step_diff, gate, summary)


def side_by_side(control: pd.Series, test: pd.Series, fill: bool = True) -> pd.DataFrame:
    """``control``, ``test``, ``change``, ``change_pct``; ``fill``: a name one side lacks is 0
    there (kernel times); else NaN stays NaN (the temporal breakdown of a CPU-only side)."""
    df = pd.concat([control.rename("control"), test.rename("test")], axis=1).astype(np.float64)
    df = df.fillna(0.0) if fill else df
    df["change"] = df["test"] - df["control"]
    with np.errstate(divide="ignore", invalid="ignore"):
        df["change_pct"] = np.where(
            df["control"] != 0, 100.0 * df["change"] / df["control"], np.nan
        ).round(2)
    return df


def summary_text(note: str, gate: dict, temporal_diff: pd.DataFrame, top_diff: pd.DataFrame) -> str:
    lines = [f"Compared {note}."]
    for name, m in gate["metrics"].items():
        change = f"{m['change_pct']:+.2f} %" if m["change_pct"] is not None else "from zero"
        verdict = "REGRESSION" if m["regression"] else "ok"
        lines.append(
            f"{_capital(diff_gate.label(name))}: {diff_gate.fmt(m['control'], m['unit'])} ->"
            f" {diff_gate.fmt(m['test'], m['unit'])} ({change}, threshold"
            f" {gate['threshold_pct']} %): {verdict}."
        )
    lines += [f"{line}." for line in diff_gate.gate_lines(gate) if line.startswith("not ")]
    if (
        "idle_time_pctg" in temporal_diff.index
        and temporal_diff.loc["idle_time_pctg"].notna().all()
    ):
        row = temporal_diff.loc["idle_time_pctg"]
        lines.append(f"GPU idle share: {row['control']:.2f}% -> {row['test']:.2f}%.")
    worse = top_diff[top_diff["change"] > 0].head(3)
    better = top_diff[top_diff["change"] < 0].head(3)
    if len(worse):
        lines.append(
            "Biggest regressions: "
            + "; ".join(f"{n[:80]} {r['change']:+.1f} us" for n, r in worse.iterrows())
            + "."
        )
    if len(better):
        lines.append(
            "Biggest improvements: "
            + "; ".join(f"{n[:80]} {r['change']:+.1f} us" for n, r in better.iterrows())
            + "."
        )
    return "\n".join(lines)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
