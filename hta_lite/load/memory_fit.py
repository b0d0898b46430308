"""Whether a folder fits in this machine's memory when ``TraceAnalysis`` loads it, said before
it is parsed.

``TraceAnalysis`` keeps every rank's tables; with the views and findings computed it holds about
as many bytes as the traces' text (``TEXT_BYTES_PER_BYTE_HELD``, measured in
docs/performance.md). A folder whose text is more than the memory available gets a warning that
names the route with bounded memory (``summarize_folder``, ``hta-lite batch``) before the
machine runs out, not a kernel that dies half-way.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..units import fmt_bytes
from . import gzip_text

#: bytes an analysis holds per byte of trace text, views and findings computed (16 and 64
#: copies of a real trace: 0.84 and 0.73, benchmarks/bench_memory_fit.py), rounded up
TEXT_BYTES_PER_BYTE_HELD = 1.0


def text_bytes(paths: Iterable[Path]) -> int:
    """The traces' text in bytes: a gzip file's trailer (capped as
    :func:`~hta_lite.load.gzip_text.text_length` caps it), else its size; a file that cannot be
    read counts 0 (its reader names the problem)."""
    total = 0
    for path in paths:
        try:
            with gzip_text.open_regular(path) as file:
                total += gzip_text.text_length(file)[1]
        except Exception:  # noqa: BLE001 - an estimate: the reader says what is wrong
            continue
    return total


def available_bytes(root: Path = Path("/")) -> int | None:
    """Memory this process can still use: the kernel's ``MemAvailable``, less where a control
    group (v2 ``memory.max``, v1 ``memory.limit_in_bytes``) leaves less; None where neither is
    known (not Linux)."""
    found = []
    meminfo = _read(root / "proc/meminfo")
    for line in (meminfo or "").splitlines():
        if line.startswith("MemAvailable:"):
            found.append(_int(line.split(":")[1].removesuffix("kB"), 1024))
    for group, limit, usage in (
        ("sys/fs/cgroup", "memory.max", "memory.current"),
        ("sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"),
    ):
        cap, used = _int(_read(root / group / limit)), _int(_read(root / group / usage))
        if cap is not None and used is not None and cap < 1 << 60:  # "max": no limit
            found.append(max(cap - used, 0))
    found = [n for n in found if n is not None]
    return min(found) if found else None


def too_large(paths: list[Path]) -> str | None:
    """What to say where the traces' text is more than the memory available, else None."""
    if len(paths) < 2:  # one file: nothing to summarize rank by rank
        return None
    have = available_bytes()
    if have is None:
        return None
    need = int(text_bytes(paths) * TEXT_BYTES_PER_BYTE_HELD)
    if need <= have:
        return None
    return (
        f"{len(paths)} trace files hold {fmt_bytes(need)} of trace text, and TraceAnalysis"
        f" keeps about as much in memory: more than the {fmt_bytes(have)} available."
        " hta_lite.summarize_folder(folder) or `hta-lite batch FOLDER` summarizes it with"
        " bounded memory, each rank where it is loaded (docs/scale.md); or load some ranks'"
        " files (TraceAnalysis(trace_files={rank: path}))."
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _int(text: str | None, unit: int = 1) -> int | None:
    try:
        return int(text) * unit if text is not None else None
    except ValueError:  # "max", or not a number
        return None
