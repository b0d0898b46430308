"""The reference's public API, drop-in: signatures, the methods and parameters added for parity,
and the deliberate differences (listed, each with its reason)."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, SAMPLES, assert_missing
from synth import TraceBuilder

from hta_lite import TimeSeriesTypes, TraceAnalysis, TraceDiff
from hta_lite.errors import SelectionError

# (class, method) -> why hta_lite differs from traceinsight 0.6.1's signature on purpose
DELIBERATE = {
    ("TraceAnalysis", "__init__"): "trace_dir may come first or alone (TraceAnalysis('dir'));"
    " no '/tmp/trace' default folder; loader options keyword-only",
}
# parameters hta_lite adds, keyword-only after the reference's, in every method
ADDED = {"ranks", "output_dir", "control_label", "test_label", "top", "shortern_names", "rank"}
ADDED |= {"visualize"}  # get_cupti_counter_data_with_operators


def reference_signatures() -> dict:
    hta = pytest.importorskip("hta.trace_analysis", reason="traceinsight==0.6.1 not installed")
    from hta.trace_diff import TraceDiff as RefDiff

    return {"TraceAnalysis": hta.TraceAnalysis, "TraceDiff": RefDiff}


def parameters(function) -> list[tuple[str, str]]:
    return [
        (p.name, p.kind.name)
        for p in inspect.signature(function).parameters.values()
        if p.name not in ("self", "cls") and p.kind is not p.VAR_KEYWORD
    ]


def test_public_signatures_match_the_reference():
    """Every public method of the reference exists here, with its parameters in its order
    (positional use works), unless listed in DELIBERATE; ours add keyword-only ones only."""
    ours = {"TraceAnalysis": TraceAnalysis, "TraceDiff": TraceDiff}
    problems = []
    for cls_name, ref_cls in reference_signatures().items():
        for name, ref_fn in inspect.getmembers(ref_cls, callable):
            if name.startswith("_") and name != "__init__" or (cls_name, name) in DELIBERATE:
                continue
            mine = getattr(ours[cls_name], name, None)
            if mine is None:
                problems.append(f"{cls_name}.{name} missing")
                continue
            theirs, got = parameters(ref_fn), parameters(mine)
            positional = [p for p in got if p[1] != "KEYWORD_ONLY"]
            if [p[0] for p in positional] != [p[0] for p in theirs]:
                problems.append(f"{cls_name}.{name}: {positional} vs {theirs}")
            extra = {p[0] for p in got if p[1] == "KEYWORD_ONLY"} - ADDED
            if extra:
                problems.append(f"{cls_name}.{name}: keyword-only {extra} not in ADDED")
    assert not problems, problems


def test_deliberate_differences_still_differ():
    """A listed difference that no longer exists must leave the list."""
    for (cls_name, name), why in DELIBERATE.items():
        ref = getattr(reference_signatures()[cls_name], name)
        ours = {"TraceAnalysis": TraceAnalysis, "TraceDiff": TraceDiff}[cls_name]
        mine = getattr(ours, name, None)
        assert mine is None or parameters(mine) != parameters(ref), f"{name}: {why}"


@pytest.fixture(scope="module")
def cupti():
    return TraceAnalysis(trace_dir=DATA / "cupti_profiler", parallel=False, cache=False)


def test_cupti_counters_with_operators_equal_the_reference(cupti):
    got = cupti.get_cupti_counter_data_with_operators()
    ref = json.loads((DATA / "cupti_profiler_reference.json").read_text())
    assert len(got) == 1 and len(got[0]) == len(ref["op_stack"]) == 77
    df = got[0]
    assert df["op_stack"].tolist() == ref["op_stack"]
    assert df["top_level_op"].tolist() == [s[0] for s in ref["op_stack"]]
    assert df["bottom_level_op"].tolist() == [s[-1] for s in ref["op_stack"]]
    ffma = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
    assert df[ffma].tolist() == ref["ffma"]
    sass = [c for c in df.columns if c.startswith("smsp__sass")]
    expected = sum(df[c] * (2 if "fma" in c else 1) for c in sass)
    assert np.array_equal(df["flops"].to_numpy(), expected.to_numpy())
    launches = cupti.cpu_events(0).iloc[df["launch_row"]]
    assert (launches["name"] == "cudaLaunchKernel").all()
    assert (launches["correlation"].to_numpy() == df["correlation"].to_numpy()).all()


def test_cupti_counters_need_profiler_ranges_and_matching_launches(tmp_path, cupti):
    (table,) = TraceAnalysis(
        trace_dir=SAMPLES / "two_ranks"
    ).get_cupti_counter_data_with_operators()
    assert_missing(table, "cuda_profiler_range")
    b = TraceBuilder().kernel("k", 10, 1, launch_ts=1)
    for ts in (100, 200):  # two ranges, one launch: no pairing is right
        b.events.append(
            {"ph": "X", "cat": "cuda_profiler_range", "name": "k", "pid": 0, "tid": 0, "ts": ts,
             "dur": 10, "args": {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1}}
        )  # fmt: skip
    b.write(tmp_path / "rank0.json")
    with pytest.raises(Exception, match="2 CUPTI profiler ranges but 1 kernel launch"):
        TraceAnalysis(trace_dir=tmp_path).get_cupti_counter_data_with_operators()


def test_t_get_trace_is_the_reference_frame(two_ranks):
    frame = two_ranks.t.get_trace(0)
    cpu, gpu = two_ranks.cpu_events(0), two_ranks.gpu_events(0)
    assert len(frame) == len(cpu) + len(gpu)
    assert frame["index"].tolist() == list(range(len(frame)))
    assert (np.diff(frame["ts"].to_numpy()) >= 0).all()
    assert frame["ts"].min() == 0  # µs from the earliest event of all ranks (rank 0 starts first)
    kernels = frame[frame["stream"] >= 0]
    launched = kernels[kernels["index_correlation"] >= 0]
    calls = frame.iloc[launched["index_correlation"].to_numpy()]
    assert (calls["correlation"].to_numpy() == launched["correlation"].to_numpy()).all()
    assert (calls["stream"] == -1).all() and (frame["s_name"] == frame["name"]).all()
    back = frame.iloc[calls["index_correlation"].to_numpy()]  # launch -> its first GPU event
    assert (back["correlation"].to_numpy() == calls["correlation"].to_numpy()).all()
    two_ranks.t.decode_symbol_ids(use_shorten_name=True)
    assert two_ranks.t.get_trace(0)["s_name"].str.len().sum() < frame["s_name"].str.len().sum()
    two_ranks.t.decode_symbol_ids(use_shorten_name=False)
    assert sorted(two_ranks.t.get_all_traces()) == two_ranks.ranks == two_ranks.t.get_ranks()
    with pytest.raises(AttributeError, match="analysis.metadata"):
        two_ranks.t.meta_data  # noqa: B018


def test_user_annotation_breakdown_options(two_ranks):
    gpu = two_ranks.get_gpu_user_annotation_breakdown(visualize=False)
    cpu = two_ranks.get_gpu_user_annotation_breakdown(use_gpu_annotation=False, visualize=False)
    assert "ProfilerStep#551" in set(cpu["name"]) and not gpu.equals(cpu)
    pooled = two_ranks.get_gpu_user_annotation_breakdown(
        use_gpu_annotation=False, visualize=False, num_kernels=3
    )
    kept = two_ranks.get_gpu_user_annotation_breakdown(
        False, False, 0.8, 3, allowlist_patterns=["nccl:.*all_gather"], image_renderer=None
    )
    small = "nccl:_all_gather_base"  # among the shortest ranges: pooled unless allowlisted
    assert small not in set(pooled["name"]) and small in set(kept["name"])
    assert set(kept["name"]) - {small} == set(pooled["name"])
    with pytest.raises(SelectionError, match="no_such_annotation"):
        two_ranks.get_gpu_user_annotation_breakdown(
            visualize=False, allowlist_patterns=["no_such_annotation"]
        )


def test_generate_trace_with_counters_series_selection(tmp_path):
    a = TraceAnalysis(trace_dir=SAMPLES / "two_ranks", parallel=False)
    for series, expected in (
        (TimeSeriesTypes.QUEUE_LENGTH, ("Queue Length",)),
        (TimeSeriesTypes.MEMCPY_BANDWIDTH, ("Memory Bandwidth",)),
        (None, ("Queue Length", "Memory Bandwidth")),
    ):
        out = tmp_path / str(series)
        path = a.generate_trace_with_counters(series, [0], output_dir=out)[0]
        doc = json.loads(__import__("gzip").decompress(path.read_bytes()))
        names = {e["name"].split(" (")[0] for e in doc["traceEvents"] if e.get("ph") == "C"}
        assert names == set(expected)


def test_queue_length_summary_from_time_series(two_ranks):
    series = two_ranks.get_queue_length_time_series()
    pd.testing.assert_frame_equal(
        two_ranks.get_queue_length_summary_from_time_series(series),
        two_ranks.get_queue_length_summary(),
    )


def test_image_renderer_shows_the_figures(two_ranks, monkeypatch):
    import plotly.graph_objects as go

    shown = []
    monkeypatch.setattr(go.Figure, "show", lambda fig, renderer=None: shown.append(renderer))
    two_ranks.get_gpu_kernel_breakdown(image_renderer="json")
    assert shown and set(shown) == {"json"}


def test_repr_says_ranks_steps_device_and_health(two_ranks, tmp_path):
    text = repr(two_ranks)
    assert "2 rank(s) [0, 1]" in text and "CUDA" in text and "steps 551..552" in text
    assert "health" not in text  # nothing skipped or clamped in this folder
    TraceBuilder(rank=3).kernel("k", 10, 5, launch_ts=12).write(tmp_path / "good.json")
    (tmp_path / "bad.json").write_text("{")
    text = repr(TraceAnalysis(trace_dir=tmp_path, on_error="skip", cache=False))
    assert "1 rank(s) [3]" in text and "1 file(s) not loaded" in text and ".health()" in text


def test_cupti_view_in_cli_summary_and_report(cupti, two_ranks, tmp_path, capsys):
    from hta_lite.views.cli import main
    from hta_lite.views.report import build_report
    from hta_lite.views.summary import summary_tables

    table = summary_tables(cupti)[0]["cupti_counters"]
    assert table.loc[0, "operator"] == "aten::cudnn_convolution" and table["kernels"].sum() == 77
    tables, absent = summary_tables(two_ranks)
    assert "cupti_counters" not in tables and "cupti_counters" not in absent
    assert main(["summarize", str(DATA / "cupti_profiler"), "--no-cache"]) == 0
    assert "CUPTI counters by operator" in capsys.readouterr().out
    assert "id='cupti'" in build_report(cupti) and "id='cupti'" not in build_report(two_ranks)


def test_the_reference_straggler_hook_is_refused_with_the_richer_view(two_ranks):
    with pytest.raises(SelectionError, match="get_straggler_report"):
        two_ranks.get_potential_stragglers(straggler_identification_impl=lambda *a: None)
    assert two_ranks.get_potential_stragglers(straggler_identification_impl=None)
