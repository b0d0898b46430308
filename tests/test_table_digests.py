"""Every trace's tables are identical to what the loader made before the performance round:
``data/table_digests.json`` holds their digests (columns, dtypes, categories, values) as commit
bfce178 made them, for the repository's traces and the shared ones (regenerated when ``cpu`` gained
``launched_kernel``, and when it gained ``forward_row``, linked at load instead of by the operator
view: every table without them equal to the pinned one, checked; b200_eager's ``gpu`` table when
its symmetric-memory all-reduces became COMMUNICATION: with the old rule equal to the pinned one,
checked; cp_simple_add's ``steps`` and ``iteration`` columns when a Kineto trace without
ProfilerSteps took its steps from its repeating GPU work: every table without them equal to the
pinned one, checked). A loader change
that alters any table fails here; a deliberate one regenerates the file and says why in its
commit."""

from __future__ import annotations

import json

import pytest
from conftest import DATA, ROOT, SHARED_TRACES
from table_digest import operator_digests, trace_digests

from hta_lite import TraceAnalysis
from hta_lite.load.rank_trace import parse_file

DIGESTS = json.loads((DATA / "table_digests.json").read_text())


def _path(name: str):
    return (
        SHARED_TRACES / name.removeprefix("shared:") if name.startswith("shared:") else ROOT / name
    )


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_tables_identical_to_before(name):
    path = _path(name)
    if not path.exists():
        pytest.skip(f"{path} needs ../shared (the project's workspace)")
    assert trace_digests(parse_file(path)) == DIGESTS[name]


@pytest.mark.parametrize(
    "name",
    ["sample_traces/two_ranks/sampled_rank-0.json.gz", "sample_traces/memory_leak/rank-0.json.gz"],
)
def test_tables_identical_after_a_cache_round_trip(name, tmp_path):
    path = _path(name)
    for _ in range(2):  # fills the cache, then reopens from it
        reopened = TraceAnalysis(trace_files={0: path}, cache=tmp_path, parallel=False)
    assert "gpu" not in vars(reopened.trace(0))  # really from the cache
    assert trace_digests(reopened.trace(0)) == DIGESTS[name]


OPERATOR_DIGESTS = json.loads((DATA / "operator_digests.json").read_text())


@pytest.mark.filterwarnings("ignore:rank .* is not in the peak table")  # devices of no roof
@pytest.mark.parametrize("name", sorted(OPERATOR_DIGESTS))
def test_operator_view_identical_to_before(name):
    """Every table of the operator view, pinned at commit 6117a23 (round two, third session):
    equal to those of the round's second session but for one dtype (``concrete_inputs`` of
    the instances is ``str`` when no call has any); regenerated when ``above_roof`` and
    ``above_peak`` were added (the tables without them equal the pinned ones: checked), and when
    amd_mi250's device was inferred from its properties (only the device's columns changed:
    checked against the same run with the inference off), and when the instances gained
    ``graph_launch_row``, the roofline ``gpu_pctg`` and MFU ``graph_replay_pctg`` (the tables
    without them equal the pinned ones: checked). Regenerate
    after a deliberate change
    with
    ``cd tests && python -c "import test_table_digests as t; t.write_operator_digests()"``."""
    path = _path(name)
    if not path.exists():
        pytest.skip(f"{path} needs ../shared (the project's workspace)")
    analysis = TraceAnalysis(trace_dir=path, parallel=False, cache=False, progress=False)
    assert operator_digests(analysis) == OPERATOR_DIGESTS[name]


def write_operator_digests() -> None:
    names = ["sample_traces/two_ranks", "sample_traces/h100_bert_small", "sample_traces/amd_mi250",
             "shared:hta/diff_control", "shared:tracelens/b200_eager",
             "shared:tracelens/mi300_bert_small", "shared:tracelens/sglang_decode"]  # fmt: skip
    out = {
        name: operator_digests(
            TraceAnalysis(trace_dir=_path(name), parallel=False, cache=False, progress=False)
        )
        for name in names
    }
    (DATA / "operator_digests.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


@pytest.mark.filterwarnings("ignore:rank .* is not in the peak table")
@pytest.mark.parametrize("name", ["sample_traces/two_ranks", "sample_traces/h100_bert_small"])
def test_operator_view_identical_after_a_cache_round_trip(name, tmp_path):
    """The operator view of ranks reopened from the cache (their text categories read back from
    Arrow) equals the pinned one."""
    for _ in range(2):  # fills the cache, then reopens from it
        analysis = TraceAnalysis(trace_dir=_path(name), cache=tmp_path, parallel=False)
    assert all("cpu" not in vars(analysis.trace(rank)) for rank in analysis.traces)
    assert operator_digests(analysis) == OPERATOR_DIGESTS[name]
