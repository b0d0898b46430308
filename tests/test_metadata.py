"""The typed metadata analyses read (hta_lite/load/metadata.py): what a file's header says,
typed, with hostile values read as absent; analyses never read the raw header."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT
from test_architecture import PACKAGE

from hta_lite import TraceAnalysis
from hta_lite.load.metadata import Device, TraceMetadata


def test_a_real_header_typed():
    analysis = TraceAnalysis(trace_dir=ROOT / "sample_traces" / "gloo_4ranks", progress=False)
    meta = analysis.trace(2).meta
    assert (meta.rank, meta.world_size, meta.backend) == (2, 4, "gloo")
    assert meta.source_format == "kineto" and meta.has_distributed_info
    assert meta.process_groups and all(2 in g.ranks for g in meta.groups_of(2))
    h100 = TraceAnalysis(trace_dir=ROOT / "sample_traces" / "h100_bert_small", progress=False)
    device = h100.trace(h100.ranks[0]).meta.devices[0]
    assert "H100" in device.name and device.total_memory > 70 * 2**30
    assert device.compute_capability == (9, 0) and device.sm_count == 132


@pytest.mark.parametrize(
    "header",
    [
        {"distributedInfo": 5},
        {"distributedInfo": {"rank": "x", "world_size": 2**40, "pg_config": "no"}},
        {"distributedInfo": {"rank": -1, "pg_config": [7, {"pg_size": "abc", "ranks": "0"}]}},
        {"deviceProperties": {"id": 0}, "windows": 5, "profile_memory": "yes"},
        {"deviceProperties": [{"id": "zero", "totalGlobalMem": -5, "computeMajor": 9.5}, 3]},
    ],
)
def test_hostile_headers_read_as_absent(header):
    meta = TraceMetadata.from_kineto(header)
    assert meta.rank is None and meta.world_size is None and meta.windows == 0
    for group in meta.process_groups:
        assert group.size is None and group.ranks == ()
    for device in meta.devices:
        assert device == Device(None, "", None, None, None)
    assert meta.profile_memory in (None, False)


def test_no_analysis_reads_the_raw_header():
    raw = re.compile(r"\btraces?\b[^\n]*\.metadata\b|\.metadata(\.get\(|\[)")
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sorted((PACKAGE / "analyses").rglob("*.py"))
        if raw.search(path.read_text())
    ]
    assert offenders == [], "read trace.meta (hta_lite/load/metadata.py), not the raw header"
