"""TraceDiff: reference columns checked against an independent count from the raw JSON, generated
pairs with known changes, the regression gate through the CLI."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from decimal import Decimal

import pytest
from conftest import SAMPLES, needs_shared, shared_cases
from synth import TraceBuilder

from hta_lite import DeviceType, TraceAnalysis, TraceDiff
from hta_lite.errors import SelectionError
from hta_lite.kineto import GPU_CATEGORIES
from hta_lite.views.cli import main

CASES = shared_cases()


def raw_step_ops(folder, step_name):
    """Counts and total µs per name of the events of one ProfilerStep, straight from the JSON."""
    path = next(folder.iterdir())
    events = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    step = next(e for e in complete if e.get("name") == step_name)
    start, end = step["ts"], step["ts"] + step["dur"]
    cpu = [
        e
        for e in complete
        if e.get("cat") not in GPU_CATEGORIES and e.get("cat") != "gpu_user_annotation"
    ]
    in_step = [e for e in cpu if start <= e["ts"] < end]
    runtime_corr = {
        e["args"]["correlation"]
        for e in in_step
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gpu = [
        e
        for e in complete
        if e.get("cat") in GPU_CATEGORIES and e.get("args", {}).get("correlation") in runtime_corr
    ]
    counts, total = Counter(), defaultdict(Decimal)
    for e in in_step + gpu:
        counts[e["name"]] += 1
        total[e["name"]] += Decimal(e.get("dur", 0))
    return counts, total


@pytest.fixture(scope="module")
def control_test():
    return (
        TraceAnalysis(trace_dir=CASES["diff_control"], progress=False),
        TraceAnalysis(trace_dir=CASES["diff_test"], progress=False),
    )


@needs_shared
def test_compare_traces_columns_match_raw_json(control_test):
    control, test = control_test
    df = TraceDiff.compare_traces(control, test)
    assert df.columns.tolist() == [
        "Control_counts",
        "Control_total_duration",
        "Test_counts",
        "Test_total_duration",
        "diff_counts",
        "diff_duration",
        "counts_change_categories",
    ]
    c_counts, c_total = raw_step_ops(CASES["diff_control"], "ProfilerStep#1009")
    t_counts, t_total = raw_step_ops(CASES["diff_test"], "ProfilerStep#1009")
    names = set(c_counts) | set(t_counts)
    assert set(df.index) == names
    for name in names:
        row = df.loc[name]
        assert row["Control_counts"] == c_counts[name] and row["Test_counts"] == t_counts[name]
        assert row["Control_total_duration"] == pytest.approx(float(c_total[name]), abs=1e-6)
        assert row["Test_total_duration"] == pytest.approx(float(t_total[name]), abs=1e-6)
        assert row["diff_counts"] == t_counts[name] - c_counts[name]
        expected = (
            "+"
            if t_counts[name] > c_counts[name]
            else "-"
            if t_counts[name] < c_counts[name]
            else "="
        )
        assert row["counts_change_categories"] == expected
    sets = TraceDiff.ops_diff(control, test)
    assert set(sets["added"]) == {n for n in names if c_counts[n] == 0}
    assert set(sets["deleted"]) == {n for n in names if t_counts[n] == 0}
    assert set(sets["increased"]) == {n for n in names if 0 < c_counts[n] < t_counts[n]}
    assert set(sets["decreased"]) == {n for n in names if 0 < t_counts[n] < c_counts[n]}
    assert set(sets["unchanged"]) == {n for n in names if t_counts[n] == c_counts[n] > 0}


@needs_shared
def test_compare_beyond_reference(control_test):
    result = TraceDiff.compare(*control_test)
    assert result.ranks == "control rank 3 of [3] vs test rank 1 of [1]"
    assert result.temporal.loc["kernel_time(us)", "control"] == 383404.0
    assert result.gate["regression"] and result.gate["control_steps"] == 5
    assert "Biggest regressions: Memcpy DtoD" in result.summary
    assert result.kernel_types.loc["MEMORY", "change"] == pytest.approx(92887 - 16328)
    assert list(result.steps.columns) == ["control", "test", "change", "change_pct"]


def _pair(tmp_path):
    control, test = TraceBuilder(), TraceBuilder()
    for b, slow in ((control, 1), (test, 2)):
        for step in (1, 2, 3):
            base = step * 1000
            b.step(step, base, 900)
            b.cpu_op("aten::mm", base + 1, 5)
            b.kernel("gemm", base + 10, 100 * slow, launch_ts=base + 2)  # 2x slower in test
            b.kernel("relu", base + 200, 10, launch_ts=base + 3)
    control.kernel("only_in_control", 1500, 5, launch_ts=1004)
    test.kernel("only_in_test", 1500, 5, launch_ts=1004)
    test.kernel("relu", 1600, 10, launch_ts=1005)  # count changed in step 1
    control.write(tmp_path / "control" / "rank0.json")
    test.write(tmp_path / "test" / "rank0.json")
    return tmp_path / "control", tmp_path / "test"


def test_generated_pair_known_changes(tmp_path):
    control, test = _pair(tmp_path)
    df = TraceDiff.compare_traces(str(control), str(test), device_type=DeviceType.GPU)
    assert df.loc["gemm", "diff_duration"] == 100.0 and df.loc["gemm", "diff_counts"] == 0
    assert df.loc["relu", "diff_counts"] == 1
    sets = TraceDiff.ops_diff(str(control), str(test), device_type=DeviceType.GPU)
    assert sets == {
        "added": ["only_in_test"],
        "deleted": ["only_in_control"],
        "increased": ["relu"],
        "decreased": [],
        "unchanged": ["gemm"],
    }
    cpu = TraceDiff.compare_traces(
        str(control), str(test), device_type=DeviceType.CPU, control_iteration=2, test_iteration=2
    )
    assert "gemm" not in cpu.index and cpu.loc["aten::mm", "diff_counts"] == 0
    fig = TraceDiff.visualize_duration_diff(df)
    assert fig.data[0].y[0] == "gemm"
    assert TraceDiff.visualize_counts_diff(df).layout.title.text.startswith("Change in count")


def test_short_names():
    df_names = [
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
        "(int, float)",
        "Memcpy HtoD (Pageable -> Device)",
    ]
    from hta_lite.classify import short_name

    assert [short_name(n) for n in df_names] == [
        "at::native::vectorized_elementwise_kernel",
        "Memcpy HtoD (Pageable -> Device)",
    ]


def test_gate_exit_codes(tmp_path, capsys):
    control, test = _pair(tmp_path)
    out = tmp_path / "result.json"
    assert main(["diff", str(control), str(test), "--fail-on-regression", "--json", str(out)]) == 1
    payload = json.loads(out.read_text())
    assert (
        payload["gate"]["regression"] is True and payload["gate"]["control_steps"] == 2
    )  # last step left out
    # GPU busy per step, median of steps 1 and 2: control (115, 110) -> 112.5; test: gemm now hides
    # relu (200+5+10, 200) -> 207.5
    assert (payload["gate"]["control"], payload["gate"]["test"]) == (112.5, 207.5)
    assert payload["gate"]["change_pct"] == pytest.approx(100 * (207.5 - 112.5) / 112.5, abs=0.01)
    assert main(["diff", str(control), str(test)]) == 0  # without the flag: report only
    assert main(["diff", str(control), str(control), "--fail-on-regression"]) == 0
    assert (
        main(["diff", str(control), str(test), "--fail-on-regression", "--threshold", "100%"]) == 0
    )
    assert main(["diff", str(tmp_path / "missing"), str(test)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_could_not_run_is_not_a_regression(tmp_path, capsys, monkeypatch):
    """A CI gate tells "slower" (1) from "broken": bad input (2), an analysis that failed (3)."""
    control, test = _pair(tmp_path)

    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(TraceDiff, "compare", broken)
    assert main(["diff", str(control), str(test), "--fail-on-regression"]) == 3
    assert "analysis failed: ZeroDivisionError: boom" in capsys.readouterr().err


@needs_shared
def test_cpu_only_and_different_rank_counts():
    cpu = TraceDiff.compare_traces(
        CASES["cpu_only"], CASES["no_distributed_info"], device_type=DeviceType.CPU
    )
    assert cpu["Control_counts"].sum() > 0 and cpu["Test_counts"].sum() > 0
    result = TraceDiff.compare(SAMPLES / "two_ranks", CASES["ns_resolution"], control_rank=1)
    assert result.ranks == "control rank 1 of [0, 1] vs test rank 0 of [0]"
    with pytest.raises(KeyError, match="rank\\(s\\) \\[5\\] not loaded"):
        TraceDiff.compare_traces(SAMPLES / "two_ranks", CASES["ns_resolution"], control_rank=5)


@needs_shared
def test_last_step_compared_as_the_reference_does():
    """Folders are read with every step, so the last one can be compared (traceinsight 0.6.1 on
    these folders, step 1014: 432 names, 203 '-', 162 '=', 67 '+'; run 2026-11-30)."""
    control, test = CASES["diff_control"], CASES["diff_test"]
    df = TraceDiff.compare_traces(control, test, control_iteration=1014, test_iteration=1014)
    assert len(df) == 432
    assert df["counts_change_categories"].value_counts().to_dict() == {"-": 203, "=": 162, "+": 67}
    c_counts, c_total = raw_step_ops(control, "ProfilerStep#1014")
    for name, count in c_counts.items():
        assert df.loc[name, "Control_counts"] == count
        assert df.loc[name, "Control_total_duration"] == pytest.approx(float(c_total[name]))
    assert TraceDiff.ops_diff(control, test, control_iteration=1014, test_iteration=1014)["added"]


def three_steps(path, rank=0):
    b = TraceBuilder(rank=rank)
    for n in (1, 2, 3):
        b.step(n, 100 * n, 100)
        b.cpu_op(f"op_of_step_{n}", 100 * n + 10, 5)
        b.kernel(f"kernel_of_step_{n}", 100 * n + 50, 5, launch_ts=100 * n + 20)
    return b.write(path / "rank0.json")


def test_every_step_can_be_compared_and_absent_ones_are_errors(tmp_path):
    for side in ("c", "t"):
        three_steps(tmp_path / side)
    last = TraceDiff.compare_traces(tmp_path / "c", tmp_path / "t", None, None, 3, 3)
    assert {"op_of_step_3", "kernel_of_step_3", "ProfilerStep#3"} <= set(last.index)
    assert (last["Control_counts"] > 0).all() and (last["counts_change_categories"] == "=").all()
    with pytest.raises(SelectionError, match=r"Test: iteration\(s\) \[7\] not in .*\[1, 2, 3\]"):
        TraceDiff.compare_traces(tmp_path / "c", tmp_path / "t", test_iteration=7)
    windowed = TraceAnalysis(trace_dir=tmp_path / "c", parallel=False)  # last step left out
    with pytest.raises(SelectionError, match=r"\[3\] left out at load as the last ProfilerStep"):
        TraceDiff.compare_traces(windowed, tmp_path / "t", control_iteration=3)
    with pytest.raises(ValueError):  # the reference raises ValueError: still caught by that
        TraceDiff.ops_diff(tmp_path / "c", tmp_path / "t", control_iteration=0)
