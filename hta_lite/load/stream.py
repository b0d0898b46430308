"""A large trace file decoded in pieces: the events array goes through the C decoder one
piece (1 MiB of text) at a time as it is gunzipped, so the whole JSON text is never in memory.

The peak of a load was the text and the decoded columns alive together; this removes the text
(35 MB for a 35 MB trace) from it, and with it the cost of touching that much fresh memory.
It takes the usual layout only (``{..., "traceEvents": [...], ...}``, every event in the C
decoder's subset, no counter or profiler-range events, which need a second pass over the
text): anything else returns None and the caller decodes the whole text
(:func:`hta_lite.load.decode.read_and_decode`), which decides, reports or repairs.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import msgspec

from ..kineto import PROFILER_RANGE_CATEGORY
from . import decode as dec
from . import gzip_text, schema
from .events import EventColumns

MIN_FILE_BYTES = 256 * 1024  # smaller files: the whole text is small, one call is simpler
PIECE_BYTES = 1 << 20
_HEAD_LIMIT = 64 << 20  # the events key further in than this: the unusual layout
_CUT_EVENT_LIMIT = 64 << 20  # text waiting for an event's end: malformed, let the caller say so
_JOIN_BYTES = 16 << 10  # the event cut by a piece's start is completed from this much of it


def decode_in_pieces(path: Path) -> dec.Decoded | None:
    """The file decoded in pieces, or None when it is small, not a regular file, declined by
    the C decoder or laid out otherwise (the caller then decodes the whole text)."""
    if dec._fastjson is None:
        return None
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size < MIN_FILE_BYTES:
            return None
        with open(path, "rb") as file:
            if file.read(2) != b"\x1f\x8b":  # plain JSON: read in pieces too
                file.seek(0)
                return _decode(iter(lambda: file.read(PIECE_BYTES), b""), info.st_size)
            file.seek(-4, os.SEEK_END)
            size = int.from_bytes(file.read(4), "little")  # gzip's last 4 bytes: the text's size
            file.seek(0)
            return _decode(gzip_text.gunzipped_pieces(file, PIECE_BYTES), size)
    except (*gzip_text.GZIP_ERRORS, msgspec.MsgspecError):
        return None


def _decode(pieces: Iterator[bytes | memoryview], size_hint: int) -> dec.Decoded | None:
    """The text's pieces decoded; a piece may be overwritten by the next (one buffer), so none
    is held past the next ``next(pieces)``."""
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
    feed = dec._fastjson.stream_feed
    pending = memoryview(window)[key.end() :]
    del window  # freed with the first pending text
    while True:  # each piece fed where it lies: only the event cut at its start is copied
        fed = feed(stream, pending, False)
        if fed is None:
            return None
        consumed, done = fed
        carry = bytes(pending[consumed:])
        pending = piece = None  # not held while the next piece is made
        if done:
            break
        if len(carry) > _CUT_EVENT_LIMIT:
            return None
        piece = next(pieces, None)
        if piece is None:  # the text ended: what is left must close the array
            fed = feed(stream, carry, True)
            if fed is None:
                return None
            carry = carry[fed[0] :]
            break
        joint = carry + piece[:_JOIN_BYTES]  # the cut event, completed from the piece's start
        fed = feed(stream, joint, False)
        if fed is None:
            return None
        consumed, done = fed
        if done:
            carry = joint[consumed:] + piece[_JOIN_BYTES:]
            break
        if consumed < len(carry):  # an event longer than _JOIN_BYTES: the piece copied whole
            pending = memoryview(joint[consumed:] + piece[_JOIN_BYTES:])
        else:
            pending = memoryview(piece)[consumed - len(carry) :]
    tail = carry + b"".join(bytes(piece) for piece in pieces)  # each piece its own copy
    metadata = dec._metadata_decoder.decode(dec._without_events(head, tail))
    out = dec._fastjson.stream_result(stream)
    coded = out["coded"]
    if (
        "C" in coded.get("ph", ((), ()))[1]
        or PROFILER_RANGE_CATEGORY in coded.get("cat", ((), ()))[1]
    ):
        return None  # counters and profiler ranges are read by a second pass over the text
    events = EventColumns.from_decoder(out, schema.EVENT_DEFAULTS, schema.ARGS_DEFAULTS)
    return dec.Decoded(events=events, metadata=metadata, skipped=Counter(), raw_events=None)
