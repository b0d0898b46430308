"""The regression gate of a trace diff: metrics of one rank of each trace, and which grew by more
than the threshold.

Every metric is "more is worse", per step where the trace has ProfilerSteps (the median over its
profiled steps, robust to one noisy step; totals are divided by the number of steps), else over
the whole trace:

- ``step``: the ProfilerStep's wall time (CPU) — what a user waits for; the default gate;
- ``gpu_busy``: the union of the GPU work launched in the step;
- ``idle``: GPU idle time within the step's GPU span;
- ``exposed_comm``: communication kernel time not under computation;
- ``kernel_type``: GPU time per kernel type (one metric per type, ``kernel_type:COMPUTATION``);
- ``memory_peak``: the highest peak of allocated memory (bytes) over the rank's devices.

A metric one side lacks (no ProfilerStep, no GPU events, no memory events) is not compared: the
gate says which side lacks it and why, and checks the others.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..load.rank_trace import RankTrace
from . import kernels, steps, temporal
from .memory.events import memory_events
from .memory.timeline import peaks, timeline

METRICS = ("step", "gpu_busy", "idle", "exposed_comm", "kernel_type", "memory_peak")
UNITS = {"memory_peak": "bytes"}


def metric_values(trace: RankTrace) -> tuple[dict[str, float], dict[str, str]]:
    """``({metric: value}, {metric: why it is absent})`` of one rank (µs, or bytes)."""
    one = {trace.rank: trace}
    values, absent = {}, {}
    per_step = steps.step_breakdown(one)
    n_steps = len(per_step)
    if n_steps:
        values["step"] = float(per_step["step_time"].median())
    else:
        absent["step"] = "no ProfilerStep"
    if trace.is_cpu_only:
        left_out = trace.health.get("gpu_in_last_step", 0)
        why = (
            f"no GPU events in the profiled steps ({left_out} in the last ProfilerStep, left out)"
            if left_out
            else "no GPU events (CPU-only trace)"
        )
        for name in ("gpu_busy", "idle", "exposed_comm", "kernel_type"):
            absent[name] = why
    elif n_steps:
        values["gpu_busy"] = float(per_step["gpu_busy"].median())
        values["idle"] = float(per_step["gpu_idle"].median())
        exposed = per_step["communication"] - per_step["comm_overlapped"]
        values["exposed_comm"] = float(exposed.median())
    else:
        row = temporal.temporal_breakdown(one).iloc[0]
        values["gpu_busy"] = float(row["compute_time(us)"] + row["non_compute_time(us)"])
        values["idle"] = float(row["idle_time(us)"])
        absent["exposed_comm"] = "no ProfilerStep"
    if not trace.is_cpu_only:
        types, _ = kernels.gpu_kernel_breakdown(one, num_kernels=1)
        plain = types[~types["kernel_type"].str.contains(" overlapping ")]
        for kind, total in zip(plain["kernel_type"], plain["sum"]):
            values[f"kernel_type:{kind}"] = float(total) / max(n_steps, 1)
    events = memory_events(trace)
    if len(events):
        values["memory_peak"] = float(peaks(timeline(events, trace.rank))["peak_allocated"].max())
    else:
        absent["memory_peak"] = "no [memory] events (profile_memory=True)"
    return values, absent


def regression_check(
    control: RankTrace, test: RankTrace, threshold: float = 0.05, metrics=("step",)
) -> dict:
    """The gate over ``metrics`` (names of ``METRICS``): per compared metric ``control``,
    ``test``, ``change_pct``, ``regression``; ``not_compared`` says which side lacks a metric
    and why; ``regressed`` lists the metrics that grew by more than ``threshold``;
    ``regression`` is whether any did."""
    if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and threshold >= 0):
        from ..errors import SettingError

        raise SettingError(f"threshold must be a finite number >= 0, not {threshold!r}")
    unknown = sorted(set(metrics) - set(METRICS))
    if unknown:
        from ..errors import SelectionError

        raise SelectionError(None, f"unknown gate metric(s) {unknown}; choose in {list(METRICS)}")
    c_values, c_absent = metric_values(control)
    t_values, t_absent = metric_values(test)
    compared, not_compared = {}, {}
    for metric in metrics:
        names = sorted({n for n in (*c_values, *t_values) if n.split(":")[0] == metric}) or [metric]
        for name in names:
            why = [
                f"{side} {absent.get(metric, 'has none')}"
                for side, values, absent in (("control:", c_values, c_absent),
                                             ("test:", t_values, t_absent))
                if name not in values
            ]  # fmt: skip
            if why:
                not_compared[name] = "; ".join(why)
                continue
            compared[name] = _compare(c_values[name], t_values[name], threshold, name)
    regressed = [n for n, m in compared.items() if m["regression"]]
    return {
        "threshold_pct": round(100.0 * threshold, 2),
        "control_steps": len(steps.profiled_steps(control)),
        "test_steps": len(steps.profiled_steps(test)),
        "metrics": compared,
        "not_compared": not_compared,
        "regressed": regressed,
        "regression": bool(regressed),
    }


def _compare(control: float, test: float, threshold: float, name: str) -> dict:
    if control:
        change = (test - control) / control
    else:
        change = np.inf if test > 0 else 0.0
    return {
        "control": control,
        "test": test,
        "unit": UNITS.get(name, "us"),
        "change_pct": round(100.0 * change, 2) if np.isfinite(change) else None,
        "regression": bool(change > threshold),
    }


def gate_table(gate: dict) -> pd.DataFrame:
    """The gate as a table: one row per metric compared (``metric, control, test, unit,
    change_pct, regression``), then one per metric not compared (``why``)."""
    rows = [{"metric": n, **m, "why": ""} for n, m in gate["metrics"].items()]
    rows += [{"metric": n, "why": why} for n, why in gate["not_compared"].items()]
    columns = ["metric", "control", "test", "unit", "change_pct", "regression", "why"]
    return pd.DataFrame(rows, columns=columns)


def gate_lines(gate: dict) -> list[str]:
    """One line per regressed metric naming it and by how much, then what was not compared."""
    lines = []
    for name in gate["regressed"]:
        m = gate["metrics"][name]
        change = f"{m['change_pct']:+.2f} %" if m["change_pct"] is not None else "from zero"
        lines.append(
            f"REGRESSION: {label(name)} {fmt(m['control'], m['unit'])} ->"
            f" {fmt(m['test'], m['unit'])} ({change}, threshold {gate['threshold_pct']} %)"
        )
    for name, why in gate["not_compared"].items():
        lines.append(f"not compared: {label(name)} ({why})")
    return lines


LABELS = {
    "step": "step time (median over steps)",
    "gpu_busy": "GPU busy time per step",
    "idle": "GPU idle time per step",
    "exposed_comm": "exposed communication per step",
    "memory_peak": "memory peak",
}


def label(name: str) -> str:
    kind, _, sub = name.partition(":")
    return f"{sub} kernel time per step" if kind == "kernel_type" else LABELS.get(name, name)


def fmt(value: float, unit: str) -> str:
    from ..units import fmt_bytes, fmt_us

    return fmt_bytes(value) if unit == "bytes" else fmt_us(value)
