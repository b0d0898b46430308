"""``hta-lite snapshot FILE [--compare FILE2] [--fit BYTES]``: a CUDA memory snapshot's summary,
its peak and who holds it, and the verdict on each out-of-memory (or on a size asked about)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    cmd = sub.add_parser(
        "snapshot",
        help="a CUDA memory snapshot (torch.cuda.memory._dump_snapshot): fragmentation, peak, OOM"
        " verdicts",
    )
    cmd.add_argument("file", help="the snapshot .pickle (gzip-compressed too)")
    cmd.add_argument("--compare", metavar="FILE2", help="a second snapshot: growth by site")
    cmd.add_argument(
        "--fit", metavar="BYTES", type=int, help="would an allocation of BYTES fit at the snapshot?"
    )


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..errors import MissingDataError
    from ..facade.snapshot import MemorySnapshot

    snap = MemorySnapshot(args.file)
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.max_colwidth", 70):  # fmt: skip
        print(f"{snap}\n")
        for line in snapshot_lines(snap):
            print(line)
        try:
            table = snap.oom()
            print("\nOut of memory")
            print(table.drop(columns="advice").to_string(index=False))
            for row in table.itertuples():
                print(f"- entry {row.index}: {row.verdict}: {row.advice}")
        except MissingDataError as exc:
            print(f"\nOut of memory: none recorded ({exc.problem})")
        if args.fit is not None:
            fit = snap.would_fit(args.fit).iloc[0]
            print(f"\nWould {args.fit:,} bytes fit? {fit['verdict']}: {fit['advice']}")
        if args.compare:
            other = MemorySnapshot(args.compare)
            print(f"\nIn use by site, {args.file} (a) against {args.compare} (b)")
            print(snap.compare(other).head(15).to_string(index=False))
            print(snap.compare(other, by="state").to_string(index=False))
    return 0


def snapshot_lines(snap) -> list[str]:
    """The summary and the peak as the CLI and the report print them."""
    from ..errors import MissingDataError
    from ..units import fmt_bytes

    lines = ["Summary (bytes)", snap.summary().to_string(index=False)]
    for row in snap.summary().itertuples():
        lines.append(
            f"- device {row.device}: {fmt_bytes(row.reserved_bytes)} reserved,"
            f" {fmt_bytes(row.allocated_bytes)} allocated, {fmt_bytes(row.free_external_bytes)}"
            f" cached free, largest free block {fmt_bytes(row.largest_free_block_bytes)}"
            f" ({row.fragmentation_pctg:.1f} % of the free memory unusable by one allocation)"
        )
    try:
        peak = snap.peak()
    except MissingDataError as exc:
        return [*lines, f"\nPeak: unknown ({exc.problem})"]
    lines += [
        f"\nPeak: {fmt_bytes(peak.active_bytes)} in use on device {peak.device} (trace entry"
        f" {peak.index}; {fmt_bytes(peak.before_trace_bytes)} allocated before the trace began)",
        "Held at the peak by",
        peak.by_site.head(10).to_string(index=False),
    ]
    return lines
