"""Crafted snapshot pickles: each a few bytes (or a real snapshot with one change) that once gave a
raw exception, unbounded memory, or a C reader that disagreed with the restricted unpickler.
Used by tests/test_snapshot_hostile.py and as seeds of tests/fuzz/fuzz_snapshot.py."""

from __future__ import annotations

import gzip
import pickle
import pickletools
import struct
from pathlib import Path

DATA = Path(__file__).parent / "data" / "snapshots"
REAL = DATA / "medium_128_inference.pickle.gz"


def real() -> dict:
    return pickle.loads(gzip.decompress(REAL.read_bytes()))


def small_real(entries: int = 30, segments: int = 4) -> dict:
    """The real snapshot cut down: its first segments and trace entries."""
    snap = real()
    snap["segments"] = snap["segments"][:segments]
    snap["device_traces"] = [t[:entries] for t in snap["device_traces"]]
    return snap


def _u(text: str) -> bytes:
    raw = text.encode()
    return b"\x8c" + bytes([len(raw)]) + raw


def _int(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def _entry(action: str, addr: int, size: int, frames: bytes = b"N") -> bytes:
    return (
        b"}("
        + _u("action") + _u(action) + _u("addr") + _int(addr) + _u("size") + _int(size)
        + _u("stream") + _int(0) + _u("time_us") + _int(1) + _u("frames") + frames
        + b"u"
    )  # fmt: skip


def _snapshot(device_traces: bytes, segments: bytes = b"]") -> bytes:
    return b"\x80\x04}(" + _u("segments") + segments + _u("device_traces") + device_traces + b"u."


def _one_device(entries: bytes) -> bytes:
    """A snapshot of one device whose trace holds ``entries`` (pickled dicts)."""
    return _snapshot(b"](" + b"](" + entries + b"e" + b"e")


def _opcode_positions(data: bytes, name: str) -> list[int]:
    return [pos for op, _, pos in pickletools.genops(data) if op.name == name]


def _flip_first(data: bytes, name: str, to: bytes) -> bytes:
    at = _opcode_positions(data, name)[0]
    return data[:at] + to + data[at + 1 :]


def crafted() -> dict[str, bytes]:
    """``{name: pickle bytes}``."""
    snap = small_real()
    data = pickle.dumps(snap, protocol=4)
    deep = 100_000
    nested_type = b"]" * deep + b"a" * (deep - 1)
    segment = (
        b"]}(" + _u("address") + _int(0) + _u("total_size") + _int(4096) + _u("blocks") + b"]"
        + _u("segment_type") + nested_type + b"ua"
    )  # fmt: skip
    frame = _u("filename") + _u("model.py")
    trace = snap["device_traces"][0]
    return {
        "build_on_dict": b"\x80\x04}}b.",
        "append_on_dict": b"\x80\x04}Na.",
        "real_appends_flipped_to_build": _flip_first(data, "APPENDS", b"b"),
        "real_setitems_flipped_to_appends": _flip_first(data, "SETITEMS", b"e"),
        "frame_2_63": b"\x80\x04\x95" + struct.pack("<Q", 2**63) + b"}.",
        "frame_longer_than_file": b"\x80\x04\x95" + struct.pack("<Q", 100) + b"}.",
        "binbytes8_2_63": b"\x80\x04\x8e" + struct.pack("<Q", 2**63) + b".",
        "binunicode8_2_63": b"\x80\x04\x8d" + struct.pack("<Q", 2**63 + 5) + b".",
        "memo_2_28": b"\x80\x04]r" + struct.pack("<I", 2**28) + b"0}.",
        "memo_2_26": b"\x80\x04]r" + struct.pack("<I", 2**26) + b"0}.",
        "segment_type_nested_100000": _snapshot(b"]", segment),
        "size_past_int64": pickle.dumps(
            dict(snap, device_traces=[[dict(e, size=2**70) for e in snap["device_traces"][0]]]),
            protocol=4,
        ),  # fmt: skip
        "size_20000_digits": _one_device(
            _entry("alloc", 1, 0).replace(
                _int(0), b"\x8b" + struct.pack("<i", 8305) + b"\x01" * 8305, 1
            )
        ),
        "size_past_16_tib": pickle.dumps(
            dict(snap, device_traces=[[dict(e, size=2**50) for e in snap["device_traces"][0]]]),
            protocol=4,
        ),  # fmt: skip
        # an entry in a list that is then dropped (POP): its row is not in the traces
        "entry_of_a_discarded_list": _snapshot(
            b"]("
            + b"]("
            + _entry("alloc", 1, 8)
            + b"e0"
            + b"]("
            + _entry("alloc", 2, 16)
            + b"e"
            + b"e"
        ),  # fmt: skip
        # two entries whose frames lists are equal by content (one frame, through the memo);
        # the second list is then appended to through the memo: only its entry's stack changes
        "frames_list_appended_after_use": _snapshot(
            b"]\x94("
            + b"]\x94("  # the device list (memo 0), its trace (memo 1)
            + _entry("alloc", 1, 8, b"]\x94}\x94(" + frame + b"ua")  # frames memo 2, frame 3
            + _entry("alloc", 2, 16, b"]\x94h\x03a")  # frames memo 4: [the same frame]
            + b"e"
            + b"h\x04}("
            + _u("filename")
            + _u("late.py")
            + b"ua0"  # one more frame in memo 4
            + b"e"
        ),  # fmt: skip
        # a device without entries before one with (a machine whose first GPU allocated nothing)
        "empty_device_first": pickle.dumps(dict(snap, device_traces=[[], trace]), protocol=4),
        # two devices whose actions differ and come in another order than sorted
        "devices_of_other_actions": pickle.dumps(
            dict(snap, device_traces=[[dict(e, action="free_completed") for e in trace], trace]),
            protocol=4,
        ),  # fmt: skip
        # device_traces that is not a list (found by the snapshot fuzzer), and a device's trace
        "device_traces_not_a_list": pickle.dumps(dict(snap, device_traces=1), protocol=4),
        "a_device_trace_not_a_list": pickle.dumps(
            dict(snap, device_traces=[7, trace]), protocol=4
        ),  # fmt: skip
        # an entry whose action is set twice (the last wins): the first is an action no row has
        "action_set_twice": _one_device(
            _entry("alloc", 1, 8).replace(_u("action"), _u("action") + _u("al<oc") + _u("action"))
        ),
        "frame_ending_after_an_opcode": b"\x80\x04\x95"
        + struct.pack("<Q", 2)
        + b"]J"
        + struct.pack("<i", 1)
        + b"a.",
        "frame_ending_mid_argument": b"\x80\x04\x95"
        + struct.pack("<Q", 3)
        + b"]J"
        + struct.pack("<i", 1)
        + b"a.",
        "frame_inside_a_frame": b"\x80\x04\x95"
        + struct.pack("<Q", 10)
        + b"\x95"
        + struct.pack("<Q", 1)
        + b"}.",  # fmt: skip
        "a_global": pickle.dumps({"segments": [], "x": print}),
        "long4_small": b"\x80\x04\x8b" + struct.pack("<i", 2) + b"\x05\x00.",
        "setitems_odd": b"\x80\x04}(K\x01u.",
        "setitem_on_list": b"\x80\x04]K\x00K\x01s.",
    }
