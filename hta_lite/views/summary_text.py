"""What ``hta-lite summarize`` and ``hta-lite batch`` print and write of their summary tables
(``{file stem: table}``, and ``{file stem: why it is absent}``): the findings first, the key
findings, then each view under its heading (:data:`~hta_lite.analyses.catalog.HEADINGS`) or
why it is absent, then the trace-health problems; or every table as CSV or JSON; and the
tables as files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..analyses.catalog import HEADINGS
from ..safe_output import csv_safe, write_atomically, write_csv
from ..units import distinct_names
from .findings_cli import caveat_lines, finding_lines
from .summary import shown


def print_machine(tables: dict, absent: dict, fmt: str) -> None:
    """Every table as CSV (``# name`` before each) or JSON (``absent`` too), nothing else."""
    if fmt == "csv":
        for key, table in tables.items():
            print(f"# {key}")
            print(csv_safe(table).to_csv(index=False), end="")
        for key, why in absent.items():
            print(f"# {key}: none ({why})")
    else:
        payload = {k: json.loads(v.to_json(orient="records")) for k, v in tables.items()}
        print(json.dumps({**payload, "absent": absent}, indent=1))


def print_text(tables: dict, absent: dict, health: pd.DataFrame, max_rows: int | None = None):
    """The summary as text; ``health``: the rows of its problems; ``max_rows``: the rows shown
    of a longer table (the files and ``--format csv`` have them all)."""
    with pd.option_context(
        "display.width", 200, "display.max_columns", 20, "display.max_colwidth", 60
    ):
        print(HEADINGS["findings"])
        if "findings" in tables:
            found = tables["findings"]
            print("\n".join(finding_lines(found) + caveat_lines(found)))
        else:
            print(f"(none: {absent['findings']})")
        print("\nKey findings")
        if "key_findings" in tables:
            print("\n".join(f"- {line}" for line in tables["key_findings"]["finding"]))
        else:
            print(f"(none: {absent['key_findings']})")
        print()
        for key, heading in HEADINGS.items():
            if key in ("findings", "key_findings") or (key not in tables and key not in absent):
                continue
            print(heading)
            if key in absent:
                print(f"(none: {absent[key]})\n")
                continue
            table = shown(key, tables[key])
            if key == "top_kernels":
                table = table.assign(name=distinct_names(table["name"], 60)).head(10)
            said = [table.attrs[k] for k in ("why", "note") if k in table.attrs]
            if max_rows is not None and len(table) > max_rows:
                said.append(f"({len(table) - max_rows:,} more rows: -o or --format csv)")
                table = table.head(max_rows)
            print(table.to_string(index=False) if len(table) else "(none)")
            print(f"{' '.join(said)}\n" if said else "")
        print("Trace health (warnings: events skipped, clamped or not linked, steps unknown)")
        print(health.to_string(index=False) if len(health) else "nothing skipped")


def write_tables(tables: dict, out: Path, fmt: str) -> None:
    """Each table as ``out/<name>.csv`` (or ``.parquet``), written atomically."""
    out.mkdir(parents=True, exist_ok=True)
    for key, table in tables.items():
        if fmt == "parquet":
            write_atomically(out / f"{key}.parquet", table.to_parquet(index=False))
        else:
            write_csv(table, out / f"{key}.csv")
