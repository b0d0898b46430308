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
from ..settings import capped_int, env_limit, positive_limit

try:  # python-isal gunzips ~1.7x faster than zlib (benchmarks/bench_decode.py)
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a declared dependency
    _zlib = zlib

GZIP_ERRORS = (OSError, EOFError, ValueError, zlib.error, _zlib.error)
MAX_RATIO = 64  # JSON traces compress 10-30x: a larger claim of a trailer (truncated?) is capped


#: a gzip trace may inflate to at most this many times its size (the real traces here compress
#: 4-23x, repetitive generated ones up to ~250x, gzip bombs 250-1000x; 200: a 9x margin) ...
DEFAULT_INFLATE_RATIO = 200.0
#: ... and to at most this many GiB of text (a load holds about as much memory as its text)
DEFAULT_TEXT_GB = 32.0
#: limits set for this process by :func:`inflate_limits` (None: the environment's, else default)
_OVERRIDE: dict[str, float | None] = {"ratio": None, "text_gb": None}
#: the first bytes of every gzip file
GZIP_MAGIC = b"\x1f\x8b"


def limits() -> tuple[float, float]:
    """``(ratio, text bytes)`` in force: :func:`inflate_limits`' values, else
    ``$HTA_LITE_MAX_INFLATE_RATIO`` / ``$HTA_LITE_MAX_TEXT_GB``, else the defaults (``inf``: no
    limit); a bad value is a :class:`~hta_lite.errors.SettingError`."""
    ratio, text_gb = _OVERRIDE["ratio"], _OVERRIDE["text_gb"]
    if ratio is None:
        ratio = env_limit("HTA_LITE_MAX_INFLATE_RATIO", DEFAULT_INFLATE_RATIO)
    if text_gb is None:
        text_gb = env_limit("HTA_LITE_MAX_TEXT_GB", DEFAULT_TEXT_GB)
    return ratio, text_gb * (1 << 30)


@contextlib.contextmanager
def inflate_limits(ratio: float | None = None, text_gb: float | None = None):
    """Within: other limits than the environment's (``LoadOptions.max_inflate_ratio`` /
    ``max_text_gb``; None keeps it); each a positive number or ``inf``."""
    saved = dict(_OVERRIDE)
    if ratio is not None:
        _OVERRIDE["ratio"] = positive_limit(ratio, "max_inflate_ratio")
    if text_gb is not None:
        _OVERRIDE["text_gb"] = positive_limit(text_gb, "max_text_gb")
    try:
        yield
    finally:
        _OVERRIDE.update(saved)


def inflate_limit(compressed_bytes: int) -> int:
    """How many bytes of text a gzip file of ``compressed_bytes`` may inflate to."""
    ratio, text_bytes = limits()
    return capped_int(min(ratio * max(compressed_bytes, 1), text_bytes))


def too_large(
    path: Path | None, compressed_bytes: int, text: int = 0, read: int = 0
) -> TraceReadError:
    """The error of a gzip file that inflates past :func:`inflate_limit`, or past the ratio
    limit in its first ``read`` bytes (``text`` bytes of text so far), raised as soon as it
    does (before memory grows further)."""
    limit = inflate_limit(compressed_bytes)
    ratio, text_bytes = limits()
    so_far = f"{text / 1e6:.1f} MB of text from its first {read:,}" if text else ""
    return TraceReadError(
        path,
        (
            f"inflates more than {ratio:g}x: {so_far} bytes of gzip"
            if so_far and text <= limit
            else f"inflates to more than {limit / (1 << 30):.2f} GiB of text"
            f" from {compressed_bytes:,} bytes of gzip"
        )
        + f" (limits: {ratio:g}x its size, {text_bytes / (1 << 30):g} GiB):"
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
    if data[:2] == GZIP_MAGIC:
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
    is_gzip = file.read(2) == GZIP_MAGIC
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


def copy_text(path: Path, target: Path) -> None:
    """``path``'s text (gunzipped when it is gzip, bounded as :func:`text_reader` bounds it)
    written to ``target`` a piece at a time: a file a reader needs on disk (an SQLite export).
    A ``TraceReadError`` names ``path`` when it cannot be read, or ``target`` written."""
    try:
        out = open(target, "wb", buffering=0)  # unbuffered: every failed write is seen here
    except OSError as exc:
        raise _not_written(path, target, exc) from None
    with out, text_reader(path) as (reader, _), memoryview(bytearray(_READ_BYTES)) as room:
        while read := reader.readinto(room):
            left = room[:read]
            while len(left):
                try:
                    left = left[out.write(left) :]
                except OSError as exc:  # not the reader's: its errors are the gzip's
                    raise _not_written(path, target, exc) from None


def _not_written(path: Path, target: Path, exc: OSError) -> TraceReadError:
    return TraceReadError(
        path,
        f"cannot gunzip it into {target.parent} ({exc.strerror or exc}): set TMPDIR to a folder"
        " with room for the export",
    )


#: the most text one read gives (the running ratio is checked after each)
_READ_BYTES = 8 << 20
#: compressed bytes read before the running ratio is checked (a file's start may be denser)
RATIO_SLACK_BYTES = 64 << 10


class _Bounded:
    """A gzip reader that raises :func:`too_large` once it has given more than ``limit`` bytes,
    or more than the ratio limit times the compressed bytes read so far (plus
    :data:`RATIO_SLACK_BYTES`): a dense gzip bomb is refused after a few MB of text, not when
    its text passes the limit of the whole file's size."""

    def __init__(self, reader, limit: int, path: Path | None, file: BinaryIO):
        self.reader, self.limit, self.path, self.file, self.given = reader, limit, path, file, 0
        self.ratio = limits()[0]

    def readinto(self, buffer) -> int:
        read = self.reader.readinto(buffer)
        self.given += read
        if self.given > self.limit or (
            self.given > self.ratio * (self.file.tell() + RATIO_SLACK_BYTES)
        ):
            raise too_large(self.path, _size_of(self.file), self.given, self.file.tell())
        return read


def _size_of(file: BinaryIO) -> int:
    try:
        return os.fstat(file.fileno()).st_size
    except (OSError, io.UnsupportedOperation):
        return len(file.getbuffer())  # a BytesIO


def gunzip(data: bytes, path: Path | None = None) -> bytearray:
    """Every gzip member of ``data`` decompressed, into one buffer of the size the gzip trailer
    gives (exact for one member; grown for more members or an implausible trailer); more than
    :func:`inflate_limit` of text is a :func:`too_large` error."""
    limit = inflate_limit(len(data))
    size = min(int.from_bytes(data[-4:], "little"), MAX_RATIO * len(data), limit)
    text = bytearray(size + 1)  # +1: the end is a read of nothing
    source = io.BytesIO(data)  # shares data's buffer
    reader = _Bounded(gzip_reader(source), limit, path, source)
    filled = 0
    while True:
        if filled == len(text):  # grown, never past one byte more than the limit
            more = min(max(len(text), 1 << 20), limit + 1 - len(text))
            if more <= 0:
                raise too_large(path, len(data))
            text.extend(bytes(more))
        with memoryview(text) as view, view[filled : filled + _READ_BYTES] as room:
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
