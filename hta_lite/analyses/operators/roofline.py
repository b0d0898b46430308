"""How close each operator runs to the device's limits (roofline), the operators furthest below
their roof (optimization targets), and model FLOPs utilization per ProfilerStep.

Only *counted* calls enter (modelled, and inside no other modelled call: see
:mod:`.instances`); each call's time is the union of the GPU events under it
(``device_total(us)``). Throughputs are in 10^12 per second (TFLOP/s, TB/s).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
from pandas.arrays import NumpyExtensionArray

from ...load.health_items import record
from ...rows import combine_codes
from ..common import NS_PER_US
from .attribution import GRAPH_REPLAY
from .devices import DeviceSpec
from .work import MATRIX_KINDS

GROUP = ["device", "name", "input_dims", "input_types", "precision", "kind"]
#: the instance columns :func:`roofline` reads
ROOFLINE_INPUTS = ["rank", *GROUP[1:], "counted", "device_total(us)", "flops", "bytes"]


def roofline(
    inst: pd.DataFrame, devices: dict[int, DeviceSpec | None], total_gpu_us: float = np.nan
) -> pd.DataFrame:
    """One row per (device, operator, shapes, types) of the counted calls of ``inst`` (several
    ranks: ``devices`` gives each rank's device; ``total_gpu_us``: all their GPU work).

    Columns: the group, ``calls``, ``gpu_time(us)``, ``gpu_pctg`` (of all GPU work: the column
    adds up to the share of the GPU time the roofline could model), ``flops``, ``bytes``,
    ``achieved_tflops``, ``achieved_tbps``, ``intensity`` (FLOP/byte), ``peak_tflops`` (of the
    precision on the units the kind runs on), ``memory_tbps``, ``ridge`` (the intensity where the
    roofs meet), ``attainable_tflops`` (``min(peak, intensity x bandwidth)``), ``bound``
    (``"compute"`` or ``"memory"``: which roof is lower at this intensity), ``roof_pctg``
    (achieved / attainable), ``time_below_roof(us)`` (``gpu_time x (1 - roof_pctg/100)``: the
    time the group would save at its roof), ``tf32_inferred`` (a float32 product ran faster than
    the FP32 peak, so as TF32: measured against TF32). Device columns are NaN (and ``device`` is
    ``"unknown"``) where the device is not known; ``above_roof``: ``roof_pctg`` above 100,
    which cannot be (a wrong device peak, or a FLOP model that counts more than the kernels
    do). Groups that ran no GPU event are left out.
    """
    return roofs(group_sums(inst, devices), devices, total_gpu_us)


def group_sums(inst: pd.DataFrame, devices: dict[int, DeviceSpec | None]) -> pd.DataFrame:
    """The counted calls of ``inst`` that ran GPU work summed by group (:data:`GROUP`, the
    device from ``devices``), in the order of each group's first call: ``rank`` (of that call),
    the group, ``counted``, ``calls``, ``device_total(us)``, ``flops``, ``bytes``. Rows of such
    sums (a ``calls`` column: how many calls each row is) sum alike: the batch sums each rank's
    where it is loaded, then those."""
    rows = np.flatnonzero(inst["counted"].to_numpy() & (inst["device_total(us)"].to_numpy() > 0))
    ranks, rank_code = np.unique(inst["rank"].to_numpy()[rows], return_inverse=True)
    rank_code = rank_code.ravel()
    text_dtype = inst["name"].dtype
    names = [device_name(devices.get(r)) for r in ranks.tolist()]
    text = {"device": pd.array(np.array(names, object)[rank_code], text_dtype)}
    for column in GROUP[1:]:
        values = inst[column].array.take(rows)
        text[column] = values.fillna("") if column in ("input_dims", "input_types") else values
    # (pandas 2 keeps object text in NumpyExtensionArray, which its factorize warns about)
    plain = [v.to_numpy() if isinstance(v, NumpyExtensionArray) else v for v in text.values()]
    group, first = combine_codes([pd.factorize(values)[0] for values in plain])
    weights = inst["calls"].to_numpy()[rows] if "calls" in inst.columns else None
    sums = (
        pd.DataFrame(  # pandas' sums (compensated), as before: the same last bits
            {c: inst[c].to_numpy()[rows] for c in ("device_total(us)", "flops", "bytes")}
        )
        .groupby(group, sort=False)
        .sum()
    )
    out = pd.DataFrame(
        {"rank": ranks[rank_code[first]], **{c: text[c][first] for c in GROUP}, "counted": True,
         "calls": np.bincount(group, weights, minlength=len(first)).astype(np.int64)}
    )  # fmt: skip
    for column in ("device_total(us)", "flops", "bytes"):
        out[column] = sums[column].to_numpy()
    return out


def roofs(
    sums: pd.DataFrame, devices: dict[int, DeviceSpec | None], total_gpu_us: float = np.nan
) -> pd.DataFrame:
    """:func:`roofline`'s table of the groups' sums (:func:`group_sums`), most time first."""
    order = np.argsort(-sums["device_total(us)"].to_numpy(), kind="stable")  # most time first
    time_us, flops, nbytes, calls = (
        sums[c].to_numpy()[order] for c in ("device_total(us)", "flops", "bytes", "calls")
    )
    text = {c: sums[c].array.take(order) for c in GROUP}
    specs = [devices.get(r) for r in sums["rank"].to_numpy()[order].tolist()]
    seconds = time_us * 1e-6
    achieved = flops / seconds / 1e12
    achieved_tbps = nbytes / seconds / 1e12
    intensity = flops / np.where(nbytes > 0, nbytes, np.nan)
    precision = np.asarray(text["precision"], dtype=object)
    matrix = np.isin(np.asarray(text["kind"], dtype=object), list(MATRIX_KINDS))
    peak = np.array(
        [s.peak_tflops(p, m) if s else np.nan for s, p, m in zip(specs, precision, matrix)]
    )
    # float32 products faster than the FP32 peak ran as TF32 (allow_tf32 on: the default for
    # matmuls before PyTorch 1.12, for convolutions always): measure them against TF32
    tf32 = np.array([s.peak_tflops("tf32") if s else np.nan for s in specs], dtype=np.float64)
    inferred = (precision == "fp32") & (achieved > peak) & (tf32 > peak)
    if inferred.any():
        precision[inferred] = "tf32"
        # whole-number peaks stay integers when the TF32 ones are whole too (as pandas kept them)
        peak = peak.astype(np.float64) if (tf32[inferred] % 1).any() else peak
        peak[inferred] = tf32[inferred]
    memory_tbps = np.array([s.memory_tbps if s else np.nan for s in specs], dtype=np.float64)
    memory_roof = np.nan_to_num(intensity, nan=0.0) * memory_tbps
    attainable = np.minimum(peak, memory_roof)
    with np.errstate(invalid="ignore", divide="ignore"):  # unknown devices: NaN, as intended
        # bytes-only groups (no FLOPs: copies, fills) are measured against the bandwidth alone
        ratio = np.where(flops <= 0, achieved_tbps / memory_tbps, achieved / attainable)
    bound = np.where(np.isnan(peak), "", np.where(memory_roof < peak, "memory", "compute"))
    keys = text | {"precision": pd.array(precision, text["name"].dtype)}
    return pd.DataFrame(
        {
            **keys,
            "calls": calls, "gpu_time(us)": time_us,
            "gpu_pctg": np.round(100.0 * time_us / total_gpu_us, 2),
            "flops": flops, "bytes": nbytes,
            "achieved_tflops": achieved, "achieved_tbps": achieved_tbps, "intensity": intensity,
            "peak_tflops": peak, "tf32_inferred": inferred, "memory_tbps": memory_tbps,
            "ridge": peak / memory_tbps, "attainable_tflops": attainable,
            "bound": pd.array(bound.astype(object), dtype=text["name"].dtype),
            "roof_pctg": np.round(100.0 * ratio, 2),
            "time_below_roof(us)": time_us * np.clip(1.0 - ratio, 0.0, 1.0),
            "above_roof": np.nan_to_num(ratio, nan=0.0) > 1.0,
        }
    )  # fmt: skip


def optimization_targets(table: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The ``top`` groups of :func:`roofline` with the most time below their roof (not those
    above it, which say the peak or the model is wrong)."""
    known = table[table["roof_pctg"].notna() & ~table["above_roof"]]
    return known.nlargest(top, "time_below_roof(us)").reset_index(drop=True)


#: columns of :func:`mfu`
MFU_COLUMNS = [
    "rank", "step", "step_time(us)", "matrix_flops", "other_flops", "achieved_tflops",
    "precision", "peak_tflops", "mfu_pctg", "gpu_time(us)", "modelled_gpu_pctg",
    "graph_replay_pctg", "device", "above_peak",
]  # fmt: skip


def mfu(traces_inst: list, devices: dict[int, DeviceSpec | None], tf32_ranks: dict) -> pd.DataFrame:
    """Model FLOPs utilization per (rank, ProfilerStep).

    ``traces_inst``: ``(attribution, instance columns)`` per rank (:mod:`.instances`). Columns:
    ``rank``, ``step`` (-1: the whole trace, when it has no ProfilerStep), ``step_time(us)``
    (the step's wall time on the CPU), ``matrix_flops`` (counted matrix products, convolutions,
    attention), ``other_flops``, ``achieved_tflops`` (matrix FLOPs over the step time),
    ``precision`` (the one with most matrix FLOPs on the rank; float32 counts as TF32 on the
    ranks in ``tf32_ranks``, where a product ran faster than the FP32 peak), ``peak_tflops``
    (dense, that precision), ``mfu_pctg``, ``gpu_time(us)`` (GPU work launched in the step),
    ``modelled_gpu_pctg`` (the share of it under a counted call: an MFU built on part of the
    kernels says how much), ``graph_replay_pctg`` (the share of it replayed by a CUDA / HIP graph
    and mapped to no operator, so not modelled: :mod:`.graph_replays`), ``device``,
    ``above_peak`` (``mfu_pctg`` above 100, which cannot
    be: a wrong device peak or FLOP model).
    """
    rows = []
    for attr, inst in traces_inst:
        rank = attr.trace.rank
        device = devices.get(rank)
        counted = np.flatnonzero(inst["counted"])
        flops = inst["flops"][counted]
        kinds = pd.Series(inst["kind"].take(counted), dtype=object)
        matrix = kinds.isin(MATRIX_KINDS).to_numpy()
        of_call, precisions = pd.factorize(inst["precision"].take(counted[matrix]))
        by_precision = np.bincount(of_call, flops[matrix], minlength=len(precisions))
        named = np.argsort(np.asarray(precisions, object))  # ties: the first name, as groupby
        precision = str(precisions[named[np.argmax(by_precision[named])]]) if len(named) else ""
        covered = _covered_kernels(attr, inst["row"][counted])
        replayed = attr.owner_kind == GRAPH_REPLAY
        call_step = inst["iteration"][counted]
        kernel_step = attr.trace.gpu["iteration"].to_numpy()[attr.kernels]
        for step, dur in _windows(attr):
            in_step = call_step == step if step >= 0 else np.ones(len(counted), bool)
            k_in = kernel_step == step if step >= 0 else np.ones(len(kernel_step), bool)
            m_flops = float(flops[matrix & in_step].sum())
            gpu_ns = float(attr.dur[k_in].sum())
            achieved = m_flops / (dur / 1e9) / 1e12 if dur > 0 else np.nan
            rows.append(
                {
                    "rank": rank, "step": step, "step_time(us)": dur / NS_PER_US,
                    "matrix_flops": m_flops,
                    "other_flops": float(flops[in_step].sum()) - m_flops,
                    "achieved_tflops": achieved, "precision": precision,
                    "gpu_time(us)": gpu_ns / NS_PER_US,
                    "modelled_gpu_pctg": round(100.0 * attr.dur[k_in & covered].sum() / gpu_ns, 2)
                    if gpu_ns else np.nan,
                    "graph_replay_pctg": round(100.0 * attr.dur[k_in & replayed].sum() / gpu_ns, 2)
                    if gpu_ns else np.nan,
                    "device": device_name(device),
                }
            )  # fmt: skip
    return with_peaks(pd.DataFrame(rows, columns=MFU_COLUMNS), devices, tf32_ranks)


def with_problems(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`roofline` or :func:`mfu`'s ``table`` with ``attrs["problems"]``: a health
    counter of its rows above their roof (``above_roof``, their calls) or above the peak
    (``above_peak``, one per step), each with what it is."""
    problems: Counter = Counter()
    if "above_roof" in table:
        for row in table[table["above_roof"]].itertuples() if len(table) else ():
            what = (
                f"{row.name} {row.input_dims} on {row.device}"
                f" ({row.precision} peak {row.peak_tflops:g} TFLOP/s)"
            )
            record(problems, "above_roof", int(row.calls), what)
    else:
        for row in table[table["above_peak"]].itertuples() if len(table) else ():
            where = f"step {row.step} on {row.device}, {row.precision} peak {row.peak_tflops:g}"
            record(problems, "above_peak", 1, f"rank {row.rank}, {where} TFLOP/s")
    table.attrs["problems"] = problems
    return table


def mfu_view(table: pd.DataFrame) -> pd.DataFrame:
    """``get_mfu()``'s table (the batch's ``mfu`` too) of :func:`mfu`'s: with its problems
    (:func:`with_problems`) and, where it gives no MFU, ``attrs["why"]`` (:func:`mfu_why`)."""
    table = with_problems(table)
    if mfu_why(table):
        table.attrs["why"] = mfu_why(table)
    return table


def mfu_why(table: pd.DataFrame) -> str | None:
    """Why :func:`mfu`'s ``table`` gives no MFU: no rows, or no device peak (None: it does)."""
    if table.empty:
        return (
            "no ProfilerStep with a modelled operator (matrix products, convolutions, attention;"
            " shapes need record_shapes=True)"
        )
    if table["peak_tflops"].isna().all():
        return (
            f"no peak for {sorted(set(table['device']))} in the peak table: pass device= (one"
            " of hta_lite.analyses.operators.DEVICES, or a DeviceSpec)"
        )
    return None


def with_peaks(
    table: pd.DataFrame, devices: dict[int, DeviceSpec | None], tf32_ranks: dict
) -> pd.DataFrame:
    """:func:`mfu`'s ``table`` with its ``peak_tflops``, ``mfu_pctg`` and ``above_peak`` from
    each rank's device and precision (float32 as TF32 on the ranks in ``tf32_ranks``): the
    batch sets them again once the roofline of all ranks says which ran TF32."""
    table = table.copy()
    precisions, peaks, pctgs, above = [], [], [], []
    for rank, precision, achieved in zip(
        table["rank"].tolist(), table["precision"].tolist(), table["achieved_tflops"].tolist()
    ):
        device = devices.get(rank)
        if precision == "fp32" and device is not None and tf32_ranks.get(rank):
            precision = "tf32"
        peak = device.peak_tflops(precision) if device is not None and precision else np.nan
        precisions.append(precision)
        peaks.append(peak)
        pctgs.append(round(100.0 * achieved / peak, 2) if peak == peak else np.nan)
        above.append(bool(peak == peak and achieved > peak))
    table["precision"], table["peak_tflops"] = precisions, peaks
    table["mfu_pctg"], table["above_peak"] = pctgs, above
    return table


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


def device_name(device: DeviceSpec | None) -> str:
    return "unknown" if device is None else device.name
