"""Memory: the allocator's events decoded losslessly, running totals, peaks, lifetimes, leaks,
memory by operator and step, and HTA's raw memory timeline."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, SAMPLES, SHARED, assert_missing, needs_shared
from synth import TraceBuilder

from hta_lite import MemoryAnalysis, TraceAnalysis
from hta_lite.errors import MissingDataError, TraceParseError, TraceReadError

LEAK = SAMPLES / "memory_leak"
MIB = 2**20


def memory(b: TraceBuilder, ts, nbytes, addr, total_alloc, total_reserved=0, device=(1, 0),
           tid=1, **extra):  # fmt: skip
    args = {"Total Reserved": total_reserved, "Total Allocated": total_alloc, "Bytes": nbytes,
            "Addr": addr, "Device Type": device[0], "Device Id": device[1], **extra}  # fmt: skip
    b.events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                     "pid": 10, "tid": tid, "ts": ts, "args": args})  # fmt: skip


@pytest.fixture
def built(tmp_path):
    """Two steps on cuda:0, known by construction:
    step 1: op A allocates 100 (x) and 50 (y) inside B; frees x. step 2: op A allocates 300 (z),
    frees y; z is never freed. One free of 1 byte (a CPU tensor) and a free whose allocation
    predates the trace."""
    b = TraceBuilder().step(1, 0, 100).step(2, 100, 100)
    b.cpu_op("A", 10, 40).cpu_op("B", 20, 10).cpu_op("A", 110, 40)
    memory(b, 12, 100, 0x100, 1100, 2048)  # before: 1000 allocated
    memory(b, 22, 50, 0x200, 1150, 2048)  # inside B (inside A)
    memory(b, 40, -100, 0x100, 1050, 2048)
    memory(b, 112, 300, 0x300, 1350, 4096)
    memory(b, 120, -50, 0x200, 1300, 4096)
    memory(b, 130, -64, 0x999, 1236, 4096)  # allocated before the trace
    memory(b, 60, 1, 0x5, 1, 0, device=(0, -1))
    memory(b, 61, -1, 0x5, 0, 0, device=(0, -1))
    b.write(tmp_path / "rank0.json")
    return TraceAnalysis(trace_dir=tmp_path, cache=False, include_last_profiler_step=True)


def test_events_decoded_losslessly_with_their_context(built):
    events = built.get_memory_events()
    assert len(events) == 8 and set(events["device"]) == {"cuda:0", "cpu"}
    cpu = events[events["device"] == "cpu"]
    assert cpu["bytes"].tolist() == [1, -1]  # a 1-byte free is -1, not "absent"
    cuda = events[events["device"] == "cuda:0"].set_index("addr")
    assert cuda.loc[0x200, "operator"].tolist() == ["B", "A"]  # innermost op: B, then the 2nd A
    assert cuda.loc[0x300, "step"] == 2 and cuda.loc[0x100, "step"].tolist() == [1, 1]


def test_running_totals_peaks_and_cached(built):
    line = built.get_memory_timeline()
    assert (line["allocated"] == line["recomputed"]).all()
    peaks = built.get_memory_peaks().set_index("device")
    assert peaks.loc["cuda:0", "peak_allocated"] == 1350
    assert (
        peaks.loc["cuda:0", "peak_allocated_ts"] == 112_000
        and peaks.loc["cuda:0", "operator"] == "A"
    )
    assert peaks.loc["cuda:0", "peak_reserved"] == 4096
    assert peaks.loc["cuda:0", "peak_cached"] == 4096 - 1236
    assert np.isnan(peaks.loc["cpu", "peak_reserved"])  # the CPU allocator reserves nothing
    at_peak = built.get_memory_at_peak(0, "cuda:0").set_index("operator")
    assert at_peak.loc["A", "bytes"] == 300 and at_peak.loc["B", "bytes"] == 50
    assert at_peak.loc["[allocated before the trace]", "bytes"] == 1000  # adds up to the peak
    assert at_peak["bytes"].sum() == 1350


def test_lifetimes_and_leaks(built):
    table = built.get_memory_lifetimes().set_index("addr")
    assert table.loc[0x100, "lifetime_us"] == 28.0 and table.loc[0x100, "status"] == "freed"
    assert table.loc[0x300, "status"] == "live at end"
    assert table.loc[0x999, "status"] == "allocated before the trace"
    assert table.loc[0x5, "lifetime_us"] == 1.0
    leaks = built.get_memory_leaks()
    assert leaks[["step", "operator", "bytes"]].values.tolist() == [[2, "A", 300]]


def test_by_operator_self_and_total(built):
    table = built.get_memory_by_operator().set_index("name")
    assert table.loc["A", "calls"] == 2
    assert table.loc["A", "alloc_bytes"] == 450 and table.loc["A", "self_alloc_bytes"] == 400
    assert (
        table.loc["B", "self_alloc_bytes"] == 50 and table.loc["A", "free_bytes"] == 100 + 50 + 64
    )


def test_by_step_growth(built):
    steps = built.get_memory_by_step()
    cuda = steps[steps["device"] == "cuda:0"].set_index("step")
    assert cuda.loc[1, "start_allocated"] == 1000 and cuda.loc[1, "end_allocated"] == 1050
    assert cuda.loc[2, "growth"] == 1236 - 1050 and cuda.loc[2, "peak_growth"] == 200


def test_disagreeing_totals_are_counted_in_health(tmp_path):
    b = TraceBuilder().step(1, 0, 100)
    memory(b, 10, 100, 1, 100)
    memory(b, 20, 100, 2, 250)  # should be 200
    b.write(tmp_path / "rank0.json")
    a = TraceAnalysis(trace_dir=tmp_path, cache=False)
    # health() runs the check itself: the same before and after the timeline is asked for
    first = a.health()
    assert any("Total Allocated" in item for item in first["item"])
    a.get_memory_timeline()
    assert a.health().equals(first)


def test_recorded_leak_is_found():
    """sample_traces/memory_leak/record.py leaks exactly 1 MiB per step through aten::empty in a
    'leak' annotation; the steps otherwise free what they allocate."""
    a = TraceAnalysis(trace_dir=LEAK, cache=False)
    leaks = a.get_memory_leaks()
    assert leaks[["step", "operator", "annotation", "bytes"]].values.tolist() == [
        [s, "aten::empty", "leak", MIB] for s in (2, 3, 4)
    ]
    growth = a.get_memory_by_step().set_index("step")["growth"]
    assert growth.loc[3] == growth.loc[4] == MIB
    line = a.get_memory_timeline()
    assert (line["allocated"] == line["recomputed"]).all()
    modules = set(a.get_memory_events()["module"]) - {""}
    assert "MLP_0.Sequential_0.Linear_0" in modules
    leak = a.get_findings().iloc[0]  # nothing else to fix in the sample
    assert leak["kind"] == "memory_leak" and leak["evidence"].startswith(
        "1.0 MiB allocated in each of 3 steps and never freed in the trace, 1.0 MiB of it by"
        " aten::empty in 'leak'"
    )


def leaking_steps(tmp_path, steps: int, rank: int = 0, leak: int = MIB):
    """``steps`` steps on cuda:0 of a 1 GiB device, known by construction: each allocates
    ``leak`` bytes in aten::empty inside 'keep' that are never freed and 4 MiB in aten::mm freed
    in the step; steps 1 and 2 also leave 2 MiB of a cache (aten::cat) unfreed, a site not in
    every step."""
    b = TraceBuilder(rank=rank, world_size=2)
    b.meta["deviceProperties"] = [{"id": 0, "totalGlobalMem": 2**30}]
    total, addr = 0, 0x1000
    for step in range(1, steps + 1):
        base = 1000 * step
        b.step(step, base, 1000).cpu_op("keep", base + 10, 100, cat="user_annotation")
        b.cpu_op("aten::empty", base + 20, 10).cpu_op("aten::mm", base + 200, 100)
        sites = [(base + 22, leak, "leak"), (base + 210, 4 * MIB, "mm")]
        if step <= 2:
            b.cpu_op("aten::cat", base + 400, 10)
            sites.append((base + 402, 2 * MIB, "cache"))
        for ts, size, what in sites:
            addr += 0x100
            total += size
            memory(b, ts, size, addr, total)
            if what == "mm":
                total -= size
                memory(b, ts + 50, -size, addr, total)
    b.write(tmp_path / f"rank{rank}.json")
    return TraceAnalysis(trace_dir=tmp_path, cache=False, include_last_profiler_step=True)


def test_a_site_that_leaks_in_every_step_is_a_finding(tmp_path):
    """5 steps (above): a memory_leak of 1 MiB per step at aten::empty in 'keep' (the cache of
    two steps is not one), no step time; the 1 GiB less the 13 MiB peak lasts 1,011 more steps.
    The key findings' memory line says the same leak."""
    a = leaking_steps(tmp_path, 5)
    found = a.get_findings()
    leak = found[found["kind"] == "memory_leak"]
    assert len(leak) == 1 and leak.iloc[0]["saving_ms_per_step"] == 0
    assert leak.iloc[0]["where"] == "rank 0 cuda:0"
    assert leak.iloc[0]["evidence"] == (
        "1.0 MiB allocated in each of 5 steps and never freed in the trace, 1.0 MiB of it by"
        " aten::empty in 'keep'; at that rate the 1011.0 MiB above the allocated peak lasts"
        " 1,011 more steps"
    )
    line = a.get_key_findings().set_index("kind").loc["memory_peak", "finding"]
    assert line.endswith("; rank 0 cuda:0 leaks 1.0 MiB per step (allocated in every step, never"
                         " freed: the finding memory_leak)")  # fmt: skip


def test_the_rank_that_leaks_most_is_named_once(tmp_path):
    """Rank 0 leaks 1 MiB per step, rank 1 2 MiB: one memory_leak, for rank 1, saying that
    another rank leaks too; the key findings name rank 1 as well."""
    leaking_steps(tmp_path, 5)
    a = leaking_steps(tmp_path, 5, rank=1, leak=2 * MIB)
    leak = a.get_findings().set_index("kind").loc[["memory_leak"]]
    assert len(leak) == 1 and leak.iloc[0]["rank"] == 1
    assert leak.iloc[0]["evidence"].startswith(
        "2.0 MiB allocated in each of 5 steps and never freed in the trace, 2.0 MiB of it by"
        " aten::empty in 'keep' (1 other rank(s) leak too)"
    )
    line = a.get_key_findings().set_index("kind").loc["memory_peak", "finding"]
    assert "; rank 1 cuda:0 leaks 2.0 MiB per step" in line


def test_recorded_outputs_kept_each_step_are_a_leak():
    """tests/data/memory_outputs_kept (recorded): each step keeps its 2,560 bytes of logits, made
    by aten::addmm in the head Linear under the step's own annotation; the momentum buffers of
    the first step are not a leak. The finding's bytes per step are the steady steps' growth."""
    a = TraceAnalysis(trace_dir=DATA / "memory_outputs_kept", cache=False)
    found = a.get_findings()
    assert found["kind"].tolist() == ["memory_leak"]
    assert found.iloc[0]["evidence"] == (
        "2.5 KiB allocated in each of 5 steps and never freed in the trace, 2.5 KiB of it by"
        " aten::addmm in MLP_0.Linear_1"
    )
    growth = a.get_memory_by_step().set_index("step")["growth"]
    assert (growth.iloc[1:] == 2560).all() and growth.iloc[0] > 2560  # step 2: the momentum


def test_recorded_ranks_one_leaking_one_peaking():
    """tests/data/memory_ranks (recorded, 4 ranks): rank 2 alone leaks its 2,560 bytes of logits
    per step; rank 3's 4 MiB scratch tensor, freed in its step, is no leak but puts its peak
    above 4 MiB, over four times the others' (under 1 MiB), which the key findings' memory line
    and the per-step table say."""
    a = TraceAnalysis(trace_dir=DATA / "memory_ranks", cache=False)
    leak = a.get_findings().set_index("kind").loc[["memory_leak"]]
    assert len(leak) == 1 and leak.iloc[0]["where"] == "rank 2 cpu"
    assert leak.iloc[0]["evidence"].startswith("2.5 KiB allocated in each of 5 steps")
    assert "other rank" not in leak.iloc[0]["evidence"]
    peaks = a.get_memory_peaks().set_index("rank")["peak_allocated"]
    assert peaks[3] > 4 * MIB > 4 * peaks.drop(3).max()
    median = peaks.median()
    line = a.get_key_findings().set_index("kind").loc["memory_peak", "finding"]
    assert line.startswith(
        f"Memory peak: 4.6 MiB allocated on rank 3 cpu ({peaks[3] / median:.1f}x the median"
        f" rank's {median / 1024:.1f} KiB)"
    )
    by_step = a.get_memory_by_step().set_index(["rank", "step"])["peak_vs_median_rank"]
    assert (by_step.loc[3] > 5).all() and (by_step.drop(3, level="rank").between(0.9, 1.1)).all()


def test_ranks_on_their_own_gpus_are_compared(tmp_path):
    """Three ranks of one node, each on its own GPU (cuda:0, cuda:1, cuda:2), peaking at 100,
    300 and 100 bytes: rank 1 peaks at 3x the median rank (each device alone would be 1x)."""
    for rank, peak in enumerate((100, 300, 100)):
        b = TraceBuilder(rank=rank, world_size=3).step(1, 0, 100).step(2, 100, 100)
        memory(b, 10, peak, 0x10, peak, device=(1, rank))
        memory(b, 20, -peak, 0x10, 0, device=(1, rank))
        b.write(tmp_path / f"rank{rank}.json")
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, include_last_profiler_step=True)
    by_step = a.get_memory_by_step().set_index(["rank", "step"])["peak_vs_median_rank"]
    assert by_step[(1, 1)] == 3.0 and by_step[(0, 1)] == by_step[(2, 1)] == 1.0
    line = a.get_key_findings().set_index("kind").loc["memory_peak", "finding"]
    assert line.startswith("Memory peak: 300 B allocated on rank 1 cuda:1 (3.0x the median rank's")


def test_two_steps_cannot_tell_a_leak(tmp_path):
    """With 2 steps the step after the last might free what they left: no memory_leak."""
    a = leaking_steps(tmp_path, 2)
    assert len(a.get_memory_leaks()) == 4
    assert "memory_leak" not in set(a.get_findings()["kind"])
    assert "leaks" not in a.get_key_findings().set_index("kind").loc["memory_peak", "finding"]


@needs_shared
@pytest.mark.parametrize("case", ["h100_bert_small", "mi300_bert_small"])
def test_real_traces_totals_agree(case):
    a = TraceAnalysis(trace_dir=SHARED / "traces" / "tracelens" / case, cache=False)
    line = a.get_memory_timeline()
    assert len(line) == 236 and (line["allocated"] == line["recomputed"]).all()
    device = "cuda:0" if case.startswith("h100") else "hip:0"
    peak = a.get_memory_peaks().set_index("device").loc[device]
    assert peak["peak_allocated"] == line[line["device"] == device]["allocated"].max()
    assert "memory_total_mismatch" not in set(a.health()["code"])


def test_no_memory_events_is_a_clear_error(two_ranks):
    assert_missing(two_ranks.get_memory_peaks(), "profile_memory=True")


# ---- HTA's raw memory timeline -------------------------------------------------------------


def test_raw_timeline_by_category_equals_a_direct_sum(tmp_path):
    rows = [[-1, 1, 512, 0], [10, 2, 100, 4], [10, 2, 50, 3], [20, 4, -100, 4], [30, 3, 8, 5]]
    path = tmp_path / "raw.json.gz"
    path.write_bytes(gzip.compress(json.dumps(rows).encode()))
    m = MemoryAnalysis(path)
    wide = m.memory_by_category()
    # HTA's rows: the before-profiling run, placed at the first real time, then one per run
    assert wide["ts"].tolist() == [10, 10, 20, 30]
    assert wide.iloc[0][["PARAMETER", "ACTIVATION"]].tolist() == [512, 0]
    wide = wide.iloc[1:].set_index("ts")
    assert wide.loc[10, "PARAMETER"] == 512 and wide.loc[10, "ACTIVATION"] == 100
    assert wide.loc[20, "ACTIVATION"] == 0 and wide.loc[30, "GRADIENT"] == 8
    direct = pd.DataFrame(rows, columns=["ts", "a", "b", "c"]).groupby("c")["b"].sum()
    assert wide.iloc[-1][["PARAMETER", "TEMPORARY", "ACTIVATION", "GRADIENT"]].tolist() == [
        direct[0],
        direct[3],
        direct[4],
        direct[5],
    ]


def test_hta_memory_timeline_file():
    m = MemoryAnalysis(DATA / "memory_timeline" / "memory_timeline.raw.gz")
    raw = json.loads(
        gzip.decompress((DATA / "memory_timeline" / "memory_timeline.raw.gz").read_bytes())
    )
    direct = pd.DataFrame(raw).groupby(3)[2].sum()
    last = m.memory_by_category().iloc[-1]
    for index, category in enumerate(
        ["PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT",
         "AUTOGRAD_DETAIL", "UNKNOWN"]
    ):  # fmt: skip
        assert last[category] == direct.get(index, 0)
    assert len(m.plot_memory_timeline(save_graph=False).data) == 8


def test_raw_timeline_that_is_not_one_is_an_error(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"traceEvents": []}')
    with pytest.raises(TraceParseError, match="not a raw memory timeline"):
        MemoryAnalysis(path)


def test_raw_timeline_without_entries_is_an_error_not_an_empty_chart(tmp_path):
    path = tmp_path / "empty.json.gz"
    path.write_bytes(gzip.compress(b"[ ]"))
    with pytest.raises(MissingDataError, match="empty.json.gz.*no entries.*profile_memory=True"):
        MemoryAnalysis(path)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**64])
def test_raw_timeline_value_outside_int64_is_an_error_naming_the_file(tmp_path, value):
    """Both decoders decline a value int64 cannot hold; msgspec's path then names the file
    (it was a raw OverflowError from numpy)."""
    from hta_lite.load.readers import memory_timeline as raw_timeline

    path = tmp_path / "big.json"
    path.write_text(json.dumps([[-1, 1, 512, 0], [10, 2, value, 4]]))
    with pytest.raises(TraceParseError, match="big.json.*int64"):
        MemoryAnalysis(path)
    with pytest.raises(TraceParseError, match="big.json.*int64"):
        raw_timeline.parse(path.read_bytes(), path)


def test_raw_timeline_same_without_the_c_decoder(tmp_path, monkeypatch):
    rows = [[-1, 1, 512, 0], [10, 2, 100, 4], [1696966048083248105, 9, -100, 4]]
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(rows))
    with_c = MemoryAnalysis(path)
    from hta_lite.load import decode

    monkeypatch.setattr(decode, "_fastjson", None)
    without = MemoryAnalysis(path)
    pd.testing.assert_frame_equal(with_c.memory_by_category(), without.memory_by_category())
    raw = without.raw
    assert raw["ts"].tolist() == [r[0] for r in rows] and raw["bytes"].tolist() == [512, 100, -100]
    assert raw["action"].tolist() == ["PREEXISTING", "CREATE", "action 9"]
    assert raw["category"].tolist() == ["PARAMETER", "ACTIVATION", "ACTIVATION"]


@pytest.mark.parametrize("seed", range(40))
def test_raw_timeline_sums_in_c_equal_the_numpy_sums(seed):
    """The C decoder's one pass and the numpy path: runs of one ts, entries before profiling
    (ts -1, alone or with no real time at all), every category, sums that wrap."""
    from hta_lite.load import decode
    from hta_lite.load.readers import memory_timeline as raw_timeline

    if decode._fastjson is None:
        pytest.skip("the C decoder is not built (or HTA_LITE_NO_C is set)")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    ts = np.sort(rng.integers(-1 if seed % 3 else -5, 6, n))
    ts[ts < 0] = -1
    if seed % 7 == 0:
        ts[:] = -1
    nbytes = rng.integers(-(2**62), 2**62, n) if seed % 5 == 0 else rng.integers(-999, 999, n)
    rows = np.column_stack([ts, rng.integers(0, 5, n), nbytes, rng.integers(0, 8, n)])
    text = json.dumps(rows.tolist(), indent=1 if seed % 2 else None).encode()
    c_sums = decode.category_sums(text, 8)
    assert c_sums.flags.writeable
    np.testing.assert_array_equal(c_sums, raw_timeline._category_sums(rows).T)
    if n:  # a category out of range, last or not: left to numpy, which names the problem
        for at in (0, n - 1):
            bad = rows.copy()
            bad[at, 3] = 8
            assert decode.category_sums(json.dumps(bad.tolist()).encode(), 8) is None
    assert decode.category_sums(text[:-1], 8) is None  # not the whole array


def test_raw_timeline_sums_in_c_with_a_run_per_entry():
    """Compact text where every entry starts a run: the C pass's output grows past its first
    room (a run per 32 bytes of text) and still equals numpy's."""
    from hta_lite.load import decode
    from hta_lite.load.readers import memory_timeline as raw_timeline

    if decode._fastjson is None:
        pytest.skip("the C decoder is not built (or HTA_LITE_NO_C is set)")
    rows = np.column_stack(
        [np.arange(2000), np.zeros(2000, int), np.ones(2000, int), np.arange(2000) % 8]
    )
    text = json.dumps(rows.tolist(), separators=(",", ":")).encode()
    np.testing.assert_array_equal(
        decode.category_sums(text, 8), raw_timeline._category_sums(rows).T
    )


def _texts_around(text: bytes) -> list[bytes]:
    """``text`` and texts a row reader must decline or take alike: cut, spaced, closed early,
    followed by something, empty."""
    return [text, text[:-1], text[: len(text) // 2], b" \n" + text + b"\n ", text + b"x",
            text + b"]", text.replace(b"]]", b"], ]"), b"", b"   ", b"[", b"[ ]", b"[]  [",
            text.replace(b",", b", ", 3), text.replace(b"1", b"01", 1)]  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_raw_timeline_sums_streamed_equal_the_whole_text(seed):
    """The C pass reading a piece at a time (a reader, as of a gzip file) gives what it gives
    for the whole text, declines included, wherever the pieces cut the rows."""
    import io

    from hta_lite.load import decode

    if decode._fastjson is None:
        pytest.skip("the C decoder is not built (or HTA_LITE_NO_C is set)")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    rows = np.column_stack([np.sort(rng.integers(-1, 9, n)), rng.integers(0, 5, n),
                            rng.integers(-(10**15), 10**15, n), rng.integers(0, 8, n)])  # fmt: skip
    text = json.dumps(rows.tolist(), indent=1 if seed % 2 else None).encode()
    for case in _texts_around(text):
        whole = decode._fastjson.category_sums(case, 8)
        for piece in (1, 2, 3, 5, 8, 13, 40, 4096):
            streamed = decode._fastjson.category_sums(io.BytesIO(case), 8, len(case), piece)
            assert streamed == whole, (case, piece)
    assert decode._fastjson.category_sums(io.BytesIO(text), 8) is not None


def test_raw_timeline_sums_streamed_reader_errors_propagate():
    from hta_lite.load import decode

    if decode._fastjson is None:
        pytest.skip("the C decoder is not built (or HTA_LITE_NO_C is set)")

    class Failing:
        def readinto(self, view):
            raise OSError("disk gone")

    class Lying:
        def readinto(self, view):
            return len(view) + 1

    class Keeping:  # keeps the view it was given: released after the call, so no later write
        kept = []

        def readinto(self, view):
            self.kept.append(view)
            return 0

    with pytest.raises(OSError, match="disk gone"):
        decode.category_sums(Failing(), 8)
    assert decode.category_sums(Keeping(), 8) is None
    with pytest.raises(ValueError, match="released"):
        Keeping.kept[0][0] = 1
    with pytest.raises(ValueError, match="byte count"):
        decode.category_sums(Lying(), 8)


def test_raw_timeline_file_read_errors_name_the_file(tmp_path):
    rows = json.dumps([[-1, 1, 512, 0], [10, 2, 100, 4]] * 500).encode()
    good = tmp_path / "raw.json.gz"
    good.write_bytes(gzip.compress(rows))
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(good.read_bytes()[:-30])
    corrupt = tmp_path / "corrupt.json.gz"
    corrupt.write_bytes(good.read_bytes()[:20] + b"\xff" * 40 + good.read_bytes()[60:])
    for path in (truncated, corrupt):
        with pytest.raises(TraceReadError, match=f"{path.name}.*gzip"):
            MemoryAnalysis(path)
    for path, problem in ((tmp_path / "missing.json", "cannot read"), (tmp_path, "regular")):
        with pytest.raises(TraceReadError, match=problem):
            MemoryAnalysis(path)
    m = MemoryAnalysis(good)  # the text is read again for the entries and a second table
    assert len(m.raw) == 1000 and m.memory_by_category().equals(m.memory_by_category())
