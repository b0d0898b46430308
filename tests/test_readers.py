"""The reader seam: readers picked by suffix and content, files of several ranks (fused
traces) split into ranks, the legacy top-level list of events, the cache of such files."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from fused_trace import OFFSET, fuse

from hta_lite import LoadOptions, TraceAnalysis
from hta_lite.errors import SelectionError, TraceFormatError
from hta_lite.load import cache, readers
from hta_lite.load.rank_trace import parse_file, parse_parts

GLOO = ROOT / "sample_traces" / "gloo_4ranks"
TWO = ROOT / "sample_traces" / "two_ranks"
QUIET = dict(progress=False, cache=False)


def _fused(tmp_path: Path, folder: Path, pattern: str, ranks: int) -> Path:
    out = tmp_path / "fused"
    out.mkdir()
    fuse({r: folder / pattern.format(r) for r in range(ranks)}, out / "fused.json.gz")
    return out


def _same_rows(fused: pd.DataFrame, single: pd.DataFrame, columns: list[str]) -> None:
    """The fused rank's rows are the file's, less those without a process (pid -1)."""
    kept = single[single["pid"].to_numpy() != -1].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        fused[columns].astype(object), kept[columns].astype(object), check_dtype=False
    )


def test_fused_gloo_file_loads_as_its_four_ranks(tmp_path):
    fused = TraceAnalysis(trace_dir=_fused(tmp_path, GLOO, "rank-{}.json.gz", 4), **QUIET)
    files = TraceAnalysis(trace_dir=GLOO, **QUIET)
    assert fused.ranks == files.ranks == [0, 1, 2, 3]
    for rank in fused.ranks:
        one, many = files.trace(rank), fused.trace(rank)
        _same_rows(many.cpu, one.cpu, ["ts", "dur", "name", "cat", "iteration", "depth"])
        np.testing.assert_array_equal(many.cpu["pid"] - rank * OFFSET, many.cpu["pid"] % OFFSET)
        assert many.steps.equals(one.steps)
        assert many.health["fused_file"] == 4 and many.health["rank_from_process_name"] == 1
    # the same answers, but for what the files' headers alone say (process groups, the world
    # size: without them a collective cannot be known complete)
    for view in ("get_step_breakdown", "get_collective_summary"):
        ours, theirs = getattr(fused, view)(), getattr(files, view)()
        assert len(ours) and ours.columns.equals(theirs.columns)
        pd.testing.assert_frame_equal(
            ours.drop(columns=["pg", "partial"], errors="ignore").reset_index(drop=True),
            theirs.drop(columns=["pg", "partial"], errors="ignore").reset_index(drop=True),
            check_categorical=False,
        )
    assert fused.get_potential_stragglers() == files.get_potential_stragglers()


def test_fused_gpu_file_gives_the_temporal_breakdown_of_its_files(tmp_path):
    fused = TraceAnalysis(trace_dir=_fused(tmp_path, TWO, "sampled_rank-{}.json.gz", 2), **QUIET)
    files = TraceAnalysis(trace_dir=TWO, **QUIET)
    assert fused.ranks == [0, 1]
    pd.testing.assert_frame_equal(fused.get_temporal_breakdown(), files.get_temporal_breakdown())
    for rank in fused.ranks:
        one, many = files.trace(rank), fused.trace(rank)
        _same_rows(many.gpu, one.gpu, ["ts", "dur", "name", "stream", "iteration", "kernel_type"])
        # launch links hold in the fused file: the same kernels have a launching call
        assert (many.gpu["launch_row"] >= 0).sum() == (one.gpu["launch_row"] >= 0).sum()


def test_fused_file_health_says_what_it_lacks(tmp_path):
    fused = TraceAnalysis(trace_dir=_fused(tmp_path, TWO, "sampled_rank-{}.json.gz", 2), **QUIET)
    health = fused.health()
    facts = set(health[health["rank"] == 1]["code"])
    assert {"fused_file", "rank_from_process_name", "no_distributed_info"} <= facts


def _write(path: Path, events: list, header: dict | None = None) -> Path:
    path.write_text(json.dumps(events if header is None else {**header, "traceEvents": events}))
    return path


def _x(name, ts, pid, tid=1, **args):
    return {"ph": "X", "name": name, "ts": ts, "dur": 5, "pid": pid, "tid": tid, "cat": "cpu_op",
            "args": args}  # fmt: skip


def _named(pid, name):
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def test_rows_of_no_rank_are_dropped_and_counted(tmp_path):
    path = _write(tmp_path / "f.json", [
        _named(1, "RANK 0 - CPU"), _named(2, "RANK 1 - CPU"), _named(3, "python"),
        _x("a", 10, 1), _x("b", 10, 2), _x("c", 10, 3), _x("d", 20, 3),
    ], {})  # fmt: skip
    parts = parse_parts(path)
    assert [p.rank for p in parts] == [0, 1]
    assert [p.cpu["name"].tolist() for p in parts] == [["a"], ["b"]]
    assert parts[0].health["fused_row_without_rank"] == 2
    assert "fused_row_without_rank" not in parts[1].health


def test_a_process_named_for_two_ranks_is_refused(tmp_path):
    path = _write(tmp_path / "f.json", [
        _named(1, "RANK 0 - CPU"), _named(1, "RANK 1 - CPU"), _x("a", 10, 1),
    ], {})  # fmt: skip
    with pytest.raises(TraceFormatError, match="process 1 is named for ranks 0 and 1"):
        parse_parts(path)


def test_a_fused_file_cannot_be_given_one_rank(tmp_path):
    path = _write(tmp_path / "f.json", [
        _named(1, "RANK 0 - CPU"), _named(2, "RANK 1 - CPU"), _x("a", 10, 1), _x("b", 10, 2),
    ], {})  # fmt: skip
    with pytest.raises(TraceFormatError, match="holds 2 ranks"):
        TraceAnalysis(trace_files={0: path}, **QUIET)
    with pytest.raises(TraceFormatError, match="holds 2 ranks"):
        parse_file(path)


def test_fused_file_through_the_cache(tmp_path):
    folder = _fused(tmp_path, TWO, "sampled_rank-{}.json.gz", 2)
    options = LoadOptions(progress=False, cache=tmp_path / "cache", parallel=False)
    first = TraceAnalysis(trace_dir=folder, options=options)
    again = TraceAnalysis(trace_dir=folder, options=options)
    assert again.ranks == first.ranks == [0, 1]
    assert len(cache.entries(tmp_path / "cache")) == 2
    pd.testing.assert_frame_equal(again.get_temporal_breakdown(), first.get_temporal_breakdown())
    assert "_build" in again.trace(1).__dict__  # reopened from the cache
    # one rank's entry gone: the file is read again, not served half
    key = cache.entry_key(folder / "fused.json.gz", False)
    shutil.rmtree(tmp_path / "cache" / cache.part_key(key, 1))
    rebuilt = TraceAnalysis(trace_dir=folder, options=options)
    assert rebuilt.ranks == [0, 1]
    assert rebuilt.trace(0).health.get("cache_rebuilt:meta.json") == 1
    pd.testing.assert_frame_equal(rebuilt.get_temporal_breakdown(), first.get_temporal_breakdown())


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_the_batch_reads_every_rank_of_a_fused_file(tmp_path, executor):
    """summarize_folder on one fused file of 4 ranks gives the tables of the 4 files: the
    per-rank tables, the collectives matched across ranks and the findings (ranks reopened
    from the cache by their place in the file)."""
    from hta_lite.tools.batch import summarize_folder

    fused = _fused(tmp_path, GLOO, "rank-{}.json.gz", 4)
    one = summarize_folder(fused, executor=executor, cache=tmp_path / "c1")
    four = summarize_folder(GLOO, executor=executor, cache=tmp_path / "c4")
    for name in ("temporal_breakdown", "step_breakdown", "idle_time_breakdown",
                 "collectives_by_rank", "rank_lateness"):  # fmt: skip
        pd.testing.assert_frame_equal(one[name], four[name], check_exact=False, obj=name)
    assert sorted(set(one["step_breakdown"]["rank"])) == [0, 1, 2, 3]  # CPU-only: no GPU rows
    kinds = ["kind", "rank", "saving_ms_per_step"]
    pd.testing.assert_frame_equal(one["findings"][kinds], four["findings"][kinds])
    assert len(one["findings"]) > 0


def test_legacy_list_of_events_is_read(tmp_path):
    path = _write(tmp_path / "legacy.json", [
        {"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 100, "pid": "CPU functions",
         "tid": 1},
        {"ph": "X", "name": "aten::mm", "ts": 10, "dur": 5, "pid": "CPU functions", "tid": 1},
    ])  # fmt: skip
    trace = parse_file(path)
    assert trace.cpu["name"].tolist() == ["ProfilerStep#1", "aten::mm"]
    assert trace.cpu["depth"].tolist() == [0, 1]
    assert trace.health["event_list_file"] == 1 and trace.metadata == {}


@pytest.mark.parametrize("text", ["[]", "[1, 2, 3]", '[{"x": 1}]'])
def test_a_list_without_events_is_refused(tmp_path, text):
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(TraceFormatError, match="top level is a JSON list"):
        parse_file(path)


@pytest.mark.parametrize(
    ("head", "said"),
    [
        (b"SQLite format 3\x00" + bytes(100), "Nsight Systems export|SQLite database"),
        (b"PK\x03\x04" + bytes(100), "zip archive"),
        (b"\x80\x04}q\x00.", "pickle"),
    ],
)
def test_another_format_under_a_trace_name_is_named(tmp_path, head, said):
    for name, data in (("r.json", head), ("r.json.gz", gzip.compress(head))):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(TraceFormatError, match=said):
            readers.read(path)


def test_reader_by_content_when_the_suffix_says_nothing(tmp_path):
    path = _write(tmp_path / "trace.txt", [_x("a", 1, 1)], {})
    assert readers.reader_for(path).name == "kineto"
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(TraceFormatError, match="not a format hta_lite reads"):
        readers.reader_for(tmp_path / "notes.txt")


def test_a_named_step_range_makes_the_steps(tmp_path):
    """``step_range``: the ranges of that name are the steps (memory_leak's four ``leak``
    ranges, one a step; the program went on after the last, so it is kept, unlike the last
    ProfilerStep); through the cache and
    the CLI too; a name no range has is an error naming the file."""
    leak = ROOT / "sample_traces" / "memory_leak"
    named = TraceAnalysis(trace_dir=leak, step_range="leak", **QUIET)
    steps = named.trace(0).steps
    assert steps["name"].tolist() == ["leak"] * 4 and steps["step"].tolist() == [0, 1, 2, 3]
    assert named.get_step_breakdown()["step"].tolist() == [0, 1, 2, 3]
    cached = LoadOptions(step_range="leak", cache=tmp_path / "c", progress=False, parallel=False)
    TraceAnalysis(trace_dir=leak, options=cached)
    again = TraceAnalysis(trace_dir=leak, options=cached)
    assert "_build" in again.trace(0).__dict__ and again.trace(0).steps.equals(steps)
    plain = TraceAnalysis(trace_dir=leak, options=LoadOptions(cache=tmp_path / "c", progress=False))
    assert plain.trace(0).steps["name"].str.startswith("ProfilerStep#").all()  # its own entry
    with pytest.raises(SelectionError, match="rank-0.json.gz: no range named 'nope'"):
        TraceAnalysis(trace_dir=leak, step_range="nope", **QUIET)
    from hta_lite.views.cli import main

    assert main(["steps", str(leak), "--no-cache", "--step-range", "leak"]) == 0
