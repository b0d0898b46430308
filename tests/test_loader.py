"""Loader: every real trace loads, counts match the raw JSON, times are exact, ranks are right."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, SAMPLES, health_messages, needs_shared, shared_cases
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.errors import (
    DuplicateRankError,
    NoTraceFilesError,
    TraceDecodeError,
    TraceError,
    TraceFormatError,
    TraceNotFoundError,
    TraceReadError,
)
from hta_lite.kineto import GPU_CATEGORIES
from hta_lite.load import decode as dec
from hta_lite.load.tables import build_tables

CASES = shared_cases()


def raw_events(path: Path) -> tuple[dict, list]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        doc = json.loads(f.read(), parse_float=Decimal)
    return doc, doc["traceEvents"]


def files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_shared_trace_loads_with_raw_counts(case):
    for path in files_of(CASES[case]):
        _, events = raw_events(path)
        gpu_raw = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
        kernels_raw = sum(1 for e in gpu_raw if e.get("cat") == "kernel")
        tables, by_phase, _ = build_tables(dec.read_and_decode(path))
        assert len(tables["gpu"]) == len(gpu_raw)
        assert int((tables["gpu"]["cat"] == "kernel").sum()) == kernels_raw
        assert sum(v for k, v in by_phase.items() if "/" not in k) == len(events)
        assert sum(v for k, v in by_phase.items() if k.startswith("X/")) == by_phase.get("X", 0)
        cpu_raw = sum(1 for e in events if e.get("ph") == "X") - len(gpu_raw)
        others = len(tables["cpu"]) + len(tables["gpu_annotations"])
        assert others + len(tables["kernel_counters"]) == cpu_raw
    analysis = TraceAnalysis(trace_dir=CASES[case], parallel=False, progress=False)
    assert len(analysis.ranks) == len(files_of(CASES[case]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_excluded_gpu_events_are_accounted(case):
    analysis = TraceAnalysis(trace_dir=CASES[case], parallel=False, progress=False)
    for trace in analysis.traces.values():
        _, events = raw_events(Path(trace.path))
        gpu_raw = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES)
        excluded = sum(
            v
            for k, v in health_messages(trace.health).items()
            if k.startswith("GPU events") and "excluded" in k
        )
        assert len(trace.gpu) + excluded == gpu_raw


@needs_shared
def test_ns_resolution_timestamps_are_exact():
    path = files_of(CASES["ns_resolution"])[0]
    _, events = raw_events(path)
    expected = sorted(
        (int(Decimal(e["ts"]) * 1000), int(Decimal(e["dur"]) * 1000))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES
    )
    gpu = build_tables(dec.read_and_decode(path))[0]["gpu"]
    got = sorted(zip(gpu["ts"].tolist(), gpu["dur"].tolist()))
    assert got == expected
    assert (gpu["dur"] >= 0).all()
    assert (gpu["dur"] % 1000 != 0).any()  # sub-µs digits survived
    assert (gpu["ts"] % 1000 != 0).any()


def test_epoch_timestamp_is_exact(tmp_path):
    doc = (
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,'
        ' "ts": 1712195495519689.047, "dur": 1.001, "args": {"stream": 7}}]}'
    )
    (tmp_path / "t.json").write_text(doc)
    gpu = TraceAnalysis(trace_dir=tmp_path).gpu_events(0)
    assert gpu["ts"].iloc[0] == 1712195495519689047
    assert gpu["dur"].iloc[0] == 1001


def test_metadata_read_whatever_its_position(tmp_path):
    doc = (
        b'{"traceEvents": [], "distributedInfo": {"rank": 5}, "displayTimeUnit": "ns",'
        b' "baseTimeNanoseconds": 17}'
    )
    (tmp_path / "a.json").write_bytes(doc)
    analysis = TraceAnalysis(trace_dir=tmp_path)
    assert analysis.ranks == [5]
    assert analysis.metadata(5)["displayTimeUnit"] == "ns"
    assert analysis.metadata(5)["baseTimeNanoseconds"] == 17


def test_sample_metadata_and_links(two_ranks):
    assert two_ranks.ranks == [0, 1]
    gpu, cpu = two_ranks.gpu_events(0), two_ranks.cpu_events(0)
    assert gpu["ts"].dtype == np.int64 and gpu["dur"].dtype == np.int64
    assert isinstance(gpu["name"].dtype, pd.CategoricalDtype)
    launched = gpu[gpu["launch_row"] >= 0]
    assert len(launched) == len(gpu)  # every kept GPU event has its launch
    runtime = cpu.iloc[launched["launch_row"].to_numpy()]
    assert (runtime["correlation"].to_numpy() == launched["correlation"].to_numpy()).all()
    assert (runtime["ts"].to_numpy() <= launched["ts"].to_numpy()).all()
    ops = runtime["op_row"].to_numpy()
    assert (ops >= 0).mean() > 0.9
    assert (cpu.iloc[ops[ops >= 0]]["cat"] == "cpu_op").all()
    assert set(gpu["iteration"].unique()) == {551}  # last step (552) excluded by default
    assert two_ranks.get_profiler_steps() == [551]  # the steps analyses see, as the reference
    assert two_ranks.trace(0).steps["step"].tolist() == [551, 552]  # all steps of the file


def test_include_last_profiler_step_keeps_it():
    a = TraceAnalysis(
        trace_dir=SAMPLES / "two_ranks", include_last_profiler_step=True, parallel=False
    )
    assert set(a.gpu_events(0)["iteration"].unique()) == {551, 552}


def test_parallel_and_serial_give_the_same_tables():
    serial = TraceAnalysis(trace_dir=SAMPLES / "two_ranks", parallel=False)
    parallel = TraceAnalysis(
        trace_dir=SAMPLES / "two_ranks", parallel=True, max_workers=2, progress=False
    )
    for rank in serial.ranks:
        pd.testing.assert_frame_equal(serial.gpu_events(rank), parallel.gpu_events(rank))
        pd.testing.assert_frame_equal(serial.cpu_events(rank), parallel.cpu_events(rank))


def test_cpu_only_trace_loads_and_says_so():
    a = TraceAnalysis(trace_dir=DATA / "cpu_only")
    assert a.ranks == [34]
    assert a.traces[34].is_cpu_only
    assert a.get_temporal_breakdown(visualize=False)["kernel_time(us)"].isna().all()
    assert "no GPU events (CPU-only trace)" in set(a.health()["item"])


def _unranked(path: Path, gz: bool = False) -> Path:
    return TraceBuilder(rank=None).kernel("k", 10, 5, launch_ts=8).write(path, gz=gz)


def test_rank_from_file_name(tmp_path):
    _unranked(tmp_path / "trace_rank-3.json")
    _unranked(tmp_path / "worker5.pt.trace.json.gz", gz=True)
    _unranked(tmp_path / "rank_12.json")
    assert TraceAnalysis(trace_dir=tmp_path, parallel=False).ranks == [3, 5, 12]


def test_rank_assigned_deterministically_with_warning(tmp_path):
    TraceBuilder(rank=0).kernel("k", 10, 5, launch_ts=8).write(tmp_path / "b.json")
    _unranked(tmp_path / "c.json")
    _unranked(tmp_path / "a.json")
    with pytest.warns(UserWarning) as record:
        a = TraceAnalysis(trace_dir=tmp_path, parallel=False)
    assert [str(w.message).split("; ")[-1] for w in record] == [
        "assigned rank 1",
        "assigned rank 2",
    ]
    assert a.ranks == [0, 1, 2]
    assert Path(a.traces[1].path).name == "a.json" and Path(a.traces[2].path).name == "c.json"


def test_duplicate_rank_names_both_files(tmp_path):
    TraceBuilder(rank=2).kernel("k", 10, 5).write(tmp_path / "one.json")
    TraceBuilder(rank=2).kernel("k", 10, 5).write(tmp_path / "two.json")
    with pytest.raises(DuplicateRankError, match=r"two\.json.*rank 2.*one\.json"):
        TraceAnalysis(trace_dir=tmp_path, parallel=False)


def test_trace_files_mapping(tmp_path):
    p = _unranked(tmp_path / "x.json")
    assert TraceAnalysis(trace_files={7: p}).ranks == [7]


@pytest.mark.parametrize(
    "content, error, message",
    [
        (b"", TraceDecodeError, "empty"),
        (b'{"traceEvents": [{"ph": "X"', TraceDecodeError, "invalid JSON"),
        (b"[1, 2]", TraceFormatError, "top level is a JSON list"),
        (b'{"schemaVersion": 1}', TraceFormatError, "no 'traceEvents'"),
        (b'{"traceEvents": 5}', TraceFormatError, "not a JSON list"),
        (gzip.compress(b'{"traceEvents": []}' * 50, mtime=0)[:30], TraceReadError, "gzip"),
    ],
)
def test_bad_files_raise_errors_naming_the_file(tmp_path, content, error, message):
    (tmp_path / "bad.json").write_bytes(content)
    with pytest.raises(error, match=message) as info:
        TraceAnalysis(trace_dir=tmp_path)
    assert "bad.json" in str(info.value)


def test_missing_and_empty_folders(tmp_path):
    with pytest.raises(TraceNotFoundError, match="does not exist"):
        TraceAnalysis(trace_dir=tmp_path / "nope")
    with pytest.raises(NoTraceFilesError, match="no trace files") as info:
        TraceAnalysis(trace_dir=tmp_path)
    assert "subfolders" not in str(info.value)


def test_a_parent_of_run_folders_says_which_subfolders_hold_traces():
    """sample_traces/gloo_collectives holds two runs (4ranks, 8ranks): passing the parent names
    them instead of only "no trace files"."""
    with pytest.raises(NoTraceFilesError) as info:
        TraceAnalysis(trace_dir=SAMPLES / "gloo_collectives")
    assert str(info.value).endswith("its subfolders 4ranks, 8ranks hold traces: pass one of them")


def test_gzipped_nsys_exports_are_read_and_their_temporary_copy_removed(tmp_path, monkeypatch):
    """SQLite reads an export in place: a gzipped one (a folder of them, or one given as the
    trace) is gunzipped into a temporary folder, read as the export, and that folder removed;
    its health says so."""
    import shutil

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    folder = tmp_path / "exports"
    folder.mkdir()
    gzipped = folder / "rank0.sqlite.gz"
    shutil.copy(DATA / "nsys" / "pipit_saxpy_mpi.sqlite.gz", gzipped)
    plain = tmp_path / "plain" / "rank0.sqlite"
    plain.parent.mkdir()
    plain.write_bytes(gzip.decompress(gzipped.read_bytes()))
    read = TraceAnalysis(trace_dir=folder, parallel=False, cache=False, progress=False)
    one = TraceAnalysis(trace_dir=gzipped, parallel=False, cache=False, progress=False)
    expected = TraceAnalysis(trace_dir=plain.parent, parallel=False, cache=False, progress=False)
    for analysis in (read, one):
        assert analysis.ranks == expected.ranks == [0]
        pd.testing.assert_frame_equal(analysis.trace(0).gpu, expected.trace(0).gpu)
        pd.testing.assert_frame_equal(analysis.trace(0).cpu, expected.trace(0).cpu)
        assert analysis.trace(0).health["nsys_export_gunzipped"] == 1
    assert "nsys_export_gunzipped" not in expected.trace(0).health
    assert list(temporary.iterdir()) == []  # the copies gone, nothing else touched


def test_a_gzipped_export_that_inflates_past_the_limits_is_refused_naming_it(tmp_path, monkeypatch):
    """A gzip bomb named like an export is refused as any gzip trace is, before it fills the
    disk, and nothing is left in the temporary folder."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    bomb = tmp_path / "rank0.sqlite.gz"
    bomb.write_bytes(gzip.compress(b"SQLite format 3\0" + bytes(64 << 20)))  # 64 MiB of zeros
    with pytest.raises(TraceReadError, match=r"rank0.sqlite.gz: inflates .* gzip bomb"):
        TraceAnalysis(trace_dir=bomb, parallel=False, cache=False, progress=False)
    assert list(temporary.iterdir()) == []


def test_a_truncated_gzipped_export_is_corrupt_gzip_not_a_full_disk(tmp_path):
    data = gzip.compress(b"SQLite format 3\0" + os.urandom(100_000))
    (tmp_path / "rank0.sqlite.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceReadError, match="rank0.sqlite.gz: corrupt or truncated gzip data"):
        TraceAnalysis(trace_dir=tmp_path, parallel=False, cache=False, progress=False)


def test_no_room_to_gunzip_an_export_names_it_and_what_to_set(tmp_path, monkeypatch):
    import builtins
    import errno
    import io

    from hta_lite.load import gzip_text

    class Full(io.FileIO):  # the file opens; its first write finds the disk full
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    def full(file, mode="r", *args, **kwargs):  # reads as ever
        return Full(file, mode) if "w" in mode else builtins.open(file, mode, *args, **kwargs)

    exports = tmp_path / "exports"
    exports.mkdir()
    (exports / "rank0.sqlite.gz").write_bytes(gzip.compress(b"SQLite format 3\0" + bytes(100)))
    monkeypatch.setattr(gzip_text, "open", full, raising=False)
    with pytest.raises(TraceReadError) as info:
        TraceAnalysis(trace_dir=exports, parallel=False, cache=False, progress=False)
    assert "rank0.sqlite.gz" in str(info.value) and "No space left on device" in str(info.value)
    assert "set TMPDIR" in str(info.value)


def test_unreadable_file_is_a_trace_error(tmp_path):
    (tmp_path / "dangling.json").symlink_to(tmp_path / "missing-target.json")
    with pytest.raises(TraceReadError, match="dangling.json"):
        TraceAnalysis(trace_dir=tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    """A FIFO named like a trace (no writer: a plain open would wait forever) is a
    TraceReadError naming it, with the cache off and on (its key read the file: it hung), and
    the open descriptor is closed."""
    import threading

    from hta_lite.load.gzip_text import read_bytes

    os.mkfifo(tmp_path / "rank0.json")
    TraceBuilder(rank=1).kernel("k", 10, 5, launch_ts=8).write(tmp_path / "rank1.json")
    outcome = []

    def load():
        try:
            read_bytes(tmp_path / "rank0.json")
        except TraceReadError as exc:
            outcome.append(str(exc))
        for cache in (False, tmp_path / "cache"):
            a = TraceAnalysis(trace_dir=tmp_path, on_error="skip", parallel=False, cache=cache)
            outcome.append(a.ranks)

    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "opening the FIFO blocked"
    assert "rank0.json: not a regular file" in outcome[0] and outcome[1:] == [[1], [1]]
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before


def test_skip_keeps_good_ranks_and_lists_bad_files(tmp_path):
    TraceBuilder(rank=0).kernel("k", 10, 5, launch_ts=8).write(tmp_path / "good.json")
    (tmp_path / "bad.json").write_bytes(b"{not json")
    a = TraceAnalysis(trace_dir=tmp_path, on_error="skip", parallel=False)
    assert a.ranks == [0]
    assert list(a.skipped_files) == [str(tmp_path / "bad.json")]
    assert (a.health()["rank"] == -1).sum() == 1
    with pytest.warns(UserWarning, match="bad.json"):
        TraceAnalysis(trace_dir=tmp_path, on_error="warn", parallel=False)


def test_errors_are_one_family():
    assert all(
        issubclass(e, TraceError)
        for e in (DuplicateRankError, TraceReadError, TraceDecodeError, TraceFormatError)
    )


def test_bad_event_fields_are_counted_not_fatal(tmp_path):
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ok",
            "pid": 0,
            "tid": 7,
            "ts": 10,
            "dur": 5,
            "args": {"stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "nots",
            "pid": 0,
            "tid": 7,
            "dur": 5,
            "args": {"stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "neg",
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": -5,
            "args": {"stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "strts",
            "pid": 0,
            "tid": 7,
            "ts": "30",
            "dur": 1,
            "args": "oops",
        },
        {"ph": "B", "name": "begin", "pid": 0, "tid": 7, "ts": 1},
        42,
    ]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    a = TraceAnalysis(trace_dir=tmp_path)
    health = health_messages(a.traces[0].health)
    assert health["complete event without a valid ts (dropped)"] == 1
    assert health["negative dur (clamped to 0)"] == 1
    assert health["event is not a JSON object"] == 1
    assert health["'args' is not an object (args ignored)"] == 1
    assert health["unsupported phase 'B' (ignored)"] == 1
    assert sorted(a.gpu_events(0)["name"].astype(str)) == ["neg", "ok", "strts"]


@pytest.mark.parametrize(
    "texts, expected_ns, expected_valid, subns",
    [
        # whole microseconds: one int64 parse; beyond int64 nanoseconds -> invalid
        (
            [b"1661203462598738", b"-5", b"", b"9223372036854776", b"-9223372036854775808"],
            [1661203462598738000, -5000, 0, 0, 0],
            [1, 1, 0, 0, 0],
            0,
        ),
        # fractional: exact decimal, never through float64
        ([b"1712195495519689.047", b"2.08", b"null"], [1712195495519689047, 2080, 0], [1, 1, 0], 0),
        # quoted, exponent, and sub-nanosecond digits (truncated toward zero, counted)
        ([b'"12.5"', b"1e3", b"0.0015", b"true"], [12500, 1000000, 1, 0], [1, 1, 1, 0], 1),
    ],
)
def test_raw_us_to_ns_paths(texts, expected_ns, expected_valid, subns):
    from types import SimpleNamespace

    from hta_lite.load.timestamps import raw_us_to_ns

    ns, valid, n_subns = raw_us_to_ns([SimpleNamespace(ts=t) for t in texts], "ts")
    assert ns.tolist() == expected_ns
    assert valid.astype(int).tolist() == expected_valid
    assert n_subns == subns


_EVENT = {
    "ph": "X",
    "cat": "cpu_op",
    "name": "op",
    "pid": 1,
    "tid": 1,
    "ts": 1,
    "dur": 2,
    "args": {"Input Dims": [[], [1]], "l": [{"a": "}]"}]},
}
_LAYOUTS = {
    "events last": {"schemaVersion": 1, "traceEvents": [_EVENT, _EVENT]},
    "metadata arrays after events": {
        "traceEvents": [_EVENT],
        "deviceProperties": [{"id": 0}],
        "logs": ["[x] ]", "}]"],
        "traceName": "t",
    },
    "no events": {"a": [1], "traceEvents": [], "b": {"c": []}},
    "key text earlier": {"note": '"traceEvents": [ is a key', "traceEvents": [_EVENT], "z": "]"},
    "metadata longer than the search window": {"traceEvents": [_EVENT], "logs": ["x" * 1000] * 300},
}


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
def test_document_layouts_decode_like_json(layout):
    """The one-pass decode (events array found from the file's end) gives what json.loads gives."""
    doc = _LAYOUTS[layout]
    for text in (json.dumps(doc), json.dumps(doc, indent=2)):
        decoded = dec.decode(text.encode(), Path("x.json"))
        assert decoded.metadata == {k: v for k, v in doc.items() if k != "traceEvents"}
        events = decoded.events
        ts, valid, _ = events.times("ts")
        assert list(zip(events.field("ph"), events.field("name"), ts.tolist(), valid.tolist())) == [
            ("X", "op", 1000, True)
        ] * len(doc["traceEvents"])
        assert json.loads(bytes(decoded.raw_events)) == doc["traceEvents"]
        one_pass = dec._decode_plain_layout(text.encode(), Path("x.json"), Counter())
        assert (one_pass is None) == (layout == "metadata longer than the search window")


def test_last_step_is_cut_at_its_cpu_start(tmp_path):
    """The step window uses the CPU ProfilerStep#N; the GPU-side copy of the annotation (which
    starts later when the GPU runs behind) does not move the cut (the reference takes the latest
    start of any event of that name and so keeps part of the last step)."""
    b = TraceBuilder()
    for n, ts in ((1, 0), (2, 100), (3, 200)):
        b.step(n, ts, 100)
        b.events.append(
            {"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{n}", "pid": 0,
             "tid": 7, "ts": ts + 60, "dur": 100, "args": {"device": 0}}
        )  # fmt: skip
    b.kernel("in_step_2", 190, 5, launch_ts=150)
    b.kernel("in_step_3", 230, 5, launch_ts=210)  # launched after step 3 started on the CPU
    b.write(tmp_path / "rank0.json")
    gpu = TraceAnalysis(trace_dir=tmp_path, parallel=False, cache=False).gpu_events(0)
    assert gpu["name"].tolist() == ["in_step_2"]
    assert gpu["iteration"].tolist() == [2]


def test_workers_start_by_fork_only_where_it_is_safe(monkeypatch):
    import sys
    import threading

    from hta_lite.load.workers import start_method

    monkeypatch.delenv("HTA_LITE_START_METHOD", raising=False)
    if threading.active_count() == 1 and "ipykernel" not in sys.modules:
        assert start_method() == "fork"
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:  # another thread could hold a lock the forked child would need
        assert start_method() == "forkserver"
    finally:
        stop.set()
        other.join()
    monkeypatch.setitem(sys.modules, "ipykernel", object())  # a notebook kernel
    assert start_method() == "forkserver"
    assert start_method("spawn") == "spawn"
    monkeypatch.setenv("HTA_LITE_START_METHOD", "spawn")
    assert start_method() == "spawn"
    with pytest.raises(ValueError, match="not available"):
        start_method("teleport")


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_every_start_method_loads_the_same_tables(method):
    from hta_lite import LoadOptions

    serial = TraceAnalysis(trace_dir=SAMPLES / "two_ranks", parallel=False, cache=False)
    options = LoadOptions(max_workers=2, progress=False, cache=False, start_method=method)
    pooled = TraceAnalysis(trace_dir=SAMPLES / "two_ranks", options=options)
    for rank in serial.ranks:
        pd.testing.assert_frame_equal(serial.gpu_events(rank), pooled.gpu_events(rank))


def _op_trace(tmp_path: Path, indent) -> Path:
    b = TraceBuilder()
    b.cpu_op(
        "aten::mm", 10, 5,
        **{"Input Dims": [[2, 3], [3, 4]], "Input type": ["c10::BFloat16", "float"],
           "Input Strides": [[3, 1], [4, 1]], "Concrete Inputs": ["", "1.5e3"],
           "Sequence number": 7, "Fwd thread id": 0},
    )  # fmt: skip
    b.cpu_op("aten::relu", 20, 5, **{"Input Dims": [[-0, 2]], "Input type": ["é"]})
    b.cpu_op("python_fn", 30, 5, cat="python_function")
    efficiency = {"blocks per SM": 0.5, "warps per SM": 2, "est. achieved occupancy %": 25}
    b.kernel("k", 40, 3, **efficiency, **{"registers per thread": 32, "shared memory": 1024})
    path = tmp_path / f"indent{indent}.json"
    path.write_text(json.dumps({**b.meta, "traceEvents": b.events}, indent=indent))
    return path


@pytest.mark.parametrize("no_c", [False, True])
def test_operator_inputs_are_canonical_json_text_whatever_the_spacing(tmp_path, monkeypatch, no_c):
    """Kineto writes shapes compact or pretty-printed: the column holds json.dumps of the value
    either way, on both decoders; null and absent are missing."""
    if no_c:
        monkeypatch.setattr(dec, "_fastjson", None)
    tables = []
    for indent in (None, 2):
        decoded = dec.read_and_decode(_op_trace(tmp_path, indent))
        tables.append(build_tables(decoded)[0])
    for cpu in (t["cpu"] for t in tables):
        ops = cpu.set_index("name")
        assert ops.loc["aten::mm", "input_dims"] == "[[2, 3], [3, 4]]"
        assert ops.loc["aten::mm", "input_types"] == '["c10::BFloat16", "float"]'
        assert ops.loc["aten::mm", "input_strides"] == "[[3, 1], [4, 1]]"
        assert ops.loc["aten::mm", "concrete_inputs"] == '["", "1.5e3"]'
        assert ops.loc["aten::relu", "input_dims"] == "[[0, 2]]"  # -0 read as JSON reads it
        assert ops.loc["aten::relu", "input_types"] == '["\\u00e9"]'
        assert pd.isna(ops.loc["python_fn", "input_dims"])
        assert ops.loc["aten::mm", "sequence_number"] == 7
        assert ops.loc["aten::mm", "fwd_thread_id"] == 0
        assert ops.loc["aten::relu", "sequence_number"] == -1
    pd.testing.assert_frame_equal(tables[0]["cpu"], tables[1]["cpu"])
    kernel = tables[0]["gpu"].iloc[0]
    assert (kernel.blocks_per_sm, kernel.warps_per_sm, kernel.occupancy_pct) == (0.5, 2.0, 25.0)
    assert (kernel.registers_per_thread, kernel.shared_memory) == (32, 1024)


@pytest.mark.parametrize("method", ["", "fork", "forkserver", "spawn"])
@pytest.mark.parametrize("run_as", ["script", "module", "stdin"])
def test_a_script_without_main_guard_loads_in_worker_processes(tmp_path, method, run_as):
    """A user's script with no ``if __name__ == "__main__":`` guard is never re-run by a worker
    (it used to load the folder again inside the worker, which died), whatever the start
    method; the progress bar's thread (tqdm) runs as in a terminal."""
    import subprocess
    import sys

    script = tmp_path / "guardless.py"
    script.write_text(
        "from hta_lite import LoadOptions, TraceAnalysis\n"
        f"options = LoadOptions(max_workers=2, progress=True, cache=False)\n"
        f"analysis = TraceAnalysis(trace_dir={str(SAMPLES / 'two_ranks')!r}, options=options)\n"
        "print('ranks', analysis.ranks)\n"
    )
    command = {
        "script": [sys.executable, str(script)],
        "module": [sys.executable, "-m", "guardless"],
        "stdin": [sys.executable, "-"],
    }[run_as]
    env = {**os.environ, "HTA_LITE_START_METHOD": method, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        command, input=script.read_text() if run_as == "stdin" else None,
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ranks [0, 1]")


def test_a_c_decoder_not_built_is_said_once_with_the_fix(monkeypatch):
    from hta_lite.load import decode, loader

    monkeypatch.setattr(decode, "C_NOT_BUILT", True)
    monkeypatch.setitem(loader._SAID, "c_not_built", False)
    with pytest.warns(UserWarning, match="C decoder was not built.*apt-get install gcc"):
        TraceAnalysis(trace_dir=SAMPLES / "h100_bert_small", parallel=False, cache=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        TraceAnalysis(trace_dir=SAMPLES / "h100_bert_small", parallel=False, cache=False)
