"""The table contract: every column of every table a reader produces, written once.

Each reader (:mod:`hta_lite.load.readers`) gives a rank's tables with the columns marked
``reader``; the finishing step (:mod:`hta_lite.load.finish`) adds those marked ``finish``.
Analyses read only these. The vocabulary of ``cat`` and ``name`` is Kineto's
(:mod:`hta_lite.kineto`): a reader of another format writes its events in those words (a CUDA
kernel is ``cat="kernel"``, a launch call ``cat="cuda_runtime"``, ``name="cudaLaunchKernel"``).

Conventions: times (``ts``) and durations (``dur``) are int64 nanoseconds, ``ts`` on the
trace's clock (Kineto: since the epoch); absent integers are -1 (``Int64`` columns: missing);
text is categorical; row links (``*_row``) are row numbers of a table of the same rank, -1 for
none. docs/tables.md shows this spec; ``tests/test_contract.py`` checks every reader's output
against it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

#: the ``name`` of a capture's one step where it has none and nothing repeats (the whole capture)
WHOLE_CAPTURE = "capture"
#: ... and of its steps when they are the repetitions of its GPU work (steps_from_gpu_work)
REPEATS = "iteration (repeating GPU work)"


@dataclass(frozen=True)
class Column:
    """One column: ``dtype`` as pandas names it, ``unit`` ("" for none), who sets it
    (``reader`` or ``finish``), whether a reader must give values (``required``; an optional
    column is there with its absent value where a format does not record it) and the views
    that need it."""

    name: str
    dtype: str
    unit: str
    meaning: str
    needed_by: str = ""
    required: bool = False
    set_by: str = "reader"


@dataclass(frozen=True)
class Table:
    name: str
    meaning: str
    columns: tuple[Column, ...]
    #: columns beyond ``columns``, by dtype, and what they are (e.g. one per CUPTI counter)
    more: tuple[str, str] | None = None

    def column_names(self, set_by: str | None = None) -> list[str]:
        return [c.name for c in self.columns if set_by is None or c.set_by == set_by]


C = Column
_EVENT = (
    C("ts", "int64", "ns", "start", "every time view", required=True),
    C("dur", "int64", "ns", "duration (>= 0)", "every time view", required=True),
    C("name", "category", "", "event name (kernel, call, operator, range)", "all", required=True),
    C("cat", "category", "", "Kineto category (kernel, gpu_memcpy, cuda_runtime, cpu_op, ...;"
      " absent: none written)", "all"),
    C("pid", "int64", "", "process (GPU: device index)", "thread views, memory"),
    C("tid", "int64", "", "thread (GPU: stream)", "critical path, call stacks"),
    C("stream", "int64", "", "GPU stream", "queue length, overlap, critical path"),
    C("correlation", "int64", "", "id shared by a runtime call and the GPU work it launched",
      "launch links, launches, critical path"),
    C("external_id", "int64", "", "id shared by an operator and its runtime calls",
      "HTA compatibility"),
)  # fmt: skip
_COLLECTIVE = (
    C("group_size", "int64", "ranks", "process group size recorded with the collective",
      "collectives"),
    C("in_msg_nelems", "int64", "elements", "input message size", "collectives"),
    C("out_msg_nelems", "int64", "elements", "output message size", "collectives"),
    C("collective_name", "category", "", "allreduce, allgather, send, ...", "collectives"),
    C("dtype", "category", "", "element type", "collectives, bandwidth"),
    C("pg_name", "category", "", "process group name", "collectives"),
    C("pg_desc", "category", "", "process group description", "collectives"),
    C("pg_ranks", "category", "", "process group ranks (JSON list text)", "collectives"),
)  # fmt: skip

TABLES: dict[str, Table] = {t.name: t for t in (
    Table("gpu", "work on the GPU: kernels, copies, sets, GPU-side syncs (cat cuda_sync)", (
        *_EVENT,
        C("device", "int64", "", "GPU index", "memory, MFU"),
        C("bytes", "int64", "bytes", "bytes copied or set", "memory bandwidth, copies"),
        C("memory_bw_gbps", "float64", "GB/s", "copy bandwidth as recorded", "memory bandwidth"),
        C("blocks_per_sm", "float64", "", "launch blocks per SM", "kernel efficiency"),
        C("warps_per_sm", "float64", "", "launch warps per SM", "kernel efficiency"),
        C("occupancy_pct", "float64", "%", "estimated achieved occupancy", "kernel efficiency"),
        C("registers_per_thread", "int64", "", "registers per thread", "kernel efficiency"),
        C("shared_memory", "int64", "bytes", "shared memory per block", "kernel efficiency"),
        C("wait_on_stream", "int64", "", "stream a Stream Wait Event waits for",
          "critical path"),
        C("wait_on_record", "int64", "", "correlation of the event record waited for",
          "critical path"),
        C("grid", "category", "", "grid dimensions ([x, y, z] text)", "kernels"),
        C("block", "category", "", "block dimensions ([x, y, z] text)", "kernels"),
        *_COLLECTIVE,
        C("launch_row", "int64", "row", "the cpu row of the call that launched it",
          "launches, critical path, operators", set_by="finish"),
        C("iteration", "int64", "", "step of its launch (-1: outside the steps)",
          "per-step views", set_by="finish"),
        C("kernel_type", "category", "", "COMPUTATION, COMMUNICATION, MEMORY or OTHER",
          "temporal, overlap, kernels", set_by="finish"),
    )),
    Table("cpu", "host events: operators, runtime and driver calls, annotations, Python frames", (
        *_EVENT,
        C("input_dims", "category", "", "operator input shapes (JSON text)", "operators"),
        C("input_types", "category", "", "operator input types (JSON text)", "operators"),
        C("input_strides", "category", "", "operator input strides (JSON text)", "operators"),
        C("concrete_inputs", "category", "", "operator scalar inputs (JSON text)",
          "operators, collectives"),
        C("sequence_number", "int64", "", "autograd sequence number", "forward/backward"),
        C("fwd_thread_id", "int64", "", "forward thread of a backward op", "forward/backward"),
        C("launched_kernel", "category", "", "kernel a graph capture launched",
          "graph replays"),
        *_COLLECTIVE,
        C("msg_bytes", "int64", "bytes", "message size of an NCCL call's NVTX payload (Nsight"
          " Systems: a reduce_scatter's output, other collectives' input)", "collectives"),
        C("iteration", "int64", "", "step it falls in (-1: outside)", "per-step views",
          set_by="finish"),
        C("depth", "int64", "", "nesting depth on its thread (0: outermost)", "call stacks",
          set_by="finish"),
        C("parent_row", "int64", "row", "the enclosing cpu row on its thread",
          "call stacks, operators", set_by="finish"),
        C("op_row", "int64", "row", "the cpu_op enclosing a runtime call", "operators",
          set_by="finish"),
        C("forward_row", "int64", "row", "a backward operator's forward operator (fwdbwd flows,"
          " else the autograd sequence number)", "operators (shapes, FLOPs, modules)",
          set_by="finish"),
    )),
    Table("gpu_annotations", "user ranges as the GPU ran them (gpu_user_annotation)", (
        *_EVENT,
        C("device", "int64", "", "GPU index", "annotations"),
        C("iteration", "int64", "", "step it starts in", "annotations", set_by="finish"),
    )),
    Table("steps", "the steps (ProfilerStep#N ranges, a reader's own, else found: a repeating"
          " range or loop)", (
        C("step", "int64", "", "step number", "per-step views", required=True),
        C("ts", "int64", "ns", "start", "per-step views", required=True),
        C("dur", "int64", "ns", "duration", "per-step views", required=True),
        C("name", "str", "", "the range's name", "per-step views", required=True),
    )),
    Table("instants", "instant events (allocator [memory] events among them)", (
        C("ts", "int64", "ns", "time", "memory", required=True),
        C("name", "category", "", "event name", "memory", required=True),
        C("cat", "category", "", "category", "memory"),
        C("pid", "int64", "", "process", "memory"),
        C("tid", "int64", "", "thread", "memory"),
        C("scope", "category", "", "instant scope (g, p, t)", ""),
        C("mem_device_type", "Int64", "", "allocator device type (1: CUDA)", "memory"),
        C("mem_device_id", "Int64", "", "allocator device index", "memory"),
        C("mem_addr", "Int64", "", "address allocated or freed", "memory lifetimes"),
        C("mem_bytes", "Int64", "bytes", "bytes allocated (> 0) or freed (< 0)", "memory"),
        C("mem_total_allocated", "Int64", "bytes", "allocated after it", "memory timeline"),
        C("mem_total_reserved", "Int64", "bytes", "reserved after it", "memory timeline"),
    )),
    Table("flows", "flow arrows (s/f/t): forward-backward links among them", (
        C("ts", "int64", "ns", "time", "forward/backward", required=True),
        C("ph", "category", "", "s, f or t", "forward/backward", required=True),
        C("id", "int64", "", "flow id", "forward/backward", required=True),
        C("cat", "category", "", "category (fwdbwd, ac2g)", "forward/backward"),
        C("pid", "int64", "", "process", "forward/backward"),
        C("tid", "int64", "", "thread", "forward/backward"),
    )),
    Table("counters", "counter series (C events), one row per value", (
        C("ts", "int64", "ns", "time", "counters", required=True),
        C("name", "category", "", "counter name", "counters", required=True),
        C("pid", "int64", "", "process", "counters"),
        C("series", "category", "", "series of the counter", "counters", required=True),
        C("value", "float64", "", "value", "counters", required=True),
    )),
    Table("meta_events", "process and thread names (M events)", (
        C("name", "category", "", "process_name, thread_name, ...", "health", required=True),
        C("pid", "int64", "", "process", "health"),
        C("tid", "int64", "", "thread", "health"),
        C("value", "category", "", "the name given", "health"),
    )),
    Table("kernel_counters", "kernels replayed by the CUPTI range profiler, with their counters", (
        C("ts", "int64", "ns", "replay start", "CUPTI counters", required=True),
        C("dur", "int64", "ns", "replay duration", "CUPTI counters", required=True),
        C("name", "category", "", "kernel name", "CUPTI counters", required=True),
        C("pid", "int64", "", "process", "CUPTI counters"),
        C("tid", "int64", "", "thread", "CUPTI counters"),
    ), more=("float64", "one column per counter, named as CUPTI names it")),
)}  # fmt: skip
del C

C = Column
#: the tables of a CUDA memory snapshot (:mod:`hta_lite.load.readers.snapshot`; built by
#: :mod:`hta_lite.load.readers.snapshot_tables`), read by :class:`hta_lite.MemorySnapshot`
SNAPSHOT_TABLES: dict[str, Table] = {t.name: t for t in (
    Table("segments", "the allocator's segments at the dump", (
        C("device", "int64", "", "GPU index", "all", required=True),
        C("address", "int64", "", "segment address", "OOM, fragmentation", required=True),
        C("total_size", "int64", "bytes", "reserved", "summary", required=True),
        C("allocated_size", "int64", "bytes", "allocated in it", "summary"),
        C("active_size", "int64", "bytes", "active in it", "summary"),
        C("requested_size", "int64", "bytes", "requested by its allocations", "summary"),
        C("stream", "int64", "", "stream", "OOM"),
        C("segment_type", "str", "", "large or small", "summary"),
        C("pool", "str", "", "memory pool ((0, 0): the default; others CUDA graphs')", "summary"),
        C("is_expandable", "object", "", "expandable segment (True / False / None)", "summary"),
        C("blocks", "int64", "", "blocks in it", "summary"),
        C("site", "str", "", "where it was allocated", "sites"),
    )),
    Table("blocks", "the blocks of every segment", (
        C("device", "int64", "", "GPU index", "all", required=True),
        C("segment", "int64", "row", "its row of segments", "fragmentation", required=True),
        C("address", "int64", "", "block address", "OOM", required=True),
        C("size", "int64", "bytes", "block size", "all", required=True),
        C("requested_size", "int64", "bytes", "bytes requested", "summary"),
        C("state", "str", "", "active_allocated, active_pending_free or inactive", "all",
          required=True),
        C("stream", "int64", "", "stream", "OOM"),
        C("pool", "str", "", "memory pool", "summary"),
        C("site", "str", "", "where it was allocated", "sites"),
    )),
    Table("entries", "the allocator's trace (ring buffer) of each device, in order", (
        C("device", "int64", "", "GPU index", "timeline", required=True),
        C("index", "int64", "", "position in the device's trace", "timeline", required=True),
        C("action", "category", "", "alloc, free_requested, segment_alloc, oom, ...",
          "timeline, OOM", required=True),
        C("addr", "int64", "", "address", "timeline"),
        C("size", "int64", "bytes", "bytes", "timeline"),
        C("stream", "int64", "", "stream", "timeline"),
        C("time_us", "int64", "µs", "time (-1: not recorded, PyTorch 2.0)", "timeline"),
        C("device_free", "int64", "bytes", "free on the device at an oom entry (-1 elsewhere)",
          "OOM"),
    )),
)}  # fmt: skip
del C

#: the tables a reader gives (``steps``: optional, found from ProfilerStep# when absent)
READ_TABLES = tuple(name for name in TABLES if name != "steps")


#: how pandas spells a contract dtype: text is ``str`` in pandas 3, ``object`` in pandas 2
_SPELLINGS = {"str": ("str", "object")}


def problems(name: str, df: pd.DataFrame, stage: str = "finish", values: bool = True) -> list[str]:
    """What in ``df`` breaks the contract of table ``name`` at ``stage`` (``"reader"``: a
    reader's output, ``"finish"``: a linked trace's): a missing, extra or mistyped column, and
    with ``values`` a required column with absent values, a negative time or duration. Empty
    when it holds."""
    spec = TABLES[name] if name in TABLES else SNAPSHOT_TABLES[name]
    expected = [c for c in spec.columns if stage == "finish" or c.set_by == "reader"]
    out = []
    names = [c.name for c in expected]
    missing = [n for n in names if n not in df.columns]
    extra = [n for n in df.columns if n not in names]
    dtypes = dict(zip(df.columns, map(str, df.dtypes)))
    if spec.more is not None:
        extra = [n for n in extra if dtypes[n] != spec.more[0]]
    if missing:
        out.append(f"{name}: missing columns {missing}")
    if extra:
        out.append(f"{name}: columns not in the contract {extra}")
    for column in expected:
        if column.name not in df.columns:
            continue
        dtype = dtypes[column.name]
        if dtype not in _SPELLINGS.get(column.dtype, (column.dtype,)):
            out.append(f"{name}.{column.name}: dtype {dtype}, contract {column.dtype}")
            continue
        if not values:
            continue
        column_values = df[column.name]
        if column.required and column_values.isna().any():
            absent = int(column_values.isna().sum())
            out.append(f"{name}.{column.name}: required, {absent} absent")
        if column.name in ("ts", "dur") and len(column_values) and int(column_values.min()) < 0:
            out.append(f"{name}.{column.name}: negative values")
    return out


def markdown(tables: dict[str, Table] = TABLES) -> str:
    """The contract of ``tables`` as the Markdown tables of docs/tables.md."""
    lines = []
    for table in tables.values():
        lines += [f"### `{table.name}`", "", table.meaning[0].upper() + table.meaning[1:] + ".", ""]
        lines += [
            "| column | dtype | unit | set by | meaning | needed by |",
            "|---|---|---|---|---|---|",
        ]
        for c in table.columns:
            required = " (required)" if c.required else ""
            lines.append(f"| `{c.name}` | {c.dtype} | {c.unit} | {c.set_by} | {c.meaning}{required}"
                         f" | {c.needed_by} |")  # fmt: skip
        if table.more is not None:
            lines.append(f"| (more) | {table.more[0]} | | reader | {table.more[1]} | |")
        lines.append("")
    return "\n".join(lines)


#: the absent value of each dtype, for the columns a reader does not give
_ABSENT = {"int64": -1, "float64": np.nan, "Int64": pd.NA, "str": ""}


def frame(name: str, columns: dict, rows: int) -> pd.DataFrame:
    """Table ``name`` of ``rows`` rows as a reader gives it: the contract's ``reader`` columns
    in order, ``columns`` (arrays, or one value for every row) converted to their dtype, the
    others filled with their absent value (-1, NaN, missing). For readers of formats other
    than Kineto, which build their tables from arrays."""
    spec = TABLES[name]
    out = {}
    for column in spec.columns:
        if column.set_by != "reader":
            continue
        value = columns.get(column.name)
        if column.dtype == "category":
            if isinstance(value, pd.Categorical):
                pass
            elif value is None:
                value = pd.Categorical.from_codes(np.full(rows, -1, np.int8), dtype=_NO_TEXT)
            else:
                value = pd.Categorical(np.broadcast_to(np.asarray(value, object), (rows,)))
        elif value is None:
            absent = _ABSENT[column.dtype]
            value = (
                pd.array([absent] * rows, dtype="Int64") if column.dtype == "Int64"
                else np.full(rows, absent, column.dtype)
            )  # fmt: skip
        else:  # pandas copies a dict's arrays into its blocks: one value is broadcast, no more
            value = np.asarray(value, column.dtype)
            value = value if value.shape == (rows,) else np.broadcast_to(value, (rows,)).copy()
        out[column.name] = value
    return pd.DataFrame(out)


_NO_TEXT = pd.CategoricalDtype(pd.Index([], dtype="str"))
