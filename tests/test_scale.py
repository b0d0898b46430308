"""Cache (hit, miss, invalidation, corruption, environment) and executor equivalence."""

from __future__ import annotations

import gzip
import os
import pickle
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.feather as feather
import pytest
from conftest import DATA, SAMPLES
from synth import TraceBuilder

from hta_lite import LoadOptions, TraceAnalysis
from hta_lite.load import cache as cache_mod
from hta_lite.missing_data import NO_STEPS
from hta_lite.tools.batch import CROSS_RANK_TABLES, SUMMARY_TABLES, summarize_folder
from hta_lite.tools.batch_findings import Reopened
from hta_lite.tools.batch_one_rank import TABLES as ONE_RANK


@pytest.fixture()
def folder(tmp_path):
    dst = tmp_path / "traces"
    shutil.copytree(SAMPLES / "two_ranks", dst)
    return dst


def entries(root):
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.exists() else []


def test_cache_hit_gives_identical_tables(folder, tmp_path):
    root = tmp_path / "cache"
    first = TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    assert len(entries(root)) == 2
    second = TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    for rank in first.ranks:
        for name in cache_mod.TABLES:
            pd.testing.assert_frame_equal(
                getattr(first.traces[rank], name), getattr(second.traces[rank], name)
            )
        assert first.traces[rank].health == second.traces[rank].health
        assert first.metadata(rank) == second.metadata(rank)
    pd.testing.assert_frame_equal(
        first.get_temporal_breakdown(visualize=False),
        second.get_temporal_breakdown(visualize=False),
    )
    # plain Parquet, readable without hta_lite
    assert feather.read_table(entries(root)[0] / "gpu.arrow").num_rows > 0


def test_reopen_reads_only_the_tables_used(folder, tmp_path):
    root = tmp_path / "cache"
    cold = TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    warm = TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    pd.testing.assert_frame_equal(
        cold.get_temporal_breakdown(visualize=False), warm.get_temporal_breakdown(visualize=False)
    )
    built = {name for name in cache_mod.TABLES if name in vars(warm.trace(0))}
    assert built == {"gpu"}
    # a worker hands back the entry's address, not the tables
    reopened = TraceAnalysis(trace_dir=folder, cache=root, parallel=False).trace(1)
    assert "gpu" not in vars(reopened) and len(pickle.dumps(reopened)) < 20_000
    # process pool: the same tables, mapped in this process
    pooled = TraceAnalysis(trace_dir=folder, cache=root, parallel=True, progress=False)
    for rank in cold.ranks:
        for name in cache_mod.TABLES:
            pd.testing.assert_frame_equal(
                getattr(cold.trace(rank), name), getattr(pooled.trace(rank), name)
            )


def test_workers_hand_parsed_ranks_back_through_the_cache(folder, tmp_path):
    serial = TraceAnalysis(trace_dir=folder, cache=False, parallel=False)
    pooled = TraceAnalysis(trace_dir=folder, cache=tmp_path / "c", parallel=True, progress=False)
    assert all("gpu" not in vars(pooled.trace(rank)) for rank in pooled.ranks)  # not sent
    for rank in serial.ranks:
        assert pooled.trace(rank).health == serial.trace(rank).health
        for name in cache_mod.TABLES:
            pd.testing.assert_frame_equal(
                getattr(serial.trace(rank), name), getattr(pooled.trace(rank), name)
            )


def test_entry_gone_before_first_use_parses_again(folder, tmp_path):
    root = tmp_path / "cache"
    cold = TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    warm = TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    shutil.rmtree(root)
    for name in cache_mod.TABLES:
        pd.testing.assert_frame_equal(getattr(cold.trace(0), name), getattr(warm.trace(0), name))
    assert len(entries(root)) == 1  # rewritten by the parse


def test_changed_file_is_never_served_stale(folder, tmp_path):
    root = tmp_path / "cache"
    TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    target = folder / "sampled_rank-1.json.gz"
    data = gzip.decompress(target.read_bytes()).replace(
        b'"ncclKernel_SendRecv', b'"ncclKernel_Renamed', 1
    )
    target.write_bytes(gzip.compress(data))
    reloaded = TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    assert (reloaded.gpu_events(1)["name"].astype(str).str.startswith("ncclKernel_Renamed")).any()
    assert len(entries(root)) == 3  # a new entry for the new content


def test_entries_made_under_other_kernel_type_rules_are_not_read(folder, tmp_path, monkeypatch):
    """Kernel types are computed at load and cached: an entry made before the rules changed
    (say, before custom all-reduce kernels became COMMUNICATION) would give stale types."""
    root = tmp_path / "cache"
    TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    monkeypatch.setattr(cache_mod, "RULES_KEY", "other rules")
    TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    assert len(entries(root)) == 4  # a new entry per file


def test_corrupt_or_foreign_entries_are_rebuilt(folder, tmp_path):
    root = tmp_path / "cache"
    TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    first, second = entries(root)
    (first / "gpu.arrow").write_bytes(b"not arrow")
    (second / "meta.json").write_bytes(b'{"version": 999}')
    again = TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    assert sorted(again.ranks) == [0, 1] and len(again.gpu_events(0)) == 602
    assert len(again.gpu_events(1)) > 0  # tables are read when first used: found bad now
    assert feather.read_table(first / "gpu.arrow").num_rows > 0  # rewritten


def test_cache_off_and_environment(folder, tmp_path, monkeypatch):
    root = tmp_path / "env-cache"
    monkeypatch.setenv("HTA_LITE_CACHE_DIR", str(root))
    TraceAnalysis(trace_dir=folder, parallel=False)
    assert len(entries(root)) == 2
    shutil.rmtree(root)
    monkeypatch.setenv("HTA_LITE_CACHE", "off")
    TraceAnalysis(trace_dir=folder, parallel=False)
    assert not root.exists()
    monkeypatch.delenv("HTA_LITE_CACHE")
    TraceAnalysis(trace_dir=folder, parallel=False, cache=False)
    assert not root.exists()


def test_read_only_cache_location_still_loads(folder, tmp_path):
    root = tmp_path / "ro"
    root.write_text("a file where the cache folder should be")
    assert TraceAnalysis(trace_dir=folder, cache=root, parallel=False).ranks == [0, 1]


def test_executors_agree(folder, tmp_path):
    serial = summarize_folder(folder, executor="serial", cache=tmp_path / "serial-cache")
    process = summarize_folder(folder, executor="process", cache=tmp_path / "process-cache")
    assert set(serial) == {*SUMMARY_TABLES, *CROSS_RANK_TABLES, *ONE_RANK}
    for name in serial:
        pd.testing.assert_frame_equal(serial[name], process[name])
    assert serial["temporal_breakdown"]["idle_time_pctg"].tolist() == [53.56, 54.72]
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            via_dask = summarize_folder(folder, executor=client, cache=tmp_path / "dask-cache")
    for name in serial:
        pd.testing.assert_frame_equal(serial[name], via_dask[name])


def test_summaries_match_full_analysis(folder):
    summary = summarize_folder(folder, executor="serial", cache=False)
    full = TraceAnalysis(trace_dir=folder, parallel=False, cache=False)
    pd.testing.assert_frame_equal(
        summary["temporal_breakdown"], full.get_temporal_breakdown(visualize=False)
    )
    pd.testing.assert_frame_equal(summary["step_breakdown"], full.get_step_breakdown())
    kernel_df = full.get_gpu_kernel_breakdown(visualize=False)[1]
    assert kernel_df["rank"].nunique() == 2  # each rank's kernels, in the analysis's order
    pd.testing.assert_frame_equal(summary["kernel_breakdown"], kernel_df)


def _small_gpu(tmp_path: Path) -> Path:
    """The H100 BERT sample with its GPU's memory written as 110 MB: its 101.3 MB allocated
    peak is 92 % of it (near capacity)."""
    import json

    source = next((SAMPLES / "h100_bert_small").glob("*.json.gz"))
    doc = json.loads(gzip.decompress(source.read_bytes()))
    doc["deviceProperties"][0]["totalGlobalMem"] = 110_000_000
    folder = tmp_path / "small_gpu"
    folder.mkdir()
    (folder / "rank-0.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize(
    ("where", "memory_kinds"),
    [("memory_ranks", {("memory_leak", 2)}), ("small_gpu", {("memory_near_capacity", 0)}),
     ("gloo_4ranks", set())],
)  # fmt: skip
def test_the_batch_gives_the_memory_views_and_findings(where, memory_kinds, tmp_path):
    """Each worker makes its rank's memory tables: the batch's peaks, leaks, memory per step
    and by operator are the analysis's, and its findings have the memory kinds (memory_ranks:
    rank 2 leaks 2,560 bytes a step, rank 3's peak is 5.4x the median rank's; a GPU whose
    stated memory the peak nearly fills); without memory events the tables are empty and say
    what to record, as the analysis's do."""
    folder = {"memory_ranks": DATA / "memory_ranks", "gloo_4ranks": SAMPLES / "gloo_4ranks",
              "small_gpu": None}[where] or _small_gpu(tmp_path)  # fmt: skip
    batch = summarize_folder(folder, executor="serial", cache=tmp_path / "cache")
    full = TraceAnalysis(trace_dir=folder, parallel=False, cache=False, progress=False)
    assert "memory_peaks" not in batch.absent and "memory_leaks" not in batch.absent
    pd.testing.assert_frame_equal(batch["memory_peaks"], full.get_memory_peaks())
    pd.testing.assert_frame_equal(batch["memory_leaks"], full.get_memory_leaks())
    # per step, each step's peak against the median rank's, set across the ranks by the driver
    pd.testing.assert_frame_equal(batch["memory_by_step"], full.get_memory_by_step())
    pd.testing.assert_frame_equal(batch["memory_by_operator"], full.get_memory_by_operator())
    assert batch["memory_peaks"].attrs.get("why") == full.get_memory_peaks().attrs.get("why")
    assert batch["memory_by_step"].attrs.get("why") == full.get_memory_by_step().attrs.get("why")
    found = batch["findings"]
    kinds = {(k, r) for k, r in zip(found["kind"], found["rank"]) if k.startswith("memory")}
    assert kinds == memory_kinds
    pd.testing.assert_frame_equal(found, full.get_findings())


@pytest.mark.parametrize(
    "where", [DATA / "host_bound" / "sync_in_loop_no_steps", SAMPLES / "sglang_decode"]
)
def test_the_batch_findings_of_a_folder_without_profiler_steps_are_the_analysis(where, tmp_path):
    """No ProfilerStep on any rank: each trace is one step, for the batch's findings as for
    get_findings() (the constructed sync in a loop, priced; an inference decode with none, and
    the caveat that the whole trace is one step). The batch used to give no findings there."""
    batch = summarize_folder(where, executor="serial", cache=tmp_path / "cache", progress=False)
    full = TraceAnalysis(trace_dir=where, parallel=False, cache=False, progress=False)
    assert full.get_profiler_steps() == []
    findings = full.get_findings()
    pd.testing.assert_frame_equal(batch["findings"], findings)
    assert batch["findings"].attrs["caveat"] == findings.attrs["caveat"]
    assert "The whole trace is one step" in findings.attrs["caveat"]
    if where.name == "sync_in_loop_no_steps":
        assert batch["findings"]["kind"].iat[0] == "sync_in_loop"
    # the per-step views say why they have no rows, as the analysis's (the batch's said nothing)
    for name, table in (("step_breakdown", full.get_step_breakdown(visualize=False)),
                        ("step_anomalies", full.get_step_anomalies())):  # fmt: skip
        assert batch[name].empty and table.empty
        assert batch[name].attrs["why"] == table.attrs["why"] == NO_STEPS, name


def test_folder_findings_are_the_analysis_findings(folder, tmp_path):
    """The batch's findings, from its partials and the ranks reopened from the cache, equal
    get_findings()'s (two_ranks: the host-bound GPU, exposed communication, a drained queue,
    rank 1's data loading, rank 1 as the straggler the report names); with the cache off, or
    findings=False, the table is empty and its note says why."""
    summary = summarize_folder(folder, executor="serial", cache=tmp_path / "cache")
    full = TraceAnalysis(trace_dir=folder, parallel=False, cache=False).get_findings()
    assert summary["findings"]["kind"].tolist() == [
        "host_bound",
        "exposed_communication",
        "queue_drained",
        "data_loading",
        "straggler",
    ]
    pd.testing.assert_frame_equal(summary["findings"], full)
    off = summarize_folder(folder, executor="serial", cache=False)["findings"]
    assert off.empty and "not computed with the cache off" in off.attrs["why"]
    skipped = summarize_folder(folder, executor="serial", cache=tmp_path / "cache",
                               findings=False)["findings"]  # fmt: skip
    assert skipped.empty and "findings=False" in skipped.attrs["why"]


def test_the_ranks_reopened_for_the_findings_are_kept_within_a_budget(folder, tmp_path,
                                                                     monkeypatch):  # fmt: skip
    """The findings read each rank for several kinds: with room for every rank's tables, each
    rank is reopened from the cache once; with none, only the rank read last is held and each
    kind reopens it again. The findings are the same either way."""
    opened, real, room = [], Reopened._reopen, Reopened.KEEP_BYTES
    monkeypatch.setattr(Reopened, "_reopen", lambda self, r: opened.append(r) or real(self, r))
    found, reopened = {}, {}
    for keep in (room, 0):
        monkeypatch.setattr(Reopened, "KEEP_BYTES", keep)
        opened.clear()
        found[keep] = summarize_folder(folder, executor="serial", cache=tmp_path / "cache")
        reopened[keep] = len(opened)
    assert reopened[room] == 2 and reopened[0] > 2 * 5
    pd.testing.assert_frame_equal(found[0]["findings"], found[room]["findings"])
    assert len(found[0]["findings"]) == 5


def test_cache_keeps_the_recently_used_within_its_cap(folder, tmp_path, monkeypatch):
    root = tmp_path / "cache"
    TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    listed = cache_mod.entries(root)
    assert len(listed) == 2 and all(size > 0 for _, size, _ in listed)
    older, newer = listed
    os.utime(older[0] / "meta.json", (1, 1))  # used long ago
    limit = max(older[1], newer[1]) + 1  # room for one entry only
    assert cache_mod.evict(root, limit) == older[1]
    assert [e[0] for e in cache_mod.entries(root)] == [newer[0]]
    monkeypatch.setenv("HTA_LITE_CACHE_MAX_GB", str(limit / 1e9))
    # a load keeps the entries it uses (its ranks read their tables from them later), even
    # above the cap ...
    again = TraceAnalysis(trace_dir=folder, cache=root, parallel=True, progress=False)
    assert cache_mod.usage(root)["entries"] == 2
    os.utime(cache_mod.entries(root)[0][0] / "meta.json", (1, 1))
    os.utime(cache_mod.entries(root)[1][0] / "meta.json", (2, 2))
    assert len(again.gpu_events(0)) == 602
    # ... and the next load evicts them to the cap
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(folder / "sampled_rank-0.json.gz", other / "rank-0.json.gz")
    os.utime(other / "rank-0.json.gz", (3, 3))  # another file: another key
    TraceAnalysis(trace_dir=other, cache=root, parallel=False)
    assert cache_mod.usage(root)["bytes"] <= limit and cache_mod.usage(root)["entries"] == 1


def test_cache_clear_and_info(folder, tmp_path, capsys):
    from hta_lite.views.cli import main

    root = tmp_path / "cache"
    TraceAnalysis(trace_dir=folder, cache=root, parallel=False)
    assert main(["cache", "info", "--dir", str(root)]) == 0
    assert "2 cached rank(s)" in capsys.readouterr().out
    assert main(["cache", "clear", "--dir", str(root)]) == 0
    assert cache_mod.usage(root)["entries"] == 0


def test_operator_table_of_a_64_rank_folder(tmp_path):
    """The operator summary is computed where each rank is loaded (here: a process pool over 64
    copies of one rank), and equals the full analysis of that rank."""
    from hta_lite.tools.synthetic import replicate_trace

    template = sorted((SAMPLES / "two_ranks").iterdir())[0]
    folder = replicate_trace(template, tmp_path / "r64", 64)
    summary = summarize_folder(folder, executor="process", cache=False)["operator_summary"]
    assert sorted(summary["rank"].unique()) == list(range(64))
    one = TraceAnalysis(trace_dir=folder, parallel=False, cache=False)
    expected = one.get_operator_summary(ranks=[5])
    got = summary[summary["rank"] == 5].drop(columns="rank").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected)
    per_rank = summary.groupby("rank")["device_self_sum(us)"].sum()
    assert per_rank.nunique() == 1  # identical copies, every GPU event counted once each


def _strictly_equal(parsed: pd.DataFrame, reopened: pd.DataFrame, where: str) -> None:
    pd.testing.assert_frame_equal(parsed, reopened, check_exact=True, obj=where)
    for name in parsed.columns:
        a, b = parsed[name], reopened[name]
        assert a.dtype == b.dtype, (where, name)
        if isinstance(a.dtype, pd.CategoricalDtype):
            assert a.cat.categories.dtype == b.cat.categories.dtype, (where, name)
            assert a.cat.codes.tolist() == b.cat.codes.tolist(), (where, name)


@pytest.mark.parametrize(
    "trace", ["two_ranks", "memory_leak", "amd_mi250", "gloo_4ranks", "h100_bert_small"]
)
def test_reopened_tables_are_the_parsed_ones_column_by_column(trace, tmp_path):
    """A reopened rank's tables (Arrow -> DataFrame) are exactly the tables a parse gives:
    dtypes, categories and their dtype, codes, nullable integers."""
    root = tmp_path / "cache"
    parsed = TraceAnalysis(trace_dir=SAMPLES / trace, cache=False, parallel=False)
    TraceAnalysis(trace_dir=SAMPLES / trace, cache=root, parallel=False)
    reopened = TraceAnalysis(trace_dir=SAMPLES / trace, cache=root, parallel=False)
    for rank in parsed.ranks:
        for name in cache_mod.TABLES:
            _strictly_equal(
                getattr(parsed.traces[rank], name),
                getattr(reopened.traces[rank], name),
                f"{trace} rank {rank} {name}",
            )


def test_a_dask_worker_that_dies_costs_its_file_only(tmp_path):
    """A worker killed while on one file (here it exits; in life, the memory limit): that file
    is a TraceReadError naming it, the others come back (with the process pool's behaviour)."""
    distributed = pytest.importorskip("dask.distributed")
    import dask
    from dask_jobs import die_on_poison

    from hta_lite.errors import TraceReadError
    from hta_lite.tools.batch_jobs import run_jobs

    jobs = [(str(tmp_path / name), None) for name in ("rank-0.json", "poison.json", "rank-2.json")]
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with (
            distributed.LocalCluster(
                n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            client.run(lambda: __import__("sys").path.insert(0, str(Path(__file__).parent)))
            results = run_jobs(die_on_poison, jobs, client, LoadOptions())
            # the nanny restarts the dead worker: closing the cluster during the restart races
            # in distributed's teardown ("can only join a started process")
            client.wait_for_workers(1, timeout=60)
    assert results[0] == ("rank-0.json", None) and results[2] == ("rank-2.json", None)
    error, tables = results[1]
    assert isinstance(error, TraceReadError) and tables is None
    assert error.path.endswith("poison.json") and "Dask worker" in error.problem


@pytest.mark.parametrize(
    "where",
    [SAMPLES / "gloo_pipeline", SAMPLES / "long_run_windows", DATA / "memory_ranks",
     SAMPLES / "gloo_4ranks"],
)  # fmt: skip
def test_the_batch_key_findings_and_health_are_the_analysis(where):
    """The batch's key findings (the slowest stage, a straggler and its cause, the anomalous
    steps and their period, the memory line with its leak and imbalance) and health table,
    from the workers' partials, are the analysis's, its MFU line too."""
    batch = summarize_folder(where, executor="serial", cache=False)
    full = TraceAnalysis(trace_dir=where, parallel=False, cache=False, progress=False)
    pd.testing.assert_frame_equal(batch["key_findings"], full.get_key_findings())
    pd.testing.assert_frame_equal(batch["health"], full.health())
    pd.testing.assert_frame_equal(batch["health_summary"], full.health_summary())
    pd.testing.assert_frame_equal(batch["annotation_timers"], full.get_annotation_timers())
    assert "key_findings" not in batch.absent and "mfu" not in batch.absent
    # the slowest stage (gloo_pipeline: rank 2) in both: the batch's table once named none
    stages = full.get_pipeline_stages(visualize=False)
    pd.testing.assert_frame_equal(batch["pipeline_stages"], stages)
    assert batch["pipeline_stages"].attrs == stages.attrs
    if where.name == "gloo_pipeline":
        assert stages.attrs["slow_stage"] == 2


def test_a_folder_of_gpu_and_cpu_only_ranks_gives_the_analysis_views(tmp_path):
    """A GPU rank (two_ranks' rank 0) beside a CPU-only one (gloo's rank 1): the batch's GPU
    views leave the CPU-only rank out and say so where the analysis does; health and key
    findings are the analysis's."""
    shutil.copy(SAMPLES / "two_ranks" / "sampled_rank-0.json.gz", tmp_path / "rank-0.json.gz")
    shutil.copy(SAMPLES / "gloo_4ranks" / "rank-1.json.gz", tmp_path / "rank-1.json.gz")
    batch = summarize_folder(tmp_path, executor="serial", cache=False, progress=False)
    full = TraceAnalysis(trace_dir=tmp_path, parallel=False, cache=False, progress=False)
    views = {
        "temporal_breakdown": full.get_temporal_breakdown(visualize=False),
        "gpu_idle_by_cause": full.get_gpu_idle_by_cause(),
        "idle_time_breakdown": full.get_idle_time_breakdown(visualize=False)[0],
        "kernel_breakdown": full.get_gpu_kernel_breakdown(visualize=False)[1],
    }
    for name, table in views.items():
        pd.testing.assert_frame_equal(batch[name], table, check_dtype=False, obj=name)
        assert batch[name].attrs.get("why") == table.attrs.get("why"), name
    assert (
        batch["temporal_breakdown"].attrs["why"] == "no GPU work in rank(s) [1] (CPU-only traces)"
    )
    pd.testing.assert_frame_equal(batch["health"], full.health())
    pd.testing.assert_frame_equal(batch["key_findings"], full.get_key_findings())


def _float32_rank(folder: Path, rank: int, n: int, kernel_us: int) -> None:
    """One ProfilerStep of a float32 n x n x n product on an H100 NVL (FP32 60, TF32 417.5
    TFLOP/s) whose kernel runs ``kernel_us``, inside module Net_0."""
    b = TraceBuilder(rank=rank, world_size=2)
    b.meta["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 NVL"}]
    b.step(1, 0, 10_000)
    b.cpu_op("nn.Module: Net_0", 5, 100, cat="python_function")
    b.cpu_op("aten::mm", 10, 50, **{"Input Dims": [[n, n], [n, n]], "Input type": ["float"] * 2})
    b.kernel("k", 100, kernel_us, launch_ts=20)
    b.write(folder / f"rank-{rank}.json")


def test_the_batch_operator_views_are_the_analysis_with_tf32_set_across_ranks(tmp_path):
    """Rank 0's float32 product runs at 220 TFLOP/s, above the FP32 peak: the device ran TF32,
    so rank 1's slow float32 product (21.5 TFLOP/s, under the FP32 peak on its own) is measured
    against TF32 too, in the batch (whose worker saw rank 1 alone) as in the analysis; the
    roofline, MFU, time by module, findings and key findings are the analysis's."""
    _float32_rank(tmp_path, 0, 8192, 5000)
    _float32_rank(tmp_path, 1, 1024, 100)
    batch = summarize_folder(tmp_path, executor="serial", cache=tmp_path / "cache", progress=False)
    full = TraceAnalysis(trace_dir=tmp_path, parallel=False, cache=False, progress=False)
    pd.testing.assert_frame_equal(batch["operator_roofline"], full.get_operator_roofline())
    pd.testing.assert_frame_equal(batch["mfu"], full.get_mfu())
    pd.testing.assert_frame_equal(batch["operator_modules"], full.get_operator_summary(by="module"))
    pd.testing.assert_frame_equal(batch["findings"], full.get_findings())
    pd.testing.assert_frame_equal(batch["key_findings"], full.get_key_findings())
    slow = batch["mfu"].set_index("rank").loc[1]
    assert batch["mfu_rows"].set_index("rank").loc[1, "precision"] == "fp32"  # rank 1 alone
    assert slow["precision"] == "tf32" and slow["peak_tflops"] == 417.5
    achieved = 2 * 1024**3 / 10_000e-6 / 1e12  # over the 10 ms step
    assert slow["mfu_pctg"] == round(100 * achieved / 417.5, 2)
    assert batch["operator_roofline"]["calls"].tolist() == [1, 1]


def test_the_batch_roofline_and_mfu_count_what_is_above_the_peak_as_the_analysis(tmp_path):
    """A float32 product of 8192^3 in 2 ms (550 TFLOP/s) beats even the H100 NVL's TF32 peak
    (417.5): the roofline counts its call above the roof in ``attrs["problems"]``, in the batch
    as in the analysis (the batch's had no problems); MFU's (none: the 10 ms step's 110 TFLOP/s
    are under the peak) are the analysis's too."""
    _float32_rank(tmp_path, 0, 8192, 2000)
    _float32_rank(tmp_path, 1, 1024, 100)
    batch = summarize_folder(tmp_path, executor="serial", cache=False, progress=False)
    full = TraceAnalysis(trace_dir=tmp_path, parallel=False, cache=False, progress=False)
    for name, table in (("operator_roofline", full.get_operator_roofline()),
                        ("mfu", full.get_mfu())):  # fmt: skip
        pd.testing.assert_frame_equal(batch[name], table)
        assert batch[name].attrs["problems"] == table.attrs["problems"], name
    above = batch["operator_roofline"].attrs["problems"]
    assert list(above.values()) == [1] and list(above)[0].startswith("above_roof:aten::mm")


def test_a_cpu_only_folder_has_no_top_kernels_in_either_route():
    """No GPU kernel: the batch's kernel table is the analysis's (typed, empty), and both
    routes say why there are no top kernels in the same words."""
    from hta_lite.views.batch_cli import batch_tables
    from hta_lite.views.summary import summary_tables

    batch = summarize_folder(DATA / "cpu_only", executor="serial", cache=False, progress=False)
    full = TraceAnalysis(trace_dir=DATA / "cpu_only", parallel=False, cache=False, progress=False)
    kernel_df = full.get_gpu_kernel_breakdown(visualize=False)[1]
    assert kernel_df.empty and kernel_df["rank"].dtype == "int64"
    pd.testing.assert_frame_equal(batch["kernel_breakdown"], kernel_df)
    said = batch_tables(batch)[1]["top_kernels"]
    assert said == summary_tables(full)[1]["top_kernels"]
    assert said.startswith("no GPU work in rank(s) [") and said.endswith("(CPU-only traces)")


def test_the_batch_of_some_ranks_is_the_analysis_of_those_ranks(tmp_path):
    """``ranks=`` (``hta-lite batch --ranks``): every view the batch prints, the cross-rank
    ones and the findings included, is the analysis's restricted to those ranks, as
    ``summarize --ranks``; a rank not in the folder is an error listing the folder's ranks."""
    from hta_lite.errors import RankNotFoundError
    from hta_lite.load.ranks import select_ranks
    from hta_lite.views.batch_cli import batch_tables
    from hta_lite.views.summary import summary_tables

    where = SAMPLES / "gloo_buckets"
    batch = summarize_folder(where, executor="serial", cache=tmp_path, progress=False, ranks=[3, 1])
    everyone = summary_tables(TraceAnalysis(where, parallel=False, cache=False, progress=False))[0]
    full = TraceAnalysis(trace_dir=where, parallel=False, cache=False, progress=False)
    full.traces = select_ranks(full.traces, [1, 3], where)  # as hta-lite summarize --ranks
    (printed, absent), (shown, why) = batch_tables(batch), summary_tables(full)
    assert set(printed) == set(shown) and absent == why
    for name, table in shown.items():
        pd.testing.assert_frame_equal(printed[name], table, check_dtype=False, obj=name)
    assert sorted(batch["health_summary"]["rank"]) == [1, 3]
    assert not printed["findings"].equals(everyone["findings"])  # the selection changed them
    with pytest.raises(RankNotFoundError, match=r"rank\(s\) \[9\] not in the folder; ranks: \[0,"):
        summarize_folder(where, executor="serial", cache=False, progress=False, ranks=[1, 9])
    with pytest.raises(RankNotFoundError, match=r"no rank asked for; ranks: \[0, 1, 2, 3\]"):
        summarize_folder(where, executor="serial", cache=False, progress=False, ranks=[])
