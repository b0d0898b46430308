"""Nsight Systems reports (``.nsys-rep``, ``.qdrep``): exported to SQLite by the ``nsys`` command
when it is on PATH, then read as an export (:mod:`.nsys`).

The export goes to a temporary folder this module creates, and only that folder is removed once
the tables are read; with the cache on (the default) the tables are kept there, so a report is
exported once. Without ``nsys`` on PATH, or when the export fails, the error gives the command to
run.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from ...errors import TraceFormatError
from ..finish import ReadRank
from ..health_items import note
from . import nsys

#: the longest an export may take (a large report exports in a few minutes)
EXPORT_TIMEOUT_S = 1800


def export_command(path: Path, target: str | Path, blobs: bool = True) -> list[str]:
    """The ``nsys export`` command that writes ``path``'s SQLite export to ``target``, with the
    NVTX payloads (NCCL's message sizes: ``--include-blobs``, which nsys before 2023 lacks)."""
    return ["nsys", "export", "--type", "sqlite", *(["--include-blobs", "true"] if blobs else []),
            "--force-overwrite", "true", "--output", str(target), str(path)]  # fmt: skip


def read(path: Path) -> list[ReadRank]:
    """The ranks of a report, read from its SQLite export (``nsys_report_exported`` in health)."""
    shown = " ".join(export_command(Path(path.name), path.name.rsplit(".", 1)[0] + ".sqlite"))
    program = shutil.which("nsys")
    if program is None:
        raise TraceFormatError(
            path,
            f"an Nsight Systems report, and `nsys` is not on PATH: export it with `{shown}` and"
            " open the .sqlite file (docs/nsight-systems.md)",
        )
    folder = Path(tempfile.mkdtemp(prefix="hta_lite_nsys_"))
    try:
        target = folder / "export.sqlite"
        for blobs in (True, False):  # an nsys without --include-blobs: the export without
            command = [program, *export_command(path, target, blobs)[1:]]
            try:
                done = subprocess.run(command, capture_output=True, text=True,
                                      timeout=EXPORT_TIMEOUT_S, check=False)  # fmt: skip
            except (OSError, subprocess.TimeoutExpired) as exc:
                problem = f"`nsys export` did not finish ({exc}): run `{shown}`"
                raise TraceFormatError(path, problem) from None
            if done.returncode == 0 and target.is_file():
                break
        if done.returncode != 0 or not target.is_file():
            said = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise TraceFormatError(
                path, f"`nsys export` failed ({said[0][:300]}): run `{shown}` to see why"
            )
        parts = nsys.read(target)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the folder made above, nothing else
    for part in parts:
        note(part.problems, "nsys_report_exported", 1)
    return parts
