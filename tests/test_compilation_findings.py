"""One-time work inside the profile (findings/compilation.py): a recompile or a graph recapture
is priced by what stopping it saves, a first compile or capture is warm-up that no kind prices.
On programs whose answer is known by construction (tests/scenarios.py), on a recorded CPU pair
(tests/data/compile_pair: torch.compile recompiling every step, the same loop with dynamic
shapes, and a first compile), and on SGLang's profiled graph capture (../shared)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import DATA, SHARED, needs_shared
from scenarios import Sim
from synth import TraceBuilder
from test_host_findings import check_first, findings_of

from hta_lite import TraceAnalysis
from hta_lite.tools.batch import summarize_folder

PAIR = DATA / "compile_pair"
DYNAMO = "_compile.compile_inner (dynamo_timed)"


def gemms(s, n=10):
    for _ in range(n):
        s.launch("aten::mm", "gemm_kernel", 50)


def program(steps: int, compiles: set[int], name: str = DYNAMO, regions: bool = True) -> Sim:
    """Each step: 10 GEMMs, then (in the steps ``compiles`` names) 3 ms of compiling with no GPU
    work, then the compiled frame's 10 GEMMs, inside ``Torch-Compiled Region: 0/<compile>``
    (``regions``) as torch.compile writes it; compile 0 is the frame's first."""
    sim = Sim()
    for n in range(1, steps + 1):

        def body(s, n=n):
            gemms(s)
            if n in compiles:
                s.region("entire_frame_compile" if name == DYNAMO else "compile",
                         lambda s: s.region(name, lambda s: s.python(3000), cat="cpu_op"),
                         cat="cpu_op")  # fmt: skip
            number = max(sum(1 for k in compiles if k <= n) - 1, 0)
            if regions:
                s.region(f"Torch-Compiled Region: 0/{number}", gemms)
            else:
                gemms(s)

        sim.step(n, body)
    return sim


def test_a_recompile_every_step_is_priced_by_what_stopping_it_saves(tmp_path):
    """Steps 2 and up compile the frame again (compiles 0/1, 0/2: a guard fails); fixed, only
    step 1 compiles (its first compile stays: the fix keeps it)."""
    slow, fixed = program(4, {1, 2, 3, 4}), program(4, {1})
    known = slow.mean_step_us() - fixed.mean_step_us()
    table = findings_of(slow, tmp_path)
    check_first(table, "recompilation", known, "torch.compile")
    assert "compiles again in 2 of its 3 steps" in table.iloc[0]["evidence"]
    assert "compiles 0/1 to 0/2" in table.iloc[0]["evidence"]
    assert "TORCH_LOGS=recompiles" in table.iloc[0]["advice"]
    warmup = table.set_index("kind").loc["warmup"]  # step 1's compile: the program's first
    assert warmup["where"] == "compilation (torch.compile)" and warmup["saving_ms_per_step"] == 0


def test_a_compiler_that_numbers_no_compile_recompiles_after_its_first_step(tmp_path):
    """nvFuser names no compile number: a compile in a step after the first one that compiled
    is a recompile."""
    name = "KernelExecutor::compileFusion"
    slow = program(4, {1, 2, 3, 4}, name, regions=False)
    fixed = program(4, {1}, name, regions=False)
    known = slow.mean_step_us() - fixed.mean_step_us()
    check_first(findings_of(slow, tmp_path), "recompilation", known, "nvFuser")


def test_a_first_compile_is_warm_up_that_no_kind_prices(tmp_path):
    """Step 1 of 8 compiles (3 ms, the GPU idle): the fix is to profile after warm-up, which
    saves the run nothing. Before, host_bound priced the compile as host time the GPU waits
    for."""
    table = findings_of(program(8, {1}), tmp_path)
    warmup = table[table["kind"] == "warmup"]
    assert warmup["where"].tolist() == ["compilation (torch.compile)"]
    assert (
        "3.0 ms" in warmup.iloc[0]["evidence"] and "step 1 of rank 0" in warmup.iloc[0]["evidence"]
    )
    timed = table[table["saving_ms_per_step"] > 0]
    assert (timed["saving_ms_per_step"] < 0.05).all(), timed[["kind", "saving_ms_per_step"]]
    assert not timed["evidence"].str.contains("compile").any()


def live_mean_ms(folder, steps) -> float:
    live = pd.read_csv(folder / "live_step_times.csv")
    return float(live[live["step"].isin(steps)]["seconds"].mean() * 1e3)


def test_the_recorded_recompile_is_what_dynamic_shapes_saved():
    """The recorded pair: a batch of 32 + step rows, automatic dynamic shapes off, so every
    profiled step recompiles (0/2 to 0/4); the fix, torch.compile(dynamic=True), compiled once
    before the profile. The saving is what the live step times say the fix saved, within 10 %."""
    slow = TraceAnalysis(trace_dir=PAIR / "recompile", cache=False, parallel=False)
    steps = slow.get_profiler_steps()
    measured = live_mean_ms(PAIR / "recompile", steps) - live_mean_ms(PAIR / "dynamic", steps)
    table = slow.get_findings()
    check_first(table, "recompilation", measured * 1e3, "torch.compile")  # µs
    assert "compiles 0/2 to 0/4" in table.iloc[0]["evidence"]
    fixed = TraceAnalysis(trace_dir=PAIR / "dynamic", cache=False, parallel=False)
    assert not {"recompilation", "warmup"} & set(fixed.get_findings()["kind"])


def test_the_recorded_first_compile_is_warm_up_only():
    """Profiled from its first step, which compiles the model (1.8 s of a 1.8 s step): warm-up,
    no step time, and no other finding."""
    analysis = TraceAnalysis(trace_dir=PAIR / "first_compile", cache=False, parallel=False)
    table = analysis.get_findings()
    assert table["kind"].tolist() == ["warmup"]
    assert table.iloc[0]["where"] == "compilation (torch.compile)"
    assert "in step 0 of rank 0" in table.iloc[0]["evidence"]


@pytest.mark.parametrize(
    "name",
    ["entire_frame_compile", "compile_fx.<locals>.fw_compiler_base (dynamo_timed)",
     "FusionExecutor::compileFusion", "executor_utils::Nvrtc::CompileProgram",
     "/usr/lib/python3/site-packages/triton/compiler/compiler.py(226): compile"],
)  # fmt: skip
def test_the_compile_names_of_each_compiler_are_read(name):
    import re

    from hta_lite.kineto import COMPILE_PATTERNS

    assert any(re.search(p, name) for p in COMPILE_PATTERNS.values())
    assert not any(re.search(p, "aten::compile_stuff") for p in COMPILE_PATTERNS.values())


def test_a_compile_step_is_no_step_anomaly_to_fix(tmp_path):
    """30 steps, step 1 compiles for the first time and step 15 compiles again: step 1 is
    warm-up and step 15 the recompile finding's; before, step_anomalies priced both steps'
    excess a second time."""
    slow, fixed = program(30, {1, 15}), program(30, {1})
    table = findings_of(slow, tmp_path)
    assert "step_anomalies" not in set(table["kind"]), table[["kind", "saving_ms_per_step"]]
    known = slow.mean_step_us() - fixed.mean_step_us()
    check_first(table, "recompilation", known, "torch.compile")
    assert "compiles again in 1 of its 29 steps" in table.iloc[0]["evidence"]


def test_the_key_findings_say_how_much_of_the_idle_gpu_is_the_host_compiling(tmp_path):
    """6 steps, step 1 compiles for 3 ms while the GPU idles: the idle line says that 96.6 % of
    the idle time (2,576 of 2,666 µs: the compile less the GEMMs still queued when it starts) is
    the host compiling, so that it and the findings (warm-up only) tell one story. A run that
    does not compile gets no such clause."""
    folder = program(6, {1}).write(tmp_path / "compiles")
    analysis = TraceAnalysis(trace_dir=folder, cache=False, parallel=False)
    idle = analysis.get_key_findings().set_index("kind").loc["gpu_idle", "finding"]
    assert "96.6 % of the idle time is while the host compiles (torch.compile)" in idle
    folder = program(6, set()).write(tmp_path / "plain")
    analysis = TraceAnalysis(trace_dir=folder, cache=False, parallel=False)
    idle = analysis.get_key_findings().set_index("kind").loc["gpu_idle", "finding"]
    assert "compiles" not in idle
    # a graph capture too (before, the clause knew compiles only): 8 steps, step 1 captures
    folder = capturing(8, {1}).write(tmp_path / "captures")
    analysis = TraceAnalysis(trace_dir=folder, cache=False, parallel=False)
    idle = analysis.get_key_findings().set_index("kind").loc["gpu_idle", "finding"]
    assert "93.2 % of the idle time is while the host captures a CUDA graph" in idle


def capture(s):
    """A graph capture (10 operators launching into it, 175 µs) and its instantiation (2 ms)."""
    s.host("cudaStreamBeginCapture", 5, cat="cuda_runtime")
    for _ in range(10):
        s.host("aten::mm", 15)
    s.host("cudaStreamEndCapture", 20, cat="cuda_runtime")
    s.host("cudaGraphInstantiate", 2000, cat="cuda_runtime")


def capturing(steps: int, captures: set[int]) -> Sim:
    sim = Sim()
    for n in range(1, steps + 1):
        sim.step(n, lambda s, n=n: (gemms(s), capture(s) if n in captures else None, gemms(s)))
    return sim


def test_a_graph_captured_again_every_step_is_priced_by_what_capturing_once_saves(tmp_path):
    slow, fixed = capturing(4, {1, 2, 3, 4}), capturing(4, {1})
    known = slow.mean_step_us() - fixed.mean_step_us()
    table = findings_of(slow, tmp_path)
    check_first(table, "recapture", known, "CUDA graph capture")
    assert "captures a CUDA graph again in 2 of its 3 steps" in table.iloc[0]["evidence"]
    warmup = table.set_index("kind").loc["warmup"]
    assert warmup["where"] == "CUDA graph capture" and warmup["saving_ms_per_step"] == 0


def test_a_first_capture_is_warm_up_that_no_kind_prices(tmp_path):
    """Before, host_bound priced the 2.2 ms of capturing and instantiating as host time the
    GPU waits for."""
    table = findings_of(capturing(8, {1}), tmp_path)
    assert table.loc[table["kind"] == "warmup", "where"].tolist() == ["CUDA graph capture"]
    timed = table[table["saving_ms_per_step"] > 0]
    assert (timed["saving_ms_per_step"] < 0.05).all(), timed[["kind", "saving_ms_per_step"]]


@needs_shared
def test_a_profiled_graph_capture_is_warm_up(tmp_path):
    """SGLang's profiled capture of its decode graph (MI300, 32.2 ms from hipStreamBeginCapture
    through hipGraphInstantiateWithFlags): its GPU runs nothing while the host captures. Before,
    host_bound said 33.7 ms per step (99.9 %) of host time to save."""
    import shutil

    shutil.copy(SHARED / "graph_capture/sglang_decode/bs_32_rank0.json.gz", tmp_path)
    table = TraceAnalysis(trace_dir=tmp_path, cache=False, parallel=False).get_findings()
    assert table["kind"].tolist() == ["warmup"]
    assert (
        "captures a CUDA graph for the first time inside the profile: 32.2 ms"
        in (table.iloc[0]["evidence"])
    )


def compiling_job(
    folder, compile_us, every=False, steps=6, late_us=(0, 0), load_us=(0, 0)
) -> float:
    """Two ranks, ``steps`` steps: each rank compiles (``compile_us[rank]`` µs; in step 1 only,
    or in every step with ``every``), works ``late_us[rank]`` µs on the host, launches a 180 µs
    GEMM (in step 1, a launch call of ``load_us[rank]`` µs where it is not 0: the module loads),
    then joins an NCCL all_reduce that transfers for 100 µs once both ranks arrived. Returns the
    mean step (µs) of the steps the analyses keep (the last one is left out)."""
    builders = [TraceBuilder(rank=r, world_size=2) for r in (0, 1)]
    t, lengths = [0.0, 0.0], []
    for n in range(1, steps + 1):
        starts, arrive = list(t), []
        for r, b in enumerate(builders):
            if (n == 1 or every) and compile_us[r]:
                b.cpu_op("entire_frame_compile", t[r], compile_us[r])
                t[r] += compile_us[r]
            if late_us[r]:
                b.cpu_op("aten::index", t[r], late_us[r])
                t[r] += late_us[r]
            launch = load_us[r] if n == 1 and load_us[r] else 5
            b.cpu_op("aten::mm", t[r], 15 + launch)
            b.kernel("gemm", t[r] + 15 + launch, 180, launch_ts=t[r] + 5, launch_dur=launch)
            t[r] += launch - 5
            b.cpu_op("nccl:all_reduce", t[r] + 200, 6)
            arrive.append(t[r] + 200)
        go = max(arrive) + 10
        for r, b in enumerate(builders):
            b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", arrive[r] + 10,
                     go + 100 - arrive[r] - 10, stream=13, launch_ts=arrive[r] + 1,
                     launch_dur=5)  # fmt: skip
            b.step(n, starts[r], go + 110 - starts[r])
            t[r] = go + 120
        lengths.append(go + 110 - min(starts))
    for r, b in enumerate(builders):
        b.write(Path(folder) / f"rank{r}.json")
    return sum(lengths[:-1]) / (steps - 1)


def test_a_rank_that_compiles_longer_in_its_first_step_is_no_straggler(tmp_path):
    """Both ranks compile in step 1, rank 1 for 6 ms and rank 0 for 3: rank 0 waits 3 ms at
    step 1's all_reduce, and every later step is even. That lateness is warm-up: the straggler
    report leaves step 1's collective out and says so, and neither the key findings nor the
    findings name a straggler (before: rank 1, 600 µs per step, 39.5 % of the step). The warm-up
    share is of the two ranks' time (before: 117.8 %)."""
    compiling_job(tmp_path, (3000, 6000))
    analysis = TraceAnalysis(trace_dir=tmp_path, cache=False, parallel=False)
    report = analysis.get_straggler_report()
    assert report.stragglers == []
    assert "arrivals taken once warm: 9.0 ms of first compiles" in report.rule
    assert (report.ranks["lateness_us"] == 0).all() and (report.collectives["step"] == 1).any()
    keys = analysis.get_key_findings().set_index("kind")
    assert keys.loc["straggler", "finding"].startswith("No straggler")
    table = analysis.get_findings()
    assert "straggler" not in set(table["kind"])
    warmup = table.set_index("kind").loc["warmup", "evidence"]
    assert "9.0 ms (58.9 % of the profiled time) in 2 steps of rank(s) 0, 1" in warmup
    batch = summarize_folder(tmp_path, executor="serial", cache=None)  # the batch agrees
    pd.testing.assert_frame_equal(batch["rank_lateness"], report.ranks)
    assert "straggler" not in set(batch["findings"]["kind"])


def test_a_slow_lazy_module_load_is_no_straggler(tmp_path):
    """Rank 1's first launch in step 1 loads its module for 20 ms (rank 0's for 2 ms), the GPU
    idle meanwhile; every step is otherwise even. That is warm-up: no straggler in the report,
    the key findings or the findings, here or in the batch (before: rank 1, 3,600 µs per step
    after the others, 83 % of the step; a straggler finding of 3.6 ms per step)."""
    compiling_job(tmp_path, (0, 0), load_us=(2000, 20000))
    analysis = TraceAnalysis(trace_dir=tmp_path, cache=False, parallel=False)
    report = analysis.get_straggler_report()
    assert report.stragglers == [] and (report.ranks["lateness_us"] == 0).all()
    assert "arrivals taken once warm: 22.0 ms" in report.rule
    assert (
        analysis.get_key_findings()
        .set_index("kind")
        .loc["straggler", "finding"]
        .startswith("No straggler")
    )
    assert {"straggler", "warmup"} & set(analysis.get_findings()["kind"]) == {"warmup"}
    batch = summarize_folder(tmp_path, executor="serial", cache=None)
    pd.testing.assert_frame_equal(batch["rank_lateness"], report.ranks)


def test_a_straggler_that_also_compiles_first_is_priced_over_every_step(tmp_path):
    """Both ranks compile 3 ms in step 1, and rank 1 works 1 ms longer before every all_reduce:
    its lateness is 1 ms in every kept step, step 1 included, and the straggler finding saves what
    removing that work saves (known: the two runs' step difference), within 10 % (before, step
    1 was left out: 20 % under)."""
    slow = compiling_job(tmp_path / "slow", (3000, 3000), late_us=(0, 1000))
    fixed = compiling_job(tmp_path / "fixed", (3000, 3000))
    analysis = TraceAnalysis(trace_dir=tmp_path / "slow", cache=False, parallel=False)
    report = analysis.get_straggler_report()
    assert report.stragglers == [1]
    late = report.ranks.set_index("rank").loc[1]
    assert (late["lateness_us"], late["collectives"]) == (1000, 5)  # the last step is cut
    found = analysis.get_findings().set_index("kind").loc["straggler"]
    assert found["saving_ms_per_step"] * 1e3 == pytest.approx(slow - fixed, rel=0.1)


def test_a_rank_that_recompiles_every_step_is_a_straggler_priced_without_its_first_compile(
    tmp_path,
):
    """Rank 1 compiles 3 ms in every step (no compile numbers: step 1's is its first): the
    others wait for it. Fixed, it compiles in step 1 only; both the recompilation and the
    straggler finding (one cause, two views) save what the fix saves, within 10 %; step 1's
    first compile is warm-up in both (before, the straggler's saving counted it: 25 % more)."""
    slow = compiling_job(tmp_path / "slow", (0, 3000), every=True)
    fixed = compiling_job(tmp_path / "fixed", (0, 3000))
    analysis = TraceAnalysis(trace_dir=tmp_path / "slow", cache=False, parallel=False)
    assert analysis.get_straggler_report().stragglers == [1]
    table = analysis.get_findings().set_index("kind")
    for kind in ("recompilation", "straggler"):
        assert table.loc[kind, "saving_ms_per_step"] * 1e3 == pytest.approx(slow - fixed, rel=0.1)


def test_a_compile_number_of_5000_digits_is_no_number(tmp_path):
    """A hostile region name (``Torch-Compiled Region: 0/999...``, 5,000 digits: past Python's
    int limit and int64) is read as naming no number: the steps after the first that compiles
    recompile, and nothing raises."""
    slow = program(4, {1, 2, 3, 4})
    for event in slow.b.events:
        if event["name"].startswith("Torch-Compiled Region"):
            event["name"] = "Torch-Compiled Region: 0/" + "9" * 5000
    known = slow.mean_step_us() - program(4, {1}).mean_step_us()
    check_first(findings_of(slow, tmp_path), "recompilation", known, "torch.compile")
