"""Command line: ``hta-lite summarize TRACE_DIR`` prints the per-rank summary tables.

Exit codes: 0 ok, 2 usage or input error (one-line message; ``--debug`` shows the traceback).
"""
from __future__ import annotations

import argparse
import sys

import pandas as pd

from .errors import TraceError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hta-lite", description="Analyze a folder of PyTorch profiler (Kineto) traces.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    summarize = sub.add_parser("summarize", help="print per-rank GPU time summary tables")
    summarize.add_argument("trace_dir", help="folder with one *.json / *.json.gz trace per rank")
    summarize.add_argument("--ranks", type=int, nargs="*", help="ranks to include (default: all)")
    summarize.add_argument("--serial", action="store_true", help="parse ranks in this process")
    summarize.add_argument("--include-last-profiler-step", action="store_true")
    return parser


def summarize(args: argparse.Namespace) -> int:
    from .analysis import TraceAnalysis

    analysis = TraceAnalysis(
        trace_dir=args.trace_dir, parallel=not args.serial, include_last_profiler_step=args.include_last_profiler_step
    )
    ranks = args.ranks or None
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 60):
        print(f"Loaded ranks {analysis.ranks} from {args.trace_dir}\n")
        print("Temporal breakdown (µs, % of GPU span)")
        print(analysis.get_temporal_breakdown(visualize=False, ranks=ranks).to_string(index=False), "\n")
        print("Communication / computation overlap (%)")
        print(analysis.get_comm_comp_overlap(visualize=False, ranks=ranks).to_string(index=False), "\n")
        print("Idle time by cause (µs)")
        idle, _ = analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)
        print(idle.to_string(index=False), "\n")
        type_df, kernel_df = analysis.get_gpu_kernel_breakdown(visualize=False, ranks=ranks)
        print("GPU time by kernel type (µs, all ranks)")
        print(type_df.to_string(index=False), "\n")
        top = kernel_df[kernel_df["name"] != "others"].nlargest(10, "sum (us)")
        top = top.assign(name=top["name"].str.slice(0, 60))
        print("Top kernels (µs)")
        print(top.to_string(index=False), "\n")
        health = analysis.health()
        problems = health[~health["item"].str.startswith(("events read", "GPU events kept", "CPU events kept", "ProfilerSteps"))]
        print("Trace health (events skipped, clamped or excluded)")
        print(problems.to_string(index=False) if len(problems) else "nothing skipped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return summarize(args)
    except TraceError as exc:
        if args.debug:
            raise
        print(f"hta-lite: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
