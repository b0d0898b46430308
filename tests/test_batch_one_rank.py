"""The batch's views of one rank (:mod:`hta_lite.tools.batch_one_rank`: the lowest rank's first
step's critical path, launch queue, memory bandwidth and kernel launches) and its CUPTI counters
are the analysis's, with the cache on and off."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from conftest import DATA, SAMPLES

from hta_lite import TraceAnalysis
from hta_lite.tools.batch import summarize_folder
from hta_lite.tools.batch_one_rank import TABLES
from hta_lite.views.batch_cli import batch_tables
from hta_lite.views.summary import critical_path_rows, cupti_by_operator


def _same(batch: pd.DataFrame, full: pd.DataFrame | None) -> None:
    """The batch's table of the rank is the analysis's (None: the analysis has none)."""
    if full is None:
        assert batch.empty
    else:
        pd.testing.assert_frame_equal(batch, full)


@pytest.mark.parametrize(
    ("where", "cache"),
    [(SAMPLES / "two_ranks", True), (SAMPLES / "two_ranks", False),
     (SAMPLES / "long_run_windows", True), (DATA / "cupti_profiler", False),
     (DATA / "cpu_only", False)],
)  # fmt: skip
def test_the_lowest_ranks_views_are_the_analysis(where, cache, tmp_path):
    folder = tmp_path / where.name
    shutil.copytree(where, folder)
    options = {"cache": tmp_path / "cache" if cache else False}
    batch = summarize_folder(folder, executor="serial", progress=False, **options)
    full = TraceAnalysis(trace_dir=folder, parallel=False, progress=False, cache=False)
    first = full.ranks[0]
    rows = critical_path_rows(full)
    if isinstance(rows, str):  # cpu_only has host events: only a rank without any lacks a path
        assert batch["critical_path"].attrs["why"] == rows
    else:
        _same(batch["critical_path"], rows)
        assert batch["critical_path"].attrs == rows.attrs  # the note: the path against the step
        assert rows["rank"].eq(first).all()
    _same(batch["queue_length_series"], full.get_queue_length_time_series([first]).get(first))
    _same(batch["memory_bw_series"], full.get_memory_bw_time_series([first]).get(first))
    stats = full.get_cuda_kernel_launch_stats([first], visualize=False)[first]
    _same(batch["launch_stats"], stats)
    tables, absent = batch_tables(batch)
    assert "critical_path" in tables or absent["critical_path"] == rows
    cupti = cupti_by_operator(full)
    if cupti is None:  # no line where there is none, as summarize
        assert "cupti_counters" not in tables and "cupti_counters" not in absent
    else:
        pd.testing.assert_frame_equal(tables["cupti_counters"], cupti)
    assert set(TABLES) <= set(batch) and not batch.absent


def test_the_critical_path_is_of_the_lowest_rank_loaded(tmp_path):
    """With rank 0's file skipped, rank 1's path is shown, as the analysis shows it."""
    folder = tmp_path / "traces"
    shutil.copytree(SAMPLES / "two_ranks", folder)
    rank0 = sorted(folder.iterdir())[0]
    rank0.write_text("{not json")
    batch = summarize_folder(folder, executor="serial", progress=False, cache=False,
                             on_error="skip")  # fmt: skip
    full = TraceAnalysis(trace_dir=folder, parallel=False, progress=False, cache=False,
                         on_error="skip")  # fmt: skip
    assert full.ranks == [1] and batch["critical_path"]["rank"].eq(1).all()
    pd.testing.assert_frame_equal(batch["critical_path"], critical_path_rows(full))


def test_a_rank_without_host_events_says_why_it_has_no_critical_path_in_both_reports(tmp_path):
    from synth import TraceBuilder

    from hta_lite.views import batch_report
    from hta_lite.views.report import _report

    folder = tmp_path / "traces"
    folder.mkdir()
    b = TraceBuilder()
    b.kernel("k", 5, 20)  # GPU work only: no host side to build a path from
    b.write(folder / "rank0.json")
    full = TraceAnalysis(trace_dir=folder, parallel=False, progress=False, cache=False)
    batch = summarize_folder(folder, executor="serial", progress=False, cache=False)
    sections = [
        {anchor: page for anchor, _, page in report.sections}["critical-path"]
        for report in (_report(full, None, None), batch_report._report(batch, None))
    ]
    assert sections[0] == sections[1]
    assert "No critical path: no CPU events: the critical path needs the host side" in sections[0]


@pytest.mark.parametrize("where", [DATA / "memory_ranks", SAMPLES / "memory_leak"])
def test_the_memory_timeline_is_the_highest_peak_ranks(where):
    """memory_ranks: rank 3 makes and frees a 4 MiB scratch tensor each step, 5.4x the median
    rank's peak: its timeline (and steps) is the one the batch keeps, equal to the analysis's."""
    batch = summarize_folder(where, executor="serial", progress=False, cache=False)
    full = TraceAnalysis(trace_dir=where, parallel=False, progress=False, cache=False)
    peaks = full.get_memory_peaks()
    top = int(peaks.loc[peaks["peak_allocated"].idxmax(), "rank"])
    assert top == (3 if where.name == "memory_ranks" else 0)
    pd.testing.assert_frame_equal(batch["memory_timeline"], full.get_memory_timeline(ranks=[top]))
    pd.testing.assert_frame_equal(batch["memory_timeline_steps"], full.trace(top).steps)


def test_no_memory_timeline_without_memory_events():
    batch = summarize_folder(SAMPLES / "two_ranks", executor="serial", progress=False, cache=False)
    assert batch["memory_timeline"].empty
    assert batch["memory_timeline"].attrs["why"] == batch["memory_peaks"].attrs["why"]


def test_a_snapshot_joins_the_batch_as_it_joins_the_analysis(tmp_path, capsys):
    """``hta-lite batch --snapshot`` (``summarize_folder(snapshot=...)``): the snapshot's
    out-of-memory finding among the findings, its tables printed and written, and its report
    section the same HTML as ``hta-lite report --snapshot``'s (a real training-step snapshot
    with an out-of-memory of 100 MiB appended: the fragmentation verdict)."""
    import gzip
    import pickle

    from hta_lite import MemorySnapshot
    from hta_lite.views import batch_report
    from hta_lite.views.cli import main
    from hta_lite.views.report import _report

    data = pickle.loads(gzip.decompress((DATA / "snapshots" / "medium_128_training.pickle.gz")
                                        .read_bytes()))  # fmt: skip
    last = data["device_traces"][0][-1]["time_us"]
    data["device_traces"][0].append(
        {"action": "oom", "addr": 0, "size": 100 * 2**20, "stream": 0, "time_us": last + 1,
         "device_free": 2 * 2**20, "frames": []}
    )  # fmt: skip
    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(data))
    where = SAMPLES / "h100_bert_small"
    snapshot = MemorySnapshot(path)
    full = TraceAnalysis(trace_dir=where, parallel=False, progress=False)
    batch = summarize_folder(where, executor="serial", progress=False, snapshot=snapshot)
    expected = full.get_findings(snapshot=snapshot)
    assert "memory_oom" in set(expected["kind"])
    pd.testing.assert_frame_equal(batch["findings"], expected)
    page = {a: h for a, _, h in batch_report._report(batch, None).sections}
    want = {a: h for a, _, h in _report(full, None, snapshot).sections}
    assert page["snapshot"] == want["snapshot"] and "fragmentation" in page["findings"]
    out = tmp_path / "out"
    assert main(["batch", str(where), "--serial", "--snapshot", str(path), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "memory_oom: snapshot oom.pickle cuda:0" in printed
    assert "CUDA memory snapshot: out of memory" in printed
    assert pd.read_csv(out / "snapshot_oom.csv")["verdict"].tolist() == ["fragmentation"]
