"""``hta-lite snapshot FILE [--compare FILE2] [--fit SIZE [--free SIZE]]``: a CUDA memory
snapshot's summary, its peak and who holds it, the verdict on each out-of-memory, what the state
at the dump implies, and whether a size asked about fits."""

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
        "--fit", metavar="SIZE", type=_size,
        help="would an allocation of SIZE (4096, 200MB, 1.5GiB) fit at the snapshot?",
    )  # fmt: skip
    cmd.add_argument(
        "--free", metavar="SIZE", type=_size, default=None,
        help="with --fit: what CUDA had free outside the allocator's segments (a snapshot does"
        " not record it; 0 when not given)",
    )  # fmt: skip


def _size(text: str) -> int:
    from ..units import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..errors import MissingDataError
    from ..facade.missing import need
    from ..facade.snapshot import MemorySnapshot

    snap = MemorySnapshot(args.file)
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.max_colwidth", 70):  # fmt: skip
        print(f"{snap}\n")
        for line in snapshot_lines(snap):
            print(line)
        try:
            table = need(snap.oom())
            print("\nOut of memory")
            print(table.drop(columns="advice").to_string(index=False))
            for row in table.itertuples():
                print(f"- entry {row.index}: {row.verdict}: {row.advice}")
        except MissingDataError:
            print("\nOut of memory: none recorded in an allocator trace. At the dump:")
            for row in snap.at_dump().itertuples():
                print(f"- device {row.device}: {row.reading}")
        if args.fit is not None:
            free = 0 if args.free is None else args.free
            fit = snap.would_fit(args.fit, device_free_bytes=free).iloc[0]
            assumed = (
                f"with {free:,} bytes free on the device (--free)"
                if args.free is not None
                else "with no free device memory assumed (a snapshot does not record it: --free)"
            )
            print(f"\nWould {args.fit:,} bytes fit, {assumed}? {fit['verdict']}: {fit['advice']}")
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
    if not snap.traced:
        lines += [
            f"\nNo allocator trace (memory over time unknown); at the dump:"
            f" {fmt_bytes(peak.active_bytes)} in use on device {peak.device}",
            "Held at the dump by",
        ]
    else:
        lines += [
            f"\nPeak: {fmt_bytes(peak.active_bytes)} in use on device {peak.device} (trace"
            f" entry {peak.index}; {fmt_bytes(peak.before_trace_bytes)} allocated before the"
            " trace began)",
            "Held at the peak by",
        ]
    return [*lines, peak.by_site.head(10).to_string(index=False)]
