"""Every reader's output holds to the table contract (hta_lite/load/contract.py), before and
after the finishing step, and docs/tables.md shows that contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DATA, ROOT, sample_folders
from fused_trace import fuse

from hta_lite import LoadOptions, MemorySnapshot, TraceAnalysis
from hta_lite.errors import SnapshotError, TraceFormatError
from hta_lite.load import contract, readers
from hta_lite.load.finish import finish, finish_snapshot
from hta_lite.load.rank_trace import RankTrace, parse_parts
from hta_lite.load.readers import snapshot as snapshot_reader

SAMPLE_FILES = sorted(
    p for folder in sample_folders().values() for p in folder.rglob("*.json*")
    if p.name.endswith(readers.TRACE_SUFFIXES) and p.name != "execution_details.json"
)  # fmt: skip


def _broken(path: Path) -> list[str]:
    """Every contract problem of every rank of ``path``, as read and as finished."""
    out = []
    for read in readers.read(path):
        assert set(read.tables) == set(contract.READ_TABLES)
        for name, table in read.tables.items():
            out += contract.problems(name, table, "reader")
    for trace in parse_parts(path):
        assert set(RankTrace.TABLES) == set(contract.TABLES)
        for name in RankTrace.TABLES:
            out += contract.problems(name, getattr(trace, name))
    return out


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_kineto_reader_holds_to_the_contract(path):
    assert _broken(path) == []


def test_counter_columns_are_the_contract_s_open_columns():
    path = DATA / "cupti_profiler" / "benchmark_result_924719_1679055439_trace.json.gz"
    assert _broken(path) == []
    counters = parse_parts(path)[0].kernel_counters
    named = set(contract.TABLES["kernel_counters"].column_names())
    assert len(set(counters.columns) - named) == 9  # one float64 column per counter
    assert contract.problems("kernel_counters", counters.assign(x="text")) == [
        "kernel_counters: columns not in the contract ['x']"
    ]


def test_the_finishing_step_refuses_a_reader_that_breaks_the_contract(tmp_path):
    path = ROOT / "sample_traces" / "two_ranks" / "sampled_rank-0.json.gz"
    read = readers.read(path)[0]
    read.tables["gpu"]["stream"] = read.tables["gpu"]["stream"].astype("float64")
    with pytest.raises(TraceFormatError, match=r"sampled_rank-0.*gpu.stream: dtype float64"):
        finish(read, path)
    snapshot = snapshot_reader.read(DATA / "snapshots" / "medium_128_training.pickle.gz")
    snapshot.blocks = snapshot.blocks.drop(columns="site")
    with pytest.raises(SnapshotError, match=r"x.pickle: .*blocks: missing columns \['site'\]"):
        finish_snapshot(snapshot, tmp_path / "x.pickle")


def test_fused_and_legacy_files_hold_to_the_contract(tmp_path):
    two = ROOT / "sample_traces" / "two_ranks"
    fused = fuse({r: two / f"sampled_rank-{r}.json.gz" for r in (0, 1)}, tmp_path / "f.json.gz")
    assert len(readers.read(fused)) == 2
    assert _broken(fused) == []
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps([
        {"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2, "pid": "CPU functions", "tid": 1},
        {"ph": "i", "name": "mark", "ts": 2, "pid": 1, "tid": 1},
    ]))  # fmt: skip
    assert _broken(legacy) == []


def test_ranks_reopened_from_the_cache_hold_to_the_contract(tmp_path):
    options = LoadOptions(cache=tmp_path, progress=False, parallel=False)
    folder = ROOT / "sample_traces" / "two_ranks"
    TraceAnalysis(trace_dir=folder, options=options)
    again = TraceAnalysis(trace_dir=folder, options=options)
    for rank in again.ranks:
        trace = again.trace(rank)
        assert "_build" in trace.__dict__
        assert [p for n in RankTrace.TABLES for p in contract.problems(n, getattr(trace, n))] == []


@pytest.mark.parametrize("path", sorted((DATA / "snapshots").glob("*.pickle*")), ids=str)
def test_snapshot_reader_holds_to_the_contract(path):
    tables = MemorySnapshot(path)._tables
    for name in contract.SNAPSHOT_TABLES:
        assert contract.problems(name, getattr(tables, name), "reader") == []


def test_the_check_finds_what_breaks_the_contract():
    trace = parse_parts(ROOT / "sample_traces" / "two_ranks" / "sampled_rank-0.json.gz")[0]
    gpu = trace.gpu.copy()
    gpu["stream"] = gpu["stream"].astype("float64")
    gpu.loc[0, "dur"] = -5
    gpu["extra"] = 1
    found = contract.problems("gpu", gpu.drop(columns="device"))
    assert found == [
        "gpu: missing columns ['device']",
        "gpu: columns not in the contract ['extra']",
        "gpu.dur: negative values",
        "gpu.stream: dtype float64, contract int64",
    ]
    read = gpu.drop(columns=["launch_row", "iteration", "kernel_type", "extra"])
    read["dur"] = read["dur"].clip(lower=0)
    read["stream"] = read["stream"].astype("int64")
    assert contract.problems("gpu", read, "reader") == []
    assert "gpu: missing columns" in contract.problems("gpu", read)[0]


def test_docs_show_the_contract():
    page = (ROOT / "docs" / "tables.md").read_text()
    for tables in (contract.TABLES, contract.SNAPSHOT_TABLES):
        assert contract.markdown(tables) in page, "regenerate docs/tables.md from contract.py"
