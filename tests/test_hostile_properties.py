"""A property test: vendored real traces mutated at random (shapes, args, times, flows,
collective metadata, steps, memory events), every public method called on each. Whatever the
mutation: no exception but hta_lite's own, no negative or infinite time, every percentage within
0-100 unless its row is flagged. CI runs it with a fixed budget (``max_examples``)."""

from __future__ import annotations

import gzip
import json
import math
import os
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_every_method import CALLS  # noqa: E402

from hta_lite import TraceAnalysis  # noqa: E402
from hta_lite.errors import TraceError  # noqa: E402

TEMPLATES = {
    "h100": SAMPLES / "h100_bert_small" / "gaunernst_bert-small-uncased__1016001.json.gz",
    "memory": next((SAMPLES / "memory_leak").glob("*.json.gz")),
    "nccl_rank": SAMPLES / "two_ranks" / "sampled_rank-0.json.gz",
    "gloo_rank": SAMPLES / "gloo_buckets" / "rank-2.json.gz",  # CPU collectives, steps
    "long_run": SAMPLES / "long_run" / "rank-1.json.gz",  # 40 steps: step anomalies scored
}
DOCS = {name: json.loads(gzip.decompress(path.read_bytes())) for name, path in TEMPLATES.items()}

HOSTILE = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0, -1, 10**12, 2**62, 1e308, "", "x", "[0, 1, 2", None, [], [-1], {}]),
    st.lists(st.lists(st.integers(min_value=-(10**13), max_value=10**13), max_size=3), max_size=4),
)
ARG_KEYS = [
    "Input Dims", "Input type", "Concrete Inputs", "In msg nelems", "Out msg nelems", "Group size",
    "Process Group Ranks", "dtype", "Collective name", "stream", "correlation", "External id",
    "Total Allocated", "Total Reserved", "Bytes", "Addr", "Device Id", "Sequence number",
]  # fmt: skip
MUTATION = st.one_of(
    st.tuples(st.just("arg"), st.integers(0, 10**9), st.sampled_from(ARG_KEYS), HOSTILE),
    st.tuples(st.just("field"), st.integers(0, 10**9), st.sampled_from(["ts", "dur"]), HOSTILE),
    st.tuples(st.just("step"), st.integers(0, 10**9), st.sampled_from(["ts", "dur"]), HOSTILE),
    st.tuples(
        st.just("drop"), st.integers(0, 10**9), st.sampled_from(["ts", "dur", "args"]), st.none()
    ),  # fmt: skip
)


def _mutate(doc: dict, mutations: list) -> dict:
    doc = json.loads(json.dumps(doc))
    events = doc["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    for kind, index, key, value in mutations:
        if kind == "step" and steps:
            steps[index % len(steps)][key] = value
        elif kind == "drop":
            events[index % len(events)].pop(key, None)
        elif kind == "field":
            events[index % len(events)][key] = value
        else:
            with_args = [e for e in events if isinstance(e.get("args"), dict)]
            event = with_args[index % len(with_args)]
            if key in event["args"] or index % 3 == 0:
                event["args"][key] = value
    return doc


def _check_table(method: str, table: pd.DataFrame) -> None:
    flagged = np.zeros(len(table), bool)
    for flag in ("above_roof", "above_peak"):
        if flag in table.columns:
            flagged |= table[flag].to_numpy(bool)
    for position, column in enumerate(table.columns):
        series = table.iloc[:, position]
        if not pd.api.types.is_numeric_dtype(series) or series.dtype == bool:
            continue
        name = str(column)
        values = series.to_numpy(dtype=float, na_value=np.nan)
        finite = np.isfinite(values)
        if name.endswith(("(us)", "_us", "_ms", "(ms)")) or name in ("dur", "idle_time"):
            assert not np.isinf(values).any(), f"{method}: {name} infinite"
            if not name.startswith(("extra_", "change", "diff_")) and "skew" not in name:
                assert (values[finite] >= 0).all(), f"{method}: {name} negative"
        if "pctg" in name and not name.startswith(("change", "peak_vs")):
            ok = values[finite & ~flagged]
            assert ((ok >= -1e-9) & (ok <= 100 + 1e-6)).all(), f"{method}: {name} {ok.max()}"


def _check(method: str, result) -> None:
    if isinstance(result, pd.DataFrame):
        _check_table(method, result)
    elif isinstance(result, (tuple, list)):
        for item in result:
            _check(method, item)
    elif isinstance(result, dict):
        for item in result.values():
            _check(method, item)


#: a longer run with random examples (``--hypothesis-seed`` to pick them): docs/fuzzing.md
LONG_RUN = int(os.environ.get("HTA_LITE_FUZZ_EXAMPLES", "0"))


def mutated_traces(examples: int):
    """The decorators of a test over mutated traces (``template``, ``mutations``): ``examples``
    fixed examples in CI, or ``HTA_LITE_FUZZ_EXAMPLES`` random ones."""
    fixed = settings(
        max_examples=LONG_RUN or examples, deadline=None, derandomize=not LONG_RUN,
        database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )  # fmt: skip
    drawn = given(
        template=st.sampled_from(sorted(TEMPLATES)),
        mutations=st.lists(MUTATION, min_size=1, max_size=12),
    )
    return lambda test: fixed(drawn(test))


@mutated_traces(40)
def test_every_method_survives_mutated_real_traces(tmp_path_factory, template, mutations):
    folder = tmp_path_factory.mktemp("mutated")
    (folder / "rank-0.json").write_text(json.dumps(_mutate(DOCS[template], mutations)))
    try:
        analysis = TraceAnalysis(trace_dir=folder, cache=False, parallel=False, progress=False)
    except TraceError:
        return  # refused with a clear error: fine
    out = folder / "out"
    for method, call in sorted(CALLS.items()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = call(analysis, out)
            except TraceError:
                continue  # hta_lite's own error, naming the problem
            except Exception as exc:  # noqa: BLE001 - the property: never anything else
                pytest.fail(f"{method} on {template} {mutations}: {type(exc).__name__}: {exc}")
        _check(method, result)
    assert math.isfinite(float(analysis.health()["count"].sum()))


@st.composite
def gpu_work(draw):
    """(names, launch times, host-wait times) of GPU work: any names in any order, or a loop (a
    pattern over and over, cut anywhere, with a wait after each pass or anywhere)."""
    name = st.sampled_from(["a", "b", "c", "d", None])
    if draw(st.booleans()):
        names = draw(st.lists(name, max_size=80))
        times = draw(st.lists(st.integers(-5, 10**6), min_size=len(names), max_size=len(names)))
        return names, times, draw(st.lists(st.integers(0, 10**6), max_size=12))
    pattern = draw(st.lists(name, min_size=2, max_size=9))
    names = (pattern * 80)[: draw(st.integers(0, 80))]
    times = [10_000 * i for i in range(len(names))]
    passes = range(len(pattern) - 1, len(names), len(pattern))
    waits = (
        [10_000 * i + 5_000 for i in passes]
        if draw(st.booleans())
        else draw(st.lists(st.integers(0, 10**6), max_size=12))
    )
    return names, times, waits


@settings(max_examples=300, deadline=None)
@given(work=gpu_work())
def test_steps_from_repeating_gpu_work_survive_any_tables(work):
    """Any GPU work (names missing, times out of order, launches unlinked) and any host waits:
    the steps found from the repeating work, if any, start no later than they end and follow
    each other in time."""
    from hta_lite.load.steps_from_gpu_work import repeating_steps

    names, times, waits = work
    n = len(names)
    gpu = pd.DataFrame({
        "ts": np.asarray(times + waits, np.int64),
        "dur": np.asarray([10] * n + [300] * len(waits), np.int64),
        "name": pd.Categorical(names + ["Context Sync"] * len(waits)),
        "cat": pd.Categorical(["kernel"] * n + ["cuda_sync"] * len(waits)),
        "correlation": np.concatenate([np.arange(n) % 7 - 1, np.full(len(waits), -1)]),
    })  # fmt: skip
    calls = ["cudaLaunchKernel"] * 6 + ["cudaStreamSynchronize"]  # the last one waits
    cpu = pd.DataFrame({"ts": np.arange(0, 70, 10, dtype=np.int64) * 1000,
                        "dur": np.full(7, 2_000, dtype=np.int64), "name": pd.Categorical(calls),
                        "correlation": np.arange(-1, 6, dtype=np.int64)})  # fmt: skip
    found = repeating_steps(cpu, gpu)
    if found is not None:
        bounds = found[1]
        assert (bounds[:, 0] <= bounds[:, 1]).all()
        assert (np.diff(bounds[:, 1]) >= 0).all() and (bounds[1:, 0] == bounds[:-1, 1]).all()


@st.composite
def ranges_and_launches(draw):
    """(ranges: (name, thread, start, duration), launch times): random ones, or a loop of
    ``step`` ranges one after another holding the launches, with random ranges added."""
    noise = draw(st.lists(
        st.tuples(st.sampled_from(["step", "request", "fetch"]), st.integers(1, 3),
                  st.integers(0, 10**6), st.integers(0, 10**5)),
        max_size=20 if draw(st.booleans()) else 0,
    ))  # fmt: skip
    if draw(st.booleans()):
        return noise, draw(st.lists(st.integers(0, 11 * 10**5), min_size=1, max_size=40))
    length, count = draw(st.integers(1, 10**5)), draw(st.integers(2, 12))
    loop = [("step", 1, i * length, draw(st.integers(length // 2, length))) for i in range(count)]
    launches = [i * length + draw(st.integers(0, length // 2)) for i in range(count)]
    return loop + noise, launches


@settings(max_examples=300, deadline=None)
@given(work=ranges_and_launches())
def test_steps_from_ranges_survive_any_ranges(work):
    """Any ranges (names repeated or not, on several threads, overlapping, of zero length) and
    any launches: the steps found, if any, are one after another and start no later than they
    end; where a range gives them, they are that range's occurrences."""
    from collections import Counter

    from hta_lite.load.steps_from_ranges import steps

    ranges, launches = work
    n = len(launches)
    cpu = pd.DataFrame({
        "ts": np.asarray([r[2] for r in ranges] + launches, np.int64),
        "dur": np.asarray([r[3] for r in ranges] + [5] * n, np.int64),
        "name": pd.Categorical([r[0] for r in ranges] + ["cudaLaunchKernel"] * n),
        "cat": pd.Categorical(["user_annotation"] * len(ranges) + ["cuda_runtime"] * n),
        "pid": np.ones(len(ranges) + n, np.int64),
        "tid": np.asarray([r[1] for r in ranges] + [1] * n, np.int64),
        "correlation": np.asarray([-1] * len(ranges) + list(range(n)), np.int64),
    })  # fmt: skip
    gpu = pd.DataFrame({"ts": np.asarray(launches, np.int64) + 10, "dur": np.full(n, 50),
                        "name": pd.Categorical(["gemm"] * n), "cat": pd.Categorical(["kernel"] * n),
                        "correlation": np.arange(n, dtype=np.int64)})  # fmt: skip
    health = Counter()
    found = steps(cpu, gpu, health, whole_capture=False)
    if found is not None:
        ts, end = found["ts"].to_numpy(), (found["ts"] + found["dur"]).to_numpy()
        assert (found["dur"] >= 0).all() and (ts[1:] >= end[:-1]).all()
        named = [k.split(":", 1)[1] for k in health if k.startswith("steps_from_range:")]
        if named:
            assert set(found["name"].astype(str)) == set(named)


@settings(max_examples=300, deadline=None)
@given(
    period=st.integers(1_000, 10_000_000),
    jitter=st.lists(st.floats(-0.05, 0.05), min_size=30, max_size=30),
    ref_first=st.integers(0, 5), ref_count=st.integers(2, 20),
    mine_first=st.integers(0, 5), mine_count=st.integers(1, 20),
    clock=st.floats(-0.1, 0.1), start=st.integers(0, 3),
)  # fmt: skip
def test_the_step_shift_is_found_or_refused(period, jitter, ref_first, ref_count, mine_first,
                                            mine_count, clock, start):  # fmt: skip
    """Two ranks of one loop (iterations ``period`` ns apart, each start off by up to 5 %),
    each capturing its own run of iterations and numbering its steps from ``start``, one clock
    off by up to 10 % of a step: where their captures share an iteration the shift found gives
    each shared iteration one number on both; where they share none, none is found."""
    from hta_lite.load.step_alignment import shift

    def steps(first, count, offset):
        iterations = np.arange(first, first + count)
        ts = (iterations + np.asarray(jitter)[iterations]) * period + offset
        return iterations, pd.DataFrame({"step": np.arange(count) + start,
                                         "ts": ts.astype(np.int64),
                                         "dur": np.full(count, int(0.9 * period))})  # fmt: skip

    ref_iterations, reference = steps(ref_first, ref_count, 0)
    mine_iterations, mine = steps(mine_first, mine_count, clock * period)
    by = shift(mine, reference)
    shared = np.intersect1d(ref_iterations, mine_iterations)
    # iteration i is step start + (i - first) on each rank: mine move by their firsts' difference
    if len(shared):
        assert by == mine_first - ref_first
    else:
        assert by is None  # nothing in common: no shift, and the ranks are said to be apart


#: a clean rank beside the mutated one, so that the batch matches collectives across ranks
PARTNERS = {"gloo_rank": SAMPLES / "gloo_buckets" / "rank-0.json.gz",
            "nccl_rank": SAMPLES / "two_ranks" / "sampled_rank-1.json.gz"}  # fmt: skip


@mutated_traces(8)
def test_the_batch_survives_mutated_real_traces(tmp_path_factory, template, mutations):
    """The same mutations through summarize_folder (the workers' tables, the cross-rank views,
    the findings from the cache, health and key findings) and hta-lite batch's shaping: no
    exception but hta_lite's own; times and percentages as above."""
    from hta_lite.tools.batch import summarize_folder
    from hta_lite.views.batch_cli import batch_tables

    folder = tmp_path_factory.mktemp("mutated")
    (folder / "rank-0.json").write_text(json.dumps(_mutate(DOCS[template], mutations)))
    if template in PARTNERS:
        (folder / "partner.json.gz").write_bytes(PARTNERS[template].read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            summary = summarize_folder(
                folder, executor="serial", cache=folder / "cache", progress=False
            )
            tables, _ = batch_tables(summary)
        except TraceError:
            return  # refused with a clear error: fine
        except Exception as exc:  # noqa: BLE001 - the property: never anything else
            pytest.fail(f"batch on {template} {mutations}: {type(exc).__name__}: {exc}")
    for name, table in {**summary, **tables}.items():
        _check(name, table)
