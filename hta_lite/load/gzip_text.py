"""A trace file's text: read whole (gunzipped when it is gzip, by its magic bytes, not its
name) or gunzipped a piece at a time into one buffer.

Each new page of memory a fresh process touches costs about 3 us on the development machine
(512 KB: 0.35-0.40 ms), so the gzip reader writes straight into buffers of ours (``readinto``)
sized once: no growing output, no joining copy, no copy of the compressed data's unread rest.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import TraceReadError

try:  # python-isal gunzips ~1.7x faster than zlib (benchmarks/bench_decode.py)
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a declared dependency
    _zlib = zlib

GZIP_ERRORS = (OSError, EOFError, ValueError, zlib.error, _zlib.error)
MAX_RATIO = 64  # JSON traces compress 10-30x: a larger claim of a trailer (truncated?) is capped

if hasattr(_zlib, "_GzipReader"):  # isal's reader: every member, zero padding allowed
    gzip_reader = _zlib._GzipReader
else:  # pragma: no cover - an isal without it: the standard library's reader (it copies)

    def gzip_reader(source: bytes | BinaryIO):
        """A reader of every gzip member of ``source`` (bytes or a binary file)."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            source = io.BytesIO(source)
        return gzip.GzipFile(fileobj=source)


def _cannot_read(path: Path, exc: OSError) -> TraceReadError:
    return TraceReadError(path, f"cannot read file: {exc.strerror or exc}")


# opened without waiting (a FIFO with no writer would block the open), in binary mode on Windows
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading; a ``TraceReadError`` when it cannot be, or is not a regular
    file (a FIFO or device would block or never end). One lookup of the path: the open file is
    the one checked."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise _cannot_read(path, exc) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TraceReadError(path, "not a regular file")
        return open(fd, "rb")  # noqa: SIM115 - the caller closes it (and so the descriptor)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise _cannot_read(path, exc) from None
        raise


def read_bytes(path: Path) -> bytes | bytearray:
    """A trace file's text, gunzipped when it is gzip; a ``TraceReadError`` names a file that
    cannot be read or is corrupt gzip."""
    with open_regular(path) as file:
        try:
            data = file.read()
        except OSError as exc:
            raise _cannot_read(path, exc) from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gunzip(data)
        except GZIP_ERRORS as exc:
            raise TraceReadError(path, f"corrupt or truncated gzip data ({exc})") from None
    return data


def text_length(file: BinaryIO) -> tuple[bool, int]:
    """Whether the open trace ``file`` is gzip (by its magic bytes, not its name) and its text's
    length as far as known: the gzip trailer's, capped at ``MAX_RATIO`` times the file's size
    (a truncated file's claim), else the file's size; the file is left at its start."""
    size = os.fstat(file.fileno()).st_size
    is_gzip = file.read(2) == b"\x1f\x8b"
    if is_gzip:
        file.seek(max(size - 4, 0))
        size = min(int.from_bytes(file.read(4), "little"), MAX_RATIO * size)
    file.seek(0)
    return is_gzip, size


@contextlib.contextmanager
def text_reader(path: Path) -> Iterator[tuple[BinaryIO, int]]:
    """A reader (``readinto``) of a trace file's text, gunzipped when it is gzip, and the text's
    length as far as known (the gzip trailer's, capped as :func:`gunzip` caps it); a
    ``TraceReadError`` names a file that cannot be read or is corrupt gzip, as
    :func:`read_bytes` does."""
    with open_regular(path) as file:
        try:
            is_gzip, size = text_length(file)
        except OSError as exc:
            raise _cannot_read(path, exc) from None
        try:
            yield (gzip_reader(file) if is_gzip else file), size
        except GZIP_ERRORS as exc:
            problem = "corrupt or truncated gzip data" if is_gzip else "cannot read file"
            raise TraceReadError(path, f"{problem} ({exc})") from None


def gunzip(data: bytes) -> bytearray:
    """Every gzip member of ``data`` decompressed, into one buffer of the size the gzip trailer
    gives (exact for one member; grown for more members or an implausible trailer)."""
    size = min(int.from_bytes(data[-4:], "little"), MAX_RATIO * len(data))
    text = bytearray(size + 1)  # +1: the end is a read of nothing
    reader = gzip_reader(data)
    filled = 0
    while True:
        if filled == len(text):
            text.extend(bytes(max(len(text), 1 << 20)))
        with memoryview(text) as view, view[filled:] as room:
            read = reader.readinto(room)
        if not read:
            break
        filled += read
    del text[filled:]
    return text


def gunzipped_pieces(file: BinaryIO, piece_bytes: int) -> Iterator[memoryview]:
    """The text of the gzip ``file`` (every member), up to ``piece_bytes`` at a time, each
    piece read into the same buffer: a piece is valid only until the next one is asked for."""
    reader = gzip_reader(file)
    buffer = memoryview(bytearray(piece_bytes))
    while read := reader.readinto(buffer):
        yield buffer[:read]
