"""How close each operator runs to the device's limits (roofline), the operators furthest below
their roof (optimization targets), and model FLOPs utilization per ProfilerStep.

Only *counted* calls enter (modelled, and inside no other modelled call: see
:mod:`.instances`); each call's time is the union of the GPU events under it
(``device_total(us)``). Throughputs are in 10^12 per second (TFLOP/s, TB/s).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...load.columns import combine_codes
from ..common import NS_PER_US
from .devices import DeviceSpec
from .work import MATRIX_KINDS

GROUP = ["device", "name", "input_dims", "input_types", "precision", "kind"]


def roofline(inst: pd.DataFrame, devices: dict[int, DeviceSpec | None]) -> pd.DataFrame:
    """One row per (device, operator, shapes, types) of the counted calls of ``inst`` (several
    ranks: ``devices`` gives each rank's device).

    Columns: the group, ``calls``, ``gpu_time(us)``, ``flops``, ``bytes``,
    ``achieved_tflops``, ``achieved_tbps``, ``intensity`` (FLOP/byte), ``peak_tflops`` (of the
    precision on the units the kind runs on), ``memory_tbps``, ``ridge`` (the intensity where the
    roofs meet), ``attainable_tflops`` (``min(peak, intensity x bandwidth)``), ``bound``
    (``"compute"`` or ``"memory"``: which roof is lower at this intensity), ``roof_pctg``
    (achieved / attainable), ``time_below_roof(us)`` (``gpu_time x (1 - roof_pctg/100)``: the
    time the group would save at its roof), ``tf32_inferred`` (a float32 product ran faster than
    the FP32 peak, so as TF32: measured against TF32). Device columns are NaN (and ``device`` is
    ``"unknown"``) where the device is not known. Groups that ran no GPU event are left out.
    """
    keep = inst["counted"].to_numpy() & (inst["device_total(us)"].to_numpy() > 0)
    used = ["rank", *GROUP[1:], "row", "device_total(us)", "flops", "bytes"]
    counted = inst.loc[keep, used]
    counted.insert(
        0, "device", counted["rank"].map({r: _name(devices.get(r)) for r in set(counted["rank"])})
    )
    for column in ("input_dims", "input_types"):
        counted[column] = counted[column].fillna("")
    group, first = combine_codes([pd.factorize(counted[column])[0] for column in GROUP])
    out = counted[GROUP].iloc[first].reset_index(drop=True)
    out["calls"] = np.bincount(group, minlength=len(first))
    sums = counted[["device_total(us)", "flops", "bytes"]].groupby(group, sort=False).sum()
    out["gpu_time(us)"] = sums["device_total(us)"].to_numpy()
    out["flops"] = sums["flops"].to_numpy()
    out["bytes"] = sums["bytes"].to_numpy()
    seconds = out["gpu_time(us)"].to_numpy() * 1e-6
    out["achieved_tflops"] = out["flops"] / seconds / 1e12
    out["achieved_tbps"] = out["bytes"] / seconds / 1e12
    out["intensity"] = out["flops"] / out["bytes"].where(out["bytes"] > 0)
    by_name = {_name(d): d for d in devices.values() if d is not None}
    peaks = [
        by_name[d].peak_tflops(p, k in MATRIX_KINDS) if d in by_name else np.nan
        for d, p, k in zip(out["device"], out["precision"], out["kind"])
    ]
    out["peak_tflops"] = peaks
    # float32 products faster than the FP32 peak ran as TF32 (allow_tf32 on: the default for
    # matmuls before PyTorch 1.12, for convolutions always): measure them against TF32
    tf32 = np.array(
        [by_name[d].peak_tflops("tf32") if d in by_name else np.nan for d in out["device"]]
    )
    inferred = (
        (out["precision"] == "fp32")
        & (out["achieved_tflops"] > out["peak_tflops"])
        & (tf32 > out["peak_tflops"])
    )
    out.loc[inferred, "precision"] = "tf32"
    out.loc[inferred, "peak_tflops"] = tf32[inferred.to_numpy()]
    out["tf32_inferred"] = inferred
    out["memory_tbps"] = [by_name[d].memory_tbps if d in by_name else np.nan for d in out["device"]]
    out["ridge"] = out["peak_tflops"] / out["memory_tbps"]
    memory_roof = out["intensity"].fillna(0.0) * out["memory_tbps"]
    out["attainable_tflops"] = np.minimum(out["peak_tflops"], memory_roof)
    out["bound"] = np.where(
        out["peak_tflops"].isna(),
        "",
        np.where(memory_roof < out["peak_tflops"], "memory", "compute"),
    )
    # bytes-only groups (no FLOPs: copies, fills) are measured against the bandwidth alone
    no_flops = out["flops"] <= 0
    ratio = np.where(
        no_flops,
        out["achieved_tbps"] / out["memory_tbps"],
        out["achieved_tflops"] / out["attainable_tflops"],
    )
    out["roof_pctg"] = np.round(100.0 * ratio, 2)
    out["time_below_roof(us)"] = out["gpu_time(us)"] * np.clip(1.0 - ratio, 0.0, 1.0)
    return out.sort_values("gpu_time(us)", ascending=False, kind="stable").reset_index(drop=True)


def optimization_targets(table: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The ``top`` groups of :func:`roofline` with the most time below their roof."""
    known = table[table["roof_pctg"].notna()]
    return known.nlargest(top, "time_below_roof(us)").reset_index(drop=True)


def mfu(traces_inst: list, devices: dict[int, DeviceSpec | None], tf32_ranks: dict) -> pd.DataFrame:
    """Model FLOPs utilization per (rank, ProfilerStep).

    ``traces_inst``: ``(attribution, instances)`` per rank. Columns: ``rank``, ``step`` (-1: the
    whole trace, when it has no ProfilerStep), ``step_time(us)`` (the step's wall time on the
    CPU), ``matrix_flops`` (counted matrix products, convolutions, attention), ``other_flops``,
    ``achieved_tflops`` (matrix FLOPs over the step time), ``precision`` (the one with most
    matrix FLOPs on the rank; float32 counts as TF32 on the ranks in ``tf32_ranks``, where a
    product ran faster than the FP32 peak), ``peak_tflops`` (dense, that precision), ``mfu_pctg``,
    ``gpu_time(us)`` (GPU work launched in the step), ``modelled_gpu_pctg`` (the share of it
    under a counted call: an MFU built on part of the kernels says how much), ``device``.
    """
    rows = []
    for attr, inst in traces_inst:
        rank = attr.trace.rank
        device = devices.get(rank)
        counted = inst.loc[inst["counted"].to_numpy(), ["row", "kind", "precision", "flops"]]
        matrix = counted[counted["kind"].isin(MATRIX_KINDS)]
        by_precision = matrix.groupby("precision")["flops"].sum()
        precision = by_precision.idxmax() if len(by_precision) else ""
        if precision == "fp32" and device is not None and tf32_ranks.get(rank):
            precision = "tf32"
        peak = device.peak_tflops(precision) if device is not None and precision else np.nan
        covered = _covered_kernels(attr, counted["row"].to_numpy())
        for step, dur in _windows(attr):
            in_step = (
                inst["iteration"].to_numpy() == step if step >= 0 else np.ones(len(inst), bool)
            )
            kernel_step = attr.trace.gpu["iteration"].to_numpy()[attr.kernels]
            k_in = kernel_step == step if step >= 0 else np.ones(len(kernel_step), bool)
            m_flops = float(matrix["flops"].to_numpy()[in_step[matrix.index]].sum())
            gpu_ns = float(attr.dur[k_in].sum())
            achieved = m_flops / (dur / 1e9) / 1e12 if dur > 0 else np.nan
            rows.append(
                {
                    "rank": rank, "step": step, "step_time(us)": dur / NS_PER_US,
                    "matrix_flops": m_flops,
                    "other_flops": float(counted["flops"].to_numpy()[in_step[counted.index]].sum())
                    - m_flops,
                    "achieved_tflops": achieved, "precision": precision, "peak_tflops": peak,
                    "mfu_pctg": round(100.0 * achieved / peak, 2) if peak == peak else np.nan,
                    "gpu_time(us)": gpu_ns / NS_PER_US,
                    "modelled_gpu_pctg": round(100.0 * attr.dur[k_in & covered].sum() / gpu_ns, 2)
                    if gpu_ns else np.nan,
                    "device": _name(device),
                }
            )  # fmt: skip
    return pd.DataFrame(rows)


def _covered_kernels(attr, counted_rows: np.ndarray) -> np.ndarray:
    """Per kernel of the attribution: under a counted call."""
    pair_k, pair_op = attr.pairs
    is_counted = np.zeros(len(attr.parent_op), bool)
    is_counted[counted_rows] = True
    covered = np.zeros(len(attr.kernels), bool)
    covered[pair_k[is_counted[pair_op]]] = True
    return covered


def _windows(attr) -> list[tuple[int, int]]:
    """``(step, duration)`` (ns) of each ProfilerStep with events, else of the whole trace as
    step -1."""
    steps = attr.trace.steps
    if len(steps):  # the steps whose events were kept (the last one is dropped by default)
        kept = set(attr.trace.cpu["iteration"].unique().tolist())
        return [(s, d) for s, d in zip(steps["step"].tolist(), steps["dur"].tolist()) if s in kept]
    if not len(attr.kernels):
        return []
    cpu = attr.trace.cpu
    start = min(int(attr.ts.min()), int(cpu["ts"].min()) if len(cpu) else int(attr.ts.min()))
    end = max(int(attr.end.max()), int((cpu["ts"] + cpu["dur"]).max()) if len(cpu) else 0)
    return [(-1, end - start)]


def _name(device: DeviceSpec | None) -> str:
    return "unknown" if device is None else device.name
