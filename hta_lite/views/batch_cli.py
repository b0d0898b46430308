"""``hta-lite batch TRACE_DIR``: the summary of a folder of hundreds or thousands of ranks with
bounded memory (:func:`hta_lite.tools.batch.summarize_folder`: each rank summarized where it is
loaded, the cross-rank views from small per-rank partials). It prints what ``summarize`` prints
of the views the batch gives, in the same form, and says which it does not give and why."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TraceError

if TYPE_CHECKING:  # --help imports no pandas
    import pandas as pd

#: the rows printed of a longer table (``-o`` and ``--format csv`` have them all)
MAX_ROWS = 20


def add_parser(sub, common_flags, output_flags) -> None:
    cmd = sub.add_parser(
        "batch",
        help="summarize hundreds of ranks with bounded memory (each rank in a worker, the views"
        " across ranks from their partials)",
    )
    cmd.add_argument("trace_dir", help="folder with one trace file per rank")
    output_flags(cmd, "write every table of the batch and its report.html here")
    cmd.add_argument(
        "--snapshot",
        help="a CUDA memory snapshot of the run (torch.cuda.memory._dump_snapshot): its"
        " findings, tables and report section join the batch's",
    )
    common_flags(cmd)


def run(args: argparse.Namespace, load_options, snapshot) -> int:
    from ..analyses.catalog import SNAPSHOT_VIEWS
    from ..analyses.health import problems
    from ..tools.batch import summarize_folder
    from .batch_report import write_batch_report
    from .summary_text import print_machine, print_text, write_tables

    if args.format == "parquet" and not args.out_dir:
        raise TraceError(None, "--format parquet writes files: give --out-dir")
    executor = "serial" if args.serial else "process"
    summary = summarize_folder(
        args.trace_dir, executor=executor, options=load_options(args),
        snapshot=snapshot(args.snapshot), ranks=args.ranks, graph_capture=args.graph_capture,
    )  # fmt: skip
    for path, problem in summary.skipped_files.items():
        print(f"hta-lite: skipped {path}: {problem}", file=sys.stderr)
    tables, absent = batch_tables(summary)
    if args.format in ("csv", "json"):
        print_machine(tables, absent, args.format)
    else:  # table, and parquet (whose tables go to files)
        ranks = summary["health_summary"]["rank"].tolist()
        print(f"Summarized ranks {ranks} from {args.trace_dir}, each where it was loaded\n")
        health = problems(summary["health"])[["rank", "code", "item", "count"]]
        print_text(tables, absent, health, MAX_ROWS)
    if args.out_dir:
        written = {**summary, **{k: t for k, t in tables.items() if k in SNAPSHOT_VIEWS}}
        write_tables(written, Path(args.out_dir), args.format)
        path = write_batch_report(summary, Path(args.out_dir) / "report.html")
        print(f"\nwrote {len(written)} tables and {path}", file=sys.stderr)
    return 0


#: views that say nothing where they have no rows (a rare recording mode), as in summarize
QUIET = ("graph_launches", "pipeline_stages", "cupti_counters")


def batch_tables(summary) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """``summary_tables()``'s ``(tables, absent)`` from a :class:`~hta_lite.tools.batch.Summary`:
    each view the batch gives shaped as ``summarize`` shows it, the others absent with why."""
    from ..analyses.catalog import VIEWS
    from ..missing_data import why
    from .summary import add_snapshot_views, place

    tables, absent = {}, dict(summary.absent)
    for view in VIEWS:
        if view.batch is None:
            continue
        table = summary[view.batch]
        if view.key in QUIET or not why(table):  # QUIET: no line where none, as summarize
            table = _shaped(view.key, table, summary)
        place(tables, absent, view.key, table)
    add_snapshot_views(tables, absent, summary.snapshot)
    tables["health_summary"] = summary["health_summary"]
    tables["health"] = summary["health"]
    return tables, absent


def _shaped(key: str, table: pd.DataFrame, summary):
    """The batch's ``table`` of view ``key`` as the view's builder in
    :mod:`hta_lite.views.summary` shapes it: a table, a sentence (why none) or None."""
    from ..analyses import cupti
    from ..analyses.kernels import types_across_ranks
    from ..analyses.operators.summaries import across_ranks
    from ..missing_data import no_gpu_work_in, why
    from ..tools.batch_one_rank import cupti_frames
    from ..tools.batch_operators import operator_hint
    from . import summary as views

    if key == "findings":
        return views.rounded_findings(table)
    if key == "step_anomalies":
        return views.anomalous_steps(table, lambda: summary["step_periodicity"])
    if key == "job_critical_path":
        if len(summary["health_summary"]) < 2:
            return "one rank loaded: the job path joins several ranks"
        return views.job_path_rows(
            summary["job_critical_path_summary"], summary["job_critical_path_hops"],
            summary["job_critical_path_steps"], summary["job_critical_path_problems"],
        )  # fmt: skip
    if key == "pipeline_stages":
        return views.stage_rows(table)
    if key == "collective_problems":
        return None if table.empty else table
    if key == "graph_launches":
        return views.graph_launch_rows(table)
    if key == "cupti_counters":
        return why(table) or (None if table.empty else cupti.by_operator(cupti_frames(table)))
    if key in ("collectives", "collectives_by_rank") and summary["collective_calls"].empty:
        return "no collective in the traces"
    if key == "memory_leaks" and table.empty:
        return "no allocation made in a step stays unfreed"
    if key == "operators":
        return views.top_operator_rows(
            across_ranks(table), lambda: operator_hint(summary["rank_facts"])
        )
    if key == "kernel_type_breakdown":
        return types_across_ranks(table)
    if key == "top_kernels":
        return views.top_kernel_rows(table)
    if key == "optimization_targets":
        return views.target_rows(table)
    if key == "mfu":
        return views.mfu_table_rows(table)
    if key == "step_breakdown":
        health = summary["health_summary"]
        cpu_only = not health["gpu_events"].any()
        return views.host_columns(table, no_gpu_work_in(health["rank"]) if cpu_only else None)
    return table
