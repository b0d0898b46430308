"""Analysis calls after load, hta_lite vs the reference, on one trace folder (best of 3 each).

python benchmarks/bench_analyses.py --ref-python /path/to/refvenv/bin/python [FOLDER]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parent.parent / "shared/traces/hta/diff_control"


def run(python: str, job: str, folder: Path) -> dict:
    out = subprocess.run(
        [python, str(HERE / "_measure.py"), job, str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["calls"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--ref-python", required=True)
    args = parser.parse_args()
    ours = run(sys.executable, "analyses_ours", args.folder)
    ref = run(args.ref_python, "analyses_reference", args.folder)
    print(f"{args.folder.name}\n| call | hta_lite s | reference s | speedup |\n|---|---|---|---|")
    for call, mine in ours.items():
        theirs = ref.get(call)
        if isinstance(theirs, float):
            print(f"| {call} | {mine:.4f} | {theirs:.4f} | {theirs / mine:.0f}x |")
        else:
            print(f"| {call} | {mine:.4f} | {theirs} | - |")
    both = [c for c in ours if isinstance(ref.get(c), float)]
    mine, theirs = sum(ours[c] for c in both), sum(ref[c] for c in both)
    print(
        f"| **whole suite** ({len(both)} calls) | {mine:.4f} | {theirs:.4f}"
        f" | {theirs / mine:.0f}x |"
    )


if __name__ == "__main__":
    main()
