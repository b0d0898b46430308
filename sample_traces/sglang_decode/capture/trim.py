"""How bs_32_rank0.json.gz here was made from TraceLens' capture trace (1.2 MB): the Python
frames other than ``nn.Module`` ones and the instant events dropped (61,713 -> 7,134 events);
every operator, launch call and module frame is kept as recorded.

    python trim.py SOURCE/bs_32_rank0.json.gz bs_32_rank0.json.gz
"""

import gzip
import json
import sys

source, target = sys.argv[1:3]
trace = json.load(gzip.open(source))
trace["traceEvents"] = [
    e
    for e in trace["traceEvents"]
    if e.get("cat") != "cpu_instant_event"
    and not (e.get("cat") == "python_function" and not e["name"].startswith("nn.Module: "))
]
with gzip.open(target, "wt", compresslevel=9) as out:
    json.dump(trace, out, separators=(",", ":"))
