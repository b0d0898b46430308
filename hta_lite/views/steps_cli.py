"""``hta-lite steps TRACE_DIR``: the anomalous steps of a run, their causes and origin ranks, and
the periods they come back with."""

from __future__ import annotations

import argparse

from ..settings import number_argument

ANOMALY_COLUMNS = ["rank", "step", "step_time", "typical", "score", "cause", "cause_excess(us)",
                   "origin_rank"]  # fmt: skip


def anomaly_columns(scored) -> list[str]:
    """:data:`ANOMALY_COLUMNS`, with ``window`` after ``step`` when a rank was profiled in
    several windows (files)."""
    if "window" in scored.columns and scored["window"].max() > 0:
        return ["rank", "step", "window", *ANOMALY_COLUMNS[2:]]
    return ANOMALY_COLUMNS


def unscored(scored) -> str | None:
    """Why no step of ``scored`` (:meth:`get_step_anomalies`'s table) could be scored, or None:
    no ProfilerStep, or too few steps per rank to know the typical one."""
    from ..analyses.step_anomalies import MIN_STEPS
    from ..facade.missing import why

    reason = why(scored)
    if reason:
        return reason
    if len(scored) and scored["score"].isna().all():
        return (
            f"{len(scored)} steps over {scored['rank'].nunique()} rank(s): too few to score"
            f" (a rank needs {MIN_STEPS} profiled steps to know its typical one)"
        )
    return None


def add_parser(sub, common) -> None:
    cmd = sub.add_parser("steps", help="anomalous and periodic steps: which, why, who caused them")
    cmd.add_argument("trace_dir")
    cmd.add_argument(
        "--threshold", type=number_argument, default=3.5, help="score cut (default 3.5)"
    )
    cmd.add_argument(
        "--baseline", choices=("median", "rolling"), default="median",
        help="the typical step: the run's median, or a rolling one (a drifting run)",
    )  # fmt: skip
    common(cmd)


def run(args: argparse.Namespace, load) -> int:
    import pandas as pd

    analysis = load(args)
    scored = analysis.get_step_anomalies(threshold=args.threshold, baseline=args.baseline)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        for line in step_lines(analysis, scored, args.threshold):
            print(line)
    return 0


def step_lines(analysis, scored, threshold: float) -> list[str]:
    """The text the CLI prints and the report shows."""
    from ..units import fmt_us

    reason = unscored(scored)
    if reason:
        return [f"Steps not scored: {reason}."]
    odd = scored[scored["anomalous"]]
    steps = scored.groupby("rank")["step"].agg(["min", "max", "size"])
    windows = int(scored["window"].max()) + 1 if "window" in scored.columns and len(scored) else 1
    lines = [
        f"{len(steps)} rank(s), steps {int(steps['min'].min())}..{int(steps['max'].max())}"
        + (f" in {windows} profiled windows" if windows > 1 else "")
        + ";"
        f" {len(odd)} anomalous (score > {threshold:g} against the {scored['baseline'].iat[0]}"
        " step)"
    ]
    if len(odd):
        lines += ["", "Anomalous steps (µs)", odd[anomaly_columns(scored)].to_string(index=False)]
    periods = analysis.get_step_periodicity(threshold)
    lines.append("")
    if periods.empty:
        lines.append("No period: the anomalous steps do not recur every N steps")
    for row in periods.itertuples():
        lines.append(
            f"rank {row.rank}: every {row.period} steps, at step % {row.period} == {row.phase}"
            f" ({row.occurrences} of {row.slots}: steps {row.steps}): {row.cause},"
            f" {fmt_us(row._8)} longer each"
        )
    if len(analysis.ranks) > 1 and len(odd):
        job = analysis.get_job_step_anomalies(threshold)
        job = job[job["anomalous"]]
        lines += ["", "Job steps (the slowest rank's), and the rank that caused each",
                  job[["step", "step_time", "slowest_rank", "origin_rank", "cause"]]
                  .to_string(index=False)]  # fmt: skip
    return lines
