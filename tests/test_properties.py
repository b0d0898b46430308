"""Property-based tests: random, adversarial event lists never raise anything but TraceError,
and the analysis invariants always hold. Fixed, bounded budget (derandomized)."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hta_lite import TraceAnalysis
from hta_lite.errors import TraceError

NAMES = st.sampled_from(
    [
        "gemm",
        "ncclDevKernel_AllReduce",
        "ncclKernel_SendRecv",
        "Memcpy HtoD (Pageable -> Device)",
        "Memset (Device)",
        "cudaLaunchKernel",
        "aten::mm",
        "ProfilerStep#1",
        "ProfilerStep#2",
        "Context Sync",
        "<img src=x onerror=alert(1)>",
        "ü\u2603",
    ]
)
CATS = st.sampled_from(
    [
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "cpu_op",
        "cuda_runtime",
        "user_annotation",
        "gpu_user_annotation",
        "cuda_sync",
        None,
        "weird",
    ]
)
NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=2000),
    st.floats(min_value=-10, max_value=2000, allow_nan=False),
    st.integers(min_value=1_700_000_000_000_000, max_value=1_700_000_000_002_000),
    st.sampled_from([None, "12", "abc", -5, 1e30, float("nan"), float("inf"), [1], {"a": 1}]),
)
IDS = st.one_of(
    st.integers(min_value=-1, max_value=20), st.sampled_from([None, "0x1", "seven", 2**70, 1.5])
)
ARGS = st.one_of(
    st.none(),
    st.sampled_from(["oops", 3, []]),
    st.fixed_dictionaries(
        {},
        optional={
            "stream": IDS,
            "correlation": IDS,
            "External id": IDS,
            "device": IDS,
            "bytes": NUMBERS,
            "memory bandwidth (GB/s)": NUMBERS,
            "grid": st.sampled_from([[1, 2, 3], "x", None]),
        },
    ),
)
EVENT = st.one_of(
    st.fixed_dictionaries(
        {"ph": st.sampled_from(["X", "X", "X", "i", "s", "f", "M", "C", "B", "Q"])},
        optional={
            "cat": CATS,
            "name": NAMES,
            "pid": IDS,
            "tid": IDS,
            "ts": NUMBERS,
            "dur": NUMBERS,
            "args": ARGS,
            "id": IDS,
        },
    ),
    st.sampled_from([1, "event", None, []]),
)


def _load(events: list) -> TraceAnalysis | None:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "rank0.json").write_text(json.dumps({"traceEvents": events}))
        try:
            return TraceAnalysis(trace_dir=folder, parallel=False, progress=False, cache=False)
        except TraceError:
            return None


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(EVENT, max_size=30))
def test_random_traces_load_or_raise_trace_error_and_invariants_hold(events):
    analysis = _load(events)
    if analysis is None:
        return
    temporal = analysis.get_temporal_breakdown(visualize=False)
    for _, row in temporal.iterrows():
        if math.isnan(row["kernel_time(us)"]):
            continue
        parts = row["idle_time(us)"] + row["compute_time(us)"] + row["non_compute_time(us)"]
        assert math.isclose(parts, row["kernel_time(us)"], abs_tol=1e-6)
        for col in ("idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"):
            assert (
                0 <= row[col] <= 100 if row["kernel_time(us)"] > 0 else math.isnan(row[col])
            )  # no span: undefined
        assert min(row["idle_time(us)"], row["compute_time(us)"], row["non_compute_time(us)"]) >= 0
    overlap = analysis.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].dropna()
    assert ((overlap >= 0) & (overlap <= 100)).all()
    idle, _ = analysis.get_idle_time_breakdown(visualize=False)
    assert (idle["idle_time"] >= 0).all()
    ratios = idle["idle_time_ratio"].dropna()
    assert ((ratios >= 0) & (ratios <= 1)).all()
    type_df, kernel_df = analysis.get_gpu_kernel_breakdown(visualize=False)
    assert (type_df["sum"] >= 0).all()
    assert (kernel_df["min (us)"] <= kernel_df["max (us)"]).all()
    for trace in analysis.traces.values():
        assert (trace.gpu["dur"] >= 0).all() and (trace.cpu["dur"] >= 0).all()
    analysis.health()
    analysis.health_summary()


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise_raw_errors(data):
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "rank0.json").write_bytes(data)
        try:
            TraceAnalysis(trace_dir=folder, parallel=False, progress=False, cache=False)
        except TraceError:
            pass


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 1000),
            st.integers(0, 300),
            st.sampled_from(["gemm", "ncclKernel_x", "Memcpy DtoD"]),
            st.integers(1, 3),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_temporal_matches_brute_force(kernels):
    """Idle / compute on a 1-ns grid equals the interval math, on the kernels as loaded: an end
    that overruns the first later start on its stream clipped to it (launched by no call, so no
    overlap is one the launch allows)."""
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": n,
            "pid": 0,
            "tid": s,
            "ts": t / 1000,
            "dur": d / 1000,
            "args": {"stream": s},
        }
        for t, d, n, s in kernels
    ]
    analysis = _load(events)
    row = analysis.get_temporal_breakdown(visualize=False).iloc[0]
    later = [min((u for u, _, _, r in kernels if r == s and u > t), default=t + d)
             for t, d, _, s in kernels]  # fmt: skip
    kernels = [(t, min(d, nxt - t), n, s) for (t, d, n, s), nxt in zip(kernels, later)]
    start = min(t for t, _, _, _ in kernels)
    end = max(t + d for t, d, _, _ in kernels)
    busy = np.zeros(end - start + 1, bool)
    compute = np.zeros_like(busy)
    for t, d, n, _ in kernels:
        busy[t - start : t - start + d] = True
        if n == "gemm":
            compute[t - start : t - start + d] = True
    assert round(row["kernel_time(us)"] * 1000) == end - start  # µs floats: compare whole ns
    assert round(row["idle_time(us)"] * 1000) == (end - start) - busy[: end - start].sum()
    assert round(row["compute_time(us)"] * 1000) == compute[: end - start].sum()


JSON_TEXT = st.text(alphabet=st.sampled_from(list('ab]}[{,:" \\\n\u00e9')), max_size=8)
METADATA_VALUE = st.recursive(
    st.one_of(st.none(), st.integers(-5, 5), JSON_TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(JSON_TEXT, inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    before=st.dictionaries(
        JSON_TEXT.filter(lambda k: k != "traceEvents"), METADATA_VALUE, max_size=3
    ),
    after=st.dictionaries(
        JSON_TEXT.filter(lambda k: k != "traceEvents"), METADATA_VALUE, max_size=3
    ),
    names=st.lists(JSON_TEXT, max_size=4),
    indent=st.sampled_from([None, 1, 4]),
)
def test_document_decode_matches_json_whatever_the_layout(before, after, names, indent):
    """Metadata around the events (with brackets, braces and quotes in its text) never changes
    what is decoded: the same metadata and events as json.loads finds."""
    from collections import Counter

    from hta_lite.load import decode as dec

    after = {k: v for k, v in after.items() if k not in before}
    events = [{"ph": "X", "name": n, "args": {"l": [{"k": n}]}, "ts": 1} for n in names]
    text = json.dumps({**before, "traceEvents": events, **after}, indent=indent).encode()
    decoded = dec.decode(text, Path("x.json"))
    assert decoded.metadata == {**before, **after}
    assert decoded.events.field("name") == names
    assert json.loads(bytes(decoded.raw_events)) == events
    one_pass = dec._decode_plain_layout(text, Path("x.json"), Counter())
    assert (
        one_pass is not None and one_pass.metadata == decoded.metadata
    )  # this layout always takes the fast path


@st.composite
def nested_intervals(draw):
    """Well-nested intervals on a few threads, as a call stack makes them: each step opens an
    event or closes the innermost one, time never going back (equal times, zero-length events
    and events that touch included). Returns ``(thread, ts, end)`` lists in a shuffled order."""
    rows = []
    for thread in range(draw(st.integers(1, 3))):
        stack, now = [], 0
        for op in draw(st.lists(st.sampled_from(["open", "close"]), min_size=1, max_size=40)):
            now += draw(st.sampled_from([0, 0, 1, 3]))
            if op == "open":
                stack.append(len(rows))
                rows.append([thread, now, None])
            elif stack:
                rows[stack.pop()][2] = now
        for i in stack:
            rows[i][2] = now + 1
    order = draw(st.permutations(range(len(rows))))
    return [rows[i] for i in order]


def stack_walk(rows):
    """Reference: per thread, events by (start, longest first, row); pop the events that ended
    at or before this start; depth = stack size, parent = top."""
    depth, parent = [0] * len(rows), [-1] * len(rows)
    for thread in {r[0] for r in rows}:
        mine = sorted((r[1], -r[2], i) for i, r in enumerate(rows) if r[0] == thread)
        stack = []
        for ts, _, i in mine:
            while stack and rows[stack[-1]][2] <= ts:
                stack.pop()
            depth[i], parent[i] = len(stack), stack[-1] if stack else -1
            stack.append(i)
    return depth, parent


@settings(max_examples=300, deadline=None, derandomize=True)
@given(rows=nested_intervals(), scale=st.sampled_from([1, 2**55]))
def test_nesting_matches_a_call_stack_walk(rows, scale):
    """``scale``: times so far apart that (thread, time) keys would overflow int64, which takes
    the other way of making them."""
    import pandas as pd

    from hta_lite.load.links import nesting

    table = pd.DataFrame(
        {
            "pid": 1,
            "tid": [r[0] for r in rows],
            "ts": np.array([r[1] for r in rows], np.int64) * scale,
            "dur": np.array([r[2] - r[1] for r in rows], np.int64) * scale,
        }
    )
    depth, parent = nesting(table)
    expected_depth, expected_parent = stack_walk(rows)
    assert depth.tolist() == expected_depth
    assert parent.tolist() == expected_parent


def test_nesting_far_apart_times_on_several_threads():
    """Two threads and times 2^61 ns apart: (thread, time) keys take the rank of each time."""
    import pandas as pd

    from hta_lite.load.links import nesting

    far = 2**61
    table = pd.DataFrame(
        {
            "pid": 1,
            "tid": [1, 1, 2, 2],
            "ts": np.array([0, 1, far, far + 1], np.int64),
            "dur": np.array([far + 10, 5, 10, 2], np.int64),
        }
    )
    depth, parent = nesting(table)
    assert depth.tolist() == [0, 1, 0, 1] and parent.tolist() == [-1, 0, -1, 2]


SHAPES = st.recursive(st.integers(-(2**40), 2**40), lambda inner: st.lists(inner, max_size=4))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(value=SHAPES, spacing=st.sampled_from([None, 0, 1, 3]))
def test_shape_text_canonical_form_is_a_json_round_trip(value, spacing):
    """The fast path for integer lists (shapes, strides) gives what json.dumps(json.loads(text))
    gives, whatever the spacing the trace was written with."""
    import json

    from hta_lite.load.columns import _canonical_json

    text = (
        json.dumps(value, indent=spacing)
        if spacing is not None
        else json.dumps(value, separators=(",", ":"))
    )
    assert _canonical_json(text) == json.dumps(json.loads(text))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**40), max_size=60), st.booleans())
def test_first_seen_numbering_matches_factorize(values, dense):
    """Both ways of numbering codes by first appearance (a table for dense codes, a hash table for
    sparse ones) give what factorizing the values gives."""
    from hta_lite.load.columns import factorize
    from hta_lite.rows import first_seen

    codes = np.array([v % 7 for v in values] if dense else values, np.int64)
    renumbered, rows = first_seen(codes)
    expected, distinct = factorize(codes.tolist())
    assert renumbered.tolist() == expected.tolist()
    assert codes[rows].tolist() == distinct


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), NAMES), max_size=40),
    picks=st.lists(st.integers(0, 39), max_size=20),
    as_text=st.booleans(),
)
def test_text_values_equal_pandas_conversion(values, picks, as_text):
    """The codes-based ``text_values`` / ``text_array`` (used on categorical name / type
    columns) give exactly pandas' ``to_numpy(dtype=object)``, missing values (NaN) included, at
    any rows; ``text_array`` with the categories' string dtype."""
    import pandas as pd

    from hta_lite.analyses.common import text_array, text_values

    dtype = pd.CategoricalDtype(pd.Index(sorted({v for v in values if v}), dtype="str"))
    column = pd.Series(values, dtype="str" if as_text else dtype)
    rows = np.array([p for p in picks if p < len(values)], np.intp)
    want = column.to_numpy(dtype=object)
    for got, expected in ((text_values(column), want), (text_values(column, rows), want[rows])):
        assert got.dtype == object and len(got) == len(expected)
        assert [None if v != v else v for v in got] == [None if v != v else v for v in expected]
    for got, expected in ((text_array(column), want), (text_array(column, rows), want[rows])):
        got = pd.Series(got)
        assert as_text or got.dtype == dtype.categories.dtype
        assert got.isna().tolist() == pd.isna(expected).tolist()
        assert got.fillna("").tolist() == ["" if pd.isna(v) else v for v in expected]


@settings(max_examples=100, derandomize=True, deadline=None)
@given(
    values=st.lists(NAMES | st.just(""), min_size=1, max_size=8), picks=st.lists(st.integers(0, 7))
)
def test_text_column_equals_indexing(values, picks):
    """``text_column(values, codes)`` holds ``values[codes]`` (repeated and empty values too)."""
    import pandas as pd

    from hta_lite.analyses.common import text_column

    codes = np.array([p % len(values) for p in picks], np.intp)
    got = pd.Series(text_column(values, codes))
    assert got.tolist() == [values[c] for c in codes]


@settings(max_examples=100, derandomize=True, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(-1, 3), st.integers(-1, 2), st.integers(-1, 5)), max_size=30
    ),
    huge=st.booleans(),
)
def test_combine_codes_numbers_distinct_rows_in_order_of_appearance(rows, huge):
    """``combine_codes`` gives each row the number of its distinct (code, code, code) row in
    order of first appearance, and the first row of each; with codes too large to combine in
    one int64 key too (``huge``)."""
    from hta_lite.load.columns import combine_codes

    scale = 2**40 if huge else 1
    columns = [
        np.array([r[i] * scale if r[i] >= 0 else -1 for r in rows], np.int64) for i in range(3)
    ]
    group, first = combine_codes(columns)
    seen: dict = {}
    want = [seen.setdefault(r, len(seen)) for r in rows]
    assert group.tolist() == want
    assert first.tolist() == [rows.index(r) for r in seen]


@settings(max_examples=100, derandomize=True, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), NAMES), max_size=30),
    prefix=st.sampled_from(["aten::", "Pro", "", "x"]),
)
def test_starts_with_equals_the_string_method(values, prefix):
    """``starts_with`` (once per category) equals pandas' ``str.startswith`` per row; missing
    values do not start with anything."""
    import pandas as pd

    from hta_lite.analyses.common import starts_with

    column = pd.Series(values, dtype="category")
    want = [v is not None and v.startswith(prefix) for v in values]
    got = starts_with(column, prefix)
    assert got.dtype == bool and got.tolist() == want


# pieces of the names the kernel type rules look for, placed anywhere in a name
_RULE_PIECES = ["nccl", "rccl", "hccl", "ncclKernel", "ncclDevKernel", "hip", "Memcpy", "Memset",
                "dma", "Sync", "Stream Wait Event", "cuda", "LaunchKernel", "runFunction",
                "job_exe", "packet", "pe_exe", "gemm", " ", "\n", "ü"]  # fmt: skip


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    names=st.lists(
        st.one_of(st.none(), st.lists(st.sampled_from(_RULE_PIECES), max_size=4).map("".join)),
        max_size=20,
    )
)
def test_kernel_types_equal_the_per_name_rules(names):
    """The vectorized classification (Arrow's RE2 over the distinct names) equals
    ``kernel_type`` (Python's ``re``) name by name; a missing name is OTHER."""
    import pandas as pd

    from hta_lite.classify import kernel_type, kernel_types

    got = kernel_types(pd.Series(names, dtype=object)).astype(object).tolist()
    assert got == [kernel_type(n) if n is not None else "OTHER" for n in names]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    values=st.lists(
        st.one_of(st.none(), SHAPES, st.lists(st.sampled_from(["float", "", "Scalar"]))),
        max_size=8,
    ),
    spacing=st.sampled_from([None, 0, 1]),
)
def test_canonical_texts_of_a_column_equal_each_text_alone(values, spacing):
    """The texts of a column made canonical together (integer lists joined and respaced at once)
    equal each text made canonical alone."""
    import json

    from hta_lite.load.columns import _canonical_json, _canonical_texts

    separators = (",", ":") if spacing is None else None
    texts = [
        None if v is None else json.dumps(v, indent=spacing, separators=separators) for v in values
    ]
    assert _canonical_texts(texts) == [None if t is None else _canonical_json(t) for t in texts]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-1, 30), max_size=40),
    st.lists(st.booleans(), min_size=40, max_size=40),
    st.lists(st.integers(0, 39), max_size=20),
)
def test_nearest_ancestor_walks_up_to_the_closest_target(links, targets, picks):
    """``nearest_ancestor`` gives what walking each row's parents one by one gives (a forest:
    every parent row comes before its child)."""
    from hta_lite.load.links import nearest_ancestor

    parent = np.array([p if p < i else -1 for i, p in enumerate(links)], np.int64)
    is_target = np.array(targets[: len(parent)], bool)
    rows = np.array([r for r in picks if r < len(parent)], np.int64)
    expected = []
    for row in rows.tolist():
        current = parent[row]
        while current >= 0 and not is_target[current]:
            current = parent[current]
        expected.append(int(current))
    assert nearest_ancestor(parent, is_target, rows).tolist() == expected


def _forward_by_merge(cpu: pd.DataFrame, flows: pd.DataFrame, is_op, depth) -> np.ndarray:
    """The backward -> forward links of ``fwdbwd`` flows as first written, with pandas' merge,
    sort, drop_duplicates and pivot: the oracle of the numpy version."""
    rows = np.flatnonzero(is_op)
    fwd_tid = cpu["fwd_thread_id"].to_numpy()[rows]
    seq = cpu["sequence_number"].to_numpy()[rows]
    ops = pd.DataFrame(
        {"pid": cpu["pid"].to_numpy()[rows], "tid": cpu["tid"].to_numpy()[rows],
         "ts": cpu["ts"].to_numpy()[rows], "row": rows,
         "forward_like": (seq >= 0) & (fwd_tid == 0), "backward_like": (seq >= 0) & (fwd_tid > 0),
         "depth": depth[rows]}
    )  # fmt: skip
    ends = pd.DataFrame({c: np.asarray(flows[c]) for c in ("pid", "tid", "ts", "id")})
    ends["ph"] = np.asarray(flows["ph"], dtype=object)
    hits = ends[ends["ph"].isin(("s", "f"))].merge(ops, on=["pid", "tid", "ts"])
    hits["preferred"] = np.where(hits["ph"] == "s", hits["forward_like"], hits["backward_like"])
    hits = hits.sort_values(["preferred", "depth"], ascending=[False, True], kind="stable")
    pairs = hits.drop_duplicates(["id", "ph"]).pivot(index="id", columns="ph", values="row")
    out = np.full(len(cpu), -1, np.int64)
    if {"s", "f"} <= set(pairs.columns):
        pairs = pairs.dropna()
        out[pairs["f"].to_numpy(np.int64)] = pairs["s"].to_numpy(np.int64)
    return out


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 3), st.integers(-1, 2), st.integers(0, 2),
                  st.booleans(), st.integers(0, 3)),
        max_size=30,
    ),
    flows=st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 3), st.integers(0, 7),
                  st.sampled_from(["s", "f", "t"])),
        max_size=20,
    ),
)  # fmt: skip
def test_forward_links_through_flows_match_a_merge(ops, flows):
    """Backward -> forward operator links through ``fwdbwd`` flows (several operators and several
    flow ends at one place, ties on depth, ids reached twice) are what joining the tables with
    pandas gives."""
    from hta_lite.load.forward_links import _by_flows

    cpu = pd.DataFrame(
        {"tid": [o[0] for o in ops], "ts": [o[1] for o in ops],
         "sequence_number": [o[2] for o in ops], "fwd_thread_id": [o[3] for o in ops],
         "pid": np.zeros(len(ops), np.int64)},
        dtype=np.int64,
    )  # fmt: skip
    is_op = np.array([o[4] for o in ops], bool)
    depth = np.array([o[5] for o in ops], np.int64)
    flow = pd.DataFrame(
        {"tid": [f[0] for f in flows], "ts": [f[1] for f in flows], "id": [f[2] for f in flows],
         "pid": np.zeros(len(flows), np.int64)},
        dtype=np.int64,
    )  # fmt: skip
    flow["ph"] = pd.Categorical([f[3] for f in flows])
    linked = np.arange(len(flows))
    expected = _forward_by_merge(cpu, flow, is_op, depth)
    assert _by_flows(cpu, flow, linked, is_op, depth).tolist() == expected.tolist()
