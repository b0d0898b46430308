"""Bytes of one trace file -> decoded events (msgspec structs) + top-level metadata.

The fast path decodes ``traceEvents`` straight into typed structs that keep only
the fields analyses read; ``ts`` and ``dur`` stay as the raw JSON number text so
that no digit is lost (see :mod:`hta_lite.load.timestamps`).  When a file has events
of unexpected shape the slow path decodes event by event, keeps every event it
can and counts the rest in ``skipped``.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..errors import TraceDecodeError, TraceFormatError
from . import schema
from .events import EventColumns, EventList
from .gzip_text import read_bytes
from .health_items import note
from .repair import repair as _repair
from .schema import EMPTY_RAW, Args, Event, LenientArgs

try:  # the optional C accelerator (setup.py); without it every trace takes the msgspec path
    from . import _fastjson
except ImportError:  # pragma: no cover - depends on the build
    _fastjson = None
#: the C decoder was not built at install time (not ruled out by HTA_LITE_NO_C): said once
C_NOT_BUILT = _fastjson is None
if os.environ.get("HTA_LITE_NO_C"):  # compare both paths, or rule the C decoder out
    _fastjson, C_NOT_BUILT = None, False
C_NOT_BUILT_WARNING = (
    "hta_lite's C decoder was not built when it was installed (no C compiler or Python headers"
    " then): traces load with the pure-Python decoder, with the same results but 2.7-4.1x"
    " slower. For the fast one, install a C compiler and the Python headers (Debian / Ubuntu:"
    " apt-get install gcc python3-dev) and reinstall: pip install --force-reinstall --no-deps"
    " --no-cache-dir hta_lite. HTA_LITE_NO_C=1 chooses the pure-Python decoder and silences"
    " this."
)


class RangeEvent(msgspec.Struct, gc=False):
    """An event read whole, args included (second pass for the few events whose args are all
    kept, such as the CUPTI range profiler's kernels)."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = EMPTY_RAW
    dur: msgspec.Raw = EMPTY_RAW
    args: Any = None


class CounterEvent(msgspec.Struct, gc=False):
    """A counter (``"ph": "C"``) event: each key of ``args`` is one series."""

    ph: Any = None
    name: Any = None
    pid: Any = None
    ts: msgspec.Raw = EMPTY_RAW
    args: Any = None


_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_metadata_decoder = msgspec.json.Decoder(dict[str, Any])
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_EVENT_THEN_BRACKET = re.compile(rb"\}\s*\]")
_events_decoder = msgspec.json.Decoder(list[Event])
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_event_decoder = msgspec.json.Decoder(Event)
_raw_dict_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_args_decoder = msgspec.json.Decoder(Args)
_lenient_args_decoder = msgspec.json.Decoder(LenientArgs)
_counters_decoder = msgspec.json.Decoder(list[CounterEvent])
_ranges_decoder = msgspec.json.Decoder(list[RangeEvent])
_any_decoder = msgspec.json.Decoder()


_EMPTY_ARGS = Args()
_C_EVENT_SPEC = schema.c_spec(schema.EVENT_FIELDS)
_C_ARGS_SPEC = schema.c_spec(schema.ARGS_FIELDS)
# the C decoder's string table is keyed by a hash seeded per process, so that no input can be
# crafted to collide in it
_C_SEED = int.from_bytes(os.urandom(8), "little")


class Decoded(msgspec.Struct):
    events: EventColumns | EventList
    metadata: dict[str, Any]
    skipped: Counter
    # the events' JSON text (msgspec.Raw or memoryview), kept to decode counters on demand
    raw_events: Any


def decode(data: bytes, path: Path) -> Decoded:
    """Decode the JSON document of one trace file (repairing invalid UTF-8 and NaN literals)."""
    if not data or data.isspace():  # not strip(): it copies a file with whitespace at an end
        raise TraceDecodeError(path, "file is empty")
    skipped: Counter = Counter()
    try:
        try:
            return _decode_document(data, path, skipped)
        except TraceDecodeError:
            repaired = _repair(data, skipped)
            if repaired is None:
                raise
            return _decode_document(repaired, path, skipped)
    except RecursionError:
        raise TraceDecodeError(path, "JSON nested too deeply (about 1000 levels or more)") from None


def _decode_document(data: bytes, path: Path, skipped: Counter) -> Decoded:
    decoded = _decode_plain_layout(data, path, skipped)
    if decoded is not None:
        return decoded
    if _starts_list(data):  # Chrome's array format (the legacy autograd profiler's export)
        note(skipped, "event_list_file", 1)
        top = {"traceEvents": msgspec.Raw(data)}
    else:
        top = decode_top(data, path)
    if "traceEvents" not in top:
        if "nodes" in top and "schema" in top:  # torch.profiler.ExecutionTraceObserver's output
            raise TraceFormatError(
                path,
                "a PyTorch execution trace (ExecutionTraceObserver: 'nodes', no timings), not"
                " a Kineto trace: hta_lite reads what torch.profiler.profile writes"
                " (on_trace_ready=tensorboard_trace_handler or prof.export_chrome_trace)",
            )
        raise TraceFormatError(path, "no 'traceEvents' key: not a Kineto/Chrome trace")
    keys = len(_EVENTS_KEY.findall(data))
    if keys > 1:  # JSON readers and Perfetto keep a repeated key's last value, and so do we
        note(skipped, "repeated_events_key", keys - 1)
    raw_events = top.pop("traceEvents")
    try:
        metadata = {key: _any_decoder.decode(raw) for key, raw in top.items()}
        try:
            events = _decode_events(raw_events)
        except msgspec.ValidationError:
            events = EventList(_decode_leniently(raw_events, path, skipped), _EMPTY_ARGS)
    except msgspec.DecodeError as exc:
        raise TraceDecodeError(path, f"invalid JSON ({_explain(exc)})") from None
    if "event_list_file" in skipped and not any(events.factorized("ph")[1]):
        raise TraceFormatError(
            path, "top level is a JSON list without trace events, expected the events of a trace"
            " or an object with 'traceEvents'",
        )  # fmt: skip
    return Decoded(events=events, metadata=metadata, skipped=skipped, raw_events=raw_events)


def _decode_plain_layout(data: bytes, path: Path, skipped: Counter) -> Decoded | None:
    """One pass over the events for the usual layout: ``{..., "traceEvents": [...], ...}``.

    The array starts at the first ``"traceEvents": [``; its end is guessed from the back of
    the file (:func:`_events_end`). The metadata is the document with that key cut out. The
    guess is used only if both parts decode: a JSON array has exactly one end, so a wrong
    guess fails. Otherwise None, and the caller scans the whole document first (a second
    pass over the bytes, 5-10% of a load).
    """
    key = _EVENTS_KEY.search(data)
    if key is None:
        return None
    head = data[: key.start()].rstrip()
    end = _events_end(data, key.end())
    if end is None:
        return None
    raw_events = memoryview(data)[key.end() - 1 : end]
    try:
        metadata = _metadata_decoder.decode(_without_events(head, data[end:]))
        if "traceEvents" in metadata:  # a second events array: the full path takes the last
            return None
        events = _decode_events(raw_events)
    except msgspec.MsgspecError:  # odd shapes or a wrong guess: the full path reports or repairs
        return None
    return Decoded(events=events, metadata=metadata, skipped=skipped, raw_events=raw_events)


def _decode_events(raw_events) -> EventColumns | EventList:
    """The events array: as columns by the C decoder when it is built and takes this trace
    (it returns None for anything outside the subset it handles), else as msgspec structs."""
    if _fastjson is not None:
        columns = decode_with_c(raw_events)
        if columns is not None:
            return columns
    return EventList(_events_decoder.decode(raw_events), _EMPTY_ARGS)


def decode_with_c(raw_events) -> EventColumns | None:
    """The events array through the C decoder, the fields of :mod:`hta_lite.load.schema`; None
    when it declines. The decoder holds the buffer for the whole call: the strings it shares
    point into it only while it runs (docs/architecture.md, the C decoder)."""
    out = _fastjson.decode_events(raw_events, _C_EVENT_SPEC, _C_ARGS_SPEC, _C_SEED)
    if out is None:
        return None
    return EventColumns.from_decoder(out, schema.EVENT_DEFAULTS, schema.ARGS_DEFAULTS)


def _without_events(head: bytes, tail: bytes) -> bytes:
    """The document text around the cut-out ``"traceEvents": [...]``, commas mended."""
    tail = tail.lstrip()
    if tail.startswith(b","):
        return head + tail[1:]
    return head[:-1] + tail if head.endswith(b",") else head + tail


def _events_end(data: bytes, first: int) -> int | None:
    """Position just past the ``]`` closing the events array, guessed from the file's end.

    Every ``]`` in the last 256 KiB (after ``first``, the start of the events) that follows
    an event's ``}`` is tried: the earliest one after which the rest reads as the end of a JSON
    object (``, "key": value ... }``) is the guess; later ones close metadata arrays such as
    ``deviceProperties``, and ones inside events leave unbalanced brackets. Each try
    decodes in place: the ``]`` is overwritten with ``{`` (and the comma after it with a space).
    """
    rest = data[first : first + 64]
    if rest.lstrip()[:1] == b"]":  # an empty events array
        return first + rest.index(b"]") + 1
    start = max(first, len(data) - (256 << 10))
    window = bytearray(data[start:])
    view = memoryview(window)
    guess = None
    for pos in reversed([m.end() - 1 for m in _EVENT_THEN_BRACKET.finditer(window)]):
        following = window[pos + 1 : pos + 65]
        after = pos + 1 + len(following) - len(following.lstrip())
        if following.strip()[:1] not in (b",", b"}"):
            continue
        saved = window[pos], window[after]
        window[pos] = ord("{")
        if window[after] == ord(","):
            window[after] = ord(" ")
        try:
            _metadata_decoder.decode(view[pos:])
            guess = start + pos + 1
        except msgspec.MsgspecError:
            pass
        window[pos], window[after] = saved
    return guess


def _starts_list(data: bytes) -> bool:
    """The document's first non-blank byte opens a list."""
    head = bytes(data[:4096]).lstrip(b" \t\r\n")
    return head.startswith(b"\xef\xbb\xbf[") or head[:1] == b"["


def decode_top(data: bytes, path: Path) -> dict[str, msgspec.Raw]:
    try:
        return _top_decoder.decode(data)
    except msgspec.ValidationError:
        kind = type(_safe_generic(data)).__name__
        raise TraceFormatError(
            path, f"top level is a JSON {kind}, expected an object with 'traceEvents'"
        ) from None
    except msgspec.DecodeError as exc:
        raise TraceDecodeError(path, f"invalid JSON ({_explain(exc)})") from None


def int_rows(data: bytes, width: int) -> np.ndarray | None:
    """``[[int, ...], ...]`` rows of ``width`` integers as an int64 array (rows, width) by the C
    decoder; None when it is not built or the text is anything else (the caller decodes it with
    msgspec, which names the problem)."""
    if _fastjson is None:
        return None
    out = _fastjson.int_rows(data, width)
    return None if out is None else np.frombuffer(out, np.int64).reshape(-1, width)


def category_sums(source, categories: int, size_hint: int = 0) -> np.ndarray | None:
    """The C decoder's one pass over a raw memory timeline's text (see
    :func:`hta_lite.load.readers.memory_timeline.file_sums`): int64 (runs, 1 + categories);
    None when it is not built, or the text is not plain integer rows of 4, or a category is
    out of range. ``source``: the text, or a reader of it (``readinto``), read a piece at a
    time (``size_hint``: the text's length as far as known)."""
    if _fastjson is None:
        return None
    out = _fastjson.category_sums(source, categories, size_hint)
    return None if out is None else np.frombuffer(out, np.int64).reshape(-1, 1 + categories)


def read_and_decode(path: Path) -> Decoded:
    return decode(read_bytes(path), path)


def decode_counters(raw_events: msgspec.Raw) -> list[CounterEvent]:
    """Second pass, run only when the trace has counter events."""
    return _second_pass(raw_events, _counters_decoder, CounterEvent, lambda e: e.ph == "C")


def decode_category(raw_events: msgspec.Raw, category: str) -> list[RangeEvent]:
    """Second pass: the complete events of ``category``, args whole (run only when the trace
    has such events)."""
    return _second_pass(
        raw_events, _ranges_decoder, RangeEvent, lambda e: e.ph == "X" and e.cat == category
    )


def _second_pass(raw_events, decoder, struct, wanted) -> list:
    """The events ``wanted`` keeps; events of another shape are passed over one by one."""
    try:
        return [e for e in decoder.decode(raw_events) if wanted(e)]
    except msgspec.ValidationError:
        out = []
        for raw in _raw_list_decoder.decode(raw_events):
            try:
                ev = msgspec.json.decode(raw, type=struct)
            except msgspec.ValidationError:
                continue
            if wanted(ev):
                out.append(ev)
        return out


def _decode_leniently(raw_events: msgspec.Raw, path: Path, skipped: Counter) -> list[Event]:
    """Event-by-event decode; keeps what it can, counts what it cannot (slow path)."""
    try:
        raws = _raw_list_decoder.decode(raw_events)
    except msgspec.ValidationError:
        raise TraceFormatError(path, "'traceEvents' is not a JSON list") from None
    events = []
    for raw in raws:
        try:
            events.append(_event_decoder.decode(raw))
            continue
        except msgspec.ValidationError:
            pass
        try:
            fields = _raw_dict_decoder.decode(raw)
        except msgspec.ValidationError:
            note(skipped, "event_not_object", 1)
            continue
        events.append(_coerce_event(fields, skipped))
    return events


def _coerce_event(fields: dict[str, msgspec.Raw], skipped: Counter) -> Event:
    ev = Event()
    for key in ("ph", "cat", "name", "s"):
        if key in fields:
            value = _any_decoder.decode(fields[key])
            if value is not None and not isinstance(value, str):
                note(skipped, "field_converted_to_text", 1, key)
                value = str(value)
            setattr(ev, key, "" if key == "ph" and value is None else value)
    for key in ("pid", "tid"):
        if key in fields:
            value = _any_decoder.decode(fields[key])
            if value is not None and not isinstance(value, (int, str)) or isinstance(value, bool):
                note(skipped, "field_not_int_or_text", 1, key)
                value = None
            setattr(ev, key, value)
    if "id" in fields:
        ev.id = _any_decoder.decode(fields["id"])
    for key in ("ts", "dur"):
        if key in fields:
            setattr(ev, key, fields[key])
    if "args" in fields:
        try:
            ev.args = _args_decoder.decode(fields["args"])
        except msgspec.ValidationError:
            try:
                ev.args = _lenient_args_decoder.decode(fields["args"])
            except msgspec.ValidationError:
                note(skipped, "args_not_object", 1)
    return ev


def _safe_generic(data: bytes) -> Any:
    try:
        return _any_decoder.decode(data)
    except msgspec.DecodeError:
        return None


def _explain(exc: Exception) -> str:
    msg = str(exc)
    if "truncated" in msg or "end of" in msg.lower():
        return f"truncated: {msg}"
    return msg
