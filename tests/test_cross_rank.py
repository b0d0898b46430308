"""Cross-rank views: Megatron-style timers, per-step breakdown, stragglers and their causes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES
from synth import TraceBuilder, gpu_behind_cpu

from hta_lite import TraceAnalysis, plots
from hta_lite.tools.synthetic import make_straggler_folder

TEMPLATE = SAMPLES / "two_ranks" / "sampled_rank-0.json.gz"


def timer_folder(tmp_path, n_ranks=4, n_steps=3):
    """Rank r: forward-compute (10 + r) ms per step, written as an outer range with a nested repeat
    (must count once); optimizer 2 ms per step on ranks 0 and 1 only; a GPU range of 1 + r ms."""
    for r in range(n_ranks):
        b = TraceBuilder(rank=r, world_size=n_ranks)
        for step in range(n_steps + 1):  # the last step is left out, as in the reference
            base = step * 100_000
            b.step(step, base, 90_000)
            fwd = (10 + r) * 1000
            b.cpu_op("forward-compute", base + 100, fwd, cat="user_annotation")
            b.cpu_op(
                "forward-compute", base + 200, fwd // 2, cat="user_annotation"
            )  # nested repeat
            if r < 2:
                b.cpu_op("optimizer", base + 50_000, 2000, cat="user_annotation")
            b.kernel("gemm", base + 1000, 500, launch_ts=base + 150)
            b.events.append(
                {
                    "ph": "X",
                    "cat": "gpu_user_annotation",
                    "name": "forward-compute",
                    "pid": 0,
                    "tid": 7,
                    "ts": base + 1000,
                    "dur": (1 + r) * 1000,
                }
            )
        b.write(tmp_path / f"rank{r}.json")
    return TraceAnalysis(trace_dir=tmp_path, parallel=False)


def test_timers_per_rank_and_step(tmp_path):
    a = timer_folder(tmp_path)
    tidy = a.get_annotation_timers()
    fwd = tidy[tidy["name"] == "forward-compute"]
    assert sorted(fwd["step"].unique()) == [0, 1, 2]
    for r in range(4):
        assert fwd[fwd["rank"] == r]["elapsed_ms"].tolist() == [10.0 + r] * 3
    assert set(tidy[tidy["name"] == "optimizer"]["rank"]) == {0, 1}
    assert tidy[tidy["name"] == "ProfilerStep"]["elapsed_ms"].unique().tolist() == [90.0]


def test_log_options_and_normalizer(tmp_path):
    a = timer_folder(tmp_path)
    minmax = a.get_timers_across_ranks(log_option="minmax")
    assert minmax.loc["forward-compute", ["min_ms", "max_ms"]].tolist() == [
        30.0,
        39.0,
    ]  # 3 steps summed
    assert minmax.loc["forward-compute", ["fastest_rank", "slowest_rank"]].tolist() == [0, 3]
    assert minmax.loc["optimizer", ["min_ms", "max_ms"]].tolist() == [
        6.0,
        6.0,
    ]  # ranks 2, 3 left out
    per_step = a.get_timers_across_ranks(log_option="max", normalizer=3)
    assert per_step.loc["forward-compute", "max_ms"] == 13.0
    everyone = a.get_timers_across_ranks(log_option="all", normalizer=3)
    assert everyone.loc["forward-compute"].tolist() == [10.0, 11.0, 12.0, 13.0]
    assert np.isnan(everyone.loc["optimizer", 2])
    gpu = a.get_timers_across_ranks(source="gpu", normalizer=3)
    assert gpu.loc["forward-compute", ["min_ms", "max_ms"]].tolist() == [1.0, 4.0]


def test_megatron_text_format(tmp_path):
    a = timer_folder(tmp_path)
    text = a.timers_text(names=["forward-compute", "optimizer"], normalizer=3)
    assert text.splitlines() == [
        "(min, max) time across ranks (ms):",
        "    forward-compute ................................: (10.00, 13.00)",
        "    optimizer ......................................: (2.00, 2.00)",
    ]
    assert a.timers_text(names=["optimizer"], log_option="max", normalizer=3).splitlines() == [
        "max time across ranks (ms):",
        "    optimizer ......................................: 2.00",
    ]
    assert a.timers_text(names=["optimizer"], log_option="all", normalizer=3).splitlines() == [
        "times across ranks (ms):",
        "  optimizer:",
        "     rank  0: 2.00",
        "     rank  1: 2.00",
    ]
    tidy = a.get_annotation_timers()
    assert plots.plot_timer_heatmap(tidy).data[0].z.shape == (4, 3)
    assert len(plots.plot_timers_minmax(a.get_timers_across_ranks()).data) == 2


def test_step_breakdown_known(tmp_path):
    b = TraceBuilder()
    for step in (1, 2, 3):
        base = step * 1000
        b.step(step, base, 800)
        b.kernel("gemm", base + 100, 50, launch_ts=base + 10)
        b.kernel("ncclKernel_AllReduce", base + 120, 60, stream=20, launch_ts=base + 11)
    b.write(tmp_path / "rank0.json")
    df = TraceAnalysis(trace_dir=tmp_path).get_step_breakdown()
    assert df["step"].tolist() == [1, 2]
    row = df.iloc[0]
    assert (row["step_time"], row["gpu_span"], row["gpu_busy"], row["gpu_idle"]) == (800, 80, 80, 0)
    assert (
        row["compute"],
        row["communication"],
        row["comm_overlapped"],
        row["comp_comm_overlap_pctg"],
    ) == (50, 60, 30, 50.0)


def test_a_step_is_the_gpus_period_when_the_gpu_runs_behind_the_cpu(tmp_path):
    # each step's extent ends 2,500 µs later than the one before (3,520 / 6,020 / 8,520 /
    # 11,020 µs): the launch queue's depth, not the step; each step counts from the end of the
    # one before it, and the steps add up to the time they cover
    gpu_behind_cpu(tmp_path / "rank0.json")
    df = TraceAnalysis(trace_dir=tmp_path, cache=False).get_step_breakdown()
    assert df["step_time"].tolist() == [3520, 3500, 3500, 3500]
    assert df["cpu_time"].tolist() == [1000] * 4
    assert df["gpu_busy"].tolist() == [3500] * 4
    assert df["step_time"].sum() == 1000 + 4 * 3500 + 20 - 1000  # first start to last GPU end


CASES = [
    (8, "compute", 0),
    (8, "host", 1),
    (16, "compute", 2),
    (16, "host", 3),
    (8, "compute", 4),
    (8, "host", 5),
]


@pytest.mark.parametrize("n_ranks, cause, seed", CASES)
def test_injected_straggler_found_and_explained(tmp_path, n_ranks, cause, seed):
    straggler = (seed * 5 + 3) % n_ranks
    make_straggler_folder(TEMPLATE, tmp_path, n_ranks, straggler, cause, delay_us=30_000, seed=seed)
    a = TraceAnalysis(trace_dir=tmp_path, progress=False)
    report = a.get_straggler_report()
    assert report.stragglers == [straggler]
    assert report.causes.set_index("rank").loc[straggler, "cause"] == f"{cause}-bound"
    assert f"Rank {straggler} reaches its collectives" in report.texts[straggler]
    assert a.get_potential_stragglers(num_candidates=1) == [straggler]
    assert report.ranks.iloc[0]["rank"] == straggler


def test_sixty_four_ranks(tmp_path):
    make_straggler_folder(TEMPLATE, tmp_path, 64, 41, "compute", delay_us=30_000, seed=7)
    a = TraceAnalysis(trace_dir=tmp_path, progress=False)
    assert a.get_straggler_report().stragglers == [41]


def test_two_ranks_real_trace(two_ranks):
    report = two_ranks.get_straggler_report()
    assert sorted(report.ranks["rank"]) == [0, 1]
    assert report.collectives["skew_us"].min() == 0
    assert sorted(two_ranks.get_potential_stragglers()) == [0, 1]  # two ranks, two candidates
    assert "ProfilerStep" in two_ranks.timers_text()
    # stream 84 pairs calls that cannot be one collective (one rank's ends before the other's
    # starts: rank 0 has a call rank 1 lacks); left out, rank 1 is 3.4 ms late at the two
    # that remain: each rank is compared with the others (the median of both never flags one)
    instances = two_ranks.get_collectives().instances.set_index("instance")
    assert instances["ordered"].tolist() == [True, False, False, True, False]
    assert report.stragglers == [1]
    assert report.ranks.set_index("rank").loc[1, "wait_caused_us"] == 3386.0  # was 167,577
    strict = two_ranks.get_straggler_report(min_step_pctg=5.0)
    assert strict.stragglers == []
    text = str(strict)
    assert text.startswith("No straggler: the latest rank, 1, arrives 3,386 µs per step")
    assert "0.6 % of the 607,608 µs step" in text and "at least 5 % of the step" in text


def test_straggler_rule_compares_each_rank_with_the_others():
    from hta_lite.analyses.stragglers import find_stragglers

    def found(lateness, step_us=1000.0, **rule):
        table = pd.DataFrame({"rank": range(len(lateness)), "lateness_us": lateness})
        return find_stragglers(table, step_us, **rule)

    assert found([0.0, 300.0]) == [1]  # one of two
    assert found([0.0, 4.0]) == []  # 0.4 % of the step: jitter
    assert found([0.0, 30.0], min_step_pctg=5.0) == []
    assert found([0.0, 30.0]) == [1]
    assert found([10.0, 20.0, 400.0, 15.0]) == [2]
    assert found([0.0, 0.0, 0.0, 400.0, 400.0, 0.0, 0.0, 0.0]) == [3, 4]  # two of eight
    assert found([100.0, 300.0, 300.0, 300.0]) == []  # most ranks late: none is the straggler
    assert found([0.0, 300.0], step_us=float("nan")) == [1]  # step unknown: the factor alone
    assert found([200.0]) == []


def test_recorded_gloo_run_timers_and_straggler():
    """A real 4-process gloo run (sample_traces/gloo_4ranks/record.py): rank 2 sleeps 20 ms in
    data-loading each step; the others wait for it inside their gradient all-reduce."""
    a = TraceAnalysis(trace_dir=SAMPLES / "gloo_4ranks", parallel=False)
    assert a.ranks == [0, 1, 2, 3]
    table = a.get_timers_across_ranks(names=["data-loading", "backward-compute"], normalizer=3)
    assert (
        table.loc["data-loading", "slowest_rank"] == 2 and table.loc["data-loading", "max_ms"] > 20
    )
    assert table.loc["backward-compute", "fastest_rank"] == 2  # the others wait in all-reduce
    line = a.timers_text(names=["data-loading"], normalizer=3).splitlines()[1]
    assert line.startswith("    data-loading ...................................: (")
    report = a.get_straggler_report()
    assert report.stragglers == [2]
    row = report.causes.iloc[0]
    assert (row["cause"], row["region"]) == ("host-bound", "data-loading")
