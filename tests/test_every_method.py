"""Every public method of TraceAnalysis: on a CPU-only trace and on a one-event trace it gives an
empty frame (with its columns), a NaN row where the reference's shape needs one, or a clear
TraceError, never None; and a filter argument that matches nothing is an error naming it."""

from __future__ import annotations

import inspect
from pathlib import Path

import pandas as pd
import pytest
from conftest import DATA
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.analyses.collectives.matching import Matching
from hta_lite.analyses.critical_path import CriticalPath
from hta_lite.analyses.job_path import JobCriticalPath
from hta_lite.analyses.stragglers import StragglerReport
from hta_lite.errors import MissingDataError, RankNotFoundError, SelectionError, TraceError

# method -> a call with defaults (analysis, output folder) -> result
CALLS = {
    "cpu_events": lambda a, out: a.cpu_events(a.ranks[0]),
    "gpu_events": lambda a, out: a.gpu_events(a.ranks[0]),
    "metadata": lambda a, out: a.metadata(a.ranks[0]),
    "trace": lambda a, out: a.trace(a.ranks[0]),
    "health": lambda a, out: a.health(),
    "health_summary": lambda a, out: a.health_summary(),
    "get_profiler_steps": lambda a, out: a.get_profiler_steps(),
    "get_temporal_breakdown": lambda a, out: a.get_temporal_breakdown(visualize=False),
    "get_idle_time_breakdown": lambda a, out: a.get_idle_time_breakdown(
        visualize=False, show_idle_interval_stats=True
    ),
    "get_comm_comp_overlap": lambda a, out: a.get_comm_comp_overlap(visualize=False),
    "get_gpu_idle_by_cause": lambda a, out: a.get_gpu_idle_by_cause(),
    "get_key_findings": lambda a, out: a.get_key_findings(),
    "get_findings": lambda a, out: a.get_findings(),
    "get_gpu_kernel_breakdown": lambda a, out: a.get_gpu_kernel_breakdown(visualize=False),
    "get_gpu_kernels_with_user_annotations": lambda a, out: a.get_gpu_kernels_with_user_annotations(
        a.ranks[0]
    ),
    "get_gpu_user_annotation_breakdown": lambda a, out: a.get_gpu_user_annotation_breakdown(
        visualize=False
    ),
    "get_step_breakdown": lambda a, out: a.get_step_breakdown(visualize=False),
    "get_queue_length_time_series": lambda a, out: a.get_queue_length_time_series(),
    "get_queue_length_summary": lambda a, out: a.get_queue_length_summary(),
    "get_queue_length_summary_from_time_series": lambda a, out: (
        a.get_queue_length_summary_from_time_series(a.get_queue_length_time_series())
    ),
    "get_time_spent_blocked_on_full_queue": lambda a, out: a.get_time_spent_blocked_on_full_queue(),
    "get_memory_bw_time_series": lambda a, out: a.get_memory_bw_time_series(),
    "get_memory_bw_summary": lambda a, out: a.get_memory_bw_summary(),
    "generate_trace_with_counters": lambda a, out: a.generate_trace_with_counters(output_dir=out),
    "get_cupti_counter_data_with_operators": lambda a, out: (
        a.get_cupti_counter_data_with_operators()
    ),
    "get_cuda_kernel_launch_stats": lambda a, out: a.get_cuda_kernel_launch_stats(visualize=False),
    "get_aten_op_kernels_and_delay": lambda a, out: a.get_aten_op_kernels_and_delay(),
    "get_frequent_cuda_kernel_sequences": lambda a, out: a.get_frequent_cuda_kernel_sequences(
        "aten::", out, rank=a.ranks[0]
    ),
    "get_annotation_timers": lambda a, out: a.get_annotation_timers(),
    "get_timers_across_ranks": lambda a, out: a.get_timers_across_ranks(),
    "timers_text": lambda a, out: a.timers_text(),
    "get_potential_stragglers": lambda a, out: a.get_potential_stragglers(),
    "get_straggler_report": lambda a, out: a.get_straggler_report(),
    "get_pipeline_stages": lambda a, out: a.get_pipeline_stages(visualize=True),
    "get_operator_instances": lambda a, out: a.get_operator_instances(),
    "get_operator_summary": lambda a, out: a.get_operator_summary(),
    "get_operator_roofline": lambda a, out: a.get_operator_roofline(device="H100 SXM"),
    "get_optimization_targets": lambda a, out: a.get_optimization_targets(device="H100 SXM"),
    "get_mfu": lambda a, out: a.get_mfu(device="H100 SXM"),
    "get_kernel_efficiency": lambda a, out: a.get_kernel_efficiency(),
    "get_graph_launches": lambda a, out: a.get_graph_launches(),
    "get_graph_kernels": lambda a, out: a.get_graph_kernels(),
    "get_collectives": lambda a, out: a.get_collectives(),
    "critical_path_analysis": lambda a, out: a.critical_path_analysis(a.ranks[0], "", None),
    "overlay_critical_path_analysis": lambda a, out: a.overlay_critical_path_analysis(
        a.ranks[0], a.critical_path_analysis(a.ranks[0], "", None)[0], out
    ),
    "get_critical_path_summary": lambda a, out: a.get_critical_path_summary(a.ranks[0], ""),
    "get_memory_events": lambda a, out: a.get_memory_events(),
    "get_memory_timeline": lambda a, out: a.get_memory_timeline(),
    "get_memory_peaks": lambda a, out: a.get_memory_peaks(),
    "get_memory_at_peak": lambda a, out: a.get_memory_at_peak(a.ranks[0]),
    "get_memory_lifetimes": lambda a, out: a.get_memory_lifetimes(),
    "get_memory_leaks": lambda a, out: a.get_memory_leaks(),
    "get_memory_by_operator": lambda a, out: a.get_memory_by_operator(),
    "get_memory_by_step": lambda a, out: a.get_memory_by_step(),
    "get_collective_summary": lambda a, out: a.get_collective_summary(),
    "get_step_anomalies": lambda a, out: a.get_step_anomalies(),
    "get_step_periodicity": lambda a, out: a.get_step_periodicity(),
    "get_job_step_anomalies": lambda a, out: a.get_job_step_anomalies(),
    "get_job_critical_path": lambda a, out: a.get_job_critical_path(),
    "overlay_job_critical_path": lambda a, out: a.overlay_job_critical_path(
        a.get_job_critical_path(), out
    ),
    "compare_steps": lambda a, out: a.compare_steps(*((a.get_profiler_steps() * 2 or [0, 0])[:2])),
}
# method -> a call whose filter matches nothing, and the error it must raise
NO_MATCH = {
    "get_temporal_breakdown": (
        lambda a: a.get_temporal_breakdown(False, ranks=[999]),
        RankNotFoundError,
    ),
    "get_idle_time_breakdown": (
        lambda a: a.get_idle_time_breakdown(streams=[999], visualize=False),
        SelectionError,
    ),
    "get_step_breakdown": (
        lambda a: a.get_step_breakdown(steps=[999], visualize=False),
        SelectionError,
    ),
    "get_annotation_timers": (lambda a: a.get_annotation_timers(["no such timer"]), SelectionError),
    "get_timers_across_ranks": (lambda a: a.get_timers_across_ranks(steps=[999]), SelectionError),
    "timers_text": (lambda a: a.timers_text(["no such timer"]), SelectionError),
    "get_potential_stragglers": (lambda a: a.get_potential_stragglers([999]), SelectionError),
    "get_straggler_report": (lambda a: a.get_straggler_report(steps=[999]), SelectionError),
    "get_pipeline_stages": (lambda a: a.get_pipeline_stages(steps=[999]), SelectionError),
    "get_gpu_user_annotation_breakdown": (
        lambda a: a.get_gpu_user_annotation_breakdown(False, False, allowlist_patterns=["no such"]),
        SelectionError,
    ),
    "get_aten_op_kernels_and_delay": (
        lambda a: a.get_aten_op_kernels_and_delay(sort_by=["no_column"]),
        SelectionError,
    ),
    "get_frequent_cuda_kernel_sequences": (
        lambda a: a.get_frequent_cuda_kernel_sequences("no such op", "/tmp"),
        SelectionError,
    ),
    "get_queue_length_time_series": (
        lambda a: a.get_queue_length_time_series([999]),
        RankNotFoundError,
    ),
    "get_memory_bw_summary": (lambda a: a.get_memory_bw_summary([999]), RankNotFoundError),
    "get_cuda_kernel_launch_stats": (
        lambda a: a.get_cuda_kernel_launch_stats([999], visualize=False),
        RankNotFoundError,
    ),
    "get_gpu_kernels_with_user_annotations": (
        lambda a: a.get_gpu_kernels_with_user_annotations(999),
        RankNotFoundError,
    ),
    "get_profiler_steps": (lambda a: a.get_profiler_steps(rank=999), RankNotFoundError),
    "gpu_events": (lambda a: a.gpu_events(999), RankNotFoundError),
    "get_operator_summary": (lambda a: a.get_operator_summary(ranks=[999]), RankNotFoundError),
    "get_operator_roofline": (lambda a: a.get_operator_roofline(device="no such"), SelectionError),
    "get_mfu": (lambda a: a.get_mfu(ranks=[999]), RankNotFoundError),
    "get_gpu_idle_by_cause": (lambda a: a.get_gpu_idle_by_cause([999]), RankNotFoundError),
    "get_kernel_efficiency": (lambda a: a.get_kernel_efficiency(by="no such"), SelectionError),
    "get_graph_launches": (lambda a: a.get_graph_launches(ranks=[999]), RankNotFoundError),
    "get_step_anomalies": (lambda a: a.get_step_anomalies(metric="no such"), SelectionError),
    "compare_steps": (lambda a: a.compare_steps(999, 998), SelectionError),
    "get_job_critical_path": (lambda a: a.get_job_critical_path(step=999), SelectionError),
}
# the answers that raise (docs/missing-data.md): object views without their data, selections that
# match nothing; a table view never raises MissingDataError (no rows and attrs["why"] instead)
CLEAR_ERRORS = {
    "get_frequent_cuda_kernel_sequences": SelectionError,  # no aten:: operator
    "compare_steps": SelectionError,  # no such step
    "get_job_critical_path": MissingDataError,  # an object view: no ProfilerStep
    "overlay_job_critical_path": MissingDataError,
}


def public_methods():
    return sorted(
        n for n, f in inspect.getmembers(TraceAnalysis, callable) if not n.startswith("_")
    )


def test_every_public_method_is_covered():
    assert sorted(CALLS) == public_methods()


def valid(result) -> bool:
    """An answer, never None: frames have their columns."""
    if result is None:
        return False
    if isinstance(result, pd.DataFrame):
        return len(result.columns) > 0
    if isinstance(result, tuple):
        return all(r is None or valid(r) for r in result)  # idle stats: None unless asked
    if isinstance(result, dict):
        return all(valid(v) for v in result.values()) if result else True
    if isinstance(result, list):
        return all(valid(v) for v in result) if result else True
    if isinstance(result, CriticalPath):
        return valid(result.get_critical_path_breakdown())
    if isinstance(result, JobCriticalPath):
        return all(valid(t) for t in (result.path(), result.summary(), result.hops()))
    if isinstance(result, Matching):
        return all(valid(t) for t in (result.calls, result.instances, result.problems))
    return isinstance(result, (str, int, Path, StragglerReport)) or hasattr(result, "gpu")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two small traces: CPU-only (a real gloo trace) and a single GPU kernel."""
    one = tmp_path_factory.mktemp("one_event")
    TraceBuilder().kernel("gemm", 10, 5).write(one / "rank0.json")
    return {
        "cpu_only": TraceAnalysis(trace_dir=DATA / "cpu_only", cache=False),
        "one_event": TraceAnalysis(trace_dir=one, cache=False),
    }


@pytest.mark.parametrize("kind", ["cpu_only", "one_event"])
@pytest.mark.parametrize("method", sorted(CALLS))
def test_tiny_traces_give_frames_or_clear_errors(tiny, kind, method, tmp_path):
    analysis = tiny[kind]
    try:
        result = CALLS[method](analysis, tmp_path)
    except TraceError as exc:
        assert isinstance(exc, CLEAR_ERRORS.get(method, ())), f"{method}: {exc!r}"
        assert str(exc)
        return
    assert valid(result), f"{method} on {kind}: {result!r}"


@pytest.mark.parametrize("method", sorted(NO_MATCH))
def test_filters_that_match_nothing_say_so(two_ranks, method):
    call, error = NO_MATCH[method]
    with pytest.raises(error) as raised:
        call(two_ranks)
    assert (
        "999" in str(raised.value)
        or "no such" in str(raised.value)
        or "no_column" in str(raised.value)
    )
