"""Command line: ``hta-lite summarize TRACE_DIR`` (per-rank summary tables) and
``hta-lite diff CONTROL TEST`` (comparison and regression gate).

Exit codes: 0 ok, 1 regression (with ``--fail-on-regression``), 2 usage or input error
(one-line message; ``--debug`` shows the traceback).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
    diff = sub.add_parser(
        "diff",
        help="compare two trace folders; exit 1 on a GPU-time regression with --fail-on-regression",
        description="Compare a control and a test trace folder. The gate metric is the median over "
        "ProfilerSteps of the GPU busy time launched per step (whole-trace GPU busy time without steps).",
    )
    diff.add_argument("control", help="baseline trace folder")
    diff.add_argument("test", help="new trace folder")
    diff.add_argument("--rank", type=int, help="rank to compare in both (default: the first rank of each)")
    diff.add_argument("--control-rank", type=int)
    diff.add_argument("--test-rank", type=int)
    diff.add_argument("--threshold", default="5%", help="allowed increase of the gate metric, e.g. 5%% or 0.05")
    diff.add_argument("--fail-on-regression", action="store_true", help="exit 1 when the gate metric regresses")
    diff.add_argument("--json", metavar="FILE", help="write the machine-readable result here ('-' for stdout)")
    diff.add_argument("--top", type=int, default=10, help="kernels to list in the top-changes table")
    return parser


def parse_threshold(text: str) -> float:
    value = float(text.rstrip("%"))
    return value / 100.0 if text.endswith("%") or value > 1 else value


def run_diff(args: argparse.Namespace) -> int:
    import json

    from .diff import TraceDiff

    control_rank = args.control_rank if args.control_rank is not None else args.rank
    test_rank = args.test_rank if args.test_rank is not None else args.rank
    result = TraceDiff.compare(args.control, args.test, control_rank, test_rank, parse_threshold(args.threshold), args.top)
    with pd.option_context("display.width", 200, "display.max_colwidth", 70):
        print(result.summary, "\n")
        print("Temporal breakdown (µs / %)")
        print(result.temporal.to_string(), "\n")
        print("Kernel time by type (µs)")
        print(result.kernel_types.to_string(), "\n")
        if len(result.steps):
            print("Per step, median over steps (µs)")
            print(result.steps.to_string(), "\n")
        print("Largest kernel time changes (µs)")
        print(result.top_kernels.rename(index=lambda n: n[:70]).to_string())
    if args.json:
        def records(df: pd.DataFrame, key: str) -> list:
            return json.loads(df.reset_index(names=key).to_json(orient="records")) if len(df) else []  # NaN -> null

        payload = {
            "ranks": result.ranks,
            "gate": result.gate,
            "temporal": records(result.temporal, "metric"),
            "kernel_types": records(result.kernel_types, "kernel_type"),
            "per_step_median": records(result.steps, "metric"),
            "top_kernels": records(result.top_kernels, "name"),
            "summary": result.summary,
        }
        text = json.dumps(payload, indent=1)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text)
    return 1 if args.fail_on_regression and result.gate["regression"] else 0


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
        return run_diff(args) if args.command == "diff" else summarize(args)
    except TraceError as exc:
        if args.debug:
            raise
        print(f"hta-lite: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
