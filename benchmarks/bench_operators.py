"""Operator view: how long it takes, against PyTorch's TensorBoard plugin.

Per shared trace with shapes, each in a fresh process (imports excluded), the two taking turns,
median of ``--repeat``:

- *hta_lite op view*: the operator analysis of an already loaded trace (attribution, instances,
  summaries by name / shape / stack, roofline, MFU), of the folder's first file (one rank, as the
  plugin reads it);
- *hta_lite cold*: load (cache off) + the same;
- *TB plugin*: ``torch_tb_profiler`` 0.4.3's ``RunProfileData.parse`` (its operator view is built
  there, with its other views), when ``--tb-python`` names a venv that has it
  (``python -m venv tbp && tbp/bin/pip install torch-tb-profiler==0.4.3 "pandas<3"``); also the
  GPU time its operator table attributes.

    python benchmarks/bench_operators.py [--tb-python /path/to/tbp/bin/python] [--repeat 5]
        [--only diff_control] [--base /path/to/worktree of another commit]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_TRACES = HERE.parent.parent / "shared" / "traces"
CASES = ["hta/two_ranks", "hta/diff_control", "tracelens/b200_eager", "tracelens/h100_bert_small",
         "tracelens/mi300_bert_small", "tracelens/sglang_decode", "hta/amd_mi250"]  # fmt: skip

OURS = """
import json, os, sys, time, warnings
os.environ["HTA_LITE_CACHE"] = "off"
warnings.simplefilter("ignore")
from hta_lite import TraceAnalysis
t0 = time.perf_counter()
first = sorted(p for p in os.listdir(sys.argv[1]) if ".json" in p)[0]  # one rank, as the plugin
a = TraceAnalysis({0: os.path.join(sys.argv[1], first)}, parallel=False, progress=False)
t1 = time.perf_counter()
summary = a.get_operator_summary()
for by in ("shape", "stack"):
    a.get_operator_summary(by=by)
try:
    a.get_operator_roofline(); a.get_mfu()
except Exception:
    pass
t2 = time.perf_counter()
total = float(summary.loc[~summary["name"].str.startswith("["), "device_self_sum(us)"].sum())
print(json.dumps({"load": t1 - t0, "ops": t2 - t1, "attributed_us": total}))
"""

TB = """
import glob, json, logging, sys, time
logging.disable(logging.CRITICAL)
from torch_tb_profiler.profiler.data import RunProfileData
path = sorted(glob.glob(sys.argv[1] + "/*.json*"))[0]
t0 = time.perf_counter()
profile = RunProfileData.parse("w", "s", path, "/tmp")
t1 = time.perf_counter()
attributed = sum(o.self_device_duration for o in profile.op_list_groupby_name)
print(json.dumps({"seconds": t1 - t0, "attributed_us": attributed}))
"""


def run(python: str, code: str, folder: Path, checkout: Path | None = None) -> dict | None:
    """One job in a fresh process; ``checkout``: run hta_lite from that source tree."""
    env = None if checkout is None else {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(
        [python, "-c", code, str(folder)], capture_output=True, text=True, env=env, cwd=checkout
    )
    if out.returncode != 0:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--tb-python")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", nargs="*", help="trace names to run (default: all)")
    parser.add_argument(
        "--base", type=Path, help="also time the op view of this checkout (a git worktree)"
    )
    args = parser.parse_args()
    unknown = set(args.only or ()) - {Path(case).name for case in CASES}
    if unknown:
        parser.error(f"--only: {sorted(unknown)} not among {[Path(c).name for c in CASES]}")
    print(
        "| trace | op view s | cold load + op view s | TB plugin s | speedup"
        " | GPU µs attributed to operators: hta_lite / TB plugin |"
    )
    print("|---|---|---|---|---|---|")
    for case in CASES:
        if args.only and Path(case).name not in args.only:
            continue
        folder = args.traces / case
        ours, tb, base = [], [], []
        for _ in range(args.repeat):  # taking turns: all see the same machine load
            ours.append(run(sys.executable, OURS, folder))
            if args.tb_python:
                tb.append(run(args.tb_python, TB, folder))
            if args.base:
                base.append(run(sys.executable, OURS, folder, args.base))
        view = statistics.median(r["ops"] for r in ours)
        cold = statistics.median(r["load"] + r["ops"] for r in ours)
        tb_text, speedup, tb_us = "–", "–", "–"
        if args.tb_python:
            if all(tb):
                tb_s = statistics.median(r["seconds"] for r in tb)
                tb_text, speedup = f"{tb_s:.3f}", f"{tb_s / cold:.1f}x"
                tb_us = f"{tb[0]['attributed_us']:,.0f}"
            else:
                tb_text = "fails"
        print(
            f"| {Path(case).name} | {view:.3f} | {cold:.3f} | {tb_text} | {speedup} |"
            f" {ours[0]['attributed_us']:,.0f} / {tb_us} |",
            flush=True,
        )
        if base:
            print(
                f"  base checkout: op view {statistics.median(r['ops'] for r in base):.3f} s"
                f" (fastest {min(r['ops'] for r in base):.3f}), this one"
                f" {view:.3f} s (fastest {min(r['ops'] for r in ours):.3f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
