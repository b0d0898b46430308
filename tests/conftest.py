from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"  # present in the project's workspace, absent in a plain clone
SHARED_TRACES = SHARED / "traces"
SHARED_REFERENCE = SHARED / "reference" / "traceinsight-0.6.1.json"
SAMPLES = ROOT / "sample_traces"
DATA = Path(__file__).parent / "data"  # small traces the tests need, vendored (README there)
sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config):
    """Keep the tests' Parquet cache out of the user's cache folder."""
    import os
    import tempfile

    os.environ.setdefault("HTA_LITE_CACHE_DIR", tempfile.mkdtemp(prefix="hta_lite-test-cache-"))


def shared_cases() -> dict[str, Path]:
    """Folder name -> folder, for every case in ../shared/traces."""
    return {p.name: p for p in sorted(SHARED_TRACES.glob("*/*")) if p.is_dir()}


@pytest.fixture(scope="session")
def two_ranks():
    from hta_lite import TraceAnalysis

    return TraceAnalysis(trace_dir=SAMPLES / "two_ranks", parallel=False)
