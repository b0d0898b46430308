"""What a rank's file says about its run, typed: rank, world size, process groups, devices,
backend, source format. Analyses read this (``trace.meta``), never the file's raw header.

Built from a Kineto header (``distributedInfo``, ``deviceProperties``, ...) by
:meth:`TraceMetadata.from_kineto`; a reader of another format builds one from what it has. A
value the file does not give is None (a tuple: empty), never a guess; values of the wrong type
are read as absent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .ranks import RANK_LIMIT


def _int(value: Any, low: int = 0, high: int = 2**62) -> int | None:
    """``value`` as an int in ``[low, high)``, None otherwise (text of digits too)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        value = int(value)
    if type(value) is not int or not low <= value < high:
        return None
    return value


@dataclass(frozen=True)
class Device:
    """One GPU as the file describes it (Kineto: a ``deviceProperties`` entry)."""

    index: int | None
    name: str
    total_memory: int | None  # bytes
    sm_count: int | None
    compute_capability: tuple[int, int] | None

    @classmethod
    def from_kineto(cls, props: dict) -> Device:
        major, minor = _int(props.get("computeMajor")), _int(props.get("computeMinor"))
        return cls(
            index=_int(props.get("id")),
            name=str(props.get("name") or ""),
            total_memory=_int(props.get("totalGlobalMem")),
            sm_count=_int(props.get("numSms")),
            compute_capability=None if major is None or minor is None else (major, minor),
        )


@dataclass(frozen=True)
class ProcessGroup:
    """A process group this rank belongs to (Kineto: a ``distributedInfo.pg_config`` entry)."""

    name: str | None
    description: str
    ranks: tuple[int, ...]
    size: int | None
    backend: str

    @classmethod
    def from_kineto(cls, group: dict) -> ProcessGroup:
        ranks = group.get("ranks")
        listed = tuple(r for r in ranks if _int(r, 0, RANK_LIMIT) is not None) if isinstance(
            ranks, list) else ()  # fmt: skip
        return cls(
            name=None if group.get("pg_name") is None else str(group["pg_name"]),
            description=str(group.get("pg_desc", "")),
            ranks=listed,
            size=_int(group.get("pg_size"), 1, RANK_LIMIT + 1),
            backend=str(group.get("backend_config", "")),
        )


@dataclass(frozen=True)
class TraceMetadata:
    """A rank's run as its file says it.

    Attributes:
        source_format: the reader's format (``kineto``, ...).
        rank, world_size: as recorded (None: not recorded).
        backend: the distributed backend (``nccl``, ``gloo``, ...; ``""``: not recorded).
        process_groups: the job's process groups the file lists, in creation order
            (:meth:`groups_of`: those of one rank).
        devices: the GPUs described, in the file's order.
        profile_memory: whether memory was profiled (None: not said).
        has_distributed_info: whether the file has a distributed header at all.
        rocm: recorded with ROCm (roctracer / HIP runtime versions in the header).
        schema_version, display_time_unit: the trace format's own fields, as written.
        windows: profiled windows joined into this rank (:mod:`hta_lite.load.series`; 0: one
            file).
    """

    source_format: str = "kineto"
    rank: int | None = None
    world_size: int | None = None
    backend: str = ""
    process_groups: tuple[ProcessGroup, ...] = ()
    devices: tuple[Device, ...] = ()
    profile_memory: bool | None = None
    has_distributed_info: bool = False
    rocm: bool = False
    schema_version: Any = None
    display_time_unit: Any = None
    windows: int = 0

    @classmethod
    def from_kineto(cls, header: dict, source_format: str = "kineto") -> TraceMetadata:
        info = header.get("distributedInfo")
        info = info if isinstance(info, dict) else {}
        rank = _int(info.get("rank"), 0, RANK_LIMIT)
        groups = info.get("pg_config")
        groups = [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []
        props = header.get("deviceProperties")
        props = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
        memory = header.get("profile_memory")
        return cls(
            source_format=source_format,
            rank=rank,
            world_size=_int(info.get("world_size"), 1, RANK_LIMIT + 1),
            backend=str(info.get("backend") or ""),
            process_groups=tuple(ProcessGroup.from_kineto(g) for g in groups),
            devices=tuple(Device.from_kineto(p) for p in props),
            profile_memory=None if memory is None else memory in (1, True),
            has_distributed_info="distributedInfo" in header,
            rocm="roctracer_version" in header or "hip_runtime_version" in header,
            schema_version=header.get("schemaVersion"),
            display_time_unit=header.get("displayTimeUnit"),
            windows=len(windows) if isinstance(windows := header.get("windows"), list) else 0,
        )

    def groups_of(self, rank: int) -> list[ProcessGroup]:
        """The process groups ``rank`` belongs to (a group listing no ranks: every rank)."""
        return [g for g in self.process_groups if not g.ranks or rank in g.ranks]

    def device(self, index: int | None) -> Device | None:
        """The device of that index, None when not described."""
        return next((d for d in self.devices if d.index == index), None)
