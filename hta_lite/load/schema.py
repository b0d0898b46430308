"""The event fields and ``args`` keys hta_lite reads: one declarative list, from which both decoders
are made — the msgspec structs of :mod:`hta_lite.load.decode` (``Event``, ``Args``,
``LenientArgs``) and the field specs handed to the C decoder at each call. A new input field is
one line here (and a column in :mod:`hta_lite.load.tables`).

Each field: the JSON key, the attribute name, its kind (the JSON types accepted; anything else
sends the trace to the lenient path) and the default of a row without the key.
"""

from __future__ import annotations

import enum
from typing import Any, Literal, NamedTuple

import msgspec

EMPTY_RAW = msgspec.Raw(b"")


class Kind(enum.IntEnum):
    """JSON types a field accepts (the numbers are the C decoder's ``enum kind``)."""

    PHASE = 0  # one of the Chrome trace phases
    OPT_STR = 1  # text or null
    INT_STR_NULL = 2  # integer, text or null
    INT_STR = 3  # integer or text
    FLOAT_STR = 4  # number or text
    TUPLE_STR_NULL = 5  # list of integers, text or null
    ANY = 6  # any JSON value
    RAW = 7  # any JSON value, kept as its JSON text (see events.raw_text)


class Field(NamedTuple):
    key: str
    name: str
    kind: Kind
    default: Any


# every phase of the Chrome trace format; as a Literal the decoder returns one shared string per
# phase (12% faster decoding, 2.5x faster grouping); any other value takes the lenient path
Phase = Literal[
    "", "X", "B", "E", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f", "P", "N",
    "O", "D", "M", "V", "v", "R", "c", "(", ")",
]  # fmt: skip

EVENT_FIELDS = (
    Field("ph", "ph", Kind.PHASE, ""),
    Field("cat", "cat", Kind.OPT_STR, None),
    Field("name", "name", Kind.OPT_STR, None),
    Field("pid", "pid", Kind.INT_STR_NULL, None),
    Field("tid", "tid", Kind.INT_STR_NULL, None),
    Field("id", "id", Kind.ANY, None),
    Field("s", "s", Kind.OPT_STR, None),
)
ARGS_FIELDS = (
    Field("stream", "stream", Kind.INT_STR, -1),
    Field("device", "device", Kind.INT_STR, -1),
    Field("correlation", "correlation", Kind.INT_STR, -1),
    Field("External id", "external_id", Kind.INT_STR, -1),
    Field("bytes", "bytes", Kind.INT_STR, -1),
    Field("memory bandwidth (GB/s)", "memory_bw_gbps", Kind.FLOAT_STR, float("nan")),
    Field("grid", "grid", Kind.TUPLE_STR_NULL, None),  # tuples can be grouped, lists cannot
    Field("block", "block", Kind.TUPLE_STR_NULL, None),
    # collectives (record_param_comms and NCCL kernels)
    Field("Collective name", "collective_name", Kind.OPT_STR, None),
    Field("In msg nelems", "in_msg_nelems", Kind.INT_STR, -1),
    Field("Out msg nelems", "out_msg_nelems", Kind.INT_STR, -1),
    Field("Group size", "group_size", Kind.INT_STR, -1),
    Field("dtype", "dtype", Kind.OPT_STR, None),
    Field("Process Group Name", "pg_name", Kind.OPT_STR, None),
    Field("Process Group Description", "pg_desc", Kind.OPT_STR, None),
    Field("Process Group Ranks", "pg_ranks", Kind.ANY, None),
    # operator inputs (cpu_op events recorded with record_shapes=True)
    Field("Input Dims", "input_dims", Kind.RAW, None),
    Field("Input type", "input_types", Kind.RAW, None),
    Field("Input Strides", "input_strides", Kind.RAW, None),
    Field("Concrete Inputs", "concrete_inputs", Kind.RAW, None),
    # autograd: a backward op's "Sequence number" is its forward op's (which has "Fwd thread id" 0)
    Field("Sequence number", "sequence_number", Kind.INT_STR, -1),
    Field("Fwd thread id", "fwd_thread_id", Kind.INT_STR, -1),
    # kernel launch efficiency (CUPTI, NVIDIA only)
    Field("blocks per SM", "blocks_per_sm", Kind.FLOAT_STR, float("nan")),
    Field("warps per SM", "warps_per_sm", Kind.FLOAT_STR, float("nan")),
    Field("est. achieved occupancy %", "occupancy_pct", Kind.FLOAT_STR, float("nan")),
    Field("registers per thread", "registers_per_thread", Kind.INT_STR, -1),
    Field("shared memory", "shared_memory", Kind.INT_STR, -1),
    # the kernel a launch call enqueues (ROCm's runtime events; read where a graph is captured,
    # since a captured launch runs no kernel the trace could name)
    Field("kernel", "launched_kernel", Kind.OPT_STR, None),
    # GPU-side waits (cuda_sync "Stream Wait Event" / "Event Sync"): the stream and the
    # cudaEventRecord call (its correlation) waited on
    Field("wait_on_stream", "wait_on_stream", Kind.INT_STR, -1),
    Field("wait_on_cuda_event_record_corr_id", "wait_on_record", Kind.INT_STR, -1),
    # allocator events ("[memory]" instants, recorded with profile_memory=True)
    Field("Device Type", "mem_device_type", Kind.ANY, None),
    Field("Device Id", "mem_device_id", Kind.ANY, None),
    Field("Addr", "mem_addr", Kind.ANY, None),
    Field("Bytes", "mem_bytes", Kind.ANY, None),
    Field("Total Allocated", "mem_total_allocated", Kind.ANY, None),
    Field("Total Reserved", "mem_total_reserved", Kind.ANY, None),
    # metadata ("M") events
    Field("name", "name", Kind.ANY, None),
    Field("labels", "labels", Kind.ANY, None),
    Field("sort_index", "sort_index", Kind.ANY, None),
)

_TYPES = {
    Kind.PHASE: Phase,
    Kind.OPT_STR: str | None,
    Kind.INT_STR_NULL: int | str | None,
    Kind.INT_STR: int | str,
    Kind.FLOAT_STR: float | str,
    Kind.TUPLE_STR_NULL: tuple[int, ...] | str | None,
    Kind.ANY: Any,
    Kind.RAW: msgspec.Raw,
}


def _lenient_type(kind: Kind) -> Any:
    return _TYPES[kind] if kind == Kind.RAW else Any  # JSON text either way


def _struct(name: str, fields: tuple[Field, ...], lenient: bool = False, extra=()) -> type:
    """A msgspec struct of the fields (typed, or any value when ``lenient``), no GC tracking."""
    members = [
        (
            f.name,
            _lenient_type(f.kind) if lenient else _TYPES[f.kind],
            msgspec.field(default=f.default, name=f.key),
        )
        for f in fields
    ]
    return msgspec.defstruct(name, [*members, *extra], gc=False)


#: the ``args`` keys hta_lite reads; every other key is skipped by the decoder
Args = _struct("Args", ARGS_FIELDS)
#: the same keys, any value type (the lenient path for odd traces)
LenientArgs = _struct("LenientArgs", ARGS_FIELDS, lenient=True)
#: one Chrome-trace event; ``ts`` / ``dur`` are the raw JSON text of the number
Event = _struct(
    "Event",
    EVENT_FIELDS,
    extra=(
        ("ts", msgspec.Raw, EMPTY_RAW),
        ("dur", msgspec.Raw, EMPTY_RAW),
        ("args", Args | None, None),  # LenientArgs on the lenient path
    ),
)

#: attribute names of the fields kept as JSON text
RAW_FIELDS = frozenset(f.name for f in (*EVENT_FIELDS, *ARGS_FIELDS) if f.kind == Kind.RAW)
EVENT_DEFAULTS = {f.name: f.default for f in EVENT_FIELDS}
ARGS_DEFAULTS = {f.name: f.default for f in ARGS_FIELDS}


def c_spec(fields: tuple[Field, ...]) -> tuple:
    """The fields as the C decoder takes them: ``(key, name, kind, default)`` tuples."""
    return tuple((f.key, f.name, int(f.kind), f.default) for f in fields)
