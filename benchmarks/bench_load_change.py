"""Cold load of this checkout against another one (a git worktree of the base commit): did a
change cost load time?

Both run ``_measure.py ours`` (cache off, C decoder when built) in fresh processes, taking turns
on each trace (alternating which goes first), ``--repeat`` rounds; the table gives the medians
(and fastest runs) and their ratios.

    git worktree add /tmp/base HEAD~1 && (cd /tmp/base && pip install --no-deps -t /tmp/x . &&
        cp /tmp/x/hta_lite/load/_fastjson*.so hta_lite/load/)   # or compile it with gcc
    python benchmarks/bench_load_change.py --base /tmp/base [--repeat 7] [--instructions]

This machine's wall clock varies by +-20% from run to run; ``--instructions`` also counts the
instructions of one load of each checkout under valgrind's callgrind (a deterministic measure:
the load's count minus that of the imports alone).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_TRACES = HERE.parent.parent / "shared" / "traces"


def load_seconds(checkout: Path, folder: Path, first_call: bool) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(
        [sys.executable, str(HERE / "_measure.py"), "ours", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=checkout,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    seconds = result["seconds"] + (result["first_call"] if first_call else 0.0)
    return seconds, result["peak_rss_mb"]


def instructions(checkout: Path, job: str, target: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(checkout), "HTA_LITE_CACHE": "off"}
    env["OPENBLAS_NUM_THREADS"] = "1"  # idle BLAS threads spin: instructions that vary
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         str(HERE / "_measure.py"), job, str(target)],
        capture_output=True, text=True, env=env, check=True, cwd=checkout,
    )  # fmt: skip
    return int(re.search(r"Collected : (\d+)", out.stderr).group(1))


def load_instructions(checkout: Path, folder: Path) -> int:
    return instructions(checkout, "ours", folder) - instructions(checkout, "imports", folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", type=Path, required=True, help="checkout to compare against")
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument(
        "--cases", nargs="+", default=["hta/diff_control", "hta/diff_test", "hta/ns_resolution",
                                       "tracelens/b200_eager"],
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--instructions", action="store_true", help="count them (valgrind)")
    parser.add_argument(
        "--first-call",
        action="store_true",
        help="time the load and then get_temporal_breakdown (the cold target), not the load alone",
    )
    args = parser.parse_args()
    head = HERE.parent
    header = (
        "| trace | base s (fastest) | this s (fastest) | this / base (fastest) | RSS MB base/this |"
    )
    print(header + (" instructions base / this |" if args.instructions else ""))
    print("|---|---|---|---|---|" + ("---|" if args.instructions else ""))
    for case in args.cases:
        folder = args.traces / case
        runs: dict[str, list] = {"base": [], "this": []}
        for i in range(args.repeat):  # alternate which goes first
            for name in ("base", "this") if i % 2 == 0 else ("this", "base"):
                runs[name].append(
                    load_seconds(args.base if name == "base" else head, folder, args.first_call)
                )
        base, this = (statistics.median(s for s, _ in runs[k]) for k in ("base", "this"))
        base_min, this_min = (min(s for s, _ in runs[k]) for k in ("base", "this"))
        rss = [statistics.median(r for _, r in runs[k]) for k in ("base", "this")]
        counted = ""
        if args.instructions:
            base_ir, this_ir = (load_instructions(c, folder) for c in (args.base, head))
            counted = f" {base_ir / 1e6:.0f}M / {this_ir / 1e6:.0f}M = {this_ir / base_ir:.3f} |"
        print(
            f"| {Path(case).name} | {base:.3f} ({base_min:.3f}) | {this:.3f} ({this_min:.3f}) |"
            f" {this / base:.3f} ({this_min / base_min:.3f}) | {rss[0]:.0f} / {rss[1]:.0f} |"
            + counted,
            flush=True,
        )


if __name__ == "__main__":
    main()
