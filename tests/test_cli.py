"""The batch CLI: summarize / report / counters, formats, exit codes."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import SAMPLES

from hta_lite.views.cli import main


def test_summarize_prints_and_writes(tmp_path, capsys):
    assert main(["summarize", str(SAMPLES / "two_ranks"), "-o", str(tmp_path), "--serial"]) == 0
    out = capsys.readouterr().out
    assert "Temporal breakdown" in out and "ncclKernel_SendRecv" in out
    temporal = pd.read_csv(tmp_path / "temporal_breakdown.csv")
    assert temporal["idle_time_pctg"].tolist() == [53.56, 54.72]
    assert (tmp_path / "report.html").stat().st_size > 1_000_000  # plotly.js inlined


def test_summarize_parquet_and_json(tmp_path, capsys):
    assert (
        main(["summarize", str(SAMPLES / "amd_mi250"), "-o", str(tmp_path), "--format", "parquet"])
        == 0
    )
    assert pd.read_parquet(tmp_path / "kernel_type_breakdown.parquet")["kernel_type"].tolist() == [
        "COMPUTATION",
        "MEMORY",
    ]
    capsys.readouterr()
    assert main(["summarize", str(SAMPLES / "amd_mi250"), "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["temporal_breakdown"][0]["rank"] == 0


def test_summarize_opens_with_key_findings_and_says_why_a_view_is_absent(capsys):
    assert main(["summarize", str(SAMPLES / "two_ranks"), "--serial"]) == 0
    out = capsys.readouterr().out
    assert out.index("Key findings") < out.index("Temporal breakdown")
    assert "- Rank 1 reaches its collectives 3.4 ms per step after the others" in out
    memory = out[out.index("Memory: peak allocated") :]
    assert (
        memory.splitlines()[1].startswith("(none: no [memory] events")
        and "profile_memory" in (memory.splitlines()[1])
    )
    path = "The path's weighted edges add up to 301.5 ms of the 607.3 ms from ProfilerStep#551's"
    assert path + " start" in out


def test_csv_to_stdout_and_parquet_needs_a_folder(tmp_path, capsys):
    assert main(["summarize", str(SAMPLES / "amd_mi250"), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("# temporal_breakdown\n") :].splitlines()
    assert block[1].startswith("rank,idle_time(us),") and block[2].startswith("0,")
    assert "# memory_peaks: none (no [memory] events" in out
    assert main(["summarize", str(SAMPLES / "amd_mi250"), "--format", "parquet"]) == 2
    assert "--format parquet writes files: give --out-dir" in capsys.readouterr().err


def test_a_single_trace_file_is_a_folder_of_one_rank(capsys):
    path = SAMPLES / "two_ranks" / "sampled_rank-1.json.gz"
    assert main(["summarize", str(path), "--format", "json"]) == 0
    assert [r["rank"] for r in json.loads(capsys.readouterr().out)["temporal_breakdown"]] == [1]


def test_a_single_large_file_shows_its_progress(tmp_path, monkeypatch, capsys):
    from hta_lite import TraceAnalysis
    from hta_lite.load import decode, loader, stream

    if decode._fastjson is None:
        pytest.skip("the progress of one file is the C decoder's, which reads it in pieces")
    monkeypatch.setattr(loader, "LARGE_FILE_BYTES", 1)  # as if these 124 KB were 2 GB
    monkeypatch.setattr(stream, "MIN_FILE_BYTES", 1)
    path = SAMPLES / "two_ranks" / "sampled_rank-0.json.gz"
    TraceAnalysis(trace_dir=path, cache=False)
    err = capsys.readouterr().err
    assert f"reading {path.name}: 100%" in err
    TraceAnalysis(trace_dir=path, cache=False, progress=False)
    assert "reading" not in capsys.readouterr().err


def test_report_and_counters(tmp_path):
    assert (
        main(
            [
                "report",
                str(SAMPLES / "h100_bert_small"),
                "-o",
                str(tmp_path / "r.html"),
                "--title",
                "H100 <bert>",
            ]
        )
        == 0
    )
    text = (tmp_path / "r.html").read_text()
    assert "<title>H100 &lt;bert&gt;</title>" in text
    assert (
        "<script src=" not in text and "<link " not in text
    )  # nothing loaded from outside the file
    assert main(["counters", str(SAMPLES / "two_ranks"), "-o", str(tmp_path / "c")]) == 0
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [
        "sampled_rank-0_with_counters.json.gz",
        "sampled_rank-1_with_counters.json.gz",
    ]


def test_exit_codes_and_messages(tmp_path, capsys):
    assert main(["summarize", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"hta-lite: error: {tmp_path / 'nope'}: trace folder does not exist"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.json").write_text("{broken")
    assert main(["report", str(tmp_path / "bad")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert main(["summarize", str(SAMPLES / "two_ranks"), "--ranks", "7"]) == 2
    assert main(["batch", str(SAMPLES / "two_ranks"), "--ranks", "7", "--serial"]) == 2
    assert capsys.readouterr().err.endswith("rank(s) [7] not in the folder; ranks: [0, 1]\n")
    try:
        main(["nonsense"])
    except SystemExit as exc:
        assert exc.code == 2


def test_version_says_which_decoder(capsys, monkeypatch):
    from hta_lite import __version__
    from hta_lite.load import decode
    from hta_lite.views import cli

    assert cli.c_decoder_in_use() == (decode._fastjson is not None)  # found without importing
    for built, expected in (
        (True, "(C decoder)"),
        (False, "(pure-Python decoder: C decoder not built or HTA_LITE_NO_C set)"),
    ):
        monkeypatch.setattr(cli, "c_decoder_in_use", lambda built=built: built)
        with pytest.raises(SystemExit) as done:
            main(["--version"])
        assert done.value.code == 0
        assert capsys.readouterr().out.strip() == f"hta-lite {__version__} {expected}"


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["diff", "--help"]])
def test_help_and_version_import_no_pandas_pyarrow_or_plotly(argv):
    import subprocess
    import sys

    code = (
        "import sys\nfrom hta_lite.views.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pandas', 'pyarrow', 'plotly', 'numpy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr


def test_module_entry_point():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "hta_lite", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "summarize" in out.stdout


def _payload(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("folder", ["two_ranks", "memory_leak", "sglang_decode"])
def test_batch_gives_summarizes_views_as_summarize_shows_them(folder, tmp_path, capsys):
    """`hta-lite batch` (each rank summarized in a worker) prints the views the batch gives as
    `summarize` does: the same findings, key findings, idle causes, kernel types, top kernels,
    roofline targets, MFU, steps, operators (up to the order of operators tied in time), job
    path, memory, graph launches (sglang_decode: its CUDA graph; none: no line in either), the
    lowest rank's critical path and health; none is absent for the batch alone."""
    cache = ["--no-cache"] if folder == "memory_leak" else []  # findings: cache on (default)
    where = str(SAMPLES / folder)
    batch = _payload(capsys, "batch", where, "--serial", "--format", "json", *cache)
    full = _payload(capsys, "summarize", where, "--serial", "--format", "json")
    assert set(batch["absent"]) <= set(full["absent"]) | {"findings"}  # findings: cache off
    same = ["key_findings", "temporal_breakdown", "gpu_idle_by_cause", "kernel_type_breakdown",
            "top_kernels", "optimization_targets", "mfu", "step_breakdown",
            "job_critical_path", "memory_peaks", "memory_leaks", "collectives_by_rank",
            "graph_launches", "critical_path", "health"]  # fmt: skip
    for key in same:
        assert (key in batch) == (key in full), key
        if key in full:
            pd.testing.assert_frame_equal(
                pd.DataFrame(batch[key]), pd.DataFrame(full[key]), check_dtype=False, obj=key
            )
        elif key in full["absent"]:  # the same reason (the batch has no per-rank path)
            assert batch["absent"][key].split(" (")[0] == full["absent"][key].split(" (")[0]
        else:  # a view with no line where it has no rows (graph launches)
            assert key not in batch["absent"], key
    by_time = ["device_self_sum(us)", "name"]
    if "operators" in full:
        ops = [pd.DataFrame(p["operators"]).sort_values(by_time).reset_index(drop=True)
               for p in (batch, full)]  # fmt: skip
        pd.testing.assert_frame_equal(*(o.drop(columns="cumulative_pctg") for o in ops))
    if cache:  # the batch's findings reopen the ranks from the cache: off, it says so
        assert "findings" not in batch and "cache off" in batch["absent"]["findings"]
    else:
        pd.testing.assert_frame_equal(*(pd.DataFrame(p["findings"]) for p in (batch, full)))


def test_batch_prints_long_tables_in_part_and_writes_them_whole(tmp_path, capsys):
    out_dir = tmp_path / "out"
    assert main(["batch", str(SAMPLES / "two_ranks"), "--serial", "-o", str(out_dir)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("Summarized ranks [0, 1] from ")
    idle = out.out[out.out.index("Idle time by cause, per stream") :].splitlines()
    assert len(idle) > 22 and idle[22] == "(10 more rows: -o or --format csv)"
    assert len(pd.read_csv(out_dir / "idle_time_breakdown.csv")) == 30
    assert (out_dir / "memory_leak_sites.csv").exists() and (out_dir / "report.html").exists()
    assert "report.html" in out.err and "summarizing ranks: 100%" in out.err  # its progress
    assert main(["batch", str(SAMPLES / "two_ranks"), "--format", "parquet"]) == 2


def test_warnings_are_one_line_each_and_skipped_files_are_said_once(tmp_path, capsys, monkeypatch):
    """A warning prints as the command's other messages (``hta-lite: warning: ...``, no source
    line); ``--on-error warn`` names each skipped file once, as ``skip`` does."""
    import shutil

    from hta_lite.load import memory_fit

    folder = tmp_path / "t"
    shutil.copytree(SAMPLES / "two_ranks", folder)
    (folder / "rank-5.json").write_text("{bad")
    monkeypatch.setattr(memory_fit, "available_bytes", lambda: 1000)
    assert main(["summarize", str(folder), "--on-error", "warn", "--serial", "--no-cache"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln and "rank/s" not in ln]
    assert [line.split(":")[0] for line in err] == ["hta-lite", "hta-lite"], err
    assert err[0].startswith("hta-lite: warning: 3 trace files hold ")
    assert "`hta-lite batch FOLDER`" in err[0]
    assert err[1].startswith(f"hta-lite: skipped {folder / 'rank-5.json'}: invalid JSON")
