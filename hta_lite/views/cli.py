"""Command line: ``hta-lite summarize TRACE_DIR`` (per-rank summary tables) and
``hta-lite diff CONTROL TEST`` (comparison and regression gate).

Exit codes: 0 ok; 1 regression found (``diff --fail-on-regression``); 2 could not run: usage or
input error (one-line message naming the file); 3 could not run: an analysis failed on this input
(a defect; ``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from importlib.util import find_spec
from pathlib import Path

from ..errors import SettingError, TraceError
from ..safe_output import TerminalWriter
from . import batch_cli, diff_cli, findings_cli, snapshot_cli, steps_cli

FORMATS = ("table", "json", "csv", "parquet")
#: the diff gate's metrics (:data:`hta_lite.analyses.diff_gate.METRICS`; kept here so that
#: ``--help`` imports no analysis)
METRICS = ("step", "gpu_busy", "idle", "exposed_comm", "kernel_type", "memory_peak")


def c_decoder_in_use() -> bool:
    """Whether traces load through the C decoder: built at install time and not ruled out by
    ``HTA_LITE_NO_C`` (found without importing it, or anything that needs pandas)."""
    return find_spec("hta_lite.load._fastjson") is not None and not os.environ.get("HTA_LITE_NO_C")


def _version() -> str:
    from .. import __version__

    decoder = (
        "C decoder"
        if c_decoder_in_use()
        else "pure-Python decoder: C decoder not built or HTA_LITE_NO_C set"
    )
    return f"hta-lite {__version__} ({decoder})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hta-lite",
        description="Analyze a folder of PyTorch profiler (Kineto) traces or Nsight Systems"
        " exports: one *.json / *.json.gz / *.sqlite file per rank.",
        epilog="Exit codes: 0 ok, 1 regression found, 2 usage or input error, 3 analysis failure."
        " Docs: docs/cli.md",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument(
        "--version",
        action="version",
        version=_version(),
        help="version, and whether the C decoder is in use",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    summarize = sub.add_parser(
        "summarize", help="per-rank summary tables; with -o also CSV/Parquet files and report.html"
    )
    summarize.add_argument(
        "trace_dir", help="folder with one trace file per rank, or one trace file"
    )
    _output_flags(summarize, "write the tables and report.html here")
    summarize.add_argument(
        "--snapshot",
        help="a CUDA memory snapshot of the run (torch.cuda.memory._dump_snapshot): its"
        " findings, tables and report section join the summary",
    )
    _common(summarize)

    report = sub.add_parser("report", help="write one self-contained HTML report (works offline)")
    report.add_argument("trace_dir")
    report.add_argument(
        "-o", "--output", default="report.html", help="HTML file to write (default: report.html)"
    )
    report.add_argument("--title", help="page title")
    report.add_argument(
        "--snapshot", metavar="FILE", help="add a CUDA memory snapshot's section (.pickle)"
    )
    _common(report)

    counters = sub.add_parser(
        "counters", help="write each rank's trace plus queue-length and bandwidth counters"
    )
    counters.add_argument("trace_dir")
    counters.add_argument(
        "-o",
        "--out-dir",
        help="folder for the augmented traces (default: <trace_dir>_with_counters)",
    )
    counters.add_argument("--suffix", default="_with_counters", help="added to each file name")
    _common(counters)

    snapshot_cli.add_parser(sub)
    steps_cli.add_parser(sub, _common)
    findings_cli.add_parser(sub, _common)
    batch_cli.add_parser(sub, _common, _output_flags)

    cache = sub.add_parser("cache", help="what the cache of parsed ranks holds, or clear it")
    cache.add_argument("action", choices=("info", "clear"))
    cache.add_argument(
        "--dir", help="cache folder (default: $HTA_LITE_CACHE_DIR or ~/.cache/hta_lite)"
    )

    diff = sub.add_parser(
        "diff",
        help="compare two trace folders; exit 1 on a regression with --fail-on-regression",
        description="Compare a control and a test trace folder (one rank of each). The gate checks"
        " the --metric(s), each per step (median over ProfilerSteps): step time by default.",
    )
    diff.add_argument("control", help="baseline trace folder")
    diff.add_argument("test", help="new trace folder")
    diff.add_argument(
        "--rank", type=int, help="rank to compare in both (default: the first rank of each)"
    )
    diff.add_argument("--control-rank", type=int)
    diff.add_argument("--test-rank", type=int)
    diff.add_argument(
        "--threshold",
        default=0.05,
        type=diff_cli.parse_threshold,
        help="allowed increase of the gate metric, e.g. 5%% or 0.05",
    )
    diff.add_argument(
        "--metric",
        nargs="+",
        default=["step"],
        choices=METRICS,
        help="what the gate checks (several allowed): step (step time, default), gpu_busy, idle,"
        " exposed_comm, kernel_type (GPU time per kernel type), memory_peak",
    )
    diff.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when a gate metric regresses"
    )
    diff.add_argument(
        "--json",
        metavar="FILE",
        help="write the machine-readable result here ('-': stdout, and nothing else there)",
    )
    diff.add_argument(
        "--top", type=int, default=10, help="kernels to list in the top-changes table"
    )
    return parser


def _output_flags(cmd: argparse.ArgumentParser, out_help: str) -> None:
    cmd.add_argument("-o", "--out-dir", help=out_help)
    cmd.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="stdout: table (default), json or csv; files in --out-dir: csv (default) or"
        " parquet (which needs --out-dir)",
    )


def _common(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--ranks", type=int, nargs="+", help="ranks to load (default: all)")
    _load_flags(cmd)
    cmd.add_argument(
        "--graph-capture",
        metavar="PATH",
        help="a trace (or folder) of the run's CUDA-graph capture or an eager run: graph"
        " replays are mapped to the operators that issued their kernels there",
    )


def _load_flags(cmd: argparse.ArgumentParser) -> None:
    """The options of :func:`load_options`."""
    cmd.add_argument(
        "--serial", action="store_true", help="parse ranks in this process (no worker processes)"
    )
    cmd.add_argument(
        "--include-last-profiler-step", action="store_true", help="keep the last ProfilerStep"
    )
    cmd.add_argument(
        "--step-range",
        metavar="NAME",
        help="the range (NVTX, record_function) that marks a step: its occurrences are the steps"
        " (default: ProfilerStep#N; in Nsight Systems exports without them, the repeating"
        " outermost NVTX range)",
    )
    cmd.add_argument(
        "--on-error",
        choices=("raise", "skip", "warn"),
        default="raise",
        help="unreadable files: raise (stop, default), or skip / warn (go on with the good ranks)",
    )
    cmd.add_argument(
        "--no-cache", action="store_true", help="do not read or write the cache of parsed ranks"
    )


def load_options(args: argparse.Namespace):
    """The loader options the command line asks for."""
    from ..load.loader import LoadOptions

    return LoadOptions(
        include_last_profiler_step=args.include_last_profiler_step,
        step_range=args.step_range,
        parallel=not args.serial,
        # the command prints each skipped file: "warn" would say it twice
        on_error="skip" if args.on_error == "warn" else args.on_error,
        cache=False if args.no_cache else None,
    )


def _load(args: argparse.Namespace):
    from ..facade.analysis import TraceAnalysis
    from ..load.ranks import select_ranks

    analysis = TraceAnalysis(
        trace_dir=args.trace_dir,
        options=load_options(args),
        graph_capture=args.graph_capture,
    )
    for path, problem in analysis.skipped_files.items():
        print(f"hta-lite: skipped {path}: {problem}", file=sys.stderr)
    analysis.traces = select_ranks(analysis.traces, args.ranks, args.trace_dir)
    return analysis


def summarize(args: argparse.Namespace) -> int:
    from ..analyses.health import problems
    from .report import write_report
    from .summary import summary_tables
    from .summary_text import print_machine, print_text, write_tables

    if args.format == "parquet" and not args.out_dir:
        raise TraceError(None, "--format parquet writes files: give --out-dir")
    analysis = _load(args)
    snapshot = _snapshot(args.snapshot)
    tables, absent = summary_tables(analysis, snapshot)
    if args.format in ("csv", "json"):
        print_machine(tables, absent, args.format)
    else:  # table, and parquet (whose tables go to files)
        print(f"Loaded ranks {analysis.ranks} from {args.trace_dir}\n")
        health = problems(tables["health"])[["rank", "code", "item", "count"]]
        print_text(tables, absent, health)
    if args.out_dir:
        write_tables(tables, Path(args.out_dir), args.format)
        path = write_report(analysis, Path(args.out_dir) / "report.html", snapshot=snapshot)
        print(f"\nwrote {len(tables)} tables and {path}", file=sys.stderr)
    return 0


def report(args: argparse.Namespace) -> int:
    from .report import write_report

    path = write_report(_load(args), args.output, args.title, _snapshot(args.snapshot))
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _snapshot(path: str | None):
    """The ``MemorySnapshot`` of ``--snapshot`` (None without one)."""
    if not path:
        return None
    from ..facade.snapshot import MemorySnapshot

    return MemorySnapshot(path)


def counters(args: argparse.Namespace) -> int:
    written = _load(args).generate_trace_with_counters(
        output_suffix=args.suffix, output_dir=args.out_dir
    )
    for rank, paths in written.items():
        for path in paths if isinstance(paths, list) else [paths]:
            print(f"rank {rank}: {path}")
    return 0


def cache_command(args: argparse.Namespace) -> int:
    from ..load import cache

    root = cache.cache_dir(args.dir)
    if args.action == "clear":
        removed = cache.clear(root)
        print(f"removed {removed} cached rank(s) from {root} (nothing else there is touched)")
    else:
        info = cache.usage(root)
        print(
            f"{info['folder']}: {info['entries']} cached rank(s), {info['bytes'] / 1e6:.1f} MB"
            f" (cap {info['max_bytes'] / 1e9:.1f} GB, $HTA_LITE_CACHE_MAX_GB)"
        )
        if info["leftovers"]:
            print(
                f"  and {info['leftovers']} unfinished store(s), {info['leftover_bytes'] / 1e6:.1f}"
                " MB (interrupted; removed by the next load after 10 minutes, or by clear)"
            )
    return 0


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the command's other messages: one line, without the source line."""
    print(f"hta-lite: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    commands = {
        "summarize": summarize,
        "report": report,
        "counters": counters,
        "cache": cache_command,
        "diff": diff_cli.run,
        "snapshot": snapshot_cli.run,
        "steps": lambda args: steps_cli.run(args, _load),
        "findings": lambda args: findings_cli.run(args, _load),
        "batch": lambda args: batch_cli.run(args, load_options, _snapshot),
    }
    out, err = sys.stdout, sys.stderr
    # every name from a trace printed with its control characters escaped
    sys.stdout, sys.stderr = TerminalWriter(out), TerminalWriter(err, progress=True)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _warning_line
            return commands[args.command](args)
    except BrokenPipeError:  # the reader stopped (| head): not a failure of the analysis
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())  # no error at exit's flush
        return 141  # as a shell reports a command ended by SIGPIPE
    except SettingError as exc:
        print(f"hta-lite: error: {exc}", file=sys.stderr)
        return 2
    except TraceError as exc:
        if args.debug:
            raise
        print(f"hta-lite: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # an analysis failed on this input: say so in one line
        if args.debug:
            raise
        print(
            f"hta-lite: analysis failed: {type(exc).__name__}: {exc}"
            " (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 3
    finally:
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
