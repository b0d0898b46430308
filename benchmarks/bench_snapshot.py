"""Memory snapshots: ``MemorySnapshot(path)`` + ``summary()`` + ``timeline()`` + ``peak()`` against
what a user runs today, ``torch.cuda._memory_viz``'s ``segsum`` and ``trace`` on the same file
(after a plain ``pickle.load``: its own reading of the file).

Each job runs in a fresh process (imports excluded from the time; the peak RSS is the process's
``VmHWM``, with and without its imports), median of ``--repeat``, the two taking turns; on every
snapshot of ``../shared/snapshots`` and on a large one made by repeating a real snapshot's trace
(``--repeat-buffer N``: the 1024-context inference run's 3,840 entries, which free all they
allocate, N times one after another in time, their frames shared as in a real buffer; the last
copy is the real one, so the state at the end is the snapshot's). Peak RSS is the child's
``VmHWM`` (``ru_maxrss`` would keep the parent's: Linux does not reset it at exec).

    python benchmarks/bench_snapshot.py --torch-python /path/to/venv-with-torch/bin/python \
        [--repeat 5] [--repeat-buffer 250]
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "snapshots"
OURS = """
import json, sys, time
from hta_lite import MemorySnapshot
import pandas
base = int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) * 1024
t = time.perf_counter()
snap = MemorySnapshot(sys.argv[1])
snap.summary(); line = snap.timeline(); peak = snap.peak()
seconds = time.perf_counter() - t
rss = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
print(json.dumps({"seconds": seconds, "rss": rss, "above": rss - base}))
"""
TORCH = """
import json, pickle, sys, time
from torch.cuda import _memory_viz
base = int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) * 1024
t = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    data = pickle.load(f)
_memory_viz.segsum(data); _memory_viz.trace(data)
seconds = time.perf_counter() - t
rss = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
print(json.dumps({"seconds": seconds, "rss": rss, "above": rss - base}))
"""


def run(python: str, script: str, path: Path) -> dict:
    out = subprocess.run([python, "-c", script, str(path)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def repeated(source: Path, times: int, target: Path) -> Path:
    data = pickle.loads(source.read_bytes())
    trace = data["device_traces"][0]
    span = trace[-1]["time_us"] - trace[0]["time_us"] + 1
    # copies before the real buffer (the real one stays last, so the state at the end is real)
    out = []
    for k in range(times - 1, -1, -1):
        out += [{**e, "time_us": e["time_us"] - k * span} for e in trace]
    data["device_traces"][0] = out
    target.write_bytes(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
    return target


def main() -> None:
    if sys.argv[1:2] == ["--write"]:
        repeated(Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--torch-python", required=True, help="a Python with torch installed")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--repeat-buffer", type=int, default=250)
    args = parser.parse_args()
    files = sorted(SHARED.glob("*.pickle"))
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / f"inference_x{args.repeat_buffer}.pickle"
        source = SHARED / "medium_1024_inference_memory_snapshot.pickle"
        subprocess.run(  # in a child: the parent stays small
            [sys.executable, __file__, "--write", str(source), str(args.repeat_buffer), str(big)],
            check=True,
        )
        for path in [*files, big]:
            ours, theirs = [], []
            for _ in range(args.repeat):
                ours.append(run(sys.executable, OURS, path))
                theirs.append(run(args.torch_python, TORCH, path))
            o = statistics.median(r["seconds"] for r in ours)
            t = statistics.median(r["seconds"] for r in theirs)
            rss, above = (max(r[k] for r in ours) for k in ("rss", "above"))
            their_rss, their_above = (max(r[k] for r in theirs) for k in ("rss", "above"))
            size = path.stat().st_size
            print(
                f"{path.name}: {size / 1e6:.1f} MB; hta_lite {o:.3f} s, _memory_viz {t:.3f} s:"
                f" {t / o:.1f}x; peak RSS {rss / 1e6:.0f} MB, {above / 1e6:.0f} MB above the"
                f" imports ({above / size:.1f}x the file); _memory_viz {their_rss / 1e6:.0f} MB,"
                f" {their_above / 1e6:.0f} MB above ({their_above / size:.1f}x)"
            )


if __name__ == "__main__":
    main()
