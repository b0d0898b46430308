"""Decoded events of one file -> typed columnar tables, one per event family.

Tables (pandas DataFrames; ``ts``/``dur`` int64 nanoseconds, names and
categories as categoricals, absent integer ids as -1):

- ``gpu``: kernels, memcpy, memset, GPU-side syncs (categories in ``GPU_CATEGORIES``).
- ``cpu``: every other complete (``X``) event: cpu_op, user_annotation,
  python_function, cuda_runtime / cuda_driver calls, ...
- ``gpu_annotations``: ``gpu_user_annotation`` ranges.
- ``instants`` (``i``/``I``), ``flows`` (``s``/``f``/``t``), ``counters`` (``C``,
  long format: one row per series value) and ``meta_events`` (``M``).

Linking (correlation, iteration, depth) happens later in :mod:`hta_lite.load.links`.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ..kineto import GPU_ANNOTATION_CATEGORY, GPU_CATEGORIES, PROFILER_RANGE_CATEGORY
from . import decode as dec
from .columns import (
    MISSING_INT,
    empty_category,
    json_text_category,
    to_category,
    to_int,
)
from .events import EventColumns, EventList
from .health_items import note
from .second_pass import counters, kernel_counters

SUPPORTED_PHASES = ("X", "i", "I", "s", "f", "t", "C", "M")
IMPLAUSIBLE_DUR_FLOOR_NS = 60 * 10**9  # a minute: never flag a duration below that
#: times and durations read are below 2**62 ns (year 2116 since the epoch), so that a start plus
#: a duration, or a difference of two times, never wraps int64
TIME_LIMIT_NS = 2**62
#: byte counts of the allocator's events (a size, a total) are within +-2**44 (16 TiB), so that
#: sums of a trace's worth of them never wrap int64
BYTES_LIMIT = 2**44

_TEXT_ARGS = ("collective_name", "dtype", "pg_name", "pg_desc", "pg_ranks")
_COLLECTIVE_INTS = ("group_size", "in_msg_nelems", "out_msg_nelems")
_OP_INPUTS = ("input_dims", "input_types", "input_strides", "concrete_inputs")  # JSON text
_AUTOGRAD_INTS = ("sequence_number", "fwd_thread_id")
_KERNEL_FLOATS = ("blocks_per_sm", "warps_per_sm", "occupancy_pct")
_KERNEL_INTS = ("registers_per_thread", "shared_memory", "wait_on_stream", "wait_on_record")


Events = EventColumns | EventList


def _ints(items: Events, name: str, health: Counter) -> np.ndarray:
    """int64 column of ``args`` attribute ``name`` (-1 when absent); unusable values are counted."""
    values, bad = items.ints(name)
    note(health, "arg_not_numeric", bad, name)
    return values


def _few_distinct_columns(codes: np.ndarray, combos: list, names: tuple, health: Counter) -> dict:
    """Columns of attributes with few distinct values (ph, cat, pid, tid), each distinct
    combination converted once: categoricals, and int64 for pid / tid (-1 and counted when
    not a number: Kineto writes text pids such as "Spans" for a few rows)."""
    weights = np.bincount(codes, minlength=len(combos))
    out = {}
    for i, name in enumerate(names):
        values = [combo[i] for combo in combos]
        if name in ("pid", "tid"):
            converted, _ = to_int(values)
            unusable = [
                v is not None and c == MISSING_INT and v != MISSING_INT
                for v, c in zip(values, converted.tolist())
            ]
            bad = int(weights[np.array(unusable, bool)].sum())
            note(health, "text_id", bad, name)
            out[name] = converted[codes]
        else:
            per_combo = to_category(values)
            out[name] = pd.Categorical.from_codes(
                np.asarray(per_combo.codes)[codes], dtype=per_combo.dtype
            )
    return out


def _base(events: Events, health: Counter) -> dict:
    """name, cat, pid, tid columns shared by every family."""
    names = ("cat", "pid", "tid")
    return {
        "name": events.category("name"),
        **_few_distinct_columns(*events.combinations(names), names, health),
    }


def _subset(columns: dict, idx: np.ndarray) -> dict:
    out = {}
    for key, col in columns.items():
        out[key] = _subset_category(col, idx) if isinstance(col, pd.Categorical) else col[idx]
    return out


def _subset_category(col: pd.Categorical, idx: np.ndarray) -> pd.Categorical:
    """``col[idx]`` without the categories it no longer uses (order kept): pandas'
    ``remove_unused_categories`` in numpy, 10x faster."""
    codes = col.codes[idx].astype(np.intp) + 1  # 0: missing
    used = np.zeros(len(col.categories) + 1, bool)
    used[codes] = True
    keep = np.flatnonzero(used[1:])
    remap = np.full(len(used), -1, np.intp)
    remap[keep + 1] = np.arange(len(keep))
    return pd.Categorical.from_codes(remap[codes], categories=col.categories[keep])


def _complete_events(events: Events, health: Counter, by_phase: Counter) -> dict[str, pd.DataFrame]:
    """X events -> gpu, cpu and gpu_annotations tables; counts them by category in ``by_phase``."""
    thread_fields = ("cat", "pid", "tid")
    codes, combos = events.combinations(thread_fields)
    for (cat, _, _), n in zip(combos, np.bincount(codes, minlength=len(combos)).tolist()):
        if cat is not None:
            by_phase[f"X/{cat}"] += n
    ts, ts_ok, subns_ts = events.times("ts")
    dur, dur_ok, subns_dur = events.times("dur")
    note(health, "subns_truncated", subns_ts + subns_dur)
    note(health, "complete_without_ts", int((~ts_ok).sum()))
    before_zero = ts_ok & (ts < 0)  # Kineto never writes one: a corrupt time
    note(health, "negative_ts", int(before_zero.sum()))
    past = ts_ok & ((ts >= TIME_LIMIT_NS) | (dur_ok & (dur >= TIME_LIMIT_NS)))
    note(health, "time_past_limit", int((past & ~before_zero).sum()))
    ts_ok = ts_ok & ~before_zero & ~past
    dur_missing = ts_ok & ~dur_ok
    note(health, "complete_without_dur", int(dur_missing.sum()))
    negative = ts_ok & (dur < 0)
    note(health, "negative_dur", int(negative.sum()))
    dur = np.where(dur_ok & (dur > 0), dur, 0)
    if ts_ok.any():  # corrupted CUPTI values: durations far beyond anything the trace spans
        span = int(ts[ts_ok].max() - ts[ts_ok].min())
        implausible = ts_ok & (dur > max(10 * span, IMPLAUSIBLE_DUR_FLOOR_NS))
        if implausible.any():
            note(health, "implausible_dur", int(implausible.sum()))
            ts_ok = ts_ok & ~implausible
    keep = np.flatnonzero(ts_ok)
    if len(keep) != len(events):
        events, ts, dur, codes = events.take(keep), ts[keep], dur[keep], codes[keep]
    args = events.args()
    shared = {"ts": ts, "dur": dur, "name": events.category("name")}
    shared.update(_few_distinct_columns(codes, combos, thread_fields, health))
    stream, bad_stream = args.ints("stream")
    note(health, "arg_not_numeric", bad_stream, "stream")
    shared["stream"] = stream
    shared["correlation"] = _ints(args, "correlation", health)
    shared["external_id"] = _ints(args, "external_id", health)
    cats = shared["cat"]
    is_gpu = np.asarray(cats.isin(GPU_CATEGORIES))
    is_anno = np.asarray(cats == GPU_ANNOTATION_CATEGORY)
    is_range = np.asarray(cats == PROFILER_RANGE_CATEGORY)  # table of their own (second pass)
    rows = {
        "gpu": np.flatnonzero(is_gpu),
        "gpu_annotations": np.flatnonzero(is_anno),
        "cpu": np.flatnonzero(~(is_gpu | is_anno | is_range)),
    }
    families = {family: _subset(shared, idx) for family, idx in rows.items()}
    del shared, ts, dur, stream  # before the args are read: less memory at the peak of a load
    out = {}
    for family, cols in families.items():
        idx = rows[family]
        if family == "gpu":
            fam_args = args.take(idx)
            cols["stream"] = np.where(cols["stream"] == -1, cols["tid"], cols["stream"])
            device = _ints(fam_args, "device", health)
            cols["device"] = np.where(device == -1, cols["pid"], device)
            cols["bytes"] = _ints(fam_args, "bytes", health)
            cols["memory_bw_gbps"] = fam_args.floats("memory_bw_gbps")
            for name in _KERNEL_FLOATS:
                cols[name] = fam_args.floats(name)
            for name in _KERNEL_INTS:
                cols[name] = _ints(fam_args, name, health)
            cols["grid"] = to_category(fam_args.field("grid"))
            cols["block"] = to_category(fam_args.field("block"))
            cols.update(_collective_args(fam_args, health))
        elif family == "gpu_annotations":
            cols["device"] = _ints(args.take(idx), "device", health)
        else:
            fam_args = args.take(idx)
            cols.update(_op_inputs(fam_args, health))
            cols["launched_kernel"] = _sparse_text(fam_args, "launched_kernel")
            cols.update(_collective_args(fam_args, health))
            cols["msg_bytes"] = np.full(len(idx), -1, np.int64)  # Nsight Systems only
        out[family] = pd.DataFrame(cols, copy=False)
    return out


def _collective_args(args: Events, health: Counter) -> dict:
    """The collective metadata c10d writes on NCCL kernels and ``record_param_comms``
    (``collective_name`` ... as categoricals, sizes int64; missing / -1 where not recorded).
    Converted on the rows that carry it only (a few per step among thousands of events)."""
    n = len(args)
    cols = {name: np.full(n, -1, np.int64) for name in _COLLECTIVE_INTS}
    rows = args.holding("collective_name")
    if len(rows) and not any(args.take(rows).field("collective_name")):
        rows = rows[:0]  # only empty names: none recorded
    if not len(rows):
        cols.update({name: empty_category(n) for name in _TEXT_ARGS})
        return cols
    held = args.take(rows)
    for name in _COLLECTIVE_INTS:
        cols[name][rows] = _ints(held, name, health)
    for name in _TEXT_ARGS:
        category = to_category(held.field(name))
        codes = np.full(n, -1, np.int64)
        codes[rows] = category.codes
        cols[name] = pd.Categorical.from_codes(codes, dtype=category.dtype)
    return cols


def _sparse_text(args: Events, name: str) -> pd.Categorical:
    """A text arg few rows hold, as a categorical (missing elsewhere), read on those rows."""
    rows = args.holding(name)
    if not len(rows):
        return empty_category(len(args))
    category = to_category(args.take(rows).field(name))
    codes = np.full(len(args), -1, np.int64)
    codes[rows] = category.codes
    return pd.Categorical.from_codes(codes, dtype=category.dtype)


def _op_inputs(args: Events, health: Counter) -> dict:
    """Operator inputs (``input_dims`` ... as canonical JSON text categoricals, missing where
    not recorded) and the autograd ``sequence_number`` / ``fwd_thread_id`` (-1 when absent)."""
    cols = {}
    for name in _OP_INPUTS:
        codes, texts = args.factorized(name)
        cols[name] = json_text_category(codes, texts) if any(texts) else empty_category(len(codes))
    for name in _AUTOGRAD_INTS:
        cols[name] = _ints(args, name, health)
    return cols


def _instants(events: Events, health: Counter) -> pd.DataFrame:
    ts, ok, _ = events.times("ts")
    note(health, "instant_without_ts", int((~ok).sum()))
    note(health, "negative_ts", int((ok & (ts < 0)).sum()))
    note(health, "time_past_limit", int((ok & (ts >= TIME_LIMIT_NS)).sum()))
    ok = ok & (ts >= 0) & (ts < TIME_LIMIT_NS)
    idx = np.flatnonzero(ok)
    events = events.take(idx)
    cols = {"ts": ts[idx], **_base(events, health)}
    cols["scope"] = events.category("s")
    cols.update(_memory_args(events.args(), health))
    return pd.DataFrame(cols, copy=False)


_MEMORY_ARGS = (
    "mem_device_type", "mem_device_id", "mem_addr", "mem_bytes", "mem_total_allocated",
    "mem_total_reserved",
)  # fmt: skip


def _memory_args(args: Events, health: Counter) -> dict:
    """The allocator's args of ``[memory]`` instants as nullable int64 (``<NA>`` where absent:
    a free of 1 byte is -1, so -1 cannot mean "absent" here); values that are not integers, or
    byte counts past :data:`BYTES_LIMIT`, are ``<NA>`` and counted."""
    cols = {}
    for name in _MEMORY_ARGS:
        values = args.field(name)
        present = np.fromiter((v is not None for v in values), bool, count=len(values))
        if not present.any():
            cols[name] = pd.arrays.IntegerArray(np.zeros(len(values), np.int64), ~present)
            continue
        low, high = (-(2**63), 2**63) if name == "mem_addr" else (-BYTES_LIMIT, BYTES_LIMIT + 1)
        whole = np.fromiter(
            (type(v) is int and low <= v < high for v in values), bool, count=len(values)
        )
        note(health, "arg_not_numeric", int((present & ~whole).sum()), name)
        data = np.array([v if ok else 0 for v, ok in zip(values, whole)], np.int64)
        cols[name] = pd.arrays.IntegerArray(data, ~whole)
    return cols


def _flows(events: Events, health: Counter) -> pd.DataFrame:
    """Flow arrows (``s``/``f``/``t``): ``ts``, ``ph``, ``id``, ``cat``, ``pid``, ``tid``.

    The flow name repeats its category in Kineto traces and is not kept.
    """
    ts, ok, _ = events.times("ts")
    if (~ok).any():
        note(health, "flow_without_ts", int((~ok).sum()))
        events, ts = events.take(np.flatnonzero(ok)), ts[ok]
    names = ("ph", "cat", "pid", "tid")
    few = _few_distinct_columns(*events.combinations(names), names, health)
    flow_id, text_ids = events.ints("id")
    if text_ids:  # Chrome traces allow string ids
        flow_id = to_category([None if v is None else str(v) for v in events.field("id")])
    return pd.DataFrame(
        {
            "ts": ts,
            "ph": few["ph"],
            "id": flow_id,
            "cat": few["cat"],
            "pid": few["pid"],
            "tid": few["tid"],
        }
    )


def _meta_events(events: Events, health: Counter) -> pd.DataFrame:
    args = events.args()
    fields = zip(args.field("name"), args.field("labels"), args.field("sort_index"))
    value = [
        name if name is not None else labels if labels is not None else index
        for name, labels, index in fields
    ]
    return pd.DataFrame({**_base(events, Counter()), "value": to_category(value)}).drop(
        columns="cat"
    )


def build_tables(decoded: dec.Decoded) -> tuple[dict[str, pd.DataFrame], Counter, Counter]:
    """Return ``(tables, events_read, health_counters)`` for one file.

    ``events_read`` counts events by phase (``"X"``) and complete events by
    category (``"X/kernel"``)."""
    events = decoded.events
    health: Counter = Counter(decoded.skipped)
    phase_codes, phases = events.factorized("ph")
    counts = np.bincount(phase_codes, minlength=len(phases))
    by_phase = Counter({str(p): int(n) for p, n in zip(phases, counts) if p != ""})
    groups = {"X": ("X",), "instants": ("i", "I"), "flows": ("s", "f", "t"), "M": ("M",)}
    selected = {
        key: events.take(
            np.flatnonzero(np.isin(phase_codes, [i for i, p in enumerate(phases) if p in values]))
        )
        for key, values in groups.items()
    }
    for phase, count in by_phase.items():
        if phase not in SUPPORTED_PHASES:
            note(health, "unsupported_phase", count, repr(phase))
    if len(events) - sum(by_phase.values()):
        note(health, "event_without_ph", len(events) - sum(by_phase.values()))
    # the second passes first: then the JSON text (the largest object of a load) can go
    has_ranges = PROFILER_RANGE_CATEGORY in selected["X"].factorized("cat")[1]
    second = {
        "counters": counters(decoded.raw_events, health, bool(by_phase.get("C"))),
        "kernel_counters": kernel_counters(decoded.raw_events, health, has_ranges),
    }
    decoded.raw_events = None
    tables = _complete_events(selected["X"], health, by_phase)
    tables["instants"] = _instants(selected["instants"], health)
    tables["flows"] = _flows(selected["flows"], health)
    tables["meta_events"] = _meta_events(selected["M"], health)
    return {**tables, **second}, by_phase, health
