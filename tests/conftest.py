from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"  # present in the project's workspace, absent in a plain clone
SHARED_TRACES = SHARED / "traces"
SHARED_REFERENCE = SHARED / "reference" / "traceinsight-0.6.1.json"
SAMPLES = ROOT / "sample_traces"
DATA = Path(__file__).parent / "data"  # small traces the tests need, vendored (README there)
sys.path.insert(0, str(Path(__file__).parent))


_CACHE = None


def pytest_configure(config):
    """Keep the tests' Parquet cache out of the user's cache folder (removed at the end)."""
    global _CACHE
    if "HTA_LITE_CACHE_DIR" not in os.environ:
        _CACHE = tempfile.mkdtemp(prefix="hta_lite-test-cache-")
        os.environ["HTA_LITE_CACHE_DIR"] = _CACHE


def pytest_unconfigure(config):
    if _CACHE:
        shutil.rmtree(_CACHE, ignore_errors=True)


needs_shared = pytest.mark.skipif(
    not SHARED_TRACES.is_dir(),
    reason="needs ../shared (the workspace's real traces and reference answers), absent in a clone",
)


def shared_reference(path: Path = SHARED_REFERENCE) -> dict:
    """A reference-answers file of ../shared, {} when absent (its tests are skipped)."""
    import json

    return json.loads(path.read_text()) if path.exists() else {}


def health_messages(health: dict) -> dict[str, int]:
    """A rank's health counts by message (they are recorded by code)."""
    from hta_lite.load.health_items import describe

    return {describe(key)[2]: count for key, count in health.items()}


def sample_folders() -> dict[str, Path]:
    """``sample/<folder>`` -> folder, for every folder of sample_traces/ that holds trace files."""
    return {
        f"sample/{p.relative_to(SAMPLES)}": p
        for p in sorted(SAMPLES.glob("**/"))
        if any(f.name.endswith((".json", ".json.gz")) for f in p.iterdir() if f.is_file())
    }


def shared_cases() -> dict[str, Path]:
    """Folder name -> folder, for every case in ../shared/traces."""
    return {p.name: p for p in sorted(SHARED_TRACES.glob("*/*")) if p.is_dir()}


@pytest.fixture(scope="session")
def two_ranks():
    from hta_lite import TraceAnalysis

    return TraceAnalysis(trace_dir=SAMPLES / "two_ranks", parallel=False)


def assert_missing(table, match: str) -> None:
    """``table`` is a table view's answer for missing data (docs/missing-data.md): no rows, and
    ``attrs["why"]`` saying ``match`` (a regex)."""
    import re

    from hta_lite.facade.missing import why

    assert table.empty, f"{len(table)} rows"
    assert why(table) and re.search(match, why(table)), why(table)
