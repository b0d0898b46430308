"""Write the host-bound cases (``<case>/rank-0.json.gz``) and their known savings
(``known.csv``: ``case,step_us,saving_us``): programs simulated with tests/scenarios.py, each
beside the program the fix a user makes gives; the saving is the difference of their mean steps
(µs).

    python tests/data/host_bound/make.py

- ``sync_in_loop``: 64 iterations of a 40 µs kernel and an ``.item()`` of its result; fixed: one
  ``.item()`` after the loop.
- ``sync_in_loop_no_steps``: the same loop, 256 iterations, recorded without ProfilerSteps (its
  iterations are too short to be steps: the whole trace is one).
- ``launch_loop``: a 300 µs GEMM, then 256 iterations of a Python loop (12 µs of Python, a 5 µs
  launch) adding to one element (1.5 µs kernels); fixed: one vectorised kernel.
- ``queue_drained``: 24 small operators (4 µs kernels) launched one by one, then a 2 ms GEMM;
  fixed: the GEMM first.
- ``host_region``: 20 kernels of 50 µs, 2 ms of Python postprocessing (``postprocess``) with no
  GPU work, 20 more; fixed: the postprocessing off the step.
- ``host_unrecorded``: the same with 4 ms of Python that no event records (no operator, no
  range: the critical path joins the operators around it with a dependency of zero weight).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/: scenarios.py
from scenarios import run  # noqa: E402


def _gemms(s, n=20, us=50):
    for _ in range(n):
        s.launch("aten::mm", "gemm_kernel", us)


CASES = {
    "sync_in_loop": (
        lambda s: [(s.launch("aten::mul", "mul_kernel", 40), s.read("aten::item"))
                   for _ in range(64)],
        lambda s: ([s.launch("aten::mul", "mul_kernel", 40) for _ in range(64)],
                   s.read("aten::item")),
    ),
    "sync_in_loop_no_steps": (
        lambda s: [(s.launch("aten::mul", "mul_kernel", 40), s.read("aten::item"))
                   for _ in range(256)],
        lambda s: ([s.launch("aten::mul", "mul_kernel", 40) for _ in range(256)],
                   s.read("aten::item")),
        {"steps": 1, "mark_steps": False},
    ),
    "launch_loop": (
        lambda s: (s.launch("aten::mm", "gemm_kernel", 300),
                   [s.launch("aten::add_", "add_kernel", 1.5, pre=12, call=5, post=3)
                    for _ in range(256)]),
        lambda s: (s.launch("aten::mm", "gemm_kernel", 300),
                   s.launch("aten::add_", "add_kernel", 1.5 * 256, pre=12, call=5, post=3)),
    ),
    "queue_drained": (
        lambda s: ([s.launch(f"aten::op{i}", f"small_kernel_{i}", 4) for i in range(24)],
                   s.launch("aten::mm", "big_gemm", 2000)),
        lambda s: (s.launch("aten::mm", "big_gemm", 2000),
                   [s.launch(f"aten::op{i}", f"small_kernel_{i}", 4) for i in range(24)]),
    ),
    "host_region": (
        lambda s: (_gemms(s), s.region("postprocess", lambda s: s.host("aten::copy_", 2000)),
                   _gemms(s)),
        lambda s: (_gemms(s), _gemms(s)),
    ),
    "host_unrecorded": (
        lambda s: (_gemms(s), s.python(4000), _gemms(s)),
        lambda s: (_gemms(s), _gemms(s)),
    ),
}  # fmt: skip


def main() -> None:
    rows = ["case,step_us,saving_us"]
    for name, (slow, fixed, *options) in CASES.items():
        options = options[0] if options else {}
        a, b = run(slow, **options), run(fixed, **options)
        marked = options.get("mark_steps", True)  # without steps, the whole trace is the step
        folder = HERE / name
        folder.mkdir(exist_ok=True)
        data = json.dumps(a.b.document()).encode()
        (folder / "rank-0.json.gz").write_bytes(gzip.compress(data, 9, mtime=0))
        step = a.mean_step_us(marked)
        rows.append(f"{name},{step},{step - b.mean_step_us(marked)}")
    (HERE / "known.csv").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
