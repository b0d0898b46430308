"""What hta_lite writes or prints, made safe for whoever opens it: files written atomically,
CSV cells that a spreadsheet would run as formulas neutralised, and text for a terminal with its
control characters escaped. Names in traces come from other people's jobs: a kernel named
``=HYPERLINK(...)`` or ``\\x1b]0;...`` is data, never a formula or a terminal command.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import OutputError

if TYPE_CHECKING:
    import pandas as pd

#: a cell starting with one of these is a formula (or a DDE command) to Excel, LibreOffice and
#: Google Sheets (OWASP "CSV injection"); a quote in front makes it text
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
#: C0 and C1 control characters but newline and tab, DEL, and the bidirectional overrides
#: (text shown in another order than it is: "Trojan source")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def write_atomically(dst: str | Path, payload: bytes | str) -> Path:
    """``payload`` (text: UTF-8) into ``dst`` through a temporary file in its folder, renamed
    into place: a failed write (a full disk, an interrupt) leaves what was there before, never a
    cut file. An error writing is an :class:`OutputError` naming the file."""
    dst = Path(dst)
    data = payload.encode("utf-8") if isinstance(payload, str) else payload
    tmp = None
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".hta_lite-tmp-", dir=dst.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, dst)
        tmp = None
    except OSError as exc:
        raise OutputError(dst, f"cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return dst


def csv_cell(value: object) -> object:
    """``value``, with a text that a spreadsheet would run as a formula quoted as text."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_safe(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every text cell (and column name) passed through :func:`csv_cell`;
    numbers, including negative ones, stay numbers."""
    import pandas as pd  # here: the CLI's --help imports this module, and no pandas

    out = table.copy()
    for name in out.columns:
        column = out[name]
        if (
            column.dtype == object
            or isinstance(column.dtype, (pd.StringDtype, pd.CategoricalDtype))
            or pd.api.types.is_string_dtype(column.dtype)
        ):
            out[name] = column.astype(object).map(csv_cell)
    out.columns = [csv_cell(str(name)) for name in out.columns]
    return out


def write_csv(table: pd.DataFrame, dst: str | Path) -> Path:
    """``table`` as a CSV file (no index), formula-safe (:func:`csv_safe`) and atomic."""
    return write_atomically(dst, csv_safe(table).to_csv(index=False))


def terminal_safe(text: str) -> str:
    """``text`` with control characters (ESC sequences that clear the screen, set colours or the
    window title) and bidirectional overrides shown as ``\\x1b``-style escapes."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class TerminalWriter:
    """A text stream that writes :func:`terminal_safe` text to ``stream``: the CLI prints
    through it, so no name from a trace reaches the terminal raw."""

    def __init__(self, stream, progress: bool = False):
        self.stream, self.progress = stream, progress

    def write(self, text: str) -> int:
        if self.progress:  # a progress bar redraws its line with a carriage return
            return self.stream.write("\r".join(map(terminal_safe, text.split("\r"))))
        return self.stream.write(terminal_safe(text))

    def __getattr__(self, name: str):
        return getattr(self.stream, name)
