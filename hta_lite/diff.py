"""``TraceDiff``: what changed between a control run and a test run.

``compare_traces`` / ``ops_diff`` keep the reference's API and columns; ``compare`` adds the
diffs of the temporal breakdown, kernel time by type, top kernels, per-step time and a short text
summary; ``regression_check`` is the CI gate used by ``hta-lite diff``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .analyses import kernels, steps, temporal
from .analyses.common import us
from .analysis import TraceAnalysis, plots
from .classify import short_name
from .errors import RankNotFoundError


class DeviceType(enum.Enum):
    CPU = "CPU"
    GPU = "GPU"
    ALL = "ALL"


def as_analysis(trace) -> TraceAnalysis:
    """A folder path or an already loaded ``TraceAnalysis``."""
    if isinstance(trace, TraceAnalysis):
        return trace
    return TraceAnalysis(trace_dir=trace, progress=False)


def _ranks(analysis: TraceAnalysis, rank, label: str) -> list[int]:
    if rank is None:
        return analysis.ranks[:1]
    ranks = [rank] if isinstance(rank, (int, np.integer)) else list(rank)
    missing = [r for r in ranks if r not in analysis.traces]
    if missing:
        raise RankNotFoundError(
            analysis.trace_dir,
            f"{label}: rank(s) {missing} not loaded; loaded ranks: {analysis.ranks}",
        )
    return ranks


def _iterations(analysis: TraceAnalysis, ranks: list[int], iteration) -> list[int] | None:
    """Steps to compare: the given ones, else the first profiled step; None = whole trace (no steps)."""
    if iteration is not None:
        return [iteration] if isinstance(iteration, (int, np.integer)) else list(iteration)
    present = sorted(
        set().union(*(set(steps.profiled_steps(analysis.traces[r])["step"]) for r in ranks))
    )
    return present[:1] or None


def ops_summary(
    analysis: TraceAnalysis,
    ranks: list[int],
    iterations: list[int] | None,
    device_type: DeviceType,
    use_short_name: bool,
) -> pd.DataFrame:
    """Counts and total duration (µs) per name over the selected ranks and steps."""
    frames = []
    for rank in ranks:
        trace = analysis.traces[rank]
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


class TraceDiff:
    """Compare a control trace folder (or ``TraceAnalysis``) with a test one."""

    @classmethod
    def compare_traces(
        cls,
        control,
        test,
        control_rank: int | list[int] | None = None,
        test_rank: int | list[int] | None = None,
        control_iteration: int | list[int] | None = None,
        test_iteration: int | list[int] | None = None,
        device_type: DeviceType = DeviceType.ALL,
        use_short_name: bool = False,
        control_label: str = "Control",
        test_label: str = "Test",
    ) -> pd.DataFrame:
        """Per operator/kernel name: ``Control_counts``, ``Control_total_duration`` (µs),
        ``Test_counts``, ``Test_total_duration``, ``diff_counts``, ``diff_duration`` (test minus
        control) and ``counts_change_categories`` ('+', '-', '='). Defaults: the first rank and
        the first profiled step of each trace (the whole trace when it has no ProfilerStep)."""
        c, t = as_analysis(control), as_analysis(test)
        c_ranks, t_ranks = _ranks(c, control_rank, control_label), _ranks(t, test_rank, test_label)
        c_sum = ops_summary(
            c, c_ranks, _iterations(c, c_ranks, control_iteration), device_type, use_short_name
        )
        t_sum = ops_summary(
            t, t_ranks, _iterations(t, t_ranks, test_iteration), device_type, use_short_name
        )
        comp = pd.concat(
            [c_sum.add_prefix(f"{control_label}_"), t_sum.add_prefix(f"{test_label}_")], axis=1
        ).fillna(0)
        for label in (control_label, test_label):
            comp[f"{label}_counts"] = comp[f"{label}_counts"].astype("int64")
        comp.index.name = "short_name" if use_short_name else "name"
        comp["diff_counts"] = comp[f"{test_label}_counts"] - comp[f"{control_label}_counts"]
        comp["diff_duration"] = (
            comp[f"{test_label}_total_duration"] - comp[f"{control_label}_total_duration"]
        )
        comp["counts_change_categories"] = np.where(
            comp["diff_counts"] > 0, "+", np.where(comp["diff_counts"] < 0, "-", "=")
        )
        return comp.sort_index()

    @classmethod
    def ops_diff(
        cls,
        control,
        test,
        control_rank=None,
        test_rank=None,
        control_iteration=None,
        test_iteration=None,
        device_type: DeviceType = DeviceType.ALL,
    ) -> dict[str, list[str]]:
        """Names ``added``, ``deleted``, ``increased``, ``decreased`` (in count) and ``unchanged``."""
        df = cls.compare_traces(
            control, test, control_rank, test_rank, control_iteration, test_iteration, device_type
        )
        c, t, d = df["Control_counts"], df["Test_counts"], df["diff_counts"]
        return {
            "added": df.index[(c == 0) & (t > 0)].tolist(),
            "deleted": df.index[(c > 0) & (t == 0)].tolist(),
            "increased": df.index[(c > 0) & (d > 0)].tolist(),
            "decreased": df.index[(t > 0) & (d < 0)].tolist(),
            "unchanged": df.index[(t > 0) & (d == 0)].tolist(),
        }

    @classmethod
    def visualize_counts_diff(cls, df: pd.DataFrame, show_image: bool = False, top: int = 30):
        return _diff_figure(df, "diff_counts", "Change in count (test - control)", show_image, top)

    @classmethod
    def visualize_duration_diff(cls, df: pd.DataFrame, show_image: bool = False, top: int = 30):
        return _diff_figure(
            df, "diff_duration", "Change in total duration (µs, test - control)", show_image, top
        )

    @classmethod
    def compare(
        cls,
        control,
        test,
        control_rank: int | None = None,
        test_rank: int | None = None,
        threshold: float = 0.05,
        top: int = 10,
    ) -> Comparison:
        """Beyond the reference: temporal, kernel-type, top-kernel and per-step diffs of one rank
        of each trace (the first by default), the regression gate and a text summary."""
        c, t = as_analysis(control), as_analysis(test)
        c_rank, t_rank = _ranks(c, control_rank, "control")[0], _ranks(t, test_rank, "test")[0]
        note = f"control rank {c_rank} of {c.ranks} vs test rank {t_rank} of {t.ranks}"
        c_tr, t_tr = {c_rank: c.traces[c_rank]}, {t_rank: t.traces[t_rank]}
        ops = cls.compare_traces(c, t, c_rank, t_rank)
        temporal_diff = _side_by_side(
            temporal.temporal_breakdown(c_tr).drop(columns="rank").iloc[0],
            temporal.temporal_breakdown(t_tr).drop(columns="rank").iloc[0],
        )
        c_types, c_kernels = kernels.gpu_kernel_breakdown(c_tr, num_kernels=10**9)
        t_types, t_kernels = kernels.gpu_kernel_breakdown(t_tr, num_kernels=10**9)
        type_diff = _side_by_side(
            c_types.set_index("kernel_type")["sum"], t_types.set_index("kernel_type")["sum"]
        )
        top_diff = _side_by_side(
            c_kernels.groupby("name")["sum (us)"].sum(), t_kernels.groupby("name")["sum (us)"].sum()
        )
        top_diff = top_diff.reindex(
            top_diff["change"].abs().sort_values(ascending=False).index
        ).head(top)
        c_steps, t_steps = steps.step_breakdown(c_tr), steps.step_breakdown(t_tr)
        step_diff = (
            _side_by_side(
                c_steps[steps.COLUMNS[2:-1]].median(), t_steps[steps.COLUMNS[2:-1]].median()
            )
            if len(c_steps) and len(t_steps)
            else pd.DataFrame()
        )
        gate = regression_check(c.traces[c_rank], t.traces[t_rank], threshold)
        summary = _summary(note, gate, temporal_diff, top_diff)
        return Comparison(note, ops, temporal_diff, type_diff, top_diff, step_diff, gate, summary)


def _diff_figure(df: pd.DataFrame, column: str, title: str, show_image: bool, top: int):
    fig = plots.plot_diff(df, column, title, top)
    if show_image:
        plots.show(fig)
    return fig


def _side_by_side(control: pd.Series, test: pd.Series) -> pd.DataFrame:
    df = pd.concat([control.rename("control"), test.rename("test")], axis=1).fillna(0.0)
    df["change"] = df["test"] - df["control"]
    with np.errstate(divide="ignore", invalid="ignore"):
        df["change_pct"] = np.where(
            df["control"] != 0, 100.0 * df["change"] / df["control"], np.nan
        ).round(2)
    return df


def gpu_time_per_step_us(trace) -> tuple[float, int]:
    """Median over profiled steps of the GPU busy time launched in the step (µs) and the number
    of steps; the whole trace's GPU busy time when there is no ProfilerStep."""
    per_step = steps.step_breakdown({trace.rank: trace})
    if len(per_step):
        return float(per_step["gpu_busy"].median()), len(per_step)
    return float(
        temporal.temporal_breakdown({trace.rank: trace})[
            ["compute_time(us)", "non_compute_time(us)"]
        ]
        .sum(axis=1)
        .fillna(0)
        .iloc[0]
    ), 0


def regression_check(control_trace, test_trace, threshold: float = 0.05) -> dict:
    """The gate: GPU busy time per step (median over steps), test vs control."""
    c_value, c_steps = gpu_time_per_step_us(control_trace)
    t_value, t_steps = gpu_time_per_step_us(test_trace)
    change = (t_value - c_value) / c_value if c_value else (np.inf if t_value else 0.0)
    return {
        "metric": "gpu_busy_per_step_us (median over steps)",
        "control": c_value,
        "test": t_value,
        "control_steps": c_steps,
        "test_steps": t_steps,
        "change_pct": round(100.0 * change, 2) if np.isfinite(change) else None,
        "threshold_pct": round(100.0 * threshold, 2),
        "regression": bool(change > threshold),
    }


def _summary(note: str, gate: dict, temporal_diff: pd.DataFrame, top_diff: pd.DataFrame) -> str:
    lines = [f"Compared {note}."]
    verdict = "REGRESSION" if gate["regression"] else "ok"
    lines.append(
        f"GPU busy time per step: {gate['control']:.1f} -> {gate['test']:.1f} us "
        f"({gate['change_pct']:+.2f}%, threshold {gate['threshold_pct']}%): {verdict}."
        if gate["change_pct"] is not None
        else f"GPU busy time per step: {gate['control']:.1f} -> {gate['test']:.1f} us: {verdict}."
    )
    if "idle_time_pctg" in temporal_diff.index:
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
