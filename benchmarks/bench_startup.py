"""What a user waits for before any trace is read: imports and the CLI's start.

    python benchmarks/bench_startup.py [--repeat 7]

Each command runs in a fresh process (``sys.executable``), commands interleaved, the median of
``--repeat`` runs of each: ``import hta_lite``; ``from hta_lite import TraceAnalysis`` (pandas,
numpy, pyarrow, msgspec: what any analysis needs); ``hta-lite --version`` and ``--help`` (no
pandas, pyarrow or plotly); ``hta-lite summarize`` of the two-rank sample with the cache off
(workers started as from a terminal), as a user's first command.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parent / "sample_traces" / "two_ranks"
CLI = [sys.executable, "-m", "hta_lite"]

COMMANDS = {
    "import hta_lite": [sys.executable, "-c", "import hta_lite"],
    "from hta_lite import TraceAnalysis": [
        sys.executable, "-c", "from hta_lite import TraceAnalysis",
    ],
    "hta-lite --version": [*CLI, "--version"],
    "hta-lite --help": [*CLI, "--help"],
    "hta-lite summarize two_ranks (cache off)": [*CLI, "summarize", str(SAMPLE), "--no-cache"],
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, command in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            seconds[name].append(time.perf_counter() - start)
    print(f"| command | median s (min-max, {args.repeat} runs) |")
    print("|---|---|")
    for name, runs in seconds.items():
        print(f"| `{name}` | {statistics.median(runs):.3f} ({min(runs):.3f}-{max(runs):.3f}) |")


if __name__ == "__main__":
    main()
