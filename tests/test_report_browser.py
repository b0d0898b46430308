"""The HTML report in a real headless Chromium: no console errors, every chart rendered, names
inert.

Needs Chromium (Debian package ``chromium``; ``.ci/run`` installs it) and playwright (test extra).
Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.views.report import write_report

CHROMIUM = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)
ARTIFACTS = ROOT / "test-artifacts"
if CHROMIUM is None and os.environ.get("CI"):
    raise RuntimeError("CI must provide Chromium for the browser tests (apt-get install chromium)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine")


def open_page(path: Path, screenshot: str | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        errors, dialogs = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.route(
            "**/*",
            lambda route: (
                route.abort() if not route.request.url.startswith("file:") else route.continue_()
            ),
        )
        page.goto(path.resolve().as_uri())
        rendered = (
            "Array.from(document.querySelectorAll('div.chart'))"
            ".filter(d => d.querySelector('svg.main-svg')).length"
        )
        page.wait_for_function(
            f"document.querySelectorAll('div.chart').length == {rendered}", timeout=30000
        )
        result = page.evaluate(
            """() => ({
                charts: document.querySelectorAll('div.chart').length,
                rendered: Array.from(document.querySelectorAll('div.chart'))
                    .filter(d => d.querySelector('svg.main-svg')).length,
                images: document.querySelectorAll('img').length,
                pwned: window.__pwned === true,
                title: document.title,
            })"""
        )
        if screenshot:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / screenshot), full_page=True)
        browser.close()
    return {**result, "errors": errors, "dialogs": dialogs}


def test_report_renders_every_chart_offline(tmp_path):
    path = write_report(
        TraceAnalysis(trace_dir=SAMPLES / "two_ranks", parallel=False), tmp_path / "report.html"
    )
    result = open_page(path, "report-two_ranks.png")
    assert result["errors"] == []
    assert result["charts"] >= 12 and result["rendered"] == result["charts"]
    assert (ARTIFACTS / "report-two_ranks.png").stat().st_size > 10_000


def test_batch_report_renders_every_chart_offline(tmp_path):
    from hta_lite.tools.batch import summarize_folder
    from hta_lite.views.batch_report import write_batch_report

    summary = summarize_folder(SAMPLES / "gloo_4ranks", executor="serial", progress=False)
    result = open_page(write_batch_report(summary, tmp_path / "report.html"), "batch.png")
    assert result["errors"] == []
    assert result["charts"] >= 8 and result["rendered"] == result["charts"]


def test_malicious_names_never_execute(tmp_path):
    payloads = [
        "<img src=x onerror=alert(1);window.__pwned=true>",
        "</script><script>window.__pwned=true;alert(2)</script>",
        '"><svg onload=alert(3)>',
    ]
    b = TraceBuilder(rank=0)
    for i, name in enumerate(payloads):
        b.kernel(name, 100 * i, 50, launch_ts=100 * i - 5)
        b.cpu_op(name, 100 * i - 6, 3, cat="user_annotation")
    b.kernel("ncclKernel_AllReduce", 400, 50, stream=20, launch_ts=390)
    folder = tmp_path / "evil"
    b.write(folder / "rank0.json")
    path = write_report(
        TraceAnalysis(trace_dir=folder, parallel=False), tmp_path / "evil.html", title=payloads[0]
    )
    result = open_page(path, "report-malicious-names.png")
    assert result["dialogs"] == [] and not result["pwned"]
    assert result["images"] == 0
    assert result["title"] == payloads[0]  # shown as text
    assert result["errors"] == []
    assert result["rendered"] == result["charts"] > 0


def _heavy_reports() -> dict[str, Path]:
    """The reports heaviest before charts had a budget: a synthetic trace of 15,000 launched
    kernels, and the largest shared traces where ../shared is present."""
    from conftest import shared_cases

    shared = shared_cases()
    names = ["diff_control", "nccl_parser_config", "b200_eager", "ns_resolution"]
    return {"synthetic": None, **{n: shared[n] for n in names if n in shared}}


@pytest.mark.parametrize("name", sorted(_heavy_reports()))
def test_heavy_reports_render_within_seconds(name, tmp_path):
    import time

    from test_chart_budget import _big_trace

    folder = _heavy_reports()[name]
    if folder is None:
        folder = _big_trace(tmp_path / "big").parent
    path = write_report(TraceAnalysis(trace_dir=folder, parallel=False), tmp_path / "r.html")
    assert path.stat().st_size <= 8_000_000
    start = time.perf_counter()
    result = open_page(path)
    seconds = time.perf_counter() - start
    assert result["errors"] == [] and result["rendered"] == result["charts"] > 0
    assert seconds < 20, f"{name}: {seconds:.1f} s to render"
