"""The HTML report: its size, its heaviest chart, and the time headless Chromium takes to draw every
chart of it, for each sample folder and each shared trace (``../shared/traces``, where present).

The report is written with ``write_report`` (the data of reduced charts beside it); the render
time is from ``page.goto`` until every ``div.chart`` holds its ``svg.main-svg`` (the test's
``open_page``), one run per report (``--repeat`` for the median of several). Needs Chromium and
playwright (the test extra).

    python benchmarks/bench_report.py [--repeat 1] [--no-render] [FOLDER ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def folders() -> dict[str, Path]:
    from conftest import sample_folders, shared_cases

    return {**sample_folders(), **{f"shared/{k}": v for k, v in shared_cases().items()}}


def chart_sizes(page: str) -> list[int]:
    return [len(part.split("</script>")[0]) for part in page.split("<div class='chart'>")[1:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-render", action="store_true")
    args = parser.parse_args()

    from hta_lite import TraceAnalysis
    from hta_lite.views.report import write_report

    chosen = {str(f): f for f in args.folders} or folders()
    print(f"{'folder':34} {'MB':>6} {'charts':>6} {'largest KB':>10} {'CSVs':>4} {'render s':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, folder in chosen.items():
            out = Path(tmp) / name.replace("/", "_") / "report.html"
            path = write_report(TraceAnalysis(trace_dir=folder, parallel=False), out)
            sizes = chart_sizes(path.read_text())
            csvs = len(list(path.parent.glob("report_data/*.csv")))
            render = ""
            if not args.no_render:
                from test_report_browser import open_page

                times = []
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    open_page(path)
                    times.append(time.perf_counter() - start)
                render = f"{statistics.median(times):.1f}"
            print(
                f"{name:34} {path.stat().st_size / 1e6:6.2f} {len(sizes):6d}"
                f" {max(sizes, default=0) / 1e3:10.0f} {csvs:4d} {render:>8}",
                flush=True,
            )


if __name__ == "__main__":
    main()
