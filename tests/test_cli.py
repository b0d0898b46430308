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
    try:
        main(["nonsense"])
    except SystemExit as exc:
        assert exc.code == 2


def test_version_says_which_decoder(capsys, monkeypatch):
    from hta_lite import __version__
    from hta_lite.load import decode

    for fast, expected in (
        (object(), "(C decoder)"),
        (None, "(pure-Python decoder: C decoder not built or HTA_LITE_NO_C set)"),
    ):
        monkeypatch.setattr(decode, "_fastjson", fast)
        with pytest.raises(SystemExit) as done:
            main(["--version"])
        assert done.value.code == 0
        assert capsys.readouterr().out.strip() == f"hta-lite {__version__} {expected}"


def test_module_entry_point():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "hta_lite", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "summarize" in out.stdout
