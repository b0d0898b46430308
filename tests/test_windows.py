"""A rank profiled in several windows (several files) loads as one series of steps (issue #39).

Recorded: sample_traces/long_run_windows (record.py there: schedule(repeat=3), three files per
rank, a periodic stall on rank 1 at step % 7 == 4 and a compute spike on rank 0 at step 20, the
step times measured live). Constructed: two windows of one GPU rank whose files reuse the same
correlation ids, with the right answer per window known.
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from conftest import SAMPLES
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.errors import DuplicateRankError
from hta_lite.tools.batch import summarize_folder

WINDOWS = SAMPLES / "long_run_windows"
KEPT = [*range(2, 13), *range(16, 27), *range(30, 41)]  # each file's last step is dropped
STALLS = [4, 11, 18, 25, 32, 39]
SPIKE = 20


def open_(folder, **kw):
    return TraceAnalysis(trace_dir=folder, parallel=False, cache=False, progress=False, **kw)


@pytest.fixture(scope="module")
def windows():
    return open_(WINDOWS)


def test_three_files_per_rank_are_one_series_in_time_order(windows):
    assert windows.ranks == [0, 1]
    for rank in windows.ranks:
        trace = windows.trace(rank)
        spans = [(w["start_ns"], w["end_ns"]) for w in trace.metadata["windows"]]
        assert len(spans) == 3 and spans == sorted(spans)
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
        assert trace.health["windows_joined"] == 3
    scored = windows.get_step_anomalies()
    for rank in (0, 1):
        rows = scored[scored["rank"] == rank]
        assert rows["step"].tolist() == KEPT
        assert rows["window"].tolist() == [0] * 11 + [1] * 11 + [2] * 11
    health = windows.health_summary()
    assert health["windows"].tolist() == [3, 3]
    assert health["file"].str.endswith("(+2 more windows)").all()


def test_the_injected_steps_and_only_they_are_flagged(windows):
    scored = windows.get_step_anomalies()
    flagged = scored[scored["anomalous"]]
    assert sorted(set(flagged["step"])) == sorted(STALLS + [SPIKE])
    stalls = flagged[flagged["rank"] == 1].set_index("step")
    assert set(stalls.loc[STALLS, "cause"]) == {"data-loading"}
    assert (stalls.loc[STALLS, "origin_rank"] == 1).all()
    waited = flagged[(flagged["rank"] == 0) & flagged["step"].isin(STALLS)]
    assert len(waited) == len(STALLS) and (waited["origin_rank"] == 1).all()
    spike = flagged[(flagged["rank"] == 0) & (flagged["step"] == SPIKE)].iloc[0]
    assert spike["cause"] == "forward" and spike["origin_rank"] == 0
    period = windows.get_step_periodicity().set_index("rank").loc[1]
    assert (period["period"], period["phase"], period["cause"]) == (7, 4, "data-loading")
    assert period["occurrences"] == len(STALLS)


def test_step_times_are_the_live_ones(windows):
    live = pd.read_csv(WINDOWS / "live_step_times.csv")
    scored = windows.get_step_anomalies().merge(live, on=["rank", "step"])
    assert len(scored) == 2 * len(KEPT)
    error_ms = (scored["step_time"] / 1000 - scored["seconds"] * 1000).abs()
    assert error_ms.max() < 0.1


def test_file_names_do_not_set_the_order(windows, tmp_path):
    """The windows are put in time order whatever the names (here: reversed)."""
    files = sorted(WINDOWS.glob("*.json.gz"))
    for i, path in enumerate(files):
        shutil.copy(path, tmp_path / f"{len(files) - i:02d}-{path.name}")
    again = open_(tmp_path)
    pd.testing.assert_frame_equal(again.get_step_anomalies(), windows.get_step_anomalies())


def test_cache_and_process_pool_work_per_file(windows, tmp_path):
    cached = TraceAnalysis(trace_dir=WINDOWS, cache=tmp_path, progress=False)
    entries = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(entries) == 6  # one per file, not one per rank
    reopened = TraceAnalysis(trace_dir=WINDOWS, cache=tmp_path, progress=False)
    for analysis in (cached, reopened):
        pd.testing.assert_frame_equal(analysis.get_step_anomalies(), windows.get_step_anomalies())


def test_batch_summary_scores_the_series(windows):
    summary = summarize_folder(WINDOWS, executor="process", cache=False)
    pd.testing.assert_frame_equal(
        summary["step_anomalies"], windows.get_step_anomalies(), check_dtype=False
    )
    pd.testing.assert_frame_equal(summary["step_periodicity"], windows.get_step_periodicity())
    assert summary["health_summary"]["windows"].tolist() == [3, 3]


# ---- constructed: two GPU windows whose files reuse one set of correlation ids --------------


def gpu_window(first_step: int, at: float) -> TraceBuilder:
    """Steps ``first_step`` .. +2 from ``at`` µs (100 µs each); kernels at +20-40 and +60-80
    (step 1) and +120-150 (step 2), each launched 10 µs before; a kernel of the last step, which
    is dropped. Busy 70 µs, span 130 µs, idle 60 µs (gaps of 20 and 40 µs)."""
    b = TraceBuilder(rank=0)
    for i in range(3):
        b.step(first_step + i, at + 100 * i, 100)
    for start, dur in ((20, 20), (60, 20), (120, 30), (210, 10)):
        b.kernel("gemm", at + start, dur, launch_ts=at + start - 10)
    return b


@pytest.fixture
def gpu_series(tmp_path):
    gpu_window(1, 0).write(tmp_path / "series" / "rank0-a.json")
    gpu_window(11, 10_000).write(tmp_path / "series" / "rank0-b.json")
    return tmp_path / "series"


def test_the_gap_between_windows_is_not_idle_time(gpu_series):
    a = open_(gpu_series)
    temporal = a.get_temporal_breakdown().iloc[0]
    assert temporal["kernel_time(us)"] == 260 and temporal["idle_time(us)"] == 120
    assert temporal["compute_time(us)"] == 140
    by_cause = a.get_gpu_idle_by_cause()
    assert by_cause["idle_time"].sum() == pytest.approx(120)
    idle, _ = a.get_idle_time_breakdown()
    assert idle["idle_time"].sum() == pytest.approx(120)


def test_each_window_keeps_its_own_links(gpu_series):
    """Both files number their correlations from 1001: joined, each kernel is still linked to
    its own launch and step."""
    trace = open_(gpu_series).trace(0)
    gpu = trace.gpu.sort_values("ts")
    assert gpu["iteration"].tolist() == [1, 1, 2, 11, 11, 12]
    launched = trace.cpu["ts"].to_numpy()[gpu["launch_row"].to_numpy()]
    assert ((gpu["ts"].to_numpy() - launched) == 10_000).all()  # 10 µs, in ns
    assert gpu["correlation"].is_unique and gpu["window"].tolist() == [0, 0, 0, 1, 1, 1]


def test_files_of_one_rank_that_overlap_in_time_are_an_error(tmp_path):
    gpu_window(1, 0).write(tmp_path / "one.json")
    gpu_window(11, 150).write(tmp_path / "two.json")
    with pytest.raises(DuplicateRankError, match=r"two\.json.*rank 0.*one\.json.*overlap"):
        open_(tmp_path)


def test_cli_and_report_show_the_windows(tmp_path, capsys):
    from hta_lite.views.cli import main
    from hta_lite.views.report import build_report

    assert main(["steps", str(WINDOWS), "--serial", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "steps 2..40 in 3 profiled windows; 14 anomalous" in out
    assert " rank  step  window  step_time" in out
    html = build_report(open_(WINDOWS))
    assert "(+2 more windows)" in html and ">window</th>" in html
