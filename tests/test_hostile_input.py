"""Hostile and odd input, built by mutating a vendored real trace: no raw exception, no
impossible number; what cannot be is NaN, flagged on its row and counted in health."""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil

import pandas as pd
import pytest
from conftest import DATA, SAMPLES, assert_missing

from hta_lite import LoadOptions, TraceAnalysis, TraceDiff
from hta_lite.analyses.diff_gate import METRICS
from hta_lite.errors import SelectionError, TraceError
from hta_lite.load.health_items import describe
from hta_lite.load.rank_trace import RankTrace
from hta_lite.tools.synthetic import make_straggler_folder
from hta_lite.views.cli import main

BERT = SAMPLES / "h100_bert_small" / "gaunernst_bert-small-uncased__1016001.json.gz"


def mutated(tmp_path, mutate, name="mutated") -> TraceAnalysis:
    """The H100 sample with ``mutate(events)`` applied, loaded from ``tmp_path / name``."""
    doc = json.loads(gzip.decompress(BERT.read_bytes()))
    mutate(doc["traceEvents"])
    folder = tmp_path / name
    folder.mkdir()
    (folder / "rank-0.json").write_text(json.dumps(doc))
    return TraceAnalysis(trace_dir=folder, parallel=False, cache=False)


def dims_of_first(name, dims):
    def mutate(events):
        for event in events:
            if event.get("name") == name:
                event["args"]["Input Dims"] = dims
                return

    return mutate


def addmm_dims(dims):
    return dims_of_first("aten::addmm", dims)


@pytest.mark.parametrize(
    "dims",
    [
        [[512], [768, 2**70], [2**70, 512], [], []],  # elements past int64 (R1)
        [[512], [10**12, 10**12], [10**12, 512], [], []],
        [[512], [-141, 512], [512, 512], [], []],  # negative: -109.6 TFLOP/s before
        [[512], [141.5, 512], [512, 512], [], []],
        [[512], [1e308, 512], [512, 512], [], []],  # inf FLOPs before
    ],
    ids=["2^70", "1e24 elements", "negative", "float", "1e308"],
)
def test_impossible_shapes_are_nan_and_counted(tmp_path, dims):
    a = mutated(tmp_path, addmm_dims(dims))
    instances = a.get_operator_instances()
    bad = instances[instances["kind"] == "invalid shape"]
    assert (
        len(bad) == 1
        and math.isnan(bad["flops"].iloc[0])
        and bad["name"].iloc[0] == ("aten::addmm")
    )
    health = a.health().set_index("code")
    assert health.loc["shape_invalid", "count"] == 1
    assert "aten::addmm calls whose input shapes cannot be" in health.loc["shape_invalid", "item"]
    roofline = a.get_operator_roofline()
    assert (roofline["roof_pctg"].dropna() <= 100).all() and (roofline["flops"] >= 0).all()
    assert (roofline["achieved_tflops"].dropna() >= 0).all()
    assert a.get_mfu()["mfu_pctg"].between(0, 100).all()
    a.get_optimization_targets()
    assert main(["summarize", str(tmp_path / "mutated"), "--no-cache", "--serial"]) == 0


@pytest.mark.parametrize("k", [10**12, 10**16], ids=["1e12", "1e16"])
def test_achieved_above_the_roof_is_flagged_on_the_row_and_with_the_table(tmp_path, k):
    """A possible shape (fewer elements than int64 holds) whose FLOPs the kernels cannot have
    done: the first linear layer's GEMM with an inner dimension of ``k``."""
    a = mutated(tmp_path, addmm_dims([[512], [141, k], [k, 512], [], []]))
    roofline = a.get_operator_roofline()
    above = roofline[roofline["above_roof"]]
    assert len(above) == 1 and above["roof_pctg"].iloc[0] > 100
    assert (roofline.loc[~roofline["above_roof"], "roof_pctg"].dropna() <= 100).all()
    assert not a.get_optimization_targets()["above_roof"].any()  # no target from a wrong model
    mfu = a.get_mfu()
    assert mfu["above_peak"].all()
    # a view's own problems come with its result (health() is the same whatever ran)
    roof_items = [describe(key)[2] for key in roofline.attrs["problems"]]
    assert any("aten::addmm" in item and "H100 SXM" in item for item in roof_items)
    assert any("TFLOP/s" in describe(key)[2] for key in mfu.attrs["problems"])
    assert not {"above_roof", "above_peak"} & set(a.health()["code"])
    finding = a.get_key_findings().set_index("kind").loc["mfu", "finding"]
    assert "is above 100 %, which cannot be" in finding


def test_valid_shapes_stay_modelled(tmp_path):
    a = mutated(tmp_path, lambda events: None)
    assert "invalid shape" not in set(a.get_operator_instances()["kind"])
    assert not a.get_operator_roofline()["above_roof"].any()
    assert "shape_invalid" not in set(a.health()["code"])


NCCL = DATA / "nccl_parser_config" / "nccl_data.json.gz"


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    """Four ranks made from the vendored NCCL trace (rank 3 late at each step's collective)."""
    folder = tmp_path_factory.mktemp("nccl") / "ok"
    return make_straggler_folder(NCCL, folder, 4, 3, "host", gz=False)


def with_rank_2_metadata(four_ranks, tmp_path, change) -> TraceAnalysis:
    folder = tmp_path / "bad"
    shutil.copytree(four_ranks, folder)
    path = folder / "rank-2.json"
    doc = json.loads(path.read_text())
    for event in doc["traceEvents"]:
        if "Process Group Ranks" in event.get("args", {}):
            change(event["args"])
    path.write_text(json.dumps(doc))
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


DISAGREES, INVALID = "collective_metadata_disagrees", "collective_metadata_invalid"
NOT_NUMERIC = "arg_not_numeric"


@pytest.mark.parametrize(
    "change, counted",
    [
        (lambda args: args.update({"In msg nelems": -5}), INVALID),  # the output's size kept
        (lambda args: args.update({"In msg nelems": 10**30}), NOT_NUMERIC),  # past int64
        (lambda args: args.update({"In msg nelems": 2**62}), INVALID),  # x 4: wrapped to 0
        (lambda args: args.update({"Process Group Ranks": "[0, 1, 2"}), INVALID),  # R4: raw error
        (lambda args: args.update({"Collective name": "frobnicate"}), None),  # the kernel's name
    ],
    ids=["negative", "1e30", "2^62", "cut ranks", "unknown collective"],
)
def test_one_rank_with_bad_collective_metadata_never_empties_the_job(
    four_ranks, tmp_path, change, counted
):
    good = TraceAnalysis(trace_dir=four_ranks, cache=False, progress=False)
    a = with_rank_2_metadata(four_ranks, tmp_path, change)
    summary = a.get_collective_summary()
    assert summary["count"].sum() == good.get_collective_summary()["count"].sum() == 14
    assert a.get_straggler_report().stragglers == good.get_straggler_report().stragglers == [3]
    calls = a.get_collectives().calls
    assert (calls["in_bytes"] >= -1).all() and (calls["in_bytes"] != 0).all()  # never wrapped
    problems = a.get_collectives().problems
    odd = problems[problems["reason"] == "metadata disagree"]
    assert set(odd["ranks"]) <= {"2"}  # rank 2 named, no other
    health = a.health()
    listed = health["code"].isin([DISAGREES, INVALID, NOT_NUMERIC])
    codes = set(health.loc[listed, "rank"].astype(str) + ":" + health.loc[listed, "code"])
    assert codes == ({f"2:{counted}"} if counted else set())
    _batch_counts_alike(a)


def _batch_counts_alike(analysis):
    """The batch's health summary counts what the checks found as health_summary() does."""
    from hta_lite.tools.batch import summarize_folder

    batch = summarize_folder(analysis.trace_dir, executor="serial", cache=False, progress=False)
    columns = ["rank", "problems"]
    pd.testing.assert_frame_equal(batch["health_summary"][columns],
                                  analysis.health_summary()[columns])  # fmt: skip
    assert analysis.health_summary()["problems"].sum() > 0


def test_argument_errors_are_selection_errors_and_value_errors(two_ranks):
    calls = [
        lambda: two_ranks.get_collective_summary(by="bogus"),
        lambda: two_ranks.get_timers_across_ranks(log_option="bogus"),
        lambda: two_ranks.critical_path_analysis(0, "ProfilerStep", 0, data_load_events=["("]),
        lambda: two_ranks.get_operator_summary(ranks=[]),
        lambda: two_ranks.get_mfu(ranks=[]),
        lambda: two_ranks.get_memory_peaks(ranks=[]),
        lambda: two_ranks.get_step_breakdown(steps=[], visualize=False),
        lambda: TraceDiff.ops_diff(SAMPLES / "two_ranks", SAMPLES / "two_ranks", test_iteration=[]),
    ]
    for call in calls:
        with pytest.raises(SelectionError) as raised:
            call()
        assert isinstance(raised.value, ValueError)  # HTA users' except ValueError still works


# ---- the cache never serves bytes it did not write ----------------------------------------

TWO_RANKS_0 = SAMPLES / "two_ranks" / "sampled_rank-0.json.gz"


def _cached(tmp_path):
    """A one-rank folder, loaded once to fill the cache; ``(folder, cache, the idle time)``."""
    folder = tmp_path / "trace"
    folder.mkdir()
    shutil.copy(TWO_RANKS_0, folder)
    cache = tmp_path / "cache"
    first = TraceAnalysis(trace_dir=folder, cache=cache, parallel=False)
    return folder, cache, first.get_temporal_breakdown(False)["idle_time(us)"].iloc[0]


def _cached_trace(folder):
    return TraceAnalysis(trace_dir=folder, cache=False, parallel=False).trace(0)


@pytest.mark.parametrize("name", [f"{t}.arrow" for t in RankTrace.TABLES] + ["meta.json"])
def test_a_corrupt_cached_file_is_rebuilt_and_counted(tmp_path, name):
    folder, cache, idle = _cached(tmp_path)
    (entry,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    target = entry / name
    data = bytearray(target.read_bytes())
    if name == "meta.json":  # valid JSON, edited: a rank's health emptied
        doc = json.loads(bytes(data))
        doc["health"] = {}
        data = bytearray(json.dumps(doc).encode())
    else:  # 8 bytes flipped in the middle (idle time 1.4e12 µs, 100 % idle, before); flipped,
        middle = len(data) // 2  # not set to 0xff: a column of -1 is 0xff bytes already
        data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    target.write_bytes(bytes(data))
    again = TraceAnalysis(trace_dir=folder, cache=cache, parallel=False)
    assert again.get_temporal_breakdown(False)["idle_time(us)"].iloc[0] == idle == 321378.0
    table = name.removesuffix(".arrow")
    original = getattr(_cached_trace(folder), table if table in RankTrace.TABLES else "gpu")
    served = getattr(again.trace(0), table if table in RankTrace.TABLES else "gpu")
    pd.testing.assert_frame_equal(served, original)  # the trace's tables, not the bytes
    health = again.health().set_index("code")
    assert health.loc["cache_rebuilt", "item"].startswith(f"cache entry not as written ({name}")
    third = TraceAnalysis(trace_dir=folder, cache=cache, parallel=False)  # rewritten: clean
    getattr(third.trace(0), table if table in RankTrace.TABLES else "gpu")
    assert "cache_rebuilt" not in set(third.health()["code"])


def test_an_edit_in_the_middle_keeping_size_and_time_is_a_new_key(tmp_path):
    """A plain JSON trace edited in its middle (a kernel's duration, same number of digits),
    size and modification time restored: the cached tables are not served."""
    folder = tmp_path / "trace"
    folder.mkdir()
    text = gzip.decompress(TWO_RANKS_0.read_bytes()).decode()
    path = folder / "rank-0.json"
    path.write_text(text)
    cache = tmp_path / "cache"
    before = TraceAnalysis(trace_dir=folder, cache=cache, parallel=False).gpu_events(0)["dur"]
    stat = path.stat()
    middle = text.index('"dur": ', len(text) // 2)
    start = middle + len('"dur": ')
    end = start + len(text[start:].split(",")[0])
    digits = text[start:end]
    edited = text[:start] + ("9" * len(digits)) + text[end:]
    assert len(edited) == len(text) and edited != text
    path.write_text(edited)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = TraceAnalysis(trace_dir=folder, cache=cache, parallel=False).gpu_events(0)["dur"]
    cold = TraceAnalysis(trace_dir=folder, cache=False, parallel=False).gpu_events(0)["dur"]
    assert after.equals(cold) and not after.equals(before)


def test_a_corrupt_gzip_is_refused_with_the_cache_on_as_off(tmp_path, monkeypatch):
    from hta_lite.load import cache as cache_module

    monkeypatch.setattr(cache_module, "_SAMPLE", 1024)  # as in a file far larger than 128 KiB
    folder, cache, _ = _cached(tmp_path)
    path = folder / TWO_RANKS_0.name
    data = bytearray(path.read_bytes())
    stat = path.stat()
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    for cached in (False, cache):
        with pytest.raises(TraceError):
            TraceAnalysis(trace_dir=folder, cache=cached, parallel=False)


# ---- inflated size limited ---------------------------------------------------------------


def _bomb(path, events: int = 200_000):
    """A valid trace that gzip compresses ~900x (a real trace: 4-23x): one event repeated."""
    event = b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},'
    text = b'{"traceEvents": [' + event * events + b'{"ph": "M", "name": "x"}]}'
    path.write_bytes(gzip.compress(text, 9))
    return len(text)


@pytest.mark.parametrize("c_decoder", [True, False])
def test_a_gzip_bomb_is_refused_before_memory_grows(tmp_path, monkeypatch, c_decoder):
    from hta_lite.load import decode, stream

    if not c_decoder:
        monkeypatch.setattr(decode, "_fastjson", None)
    monkeypatch.setattr(stream, "MIN_FILE_BYTES", 1)
    folder = tmp_path / "bomb"
    folder.mkdir()
    text_bytes = _bomb(folder / "rank-0.json.gz")
    compressed = (folder / "rank-0.json.gz").stat().st_size
    assert text_bytes / compressed > 200
    with pytest.raises(TraceError, match=r"rank-0.json.gz: inflates (to )?more than .* gzip bomb"):
        TraceAnalysis(trace_dir=folder, cache=False, parallel=False)
    # a real trace as large as that is loaded when the limits say so
    options = LoadOptions(cache=False, parallel=False, max_inflate_ratio=10_000)
    a = TraceAnalysis(trace_dir=folder, options=options)
    assert len(a.cpu_events(0)) == 200_000
    monkeypatch.setenv("HTA_LITE_MAX_TEXT_GB", "0.001")  # a worker reads the environment
    import subprocess
    import sys

    code = (
        "from hta_lite import LoadOptions, TraceAnalysis\n"
        "options = LoadOptions(cache=False, max_inflate_ratio=10_000)\n"
        f"TraceAnalysis(trace_dir={str(folder)!r}, options=options)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0 and "inflates to more than 0.00 GiB" in done.stderr


def test_the_summary_of_many_bad_files_is_short(tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    shutil.copy(TWO_RANKS_0, folder)
    for i in range(500):
        (folder / f"empty-{i:03}.json").write_bytes(b"")
    a = TraceAnalysis(trace_dir=folder, on_error="skip", cache=False, progress=False)
    assert a.ranks == [0] and len(a.skipped_files) == 500
    with pytest.raises(TraceError) as raised:
        TraceAnalysis(trace_dir=folder / "nothing-here", cache=False)
    for path in folder.glob("sampled*"):
        path.unlink()
    with pytest.raises(TraceError) as raised:
        TraceAnalysis(trace_dir=folder, on_error="skip", cache=False, progress=False)
    message = str(raised.value)
    assert len(message) < 600 and "500 files" in message and "empty-000.json" in message


def test_a_folder_link_to_itself_is_explained(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(TraceError, match="a symbolic link to .*loop that leads nowhere"):
        TraceAnalysis(trace_dir=loop)


def test_a_negative_total_allocated_is_never_a_peak(tmp_path):
    source = next((SAMPLES / "memory_leak").glob("*.json.gz"))
    doc = json.loads(gzip.decompress(source.read_bytes()))
    memory = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    for event in memory[::10]:
        event["args"]["Total Allocated"] = -(10**12)
    folder = tmp_path / "negative"
    folder.mkdir()
    (folder / "rank-0.json").write_text(json.dumps(doc))
    a = TraceAnalysis(trace_dir=folder, parallel=False, cache=False)
    good = TraceAnalysis(trace_dir=SAMPLES / "memory_leak", parallel=False, cache=False)
    peaks = a.get_memory_peaks()
    assert (peaks["peak_allocated"] >= 0).all()
    assert peaks["peak_allocated"].tolist() == good.get_memory_peaks()["peak_allocated"].tolist()
    assert (a.get_memory_timeline()["allocated"] >= 0).all()
    health = a.health().set_index("code")
    assert health.loc["memory_total_negative", "count"] == len(memory[::10])


@pytest.mark.parametrize("dur", [0, -5])
def test_a_step_of_zero_or_negative_length_is_a_health_item(tmp_path, dur):
    def mutate(events):
        for event in events:
            if str(event.get("name", "")).startswith("ProfilerStep#"):
                event["dur"] = dur

    a = mutated(tmp_path, mutate)
    health = a.health().set_index("code")
    assert health.loc["profiler_step_empty", "count"] == 1
    timers = a.get_annotation_timers()  # a step that measured nothing is no 0.0 ms timer
    assert timers.loc[timers["name"] == "ProfilerStep", "step"].tolist() == []
    assert list(a.get_mfu().columns)[:3] == ["rank", "step", "step_time(us)"]


def test_negative_timestamps_are_dropped_and_counted(tmp_path):
    def mutate(events):
        for event in events[::20]:  # 5 % of the events
            if "ts" in event:
                event["ts"] = -abs(float(event["ts"]))

    a = mutated(tmp_path, mutate)
    instances = a.get_operator_instances()
    for column in ("host_total(us)", "host_self(us)", "device_total(us)", "device_self(us)"):
        assert (instances[column] >= 0).all(), column
    span = a.get_temporal_breakdown(False)["kernel_time(us)"].iloc[0]
    timers = a.get_annotation_timers()
    assert (timers["elapsed_ms"] >= 0).all() and (timers["elapsed_ms"] * 1e3 <= 10 * span).all()
    assert a.health().set_index("code").loc["negative_ts", "count"] > 0


def test_a_clock_1000_s_ahead_is_estimated_and_makes_no_wait(four_ranks, tmp_path):
    folder = tmp_path / "clock"
    shutil.copytree(four_ranks, folder)
    path = folder / "rank-1.json"
    doc = json.loads(path.read_text())
    for event in doc["traceEvents"]:
        if "ts" in event:
            event["ts"] = float(event["ts"]) + 1e9  # µs: 1000 s ahead
    path.write_text(json.dumps(doc))
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    good = TraceAnalysis(trace_dir=four_ranks, cache=False, progress=False)
    problems = a.get_collectives().problems
    clock = problems[problems["reason"] == "clock offset"]
    assert clock["ranks"].tolist() == ["1"]
    assert "about 1,000,000,0" in clock["detail"].iloc[0] and "ahead of" in clock["detail"].iloc[0]
    by_rank = a.get_collective_summary("rank")
    assert by_rank["wait_suffered_us"].max() < 1e6  # not 4.2e11
    report = a.get_straggler_report()
    assert (report.ranks["lateness_us"] < 1e6).all() and 1 not in report.stragglers
    assert a.health().set_index("code").loc["clock_offset", "rank"] == 1
    _batch_counts_alike(a)
    assert good.get_collectives().instances["ordered"].all()
    instances = a.get_collectives().instances  # no 1e9 µs skew shown as if measured
    assert instances.loc[~instances["ordered"], "arrival_skew_us"].isna().all()
    assert not (instances["arrival_skew_us"] > 1e6).any()


def test_r2_every_dim_of_a_rank_1e12_gives_no_division_by_zero(tmp_path):
    def mutate(events):
        for event in events:
            dims = event.get("args", {}).get("Input Dims")
            if isinstance(dims, list):
                event["args"]["Input Dims"] = [[10**12] * len(d) for d in dims]

    a = mutated(tmp_path, mutate)
    # nothing left to model: said, not a ZeroDivisionError
    assert_missing(a.get_operator_roofline(), "no operator with a FLOP model")
    assert a.get_mfu()["mfu_pctg"].isna().all()
    assert a.health().set_index("code").loc["shape_invalid", "count"].sum() > 0


def test_r3_a_test_run_whose_gpu_work_is_all_in_the_dropped_last_step(tmp_path):
    """TraceDiff.compare against a test trace whose every GPU event was launched in its last
    ProfilerStep, which is left out (a raw TypeError before)."""
    from synth import TraceBuilder

    b = TraceBuilder()
    b.step(1, 0, 100)
    b.step(2, 100, 100)
    b.cpu_op("aten::mm", 110, 20)
    b.kernel("gemm", 150, 30, launch_ts=115)
    b.write(tmp_path / "test" / "rank-0.json")
    result = TraceDiff.compare(SAMPLES / "h100_bert_small", tmp_path / "test", metrics=METRICS)
    assert result.gate["not_compared"]["gpu_busy"] == (
        "test: no GPU events in the profiled steps (1 in the last ProfilerStep, left out)"
    )
    assert "step" in result.gate["metrics"] and result.summary


def test_r5_critical_path_of_a_trace_with_gpu_events_only(tmp_path):
    """The H100 sample with its GPU events and metadata only (a raw 'No objects to
    concatenate' before)."""

    def gpu_only(events):
        events[:] = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                     or e.get("ph") == "M"]  # fmt: skip

    a = mutated(tmp_path, gpu_only)
    assert a.cpu_events(0).empty and len(a.gpu_events(0))
    table = a.get_critical_path_summary(0, "")
    assert table.empty and list(table.columns) == ["duration_us", "pctg"]


def test_a_step_past_the_record_window_is_cut_there_and_counted(tmp_path):
    """A ProfilerStep cannot end after Kineto's ``Record Window End`` instant (HTA's triton
    sample: a 13.3 s step in a 1.8 ms window, which the findings read as a 13.3 s host-bound
    step). The last step of a real trace made to end 30 s later is cut at the window's end."""
    doc = json.loads(gzip.open(BERT).read())
    events = doc["traceEvents"]
    window_end = next(e["ts"] for e in events if e.get("name") == "Record Window End")
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") == "user_annotation"]  # fmt: skip
    last = max(steps, key=lambda e: e["ts"])
    last["dur"] += 30e6  # under a minute: not dropped as an implausible duration
    path = tmp_path / "rank-0.json"
    path.write_text(json.dumps(doc))
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, include_last_profiler_step=True)
    trace = a.trace(0)
    cut = trace.steps.set_index("name").loc[last["name"]]
    assert cut["ts"] + cut["dur"] == round(window_end * 1000)
    assert trace.health["profiler_step_past_window"] == 1
    assert "profiler_step_past_window" in a.health()["code"].tolist()
    assert a._findings_context(None).step_ns < 1e9  # not 30 s


def test_long_runtime_calls_without_a_name_are_no_start_up_and_no_error(tmp_path):
    """Start-up detection compares a runtime call with the other calls of its name: a long call
    with no name (or a null one) has none, and is left alone instead of raising."""
    from synth import TraceBuilder

    b = TraceBuilder()
    b.step(1, 0, 5000)
    b.step(2, 5000, 5000)
    b.kernel("k", 100, 10, launch_ts=50)
    doc = b.document()
    for name, ts in ((None, 3300), ("", 200)):
        event = {"ph": "X", "cat": "cuda_runtime", "ts": ts, "dur": 1500, "pid": 10, "tid": 1}
        doc["traceEvents"].append(event if name == "" else {**event, "name": name})
    (tmp_path / "rank-0.json").write_text(json.dumps(doc))
    table = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False).get_findings()
    assert "warmup" not in set(table["kind"])


def _two_ranks_with_steps(tmp_path, change) -> tuple:
    """two_ranks with rank 0's ProfilerSteps changed by ``change(steps)``: the folder, the
    analysis and the batch of it."""
    from hta_lite.tools.batch import summarize_folder

    doc = json.loads(
        gzip.decompress((SAMPLES / "two_ranks" / "sampled_rank-0.json.gz").read_bytes())
    )
    change([e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")])
    (tmp_path / "rank-0.json").write_text(json.dumps(doc))
    shutil.copy(SAMPLES / "two_ranks" / "sampled_rank-1.json.gz", tmp_path / "rank-1.json.gz")
    full = TraceAnalysis(trace_dir=tmp_path, parallel=False, cache=False, progress=False)
    batch = summarize_folder(tmp_path, executor="serial", cache=tmp_path / "cache", progress=False)
    return full, batch


@pytest.mark.parametrize(
    "change",
    [lambda steps: steps[0].update(dur=0),  # an empty step: call keys of no call (object)
     lambda steps: [s.update(ts=i) for i, s in enumerate(steps[:2])]],  # steps at the epoch
    ids=["empty_step", "steps_at_the_epoch"],
)  # fmt: skip
def test_damaged_steps_on_one_of_two_ranks_still_give_findings(tmp_path, change):
    """Found by the batch's property test: a ProfilerStep of zero length made the findings'
    replay compare call keys of object dtype (a TypeError in np.unique), in TraceAnalysis and
    the batch alike; steps moved to the epoch left a rank without operator rows, whose empty
    table made the batch's merged operator sums object (a TypeError in round). Both give their
    findings and key findings now, the batch's equal to the analysis's."""
    full, batch = _two_ranks_with_steps(tmp_path, change)
    pd.testing.assert_frame_equal(batch["findings"], full.get_findings())
    pd.testing.assert_frame_equal(batch["key_findings"], full.get_key_findings())
