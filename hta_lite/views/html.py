"""The report's HTML pieces: the page (sections, navigation, charts) and tables a reader can
take in — bytes in KiB / MiB / GiB, long names shortened with the full name on hover, wide
tables scrolling inside their box. Every name is HTML-escaped: kernel names are data, never
markup."""

from __future__ import annotations

import datetime as dt
import html
import math
import re
import urllib.parse
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from ..plots import full_data
from ..safe_output import write_atomically, write_csv
from ..units import fmt_bytes

#: where a page links the data of its reduced charts, replaced by the real folder in ``html()``
DATA_DIR = "\x00data-dir\x00"

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232a;
background:#f6f7f9}
header{background:#22303c;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;opacity:.8}
nav{padding:8px 28px;background:#e8ecf0;position:sticky;top:0;z-index:5}
nav a{margin-right:14px;color:#22303c;text-decoration:none;font-size:14px}
section{background:#fff;margin:18px 28px;padding:16px 22px;border-radius:6px;
box-shadow:0 1px 3px rgba(0,0,0,.08);overflow:hidden}
h2{margin-top:0;font-size:18px}p.note{color:#55606b;font-size:13px;margin-top:0}
div.table{max-width:100%;overflow-x:auto;margin:8px 0 14px}
table{border-collapse:collapse;font-size:12.5px}
th,td{border:1px solid #dde2e7;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f0f3f6}td.text,th.text{text-align:left}.chart{min-height:200px}
td.prose{white-space:normal;text-align:left;min-width:220px;max-width:520px;line-height:1.35}
pre{background:#f4f6f8;padding:10px;overflow-x:auto;font-size:12.5px}
ul.findings{padding-left:20px;margin:6px 0}ul.findings li{margin:5px 0;line-height:1.4}
ul.findings a{color:#1f5f99}
"""

#: columns holding bytes (shown in binary units, the exact count on hover)
BYTES_COLUMN = re.compile(r"bytes|allocated|reserved|fragmentation|cached|growth")
NOT_BYTES = re.compile(r"_ts$|pctg|count|_vs_|calls|ratio")
NAME_LIMIT = 70
#: numbers that are names (a step, a rank), written without thousands separators
ID_COLUMNS = {"rank", "step", "stream", "instance", "ordinal", "pid", "tid", "device", "index"}


def is_bytes_column(name: str) -> bool:
    return bool(BYTES_COLUMN.search(name)) and not NOT_BYTES.search(name)


def table(
    df: pd.DataFrame | None,
    max_rows: int = 60,
    index: bool = False,
    empty: str = "",
    prose: tuple[str, ...] = (),
) -> str:
    """An HTML table of ``df`` (its first ``max_rows`` rows, and how many were left out);
    ``empty``: the sentence that says why there is nothing (never a bare "No data"; default the
    table's ``attrs["why"]``); ``prose``: columns of sentences (evidence, advice), shown whole
    and wrapped, never cut to a hover."""
    if df is None or len(df) == 0:
        empty = empty or (df.attrs.get("why", "") if df is not None else "")
        return f"<p class='note'>{html.escape(empty or 'Nothing to show.')}</p>"
    shown = df.head(max_rows)
    if index:
        shown = shown.reset_index()
    if isinstance(shown.columns, pd.MultiIndex):  # ("queue_length", "mean") -> "mean"
        shown.columns = [next((p for p in c[::-1] if p), "") for c in shown.columns]
    decimals = [_decimals(shown.iloc[:, i]) for i in range(shown.shape[1])]
    head = "".join(f"<th class='{_align(shown[c])}'>{html.escape(str(c))}</th>" for c in shown)
    rows = []
    for values in zip(*(shown.iloc[:, i] for i in range(shown.shape[1]))):
        cells = (
            f"<td class='prose'>{html.escape(str(value))}</td>"
            if name in prose
            else _cell(value, str(name), _align(shown.iloc[:, i]), decimals[i])
            for i, (name, value) in enumerate(zip(shown.columns, values))
        )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = (
        f"<p class='note'>First {max_rows} of {len(df):,} rows.</p>" if len(df) > max_rows else ""
    )
    return (
        f"<div class='table'><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>{more}"
    )


def _align(column: pd.Series) -> str:
    return "num" if pd.api.types.is_numeric_dtype(column) else "text"


def _decimals(column: pd.Series) -> int:
    """0 for a column of whole numbers, else 2: one format per column."""
    if not pd.api.types.is_float_dtype(column):
        return 0
    values = column.dropna().to_numpy(float)
    values = values[np.isfinite(values)]
    return 0 if len(values) and (values == np.round(values)).all() else 2


def _cell(value, column: str, align: str, decimals: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return f"<td class='{align}'>–</td>"
    if align == "num" and not isinstance(value, bool):
        number = float(value)
        if is_bytes_column(column):
            return f"<td title='{number:,.0f} bytes'>{fmt_bytes(number)}</td>"
        if column in ID_COLUMNS:
            return f"<td>{number:.0f}</td>"
        return f"<td>{number:,.{decimals}f}</td>"
    text = str(value)
    if len(text) > NAME_LIMIT:
        short = html.escape(text[: NAME_LIMIT - 1] + "…")
        return f"<td class='text' title='{html.escape(text, quote=True)}'>{short}</td>"
    return f"<td class='text'>{html.escape(text)}</td>"


class Report:
    """Accumulates sections; ``html()`` renders the page."""

    def __init__(self, title: str):
        self.title = title
        self.sections: list[tuple[str, str, str]] = []
        self.n_charts = 0
        #: the data of charts drawn reduced (:mod:`hta_lite.plots.budget`), by CSV file name
        self.data: dict[str, pd.DataFrame] = {}

    def section(self, anchor: str, heading: str, *parts: str) -> None:
        self.sections.append((anchor, heading, "".join(parts)))

    def chart(self, fig, height: int = 420) -> str:
        self.n_charts += 1
        fig.update_layout(
            height=fig.layout.height or height, margin={"l": 60, "r": 30, "t": 60, "b": 60}
        )
        div = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{self.n_charts}",
            config={"displaylogo": False, "responsive": True},
        )
        full = full_data(fig)
        if full is None:
            return f"<div class='chart'>{div}</div>"
        name = f"chart-{self.n_charts}.csv"
        self.data[name] = full
        link = (
            f"<p class='note'>Drawn reduced: the chart's data ({len(full):,} rows) is in"
            f" <a href='{DATA_DIR}/{name}'>{name}</a> next to this page.</p>"
        )
        return f"<div class='chart'>{div}</div>{link}"

    def html(self, data_dir: str = "report_data") -> str:
        """The page; its links to the data of reduced charts point into ``data_dir`` (a folder
        name next to the page: :meth:`write`)."""
        from plotly.offline import get_plotlyjs

        nav = "".join(f"<a href='#{a}'>{html.escape(h)}</a>" for a, h, _ in self.sections)
        body = "".join(
            f"<section id='{a}'><h2>{html.escape(h)}</h2>{content}</section>"
            for a, h, content in self.sections
        )
        stamp = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        return (
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(self.title)}</title><style>{CSS}</style>"
            f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"<header><h1>{html.escape(self.title)}</h1>"
            f"<p>hta_lite {__version__} · generated {stamp}</p></header>"
            f"<nav>{nav}</nav>{body}</body></html>"
        ).replace(DATA_DIR, urllib.parse.quote(data_dir))

    def write(self, path: str | Path) -> Path:
        """The page at ``path`` and the data of its reduced charts as CSV files in
        ``<page name>_data/`` next to it, each written atomically."""
        path = Path(path)
        folder = f"{path.stem}_data"
        for name, frame in self.data.items():
            write_csv(frame, path.parent / folder / name)
        return write_atomically(path, self.html(folder))


def note(text: str) -> str:
    """A sentence under a heading (escaped)."""
    return f"<p class='note'>{html.escape(text)}</p>"


def findings_list(findings: pd.DataFrame, anchors: set[str]) -> str:
    """The key findings as a list, each linking to the section of the view behind it."""
    items = []
    for text, section in zip(findings["finding"], findings["section"]):
        link = f" <a href='#{html.escape(section)}'>details</a>" if section in anchors else ""
        items.append(f"<li>{html.escape(str(text))}{link}</li>")
    return f"<ul class='findings'>{''.join(items)}</ul>"
