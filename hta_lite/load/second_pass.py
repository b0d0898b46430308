"""Tables decoded in a second pass over the events' JSON text, only when a trace has such events:
their args are read whole, which the first pass (a fixed set of arg keys) does not do.

- ``counters``: counter events (``"ph": "C"``), long format: ``ts`` (ns), ``name``, ``pid``,
  ``series`` (the arg key), ``value`` (float).
- ``kernel_counters``: kernels replayed by the CUPTI range profiler (``cuda_profiler_range``),
  in trace order: ``ts``, ``dur`` (ns, the replay's times, not the timeline's), ``name``,
  ``pid``, ``tid`` and one float64 column per counter (the arg keys, e.g.
  ``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ..kineto import PROFILER_RANGE_CATEGORY
from . import decode as dec
from .columns import empty_category, to_category, to_float, to_int
from .health_items import note
from .timestamps import raw_us_to_ns


def counters(raw_events, health: Counter, present: bool) -> pd.DataFrame:
    """The ``counters`` table (no rows when ``present`` is False: no second pass)."""
    events = dec.decode_counters(raw_events) if present else []
    rows_ts, rows_name, rows_pid, rows_series, rows_value = [], [], [], [], []
    ts, ok, _ = raw_us_to_ns(events, "ts")
    for ev, t, good in zip(events, ts.tolist(), ok.tolist()):
        if not good or not isinstance(ev.args, dict):
            note(health, "counter_without_ts_or_args", 1)
            continue
        for series, value in ev.args.items():
            rows_ts.append(t)
            rows_name.append(ev.name)
            rows_pid.append(ev.pid)
            rows_series.append(series)
            rows_value.append(value)
    pid, _ = to_int(rows_pid)
    return pd.DataFrame(
        {
            "ts": np.array(rows_ts, dtype=np.int64),
            "name": to_category(rows_name) if rows_name else empty_category(0),
            "pid": pid,
            "series": to_category(rows_series) if rows_series else empty_category(0),
            "value": to_float(rows_value)[0] if rows_value else np.zeros(0),
        }
    )


def kernel_counters(raw_events, health: Counter, present: bool) -> pd.DataFrame:
    """The ``kernel_counters`` table (no rows when ``present`` is False: no second pass)."""
    events = dec.decode_category(raw_events, PROFILER_RANGE_CATEGORY) if present else []
    ts, ts_ok, _ = raw_us_to_ns(events, "ts")
    dur, dur_ok, _ = raw_us_to_ns(events, "dur")
    note(health, "profiler_range_without_ts", int((~ts_ok).sum()))
    keep = np.flatnonzero(ts_ok)
    events = [events[i] for i in keep.tolist()]
    args = [ev.args if isinstance(ev.args, dict) else {} for ev in events]
    keys = sorted({key for a in args for key in a})
    table = {
        "ts": ts[keep],
        "dur": np.where(dur_ok[keep], dur[keep], 0),
        "name": to_category([ev.name for ev in events]) if events else empty_category(0),
        "pid": to_int([ev.pid for ev in events])[0],
        "tid": to_int([ev.tid for ev in events])[0],
    }
    for key in keys:
        values, bad = to_float([a.get(key) for a in args])
        note(health, "counter_not_numeric", bad, key)
        table[key] = values
    return pd.DataFrame(table)
