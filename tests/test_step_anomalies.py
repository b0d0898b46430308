"""Long runs (issue #39): the anomalous steps of a recorded run, and only they, with the injected
component as the cause, the stalling rank as the origin, and the period of the stall; against the
step times measured live beside the traces. Constructed edge cases: no anomaly, a drifting run,
one step, steps missing on a rank."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.errors import SelectionError

LONG_RUN = SAMPLES / "long_run"
STALLS, SPIKE = [7, 17, 27, 37], 23  # sample_traces/long_run/record.py


@pytest.fixture(scope="module")
def run():
    return TraceAnalysis(LONG_RUN, parallel=False, cache=False, progress=False)


def test_trace_step_times_are_the_live_ones(run):
    live = pd.read_csv(LONG_RUN / "live_step_times.csv")
    scored = run.get_step_anomalies().set_index(["rank", "step"])["step_time"]
    joined = live.join(scored, on=["rank", "step"], how="inner")
    assert len(joined) == 80  # steps 2..41 of both ranks (the last, 42, dropped as in HTA)
    gap_ms = joined["step_time"] / 1e3 - joined["seconds"] * 1e3
    assert gap_ms.between(0, 0.1).all()  # the ProfilerStep holds the loop body and prof.step()


def test_only_the_injected_steps_are_flagged_with_their_cause_and_origin(run):
    scored = run.get_step_anomalies()
    flagged = scored[scored["anomalous"]].set_index(["rank", "step"])
    assert sorted(flagged.index) == sorted((r, s) for r in (0, 1) for s in [*STALLS, SPIKE])
    for step in STALLS:  # rank 1 stalls in data-loading; rank 0 waits in the all_reduce
        assert flagged.loc[(1, step), "cause"] == "data-loading"
        assert flagged.loc[(0, step), "cause"] == "gloo:all_reduce"
        assert flagged.loc[(0, step), "origin_rank"] == flagged.loc[(1, step), "origin_rank"] == 1
        assert 24_000 < flagged.loc[(1, step), "cause_excess(us)"] < 27_000  # the 25 ms sleep
    assert flagged.loc[(0, SPIKE), "cause"] == "forward"  # rank 0's extra matmuls
    assert flagged.loc[(1, SPIKE), "cause"] == "gloo:all_reduce"  # rank 1 waits for them
    assert flagged.loc[(0, SPIKE), "grew_most"].startswith("forward +26.")
    assert "aten::matmul +16." in flagged.loc[(0, SPIKE), "grew_most"]
    assert (
        flagged.loc[(1, SPIKE), "origin_rank"] == 0 and flagged.loc[(0, SPIKE), "origin_rank"] == 0
    )
    assert (scored.loc[~scored["anomalous"], "origin_rank"] == -1).all()
    assert set(scored["baseline"]) == {"median"}


def test_the_stall_period_and_phase(run):
    periods = run.get_step_periodicity()
    assert periods[["rank", "period", "phase", "occurrences", "slots"]].values.tolist() == [
        [0, 10, 7, 4, 4], [1, 10, 7, 4, 4],
    ]  # fmt: skip
    assert periods.set_index("rank").loc[1, "cause"] == "data-loading"


def test_job_steps_name_the_rank_that_caused_each(run):
    job = run.get_job_step_anomalies()
    odd = job[job["anomalous"]].set_index("step")
    assert sorted(odd.index) == sorted([*STALLS, SPIKE])
    assert odd.loc[STALLS, "origin_rank"].tolist() == [1] * 4
    assert set(odd.loc[STALLS, "cause"]) == {"data-loading"}
    assert odd.loc[SPIKE, "origin_rank"] == 0 and odd.loc[SPIKE, "cause"] == "forward"


def test_compare_steps(run):
    table = run.compare_steps(22, SPIKE, ranks=[0])
    assert table.loc["aten::tanh", "diff_counts"] == 40  # the spike's 40 extra tanh(x @ x)
    assert table.loc["forward", "diff_duration"] > 20_000
    with pytest.raises(SelectionError):
        run.compare_steps(22, 999)


# ---- constructed runs ---------------------------------------------------------------------------
def steps_trace(tmp_path, durations_us, rank=0, name="t"):
    """Back-to-back ProfilerSteps of the given durations, each holding one ``work`` annotation
    of its duration minus 100 µs; one extra last step (dropped as in HTA)."""
    b = TraceBuilder(rank=rank, world_size=2)
    ts = 0
    for i, dur in enumerate([*durations_us, 1000]):
        b.step(i, ts, dur)
        b.cpu_op("work", ts + 50, dur - 100, cat="user_annotation")
        ts += dur
    return b.write(tmp_path / name / f"rank-{rank}.json").parent


def open_(folder):
    return TraceAnalysis(folder, parallel=False, cache=False, progress=False)


def jitter(n, seed=0):
    return (1000 + np.random.default_rng(seed).normal(0, 20, n)).round().astype(int).tolist()


def test_a_regular_run_flags_nothing(tmp_path):
    a = open_(steps_trace(tmp_path, jitter(50)))
    assert not a.get_step_anomalies()["anomalous"].any()
    assert a.get_step_periodicity().empty


def test_a_drifting_run_needs_the_rolling_baseline(tmp_path):
    drift = [int(1000 + 40 * i) for i in range(60)]  # 1 ms growing to 3.4 ms
    drift[30] += 2500  # and one real spike, hidden in the spread the drift gives the median
    a = open_(steps_trace(tmp_path, drift))
    assert not a.get_step_anomalies()["anomalous"].any()
    rolling = a.get_step_anomalies(baseline="rolling")
    assert rolling.loc[rolling["anomalous"], "step"].tolist() == [30]
    assert rolling.loc[rolling["anomalous"], "cause"].tolist() == ["work"]


def test_one_step_and_a_step_missing_on_a_rank(tmp_path):
    single = open_(steps_trace(tmp_path, [1000], name="one"))
    assert (
        len(single.get_step_anomalies()) == 1 and not single.get_step_anomalies()["anomalous"].any()
    )
    durations = jitter(30, seed=1)
    durations[12] = 5000
    steps_trace(tmp_path, durations, rank=0, name="two")
    b = TraceBuilder(rank=1, world_size=2)  # rank 1 has steps 0..19 only
    ts = 0
    for i, dur in enumerate(jitter(20, seed=2) + [1000]):
        b.step(i, ts, dur)
        ts += dur
    b.write(tmp_path / "two" / "rank-1.json")
    two = open_(tmp_path / "two")
    scored = two.get_step_anomalies()
    assert scored.groupby("rank")["step"].max().to_dict() == {0: 29, 1: 19}
    assert scored.loc[scored["anomalous"], ["rank", "step"]].values.tolist() == [[0, 12]]
    assert two.get_job_step_anomalies().set_index("step").loc[12, "origin_rank"] == 0


def test_cli_steps(capsys):
    from hta_lite.views.cli import main

    assert main(["steps", str(LONG_RUN), "--serial", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "every 10 steps, at step % 10 == 7" in out and "data-loading" in out


def test_the_key_finding(run):
    findings = run.get_key_findings().set_index("kind")
    line = findings.loc["step_anomalies", "finding"]
    assert line.startswith("10 of 80 steps (rank x step) are anomalous")
    assert "rank 1 every 10 steps (step % 10 == 7), data-loading" in line
    assert findings.index[0] == "step_anomalies"  # 44 % of all step time: first


def test_the_partials_route_equals_the_in_memory_one(run):
    """The batch summary scores each rank where it is loaded and sets the origins in the driver
    from the matched collectives: the same answers."""
    from hta_lite import summarize_folder

    summary = summarize_folder(LONG_RUN, executor="serial", cache=False)
    columns = ["rank", "step", "step_time", "typical", "score", "anomalous", "cause",
               "cause_excess(us)", "grew_most", "origin_rank"]  # fmt: skip
    pd.testing.assert_frame_equal(
        summary["step_anomalies"][columns].reset_index(drop=True),
        run.get_step_anomalies()[columns].reset_index(drop=True),
        check_dtype=False,
    )
    pd.testing.assert_frame_equal(summary["step_periodicity"], run.get_step_periodicity())
    pd.testing.assert_frame_equal(
        summary["job_step_anomalies"], run.get_job_step_anomalies(), check_dtype=False
    )


def test_a_step_longer_outside_every_annotation_says_so(tmp_path):
    """Step 20 takes 5 ms more, none of it in its annotation (host code no event records):
    the cause is that, by the 5 ms, not the annotation that shrank least."""
    b = TraceBuilder(rank=0, world_size=1)
    ts = 0
    for i in range(40):
        dur = 6000 if i == 20 else 1000
        b.step(i, ts, dur)
        b.cpu_op("work", ts + 50, 900 - (i % 3), cat="user_annotation")
        ts += dur
    table = open_(b.write(tmp_path / "t" / "rank-0.json").parent).get_step_anomalies()
    odd = table[table["anomalous"]]
    assert odd["step"].tolist() == [20]
    assert odd["cause"].tolist() == ["host code outside any annotation"]
    assert odd["cause_excess(us)"].iloc[0] == pytest.approx(5000, abs=1)


def test_a_profiler_step_out_of_number_order_is_dropped_and_counted(tmp_path):
    """A damaged ts (0) puts ProfilerStep#23 of the recorded long_run before step 2: it is
    dropped (health says so), its events are in no step, and no anomaly is made of it."""
    import gzip
    import json

    doc = json.loads(gzip.decompress((SAMPLES / "long_run" / "rank-1.json.gz").read_bytes()))
    step = next(e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#23")
    step["ts"] = 0
    (tmp_path / "rank-1.json").write_text(json.dumps(doc))
    a = open_(tmp_path)
    health = a.health().set_index("code")
    assert health.loc["profiler_step_out_of_order", "count"] == 1
    steps = a.get_step_anomalies()
    assert 23 not in steps["step"].tolist() and len(steps) == 39
    assert (steps.loc[steps["anomalous"], "cause"] == "data-loading").all()
