"""The Kineto vocabulary (hta_lite.kineto) against the traces we have."""

from __future__ import annotations

import pytest
from conftest import sample_folders, shared_cases
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.kineto import GRAPH_LAUNCH_NAMES, LAUNCH_NAMES, NON_ENQUEUING_NAMES

FOLDERS = {**sample_folders(), **shared_cases()}


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_every_call_linked_to_gpu_work_is_known(name):
    """Each runtime/driver call correlated with a GPU event is a known launch, a graph launch or
    listed as enqueuing no work; an unknown one would silently vanish from the queue model."""
    analysis = TraceAnalysis(
        trace_dir=FOLDERS[name], parallel=False, cache=False, include_last_profiler_step=True
    )
    known = set(LAUNCH_NAMES) | set(GRAPH_LAUNCH_NAMES) | set(NON_ENQUEUING_NAMES)
    for trace in analysis.traces.values():
        launch = trace.gpu["launch_row"].to_numpy()
        calls = set(trace.cpu["name"].iloc[launch[launch >= 0]].astype(str))
        assert calls <= known, f"{name}: calls neither launches nor listed: {calls - known}"


def test_vocabulary_lists_are_disjoint():
    assert not set(LAUNCH_NAMES) & set(NON_ENQUEUING_NAMES)
    assert not set(GRAPH_LAUNCH_NAMES) & (set(LAUNCH_NAMES) | set(NON_ENQUEUING_NAMES))


def test_hip_ext_launch_kernel_enqueues(tmp_path):
    """RCCL kernels are launched with hipExtLaunchKernel: their stream is in the queue model."""
    b = TraceBuilder()
    b.kernel(
        "ncclDevKernel_AllReduce", 10, 5, stream=4, launch_ts=1, launch_name="hipExtLaunchKernel"
    )
    b.kernel(
        "ncclDevKernel_AllReduce", 20, 5, stream=4, launch_ts=2, launch_name="hipExtLaunchKernel"
    )
    b.write(tmp_path / "rank0.json")
    analysis = TraceAnalysis(trace_dir=tmp_path, parallel=False, cache=False)
    summary = analysis.get_queue_length_summary()
    assert summary.loc[(0, 4), ("queue_length", "max")] == 2
    series = analysis.get_queue_length_time_series()[0]
    assert series["queue_length"].tolist() == [1, 2, 1, 0]
