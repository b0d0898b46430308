"""What a browser can draw: every figure keeps at most :data:`MAX_POINTS` markers or line points
and a timeline at most :data:`MAX_BARS` bars, so that a report of a long trace stays a few MB and
opens in seconds.

- Points (scatter and line traces, applied to every ``plot_*`` figure in one place,
  :mod:`hta_lite.plots`): the x range is cut into bins and each bin keeps its lowest and its
  highest point, so outliers and the envelope of a line stay where they were. The title says so
  (``drawn: ...``), and the points as they were are kept on the figure (:func:`full_data`): the
  report writes them to a CSV next to the page and links it under the chart.
- Bars (:func:`bucketed_bars`, used by the timelines of critical paths): the time cut into
  buckets, each lane's rows of one bucket and colour drawn as one bar as long as they are
  together, so each colour's total is still the table's; a bar's hover gives how many rows it
  holds and the heaviest.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

#: markers or line points per figure, over all its scatter traces (~250 bytes each with hovers)
MAX_POINTS = 3000
#: bars per timeline figure
MAX_BARS = 1500

#: the per-point arrays of a scatter trace, cut with its points
_POINT_ARRAYS = ("x", "y", "text", "hovertext", "customdata", "ids")
_MARKER_ARRAYS = ("color", "size", "symbol", "opacity")
#: ``column=%{x}`` / ``column=%{customdata[2]}`` in a plotly express hover template
_HOVER_FIELD = re.compile(r"([^<>=]+)=%\{(x|y|customdata\[\d+\])")


def envelope(x: np.ndarray, y: np.ndarray, bins: int) -> np.ndarray:
    """Positions (ascending) of the lowest and the highest ``y`` in each of ``bins`` equal bins
    of ``x`` (positions when ``x`` is not numeric), plus the first and the last point."""
    n = len(y)
    xs = x.astype(np.float64) if x.dtype.kind in "iuf" else np.arange(n, dtype=np.float64)
    ys = y.astype(np.float64) if y.dtype.kind in "iufb" else np.zeros(n)
    ys = np.where(np.isnan(ys), -np.inf, ys)
    finite = np.isfinite(xs)
    low, high = (xs[finite].min(), xs[finite].max()) if finite.any() else (0.0, 1.0)
    width = (high - low) / bins or 1.0
    which = np.clip(((np.where(finite, xs, low) - low) / width).astype(np.int64), 0, bins - 1)
    order = np.lexsort((ys, which))
    starts = np.flatnonzero(np.r_[True, which[order][1:] != which[order][:-1]])
    ends = np.r_[starts[1:], n] - 1
    keep = np.concatenate([order[starts], order[ends], [0, n - 1]])
    return np.unique(keep)


def _hover_names(trace) -> dict[str, str]:
    found = _HOVER_FIELD.findall(trace.hovertemplate or "")
    return {field: name.strip() for name, field in found}


def _points_table(trace, names: dict[str, str]) -> pd.DataFrame:
    columns = {"trace": trace.name or ""}
    for field in ("x", "y", "text", "hovertext"):
        value = trace[field]
        if value is not None and not isinstance(value, str):
            columns[names.get(field, field)] = np.asarray(value)
    custom = trace.customdata
    if custom is not None:
        custom = np.asarray(custom, dtype=object)
        for i in range(custom.shape[1] if custom.ndim == 2 else 0):
            columns[names.get(f"customdata[{i}]", f"customdata_{i}")] = custom[:, i]
    return pd.DataFrame(columns)


def within_budget(fig):
    """``fig`` with its scatter traces cut to :data:`MAX_POINTS` points in all (see the
    module); in place. The points as they were: :func:`full_data`."""
    traces = [t for t in fig.data if t.type in ("scatter", "scattergl") and t.y is not None]
    total = sum(len(t.y) for t in traces)
    if total <= MAX_POINTS:
        return fig
    full, drawn = [], 0
    for trace in traces:
        n = len(trace.y)
        share = max(4, MAX_POINTS * n // total)
        if n <= share:
            drawn += n
            continue
        full.append(_points_table(trace, _hover_names(trace)))
        x = np.asarray(trace.x) if trace.x is not None else np.arange(n)
        keep = envelope(x, np.asarray(trace.y), max(1, share // 2 - 1))
        for field in _POINT_ARRAYS:
            value = trace[field]
            if value is not None and not isinstance(value, str) and len(value) == n:
                trace[field] = np.asarray(value, dtype=object if field == "customdata" else None)[
                    keep
                ]
        for field in _MARKER_ARRAYS:
            value = trace.marker[field] if trace.marker else None
            if value is not None and not isinstance(value, (str, int, float)) and len(value) == n:
                trace.marker[field] = np.asarray(value)[keep]
        drawn += len(keep)
    note = f"drawn: {drawn:,} of {total:,} points (the lowest and highest of each x bin)"
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else ""
    fig.update_layout(title_text=f"{title}\n{note}" if title else note)
    if full_data(fig) is None:  # a builder may have kept a fuller table
        fig._hta_full_data = pd.concat(full, ignore_index=True)
    return fig


def full_data(fig) -> pd.DataFrame | None:
    """The points a figure had before :func:`within_budget` cut them (``trace`` and one column
    per value shown), or None when it drew them all."""
    return getattr(fig, "_hta_full_data", None)


def bucketed_bars(
    rows: pd.DataFrame, keys: list[str], weight: str, name: str = "name", limit: int = MAX_BARS
) -> tuple[pd.DataFrame, float]:
    """``rows`` (``start_ms``, ``end_ms``, ``keys`` -- the first the lane --, ``weight``,
    ``name``, ...) drawn in at most ``limit`` bars: the time cut into equal buckets, the rows of
    one lane and bucket (by start) drawn one bar per ``keys``, each as long as its rows together
    and laid end to end from the bucket's start. So each colour's total length is still the
    table's. A bar's ``weight`` is summed, ``bars`` counts its rows, ``name`` is
    ``"N rows, heaviest: ..."``, other columns are the heaviest's. Returned with the bucket's
    width (ms; 0.0 when every row is drawn as it is)."""
    if len(rows) <= limit:
        return rows.assign(bars=1), 0.0
    data = rows.reset_index(drop=True)
    origin, span = (
        float(data["start_ms"].min()),
        float(data["end_ms"].max() - data["start_ms"].min()),
    )
    buckets = limit
    while True:
        width = span / buckets or 1.0
        bucket = np.minimum(((data["start_ms"] - origin) // width).astype(np.int64), buckets - 1)
        groups = data.groupby([*keys, bucket.rename("_bucket")], observed=True, sort=False)
        if groups.ngroups <= limit or buckets == 1:
            break
        buckets = max(1, buckets * limit // (2 * groups.ngroups))
    data["_bucket"] = bucket
    data["_length"] = data["end_ms"] - data["start_ms"]
    data["_first"] = data.groupby([*keys, "_bucket"], observed=True)["start_ms"].transform("min")
    heaviest = data.loc[groups[weight].idxmax().to_numpy()].set_index([*keys, "_bucket"])
    heaviest[weight] = groups[weight].sum()
    heaviest["_length"] = groups["_length"].sum()
    heaviest["bars"] = groups.size()
    out = heaviest.reset_index().sort_values([keys[0], "_bucket", "_first"], kind="stable")
    offset = out.groupby([keys[0], "_bucket"], observed=True)["_length"].cumsum() - out["_length"]
    out["start_ms"] = origin + out["_bucket"] * width + offset
    out["end_ms"] = out["start_ms"] + out["_length"]
    many = out["bars"] > 1
    out[name] = out[name].astype(object).astype(str)
    out.loc[many, name] = (
        out.loc[many, "bars"].map("{:,} rows, heaviest: ".format) + out.loc[many, name]
    )
    return out.drop(columns=["_bucket", "_length", "_first"]).reset_index(drop=True), width


def bucketed_note(rows: int, bars: int, width_ms: float, what: str = "rows") -> str:
    """The title line that says rows were drawn by bucket ("" when they were not)."""
    if not width_ms:
        return ""
    return f"\n{rows:,} {what} drawn as {bars:,} bars: per {width_ms:,.2f} ms, end to end"
