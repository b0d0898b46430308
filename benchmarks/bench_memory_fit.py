"""What TraceAnalysis holds per byte of trace text, the figure behind the loader's warning that a
folder will not fit (``hta_lite.load.memory_fit.TEXT_BYTES_PER_BYTE_HELD``).

    python benchmarks/bench_memory_fit.py --ranks 16
        [--template ../shared/traces/hta/diff_control/control.json.gz] [--workdir /tmp/hta_scale]

The folder is ``bench_scale.py``'s (byte-for-byte copies of a real trace with distinct ranks).
In a fresh process with the cache off: ``TraceAnalysis`` (its process pool), then every view
and the findings ``hta-lite summarize`` prints (``summary_tables``). Reports the traces' text
(``memory_fit.text_bytes``), the process's RSS after the load and after the views, and its peak
(ru_maxrss), each above its imports and per byte of text.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_TEMPLATE = HERE.parent.parent / "shared/traces/hta/diff_control/control.json.gz"

CHILD = r"""
import json, resource, sys, warnings
from pathlib import Path
import psutil
warnings.simplefilter("ignore")
from hta_lite import TraceAnalysis
from hta_lite.load.memory_fit import text_bytes
from hta_lite.views.summary import summary_tables
rss = lambda: psutil.Process().memory_info().rss
folder = Path(sys.argv[1])
text, imports = text_bytes(sorted(folder.iterdir())), rss()
analysis = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
loaded = rss()
summary_tables(analysis)
print(json.dumps({"text": text, "imports": imports, "loaded": loaded, "views": rss(),
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hta_scale"))
    args = parser.parse_args()
    from hta_lite.tools.synthetic import replicate_trace

    folder = args.workdir / f"copies-{args.template.parent.name}-{args.ranks}"
    if not folder.exists() or len(list(folder.iterdir())) != args.ranks:
        replicate_trace(args.template, folder, args.ranks)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder)], capture_output=True, text=True, check=True
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    text = r["text"]
    print(f"{args.ranks} ranks of {args.template.name}: {text / 1e6:.0f} MB of trace text")
    for name in ("loaded", "views", "peak"):
        above = r[name] - r["imports"]
        print(f"{name:7s} {above / 1e6:7.0f} MB above imports, {above / text:.2f} per text byte")


if __name__ == "__main__":
    main()
