"""What the loader counts about a trace: every item has a code, a severity and a message.

The loader records counts by code (``note(health, "negative_dur", n)``; a code with a detail, such
as the arg whose values were not numbers, is recorded as ``"code:detail"``). The health table
(:mod:`hta_lite.analyses.health`) shows the code, the severity and the message; what counts as a
problem is decided by the severity, never by the wording. docs/health.md lists the items.

Severities: ``info`` (a fact about the trace), ``excluded`` (left out by design: the last
ProfilerStep), ``warning`` (something skipped, clamped, repaired or not linked: the numbers may
be affected), ``error`` (a file that could not be loaded).
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple


class Item(NamedTuple):
    severity: str
    message: str  # "{detail}" is replaced by the detail of "code:detail"


INFO, EXCLUDED, WARNING, ERROR = "info", "excluded", "warning", "error"
PROBLEMS = (WARNING, ERROR)

ITEMS: dict[str, Item] = {
    # reading and decoding
    "invalid_utf8": Item(
        WARNING, "invalid UTF-8 bytes or unpaired surrogate escapes (replaced by U+FFFD)"
    ),
    "repeated_events_key": Item(
        WARNING, "'traceEvents' given more than once (the last kept, as JSON readers do)"
    ),
    "non_finite_literal": Item(WARNING, "NaN/Infinity literals (read as null)"),
    "event_not_object": Item(WARNING, "event is not a JSON object"),
    "args_not_object": Item(WARNING, "'args' is not an object (args ignored)"),
    "field_converted_to_text": Item(WARNING, "non-string '{detail}' converted to text"),
    "field_not_int_or_text": Item(WARNING, "'{detail}' neither integer nor text (ignored)"),
    # tables
    "event_without_ph": Item(WARNING, "event without 'ph' (ignored)"),
    "unsupported_phase": Item(WARNING, "unsupported phase {detail} (ignored)"),
    "complete_without_ts": Item(WARNING, "complete event without a valid ts (dropped)"),
    "complete_without_dur": Item(WARNING, "complete event without a valid dur (dur set to 0)"),
    "negative_dur": Item(WARNING, "negative dur (clamped to 0)"),
    "negative_ts": Item(WARNING, "event with a negative ts, which Kineto never writes (dropped)"),
    "time_past_limit": Item(
        WARNING, "event with a ts or dur of 2**62 ns or more (past year 2116; dropped)"
    ),
    "implausible_dur": Item(
        WARNING, "complete event with implausible dur (> 10x the trace span; dropped)"
    ),
    "subns_truncated": Item(WARNING, "sub-nanosecond digits truncated"),
    "instant_without_ts": Item(WARNING, "instant event without a valid ts (dropped)"),
    "flow_without_ts": Item(WARNING, "flow event without a valid ts (dropped)"),
    "counter_without_ts_or_args": Item(WARNING, "counter event without valid ts or args (dropped)"),
    "profiler_range_without_ts": Item(WARNING, "CUPTI profiler range without a valid ts (dropped)"),
    "counter_not_numeric": Item(WARNING, "non-numeric CUPTI counter '{detail}' (stored as NaN)"),
    "arg_not_numeric": Item(WARNING, "non-numeric or out-of-range args.{detail} (stored as -1)"),
    "text_id": Item(INFO, "text {detail} (stored as -1)"),
    # links and the step window
    "shared_correlation": Item(
        WARNING, "runtime calls sharing a correlation id (first kept for linking)"
    ),
    "gpu_without_launch": Item(WARNING, "GPU events without a launching call in the trace"),
    "gpu_before_launch": Item(
        WARNING, "GPU events starting before their launch call (clock skew; queued at GPU start)"
    ),
    "launch_without_gpu": Item(WARNING, "launch calls without a GPU event in the trace"),
    "gpu_overlap_on_stream": Item(
        WARNING,
        "GPU events overlapping an earlier event on the same stream (the earlier ends clipped"
        " to the next start: {detail} µs removed)",
    ),
    "gpu_overlap_dependent_launch": Item(
        INFO,
        "kernels starting before the previous one on their stream ended, launched with"
        " cudaLaunchKernelEx (programmatic dependent launch: expected)",
    ),
    "gpu_overlap_in_graph": Item(
        INFO,
        "graph kernels overlapping on the graph's stream (its parallel branches: expected)",
    ),
    "gpu_outside_steps": Item(
        EXCLUDED, "GPU events without a launching call (outside the profiled steps, excluded)"
    ),
    "profiler_step_empty": Item(
        WARNING,
        "ProfilerSteps of zero length (a negative duration clamped to 0): no event belongs to"
        " them, so their events count as outside every step",
    ),
    "profiler_step_out_of_order": Item(
        WARNING,
        "ProfilerSteps out of number order (a step starting before a lower-numbered one, which"
        " cannot be: a damaged ts): dropped, their events outside every step",
    ),
    "profiler_step_past_window": Item(
        WARNING,
        "ProfilerSteps ending after the profiler's record window ended (Record Window End),"
        " which cannot be: cut there",
    ),
    "cpu_in_last_step": Item(EXCLUDED, "CPU events in the last ProfilerStep (excluded)"),
    "cpu_after_last_step": Item(EXCLUDED, "CPU events after the last ProfilerStep (excluded)"),
    "gpu_in_last_step": Item(EXCLUDED, "GPU events launched in the last ProfilerStep (excluded)"),
    "gpu_after_last_step": Item(
        EXCLUDED, "GPU events launched after the last ProfilerStep (excluded)"
    ),
    "annotations_outside_steps": Item(
        EXCLUDED, "GPU annotations outside the profiled steps (excluded)"
    ),
    # analyses that found the trace inconsistent
    "cp_negative_edge": Item(
        WARNING,
        "critical path: dependencies running backwards in time (a kernel starting before the"
        " previous one on its stream ended, an out-of-order call stack; weight set to 0)",
    ),
    "cp_cycle_edge_cut": Item(
        WARNING, "critical path: dependencies cut to break a cycle (inconsistent trace)"
    ),
    "memory_total_negative": Item(
        WARNING,
        "[memory] events with a negative Total Allocated or Total Reserved, which cannot be"
        " (the running total of Bytes is used)",
    ),
    "shape_invalid": Item(
        WARNING,
        "{detail} calls whose input shapes cannot be (negative or non-integer dims, more elements"
        " than int64 holds, a shape or type text that cannot be read): FLOPs and bytes not"
        " modelled (NaN)",
    ),
    "collective_metadata_invalid": Item(
        WARNING,
        "collectives whose '{detail}' cannot be (a list of ranks cut short, a negative count,"
        " more bytes than int64 holds): taken as not recorded, read from another place",
    ),
    "collective_metadata_disagrees": Item(
        WARNING,
        "collectives of {detail} whose collective, dtype or size differ from the other ranks'"
        " (measured with the majority's)",
    ),
    "clock_offset": Item(
        WARNING,
        "collectives this rank's calls lie apart in, which cannot be: its clock is {detail} the"
        " others' (left out of waits and stragglers)",
    ),
    "above_roof": Item(
        WARNING,
        "{detail}: achieved above the device's roof, which cannot be (a wrong device peak: pass"
        " device=; or a FLOP model that counts more than the kernels do)",
    ),
    "above_peak": Item(
        WARNING,
        "MFU above 100 % ({detail}), which cannot be (a wrong device peak: pass device=; or a"
        " wrong FLOP model)",
    ),
    "graph_replay_unmapped": Item(
        WARNING,
        "GPU events replayed by CUDA / HIP graph launches ({detail}) that no operator is mapped"
        " to: [graph replay] in the operator views, not modelled by roofline and MFU (pass"
        " graph_capture= a trace of the graph's capture or of an eager run)",
    ),
    "graph_replay_ambiguous": Item(
        WARNING,
        "graph launches that {detail} traces of captures or eager runs match equally well: the"
        " first is used, whose shapes (and FLOPs) may be another batch size's",
    ),
    "memory_total_mismatch": Item(
        WARNING,
        "[memory] events whose Total Allocated is not the running total of Bytes (events lost"
        " or out of order)",
    ),
    # the cache of parsed ranks
    "cache_rebuilt": Item(
        WARNING,
        "cache entry not as written ({detail}: cut, edited or corrupt): rebuilt from the trace"
        " file",
    ),
    # ranks
    "windows_joined": Item(
        INFO, "files of this rank joined into one series of steps (profiled windows, time order)"
    ),
    "rank_from_file_name": Item(INFO, "rank taken from the file name (no distributedInfo.rank)"),
    "fused_file": Item(INFO, "ranks in the file this rank was read from (a fused trace)"),
    "rank_from_process_name": Item(INFO, "rank taken from a process name (RANK n) of a fused file"),
    "fused_row_without_rank": Item(
        WARNING, "rows of a fused file in no process named after a rank (dropped)"
    ),
    "event_list_file": Item(
        INFO, "top level is a list of events (legacy export): no header (rank, devices) in the file"
    ),
    "rank_from_nccl": Item(
        INFO,
        "rank taken from NCCL's payload at its largest communicator's creation (one rank per"
        " process)",
    ),
    "rank_by_process_order": Item(
        INFO, "rank taken from the order of the file's processes (one rank per process)"
    ),
    "nsys_other_process_rows": Item(
        INFO, "runtime calls / NVTX ranges of processes without GPU work (left out)"
    ),
    "nsys_runtime_rows_skipped": Item(
        INFO, "runtime rows of other event classes (backtraces: repeated correlation ids; left out)"
    ),
    "nsys_string_missing": Item(WARNING, "names whose StringIds entry is missing (name absent)"),
    "nsys_no_session_start": Item(
        WARNING, "no session start time: times are from the capture's start, not wall-clock"
    ),
    "nsys_time_out_of_range": Item(
        WARNING, "rows with a negative time or duration, or past 2**62 ns (dropped)"
    ),
    "steps_named": Item(INFO, "steps are the ranges named {detail} (step_range)"),
    "steps_from_range": Item(
        INFO, "steps taken from the repeating outermost range {detail} (NVTX or record_function)"
    ),
    "steps_from_kernels": Item(
        INFO,
        "no repeating range: steps are the repetitions of the GPU work, each with a"
        " host wait, marked by the kernel {detail}, from one host resume to the next (the first"
        " repetition, whose start on the host is not known, is in none; step_range names the"
        " range of a step)",
    ),
    "steps_whole_capture": Item(
        INFO, "no repeating outermost NVTX range or GPU work: the whole capture is one step"
    ),
    "steps_renumbered": Item(
        INFO,
        "found steps renumbered by {detail} to the other ranks' iterations (this rank's capture"
        " starts at another iteration)",
    ),
    "steps_numbered_per_capture": Item(
        INFO,
        "pipeline stages: found steps numbered from the start of each rank's capture (step N is"
        " one iteration on every rank only where every capture began at the same iteration, as"
        " Megatron-LM's --profile-step-start makes it; a stage runs an iteration about a step"
        " after the stage before it, so time cannot tell)",
    ),
    "steps_not_aligned": Item(
        WARNING,
        "found steps that do not start with rank {detail}'s steps: step N may not be the same"
        " iteration on every rank (step_range=... names one range for all)",
    ),
    "profiler_steps_apart": Item(
        WARNING,
        "ProfilerStep N starts with {detail}: the programs numbered their steps apart (one"
        " called prof.step() more often) or the clocks are apart by most of a step, so the"
        " cross-rank views compare other iterations",
    ),
    "nvtx_operator_ranges": Item(INFO, "NVTX ranges read as operators (emit_nvtx)"),
    "nccl_payloads_absent": Item(
        INFO,
        "NCCL kernels without NCCL's NVTX payloads (NCCL 2.19+, exported with"
        " --include-blobs=true): collective sizes and communicators unknown",
    ),
    "nccl_payload_unreadable": Item(
        WARNING, "NCCL NVTX payloads or schema entries that cannot be read (skipped)"
    ),
    "nccl_group_mixed": Item(
        INFO,
        "NCCL groups (ncclGroupStart ... ncclGroupEnd) whose calls use several communicators or"
        " operations: the sizes of their kernels unknown",
    ),
    "nsys_report_exported": Item(INFO, "Nsight Systems report exported to SQLite with `nsys`"),
    "nsys_export_gunzipped": Item(INFO, "gzipped Nsight Systems export gunzipped to read it"),
    "nvtx_range_without_end": Item(WARNING, "NVTX ranges never closed (dropped)"),
    "nvtx_without_text": Item(INFO, "NVTX ranges without a name"),
    "rank_assigned": Item(
        INFO, "rank assigned by file order (no distributedInfo.rank, no rank in name)"
    ),
    # facts the health table adds
    "events_read": Item(INFO, "events read, {detail}"),
    "gpu_events_kept": Item(INFO, "GPU events kept"),
    "cpu_events_kept": Item(INFO, "CPU events kept"),
    "profiler_steps": Item(INFO, "ProfilerSteps"),
    "cpu_only": Item(INFO, "no GPU events (CPU-only trace)"),
    "no_profiler_step": Item(WARNING, "no ProfilerStep in the trace (iterations unknown)"),
    "steps_unlike_other_ranks": Item(
        WARNING,
        "this rank's steps are {detail}, another rank's are found otherwise: step N may not be"
        " the same iteration on every rank (step_range=... names one range for all)",
    ),
    "no_distributed_info": Item(INFO, "no distributedInfo in the trace"),
    "file_skipped": Item(ERROR, "file skipped: {detail}"),
}


def note(health: Counter, code: str, count: int, detail: str | None = None) -> None:
    """Add ``count`` (when positive) to ``code`` (``code:detail`` with a detail)."""
    if code not in ITEMS:
        raise KeyError(f"unknown health item {code!r}")  # a typo in hta_lite, not in a trace
    if count > 0:
        health[code if detail is None else f"{code}:{detail}"] += int(count)


def record(health: Counter, code: str, count: int, detail: str | None = None) -> None:
    """Set ``code`` (``code:detail``) to ``count`` when positive: for what an analysis finds,
    which may run again on the same trace (``note`` would count it twice)."""
    if code not in ITEMS:
        raise KeyError(f"unknown health item {code!r}")
    if count > 0:
        health[code if detail is None else f"{code}:{detail}"] = int(count)


def describe(key: str) -> tuple[str, str, str]:
    """``(code, severity, message)`` of a recorded key (``code`` or ``code:detail``)."""
    code, _, detail = key.partition(":")
    item = ITEMS[code]
    return code, item.severity, item.message.format(detail=detail)
