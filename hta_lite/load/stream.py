"""A large trace file decoded in pieces: the events array goes through the C decoder one
piece (1 MiB of text) at a time as it is gunzipped, so the whole JSON text is never in memory;
a long text's second half by a second thread at the same time (the C decoder reads without the
GIL), when this process has a second CPU.

The peak of a load was the text and the decoded columns alive together; this removes the text
(35 MB for a 35 MB trace) from it, and with it the cost of touching that much fresh memory.
It takes the usual layout only (``{..., "traceEvents": [...], ...}``, every event in the C
decoder's subset, no counter or profiler-range events, which need a second pass over the
text): anything else returns None and the caller decodes the whole text
(:func:`hta_lite.load.decode.read_and_decode`), which decides, reports or repairs.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import msgspec

from ..errors import TraceReadError
from ..kineto import PROFILER_RANGE_CATEGORY
from . import decode as dec
from . import gzip_text, schema
from .events import EventColumns

MIN_FILE_BYTES = 256 * 1024  # smaller files: the whole text is small, one call is simpler
PIECE_BYTES = 1 << 20
_HEAD_LIMIT = 64 << 20  # the events key further in than this: the unusual layout
_CUT_EVENT_LIMIT = 64 << 20  # text waiting for an event's end: malformed, let the caller say so
_JOIN_BYTES = 16 << 10  # the event cut by a piece's start is completed from this much of it
SPLIT_BYTES = 8 << 20  # a text this long is read by two threads (where two CPUs are free)
SECOND_THREAD = True  # False in pool workers that leave no CPU free (workers.process_pool)
#: called with (bytes of text read, bytes in all) as pieces are read (the loader's progress bar
#: for a single large file); None: no progress reported
PROGRESS: Callable[[int, int], None] | None = None
_LOOK_BACK = 4096  # bytes of the previous piece searched for the line the middle event opens
_EVENT_LINE = re.compile(rb"\n[ \t\r]*\{")
_CLOSED, _STOPPED = 1, 2  # what a feed says, besides 0: more text wanted (the C FED_*)


def decode_in_pieces(path: Path) -> dec.Decoded | None:
    """The file decoded in pieces, or None when it is small, not a regular file, declined by
    the C decoder or laid out otherwise (the caller then decodes the whole text). A long text's
    second half is read by a second thread at the same time (:class:`_SecondHalf`) where this
    process has a second CPU and :data:`SECOND_THREAD` allows it."""
    if dec._fastjson is None:
        return None
    try:
        file = gzip_text.open_regular(path)
    except TraceReadError:  # the caller's whole-text read names the problem
        return None
    try:
        with file:
            if os.fstat(file.fileno()).st_size < MIN_FILE_BYTES:
                return None
            compressed, size = gzip_text.text_length(file)
            pieces = (
                gzip_text.gunzipped_pieces(file, PIECE_BYTES, path)
                if compressed
                else iter(lambda: file.read(PIECE_BYTES), b"")
            )
            if PROGRESS is not None:
                pieces = _reported(pieces, size, PROGRESS)
            second = _SecondHalf.start(path, size, compressed) if _two_threads(size) else None
            try:
                return _decode(pieces, size, second)
            finally:
                if second is not None:
                    second.stop()
                if PROGRESS is not None:
                    PROGRESS(size, size)
    except (*gzip_text.GZIP_ERRORS, msgspec.MsgspecError):
        return None


def _reported(pieces: Iterator, size: int, report: Callable[[int, int], None]) -> Iterator:
    """The pieces, each reported as read (with two threads this thread reads the first part;
    the rest is reported when the load ends)."""
    done = 0
    for piece in pieces:
        done += len(piece)
        report(min(done, size), size)
        yield piece


def second_half_start(size: int) -> int:
    """Where the second thread's events begin (the first at or after this offset): past the
    middle, since that thread gunzips the text before it too (diff_control: both done together
    at 0.58)."""
    return int(size * 0.58)


def _two_threads(size: int) -> bool:
    """Whether a text of ``size`` bytes is read by two threads: long enough, a second CPU, and
    :data:`SECOND_THREAD` (off in pool workers that leave no CPU free)."""
    if hasattr(os, "sched_getaffinity"):
        cpus = len(os.sched_getaffinity(0))
    else:  # pragma: no cover - macOS, Windows
        cpus = os.cpu_count() or 1
    return SECOND_THREAD and size >= SPLIT_BYTES and cpus > 1


class _Stopped(NamedTuple):
    """A feed stopped at its limit: the next event starts at ``position``; ``rest``: the text
    from there that was at hand (valid until the next piece is asked for)."""

    position: int
    rest: bytes | memoryview


def _decode(
    pieces: Iterator[bytes | memoryview], size_hint: int, second: _SecondHalf | None = None
) -> dec.Decoded | None:
    """The text's pieces decoded; a piece may be overwritten by the next (one buffer), so none
    is held past the next ``next(pieces)``. With ``second``, this thread stops at the first
    event from the text's middle on, and takes the events from there from ``second`` when it
    began at that very event (else it reads them itself)."""
    window = bytearray()
    for piece in pieces:  # the head, up to "traceEvents": [
        window += piece
        key = dec._EVENTS_KEY.search(window)
        if key is not None:
            break
        if len(window) > _HEAD_LIMIT:
            return None
    else:
        return None
    head = bytes(window[: key.start()]).rstrip()
    stream = dec._fastjson.stream_open(
        dec._C_EVENT_SPEC, dec._C_ARGS_SPEC, dec._C_SEED, size_hint // 96 + 1024
    )
    pending = memoryview(window)[key.end() :]
    del window  # freed with the first pending text
    fed = _feed(stream, pending, key.end(), pieces, second.at if second else -1)
    joined = second.result(fed.position) if isinstance(fed, _Stopped) else None
    if joined is not None and dec._fastjson.stream_join(stream, joined[0]):
        tail = joined[1]
    else:
        if isinstance(fed, _Stopped):  # the second thread began elsewhere (or failed): read on
            fed = _feed(stream, fed.rest, fed.position, pieces, -1)
        if fed is None:
            return None
        tail = fed + b"".join(bytes(piece) for piece in pieces)  # each piece its own copy
    metadata = dec._metadata_decoder.decode(dec._without_events(head, tail))
    if "traceEvents" in metadata:  # a second events array: the whole-text path takes the last
        return None
    out = dec._fastjson.stream_result(stream)
    if out is None:  # a value not of its field's kind
        return None
    coded = out["coded"]
    if (
        "C" in coded.get("ph", ((), ()))[1]
        or PROFILER_RANGE_CATEGORY in coded.get("cat", ((), ()))[1]
    ):
        return None  # counters and profiler ranges are read by a second pass over the text
    events = EventColumns.from_decoder(out, schema.EVENT_DEFAULTS, schema.ARGS_DEFAULTS)
    return dec.Decoded(events=events, metadata=metadata, skipped=Counter(), raw_events=None)


def _feed(
    stream, pending: bytes | memoryview, position: int, pieces: Iterator, limit: int
) -> bytes | _Stopped | None:
    """``pending`` (at ``position`` in the text), then the pieces, fed to the stream until its
    events array closes (the text after it read so far), or (``limit`` >= 0) until the first
    event at or after ``limit`` (:class:`_Stopped`); None when declined."""
    feed = dec._fastjson.stream_feed
    while True:  # each piece fed where it lies: only the event cut at its start is copied
        fed = feed(stream, pending, False, position, limit)
        if fed is None:
            return None
        consumed, status = fed
        if status == _STOPPED:
            return _Stopped(position + consumed, pending[consumed:])
        carry = bytes(pending[consumed:])
        position += consumed
        pending = piece = None  # not held while the next piece is made
        if status == _CLOSED:
            return carry
        if len(carry) > _CUT_EVENT_LIMIT:
            return None
        piece = next(pieces, None)
        if piece is None:  # the text ended: what is left must close the array
            fed = feed(stream, carry, True, position, limit)
            if fed is None:
                return None
            if fed[1] == _STOPPED:
                return _Stopped(position + fed[0], carry[fed[0] :])
            return carry[fed[0] :]
        joint = carry + piece[:_JOIN_BYTES]  # the cut event, completed from the piece's start
        fed = feed(stream, joint, False, position, limit)
        if fed is None:
            return None
        consumed, status = fed
        if status != _CLOSED and consumed >= len(carry):
            rest = memoryview(piece)[consumed - len(carry) :]
        else:  # the array closed, or an event longer than _JOIN_BYTES: the piece copied whole
            rest = joint[consumed:] + piece[_JOIN_BYTES:]
        if status == _STOPPED:
            return _Stopped(position + consumed, rest)
        if status == _CLOSED:
            return bytes(rest)
        position += consumed
        pending = memoryview(rest) if isinstance(rest, bytes) else rest


class _SecondHalf:
    """The events from the text's middle on, read by a thread with a stream of its own while the
    caller reads the first half: it starts at the first line that opens an object at or after
    ``at`` (in Kineto's layout each event opens a line; a raw newline is never inside a JSON
    string), which the caller accepts only if its own reading stops at that very event. The
    stream's feeds release the GIL, so the two threads run on two CPUs."""

    def __init__(self, path: Path, size: int, compressed: bool):
        self.at = second_half_start(size)
        self._path, self._size, self._compressed = path, size, compressed
        self._stopping = False
        self._outcome: tuple[int, object, bytes] | None = None  # start, stream, text after
        self._thread = threading.Thread(target=self._run, name="hta_lite second half")

    @classmethod
    def start(cls, path: Path, size: int, compressed: bool) -> _SecondHalf | None:
        """The thread started; None when no thread can be (the caller reads alone)."""
        half = cls(path, size, compressed)
        try:
            half._thread.start()
        except RuntimeError:  # e.g. "can't start new thread"
            return None
        return half

    def result(self, position: int) -> tuple[object, bytes] | None:
        """(stream, text after the events array) when this began at ``position``, else None."""
        self._thread.join()
        if self._outcome is None or self._outcome[0] != position:
            return None
        return self._outcome[1:]

    def stop(self) -> None:
        self._stopping = True
        self._thread.join()

    def _run(self) -> None:
        try:
            with gzip_text.open_regular(self._path) as file:
                if self._compressed:
                    pieces, position = gzip_text.gunzipped_pieces(file, PIECE_BYTES, self._path), 0
                else:
                    position = max(self.at - _LOOK_BACK, 0)
                    file.seek(position)
                    pieces = iter(lambda: file.read(PIECE_BYTES), b"")
                self._outcome = self._read(pieces, position)
        except Exception:  # noqa: BLE001 - the caller reads on, and meets any problem itself
            self._outcome = None

    def _until(self, pieces: Iterator) -> Iterator:
        """``pieces`` until this is told to stop."""
        for piece in pieces:
            if self._stopping:
                return
            yield piece

    def _read(self, pieces: Iterator, position: int) -> tuple[int, object, bytes] | None:
        behind = b""  # the end of the previous piece: a line may begin there
        for piece in pieces:
            if self._stopping:
                return None
            end = position + len(piece)
            if end < self.at:
                behind, position = bytes(piece[-_LOOK_BACK:]), end
                continue
            window = behind + bytes(piece)
            origin = position - len(behind)
            line = _EVENT_LINE.search(window, max(self.at - origin - 1, 0))
            if line is None:
                behind, position = window[-_LOOK_BACK:], end
                continue
            start = line.end() - 1  # the event's "{"
            stream = dec._fastjson.stream_open(
                dec._C_EVENT_SPEC, dec._C_ARGS_SPEC, dec._C_SEED,
                (self._size - self.at) // 96 + 1024, True,
            )  # fmt: skip
            fed = _feed(stream, memoryview(window)[start:], origin + start, self._until(pieces), -1)
            if not isinstance(fed, bytes) or self._stopping:
                return None
            return origin + start, stream, fed + b"".join(bytes(p) for p in pieces)
        return None
