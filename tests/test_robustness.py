"""Bad input: every corpus case has its exact outcome; nothing but TraceError escapes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bad_corpus import CASES, source_document, write_case
from conftest import health_messages
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.errors import TraceError

BASELINE_LAUNCHES_WITHOUT_KERNEL = 22  # the unmodified source trace (cuLaunchKernel rows)


@pytest.mark.parametrize("case", sorted(CASES))
def test_corpus_case(case, tmp_path):
    folder = write_case(case, tmp_path / case)
    expected = CASES[case][1]
    if isinstance(expected, tuple):
        error, fragment = expected
        with pytest.raises(error, match=fragment):
            TraceAnalysis(trace_dir=folder, parallel=False)
        return
    analysis = TraceAnalysis(trace_dir=folder, parallel=False)
    health = health_messages(analysis.traces[analysis.ranks[0]].health)
    for item, count in expected.items():
        assert health.get(item) == count, (item, health)
    # every analysis still runs on the damaged trace
    analysis.get_temporal_breakdown(visualize=False)
    analysis.get_idle_time_breakdown(visualize=False)
    analysis.get_comm_comp_overlap(visualize=False)
    analysis.get_gpu_kernel_breakdown(visualize=False)
    assert analysis.health_summary()["problems"].iloc[0] >= sum(expected.values())


def test_source_trace_has_only_the_known_items(tmp_path):
    (tmp_path / "rank0.json").write_text(json.dumps(source_document()))
    health = health_messages(TraceAnalysis(trace_dir=tmp_path, parallel=False).traces[0].health)
    assert health == {
        # cuLaunchKernel rows
        "launch calls without a GPU event in the trace": BASELINE_LAUNCHES_WITHOUT_KERNEL,
        "text pid (stored as -1)": 3,  # the "Spans" rows Kineto writes
        "text tid (stored as -1)": 3,
        "rank taken from the file name (no distributedInfo.rank)": 1,
    }


@pytest.mark.parametrize("case", ["truncated_json", "empty_file", "json_list", "dangling_symlink"])
def test_skip_keeps_good_ranks(case, tmp_path):
    folder = write_case(case, tmp_path / case)
    TraceBuilder(rank=5).kernel("k", 10, 5, launch_ts=8).write(folder / "good.json")
    analysis = TraceAnalysis(trace_dir=folder, on_error="skip", parallel=False)
    assert 5 in analysis.ranks
    assert len(analysis.skipped_files) == 1
    assert (analysis.health()["rank"] == -1).sum() == 1


def test_health_summary_columns(two_ranks):
    summary = two_ranks.health_summary()
    assert summary["device_type"].tolist() == ["CUDA", "CUDA"]
    assert summary["has_distributed_info"].all()
    assert summary["profiler_steps"].tolist() == [2, 2]
    assert summary["clock_offset_us"].min() == 0
    assert summary["clock_offset_us"].max() > 0  # rank 1 started later
    assert (summary["excluded_outside_steps"] > 0).all()
    assert np.isfinite(summary["clock_offset_us"]).all()


def test_errors_never_leak_raw_exceptions(tmp_path):
    for case in CASES:
        folder = write_case(case, tmp_path / case)
        try:
            TraceAnalysis(trace_dir=folder, parallel=False)
        except TraceError:
            pass


def test_gzip_members_padding_and_trailing_bytes(tmp_path):
    """Every gzip member is read (as gzip.decompress does); zero padding is fine; other trailing
    bytes are an error."""
    import gzip

    from hta_lite.errors import TraceReadError

    text = json.dumps(source_document()).encode()
    half = len(text) // 2
    whole = TraceAnalysis(
        trace_files={0: _gz(tmp_path / "one.json.gz", gzip.compress(text))}, parallel=False
    )
    members = _gz(
        tmp_path / "two.json.gz",
        gzip.compress(text[:half]) + gzip.compress(text[half:]) + b"\0" * 8,
    )
    split = TraceAnalysis(trace_files={0: members}, parallel=False)
    assert len(split.gpu_events(0)) == len(whole.gpu_events(0)) > 0
    garbage = _gz(tmp_path / "bad.json.gz", gzip.compress(text) + b"not gzip")
    with pytest.raises(TraceReadError, match="gzip"):
        TraceAnalysis(trace_files={0: garbage}, parallel=False)


def _gz(path, data: bytes):
    path.write_bytes(data)
    return path
