"""One policy for a view the traces cannot give (docs/missing-data.md), and the CLI, the report and
the API saying the same thing about the same trace."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re

import pytest
from conftest import DATA, ROOT, sample_folders, shared_cases
from synth import TraceBuilder

from hta_lite import TraceAnalysis
from hta_lite.facade.missing import why
from hta_lite.units import distinct_names
from hta_lite.views.cli import main

README_BLOCK = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)


def _folders():
    return {**sample_folders(), **{f"shared/{k}": v for k, v in shared_cases().items()}}


@pytest.mark.parametrize("name", sorted(_folders()))
def test_the_readme_example_runs_to_the_end_on_every_folder(name, monkeypatch):
    """The README's notebook example pointed at each folder: no view stops it (Run all)."""
    folder = _folders()[name]
    script = README_BLOCK.replace('"sample_traces/two_ranks"', repr(str(folder)))
    assert script != README_BLOCK
    monkeypatch.chdir(ROOT)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exec(compile(script, "README.md", "exec"), {})


def _cli(*args) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*args, "--serial"]) == 0
    return out.getvalue()


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    return text[start : text.index("\n\n", start + len(heading) + 1)]


def test_steps_says_when_it_could_not_score(tmp_path):
    b = TraceBuilder()
    for n in range(4):  # 4 steps: 8 are needed to know the typical one
        b.step(n, n * 100, 90).kernel("k", n * 100 + 10, 50, launch_ts=n * 100 + 5)
    b.write(tmp_path / "rank0.json")
    text = _cli("steps", str(tmp_path))
    # the last ProfilerStep is left out, as HTA does: 3 scored
    assert "Steps not scored: 3 steps over 1 rank(s): too few to score" in text
    assert "anomalous" not in text and "No period" not in text
    summary = _cli("summarize", str(tmp_path))
    assert "too few to score" in _section(summary, "Anomalous steps")


def test_cpu_only_folders_say_no_gpu_work_and_the_api_agrees(capsys):
    folder = DATA / "cpu_only"
    text = _cli("summarize", str(folder))
    for heading in ("Temporal breakdown", "Communication / computation overlap",
                    "GPU idle time by cause"):  # fmt: skip
        assert "(none: no GPU work in rank(s) [34]" in _section(text, heading)
    steps = _section(text, "Per-step breakdown")
    assert "NaN" not in steps and "gpu_busy" not in steps and "GPU columns left out" in steps
    analysis = TraceAnalysis(trace_dir=folder, parallel=False)
    assert why(analysis.get_temporal_breakdown(visualize=False)).startswith("no GPU work")
    # the critical path: the CLI says what the API computes, with the caveat
    cp, _ = analysis.critical_path_analysis(34)
    section = _section(text, "Critical path")
    if cp.bound_by_table()["duration_us"].sum() > 0:
        assert "cpu_bound" in section
    assert "No GPU work in the trace" in section


def test_critical_path_summary_agrees_with_the_api_on_a_cpu_only_run():
    folder = ROOT / "sample_traces" / "gloo_4ranks"
    analysis = TraceAnalysis(trace_dir=folder, parallel=False)
    api = analysis.critical_path_analysis(analysis.ranks[0])[0].bound_by_table()
    section = _section(_cli("summarize", str(folder)), "Critical path")
    assert f"{api.loc['cpu_bound', 'duration_us']:.1f}"[:5] in section.replace(",", "")
    assert "No GPU work in the trace: every edge is on the host" in section


def test_json_carries_every_column_the_api_returns():
    folder = ROOT / "sample_traces" / "two_ranks"
    payload = json.loads(_cli("summarize", str(folder), "--format", "json"))
    analysis = TraceAnalysis(trace_dir=folder, parallel=False)
    assert set(payload["key_findings"][0]) == set(analysis.get_key_findings().columns)
    assert {"value", "unit", "section"} <= set(payload["key_findings"][0])
    assert set(payload["findings"][0]) == set(analysis.get_findings().columns)


def test_memory_advice_reads_the_traces_own_flags(tmp_path):
    b = TraceBuilder().kernel("k", 10, 5, launch_ts=5)
    b.meta["profile_memory"] = 1  # recorded with profile_memory=True, no allocation in window
    b.write(tmp_path / "flagged" / "rank0.json")
    flagged = TraceAnalysis(trace_dir=tmp_path / "flagged", parallel=False)
    assert "although rank(s) [0] were recorded with profile_memory=True" in why(
        flagged.get_memory_peaks()
    )
    line = flagged.get_key_findings().set_index("kind").loc["memory_peak", "finding"]
    assert line.startswith("Memory: no [memory] events, although")
    TraceBuilder().kernel("k", 10, 5, launch_ts=5).write(tmp_path / "plain" / "rank0.json")
    plain = TraceAnalysis(trace_dir=tmp_path / "plain", parallel=False)
    assert "record with torch.profiler.profile(profile_memory=True)" in why(
        plain.get_memory_peaks()
    )


def test_kernel_names_print_distinct(tmp_path):
    stem = "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float"
    names = [f"{stem}, MulFunctor<{t}> >(int)" for t in ("float", "half", "double")]
    assert len(set(distinct_names(names, 60))) == 3
    assert all(len(n) <= 60 for n in distinct_names(names, 60))
    same_tail = [f"{stem}{i}" + "x" * 80 for i in range(3)]  # the cut hides what differs
    assert len(set(distinct_names(same_tail, 60))) == 3
    b = TraceBuilder()
    for i, name in enumerate(names):
        b.kernel(name, 100 * i, 50 + i, launch_ts=100 * i - 5)
    b.write(tmp_path / "rank0.json")
    section = _section(_cli("summarize", str(tmp_path)), "Top kernels")
    assert all(n in section for n in distinct_names(names, 60))


@pytest.mark.skipif(os.name != "posix", reason="paths")
def test_table_views_never_raise_for_missing_data():
    """Every public table view on a folder with no memory, shapes, modules or graph launches:
    a table with no rows whose why says what to record."""
    analysis = TraceAnalysis(trace_dir=DATA / "cpu_only", parallel=False)
    for view, text in [
        (analysis.get_memory_peaks, "profile_memory"),
        (analysis.get_memory_by_step, "profile_memory"),
        (analysis.get_operator_roofline, "FLOP model"),
        (analysis.get_graph_launches, "cudaGraphLaunch"),
        (lambda: analysis.get_operator_summary(by="module"), "nn.Module"),
        (lambda: analysis.get_gpu_kernel_breakdown(visualize=False)[0], "no GPU work"),
        (lambda: analysis.get_comm_comp_overlap(visualize=False), "no GPU work"),
    ]:
        table = view()
        assert table.empty and text in why(table)


def test_overview_names_the_gpu_the_mfu_line_infers(tmp_path):
    b = TraceBuilder().step(1, 0, 100).step(2, 100, 100)
    b.cpu_op(
        "aten::mm", 10, 20, **{"Input Dims": [[64, 64], [64, 64]], "Input type": ["float"] * 2}
    )
    b.kernel("gemm", 40, 20, launch_ts=12)
    b.meta["deviceProperties"] = [  # no name: the numbers of an H100 SXM
        {"id": 0, "computeMajor": 9, "computeMinor": 0, "numSms": 132, "totalGlobalMem": 80 * 2**30}
    ]
    analysis = TraceAnalysis(trace_dir=b.write(tmp_path / "t" / "rank0.json").parent)
    device = analysis.get_mfu()["device"].iloc[0]
    assert device == "H100 SXM"
    assert (
        analysis.health_summary()["gpu_name"].iloc[0] == "H100 SXM (inferred from its properties)"
    )


#: folders unlike the pages' own: CPU-only with several ranks, no ProfilerStep, ROCm without
#: memory events, one rank that is not rank 0 (made from two_ranks' rank 1)
OTHER_FOLDERS = ["gloo_4ranks", "sglang_decode", "amd_mi250", "rank_1_alone"]


@pytest.mark.parametrize("folder", OTHER_FOLDERS)
def test_docs_examples_run_to_the_end_on_other_folders(folder, tmp_path):
    import shutil
    import subprocess
    import sys

    from test_docs_examples import _pages_with_examples, examples

    (tmp_path / "sample_traces").symlink_to(ROOT / "sample_traces")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    target = repr(f"sample_traces/{folder}")
    if folder == "rank_1_alone":
        alone = tmp_path / "rank_1_alone"
        alone.mkdir()
        shutil.copy(ROOT / "sample_traces" / "two_ranks" / "sampled_rank-1.json.gz", alone)
        target = repr(str(alone))
    for page in _pages_with_examples():
        script = re.sub(r"[\"']sample_traces/[\w/]+[\"']", target, examples(page)[0])
        path = tmp_path / f"{page.stem}.py"
        path.write_text(script, encoding="utf-8")
        done = subprocess.run([sys.executable, path.name], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, f"{page.name} on {folder}: {done.stderr[-2000:]}"


def test_critical_path_says_once_what_it_cannot_see():
    """two_ranks has GPU work and no cuda_sync event: the summary's critical path says the host's
    waits for the GPU are not on it (HTA warns alike); a trace with them does not say so."""
    from hta_lite.views.summary import critical_path_rows

    rows = critical_path_rows(TraceAnalysis(trace_dir=ROOT / "sample_traces" / "two_ranks"))
    assert rows.attrs["note"].count("no CUDA synchronization events") == 1
    synced = TraceAnalysis(trace_dir=DATA / "critical_path" / "cp_cuda_event_sync")
    assert (synced.trace(0).gpu["cat"] == "cuda_sync").any()
    assert "no CUDA synchronization" not in critical_path_rows(synced).attrs["note"]


def test_an_nsys_export_without_sync_records_is_not_told_to_upgrade_pytorch(tmp_path):
    """pipit_saxpy_mpi (nsys 2022.2, a C++ MPI program) has no synchronization table: the
    caveat names the export's missing records, not PyTorch."""
    from hta_lite.views.summary import critical_path_rows

    export = tmp_path / "rank0.sqlite"
    export.write_bytes(gzip.decompress((DATA / "nsys" / "pipit_saxpy_mpi.sqlite.gz").read_bytes()))
    note = critical_path_rows(TraceAnalysis(trace_dir=tmp_path, cache=False)).attrs["note"]
    assert "no CUDA synchronization records" in note and "PyTorch" not in note
