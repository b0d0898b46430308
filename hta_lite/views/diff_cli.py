"""``hta-lite diff CONTROL TEST``: what changed between two runs, the regression gate, and the
findings that appeared, grew, shrank or disappeared (``TraceDiff.compare``)."""

from __future__ import annotations

import argparse
import math
import sys

from ..safe_output import write_atomically


def parse_threshold(text: str) -> float:
    """``5%`` or ``0.05`` as a fraction (a number above 1 is a percentage); anything but a
    finite number >= 0 is a usage error (argparse's exit code 2): a ``nan`` threshold would make
    every comparison pass."""
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"not a finite threshold >= 0: {text!r} (e.g. 5% or 0.05)")
    return value / 100.0 if text.strip().endswith("%") or value > 1 else value


def run(args: argparse.Namespace) -> int:
    import json

    import pandas as pd

    from ..analyses.diff_gate import gate_lines, gate_table
    from ..facade.trace_diff import TraceDiff

    control_rank = args.control_rank if args.control_rank is not None else args.rank
    test_rank = args.test_rank if args.test_rank is not None else args.rank
    result = TraceDiff.compare(
        args.control,
        args.test,
        control_rank,
        test_rank,
        threshold=args.threshold,
        top=args.top,
        metrics=args.metric,
    )
    if args.json != "-":
        with pd.option_context("display.width", 200, "display.max_colwidth", 70):
            print(result.summary, "\n")
            print("Gate")
            print(gate_table(result.gate).to_string(index=False), "\n")
            print("Temporal breakdown (µs / %)")
            print(result.temporal.to_string(), "\n")
            print("Kernel time by type (µs)")
            print(result.kernel_types.to_string(), "\n")
            if len(result.steps):
                print("Per step, median over steps (µs)")
                print(result.steps.to_string(), "\n")
            print("Largest kernel time changes (µs)")
            print(result.top_kernels.rename(index=lambda n: n[:70]).to_string())
            if result.findings is not None and len(result.findings):
                print("\nFindings: saving per step of each run (ms)")
                print(result.findings.to_string(index=False))
    if args.json:

        def records(df: pd.DataFrame, key: str) -> list:
            return (
                json.loads(df.reset_index(names=key).to_json(orient="records")) if len(df) else []
            )  # NaN -> null

        payload = {
            "ranks": result.ranks,
            "gate": result.gate,
            "temporal": records(result.temporal, "metric"),
            "kernel_types": records(result.kernel_types, "kernel_type"),
            "per_step_median": records(result.steps, "metric"),
            "top_kernels": records(result.top_kernels, "name"),
            "findings": (
                json.loads(result.findings.to_json(orient="records"))
                if result.findings is not None
                else []
            ),
            "summary": result.summary,
        }
        text = json.dumps(payload, indent=1)
        if args.json == "-":
            print(text)
        else:
            write_atomically(args.json, text)
    regressed = args.fail_on_regression and result.gate["regression"]
    if regressed:
        for line in gate_lines(result.gate):
            if line.startswith("REGRESSION"):
                print(f"hta-lite: {line}", file=sys.stderr)
    return 1 if regressed else 0
