"""Hostile and odd input, built by mutating a vendored real trace: no raw exception, no
impossible number; what cannot be is NaN, flagged on its row and counted in health."""

from __future__ import annotations

import gzip
import json
import math
import shutil

import pytest
from conftest import DATA, SAMPLES

from hta_lite import TraceAnalysis, TraceDiff
from hta_lite.errors import SelectionError
from hta_lite.tools.synthetic import make_straggler_folder
from hta_lite.views.cli import main

BERT = SAMPLES / "h100_bert_small" / "gaunernst_bert-small-uncased__1016001.json.gz"


def mutated(tmp_path, mutate, name="mutated") -> TraceAnalysis:
    """The H100 sample with ``mutate(events)`` applied, loaded from ``tmp_path / name``."""
    doc = json.loads(gzip.decompress(BERT.read_bytes()))
    mutate(doc["traceEvents"])
    folder = tmp_path / name
    folder.mkdir()
    (folder / "rank-0.json").write_text(json.dumps(doc))
    return TraceAnalysis(trace_dir=folder, parallel=False, cache=False)


def dims_of_first(name, dims):
    def mutate(events):
        for event in events:
            if event.get("name") == name:
                event["args"]["Input Dims"] = dims
                return

    return mutate


def addmm_dims(dims):
    return dims_of_first("aten::addmm", dims)


@pytest.mark.parametrize(
    "dims",
    [
        [[512], [768, 2**70], [2**70, 512], [], []],  # elements past int64 (R1)
        [[512], [10**12, 10**12], [10**12, 512], [], []],
        [[512], [-141, 512], [512, 512], [], []],  # negative: -109.6 TFLOP/s before
        [[512], [141.5, 512], [512, 512], [], []],
        [[512], [1e308, 512], [512, 512], [], []],  # inf FLOPs before
    ],
    ids=["2^70", "1e24 elements", "negative", "float", "1e308"],
)
def test_impossible_shapes_are_nan_and_counted(tmp_path, dims):
    a = mutated(tmp_path, addmm_dims(dims))
    instances = a.get_operator_instances()
    bad = instances[instances["kind"] == "invalid shape"]
    assert (
        len(bad) == 1
        and math.isnan(bad["flops"].iloc[0])
        and bad["name"].iloc[0] == ("aten::addmm")
    )
    health = a.health().set_index("code")
    assert health.loc["shape_invalid", "count"] == 1
    assert "aten::addmm calls whose input shapes cannot be" in health.loc["shape_invalid", "item"]
    roofline = a.get_operator_roofline()
    assert (roofline["roof_pctg"].dropna() <= 100).all() and (roofline["flops"] >= 0).all()
    assert (roofline["achieved_tflops"].dropna() >= 0).all()
    assert a.get_mfu()["mfu_pctg"].between(0, 100).all()
    a.get_optimization_targets()
    assert main(["summarize", str(tmp_path / "mutated"), "--no-cache", "--serial"]) == 0


@pytest.mark.parametrize("k", [10**12, 10**16], ids=["1e12", "1e16"])
def test_achieved_above_the_roof_is_flagged_on_the_row_and_in_health(tmp_path, k):
    """A possible shape (fewer elements than int64 holds) whose FLOPs the kernels cannot have
    done: the first linear layer with an inner dimension of ``k``."""
    a = mutated(tmp_path, dims_of_first("aten::linear", [[1, 141, k], [512, k], [512]]))
    roofline = a.get_operator_roofline()
    above = roofline[roofline["above_roof"]]
    assert len(above) == 1 and above["roof_pctg"].iloc[0] > 100
    assert (roofline.loc[~roofline["above_roof"], "roof_pctg"].dropna() <= 100).all()
    assert not a.get_optimization_targets()["above_roof"].any()  # no target from a wrong model
    mfu = a.get_mfu()
    assert mfu["above_peak"].all()
    items = a.health().set_index("code")["item"]
    assert "aten::linear" in items["above_roof"] and "H100 SXM" in items["above_roof"]
    assert "TFLOP/s" in items["above_peak"]
    finding = a.get_key_findings().set_index("kind").loc["mfu", "finding"]
    assert "is above 100 %, which cannot be" in finding


def test_valid_shapes_stay_modelled(tmp_path):
    a = mutated(tmp_path, lambda events: None)
    assert "invalid shape" not in set(a.get_operator_instances()["kind"])
    assert not a.get_operator_roofline()["above_roof"].any()
    assert "shape_invalid" not in set(a.health()["code"])


NCCL = DATA / "nccl_parser_config" / "nccl_data.json.gz"


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    """Four ranks made from the vendored NCCL trace (rank 3 late at each step's collective)."""
    folder = tmp_path_factory.mktemp("nccl") / "ok"
    return make_straggler_folder(NCCL, folder, 4, 3, "host", gz=False)


def with_rank_2_metadata(four_ranks, tmp_path, change) -> TraceAnalysis:
    folder = tmp_path / "bad"
    shutil.copytree(four_ranks, folder)
    path = folder / "rank-2.json"
    doc = json.loads(path.read_text())
    for event in doc["traceEvents"]:
        if "Process Group Ranks" in event.get("args", {}):
            change(event["args"])
    path.write_text(json.dumps(doc))
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


DISAGREES, INVALID = "collective_metadata_disagrees", "collective_metadata_invalid"


@pytest.mark.parametrize(
    "change, counted",
    [
        (lambda args: args.update({"In msg nelems": -5}), DISAGREES),
        (lambda args: args.update({"In msg nelems": 10**30}), DISAGREES),
        (lambda args: args.update({"In msg nelems": 2**62}), DISAGREES),  # x 4: wrapped to 0
        (lambda args: args.update({"Process Group Ranks": "[0, 1, 2"}), INVALID),  # R4: raw error
        (lambda args: args.update({"Collective name": "frobnicate"}), None),  # the kernel's name
    ],
    ids=["negative", "1e30", "2^62", "cut ranks", "unknown collective"],
)
def test_one_rank_with_bad_collective_metadata_never_empties_the_job(
    four_ranks, tmp_path, change, counted
):
    good = TraceAnalysis(trace_dir=four_ranks, cache=False, progress=False)
    a = with_rank_2_metadata(four_ranks, tmp_path, change)
    summary = a.get_collective_summary()
    assert summary["count"].sum() == good.get_collective_summary()["count"].sum() == 14
    assert a.get_straggler_report().stragglers == good.get_straggler_report().stragglers == [3]
    calls = a.get_collectives().calls
    assert (calls["in_bytes"] >= -1).all() and (calls["in_bytes"] != 0).all()  # never wrapped
    problems = a.get_collectives().problems
    odd = problems[problems["reason"] == "metadata disagree"]
    assert set(odd["ranks"]) <= {"2"}  # rank 2 named, no other
    health = a.health()
    codes = set(health.loc[health["code"].isin([DISAGREES, INVALID]), "rank"].astype(str) + ":"
                + health.loc[health["code"].isin([DISAGREES, INVALID]), "code"])  # fmt: skip
    assert codes == ({f"2:{counted}"} if counted else set())


def test_argument_errors_are_selection_errors_and_value_errors(two_ranks):
    calls = [
        lambda: two_ranks.get_collective_summary(by="bogus"),
        lambda: two_ranks.get_timers_across_ranks(log_option="bogus"),
        lambda: two_ranks.critical_path_analysis(0, "ProfilerStep", 0, data_load_events=["("]),
        lambda: two_ranks.get_operator_summary(ranks=[]),
        lambda: two_ranks.get_mfu(ranks=[]),
        lambda: two_ranks.get_memory_peaks(ranks=[]),
        lambda: two_ranks.get_step_breakdown(steps=[], visualize=False),
        lambda: TraceDiff.ops_diff(SAMPLES / "two_ranks", SAMPLES / "two_ranks", test_iteration=[]),
    ]
    for call in calls:
        with pytest.raises(SelectionError) as raised:
            call()
        assert isinstance(raised.value, ValueError)  # HTA users' except ValueError still works
