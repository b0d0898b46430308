"""Critical path: equal to HTA 0.6.1 on its own test traces, known paths on traces built here,
a path (and a health entry) on an inconsistent call stack, the overlay trace."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import numpy as np
import pytest
from conftest import DATA, SHARED_TRACES, health_messages, needs_shared
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.analyses.critical_path import call_stacks
from hta_lite.analyses.critical_path import path as cp_path
from hta_lite.analyses.critical_path.graph import SYNC, Graph
from hta_lite.analyses.critical_path.path import BREAKDOWN_COLUMNS, longest_path
from hta_lite.errors import RankNotFoundError, SelectionError

CP = DATA / "critical_path"
REFERENCE = json.loads((CP / "critical-path-traceinsight-0.6.1.json").read_text())


@pytest.mark.parametrize("case", sorted(REFERENCE))
def test_equals_the_reference_on_its_test_traces(case):
    ref = REFERENCE[case]
    a = TraceAnalysis(trace_dir=CP / case, cache=False, parallel=False)
    cp, ok = a.critical_path_analysis(0, ref["annotation"], ref["instance_id"])
    assert ok and ok == ref["success"]
    table = cp.get_critical_path_breakdown()
    assert list(table.columns) == ref["columns"]
    assert cp.length_us == ref["path_duration_us"] == table["duration"].sum()
    assert len(table) == ref["n_edges"]
    by_bound = table.groupby("bound_by")["duration"].sum().to_dict()
    assert by_bound == pytest.approx(ref["by_bound_by_us"])
    assert table.groupby("type")["duration"].sum().to_dict() == pytest.approx(ref["by_type_us"])
    assert cp.summary().to_dict() == pytest.approx(ref["summary_pct"])
    assert not cp.health


def analysis_of(builder: TraceBuilder, tmp_path) -> TraceAnalysis:
    builder.write(tmp_path / "rank0.json")
    return TraceAnalysis(trace_dir=tmp_path, cache=False, parallel=False)


def bound(cp) -> dict[str, float]:
    table = cp.get_critical_path_breakdown()
    out = table.groupby("bound_by")["duration"].sum()
    return {k: v for k, v in out.items() if k and v}


def test_cpu_bound_step(tmp_path):
    """An op with one short kernel, a gap, then a long op: the path is the CPU's (the gap
    between top-level ops is a 0-weight dependency, as in the reference)."""
    b = TraceBuilder().step(1, 0, 1000)
    b.cpu_op("aten::foo", 10, 490).cpu_op("aten::bar", 600, 300)
    b.kernel("k1", 40, 10, launch_ts=20, launch_dur=10)
    cp, _ = analysis_of(b, tmp_path).critical_path_analysis(0, "ProfilerStep", 0)
    assert cp.length_us == 790  # 10 + 10 (the launch) + 470 + 300
    assert bound(cp) == {"cpu_bound": 790}


def test_gpu_bound_chain_and_device_sync(tmp_path):
    """Two 500 µs kernels queued back to back, then cudaDeviceSynchronize: the path goes from
    the first launch through both kernels to the end of the sync."""
    b = TraceBuilder().step(1, 0, 2000).cpu_op("aten::work", 10, 90)
    b.kernel("k1", 30, 500, launch_ts=20, launch_dur=5)
    b.kernel("k2", 530, 500, launch_ts=40, launch_dur=5)
    b.kernel("Context Sync", 1030, 5, stream=-1, cat="cuda_sync", launch_ts=110,
             launch_dur=930, launch_name="cudaDeviceSynchronize")  # fmt: skip
    cp, _ = analysis_of(b, tmp_path).critical_path_analysis(0, "ProfilerStep", 0)
    assert cp.length_us == 1020
    assert bound(cp) == {
        "cpu_bound": 10,
        "gpu_kernel_launch_overhead": 10,
        "gpu_compute_bound": 1000,
    }
    # k2's end -> the sync call's end (weight 0: the path may stop at either)
    sync = np.flatnonzero(cp.graph.kind == SYNC)
    assert len(sync) == 1 and cp.graph.node_ts[cp.graph.src[sync[0]]] == 1_030_000
    assert cp.graph.node_ts[cp.graph.dst[sync[0]]] == 1_040_000


def test_launch_overhead_then_stream_sync(tmp_path):
    """Five tiny kernels, each launched after the previous finished; the host then waits for
    the last, longer one with cudaStreamSynchronize."""
    b = TraceBuilder().step(1, 0, 200).cpu_op("aten::burst", 0, 50)
    for i in range(4):
        b.kernel(f"tiny{i}", 10 * i + 9, 1, launch_ts=10 * i + 5, launch_dur=2)
    b.kernel("last", 49, 11, launch_ts=45, launch_dur=2)
    b.kernel("Stream Sync", 60, 1, cat="cuda_sync", launch_ts=52, launch_dur=9,
             launch_name="cudaStreamSynchronize")  # fmt: skip
    cp, _ = analysis_of(b, tmp_path).critical_path_analysis(0, "ProfilerStep", 0)
    assert cp.length_us == 60
    assert bound(cp) == {"cpu_bound": 45, "gpu_kernel_launch_overhead": 4, "gpu_compute_bound": 11}


def test_cross_stream_event_wait(tmp_path):
    """Kernel B (stream 9) waits, through cudaEventRecord / cudaStreamWaitEvent, for kernel A
    (stream 7): the path runs through A into B."""
    b = TraceBuilder().step(1, 0, 1000).cpu_op("aten::two_streams", 0, 100)
    b.kernel("A", 15, 500, stream=7, launch_ts=10, launch_dur=2)
    b.cpu_op("cudaEventRecord", 20, 2, cat="cuda_runtime", correlation=900)
    b.kernel("Stream Wait Event", 33, 1, stream=9, cat="cuda_sync", launch_ts=30, launch_dur=2,
             launch_name="cudaStreamWaitEvent", wait_on_stream=7,
             wait_on_cuda_event_record_corr_id=900)  # fmt: skip
    b.kernel("B", 520, 100, stream=9, launch_ts=40, launch_dur=2)
    b.kernel("Context Sync", 620, 5, stream=-1, cat="cuda_sync", launch_ts=110,
             launch_dur=520, launch_name="cudaDeviceSynchronize")  # fmt: skip
    cp, _ = analysis_of(b, tmp_path).critical_path_analysis(0, "ProfilerStep", 0)
    table = cp.get_critical_path_breakdown()
    assert cp.length_us == 615  # 10 + 5 (launch of A) + 500 (A) + 0 (wait) + 100 (B)
    assert bound(cp) == {"cpu_bound": 10, "gpu_kernel_launch_overhead": 5, "gpu_compute_bound": 600}
    on_path = table.loc[table["bound_by"] == "gpu_compute_bound", "s_name"].tolist()
    assert on_path == ["A", "B"]


def test_inconsistent_call_stack_gives_a_path_and_a_health_entry(tmp_path):
    """A child that ends after its parent (an out-of-order call stack): the backwards edge weighs
    0, the path is still computed, and the path's own health says so (not the rank's: health()
    is the same whatever ran before)."""
    b = TraceBuilder().step(1, 0, 500).cpu_op("parent", 0, 100).cpu_op("child", 10, 110)
    a = analysis_of(b, tmp_path)
    cp, ok = a.critical_path_analysis(0, "ProfilerStep", 0)
    assert ok and cp.length_us == 120  # 10 + 110, then child's end -> parent's end weighs 0
    assert cp.health == {"cp_negative_edge": 1}
    assert any("running backwards" in m for m in health_messages(cp.health))
    assert "cp_negative_edge" not in set(a.health()["code"])


def test_cycles_are_cut_and_counted():
    graph = Graph(
        node_event=np.arange(3), node_start=np.ones(3, bool), node_ts=np.array([0, 10, 20]),
        src=np.array([0, 1, 2]), dst=np.array([1, 2, 1]), kind=np.zeros(3, np.int8),
        weight=np.array([10, 10, 5]), event=np.full(3, -1),
    )  # fmt: skip
    health = Counter()
    assert longest_path(3, graph, health) == [0, 1]
    assert health == {"cp_cycle_edge_cut": 1}


def test_a_self_loop_is_cut_not_waited_on():
    graph = Graph(
        node_event=np.arange(2), node_start=np.ones(2, bool), node_ts=np.array([0, 10]),
        src=np.array([0, 1]), dst=np.array([1, 1]), kind=np.zeros(2, np.int8),
        weight=np.array([10, 7]), event=np.full(2, -1),
    )  # fmt: skip
    health = Counter()
    assert longest_path(2, graph, health) == [0]
    assert health == {"cp_cycle_edge_cut": 1}


@pytest.mark.skipif(cp_path._longest_path is None, reason="the C pass is not built here")
@pytest.mark.parametrize("seed", range(40))
def test_the_c_pass_is_the_python_pass(seed):
    """Random graphs, forward edges with tied weights, some backward edges and self-loops
    (cycles): the same distances, last edges, order and cuts."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    m = int(rng.integers(0, 4 * n))
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    forward = rng.random(m) < 0.95
    low, high = np.minimum(src, dst), np.maximum(src, dst)
    src, dst = np.where(forward, low, src), np.where(forward, high, dst)
    weight = rng.integers(0, 4, m) * 10
    got = cp_path._longest_path.longest(n, src.astype(np.int64), dst.astype(np.int64), weight)
    want = cp_path._distances(n, src, dst, weight)
    for c, p in zip(got[:3], want[:3]):
        assert np.array_equal(np.frombuffer(c, np.int64), p)
    assert got[3] == want[3]


@pytest.mark.parametrize("seed", range(30))
def test_call_stack_parents_without_a_stack(seed):
    """The parents read off levels equal a stack's on nested spans, and a stack that one end
    does not close is told apart (some seeds break the nesting)."""
    rng = np.random.default_rng(seed)
    points, stack, events = [], [], 0
    for _ in range(int(rng.integers(1, 200))):
        if stack and rng.random() < 0.5:
            points.append((stack.pop(), False))
        else:
            stack.append(events)
            points.append((events, True))
            events += 1
    points += [(e, False) for e in reversed(stack)]
    if seed % 3 == 0 and events > 1:  # swap two ends: inconsistent
        ends = [k for k, (_, s) in enumerate(points) if not s]
        a, b = rng.choice(ends, 2, replace=False)
        points[a], points[b] = points[b], points[a]
    who = np.array([e for e, _ in points], np.int64)
    starts = np.array([s for _, s in points], bool)
    expected, consistent, stack = {}, True, []
    for e, s in points:
        if s:
            expected[e] = stack[-1] if stack else -1
            stack.append(e)
        else:
            consistent &= bool(stack) and stack.pop() == e
    got = call_stacks._stack_parents(who, starts)
    assert (got is not None) == consistent
    if consistent:
        assert got.tolist() == [expected[e] for e in who.tolist()]


def test_clear_errors(tmp_path):
    a = analysis_of(TraceBuilder().step(1, 0, 10).cpu_op("op", 1, 2), tmp_path)
    with pytest.raises(SelectionError, match="no event whose name contains 'nope'"):
        a.critical_path_analysis(0, "nope", 0)
    with pytest.raises(SelectionError, match="instance 5 of 'ProfilerStep' not found"):
        a.critical_path_analysis(0, "ProfilerStep", 5)
    with pytest.raises(RankNotFoundError):
        a.critical_path_analysis(7, "ProfilerStep", 0)


def test_overlay_marks_the_path(tmp_path):
    ref = REFERENCE["cp_cuda_event_sync"]
    a = TraceAnalysis(trace_dir=CP / "cp_cuda_event_sync", cache=False, parallel=False)
    cp, _ = a.critical_path_analysis(0, ref["annotation"], ref["instance_id"])
    written = a.overlay_critical_path_analysis(0, cp, str(tmp_path))
    events = json.loads(gzip.decompress(open(written, "rb").read()))["traceEvents"]
    critical = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("critical")]
    assert len(critical) == len(cp.critical_path_events_set)
    flows = [e for e in events if e.get("cat") == "critical_path"]
    drawn = cp.get_critical_path_breakdown()["type"].isin(
        ["critical_path_dependency", "critical_path_kernel_launch_delay",
         "critical_path_sync_dependency"]
    )  # fmt: skip
    assert len(flows) == 2 * int(drawn.sum())
    kept = {e.get("cat") for e in events if e.get("ph") == "X"}
    assert kept <= {"cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "user_annotation"}
    full = a.overlay_critical_path_analysis(0, cp, str(tmp_path / "all"), False, True)
    all_events = json.loads(gzip.decompress(open(full, "rb").read()))["traceEvents"]
    assert len(all_events) > len(events)


def test_breakdown_columns_and_event_index(tmp_path):
    ref = REFERENCE["cp_cuda_event_sync_multi_stream"]
    a = TraceAnalysis(trace_dir=CP / "cp_cuda_event_sync_multi_stream", cache=False)
    cp, _ = a.critical_path_analysis(0, ref["annotation"], ref["instance_id"])
    table = cp.get_critical_path_breakdown()
    assert list(table.columns) == BREAKDOWN_COLUMNS
    frame = a.t.get_trace(0).set_index("index")
    named = table.dropna(subset=["event_idx"])
    assert (frame.loc[named["event_idx"].astype(int), "s_name"].to_numpy() == named["s_name"]).all()
    assert {e for e in cp.critical_path_events_set} <= set(frame.index)


def test_graph_launch_releases_all_its_kernels(tmp_path):
    """A cudaGraphLaunch releasing three 100 µs kernels back to back: every one is on the path,
    after the launch (the reference keeps only one kernel per launch in its window: 100 µs of
    GPU time instead of 300; docs/differences-from-hta.md row 20)."""
    b = TraceBuilder().step(1, 0, 1000).cpu_op("aten::replay", 0, 20)
    for i in range(3):
        b.kernel(f"g{i}", 15 + 100 * i, 100, launch_ts=5, launch_dur=5,
                 launch_name="cudaGraphLaunch", correlation=77)  # fmt: skip
    b.kernel("Context Sync", 315, 1, stream=-1, cat="cuda_sync", launch_ts=30,
             launch_dur=290, launch_name="cudaDeviceSynchronize")  # fmt: skip
    cp, _ = analysis_of(b, tmp_path).critical_path_analysis(0, "ProfilerStep", 0)
    table = cp.get_critical_path_breakdown()
    assert table.loc[table["bound_by"] == "gpu_compute_bound", "s_name"].tolist() == [
        "g0",
        "g1",
        "g2",
    ]
    assert cp.length_us == 315  # 5 (op -> launch) + 10 (launch delay) + 3 x 100
    assert bound(cp) == {"cpu_bound": 5, "gpu_kernel_launch_overhead": 10, "gpu_compute_bound": 300}


@needs_shared
def test_large_trace_step_equals_the_reference():
    """diff_control (110K events), first ProfilerStep: what traceinsight 0.6.1 answers, measured
    side by side by benchmarks/bench_critical_path.py (39,243 µs)."""
    a = TraceAnalysis(trace_dir=SHARED_TRACES / "hta" / "diff_control", cache=False)
    cp, _ = a.critical_path_analysis(a.ranks[0], "ProfilerStep", 0)
    assert cp.length_us == 39_243
    assert bound(cp) == {
        "cpu_bound": 27_847, "gpu_compute_bound": 10_799, "gpu_kernel_kernel_overhead": 584,
        "gpu_kernel_launch_overhead": 13,
    }  # fmt: skip


@needs_shared
def test_graph_kernels_are_what_separates_us_from_the_reference_on_diff_test(monkeypatch):
    """diff_test, first step: with every graph-launched kernel but one per launch dropped, as
    the reference does, the answer is the reference's (56,324 µs, all CPU-bound); with them, the
    step is a GPU-bound chain (80,846 µs)."""
    from hta_lite.analyses.critical_path import path, window

    a = TraceAnalysis(trace_dir=SHARED_TRACES / "hta" / "diff_test", cache=False)
    cp, _ = a.critical_path_analysis(a.ranks[0], "ProfilerStep", 0)
    assert cp.length_us == 80_846 and set(bound(cp)) == {
        "gpu_compute_bound",
        "gpu_kernel_kernel_overhead",
    }

    def one_kernel_per_launch(trace, annotation, instance_id):
        w = window.select(trace, annotation, instance_id)
        launch = trace.gpu["launch_row"].to_numpy()[w.gpu]
        keep = np.zeros(len(w.gpu), bool)
        keep[np.unique(launch, return_index=True)[1]] = True
        keep |= (launch < 0) | (trace.gpu["name"].to_numpy()[w.gpu] == "Stream Wait Event")
        return window.Window(w.start, w.end, w.cpu, w.gpu[keep])

    monkeypatch.setattr(path, "select", one_kernel_per_launch)
    cp, _ = a.critical_path_analysis(a.ranks[0], "ProfilerStep", 0)
    assert cp.length_us == 56_324 and bound(cp) == {"cpu_bound": 56_324}
    assert len(cp.get_critical_path_breakdown()) == 6_287
