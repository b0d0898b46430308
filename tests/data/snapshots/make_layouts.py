"""Write the constructed snapshots of older layouts (``layout_*.pickle``) and what PyTorch's own
``torch.cuda._memory_viz.segsum`` reads from them (``layouts_reference.json``).

    python tests/data/snapshots/make_layouts.py  # needs torch (any build: _memory_viz is Python)

The layouts are PyTorch's own, as its snapshot code wrote them:

- ``layout_2_0_oom_dump``: PyTorch 2.0 ``_snapshot()`` taken at an out-of-memory: blocks with
  ``size``, ``state`` and ``history`` (``addr``, ``real_size``, ``frames``), no ``address`` or
  ``requested_size``; segments with ``allocated_size`` / ``active_size``; ``device_traces``
  holding only the dump's own ``snapshot`` entry. Nearly full: a real shortage.
- ``layout_2_0_trace``: the same layout with an allocator trace whose entries carry no
  ``time_us`` (2.0 recorded none), and a free block split from a large one (fragmentation).
- ``layout_1_x_list``: ``torch.cuda.memory_snapshot()`` of PyTorch 1.x pickled as it comes: a
  bare list of segments whose blocks have ``size`` and ``state`` only.
- ``layout_2_1_segments_only``: the current layout recorded without
  ``_record_memory_history`` (empty ``device_traces``), one block pending a free.
- ``layout_mismatch``: a segment whose ``allocated_size`` is not its blocks' sum.
"""

from __future__ import annotations

import io
import json
import pickle
import random
from contextlib import redirect_stdout
from pathlib import Path

HERE = Path(__file__).parent
MB = 2**20
FRAME = {"filename": "/home/user/train.py", "line": 42, "name": "forward"}
LIB = {"filename": "/usr/lib/python3/site-packages/torch/nn/modules/linear.py", "line": 116,
       "name": "forward"}  # fmt: skip


def _segments(rng, n, base, history=True, address=False, requested=False, fill=0.97):
    segments = []
    for k in range(n):
        total = 20 * MB * (k + 1)
        blocks, used = [], 0
        while used < total:
            size = min(total - used, rng.choice([512, 2 * MB, 4 * MB, 6 * MB + 512]))
            state = "active_allocated" if rng.random() < fill else "inactive"
            real = size - rng.choice([0, 0, 256]) if state == "active_allocated" else size
            block = {"size": size, "state": state}
            if address:
                block["address"] = base + used
            if requested:
                block["requested_size"] = real if state == "active_allocated" else 0
                block["frames"] = [LIB, FRAME] if state == "active_allocated" else []
            if history and state == "active_allocated":
                block["history"] = [{"addr": base + used, "real_size": real,
                                     "frames": [LIB, FRAME]}]  # fmt: skip
            blocks.append(block)
            used += size
        allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        seg = {"device": 0, "address": base, "total_size": total, "allocated_size": allocated,
               "active_size": allocated, "stream": 0, "segment_type": "large",
               "blocks": blocks}  # fmt: skip
        if requested:
            seg["requested_size"] = sum(b["requested_size"] for b in blocks)
            seg["segment_pool_id"] = (0, 0)
        segments.append(seg)
        base += total + 2 * MB
    return segments


def build() -> dict[str, object]:
    rng = random.Random(7)
    dump = _segments(rng, 6, 0x7F0000000000, fill=1.0)
    snapshot_entry = {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "frames": []}
    traced = _segments(rng, 3, 0x7E0000000000, fill=0.7)
    entries, t = [], 0
    for seg in traced:
        entries.append({"action": "segment_alloc", "addr": seg["address"],
                        "size": seg["total_size"], "stream": 0, "frames": [FRAME]})  # fmt: skip
        offset = 0
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                entries.append({"action": "alloc", "addr": seg["address"] + offset,
                                "size": b["size"], "stream": 0, "frames": [FRAME]})  # fmt: skip
            offset += b["size"]
        t += 1
    current = _segments(rng, 2, 0x7D0000000000, history=False, address=True, requested=True)
    current[0]["blocks"][0]["state"] = "active_pending_free"
    current[0]["allocated_size"] -= current[0]["blocks"][0]["size"]
    current[0]["requested_size"] -= current[0]["blocks"][0]["requested_size"]
    mismatch = _segments(rng, 1, 0x7C0000000000, history=False)
    mismatch[0]["allocated_size"] += 4096
    return {
        "layout_2_0_oom_dump": {"segments": dump, "device_traces": [[snapshot_entry]]},
        "layout_2_0_trace": {"segments": traced, "device_traces": [entries]},
        "layout_1_x_list": _segments(rng, 3, 0x7B0000000000, history=False, fill=0.8),
        "layout_2_1_segments_only": {"segments": current, "device_traces": []},
        "layout_mismatch": {"segments": mismatch, "device_traces": []},
    }


def segsum_totals(data) -> dict[str, int]:
    """PyTorch's own reading: ``_memory_viz.segsum``, sizes printed exactly."""
    from torch.cuda import _memory_viz as viz

    viz._format_size = lambda n: str(int(n))
    out = io.StringIO()
    with redirect_stdout(out):
        text = viz.segsum(data if isinstance(data, dict) else {"segments": data})
    totals = {}
    for line in text.splitlines():
        for key in ("total_reserved", "total_allocated", "total_free"):
            if line.startswith(key + ":"):
                totals[key] = int(line.split(":")[1].split()[0])
    return totals


def main() -> None:
    reference = {}
    for name, data in build().items():
        (HERE / f"{name}.pickle").write_bytes(pickle.dumps(data, protocol=4))
        reference[name] = segsum_totals(data)
    (HERE / "layouts_reference.json").write_text(json.dumps(reference, indent=1) + "\n")


if __name__ == "__main__":
    main()
