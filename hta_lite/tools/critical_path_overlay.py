"""Write a trace with its critical path marked, for Perfetto / chrome://tracing.

Events on the path get ``args.critical = 1``; each path edge of the chosen types becomes a pair
of flow events (``cat``/``name`` ``critical_path``, ``args``: weight in µs, type, critical)
from the edge's source point to its destination point, as the reference draws them. Written
atomically next to nothing else (:func:`hta_lite.tools.writer.write_trace`): the input is never
touched, and every original event keeps its bytes except the ``critical`` mark.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import msgspec
import numpy as np

from ..analyses.critical_path import CriticalPath
from ..analyses.critical_path.graph import DEPENDENCY, EDGE_TYPES, LAUNCH_DELAY, SYNC
from .writer import us_text, write_trace

#: the edge types drawn by default (the reference's choice: not the spans themselves)
DEFAULT_EDGE_TYPES = (DEPENDENCY, LAUNCH_DELAY, SYNC)
_KEPT_CATEGORIES = ("user_annotation", "python_function")
_fields = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _ns(raw: msgspec.Raw | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(Decimal(bytes(raw).decode().strip('"')) * 1000)
    except ArithmeticError:
        return None


def overlay(
    cp: CriticalPath,
    output_dir: str | Path,
    only_show_critical_events: bool = True,
    show_all_edges: bool = False,
) -> Path:
    """The overlaid trace of ``cp``'s rank in ``output_dir``
    (``overlaid_critical_path_<file name>``); returns its path."""
    g, ev = cp.graph, cp.events
    if only_show_critical_events:
        show_all_edges = False
    on_path = set(g.node_event[cp.critical_path_nodes].tolist())
    critical = {(ev.name[e], int(ev.ts[e]), int(ev.end[e] - ev.ts[e])) for e in on_path}
    if show_all_edges:
        edges = np.arange(len(g.src))
    else:
        path = np.asarray(cp.path, np.int64)
        edges = path[np.isin(g.kind[path], DEFAULT_EDGE_TYPES)] if len(path) else path
    path_set = set(cp.path)
    flows = []
    for flow_id, e in enumerate(edges.tolist()):
        args = {"weight": float(g.weight[e]) / 1000.0, "critical": e in path_set,
                "type": EDGE_TYPES[g.kind[e]]}  # fmt: skip
        for node, phase in ((int(g.src[e]), "s"), (int(g.dst[e]), "f")):
            event = int(g.node_event[node])
            ts = int(g.node_ts[node])
            if not g.node_start[node] and ev.stream[event] >= 0:  # an arrow inside the kernel
                ts -= min(1000, int(ev.end[event] - ev.ts[event]))
            head = {
                "ph": phase,
                "id": flow_id,
                "pid": int(ev.pid[event]),
                "tid": int(ev.tid[event]),
                "cat": "critical_path",
                "name": "critical_path",
            }
            if phase == "f":
                head["bp"] = "e"
            encoded = msgspec.json.encode({**head, "args": args})
            flows.append(encoded[:-1] + b',"ts":' + us_text(ts) + b"}")

    def mark(raw: msgspec.Raw) -> bytes | None:
        fields = _fields.decode(raw)
        if fields.get("ph") is None or bytes(fields["ph"]) != b'"X"':
            return bytes(raw)
        name = msgspec.json.decode(fields["name"]) if "name" in fields else None
        key = (str(name), _ns(fields.get("ts")), _ns(fields.get("dur")) or 0)
        if key in critical:
            args = msgspec.json.decode(fields["args"]) if "args" in fields else {}
            args = args if isinstance(args, dict) else {}
            fields["args"] = msgspec.Raw(msgspec.json.encode({**args, "critical": 1}))
            return msgspec.json.encode(fields)
        if only_show_critical_events:
            cat = msgspec.json.decode(fields["cat"]) if "cat" in fields else None
            return bytes(raw) if cat in _KEPT_CATEGORIES else None
        return bytes(raw)

    src = Path(cp.trace.path)
    dst = Path(output_dir) / ("overlaid_critical_path_" + src.name)
    return write_trace(src, dst, flows, mark)
