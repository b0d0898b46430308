"""The warning that a folder will not fit in memory as TraceAnalysis holds it
(hta_lite.load.memory_fit), said before the folder is parsed."""

from __future__ import annotations

import gzip
import random
import warnings

import pytest
from conftest import SAMPLES

from hta_lite import TraceAnalysis
from hta_lite.load import memory_fit


def test_the_text_is_the_gzip_trailers_and_the_plain_files_sizes(tmp_path):
    (tmp_path / "a.json").write_bytes(b"x" * 1000)
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(random.Random(0).randbytes(5000)))
    (tmp_path / "bomb.json.gz").write_bytes(gzip.compress(b"0" * 64000))  # counted 64x its size
    (tmp_path / "c.json.gz").write_bytes(b"")  # unreadable as gzip: its reader says so, not this
    paths = sorted(tmp_path.iterdir()) + [tmp_path / "gone.json"]
    bomb = (tmp_path / "bomb.json.gz").stat().st_size
    assert memory_fit.text_bytes(paths) == 6000 + 64 * bomb


def test_available_memory_is_the_least_of_the_kernel_and_the_control_group(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text("MemTotal: 9 kB\nMemAvailable:    2048 kB\n")
    assert memory_fit.available_bytes(tmp_path) == 2048 * 1024
    group = tmp_path / "sys/fs/cgroup"
    group.mkdir(parents=True)
    (group / "memory.max").write_text("max\n")  # no limit
    (group / "memory.current").write_text("100\n")
    assert memory_fit.available_bytes(tmp_path) == 2048 * 1024
    (group / "memory.max").write_text("1000000\n")
    assert memory_fit.available_bytes(tmp_path) == 1000000 - 100
    (group / "memory.current").write_text("2000000\n")  # over the limit already
    assert memory_fit.available_bytes(tmp_path) == 0
    assert memory_fit.available_bytes(tmp_path / "nowhere") is None  # not Linux: no check


def test_a_folder_larger_than_the_memory_available_is_warned_naming_the_batch(monkeypatch):
    folder = SAMPLES / "two_ranks"
    text = memory_fit.text_bytes(sorted(folder.iterdir()))
    assert text > 3_000_000
    monkeypatch.setattr(memory_fit, "available_bytes", lambda: text - 1)
    with pytest.warns(UserWarning, match=r"2 trace files hold 3\.\d MiB of trace text") as said:
        analysis = TraceAnalysis(folder, parallel=False, cache=False, progress=False)
    assert "hta_lite.summarize_folder(folder) or `hta-lite batch FOLDER`" in str(said[0].message)
    assert analysis.ranks == [0, 1]  # a warning: the load goes on
    monkeypatch.setattr(memory_fit, "available_bytes", lambda: text + 1)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        TraceAnalysis(folder, parallel=False, cache=False, progress=False)
    assert not [w for w in said if "of trace text" in str(w.message)]
    monkeypatch.setattr(memory_fit, "available_bytes", lambda: 0)
    one = SAMPLES / "two_ranks" / "sampled_rank-0.json.gz"
    assert memory_fit.too_large([one]) is None  # one file: no batch to point to
