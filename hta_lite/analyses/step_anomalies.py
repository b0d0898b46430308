"""Anomalous steps in a run: which step spiked, on which rank, why, and who caused it.

Per (rank, step) the components of the step (µs): ``step_time`` (the step's length, as
:mod:`.steps` defines it: its ProfilerStep and the GPU work it launched), the GPU's
``gpu_busy``, ``gpu_idle``, ``compute``, ``exposed_communication`` (communication not under
computation), ``memory`` (copies and sets), and each user annotation's time in the step
(``annotation:NAME``: the elapsed time of :mod:`.timers`, the union of the ``user_annotation``
ranges of that name in it). :func:`step_components` builds them from :mod:`.steps` and
:mod:`.timers`.

:func:`anomalies`: per rank, each step's ``metric`` against the run's typical step — a robust
score ``(x - median) / (1.4826 MAD)`` with the MAD floored at 1 % of the median (a perfectly
regular run has no zero-width noise), over all steps (``baseline="median"``) or a centred window
of ``window`` steps (``"rolling"``: for a drifting run). ``anomalous``: score > ``threshold``.
A rank with fewer than :data:`MIN_STEPS` steps is not scored (score NaN, nothing anomalous).

For each anomalous step: ``cause``, the component that grew most against its own median over the
rank's normal steps (of the components within 2 % of that growth, the one with the smallest
median: the annotation inside the one around it), and ``cause_excess(us)``, by how much; where
none grew, :data:`OUTSIDE` and the step's excess over the typical step;
``grew_most``, the event names (operators, annotations, kernels) whose time grew most against
the rank's most typical step (the normal step closest to the median), as the trace diff compares
two runs; ``origin_rank``, the rank that arrived last at the collective where that step waited
longest (the rank itself without collectives; -1 on normal steps).

Columns: ``rank``, ``step``, ``window`` (the profiled window, i.e. file, the step came from in
a rank profiled in several: :mod:`hta_lite.load.series`; 0 otherwise), the components,
``typical`` (the baseline of ``metric``, µs), ``score``, ``anomalous``, ``cause``,
``cause_excess(us)``, ``grew_most``, ``origin_rank``, ``baseline``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import SelectionError
from ..kineto import STEP_PREFIX
from . import steps as step_analysis
from . import timers

KEYS = ["rank", "step", "window"]  # what identifies a step: not a component
GPU_COMPONENTS = ["gpu_busy", "gpu_idle", "compute", "exposed_communication", "memory"]
ANNOTATION = "annotation:"
#: the cause of an anomalous step none of whose components grew: host time no annotation holds
OUTSIDE = "host code outside any annotation"
BASELINES = ("median", "rolling")
#: fewer steps than this on a rank say too little of its typical step: not scored (NaN)
MIN_STEPS = 8


def step_components(traces, ranks=None) -> pd.DataFrame:
    """``rank``, ``step``, ``window``, ``step_time`` and the components of every profiled step
    (µs)."""
    table = step_analysis.step_breakdown(traces, ranks)
    table.insert(2, "window", _windows(traces, table))
    table["exposed_communication"] = table["communication"] - table["comm_overlapped"]
    keep = [*KEYS, "step_time", *GPU_COMPONENTS]
    table = table[keep]
    if not (table[GPU_COMPONENTS].to_numpy() > 0).any():
        table = table[[*KEYS, "step_time"]]  # CPU-only: no GPU components
    annotations = _annotation_times(traces, sorted(set(table["rank"])))
    if len(annotations):
        table = table.merge(annotations, on=["rank", "step"], how="left").fillna(0.0)
    return table


def _windows(traces, table: pd.DataFrame) -> np.ndarray:
    """The window of each (rank, step) row of ``table`` (0 for a rank of one file)."""
    out = np.zeros(len(table), np.int64)
    for rank, rows in table.groupby("rank").indices.items():
        steps = traces[rank].steps
        if "window" in steps.columns:
            of_step = dict(zip(steps["step"].tolist(), steps["window"].tolist()))
            out[rows] = [of_step[s] for s in table["step"].to_numpy()[rows]]
    return out


def _annotation_times(traces, ranks) -> pd.DataFrame:
    """Each annotation's time per (rank, step), wide, µs: the timers' elapsed time."""
    if not ranks:  # no profiled step
        return pd.DataFrame()
    tidy = timers.annotation_timers(traces, ranks=ranks)
    tidy = tidy[(tidy["step"] >= 0) & (tidy["name"] != timers.STEP_TIMER)]
    if tidy.empty:
        return pd.DataFrame()
    wide = tidy.pivot_table(
        index=["rank", "step"], columns="name", values="elapsed_ms", aggfunc="sum", fill_value=0.0
    )
    wide.columns = [f"{ANNOTATION}{c}" for c in wide.columns]
    return (wide * 1000.0).reset_index()


def anomalies(
    components: pd.DataFrame,
    instances: pd.DataFrame | None,
    traces=None,
    metric: str = "step_time",
    threshold: float = 3.5,
    baseline: str = "median",
    window: int = 11,
) -> pd.DataFrame:
    """The scored table (module docstring); ``instances``: the matched collectives
    (``get_collectives().instances``), None without collectives."""
    if metric not in components.columns or metric in KEYS:
        raise SelectionError(
            None, f"metric must be one of {list(components.columns[len(KEYS) :])}, not {metric!r}"
        )
    if baseline not in BASELINES:
        raise SelectionError(None, f"baseline must be one of {list(BASELINES)}, not {baseline!r}")
    parts = [
        _score(part.sort_values("step"), metric, threshold, baseline, window)
        for _, part in components.groupby("rank", sort=True)
    ]
    out = pd.concat(parts, ignore_index=True) if parts else components.assign(score=[])
    out["grew_most"] = _grew_most(out, traces, metric) if traces is not None else ""
    out["origin_rank"] = origins(out, instances)
    out["baseline"] = baseline
    return out


def _score(part: pd.DataFrame, metric: str, threshold: float, baseline: str, window: int):
    x = part[metric].to_numpy(dtype=float)
    if baseline == "rolling":
        rolling = pd.Series(x).rolling(window, center=True, min_periods=1)
        typical = rolling.median().to_numpy()
        mad = (
            pd.Series(np.abs(x - typical)).rolling(window, center=True, min_periods=1).median()
        ).to_numpy()
    else:
        typical = np.full(len(x), np.median(x) if len(x) else np.nan)
        mad = np.full(len(x), np.median(np.abs(x - typical)) if len(x) else np.nan)
    sigma = np.maximum(1.4826 * mad, 0.01 * np.abs(typical))
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(sigma > 0, (x - typical) / sigma, 0.0)
    if len(x) < MIN_STEPS:
        score = np.full(len(x), np.nan)
    out = part.assign(typical=typical, score=np.round(score, 2), anomalous=score > threshold)
    normal = ~out["anomalous"].to_numpy()
    components = [c for c in part.columns if c not in (*KEYS, "step_time")]
    medians = out.loc[normal, components].median() if normal.any() else out[components].median()
    excess = out[components] - medians
    has = out["anomalous"].to_numpy() & (len(components) > 0)
    cause = np.full(len(out), "", dtype=object)
    amount = np.full(len(out), np.nan)
    if has.any():
        grown = excess[has].to_numpy()
        best = grown.max(axis=1, keepdims=True)
        # near-ties (an annotation and the one it holds grew alike): the narrower, whose
        # typical time is smallest, says more (gloo:all_reduce rather than backward around it)
        close = grown >= best - 0.02 * np.abs(best)
        narrow = np.where(close, medians.to_numpy()[None, :], np.inf).argmin(axis=1)
        cause[has] = [components[i].removeprefix(ANNOTATION) for i in narrow]
        amount[has] = np.round(grown[np.arange(len(grown)), narrow], 3)
        # no component grew: the step's extra time is outside all of them
        outside = np.flatnonzero(has)[best[:, 0] <= 0]
        cause[outside] = OUTSIDE
        amount[outside] = np.round(x[outside] - typical[outside], 3)
    return out.assign(cause=cause, **{"cause_excess(us)": amount})


def _grew_most(scored: pd.DataFrame, traces, metric: str, top: int = 3) -> np.ndarray:
    """Per anomalous row: the ``top`` event names whose summed duration grew most from the
    rank's most typical step, ``"name +12.3 ms"`` joined by ``; ``."""
    out = np.full(len(scored), "", dtype=object)
    for rank, part in scored.groupby("rank", sort=True):
        odd = part[part["anomalous"]]
        normal = part[~part["anomalous"]]
        if odd.empty or normal.empty:
            continue
        typical = int(normal.loc[(normal[metric] - normal["typical"]).abs().idxmin(), "step"])
        trace = traces[int(rank)]
        frames = []
        for table in (trace.cpu, trace.gpu):
            rows = table[table["iteration"].isin([typical, *odd["step"].tolist()])]
            frames.append(pd.DataFrame({"step": rows["iteration"].to_numpy(),
                                        "name": rows["name"].astype(str).to_numpy(),
                                        "dur": rows["dur"].to_numpy()}))  # fmt: skip
        events = pd.concat(frames, ignore_index=True)
        events = events[~events["name"].str.startswith(STEP_PREFIX)]
        sums = events.groupby(["step", "name"])["dur"].sum().unstack(fill_value=0)
        base = sums.loc[typical] if typical in sums.index else 0
        for index, step in zip(odd.index, odd["step"].tolist()):
            if step not in sums.index:
                continue
            growth = (sums.loc[step] - base).sort_values(ascending=False)
            growth = growth[growth > 0].head(top)
            out[scored.index.get_loc(index)] = "; ".join(
                f"{name} +{ns / 1e6:.1f} ms" for name, ns in growth.items()
            )
    return out


def origins(scored: pd.DataFrame, instances: pd.DataFrame | None) -> np.ndarray:
    """Per row: the rank that arrived last at the step's collective with the largest arrival
    skew (the row's rank where there is none); -1 on normal steps."""
    origin = np.where(scored["anomalous"], scored["rank"], -1)
    if instances is None or not len(instances):
        return origin
    usable = instances[instances["ordered"] & (instances["last_rank"] >= 0)]
    if not len(usable):
        return origin
    worst = usable.loc[usable.groupby("step")["arrival_skew_us"].idxmax()]
    last = dict(zip(worst["step"].tolist(), worst["last_rank"].tolist()))
    steps = scored["step"].to_numpy()
    found = np.array([last.get(s, -1) for s in steps.tolist()])
    return np.where(scored["anomalous"] & (found >= 0), found, origin)


def job_steps(scored: pd.DataFrame, threshold: float = 3.5) -> pd.DataFrame:
    """The job's steps: a step ends when its slowest rank does. ``step``, ``step_time`` (the
    slowest rank's, µs), ``slowest_rank``, ``typical``, ``score``, ``anomalous``, ``origin_rank``
    (the origin the anomalous ranks' rows name most), ``cause`` (that origin's cause)."""
    idx = scored.groupby("step")["step_time"].idxmax()
    job = scored.loc[idx, ["step", "step_time", "rank"]].rename(columns={"rank": "slowest_rank"})
    job = job.sort_values("step").reset_index(drop=True)
    scored_job = _score(job.assign(rank=-1)[["rank", "step", "step_time"]], "step_time",
                        threshold, "median", 11)  # fmt: skip
    job["typical"], job["score"] = scored_job["typical"], scored_job["score"]
    job["anomalous"] = scored_job["anomalous"].to_numpy()
    origins, causes = [], []
    for step, flagged in zip(job["step"].tolist(), job["anomalous"].tolist()):
        rows = scored[(scored["step"] == step) & scored["anomalous"]]
        if not flagged or not len(rows):
            origins.append(-1)
            causes.append("")
            continue
        origin = int(rows["origin_rank"].mode().iloc[0])
        own = rows[rows["rank"] == origin]
        origins.append(origin)
        causes.append(str(own["cause"].iloc[0]) if len(own) else str(rows["cause"].iloc[0]))
    return job.assign(origin_rank=origins, cause=causes)
