"""The Nsight Systems reader (hta_lite/load/readers/nsys.py) on real exports: every shared
export loads, its numbers equal an independent computation straight from the SQLite, kernels
link to their launching calls, NVTX ranges are annotations; constructed exports for what no real
one has (several processes, no kernels, hostile values)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, SAMPLES, SHARED

from hta_lite import TraceAnalysis
from hta_lite.errors import SelectionError, TraceFormatError
from hta_lite.kineto import COMMUNICATION_KERNEL, SYNC_OF_CALL
from hta_lite.load import contract, readers
from hta_lite.load.rank_trace import RankTrace, parse_parts
from hta_lite.tools.batch import summarize_folder

VENDORED = sorted((DATA / "nsys").glob("*.sqlite.gz"))
SHARED_EXPORTS = sorted((SHARED / "nsys").glob("*/report.sqlite"))
EXPORTS = [*VENDORED, *SHARED_EXPORTS]


def _gunzipped(source: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / source.name.removesuffix(".gz")
    with gzip.open(source) as f, open(out, "wb") as g:
        shutil.copyfileobj(f, g)
    return out


@pytest.fixture(params=VENDORED, ids=lambda p: p.name)
def export(request, tmp_path) -> Path:
    return _gunzipped(request.param, tmp_path / "export")


def _intervals(con, table: str, where: str = "") -> np.ndarray:
    try:
        rows = con.execute(f"SELECT start, end FROM {table} {where}").fetchall()
    except sqlite3.OperationalError:  # nsys creates tables lazily
        rows = []
    return np.array(rows, np.int64).reshape(-1, 2)


def _union(iv: np.ndarray) -> int:
    if not len(iv):
        return 0
    iv = iv[np.argsort(iv[:, 0])]
    ends = np.maximum.accumulate(iv[:, 1])
    new = np.append(True, iv[1:, 0] > ends[:-1])
    return int((np.maximum.reduceat(iv[:, 1], np.flatnonzero(new)) - iv[new, 0]).sum())


def independent_breakdown(path: Path) -> tuple[float, float, int]:
    """(idle %, compute %, kernels) straight from the SQLite: busy = union of kernel, copy and
    set intervals over the span from the first start to the last end; compute = the union of
    kernels that are not NCCL's."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = dict(con.execute("SELECT id, value FROM StringIds").fetchall())
    kernels = con.execute(
        "SELECT start, end, demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ).fetchall()
    copies = [_intervals(con, f"CUPTI_ACTIVITY_KIND_{kind}") for kind in ("MEMCPY", "MEMSET")]
    work = np.vstack([np.array([(s, e) for s, e, _ in kernels], np.int64).reshape(-1, 2), *copies])
    compute = [(s, e) for s, e, n in kernels if not COMMUNICATION_KERNEL.search(names[n])]
    compute = np.array(compute, np.int64).reshape(-1, 2)
    span = int(work[:, 1].max() - work[:, 0].min())
    busy = _union(work)
    con.close()
    return 100 * (span - busy) / span, 100 * _union(compute) / span, len(kernels)


@pytest.mark.parametrize("path", SHARED_EXPORTS, ids=lambda p: p.parent.name)
def test_every_shared_export_gives_the_numbers_of_its_sqlite(path):
    idle, compute, kernels = independent_breakdown(path)
    analysis = TraceAnalysis(trace_files={0: path}, cache=False, progress=False)
    row = analysis.get_temporal_breakdown().iloc[0]
    assert abs(row["idle_time_pctg"] - idle) < 0.1 and abs(row["compute_time_pctg"] - compute) < 0.1
    gpu = analysis.trace(0).gpu
    assert int((gpu["cat"] == "kernel").sum()) == kernels
    assert (gpu["launch_row"] >= 0).all()  # every kernel, copy and set has its launching call


def _sync_names_by_call(trace) -> dict:
    """{(the host call, the sync record's name): how many} of a trace's sync records."""
    syncs = trace.gpu[trace.gpu["cat"] == "cuda_sync"]
    calls = trace.cpu["name"].astype(str).to_numpy()[syncs["launch_row"].to_numpy()]
    return dict(Counter(zip(calls.tolist(), syncs["name"].astype(str).tolist())))


@pytest.mark.parametrize("path", SHARED_EXPORTS, ids=lambda p: p.parent.name)
def test_every_shared_exports_syncs_are_named_after_their_calls(path):
    """The exports' syncType codes do not follow their own enum table (nsys 2025.1 writes 2,
    "stream wait" there, for each cudaStreamSynchronize; 2024.5 writes 1, "event sync", for
    each cudaDeviceSynchronize): each record is named after its call, as Kineto names them."""
    trace = TraceAnalysis(trace_files={0: path}, cache=False, progress=False).trace(0)
    pairs = _sync_names_by_call(trace)
    assert all(SYNC_OF_CALL[call] == name for call, name in pairs)
    expected = {
        "cs336_a100": {("cudaStreamSynchronize", "Stream Sync"): 112,
                       ("cudaDeviceSynchronize", "Context Sync"): 3,
                       ("cudaEventQuery", "Event Sync"): 1},
        "pipit_cloverleaf": {("cudaDeviceSynchronize", "Context Sync"): 1312},
        "pipit_saxpy_mpi": {},
    }  # fmt: skip
    if path.parent.name in expected:
        assert pairs == expected[path.parent.name]


def test_a_stream_synchronize_coded_as_a_stream_wait_is_a_stream_sync(tmp_path):
    """nvfuser_h200 (nsys 2024.6): its one record, code 2 (the enum's stream wait), is the
    cudaStreamSynchronize's."""
    path = _gunzipped(DATA / "nsys" / "nvfuser_h200.sqlite.gz", tmp_path)
    con = sqlite3.connect(path)
    assert con.execute("SELECT syncType FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION").fetchall() == [
        (2,)
    ]
    con.close()
    trace = parse_parts(path)[0]
    assert _sync_names_by_call(trace) == {("cudaStreamSynchronize", "Stream Sync"): 1}


def test_a_sync_record_without_its_call_keeps_its_codes_name():
    """No runtime row, or none with the record's correlation id: the code names it (the
    enum's); an unnamed call is no call."""
    from hta_lite.load.readers import nsys_tables as nt

    class Records:
        def ints(self, table, columns):  # one record: code 2, correlation 5, process 1
            return np.array([[10, 20, 0, 7, 5, 1 << 24, 2, 0]], np.int64)

    def calls(names, codes, correlation):
        return {"name": pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype="str")),
                "global_tid": np.full(len(codes), 1 << 24, np.int64),
                "correlation": np.asarray(correlation, np.int64)}  # fmt: skip

    none = calls([], np.zeros(0, np.int64), [])
    assert list(nt.syncs(Records(), none)["name"]) == ["Stream Wait Event"]
    other = calls(["cudaStreamSynchronize"], np.array([-1, 0]), [5, 6])
    assert list(nt.syncs(Records(), other)["name"]) == ["Stream Wait Event"]
    mine = calls(["cudaStreamSynchronize"], np.array([-1, 0]), [4, 5])
    assert list(nt.syncs(Records(), mine)["name"]) == ["Stream Sync"]


def test_vendored_export_numbers_and_contract(export):
    idle, compute, kernels = independent_breakdown(export)
    analysis = TraceAnalysis(trace_dir=export.parent, cache=False, progress=False)
    assert analysis.ranks == [0]
    row = analysis.get_temporal_breakdown().iloc[0]
    assert abs(row["idle_time_pctg"] - idle) < 0.1 and abs(row["compute_time_pctg"] - compute) < 0.1
    trace = analysis.trace(0)
    assert int((trace.gpu["cat"] == "kernel").sum()) == kernels
    assert trace.source_format == "nsys" and trace.meta.devices[0].name.startswith("NVIDIA")
    for read in readers.read(export):
        assert [p for n, t in read.tables.items() for p in contract.problems(n, t, "reader")] == []
    assert [p for n in RankTrace.TABLES for p in contract.problems(n, getattr(trace, n))] == []


def test_nvtx_ranges_are_annotations(export):
    con = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    ranges = con.execute(
        "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND end >= start"
    ).fetchone()[0]
    con.close()
    cpu = parse_parts(export)[0].cpu
    annotations = cpu[cpu["cat"] == "user_annotation"]
    assert len(annotations) == ranges > 0
    assert annotations["name"].notna().all()


def test_runtime_names_lose_their_version_and_backtraces_are_left_out(tmp_path):
    path = _gunzipped(DATA / "nsys" / "pipit_saxpy_mpi.sqlite.gz", tmp_path)
    trace = parse_parts(path)[0]
    runtime = trace.cpu[trace.cpu["cat"].isin(["cuda_runtime", "cuda_driver"])]
    assert "cudaLaunchKernel" in set(runtime["name"]) and not runtime["name"].str.contains(
        r"_v\d+$").any()  # fmt: skip
    assert trace.health["nsys_runtime_rows_skipped"] == 38
    assert runtime["correlation"].is_unique


def _copy_of(tmp_path: Path, name: str = "nvfuser_h200.sqlite.gz") -> Path:
    return _gunzipped(DATA / "nsys" / name, tmp_path / "built")


def test_two_processes_are_two_ranks(tmp_path):
    """Every kernel, call and range of the file copied under another process id (pid + 1):
    two ranks in process order, each the original, said in health."""
    path = _copy_of(tmp_path)
    con = sqlite3.connect(path)
    shift = 1 << 24
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in tables:
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        column = next((c for c in ("globalPid", "globalTid") if c in cols), None)
        if column is None or not table.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS")):
            continue
        shifted = ", ".join(f"{c} + {shift}" if c == column else c for c in cols)
        con.execute(f"INSERT INTO {table} SELECT {shifted} FROM {table}")
    con.commit()
    con.close()
    analysis = TraceAnalysis(trace_files=None, trace_dir=path.parent, cache=False, progress=False)
    assert analysis.ranks == [0, 1]
    one, two = analysis.trace(0), analysis.trace(1)
    assert len(one.gpu) == len(two.gpu) and len(one.cpu) == len(two.cpu)
    assert (two.cpu["pid"] == one.cpu["pid"] + 1).all()
    assert (two.gpu["launch_row"] >= 0).all()
    assert one.health["rank_by_process_order"] == 1
    batch = summarize_folder(path.parent, executor="serial", cache=tmp_path / "cache")
    pd.testing.assert_frame_equal(batch["temporal_breakdown"], analysis.get_temporal_breakdown())
    assert len(batch["kernel_type_breakdown"].groupby("rank")) == 2


@pytest.mark.parametrize("recorded", [True, False], ids=["nccl_ranks", "no_payload"])
def test_the_ranks_of_an_export_of_two_processes(tmp_path, recorded):
    """One export holding two processes (rank 0 of the constructed job, and its copy under the
    next process id), whose NCCL communicator creations record ranks 1 and 0: the first process
    is rank 1. Without those payloads the processes' order gives the ranks, said in health."""
    path = _job(tmp_path / "job", ranks=1, payloads=True) / "rank0.sqlite"
    con = sqlite3.connect(path)
    tid = con.execute(
        "SELECT globalTid FROM NVTX_EVENTS WHERE text = 'ncclCommInitRank'"
    ).fetchone()[0]
    shift = 1 << 24
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        column = "globalPid" if "globalPid" in cols else "globalTid"
        shifted = ", ".join(f"{c} + {shift}" if c == column else c for c in cols)
        con.execute(f"INSERT INTO {table} SELECT {shifted} FROM {table}")
    for rank, thread in ((1, tid), (0, tid + shift)):
        init = _blob(101, struct.pack("<Qiii", COMM, 2, rank, 0) + bytes(4)) if recorded else None
        con.execute("UPDATE NVTX_EVENTS SET binaryData = ? WHERE text = 'ncclCommInitRank' AND"
                    " globalTid = ?", (init, thread))  # fmt: skip
    con.commit()
    con.close()
    analysis = TraceAnalysis(trace_dir=path.parent, cache=False, progress=False)
    assert analysis.ranks == [0, 1]
    first_pid = int(analysis.trace(1 if recorded else 0).cpu["pid"].iloc[0])
    assert first_pid == tid >> 24 & 0xFFFFFF
    item = "rank_from_nccl" if recorded else "rank_by_process_order"
    assert all(analysis.trace(r).health[item] == 1 for r in (0, 1))


def test_an_export_without_kernels_is_a_clear_error(tmp_path):
    path = _copy_of(tmp_path)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.close()
    with pytest.raises(TraceFormatError, match="export without CUDA kernels: record with `nsys"):
        TraceAnalysis(trace_dir=path.parent, cache=False, progress=False)


def test_hostile_values_are_dropped_and_counted(tmp_path):
    path = _copy_of(tmp_path)
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5 WHERE rowid = 1")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 999999999 WHERE rowid = 2")
    con.execute("UPDATE NVTX_EVENTS SET end = NULL WHERE rowid = 3")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'seven' WHERE rowid = 4")
    con.commit()
    con.close()
    trace = parse_parts(path)[0]
    assert (trace.gpu["stream"] == 0).sum() >= 1  # text in an integer column: cast, as SQLite does
    assert trace.health["nsys_time_out_of_range"] == 1
    assert trace.health["nsys_string_missing"] == 1
    assert trace.health["nvtx_range_without_end"] == 1


def test_an_export_whose_kernels_all_have_unusable_times_is_an_error(tmp_path):
    path = _copy_of(tmp_path)
    con = sqlite3.connect(path)
    for kind in ("KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION"):
        con.execute(f"UPDATE CUPTI_ACTIVITY_KIND_{kind} SET end = start - 1")
    con.commit()
    con.close()
    with pytest.raises(TraceFormatError, match="no rank in the file"):
        parse_parts(path)


def test_not_a_database_under_an_export_name(tmp_path):
    path = tmp_path / "report.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    with pytest.raises(TraceFormatError, match="report.sqlite"):
        parse_parts(path)


def test_steps_from_a_repeating_outermost_nvtx_range(tmp_path):
    """Three ``iteration`` ranges back to back around the captured work (the middle one 10 %
    longer), each holding a ``forward`` range, on the main thread: three steps (not the nested
    ranges), each kernel in the step its launch falls in."""
    path = _copy_of(tmp_path)
    con = sqlite3.connect(path)
    first, last, tid = con.execute(
        "SELECT min(start), max(end), globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        " GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1"
    ).fetchone()
    third = (last - first) // 3 + 1
    bounds = [(first, first + third), (first + third, first + 2 * third + third // 10),
              (first + 2 * third + third // 10, last + third)]  # fmt: skip
    con.execute("DELETE FROM NVTX_EVENTS")  # its own ranges straddle these made-up bounds
    for start, end in bounds:
        for name, at, to in (("iteration", start, end), ("forward", start + 10, end - 10)):
            con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)"
                        " VALUES (?, ?, 59, ?, ?)", (at, to, name, tid))  # fmt: skip
    con.commit()
    con.close()
    trace = parse_parts(path)[0]
    assert trace.steps["step"].tolist() == [0, 1, 2]
    assert trace.health["steps_from_range:iteration"] == 1
    assert (trace.steps["dur"].to_numpy() > 0).all()
    # the last step is dropped like the profiler's last step (include_last_profiler_step keeps it)
    assert set(trace.gpu["iteration"]) <= {0, 1}


def _loop_export(
    tmp_path: Path,
    iterations: int = 6,
    host_wait: bool = True,
    late_us: int | None = None,
    sync_records: bool = True,
) -> Path:
    """The vendored export's calls and GPU work replaced by a program known by construction:
    ten start-up kernels, then ``iterations`` of a 1,000 µs loop, each launching four layers of
    ``gemm`` and ``relu`` (50 µs each), a ``loss`` kernel and a device-to-host copy of it, then
    waiting in ``cudaStreamSynchronize`` until the copy is done (481 µs after the iteration
    starts); ``host_wait=False``: no copy and no wait (the layers repeat, no iteration does).
    ``late_us``: the host then works ``late_us`` µs more and launches an NCCL all_reduce (on
    stream 99, to 650 µs after the iteration starts, as every rank's does) before the copy, and
    its wait (``cudaDeviceSynchronize``) lasts to 651 µs. ``sync_records=False``: the capture
    holds the synchronizing call only (no synchronization record, no copy)."""
    path = _copy_of(tmp_path)
    con = sqlite3.connect(path)
    tables = ("RUNTIME", "KERNEL", "MEMCPY", "SYNCHRONIZATION")
    templates = {}  # a real row of each table, its columns by name
    for table in tables:
        cursor = con.execute(f"SELECT * FROM CUPTI_ACTIVITY_KIND_{table} LIMIT 1")
        templates[table] = dict(zip([d[0] for d in cursor.description], cursor.fetchone()))
        con.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_{table}")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_MEMSET")
    con.execute("DELETE FROM NVTX_EVENTS")
    names = ["cudaLaunchKernel_v7000", "cudaMemcpyAsync_v3020", "cudaStreamSynchronize_v3020",
             "gemm", "relu", "loss", *(f"init_{i}" for i in range(10)), NCCL_KERNEL,
             "cudaDeviceSynchronize_v3020"]  # fmt: skip
    ids = {name: 1000 + i for i, name in enumerate(names)}
    con.executemany(
        "INSERT INTO StringIds (id, value) VALUES (?, ?)", [(v, k) for k, v in ids.items()]
    )
    corr = iter(range(1, 10**6))

    def row(table, start_us, end_us, **changes):
        values = {**templates[table], "start": start_us * 1000, "end": end_us * 1000, **changes}
        columns = ", ".join(values)
        con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_{table} ({columns}) VALUES"
                    f" ({', '.join('?' * len(values))})", list(values.values()))  # fmt: skip

    def launch(name, at, gpu_at):
        c = next(corr)
        row("RUNTIME", at, at + 5, correlationId=c, nameId=ids["cudaLaunchKernel_v7000"],
            eventClass=0)  # fmt: skip
        row("KERNEL", gpu_at, gpu_at + 50, correlationId=c, shortName=ids[name],
            demangledName=ids[name], mangledName=ids[name])  # fmt: skip

    t0 = 700_000  # µs
    for i in range(10):
        launch(f"init_{i}", t0 + 100 * i, t0 + 100 * i + 10)
    for k in range(iterations):
        s = t0 + 2000 + 1000 * k
        for j, name in enumerate(["gemm", "relu"] * 4 + ["loss"]):
            launch(name, s + 10 * j, s + 20 + 50 * j)  # the kernels end at s + 470 µs
        late, until, sync = 0, 481, ("cudaStreamSynchronize_v3020", 3)
        if late_us is not None:
            late, until, sync = late_us, 651, ("cudaDeviceSynchronize_v3020", 4)
            c = next(corr)
            row("RUNTIME", s + 85 + late, s + 90 + late, correlationId=c, eventClass=0,
                nameId=ids["cudaLaunchKernel_v7000"])  # fmt: skip
            row(
                "KERNEL",
                s + 95 + late,
                s + 650,
                correlationId=c,
                streamId=99,
                **dict.fromkeys(("shortName", "demangledName", "mangledName"), ids[NCCL_KERNEL]),
            )
        if host_wait:
            c = next(corr)
            row("RUNTIME", s + 95 + late, s + 100 + late, correlationId=c, eventClass=0,
                nameId=ids["cudaMemcpyAsync_v3020"])  # fmt: skip
            if sync_records:
                row("MEMCPY", s + 470, s + 480, correlationId=c, copyKind=2, srcKind=2, dstKind=0)
            c = next(corr)
            row("RUNTIME", s + 100 + late, s + until, correlationId=c, eventClass=0,
                nameId=ids[sync[0]])  # fmt: skip
            if sync_records:
                row("SYNCHRONIZATION", s + 100 + late, s + until, correlationId=c,
                    syncType=sync[1])  # fmt: skip
    con.commit()
    con.close()
    return path


def test_steps_from_the_repeating_gpu_work_of_a_loop_without_ranges(tmp_path):
    """Six iterations of a 1,000 µs loop with a host wait each, after start-up, no NVTX range:
    the steps are whole iterations, from one host resume (481 µs after an iteration starts) to
    the next; the first iteration, whose start on the host is not known, is in none, nor is
    the start-up."""
    path = _loop_export(tmp_path)
    analysis = TraceAnalysis(trace_dir=path.parent, cache=False, progress=False)
    trace = analysis.trace(0)
    assert trace.health["steps_from_kernels:loss"] == 1
    steps = analysis.get_step_breakdown()
    assert steps["step"].tolist() == [1, 2, 3, 4, 5]  # none cut short: none left out
    assert steps["step_time"].tolist() == [1000.0] * 5
    assert steps["gpu_busy"].tolist() == [460.0] * 5  # nine kernels and the copy
    names = trace.gpu["name"].astype(str)
    in_steps = names[trace.gpu["iteration"] >= 0]
    assert not in_steps.str.startswith("init_").any() and (in_steps == "loss").sum() == 5
    began = trace.gpu.loc[names == "loss", "ts"].min() - 420_000  # its loss runs 420 µs in
    assert trace.steps["ts"].min() == began + 481_000  # where the host resumes
    caveat = analysis.get_findings().attrs.get("caveat", "")
    assert "repetitions of its GPU work" in caveat or analysis.get_findings().empty


def test_a_job_of_exports_without_ranges_finds_its_late_rank(tmp_path):
    """Two ranks of the loop, each iteration ending in an all_reduce that both finish together,
    rank 1 launching it 200 µs after rank 0: each rank's steps are its iterations, the same ones
    on both (1,000 µs), and the straggler report names rank 1, 200 µs late at each."""
    folder = tmp_path / "job"
    folder.mkdir()
    for rank, late in ((0, 0), (1, 200)):
        _loop_export(tmp_path / f"r{rank}", late_us=late).rename(folder / f"rank{rank}.sqlite")
    analysis = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    steps = analysis.get_step_breakdown()
    assert steps.groupby("rank")["step"].apply(list).tolist() == [list(range(1, 6))] * 2
    assert (steps["step_time"] == 1000.0).all()
    report = analysis.get_straggler_report()
    assert report.stragglers == [1]
    late = report.ranks.set_index("rank").loc[1, "lateness_us"]
    assert late == pytest.approx(200, rel=0.05)


def test_a_synchronizing_call_alone_is_a_host_wait(tmp_path):
    """The loop recorded without synchronization records or copies: its cudaStreamSynchronize
    calls still close the iterations."""
    trace = parse_parts(_loop_export(tmp_path, sync_records=False))[0]
    assert trace.health["steps_from_kernels:loss"] == 1 and len(trace.steps) == 5
    assert (np.diff(trace.steps["ts"].to_numpy()) == 1_000_000).all()
    assert (trace.steps["dur"] == 1_000_000).all()


def test_repeating_layers_without_a_host_wait_are_not_steps(tmp_path):
    """The same loop without the copy and the wait (a model's layers repeat too, with no host
    wait of their own): the capture stays one step."""
    trace = parse_parts(_loop_export(tmp_path, host_wait=False))[0]
    assert len(trace.steps) == 1 and trace.health["steps_whole_capture"] == 1


def test_start_up_outside_the_steps_is_said_to_be_outside_them(tmp_path):
    """pipit_saxpy_mpi: MPI_Init, the context's creation (cudaHostRegister) and MPI_Finalize
    come before and after the loop's steps: the warm-up finding says none of it is in them, and
    does not advise profiling after warm-up (the steps are not longer for it)."""
    from hta_lite.analyses.findings.warmup import OUTSIDE_ADVICE

    path = _gunzipped(DATA / "nsys" / "pipit_saxpy_mpi.sqlite.gz", tmp_path)
    row = TraceAnalysis(trace_dir=path.parent, cache=False).get_findings().set_index("kind")
    row = row.loc["warmup"]
    assert row["evidence"] == (
        "3 start-up call(s) on rank(s) 0 (MPI_Finalize, MPI_Init, cudaHostRegister) took"
        " 957.3 ms (outside the steps): warm-up outside the steps"
    )
    assert row["advice"] == OUTSIDE_ADVICE and row["saving_ms_per_step"] == 0


@pytest.mark.parametrize("name, pytorch", [("pipit_saxpy_mpi", False), ("nvfuser_h200", True)])
def test_advice_for_a_program_without_pytorch_says_the_cuda_fix(tmp_path, name, pytorch):
    """saxpy is C++ with MPI: the findings say their advice names PyTorch's calls and give the
    CUDA ones; nvFuser's test binary runs ATen kernels (at::native::): no such caveat."""
    path = _gunzipped(DATA / "nsys" / f"{name}.sqlite.gz", tmp_path)
    table = TraceAnalysis(trace_dir=path.parent, cache=False).get_findings()
    assert len(table)
    caveat = table.attrs.get("caveat", "")
    assert ("shows no PyTorch" in caveat and "cudaHostAlloc" in caveat) is not pytorch


def test_without_repeating_ranges_the_capture_is_one_step(export):
    trace = parse_parts(export)[0]
    if export.name.startswith("pipit_saxpy_mpi"):  # a loop: five copies in, saxpy, a copy out
        marked = "steps_from_kernels:saxpy(double *, double *, double *, double, int)"
        assert trace.health[marked] == 1 and len(trace.steps) == 4  # the first repetition: none
        return
    assert len(trace.steps) == 1 and trace.health["steps_whole_capture"] == 1
    assert (trace.gpu["iteration"] == 0).all()


def test_a_report_without_nsys_on_path_gets_the_export_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    (tmp_path / "rank0.nsys-rep").write_bytes(b"\x00" * 64)
    with pytest.raises(
        TraceFormatError,
        match="not on PATH: export it with `nsys export --type sqlite --include-blobs true"
        " --force-overwrite true --output rank0.sqlite rank0.nsys-rep`",
    ):
        TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)


def _fake_nsys(tmp_path: Path, monkeypatch, source: Path | None) -> Path:
    """An ``nsys`` on PATH that "exports" by copying ``source`` to its ``--output`` (None: fails
    as nsys does on a broken report); each call is logged to the returned file."""
    bin_dir, log = tmp_path / "bin", tmp_path / "nsys_calls.log"
    bin_dir.mkdir()
    script = bin_dir / "nsys"
    script.write_text(
        f"#!{sys.executable}\nimport shutil, sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        + (f"shutil.copy({str(source)!r}, sys.argv[sys.argv.index('--output') + 1])\n"
           if source else "sys.exit('Failed to open the report: corrupted file')\n")
    )  # fmt: skip
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_a_report_is_exported_with_nsys_once_into_the_cache(tmp_path, monkeypatch):
    """With nsys on PATH a report reads as its export: the same tables, the export's temporary
    folder removed, and with the cache on nsys runs once."""
    export = _copy_of(tmp_path)
    log = _fake_nsys(tmp_path, monkeypatch, export)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "rank0.nsys-rep").write_bytes(b"report")
    before = set(Path(tempfile.gettempdir()).glob("hta_lite_nsys_*"))
    options = dict(cache=tmp_path / "cache", progress=False, parallel=False)
    first = TraceAnalysis(trace_dir=reports, **options)
    again = TraceAnalysis(trace_dir=reports, **options)
    direct = TraceAnalysis(trace_dir=export.parent, cache=False, progress=False)
    pd.testing.assert_frame_equal(first.get_temporal_breakdown(), direct.get_temporal_breakdown())
    pd.testing.assert_frame_equal(again.get_temporal_breakdown(), direct.get_temporal_breakdown())
    assert len(log.read_text().splitlines()) == 1  # the second load came from the cache
    assert "export --type sqlite --include-blobs true" in log.read_text()
    assert first.trace(0).health["nsys_report_exported"] == 1
    assert set(Path(tempfile.gettempdir()).glob("hta_lite_nsys_*")) == before
    assert sorted(p.name for p in reports.iterdir()) == ["rank0.nsys-rep"]


def test_a_failed_export_is_a_clear_error(tmp_path, monkeypatch):
    _fake_nsys(tmp_path, monkeypatch, None)
    (tmp_path / "r.nsys-rep").write_bytes(b"broken")
    with pytest.raises(
        TraceFormatError,
        match=r"r.nsys-rep: `nsys export` failed \(Failed to"
        r" open the report: corrupted file\): run `nsys export",
    ):
        TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)


@pytest.mark.parametrize("source", EXPORTS, ids=lambda p: p.parent.name + "/" + p.name)
def test_page_arrow_and_sqlite3_paths_read_the_same_tables(source, tmp_path, monkeypatch):
    """The bulk columns are read from the file's pages by the C reader where built (it takes
    every table of a real export it is given), else through ADBC (Arrow) where installed, else
    Python's sqlite3: the same tables every way."""
    from hta_lite.load.readers import nsys_tables

    path = _gunzipped(source, tmp_path) if source.suffix == ".gz" else source
    if nsys_tables._sqlite_scan is not None:
        con = sqlite3.connect(path)
        db = nsys_tables.Export(con, path)
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):
            if db.has(table):
                assert db._scanned_ints(table, ["start", "end", "rowid"]) is not None, table
        db.close()
    paged = readers.read(path)
    monkeypatch.setattr(nsys_tables, "_sqlite_scan", None)
    arrow = readers.read(path)
    monkeypatch.setattr(nsys_tables, "_arrow_connection", lambda path: None)
    plain = readers.read(path)
    for a, b, c in zip(paged, arrow, plain):
        for table in a.tables:
            assert a.tables[table].equals(b.tables[table]), table
            assert a.tables[table].equals(c.tables[table]), table


def test_cli_report_and_critical_path_on_an_export(export, tmp_path, capsys):
    """Every view runs on an export: the CLI summary, the HTML report (whose critical path
    walks the capture as its one step), the findings."""
    from hta_lite.views.cli import main

    assert main(["summarize", str(export.parent), "--no-cache", "--serial"]) == 0
    assert "Temporal breakdown" in capsys.readouterr().out
    out = tmp_path / "report.html"
    assert main(["report", str(export.parent), "--no-cache", "-o", str(out)]) == 0
    assert out.stat().st_size > 0
    analysis = TraceAnalysis(trace_dir=export.parent, cache=False, progress=False)
    cp, ok = analysis.critical_path_analysis(0)
    assert ok and cp.length_us > 0


NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _job(
    folder: Path,
    late_ns: int = 5_000_000,
    steps: int = 5,
    ranks: int = 2,
    late_rank: int = 1,
    shift_ns: int = 0,
    payloads: bool = False,
    grouped: bool = False,
    as_json: bool = False,
) -> Path:
    """``ranks`` ranks from the vendored export: NVTX ``iteration`` ranges cut its capture into
    ``steps`` steps, each ending in an NCCL all_reduce on stream 99; ``late_rank`` launches each
    all_reduce ``late_ns`` after the others, and all finish it together (the others wait). Rank
    r's session starts ``r * shift_ns`` later (``TARGET_INFO_SESSION_START_TIME``), its times
    written that much earlier: the same moments in wall-clock time. ``payloads``: NCCL's NVTX
    ranges around each launch and the communicator's creation, with their payloads and schemas
    as ``nsys export --include-blobs=true`` writes them (:func:`_add_payload_schemas`);
    ``grouped``: each all_reduce issued as two of half the size in a group (nested in a second
    one), the kernel launched in the outermost ``ncclGroupEnd``; ``as_json``: the payloads as
    ``--include-json`` text instead (``jsonText``; the creation's through ``jsonTextId``)."""
    for rank in range(ranks):
        path = _gunzipped(DATA / "nsys" / "nvfuser_h200.sqlite.gz", folder)
        path = path.rename(folder / f"rank{rank}.sqlite")
        con = sqlite3.connect(path)
        tid, pid = con.execute(
            "SELECT globalTid, globalTid & ~16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME"
            " GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()
        first, last = con.execute(
            "SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        ).fetchone()
        name = con.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
        con.executemany("INSERT INTO StringIds VALUES (?, ?)",
                        [(name, NCCL_KERNEL), (name + 1, "cudaLaunchKernel_v7000")])  # fmt: skip
        con.execute("DELETE FROM NVTX_EVENTS")
        if payloads and as_json:
            init = json.dumps({"NCCL communicator ID": hex(COMM), "No. of ranks": ranks})
            con.execute("INSERT INTO StringIds VALUES (?, ?)", (name + 2, init))
            con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId,"
                        " jsonTextId) VALUES (?, ?, 59, 'ncclCommInitRank', ?, 1, ?)",
                        (first - 10_000, first - 5_000, tid, name + 2))  # fmt: skip
        elif payloads:
            _add_payload_schemas(con)
            init = _blob(101, struct.pack("<Qiii", COMM, ranks, rank, 0) + bytes(4))
            con.execute(*_nccl_range("ncclCommInitRank", first - 10_000, first - 5_000, tid, init))
        length = (last - first) // steps + 1
        for k in range(steps):
            begin = first + k * length
            con.execute(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)"
                " VALUES (?, ?, 59, 'iteration', ?)",
                (begin, begin + length, tid),
            )
            launch = begin + length // 2 + (late_ns if rank == late_rank else 0)
            end = begin + length // 2 + late_ns + 1_000_000  # both ranks end together
            if payloads and not grouped:
                blob = _blob(100, struct.pack("<QQi", COMM, MESSAGE, 0) + bytes(4))
                if as_json:  # nested, as a schema's name over its entries may be
                    blob = json.dumps({"AllReduce": {"NCCL communicator ID": COMM,
                                                     "Message size [bytes]": MESSAGE}})  # fmt: skip
                around = (launch - 2_000, launch + 8_000)
                con.execute(*_nccl_range("ncclAllReduce", *around, tid, blob))
            elif payloads:
                half = _blob(100, struct.pack("<QQi", COMM, MESSAGE // 2, 0) + bytes(4))
                for call, at, blob in (("ncclGroupStart", -9_000, None),
                                       ("ncclAllReduce", -8_000, half),
                                       ("ncclGroupStart", -7_000, None),
                                       ("ncclAllReduce", -6_000, half),
                                       ("ncclGroupEnd", -5_000, None)):  # fmt: skip
                    con.execute(*_nccl_range(call, launch + at, launch + at + 500, tid, blob))
                con.execute(*_nccl_range("ncclGroupEnd", launch - 2_000, launch + 8_000, tid, None))
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass,"
                " globalTid, correlationId, nameId, returnValue) VALUES (?,?,0,?,?,?,0)",
                (launch, launch + 5_000, tid, 90_000_000 + k, name + 1),
            )
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId,"
                        " streamId, correlationId, globalPid, demangledName, shortName,"
                        " registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ,"
                        " staticSharedMemory, dynamicSharedMemory, localMemoryPerThread,"
                        " localMemoryTotal, gridId) VALUES (?,?,0,1,99,?,?,?,?,32,1,1,1,256,1,1,"
                        "0,0,0,0,0)",
                        (launch + 10_000, end, 90_000_000 + k, pid, name, name))  # fmt: skip
        shift = rank * shift_ns
        con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + ?",
                    (shift,))  # fmt: skip
        for (table,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        ).fetchall():
            columns = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            if {"start", "end"} <= columns:
                con.execute(f"UPDATE {table} SET start = start - ?, end = end - ?", (shift, shift))
        con.commit()
        con.close()
    return folder


COMM, MESSAGE = 0x9E3779B97F4A7C15, 4 << 20  # a communicator hash (past int64), 4 MiB


def _add_payload_schemas(con: sqlite3.Connection) -> None:
    """NCCL's all_reduce and comm-init payload schemas (nccl src/include/nvtx_payload_schemas.h)
    in the tables of nsys 2026's export (columns as its schema dump declares them); the first
    entry's offset NULL, as exports write it, and the comm-init's ranks left to alignment."""
    con.execute("CREATE TABLE NVTX_PAYLOAD_SCHEMAS (domainId INTEGER, schemaId INTEGER, name TEXT,"
                " type INTEGER, flags INTEGER, numEntries INTEGER, payloadSize INTEGER,"
                " alignTo INTEGER)")  # fmt: skip
    con.execute("CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId INTEGER NOT NULL, schemaId"
                " INTEGER NOT NULL, idx INTEGER NOT NULL, flags INTEGER, type INTEGER, name TEXT,"
                " description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER)")  # fmt: skip
    con.executemany("INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (1, ?, ?, 1, 0, ?, 24, 0)",
                    [(100, "AllReduce", 3), (101, "CommInitRank", 4)])  # fmt: skip
    redop = (1 << 24) + 3  # NCCL's reduction-op enum schema: not an integer type, not read
    con.executemany(
        "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (1, ?, ?, 0, ?, ?, NULL, 0, ?)",
        [(100, 0, 18, "NCCL communicator ID", None), (100, 1, 22, "Message size [bytes]", 8),
         (100, 2, redop, "Reduction operation", 16), (101, 0, 18, "NCCL communicator ID", None),
         (101, 1, 5, "No. of ranks", None), (101, 2, 5, "Rank", 12),
         (101, 3, 5, "CUDA device", 16)],
    )  # fmt: skip


def _blob(schema: int, payload: bytes) -> bytes:
    """NVTX_EVENTS.binaryData: the 32-byte header (domain, schema, payload size, total), then
    the payload."""
    return struct.pack("<IIIIQQ", 1, 0, schema, 0, len(payload), 32 + len(payload)) + payload


def _nccl_range(name: str, start: int, end: int, tid: int, payload: bytes | str | None) -> tuple:
    column = "jsonText" if isinstance(payload, str) else "binaryData"
    return (
        f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId, {column})"
        " VALUES (?, ?, 59, ?, ?, 1, ?)",
        (start, end, name, tid, payload),
    )


@pytest.mark.parametrize("grouped, as_json", [(False, False), (True, False), (False, True)],
                         ids=["call", "group", "json"])  # fmt: skip
def test_nccl_payloads_give_the_calls_sizes_and_communicator(tmp_path, grouped, as_json):
    """Each all_reduce's size (4 MiB, from its NVTX payload: bytes, no dtype), its
    communicator (the same hash on both ranks: the process group the calls are matched in) and
    the communicator's size from its creation's payload; issued as a group of two calls of
    2 MiB (in nested groups), whose kernel the outermost ncclGroupEnd launches, or exported as
    JSON text, the same."""
    folder = _job(tmp_path / "job", payloads=True, grouped=grouped, as_json=as_json)
    analysis = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    calls = analysis.get_collectives().calls
    kept = calls[calls["step"] >= 0]
    assert len(kept) == 8 and (kept["in_bytes"] == MESSAGE).all()
    assert (kept["out_bytes"] == MESSAGE).all() and (kept["size_source"] == "nccl payload").all()
    assert set(kept["pg"]) == {f"NCCL comm {COMM:#018x}"}
    assert (kept["group_size"] == 2).all() and (kept["group_size_source"] == "nccl payload").all()
    assert len(set(kept["instance"])) == 4  # matched in that communicator
    assert set(kept["dtype"]) == {"float32"}  # the kernel's name: ..._Sum_f32_RING_LL
    instances = analysis.get_collectives().instances
    assert instances["busbw_gbps"].notna().any()
    assert "nccl_payloads_absent" not in analysis.trace(0).health


def test_a_schema_id_another_domain_reuses_is_not_nccls(tmp_path):
    """Schema ids are per NVTX domain: another library's schema 100 (a size at offset 0) beside
    NCCL's leaves NCCL's payloads read by NCCL's layout."""
    folder = _job(tmp_path / "job", payloads=True)
    for rank in (0, 1):
        with sqlite3.connect(folder / f"rank{rank}.sqlite") as con:
            con.execute("INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (2, 100, 'Other', 1, 0, 1, 8, 0)")
            con.execute("INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES"
                        " (2, 100, 0, 0, 22, 'Message size [bytes]', NULL, 0, NULL)")  # fmt: skip
    analysis = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    calls = analysis.get_collectives().calls
    assert (calls.loc[calls["step"] >= 0, "in_bytes"] == MESSAGE).all()
    assert "nccl_payload_unreadable" not in analysis.trace(0).health


def test_nccl_payloads_without_their_schemas_or_cut_short_are_said(tmp_path):
    folder = _job(tmp_path / "job", payloads=True)
    for rank, change in ((0, "DROP TABLE NVTX_PAYLOAD_SCHEMAS"),
                         (1, "UPDATE NVTX_EVENTS SET binaryData = substr(binaryData, 1, 40)"
                             " WHERE text = 'ncclAllReduce'")):  # fmt: skip
        with sqlite3.connect(folder / f"rank{rank}.sqlite") as con:
            con.execute(change)
    analysis = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    assert analysis.trace(0).health["nccl_payloads_absent"] == 1
    assert analysis.trace(1).health["nccl_payload_unreadable"] == 5
    calls = analysis.get_collectives().calls
    assert (calls["in_bytes"] == -1).all() and (calls["size_source"] == "").all()


def test_hostile_json_payloads_are_unreadable_or_ignored():
    """Not JSON, too long or too deeply nested: unreadable (counted by the reader); a negative,
    boolean or non-numeric size: no size; a value deeper than the lookup goes: not found."""
    from hta_lite.load.readers.nvtx_payloads import JSON_LIMIT, _from_json

    size = "Message size [bytes]"
    for doc in ("not json", "[" * 5000 + "]" * 5000, json.dumps({size: 1}) + " " * JSON_LIMIT, 7):
        assert _from_json(doc) is None
    for value in (-5, True, "lots", 1.5, 2**64):
        assert _from_json(json.dumps({size: value})) == {}
    found = _from_json(json.dumps({"NCCL communicator ID": "0x10", "a": [{size: "4096"}]}))
    assert found == {"comm": 16, "bytes": 4096}
    assert _from_json(json.dumps({"a": {"b": {"c": {"d": {"e": {size: 1}}}}}})) == {}


def test_a_reduce_scatter_payload_is_its_output():
    from hta_lite.analyses.collectives.calls import _payload_sizes

    meta = {"collective": np.array(["reduce_scatter", "all_gather", "reduce_scatter", "gather"]),
            "payload_bytes": np.array([100, 100, 2**61, 100]),
            "group_size": np.array([4, 4, 8, 4]),
            "size_source": np.full(4, "", object)}  # fmt: skip
    unknown = np.full(4, -1)
    in_bytes, out_bytes, source = _payload_sizes(meta, unknown, unknown)
    assert in_bytes.tolist() == [400, 100, -1, -1]  # 2**61 x 8 would wrap int64: unknown
    assert out_bytes.tolist() == [100, -1, 2**61, -1]  # all_gather's: from the group size later
    assert source.tolist() == ["nccl payload"] * 3 + [""]


def _carried(calls: list[tuple]) -> tuple[list, list, Counter]:
    """:func:`nccl_groups.carry` over NCCL ranges ``(name, start, thread, bytes, comm)``: the
    ``msg_bytes`` and ``comm`` after it, and its health."""
    from hta_lite.load.readers import nccl_groups

    names, start, tid, size, comm = (np.array(c, object) for c in zip(*calls))
    payloads = {"msg_bytes": size.astype(np.int64), "comm": comm,
                "nranks": np.where(comm != None, 8, -1).astype(np.int64)}  # noqa: E711  # fmt: skip
    problems = Counter()
    nccl_groups.carry(names, start.astype(np.int64), tid.astype(np.int64), payloads, problems)
    return payloads["msg_bytes"].tolist(), payloads["comm"].tolist(), problems


def test_a_groups_kernel_gets_its_calls_payload():
    """Sends and receives in a group: the larger of what is sent and what is received (an
    all_to_all over two peers: 8, not 16); two threads' groups interleaved in time kept apart;
    an ncclGroupEnd without its start (the capture began inside a group) and a group with a
    call of unknown size give nothing; calls on two communicators: unknown, said."""
    s, e, a, b = "ncclGroupStart", "ncclGroupEnd", "comm a", "comm b"
    sizes, comms, problems = _carried([
        (e, 0, 1, -1, None),  # closes a group begun before the capture: nothing to carry
        (s, 10, 1, -1, None), (s, 11, 2, -1, None),
        ("ncclSend", 12, 1, 4, a), ("ncclRecv", 13, 1, 4, a), ("ncclSend", 14, 1, 4, a),
        ("ncclRecv", 15, 1, 4, a),
        ("ncclReduceScatter", 16, 2, 3, b), ("ncclReduceScatter", 17, 2, 5, b),
        (e, 20, 1, -1, None), (e, 21, 2, -1, None),
        (s, 30, 1, -1, None), ("ncclAllReduce", 31, 1, 7, a), ("ncclAllReduce", 32, 1, -1, a),
        (e, 33, 1, -1, None),
        (s, 40, 1, -1, None), ("ncclAllGather", 41, 1, 2, a), ("ncclAllGather", 42, 1, 2, b),
        (e, 43, 1, -1, None),
    ])  # fmt: skip
    assert sizes[0] == -1 and (sizes[9], comms[9]) == (8, a) and (sizes[10], comms[10]) == (8, b)
    assert sizes[14] == -1 and comms[14] is None  # a call of unknown size: the group's unknown
    assert sizes[18] == -1 and problems == Counter({"nccl_group_mixed": 1})


def test_a_constructed_two_rank_job_gives_its_collectives_and_the_late_rank(tmp_path):
    analysis = TraceAnalysis(trace_dir=_job(tmp_path / "job"), cache=False, progress=False)
    assert analysis.ranks == [0, 1]
    assert all(analysis.trace(r).health["steps_from_range:iteration"] == 1 for r in (0, 1))
    # NCCL kernels, no NCCL payloads: the calls' sizes are unknown, said once per file
    assert all(analysis.trace(r).health["nccl_payloads_absent"] == 1 for r in (0, 1))
    calls = analysis.get_collectives().calls
    kept = calls[calls["step"] >= 0]  # the last step is left out, as the profiler's last step is
    assert len(kept) == 8 and set(kept["collective"]) == {"all_reduce"}
    assert (kept["instance"] >= 0).all() and len(set(kept["instance"])) == 4
    # rank 0 waits the 5 ms rank 1 is late, at every all_reduce; rank 1 arrives last
    assert (kept.loc[kept["rank"] == 0, "wait"] == 5_000_000).all()
    assert kept.loc[kept["rank"] == 1, "arrived_last"].all()
    report = analysis.get_straggler_report()
    assert list(report.stragglers) == [1]
    assert "Rank 1 reaches its collectives 5,000 µs per step after the others" in report.texts[1]


def test_a_constructed_four_rank_job_with_different_session_starts(tmp_path):
    """Four ranks whose sessions started 100 ms apart (their exports' times as many ns
    earlier), rank 2 launching each all_reduce 5 ms late: placed in wall-clock time, rank 2 is
    the one late rank (5 ms, not 100 ms multiples), the others wait 5 ms, the job critical path
    moves to it at each step, the straggler finding saves the 5 ms, and the batch agrees."""
    folder = _job(tmp_path / "job", ranks=4, late_rank=2, shift_ns=100_000_000)
    analysis = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    assert analysis.ranks == [0, 1, 2, 3]
    calls = analysis.get_collectives().calls
    kept = calls[calls["step"] >= 0]
    assert len(kept) == 16 and len(set(kept["instance"])) == 4
    assert kept.loc[kept["rank"] == 2, "arrived_last"].all()
    assert (kept.loc[kept["rank"] != 2, "wait"] == 5_000_000).all()
    report = analysis.get_straggler_report()
    assert list(report.stragglers) == [2]
    hops = analysis.get_job_critical_path().hops()  # the path moves to rank 2 at each step
    assert len(hops) == 4 and (hops["from_rank"] == 2).all() and (hops["wait_us"] == 5000).all()
    # (the export's GPU idles 99.9 % of its span, waiting for its host: host_bound comes first)
    found = analysis.get_findings().set_index("kind")
    late = found.loc["straggler"]
    assert (late["rank"], late["saving_ms_per_step"]) == (2, 5.0)
    batch = summarize_folder(folder, executor="serial", cache=tmp_path / "cache")
    pd.testing.assert_frame_equal(batch["rank_lateness"], report.ranks)


MEGATRON_RANGE = "megatron.core.transformer.transformer_layer._forward_attention.self_attention"


def test_megatron_nvtx_ranges_are_timers_across_ranks(tmp_path):
    """Megatron-LM's ``--nvtx-ranges`` names (``nvtx_range_push``: module, function, suffix),
    twice a step inside the iteration range, 1 ms each on rank 0 and 3 ms on rank 1: its
    timer is 2 and 6 ms a step, min and max across ranks, in Megatron's log text."""
    folder = _job(tmp_path / "job")
    for rank in (0, 1):
        with sqlite3.connect(folder / f"rank{rank}.sqlite") as con:
            rows = con.execute(
                "SELECT start, globalTid FROM NVTX_EVENTS WHERE text = 'iteration'"
            ).fetchall()
            for begin, tid in rows:
                for at in (1_000_000, 5_000_000):
                    con.execute(
                        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)"
                        " VALUES (?, ?, 59, ?, ?)",
                        (begin + at, begin + at + (rank * 2 + 1) * 1_000_000, MEGATRON_RANGE, tid),
                    )
    analysis = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    table = analysis.get_timers_across_ranks([MEGATRON_RANGE], normalizer=4)  # 4 steps kept
    row = table.loc[MEGATRON_RANGE]
    assert (row["min_ms"], row["max_ms"], row["fastest_rank"], row["slowest_rank"]) == (2, 6, 0, 1)
    assert f"{MEGATRON_RANGE} : (2.00, 6.00)" in analysis.timers_text([MEGATRON_RANGE],
                                                                      normalizer=4)  # fmt: skip


def test_a_named_nvtx_range_is_the_step(tmp_path):
    """The two-rank job with ``step_range="iteration"`` given (the same steps it finds), and a
    name no range has: an error naming the export."""
    folder = _job(tmp_path / "job")
    named = TraceAnalysis(trace_dir=folder, step_range="iteration", cache=False, progress=False)
    assert len(named.trace(0).steps) == 5
    health = named.trace(0).health  # asked for, not found: said as such
    assert health["steps_named:iteration"] == 1 and "steps_from_range:iteration" not in health
    with pytest.raises(SelectionError, match="rank0.sqlite: no range named 'Megatron'"):
        TraceAnalysis(trace_dir=folder, step_range="Megatron", cache=False, progress=False)


def _with_operator_ranges(tmp_path: Path) -> tuple[Path, int, int]:
    """nvfuser_h200 with an ``emit_nvtx(record_shapes=True)`` range around each kernel launch:
    ``aten::mm, seq = k, op_id = k, sizes = [[64, 128], [128, 32]]``; plus a plain range and an
    ``aten::empty`` without shapes. Returns the export, its kernels and their GPU time (ns)."""
    path = _copy_of(tmp_path)
    con = sqlite3.connect(path)
    launches = con.execute(
        "SELECT r.start, r.end, r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN"
        " CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId AND"
        " (k.globalPid >> 24) = (r.globalTid >> 24) WHERE r.eventClass IN (0, 1)"
    ).fetchall()
    kernels, gpu_ns = con.execute(
        "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ).fetchone()
    rows = [
        (start - 50, end + 50, f"aten::mm, seq = {k}, op_id = {k + 1},"
         " sizes = [[64, 128], [128, 32]]", tid)
        for k, (start, end, tid) in enumerate(launches)
    ]  # fmt: skip
    first, _, tid = launches[0]
    rows += [
        (first - 900, first - 800, "aten::empty", tid),
        (first - 700, first - 600, "my_region", tid),
    ]
    con.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
        rows,
    )
    con.commit()
    con.close()
    return path, kernels, gpu_ns


def test_emit_nvtx_ranges_are_operators_with_their_shapes(tmp_path):
    """Every kernel is launched inside an emit_nvtx range: the operator view gives aten::mm all
    the GPU time, its calls, sequence numbers and shapes; a range without them stays an
    annotation, a bare aten:: one is an operator."""
    path, kernels, gpu_ns = _with_operator_ranges(tmp_path)
    trace = parse_parts(path)[0]
    ops = trace.cpu[trace.cpu["cat"] == "cpu_op"]
    assert set(ops["name"]) == {"aten::mm", "aten::empty"}
    mm = ops[ops["name"] == "aten::mm"]
    assert len(mm) == kernels and (mm["input_dims"] == "[[64, 128], [128, 32]]").all()
    assert sorted(mm["sequence_number"]) == list(range(kernels))
    assert "my_region" in set(trace.cpu.loc[trace.cpu["cat"] == "user_annotation", "name"])
    assert trace.health["nvtx_operator_ranges"] == kernels + 1  # and aten::empty
    analysis = TraceAnalysis(trace_dir=path.parent, cache=False, progress=False)
    summary = analysis.get_operator_summary().set_index("name")
    assert summary.loc["aten::mm", "calls"] == kernels
    assert summary.loc["aten::mm", "device_self_sum(us)"] == pytest.approx(gpu_ns / 1e3)
    by_shape = analysis.get_operator_summary(by="shape").set_index("name")
    assert by_shape.loc["aten::mm", "input_dims"] == "[[64, 128], [128, 32]]"
    # emit_nvtx writes no input types: FLOPs unknown, and the roofline says what to record
    assert analysis.get_operator_instances()["flops"].isna().all()
    assert "not their input types" in analysis.get_operator_roofline().attrs["why"]
    batch = summarize_folder(path.parent, executor="serial", cache=False, progress=False)
    assert batch["operator_roofline"].attrs["why"] == analysis.get_operator_roofline().attrs["why"]


def test_an_export_without_operator_ranges_says_what_to_record(tmp_path):
    analysis = TraceAnalysis(trace_dir=_copy_of(tmp_path).parent, cache=False, progress=False)
    why = analysis.get_operator_roofline().attrs["why"]
    assert "no operator ranges: run the steps under torch.autograd.profiler.emit_nvtx" in why
    batch = summarize_folder(analysis.trace_dir, executor="serial", cache=False, progress=False)
    assert batch["operator_roofline"].attrs["why"] == why  # the batch says it too


def test_an_export_without_allocator_events_says_what_to_record(tmp_path):
    """nsys never records the caching allocator: the memory views and the key findings say so
    and name what gives memory (a Kineto step with profile_memory=True, or a snapshot), not
    only profile_memory=True as to a Kineto user."""
    analysis = TraceAnalysis(trace_dir=_copy_of(tmp_path).parent, cache=False, progress=False)
    why = analysis.get_memory_peaks().attrs["why"]
    assert "Nsight Systems export has no PyTorch allocator events" in why and "snapshot" in why
    memory = analysis.get_key_findings().set_index("kind").loc["memory_peak", "finding"]
    assert "Nsight Systems export" in memory


def test_a_first_compile_in_a_capture_is_warm_up_and_other_host_time_is_host_bound(tmp_path):
    """nvFuser's test on an H200: its GPU idles 99.9 % of the capture while the host compiles
    (``KernelExecutor::compileFusion``, 393 ms, with the NVTX range
    ``executor_utils::Nvrtc::CompileProgram`` in it and no CUDA call). The capture is one step,
    so that compile is the program's first: warm-up, no step time, and no other kind prices it;
    so are the 16 ``cuLibraryLoadData`` calls that load what it compiled (18.2 ms). The rest of
    the host time the GPU waits for (code no range records) is host_bound's, with the advice for
    an export (NVTX ranges), not PyTorch's."""
    analysis = TraceAnalysis(trace_dir=_copy_of(tmp_path).parent, cache=False, progress=False)
    table = analysis.get_findings()
    warmup = table[table["kind"] == "warmup"].set_index("where")
    assert warmup.index.tolist() == ["compilation (nvFuser)", "module loads"]
    assert (warmup["saving_ms_per_step"] == 0).all()
    compiles = warmup.loc["compilation (nvFuser)", "evidence"]
    assert "compiles for the first time inside the profile: 392.9 ms" in compiles
    assert (
        "16 module-load call(s) on rank(s) 0 took 18.2 ms" in warmup.loc["module loads", "evidence"]
    )
    host = table.set_index("kind").loc["host_bound"]
    assert "CompileProgram" not in host["evidence"] and "compileFusion" not in host["evidence"]
    assert "cuLibraryLoadData" not in host["evidence"]
    assert host["saving_pctg"] < 60  # the capture less its 393 ms compile (60.5 %)
    assert "NVTX ranges" in host["advice"] and "eager PyTorch" not in host["advice"]


def test_findings_over_a_capture_without_steps_say_one_time_work_counts(tmp_path, capsys):
    """The export has no repeating NVTX range: its whole capture is one step, so its compile
    counts as step time. The findings say so (``attrs["caveat"]``), and so do the CLI summary,
    ``hta-lite findings`` and the report; a traced run with ProfilerSteps gets no such line."""
    from hta_lite.views.cli import main
    from hta_lite.views.report import build_report

    folder = _copy_of(tmp_path).parent
    analysis = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    caveat = analysis.get_findings().attrs["caveat"]
    assert caveat.startswith("The whole trace is one step") and "--step-range" in caveat
    assert caveat in build_report(analysis)
    for command in (["summarize", str(folder)], ["findings", str(folder)]):
        assert main([*command, "--no-cache"]) == 0
        assert caveat in capsys.readouterr().out
    steps = TraceAnalysis(trace_dir=SAMPLES / "two_ranks", cache=False, progress=False)
    assert "whole trace" not in steps.get_findings().attrs.get("caveat", "")


def test_start_up_calls_are_warm_up_not_host_work(tmp_path):
    """Pipit's saxpy MPI run, a whole Nsight Systems capture: MPI_Init (646 ms) and MPI_Finalize
    in NVTX ranges, and the first cudaHostRegister (the call that creates the device context,
    far longer than the other eight) are start-up: a warmup finding with no step time, claimed,
    so that host_bound no longer offers MPI_Init as the first fix (it did: 926 ms per step)."""
    path = _gunzipped(DATA / "nsys" / "pipit_saxpy_mpi.sqlite.gz", tmp_path)
    table = TraceAnalysis(trace_dir=path, cache=False, progress=False).get_findings()
    warmup = table.set_index("kind").loc["warmup"]
    assert warmup["where"] == "start-up calls"
    assert "(MPI_Finalize, MPI_Init, cudaHostRegister)" in warmup["evidence"]
    assert warmup["saving_ms_per_step"] == 0
    assert not table["where"].astype(str).str.contains("MPI_Init").any()
