"""One exception family for everything hta_lite refuses to load.

Every message names the file (or folder) and what is wrong with it, so a user
looking at a folder of hundreds of rank traces knows which one to fix.
"""

from __future__ import annotations

from pathlib import Path


class TraceError(Exception):
    """Base class of every error hta_lite raises on bad input."""

    def __init__(self, path: str | Path | None, problem: str):
        self.path = None if path is None else str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)

    def __reduce__(self):  # rebuilt from (path, problem): errors cross process boundaries
        return type(self), (self.path, self.problem)


class TraceNotFoundError(TraceError):
    """The trace folder or file does not exist."""


class NoTraceFilesError(TraceError):
    """The folder holds no ``*.json`` / ``*.json.gz`` file."""


class TraceReadError(TraceError):
    """The file cannot be read: permissions, truncated or corrupt gzip, I/O error."""


class TraceDecodeError(TraceError):
    """The bytes are not valid JSON (truncated file, garbage, bad encoding)."""


class TraceFormatError(TraceError):
    """Valid JSON, but not a Kineto trace (no ``traceEvents`` list, wrong shape)."""


class TraceParseError(TraceError):
    """Parsing the file failed in an unexpected way (a defect of hta_lite: please report it)."""


class NoRanksLoadedError(TraceError):
    """No file of the folder could be loaded (each file's problem is in the message)."""


class DuplicateRankError(TraceError):
    """Two files claim the same rank."""


class SnapshotError(TraceError):
    """A CUDA memory snapshot that cannot be read: not a pickle, truncated, not a snapshot, or a
    pickle that names a Python global (refused before anything from it runs)."""


class SelectionError(TraceError, ValueError):
    """A filter argument (iteration, stream, name, ...) matches nothing in the trace; the message
    says what the trace has."""


class MissingDataError(TraceError, ValueError):
    """The analysis needs events the trace does not have; the message says which and how to
    record them."""


class RankNotFoundError(TraceError, KeyError):
    """An analysis was asked for a rank that is not loaded."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return Exception.__str__(self)


class SettingError(ValueError):
    """A setting (an argument, an option or an ``HTA_LITE_*`` environment variable) that is not
    a value it can take; the message names the setting and what it accepts."""


class OutputError(TraceError):
    """A file hta_lite was asked to write (a report, a table, a trace) cannot be written."""
