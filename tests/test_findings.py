"""Findings ranked by the step time a fix saves: the replay, the kinds, the recorded pairs."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, SHARED_TRACES, assert_missing, needs_shared, shared_cases
from synth import TraceBuilder, gpu_behind_cpu

import hta_lite
import hta_lite.views.cli
from hta_lite.analyses.findings import WHOLE_RUN_CAVEAT, Cut, straggler
from hta_lite.analyses.findings.replay import combine
from hta_lite.tools.synthetic import make_straggler_folder
from hta_lite.views.report import build_report

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
PAIRS = ROOT / "tests" / "data" / "findings_pairs"


def analysis(folder) -> hta_lite.TraceAnalysis:
    return hta_lite.TraceAnalysis(trace_dir=str(folder), progress=False)


def measured_step_ms(folder: Path, steps: list[int]) -> float:
    """The job's mean step as measured live: per step the slowest rank's loop iteration."""
    live = pd.read_csv(folder / "live_step_times.csv")
    return 1e3 * float(live[live["step"].isin(steps)].groupby("step")["seconds"].max().mean())


@pytest.mark.parametrize("folder", ["gloo_4ranks", "long_run", "gloo_collectives/8ranks"])
def test_replay_without_a_cut_is_the_trace(folder):
    a = analysis(SAMPLES / folder)
    replay = a._findings_context(None).replay
    seg = replay.segments
    ends = seg[seg["target_ts"] == -1]
    assert replay.base == ends["end"].max() - seg["step_start"].min()
    assert replay.saving_per_step(Cut(np.zeros(len(seg)))) == 0


@pytest.mark.parametrize(
    "variant, kinds", [("slow_loader", {"straggler", "data_loading"}), ("extra_sync", {"sync"})]
)
def test_recorded_pairs_rank_the_cause_first_and_estimate_the_real_saving(variant, kinds):
    a = analysis(PAIRS / variant)
    steps = a.get_profiler_steps()
    saved = measured_step_ms(PAIRS / variant, steps) - measured_step_ms(PAIRS / "baseline", steps)
    table = a.get_findings()
    top = table.iloc[0]
    assert top["kind"] in kinds
    assert top["saving_ms_per_step"] == pytest.approx(saved, rel=0.25)
    assert top["saving_low_ms"] <= top["saving_ms_per_step"] <= top["saving_high_ms"]


def test_baseline_run_has_no_large_finding():
    table = analysis(PAIRS / "baseline").get_findings()
    slow = analysis(PAIRS / "slow_loader").get_findings()
    assert table["saving_ms_per_step"].max() < 0.25 * slow["saving_ms_per_step"].max()


def test_periodic_stall_is_amortised_over_the_run():
    """long_run: rank 1 stalls 25 ms in data loading at 4 of its 40 steps: 2.5 ms per step."""
    table = analysis(SAMPLES / "long_run").get_findings().set_index("kind")
    assert table.loc["data_loading", "saving_ms_per_step"] == pytest.approx(2.5, rel=0.25)
    assert table.loc["data_loading", "rank"] == 1


def test_overlapping_findings_are_discounted_not_added():
    """gloo_4ranks: the straggler's excess is its data loading; made together they save about
    what either does, never their sum."""
    table = analysis(SAMPLES / "gloo_4ranks").get_findings().set_index("kind")
    one, two = table.loc["data_loading"], table.loc["straggler"]
    together = table["cumulative_ms"].iloc[1]
    assert max(one["saving_ms_per_step"], two["saving_ms_per_step"]) <= together + 1e-9
    assert together < 0.6 * (one["saving_ms_per_step"] + two["saving_ms_per_step"])


def test_combined_cut_never_exceeds_a_span():
    spans = np.array([10.0, 4.0])
    both = combine([Cut(np.array([8.0, 4.0])), Cut(np.array([8.0, 4.0]))], spans, {})
    assert np.all(both.segment <= spans) and both.segment[0] == pytest.approx(10 - 10 * 0.04)


def launch_bound(tmp_path: Path) -> Path:
    """One step of ten 50 µs launch calls back to back, each releasing a 10 µs kernel: the
    GPU idles between kernels. With the step in a CUDA graph (launches and gaps free) the path
    is the kernels alone: 100 µs of a 505 µs step."""
    b = TraceBuilder()
    b.step(1, 0, 500)
    for i in range(10):
        b.kernel(f"k{i}", 50 * i + 45, 10, launch_ts=50 * i, launch_dur=50)
    b.step(2, 600, 10)
    return b.write(tmp_path / "rank0.json")


def test_launch_overhead_saving_is_known_by_construction(tmp_path):
    launch_bound(tmp_path)
    table = analysis(tmp_path).get_findings().set_index("kind")
    assert table.loc["launch_overhead", "saving_ms_per_step"] == pytest.approx(0.405, rel=0.02)


def test_a_launch_longer_than_the_median_keeps_the_rest(tmp_path):
    """The same step after a first launch call of 2 ms (a module loaded at the first launch,
    which a CUDA graph does not remove): each call loses at most the median call's 50 µs, so
    the first keeps 1.95 ms, and with the step in a graph the ten kernels run back to back
    after it: 2.05 ms of 2.455, 405 µs saved (all of the 2 ms free would have said 2.36 ms;
    without the edge from a kernel's launch call to it, k1-k9 ran before their launches:
    505 µs)."""
    b = TraceBuilder()
    b.step(1, 0, 2500)
    b.kernel("k0", 1995, 10, launch_ts=0, launch_dur=2000)
    for i in range(1, 10):
        b.kernel(f"k{i}", 2000 + 50 * (i - 1) + 45, 10, launch_ts=2000 + 50 * (i - 1),
                 launch_dur=50)  # fmt: skip
    b.step(2, 2600, 10)
    b.write(tmp_path / "rank0.json")
    row = analysis(tmp_path).get_findings().set_index("kind").loc["launch_overhead"]
    assert row["saving_ms_per_step"] == pytest.approx(0.405, rel=0.02)
    assert "up to the median call (50 µs) each" in row["evidence"]


def test_first_launches_that_load_modules_are_warmup_not_launch_overhead():
    """amd_mi250: 6.5 ms of its 6.6 ms of launch calls is the first hipLaunchKernel of an
    elementwise kernel (its module loaded); cp_simple_add: 4.22 s, the first cudaLaunchKernel
    of a cuDNN kernel. Both are warm-up in the profile (no step time); the 2 ms launches of
    ns_resolution are not first launches (a full queue), so not warm-up."""
    row = analysis(SAMPLES / "amd_mi250").get_findings().set_index("kind").loc["warmup"]
    assert row["saving_ms_per_step"] == 0 and row["rank"] == 0
    assert row["evidence"].startswith("1 first launch call(s) of a kernel on rank(s) 0 took 6.5 ms")
    assert "of at::native::vectorized_elementwise_kernel" in row["evidence"]
    cp = analysis(ROOT / "tests/data/critical_path/cp_simple_add").get_findings()
    warm = cp.set_index("kind").loc["warmup"]
    assert cp["kind"].tolist() == ["host_bound", "warmup"] and "took 4.22 s" in warm["evidence"]
    assert "warmup" not in set(analysis(SAMPLES / "h100_bert_small").get_findings()["kind"])


def test_a_trace_recorded_with_the_range_profiler_gets_no_findings():
    """CUPTI range-profiler mode replays every kernel at its launch (launch calls of 53 ms
    median here): no saving can be read off its times, and the error says so."""
    table = analysis(ROOT / "tests" / "data" / "cupti_profiler").get_findings()
    assert_missing(table, r"rank\(s\) \[0\] were recorded with the CUPTI")
    assert list(table.columns) == list(analysis(SAMPLES / "two_ranks").get_findings().columns)


def _warm_up_only(tmp_path: Path) -> Path:
    """cp_simple_add up to its measured forward pass: the harness's start-up and its warm-up
    forward, one repetition of the GPU work, so no step is found."""
    source = next((ROOT / "tests/data/critical_path/cp_simple_add").iterdir())
    document = json.loads(gzip.decompress(source.read_bytes()))
    events = document["traceEvents"]
    cut = min(e["ts"] for e in events if "|measure|" in e.get("name", ""))
    document["traceEvents"] = [e for e in events if e.get("ts", 0) < cut]
    (tmp_path / "warm_up").mkdir()
    (tmp_path / "warm_up" / "rank0.json").write_text(json.dumps(document))
    return tmp_path / "warm_up"


def test_a_trace_without_profiler_steps_is_one_step(tmp_path):
    """cp_simple_add (HTA's test trace: no ProfilerStep) cut before its measured forward pass:
    nothing repeats, so the trace, first event to last, is the step (41.6 s). Its first launch
    call takes 4.22 s (the module loaded at the first
    launch): a CUDA graph does not remove that, so no launch finding (it said 4.2 s saved),
    only warm-up. So is its first cudaDeviceGetStreamPriorityRange, 24.6 s (the device context
    created; its 10 other calls take none), which host_bound priced as host time to save (the
    harness's [param|cuda] range, 89 % of the step). What host_bound bounds now is the
    harness's warm-up forward passes, 31 % of the step. sglang_decode (one
    HIP-graph decode step): its host waits 463 ms in a blocking copy (hipMemcpyWithStream)
    while the GPU runs nothing, the copy queued behind kernels launched 0.1 ms into the trace
    that start 463 ms later: no host fix removes that wait (it was priced as host-bound,
    464 ms); the findings say the GPU was held by what the trace does not show."""
    a = analysis(_warm_up_only(tmp_path))
    assert not a.get_profiler_steps()
    trace = a.trace(a.ranks[0])
    span = max((t["ts"] + t["dur"]).max() for t in (trace.cpu, trace.gpu))
    span -= min(t["ts"].min() for t in (trace.cpu, trace.gpu))
    assert a._findings_context(None).step_ns == span
    table = a.get_findings()
    assert table["kind"].tolist() == ["host_bound", "warmup"]  # warm-up: no step time
    assert table["where"].iat[0] == "[param|pytorch.model.alex_net|0|0|0|warmup|forward]"
    assert table["saving_pctg"].iat[0] == pytest.approx(30.6, abs=0.5)  # the start-up left out
    started = "1 start-up call(s) (cudaDeviceGetStreamPriorityRange) took 24.59 s"
    assert started in table["evidence"].iat[1]
    decode = analysis(SAMPLES / "sglang_decode").get_findings()
    assert decode.empty  # and "per step" is said to mean over the trace, with no finding too
    assert decode.attrs["caveat"].startswith(WHOLE_RUN_CAVEAT)
    assert "On rank 0 the GPU sat idle 463.2 ms per step" in decode.attrs["caveat"]


def test_a_trace_without_profiler_steps_takes_its_loop_for_the_step():
    """The whole cp_simple_add: AlexNet's forward runs twice, a warm-up then the measured one,
    each ending in a host wait: the one step is the measured forward (297 ms, from the host's
    resume after the warm-up to its resume after the measured one), so host_bound prices the
    measured forward, not the warm-up, and the start-up calls are outside the step."""
    a = analysis(ROOT / "tests/data/critical_path/cp_simple_add")
    trace = a.trace(a.ranks[0])
    assert a.get_profiler_steps() == [1] and trace.steps["dur"].tolist() == [297_067_000]
    measured = trace.cpu[trace.cpu["name"].astype(str).str.contains("|measure|", regex=False)]
    assert (measured["ts"] >= trace.steps["ts"].iat[0]).all()
    table = a.get_findings()
    assert table["kind"].tolist() == ["host_bound", "warmup"]
    assert table["where"].iat[0] == "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
    assert table["saving_pctg"].iat[0] <= 100
    assert (
        "cudaDeviceGetStreamPriorityRange) took 24.59 s (outside the steps)"
        in (table["evidence"].iat[1])
    )
    assert "repetitions of its GPU work" in table.attrs["caveat"]


@pytest.mark.parametrize(
    "folder",
    ["two_ranks", "amd_mi250", "h100_bert_small", "gloo_buckets", "gloo_collectives/4ranks",
     "memory_leak"],
)  # fmt: skip
def test_every_real_trace_gives_findings_below_the_step(folder):
    a = analysis(SAMPLES / folder)
    table = a.get_findings()
    step_ms = a._findings_context(None).step_ns / 1e6
    assert list(table.columns) == hta_lite.analyses.findings.COLUMNS
    assert (table["saving_ms_per_step"] <= step_ms + 1e-9).all()
    assert (table["cumulative_ms"].dropna() <= step_ms + 1e-9).all()
    assert table["cumulative_ms"].dropna().is_monotonic_increasing


def test_diff_says_which_findings_appeared_or_grew():
    result = hta_lite.TraceDiff.compare(str(PAIRS / "baseline"), str(PAIRS / "slow_loader"))
    status = result.findings.set_index(["kind", "where"])["status"]
    assert status[("straggler", "rank 1")] in ("appeared", "grew")
    assert status[("data_loading", "data-loading")] == "grew"
    assert "Findings:" in result.summary
    back = hta_lite.TraceDiff.compare(str(PAIRS / "slow_loader"), str(PAIRS / "baseline"))
    assert (
        back.findings.set_index(["kind", "where"])["status"][("data_loading", "data-loading")]
        == "shrank"
    )


def test_findings_cli_prints_the_ranking_and_json(capsys):
    from hta_lite.views.cli import main

    assert main(["findings", str(PAIRS / "extra_sync"), "--serial"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1. sync") and "evidence:" in out and "try:" in out
    assert main(["findings", str(PAIRS / "extra_sync"), "--json", "--serial"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["kind"] == "sync" and set(rows[0]) == set(hta_lite.analyses.findings.COLUMNS)


def one_slow_gemm(tmp_path: Path) -> Path:
    """One step: a bf16 4096^3 aten::mm whose kernel takes 1,389 µs on an H100 SXM (98.9
    TFLOP/s: 10 % of its 989.4 TFLOP/s roof) and is the whole path. At 60 % of the roof it
    takes 231.5 µs: 1,157.5 µs saved; at 40 %, 1,041.8 µs."""
    b = TraceBuilder()
    b.step(1, 0, 20)
    dims, types = [[4096, 4096], [4096, 4096]], ["c10::BFloat16"] * 2
    b.cpu_op("aten::mm", 2, 10, **{"Input Dims": dims, "Input type": types})
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 10, 1389, launch_ts=5, launch_dur=3)
    b.step(2, 1500, 10)
    return b.write(tmp_path / "rank0.json")


def test_gemm_below_roof_saving_is_known_by_construction(tmp_path):
    one_slow_gemm(tmp_path)
    table = analysis(tmp_path).get_findings(device="H100 SXM").set_index("kind")
    row = table.loc["below_roof"]
    assert row["saving_ms_per_step"] == pytest.approx(1.1575, rel=0.01)
    assert row["saving_low_ms"] == pytest.approx(1.0418, rel=0.01)
    assert "aten::mm" in row["where"] and "10.0 %" in row["evidence"]


def synchronizing_step(tmp_path: Path) -> Path:
    """One step: a 200 µs kernel, the host waits for it (cudaDeviceSynchronize), does 100 µs of
    its own work, launches a second 200 µs kernel and waits again; the step ends at 520 µs.
    Without the syncs the host work runs under the first kernel and the second kernel follows
    the first on its stream: the step ends with it, at 410 µs — 110 µs saved."""
    b = TraceBuilder()
    b.step(1, 0, 520)
    b.kernel("k1", 10, 200, launch_ts=0, launch_dur=5)
    b.kernel("Context Sync", 209, 1, stream=-1, cat="cuda_sync", launch_ts=10, launch_dur=200,
             launch_name="cudaDeviceSynchronize")  # fmt: skip
    b.cpu_op("aten::host_work", 210, 100)
    b.kernel("k2", 320, 200, launch_ts=310, launch_dur=5)
    b.kernel("Context Sync", 519, 1, stream=-1, cat="cuda_sync", launch_ts=320, launch_dur=200,
             launch_name="cudaDeviceSynchronize")  # fmt: skip
    b.step(2, 600, 10)
    return b.write(tmp_path / "rank0.json")


def test_host_sync_saving_is_known_by_construction(tmp_path):
    synchronizing_step(tmp_path)
    table = analysis(tmp_path).get_findings().set_index("kind")
    row = table.loc["host_sync"]
    assert row["where"] == "cudaDeviceSynchronize"
    assert row["saving_ms_per_step"] == pytest.approx(0.110, rel=0.02)
    assert "(cudaDeviceSynchronize x2 per step)" in row["evidence"]  # one step: the last left out


def test_host_sync_counts_the_calls_of_the_steps_per_step(tmp_path):
    """Three steps of the synchronizing step, and three more syncs before the first: 2 per step
    in the steps (the ones before them are in none)."""
    b = TraceBuilder()
    for k in range(3):
        b.kernel("k0", 10 + 10 * k, 1, launch_ts=5 + 10 * k)
        b.kernel("Context Sync", 12 + 10 * k, 1, stream=-1, cat="cuda_sync", launch_ts=7 + 10 * k,
                 launch_dur=1, launch_name="cudaDeviceSynchronize")  # fmt: skip
    for step in range(4):
        t = 100 + 600 * step
        b.step(step + 1, t, 520)
        b.kernel("k1", t + 10, 200, launch_ts=t, launch_dur=5)
        b.kernel("Context Sync", t + 209, 1, stream=-1, cat="cuda_sync", launch_ts=t + 10,
                 launch_dur=200, launch_name="cudaDeviceSynchronize")  # fmt: skip
        b.cpu_op("aten::host_work", t + 210, 100)
        b.kernel("k2", t + 320, 200, launch_ts=t + 310, launch_dur=5)
        b.kernel("Context Sync", t + 519, 1, stream=-1, cat="cuda_sync", launch_ts=t + 320,
                 launch_dur=200, launch_name="cudaDeviceSynchronize")  # fmt: skip
    b.write(tmp_path / "rank0.json")
    row = analysis(tmp_path).get_findings().set_index("kind").loc["host_sync"]
    assert "(cudaDeviceSynchronize x2 per step)" in row["evidence"]  # 3 steps (the last left out)
    assert row["saving_ms_per_step"] == pytest.approx(0.110, rel=0.02)


def pageable_copy(tmp_path: Path) -> Path:
    """One step: a 280 µs host-to-device copy from pageable memory, then a 100 µs kernel that
    follows it on its stream; the host call waits for the copy; the step ends with the kernel at
    410 µs. Pinned and non-blocking, the host goes on at once, the copy takes 140 µs (the
    model's 2x) and the kernel follows it: it ends at 250 µs, 160 µs saved."""
    b = TraceBuilder()
    b.step(1, 0, 310)
    b.kernel("Memcpy HtoD (Pageable -> Device)", 10, 280, cat="gpu_memcpy", launch_ts=0,
             launch_dur=300)  # fmt: skip
    b.kernel("k", 310, 100, launch_ts=300, launch_dur=5)
    b.step(2, 500, 10)
    return b.write(tmp_path / "rank0.json")


def test_a_pageable_read_back_still_waits_for_the_work_before_it(tmp_path):
    """A 300 µs kernel, then a 10 µs device-to-host copy into pageable memory (a .item()): its
    host call waits for both, then 200 µs of host work use the value and launch a 100 µs
    kernel; the step ends at 617 µs. Pinned, the copy takes 5 µs, and the host still waits for
    the kernel before it: 5 µs saved. (Returning at once, as an upload does, said 211 µs.)"""
    b = TraceBuilder()
    b.step(1, 0, 620)
    b.kernel("k", 0, 300, launch_ts=0, launch_dur=5)
    b.kernel("Memcpy DtoH (Device -> Pageable)", 300, 10, cat="gpu_memcpy", launch_ts=6,
             launch_dur=306, launch_name="cudaMemcpyAsync")  # fmt: skip
    b.cpu_op("use_the_value", 312, 200)
    b.kernel("k2", 517, 100, launch_ts=512, launch_dur=5)
    b.step(2, 700, 10)
    b.write(tmp_path / "rank0.json")
    row = analysis(tmp_path).get_findings().set_index("kind").loc["pageable_memcpy"]
    assert row["saving_ms_per_step"] == pytest.approx(0.005, abs=0.001)


def test_pageable_copy_saving_is_known_by_construction(tmp_path):
    pageable_copy(tmp_path)
    row = analysis(tmp_path).get_findings().set_index("kind").loc["pageable_memcpy"]
    assert row["where"] == "Memcpy HtoD (Pageable -> Device)"
    assert row["saving_ms_per_step"] == pytest.approx(0.160, rel=0.02)


def test_a_share_of_the_step_is_of_the_gpus_period_when_the_gpu_runs_behind(tmp_path):
    # the GPU-bound pipeline's step is its 3,500 µs period (the first one 3,520); the pageable
    # copy made 2x faster saves 250 µs of it, 7.1 %, not 3.4 % of the mean extent (7,270 µs)
    gpu_behind_cpu(tmp_path / "rank0.json")
    a = analysis(tmp_path)
    row = a.get_findings().set_index("kind").loc["pageable_memcpy"]
    assert row["saving_ms_per_step"] == pytest.approx(0.250, rel=0.02)
    assert row["saving_pctg"] == pytest.approx(100 * 250 / 3505, rel=0.02)
    assert a.get_step_breakdown()["step_time"].mean() == 3505
    # the windows the kinds count time per step in are those steps: they follow each other
    # (extents 1,000-4,520, 2,000-8,020, ... would count a moment in up to 4 steps)
    bounds = a._findings_context(None).step_bounds(0).sort_values("start")
    assert ((bounds["end"] - bounds["start"]) // 1000).tolist() == [3520, 3500, 3500, 3500]
    assert (bounds["start"].to_numpy()[1:] == bounds["end"].to_numpy()[:-1]).all()


@needs_shared
@pytest.mark.parametrize("name", sorted(shared_cases()))
def test_every_shared_trace_gives_findings_below_the_step(name):
    a = analysis(shared_cases()[name])
    if any(len(t.kernel_counters) for t in a.traces.values()):
        assert_missing(a.get_findings(), "CUPTI range profiler")
        return
    table = a.get_findings()
    step_ms = a._findings_context(None).step_ns / 1e6
    steps = a.get_step_breakdown()
    if len(steps):  # one step length: the findings' is the step table's
        assert step_ms == pytest.approx(steps["step_time"].mean() / 1e3, rel=1e-6)
    assert (table["saving_ms_per_step"] <= step_ms + 1e-9).all()
    assert (table["cumulative_ms"].dropna() <= step_ms + 1e-9).all()


def tiny_kernel_chain(tmp_path: Path) -> Path:
    """One step: 100 launch calls of 1 µs at the start, then 100 kernels of 5 µs back to back
    on one stream from 110 µs (each queued behind the one before). Fused, each loses the fixed
    3 µs: the GPU chain, the step's path, is 300 µs shorter."""
    b = TraceBuilder()
    b.step(1, 0, 620)
    for i in range(100):
        b.kernel("vectorized_elementwise_kernel", 110 + 5 * i, 5, launch_ts=i, launch_dur=1)
    b.step(2, 700, 10)
    return b.write(tmp_path / "rank0.json")


def test_tiny_kernels_saving_is_known_by_construction(tmp_path):
    tiny_kernel_chain(tmp_path)
    table = analysis(tmp_path).get_findings().set_index("kind")
    row = table.loc["tiny_kernels"]
    assert row["saving_ms_per_step"] == pytest.approx(0.300, rel=0.02)
    assert row["saving_low_ms"] == pytest.approx(0.150, rel=0.02)
    assert "100 compute kernels under 10 µs per step" in row["evidence"]
    assert table.index[0] == "tiny_kernels"


def exposed_all_reduce(tmp_path: Path, backward: bool = False) -> Path:
    """Two ranks, one step each: 100 µs of forward on the host (it launches a 100 µs GEMM),
    then an NCCL all_reduce kernel of 300 µs on its own stream that ends the step at 410 µs.
    Overlapped with the compute of the step (the model: hidden up to the computation on the
    path), 100 µs of it is hidden: the step ends at 310 µs. ``backward``: the forward's last
    4 µs are an autograd op (a training run)."""
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        b.step(1, 0, 420)
        b.cpu_op("aten::forward", 0, 100)
        if backward:
            b.cpu_op("autograd::engine::evaluate_function: AddmmBackward0", 95, 4)
        b.kernel("sm90_xmma_gemm_f32f32", 10, 100, launch_ts=1, launch_dur=5)
        b.cpu_op("nccl:all_reduce", 100, 6)
        b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 110, 300, stream=13, launch_ts=100,
                 launch_dur=5)  # fmt: skip
        b.step(2, 500, 10)
        b.write(tmp_path / f"rank{rank}.json")
    return tmp_path


def test_exposed_communication_saving_is_known_by_construction(tmp_path):
    table = analysis(exposed_all_reduce(tmp_path)).get_findings()
    top = table.iloc[0]
    assert top["kind"] == "exposed_communication"
    assert "ncclDevKernel_AllReduce" in top["where"]
    assert top["saving_ms_per_step"] == pytest.approx(0.100, rel=0.02)
    assert top["saving_low_ms"] == pytest.approx(0.050, rel=0.02)
    assert "300 µs per step of communication" in top["evidence"]
    assert "two micro-batches" in top["advice"]  # no backward pass: inference advice


def test_exposed_communication_advice_fits_a_training_run(tmp_path):
    """The same step with a backward op in the trace: the advice is about gradient buckets, and
    the saving is the same."""
    top = analysis(exposed_all_reduce(tmp_path, backward=True)).get_findings().iloc[0]
    assert top["kind"] == "exposed_communication"
    assert top["saving_ms_per_step"] == pytest.approx(0.100, rel=0.02)
    assert "DDP buckets" in top["advice"] and "micro-batches" not in top["advice"]


def test_exposed_communication_of_a_partial_job_says_so():
    """two_ranks holds 2 of the job's 128 ranks: every collective has members not loaded,
    and the evidence says their time includes waiting for them."""
    row = analysis(SAMPLES / "two_ranks").get_findings().set_index("kind")
    evidence = row.loc["exposed_communication", "evidence"]
    assert "; 5 of the 5 collectives have members that are not loaded" in evidence
    # a headline names a kernel without its argument list (the path's table has the whole name)
    assert row.loc["exposed_communication", "where"] == "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"


def test_host_collectives_are_not_hidden():
    """gloo on CPU ranks shares the cores with the computation: no exposed-communication
    finding (the recorded bucket pair saved nothing by overlapping)."""
    table = analysis(SAMPLES / "gloo_buckets").get_findings()
    assert "exposed_communication" not in set(table["kind"])


def straggler_pair(template: Path, tmp_path: Path, cause: str) -> tuple[float, pd.Series]:
    """(ms per step a 20 ms straggler of ``cause`` adds to 4 generated ranks of ``template``,
    measured against the same ranks without it; the straggler finding's row)."""
    means = []
    for name, kind, delay in (("none", "compute", 0.001), ("late", cause, 20_000)):
        make_straggler_folder(template, tmp_path / name, 4, 1, kind, delay_us=delay, gz=False)
        a = hta_lite.TraceAnalysis(trace_dir=tmp_path / name, cache=False, progress=False)
        means.append(a.get_step_breakdown()["step_time"].mean() / 1e3)
    return means[1] - means[0], a.get_findings().set_index("kind").loc["straggler"]


@pytest.mark.parametrize("cause", ["compute", "host"])
def test_a_generated_stragglers_saving_is_the_step_time_it_adds(tmp_path, cause):
    # host: late by 20 ms plus how far its CPU ran ahead of its GPU there (0.5 ms here)
    added, row = straggler_pair(DATA / "nccl_parser_config" / "nccl_data.json.gz", tmp_path, cause)
    assert added == pytest.approx(20.0 if cause == "compute" else 20.5, abs=0.1)
    assert row["saving_ms_per_step"] == pytest.approx(added, rel=0.02)


@needs_shared
@pytest.mark.parametrize(
    "template", ["hta/diff_test/test.json.gz", "hta/diff_control/control.json.gz"]
)
@pytest.mark.parametrize("cause", ["compute", "host"])
def test_a_generated_stragglers_saving_on_traces_with_collectives_in_between(
    tmp_path, template, cause
):
    """In these steps another collective runs between the delayed kernel and the collective
    the straggler is late for: the others wait for it there (the generator once made them pass
    it, a collective that ended on them before it began on the straggler: diff_test's saving
    read 4.0 of 20 ms, diff_control's 16.0)."""
    added, row = straggler_pair(SHARED_TRACES / template, tmp_path, cause)
    assert row["saving_ms_per_step"] == pytest.approx(added, rel=0.02)


def test_straggler_compares_only_work_between_points_the_ranks_share():
    """two_ranks (2 of the job's 128 ranks): 3 of its 5 collectives pair different calls
    (inconsistent, or in an impossible order). Rank 1 arrives last at the other two (3.4 ms of
    waits) because its all_to_all held it 41 ms longer, not because its own work is longer: of
    its segments only the one from the all_gather to the step's end starts and ends where rank
    0's does, 0.452 ms longer (59.239 - 58.787 ms). Comparing every segment said 246.5 ms. The
    straggler report names rank 1 (3.4 ms late, 0.6 % of the step): the row is listed, with what
    evening its work out saves."""
    a = analysis(SAMPLES / "two_ranks")
    assert straggler._excess(a._findings_context(None), 1).sum() == 452_000
    row = a.get_findings().set_index("kind").loc["straggler"]
    assert row["rank"] == 1 and row["saving_ms_per_step"] <= 0.452 + 1e-9
    assert "; 3 of the 5 collectives cannot be compared" in row["evidence"]
    assert row["evidence"].endswith("so the saving is a lower bound")


def test_anomalous_steps_amortised_equal_the_live_excess():
    """long_run: 5 anomalous steps of 40 (rank 1's data-loading stalls, rank 0's extra
    forward); brought to the typical step, the job saves their live excess over the median
    step, amortised over the run."""
    a = analysis(SAMPLES / "long_run")
    steps = a.get_profiler_steps()
    live = pd.read_csv(SAMPLES / "long_run" / "live_step_times.csv")
    job = 1e3 * live[live["step"].isin(steps)].groupby("step")["seconds"].max()
    odd = [7, 17, 23, 27, 37]
    saved = (job[odd] - job.drop(odd).median()).clip(lower=0).sum() / len(job)
    top = a.get_findings().iloc[0]
    assert top["kind"] == "step_anomalies"
    assert "5 anomalous step(s)" in top["evidence"]
    assert top["saving_ms_per_step"] == pytest.approx(saved, rel=0.25)


def test_memory_near_capacity_and_fragmented_save_no_time():
    """Peaks known by construction: 90 of 100 GB allocated (near capacity); 10 of 40 GB
    allocated at a reserved peak of 40 (75 % cached, not allocated: whether fragmented only a
    snapshot says); 50 of 60 neither."""
    from types import SimpleNamespace

    from hta_lite.analyses.findings import memory

    peaks = pd.DataFrame({
        "rank": [0, 1, 2], "device": ["cuda:0"] * 3,
        "peak_allocated": [90e9, 10e9, 50e9], "peak_reserved": [92e9, 40e9, 60e9],
    })  # fmt: skip
    ctx = SimpleNamespace(
        memory_peaks=peaks, memory_leaks=None, capacity=lambda rank, device: 100e9,
        snapshot_name="",
        snapshot_summary=None, snapshot_oom=None,
    )  # fmt: skip
    found = {(f.kind, f.rank) for f in memory.find(ctx)}
    assert found == {("memory_near_capacity", 0), ("memory_cached", 1)}


SNAPSHOT = ROOT / "tests" / "data" / "snapshots" / "medium_128_training.pickle.gz"


def snapshot_of(tmp_path, change) -> Path:
    """The real training-step snapshot, changed by ``change(data)``."""
    data = pickle.loads(gzip.decompress(SNAPSHOT.read_bytes()))
    change(data)
    path = tmp_path / "changed.pickle"
    path.write_bytes(pickle.dumps(data))
    return path


def test_a_snapshot_adds_its_out_of_memory_verdict_and_fragmentation(tmp_path, capsys):
    """The training step's snapshot: 6.8 of 7.2 GB allocated (5.9 % cached free: no finding).
    An out-of-memory of 100 MiB appended with 2 MiB free on the device: 398.9 MiB are cached
    free, the largest block 40 MiB, so a memory_oom finding with the fragmentation verdict.
    Every block of the 200 largest segments freed: cached free far above 25 % of the reserved."""
    a = analysis(SAMPLES / "h100_bert_small")
    plain = a.get_findings(snapshot=str(SNAPSHOT))
    assert not plain["kind"].str.startswith("memory").any()

    def oom(data):
        last = data["device_traces"][0][-1]["time_us"]
        data["device_traces"][0].append(
            {"action": "oom", "addr": 0, "size": 100 * 2**20, "stream": 0,
             "time_us": last + 1, "device_free": 2 * 2**20, "frames": []}
        )  # fmt: skip

    path = snapshot_of(tmp_path, oom)
    table = a.get_findings(snapshot=hta_lite.MemorySnapshot(path))
    row = table[table["kind"] == "memory_oom"].iloc[0]
    assert row["saving_ms_per_step"] == 0 and row.name == len(table) - 1  # no time: last
    assert "100.0 MiB requested" in row["evidence"] and "398.9 MiB cached free" in row["evidence"]
    assert row["evidence"].endswith(": fragmentation") and "expandable_segments" in row["advice"]
    assert hta_lite.views.cli.main(["findings", str(SAMPLES / "h100_bert_small"),
                                    "--snapshot", str(path), "--no-cache"]) == 0  # fmt: skip
    assert "memory_oom: snapshot changed.pickle cuda:0 — no step time" in capsys.readouterr().out
    out = tmp_path / "summary"
    assert hta_lite.views.cli.main(["summarize", str(SAMPLES / "h100_bert_small"), "--snapshot",
                                    str(path), "-o", str(out), "--no-cache"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "memory_oom: snapshot changed.pickle cuda:0" in printed
    assert "CUDA memory snapshot: out of memory" in printed
    assert pd.read_csv(out / "snapshot_oom.csv")["verdict"].tolist() == ["fragmentation"]
    page = build_report(a, snapshot=hta_lite.MemorySnapshot(path))
    lead = page[page.index("<section id='findings'>") : page.index("<section id='key-findings'>")]
    assert "memory_oom" in lead and "fragmentation" in lead

    def free_largest(data):
        for seg in sorted(data["segments"], key=lambda s: -s["total_size"])[:200]:
            for block in seg["blocks"]:
                block["state"] = "inactive"

    table = a.get_findings(snapshot=snapshot_of(tmp_path, free_largest))
    row = table[table["kind"] == "memory_fragmentation"].iloc[0]
    summary = hta_lite.MemorySnapshot(tmp_path / "changed.pickle").summary().iloc[0]
    slack = 100 * (1 - summary["allocated_bytes"] / summary["reserved_bytes"])
    assert slack > 25 and f"{slack:.1f} % of the reserved is cached" in row["evidence"]
