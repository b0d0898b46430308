"""Write a trace back out: every original event byte for byte, plus extra events.

Used by ``generate_trace_with_counters`` and the frequent-kernel-sequence overlay.
The output is valid Chrome-trace JSON (gzip when the input was), written to a temporary
file in the output folder and renamed into place, never over the input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
from isal import igzip

from ..errors import TraceError
from ..load import decode as dec
from ..load.gzip_text import GZIP_MAGIC, read_bytes
from ..safe_output import write_atomically

_raw_list = msgspec.json.Decoder(list[msgspec.Raw])
_encode = msgspec.json.encode


def us_text(ns: int) -> bytes:
    """Exact JSON number for ``ns`` nanoseconds in microseconds (``1712195495519689.047``)."""
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(int(ns)), 1000)
    return f"{sign}{whole}.{frac:03d}".encode()


def output_path(src: Path, output_dir: Path, suffix: str) -> Path:
    name = src.name
    for ext in (".json.gz", ".json"):
        if name.endswith(ext):
            return output_dir / (name[: -len(ext)] + suffix + ext)
    return output_dir / (name + suffix)


def write_trace(
    src: str | Path,
    dst: str | Path,
    extra_events: Iterable[bytes] = (),
    transform: Callable[[msgspec.Raw], bytes | None] | None = None,
) -> Path:
    """Copy ``src`` to ``dst`` with ``extra_events`` (encoded JSON objects) appended to
    ``traceEvents``; ``transform`` may rewrite each original event (None drops it)."""
    src, dst = Path(src), Path(dst)
    if dst.resolve() == src.resolve():
        raise TraceError(dst, "refusing to write over the input trace")
    data = read_bytes(src)
    top = dec.decode_top(data, src)
    if "traceEvents" not in top:
        raise TraceError(src, "no 'traceEvents' key: not a Kineto/Chrome trace")
    events = _raw_list.decode(top.pop("traceEvents"))
    if transform is not None:
        events = [out for out in map(transform, events) if out is not None]
    parts = [_encode(key) + b":" + bytes(raw) for key, raw in top.items()]
    body = b",".join(list(map(bytes, events)) + list(extra_events))
    document = b"{" + b",".join(parts + [b'"traceEvents":[' + body + b"]"]) + b"}"
    with open(src, "rb") as f:
        gz = f.read(2) == GZIP_MAGIC
    return write_atomically(dst, igzip.compress(document) if gz else document)


def counter_event(name: str, pid: int, tid: int, ts_ns: int, series: str, value: float) -> bytes:
    """One ``"ph": "C"`` event at an exact timestamp."""
    head = _encode({"ph": "C", "cat": "hta_lite", "name": name, "pid": int(pid), "tid": int(tid)})
    return head[:-1] + b',"ts":' + us_text(ts_ns) + b',"args":' + _encode({series: value}) + b"}"
