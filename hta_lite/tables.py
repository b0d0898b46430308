"""Decoded events of one file -> typed columnar tables, one per event family.

Tables (pandas DataFrames; ``ts``/``dur`` int64 nanoseconds, names and
categories as categoricals, absent integer ids as -1):

- ``gpu``: kernels, memcpy, memset, GPU-side syncs (categories in ``GPU_CATEGORIES``).
- ``cpu``: every other complete (``X``) event: cpu_op, user_annotation,
  python_function, cuda_runtime / cuda_driver calls, ...
- ``gpu_annotations``: ``gpu_user_annotation`` ranges.
- ``instants`` (``i``/``I``), ``flows`` (``s``/``f``/``t``), ``counters`` (``C``,
  long format: one row per series value) and ``meta_events`` (``M``).

Linking (correlation, iteration, depth) happens later in :mod:`hta_lite.links`.
"""
from __future__ import annotations

from collections import Counter
from operator import attrgetter

import numpy as np
import pandas as pd

from . import decode as dec
from .columns import take, to_category, to_float, to_int
from .timestamps import raw_us_to_ns

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "mtia_ccp_events", "Kernel", "Memcpy", "Memset")
GPU_ANNOTATION_CATEGORY = "gpu_user_annotation"
SUPPORTED_PHASES = ("X", "i", "I", "s", "f", "t", "C", "M")

_EMPTY_ARGS = dec.Args()
_INT_ARGS = ("correlation", "external_id", "device", "group_size", "in_msg_nelems", "out_msg_nelems")
_TEXT_ARGS = ("grid", "block", "collective_name", "dtype", "pg_name", "pg_desc", "pg_ranks")


def _args_of(events: list) -> list:
    raw = np.fromiter(map(attrgetter("args"), events), dtype=object, count=len(events))
    raw[np.equal(raw, None)] = _EMPTY_ARGS
    return raw.tolist()


def _base(events: list, ts: np.ndarray, dur: np.ndarray | None, health: Counter) -> dict:
    pid, bad_pid = to_int(list(map(attrgetter("pid"), events)))
    tid, bad_tid = to_int(list(map(attrgetter("tid"), events)))
    if bad_pid or bad_tid:
        health["text pid/tid (stored as -1)"] += bad_pid + bad_tid
    cols = {"ts": ts}
    if dur is not None:
        cols["dur"] = dur
    cols["name"] = to_category(list(map(attrgetter("name"), events)))
    cols["cat"] = to_category(list(map(attrgetter("cat"), events)))
    cols["pid"] = pid
    cols["tid"] = tid
    return cols


def _int_arg(args: list, field: str, health: Counter) -> np.ndarray:
    values, bad = to_int(list(map(attrgetter(field), args)))
    if bad:
        health[f"non-numeric args.{field} (stored as -1)"] += bad
    return values


def _complete_events(events: list, health: Counter) -> dict[str, pd.DataFrame]:
    """X events -> gpu, cpu and gpu_annotations tables."""
    ts, ts_ok, subns_ts = raw_us_to_ns(events, "ts")
    dur, dur_ok, subns_dur = raw_us_to_ns(events, "dur")
    if subns_ts + subns_dur:
        health["sub-nanosecond digits truncated"] += subns_ts + subns_dur
    no_ts = ~ts_ok
    if no_ts.any():
        health["complete event without a valid ts (dropped)"] += int(no_ts.sum())
    dur_missing = ts_ok & ~dur_ok
    if dur_missing.any():
        health["complete event without a valid dur (dur set to 0)"] += int(dur_missing.sum())
    negative = dur < 0
    if negative.any():
        health["negative dur (clamped to 0)"] += int(negative.sum())
    dur = np.where(dur_ok & ~negative, dur, 0)
    keep = np.flatnonzero(ts_ok)
    if len(keep) != len(events):
        events, ts, dur = take(events, keep), ts[keep], dur[keep]
    cats = pd.Categorical(list(map(attrgetter("cat"), events)) if events else [])
    is_gpu = np.asarray(cats.isin(GPU_CATEGORIES))
    is_anno = np.asarray(cats == GPU_ANNOTATION_CATEGORY)
    out = {}
    for family, mask in (("gpu", is_gpu), ("gpu_annotations", is_anno), ("cpu", ~(is_gpu | is_anno))):
        idx = np.flatnonzero(mask)
        fam_events = take(events, idx)
        cols = _base(fam_events, ts[idx], dur[idx], health)
        args = _args_of(fam_events)
        stream = _int_arg(args, "stream", health)
        if family == "gpu":
            cols["stream"] = np.where(stream == -1, cols["tid"], stream)
            device = _int_arg(args, "device", health)
            cols["device"] = np.where(device == -1, cols["pid"], device)
            cols["correlation"] = _int_arg(args, "correlation", health)
            cols["external_id"] = _int_arg(args, "external_id", health)
            cols["bytes"] = _int_arg(args, "bytes", health)
            cols["memory_bw_gbps"] = to_float(list(map(attrgetter("memory_bw_gbps"), args)))[0]
            has_collectives = any(map(attrgetter("collective_name"), args))
            for field in ("group_size", "in_msg_nelems", "out_msg_nelems"):
                cols[field] = _int_arg(args, field, health) if has_collectives else np.full(len(args), -1)
            for field in _TEXT_ARGS:
                if field in ("grid", "block") or has_collectives:
                    cols[field] = to_category(list(map(attrgetter(field), args)))
                else:
                    cols[field] = pd.Categorical([None] * len(args))
        else:
            cols["stream"] = stream
            cols["correlation"] = _int_arg(args, "correlation", health)
            cols["external_id"] = _int_arg(args, "external_id", health)
            if family == "gpu_annotations":
                cols["device"] = _int_arg(args, "device", health)
        out[family] = pd.DataFrame(cols)
    return out


def _instants(events: list, health: Counter) -> pd.DataFrame:
    ts, ok, _ = raw_us_to_ns(events, "ts")
    if (~ok).any():
        health["instant event without a valid ts (dropped)"] += int((~ok).sum())
    idx = np.flatnonzero(ok)
    events = take(events, idx)
    cols = _base(events, ts[idx], None, health)
    cols["scope"] = to_category(list(map(attrgetter("s"), events)))
    return pd.DataFrame(cols)


def _flows(events: list, health: Counter) -> pd.DataFrame:
    ts, ok, _ = raw_us_to_ns(events, "ts")
    if (~ok).any():
        health["flow event without a valid ts (dropped)"] += int((~ok).sum())
    idx = np.flatnonzero(ok)
    events = take(events, idx)
    cols = _base(events, ts[idx], None, health)
    cols["ph"] = to_category(list(map(attrgetter("ph"), events)))
    ids = list(map(attrgetter("id"), events))
    cols["id"], text_ids = to_int(ids)
    if text_ids:  # Chrome traces allow string ids
        cols["id"] = to_category([None if v is None else str(v) for v in ids])
    cols["bp"] = to_category(list(map(attrgetter("bp"), events)))
    return pd.DataFrame(cols)


def _meta_events(events: list, health: Counter) -> pd.DataFrame:
    args = _args_of(events)
    value = [a.name if a.name is not None else a.labels if a.labels is not None else a.sort_index for a in args]
    pid, _ = to_int(list(map(attrgetter("pid"), events)))
    tid, _ = to_int(list(map(attrgetter("tid"), events)))
    return pd.DataFrame(
        {
            "name": to_category(list(map(attrgetter("name"), events))),
            "pid": pid,
            "tid": tid,
            "value": to_category(value),
        }
    )


def _counters(raw_events, health: Counter) -> pd.DataFrame:
    events = dec.decode_counters(raw_events)
    rows_ts, rows_name, rows_pid, rows_series, rows_value = [], [], [], [], []
    ts, ok, _ = raw_us_to_ns(events, "ts")
    for ev, t, good in zip(events, ts.tolist(), ok.tolist()):
        if not good or not isinstance(ev.args, dict):
            health["counter event without valid ts or args (dropped)"] += 1
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
            "name": to_category(rows_name),
            "pid": pid,
            "series": to_category(rows_series),
            "value": to_float(rows_value)[0],
        }
    )


def build_tables(decoded: dec.Decoded) -> tuple[dict[str, pd.DataFrame], Counter, Counter]:
    """Return ``(tables, events_by_phase, health_counters)`` for one file."""
    events = decoded.events
    health: Counter = Counter(decoded.skipped)
    phases = to_category(list(map(attrgetter("ph"), events)))
    by_phase = Counter({str(k): int(v) for k, v in phases.value_counts().items() if v})
    ph = phases
    groups = {
        "X": ("X",),
        "instants": ("i", "I"),
        "flows": ("s", "f", "t"),
        "M": ("M",),
    }
    selected = {key: take(events, np.flatnonzero(np.asarray(ph.isin(values)))) for key, values in groups.items()}
    for phase, count in by_phase.items():
        if phase not in SUPPORTED_PHASES:
            health[f"unsupported phase {phase!r} (ignored)"] += count
    if len(events) - sum(by_phase.values()):
        health["event without 'ph' (ignored)"] += len(events) - sum(by_phase.values())
    tables = _complete_events(selected["X"], health)
    tables["instants"] = _instants(selected["instants"], health)
    tables["flows"] = _flows(selected["flows"], health)
    tables["meta_events"] = _meta_events(selected["M"], health)
    tables["counters"] = _counters(decoded.raw_events, health) if by_phase.get("C") else _counters_empty()
    return tables, by_phase, health


def _counters_empty() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": np.zeros(0, np.int64),
            "name": pd.Categorical([]),
            "pid": np.zeros(0, np.int64),
            "series": pd.Categorical([]),
            "value": np.zeros(0),
        }
    )
