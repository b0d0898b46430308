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


def _env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


#: a gzip trace may inflate to at most this many times its size (the real traces here compress
#: 4-23x, repetitive generated ones up to ~250x, gzip bombs 250-1000x; 200: a 9x margin) ...
MAX_INFLATE_RATIO = _env_number("HTA_LITE_MAX_INFLATE_RATIO", 200.0)
#: ... and to at most this many bytes of text (a load holds about as much memory as its text)
MAX_TEXT_BYTES = int(_env_number("HTA_LITE_MAX_TEXT_GB", 32.0) * (1 << 30))


@contextlib.contextmanager
def inflate_limits(ratio: float | None = None, text_gb: float | None = None):
    """Within: other limits than the defaults (``LoadOptions.max_inflate_ratio`` /
    ``max_text_gb``; None keeps the default)."""
    global MAX_INFLATE_RATIO, MAX_TEXT_BYTES
    saved = MAX_INFLATE_RATIO, MAX_TEXT_BYTES
    if ratio is not None:
        MAX_INFLATE_RATIO = float(ratio)
    if text_gb is not None:
        MAX_TEXT_BYTES = int(float(text_gb) * (1 << 30))
    try:
        yield
    finally:
        MAX_INFLATE_RATIO, MAX_TEXT_BYTES = saved


def inflate_limit(compressed_bytes: int) -> int:
    """How many bytes of text a gzip file of ``compressed_bytes`` may inflate to."""
    return int(min(MAX_INFLATE_RATIO * max(compressed_bytes, 1), MAX_TEXT_BYTES))


def too_large(path: Path | None, compressed_bytes: int) -> TraceReadError:
    """The error of a gzip file that inflates past :func:`inflate_limit`, raised as soon as
    it does (before memory grows further)."""
    limit = inflate_limit(compressed_bytes)
    return TraceReadError(
        path,
        f"inflates to more than {limit / (1 << 30):.2f} GiB of text ({compressed_bytes:,} bytes"
        f" of gzip; limits: {MAX_INFLATE_RATIO:g}x its size, {MAX_TEXT_BYTES / (1 << 30):g} GiB):"
        " a gzip bomb, or a trace larger than the limits: raise them with"
        " HTA_LITE_MAX_INFLATE_RATIO / HTA_LITE_MAX_TEXT_GB or LoadOptions(max_inflate_ratio=...,"
        " max_text_gb=...)",
    )


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
            data = gunzip(data, path)
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
            limit = inflate_limit(os.fstat(file.fileno()).st_size)
            reader = _Bounded(gzip_reader(file), limit, path, file) if is_gzip else file
            yield reader, size
        except GZIP_ERRORS as exc:
            problem = "corrupt or truncated gzip data" if is_gzip else "cannot read file"
            raise TraceReadError(path, f"{problem} ({exc})") from None


class _Bounded:
    """A gzip reader that raises :func:`too_large` once it has given more than ``limit``
    bytes."""

    def __init__(self, reader, limit: int, path: Path | None, file: BinaryIO):
        self.reader, self.limit, self.path, self.file, self.given = reader, limit, path, file, 0

    def readinto(self, buffer) -> int:
        read = self.reader.readinto(buffer)
        self.given += read
        if self.given > self.limit:
            raise too_large(self.path, os.fstat(self.file.fileno()).st_size)
        return read


def gunzip(data: bytes, path: Path | None = None) -> bytearray:
    """Every gzip member of ``data`` decompressed, into one buffer of the size the gzip trailer
    gives (exact for one member; grown for more members or an implausible trailer); more than
    :func:`inflate_limit` of text is a :func:`too_large` error."""
    limit = inflate_limit(len(data))
    size = min(int.from_bytes(data[-4:], "little"), MAX_RATIO * len(data), limit)
    text = bytearray(size + 1)  # +1: the end is a read of nothing
    reader = gzip_reader(data)
    filled = 0
    while True:
        if filled == len(text):  # grown, never past one byte more than the limit
            more = min(max(len(text), 1 << 20), limit + 1 - len(text))
            if more <= 0:
                raise too_large(path, len(data))
            text.extend(bytes(more))
        with memoryview(text) as view, view[filled:] as room:
            read = reader.readinto(room)
        if not read:
            break
        filled += read
        if filled > limit:
            raise too_large(path, len(data))
    del text[filled:]
    return text


def gunzipped_pieces(
    file: BinaryIO, piece_bytes: int, path: Path | None = None
) -> Iterator[memoryview]:
    """The text of the gzip ``file`` (every member), up to ``piece_bytes`` at a time, each
    piece read into the same buffer: a piece is valid only until the next one is asked for.
    More than :func:`inflate_limit` of text is a :func:`too_large` error."""
    reader = _Bounded(gzip_reader(file), inflate_limit(os.fstat(file.fileno()).st_size), path, file)
    buffer = memoryview(bytearray(piece_bytes))
    while read := reader.readinto(buffer):
        yield buffer[:read]
