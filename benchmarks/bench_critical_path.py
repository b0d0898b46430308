"""Critical path: hta_lite vs HTA (traceinsight 0.6.1), side by side.

For each case, in fresh processes, median of ``--repeat``: the load, and the
``critical_path_analysis(rank, annotation, instance_id)`` call alone (graph + longest path +
breakdown), with the path length and µs per ``bound_by`` each gives. HTA runs when
``--hta-python`` names a venv with traceinsight 0.6.1 (``pandas<3``).

    python benchmarks/bench_critical_path.py [--hta-python /path/to/venv/bin/python] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent.parent / "shared" / "traces"
# (label, folder, annotation, instance_id)
CASES = [
    ("diff_control, one step", "hta/diff_control", "ProfilerStep", 0),
    ("diff_test, one step", "hta/diff_test", "ProfilerStep", 0),
    ("diff_control, whole trace", "hta/diff_control", "", None),
    ("ns_resolution, one step", "hta/ns_resolution", "ProfilerStep", 0),
    ("cp_simple_add (HTA's test)", "hta/cp_simple_add",
     "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
]  # fmt: skip

OURS = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
from hta_lite import TraceAnalysis
folder, annotation, instance = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=folder, cache=False, parallel=False, progress=False)
t1 = time.perf_counter()
cp, ok = a.critical_path_analysis(a.ranks[0], annotation, instance)
table = cp.get_critical_path_breakdown()
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "cp": t2 - t1, "len": float(table["duration"].sum()),
                  "by": table.groupby("bound_by")["duration"].sum().round(1).to_dict()}))
"""

HTA = r"""
import json, logging, sys, time, warnings
warnings.simplefilter("ignore"); logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
folder, annotation, instance = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=folder)
t1 = time.perf_counter()
rank = sorted(a.t.traces)[0]
g, ok = a.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
table = g.get_critical_path_breakdown()
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "cp": t2 - t1, "len": float(table["duration"].sum()),
                  "by": table.groupby("bound_by")["duration"].sum().round(1).to_dict()}))
"""


def run(python: str, code: str, folder: Path, annotation: str, instance) -> dict:
    out = subprocess.run(
        [python, "-c", code, str(folder), annotation, json.dumps(instance)],
        capture_output=True, text=True, cwd="/tmp",
    )  # fmt: skip
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1][:120]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hta-python")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| case | hta_lite load s | hta_lite call s | HTA load s | HTA call s | call speedup |"
          " path µs: hta_lite / HTA |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for label, folder, annotation, instance in CASES:
        path = TRACES / folder
        ours = [run(sys.executable, OURS, path, annotation, instance) for _ in range(args.repeat)]
        ref = (
            [run(args.hta_python, HTA, path, annotation, instance) for _ in range(args.repeat)]
            if args.hta_python
            else [{"error": "not run"}]
        )

        def med(rows, key):
            good = [r[key] for r in rows if key in r]
            return statistics.median(good) if good else float("nan")

        speedup = med(ref, "cp") / med(ours, "cp")
        hta_len = ref[0].get("len", ref[0].get("error"))
        print(
            f"| {label} | {med(ours, 'load'):.2f} | {med(ours, 'cp'):.3f} | {med(ref, 'load'):.2f}"
            f" | {med(ref, 'cp'):.3f} | {speedup:.1f}x | {ours[0].get('len')} / {hta_len} |",
            flush=True,
        )
        print(f"<!-- {label}: ours {ours[0].get('by')} HTA {ref[0].get('by')} -->", flush=True)


if __name__ == "__main__":
    main()
