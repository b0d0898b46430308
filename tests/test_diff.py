"""TraceDiff: reference columns checked against an independent count from the raw JSON, generated
pairs with known changes, the regression gate through the CLI."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from decimal import Decimal

import pytest
from conftest import DATA, SAMPLES, needs_shared, shared_cases
from synth import TraceBuilder

from hta_lite import DeviceType, TraceAnalysis, TraceDiff
from hta_lite.analyses.diff_gate import METRICS
from hta_lite.errors import SelectionError
from hta_lite.kineto import GPU_CATEGORIES
from hta_lite.tools.synthetic import make_straggler_folder
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
    gate = TraceDiff.compare(*control_test, metrics=["gpu_busy"]).gate
    assert gate["regression"] and gate["control_steps"] == 5
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
            b.kernel("relu", base + 300, 10, launch_ts=base + 3)  # after gemm ends
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
    args = ["diff", str(control), str(test), "--fail-on-regression", "--json", str(out)]
    assert main([*args, "--metric", "gpu_busy"]) == 1
    gate = json.loads(out.read_text())["gate"]
    assert gate["regression"] is True and gate["control_steps"] == 2  # last step left out
    assert gate["regressed"] == ["gpu_busy"]
    # GPU busy per step, median of steps 1 and 2: control (100+10+5, 110) -> 112.5; test: the
    # 2x gemm (200+10+5+10, 210) -> 217.5
    busy = gate["metrics"]["gpu_busy"]
    assert (busy["control"], busy["test"]) == (112.5, 217.5)
    assert busy["change_pct"] == pytest.approx(100 * (217.5 - 112.5) / 112.5, abs=0.01)
    assert "REGRESSION: GPU busy time per step 112 µs -> 218 µs (+93.33 %" in (
        capsys.readouterr().err
    )
    assert main(args) == 0  # the default gate, step time: the same 900 µs steps
    assert json.loads(out.read_text())["gate"]["metrics"]["step"]["change_pct"] == 0
    assert main(["diff", str(control), str(test)]) == 0  # without the flag: report only
    assert main(["diff", str(control), str(control), "--fail-on-regression"]) == 0
    assert main([*args, "--metric", "gpu_busy", "kernel_type", "--threshold", "100%"]) == 0
    assert main(["diff", str(tmp_path / "missing"), str(test)]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.fixture(scope="module")
def slower_step(tmp_path_factory):
    """A real trace and the same run with its step ~15 % slower: the CPU issues the step's last
    collective later (host work), the GPU's work is the same, only idle longer."""
    root = tmp_path_factory.mktemp("slower")
    (root / "control").mkdir()
    template = SAMPLES / "two_ranks" / "sampled_rank-0.json.gz"
    (root / "control" / template.name).write_bytes(template.read_bytes())
    make_straggler_folder(template, root / "test", 1, 0, "host", delay_us=28_700)
    return root / "control", root / "test"


def test_a_15_percent_slower_step_fails_the_gate(slower_step, capsys):
    control, test = slower_step
    result = TraceDiff.compare(control, test, metrics=METRICS)
    step = result.gate["metrics"]["step"]
    assert step["change_pct"] == pytest.approx(15.0, abs=0.2)
    assert result.gate["metrics"]["gpu_busy"]["change_pct"] == 0  # the old gate saw nothing
    assert not result.gate["metrics"]["kernel_type:COMPUTATION"]["regression"]
    assert result.gate["regressed"] == ["step", "idle"]
    assert main(["diff", str(control), str(test), "--fail-on-regression"]) == 1
    err = capsys.readouterr().err
    assert "REGRESSION: step time (median over steps) 607.3 ms -> 698.4 ms (+15.00 %" in err
    assert main(["diff", str(control), str(test), "--fail-on-regression", "--metric",
                 "gpu_busy"]) == 0  # fmt: skip


def test_json_to_stdout_is_only_json(slower_step, capsys):
    control, test = slower_step
    assert main(["diff", str(control), str(test), "--json", "-"]) == 0
    payload = json.loads(capsys.readouterr().out)  # nothing else on stdout
    assert payload["gate"]["regressed"] == ["step"]


def test_gpu_against_cpu_only_compares_what_both_have(tmp_path, capsys):
    cpu = DATA / "cpu_only"
    result = TraceDiff.compare(SAMPLES / "two_ranks", cpu, metrics=METRICS)
    assert "gpu_busy" in result.gate["not_compared"]
    assert "test: no GPU events" in result.gate["not_compared"]["gpu_busy"]
    assert set(result.gate["metrics"]) == {"step"}
    assert "not compared: GPU busy time per step (test: no GPU events" in result.summary
    assert main(["diff", str(SAMPLES / "two_ranks"), str(cpu), "--metric", *METRICS]) == 0
    assert "not compared" in capsys.readouterr().out


def test_unknown_gate_metric_is_a_selection_error(tmp_path):
    control, test = _pair(tmp_path)
    with pytest.raises(SelectionError, match="unknown gate metric"):
        TraceDiff.compare(control, test, metrics=["speed"])


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
