"""Hostile files and settings, each from a small constructed input: ranks and steps out of range,
a cache folder shared with the user's files, a killed store, a file rewritten under a reopened
rank, bad limits, names that are formulas or terminal commands, failed writes, deep nesting."""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES
from synth import TraceBuilder

from hta_lite import LoadOptions, TraceAnalysis
from hta_lite.errors import OutputError, SettingError, TraceFormatError, TraceReadError
from hta_lite.load import cache as trace_cache
from hta_lite.load import gzip_text
from hta_lite.load.links import ancestors_where, nearest_ancestor
from hta_lite.safe_output import csv_safe, terminal_safe, write_atomically
from hta_lite.views.cli import main

GLOO_0 = SAMPLES / "gloo_4ranks" / "rank-0.json.gz"


def _gloo_doc() -> dict:
    return json.loads(gzip.decompress(GLOO_0.read_bytes()))


def _write(folder, doc, name="t.json"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc))
    return folder


def _load(folder, **kw):
    return TraceAnalysis(trace_dir=folder, parallel=False, cache=False, **kw)


# ---- ranks and steps ------------------------------------------------------------------------


@pytest.mark.parametrize("rank", [2**63 - 1, 10**20, 2**40, 2**31])
def test_a_rank_past_the_range_is_refused_naming_the_file(tmp_path, rank):
    doc = _gloo_doc()
    doc["distributedInfo"]["rank"] = rank
    folder = _write(tmp_path / "t", doc)
    with pytest.raises(TraceFormatError, match=r"t\.json: distributedInfo\.rank is .*from 0 to"):
        _load(folder)
    assert main(["findings", str(folder), "--no-cache"]) == 2  # an error, not an abort


def test_a_rank_in_the_file_name_past_the_range_is_refused(tmp_path):
    doc = _gloo_doc()
    del doc["distributedInfo"]
    folder = _write(tmp_path / "t", doc, "rank9223372036854775807.json")
    with pytest.raises(TraceFormatError, match="rank in the file name has 19 digits"):
        _load(folder)
    _write(tmp_path / "u", doc, "rank" + "0" * 30 + "7.json")  # leading zeros: rank 7
    assert _load(tmp_path / "u").ranks == [7]


def test_a_non_ascii_digit_rank_is_no_rank(tmp_path):
    doc = _gloo_doc()
    doc["distributedInfo"]["rank"] = "²"  # str.isdigit() says yes; int() says no
    assert _load(_write(tmp_path / "t", doc)).ranks == [0]


def test_a_step_number_past_the_range_is_refused_naming_the_file(tmp_path):
    text = json.dumps(_gloo_doc()).replace("ProfilerStep#", "ProfilerStep#99999999999999999", 1)
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "t.json").write_text(text)
    with pytest.raises(TraceFormatError, match=r"t\.json: step 'ProfilerStep#9+\d*'"):
        _load(folder)


def test_the_largest_rank_runs_every_cross_rank_view(tmp_path):
    """Rank 2**31 - 1 with a world size and group members past int64: no array is sized by
    them (the findings summed per rank with a bincount over the rank: 16 GB, or a write out
    of bounds at 2**63 - 1)."""
    doc = _gloo_doc()
    info = doc["distributedInfo"]
    info.update(rank=2**31 - 1, world_size=10**20)
    info["pg_config"][0]["ranks"] = [0, 10**20, 2**31 - 1]
    analysis = _load(_write(tmp_path / "t", doc))
    assert analysis.ranks == [2**31 - 1]
    analysis.get_findings()
    analysis.get_key_findings()
    analysis.get_collectives()


# ---- the cache owns only what it made -------------------------------------------------------


def _user_files(root):
    (root / "thesis").mkdir(parents=True)
    (root / "thesis" / "chapter1.tex").write_text("precious")
    (root / ("a" * 40)).mkdir()  # named like an entry, but not one
    (root / ("a" * 40) / "meta.json").write_text('{"key": "' + "a" * 40 + '"}')
    (root / ".tmp-notes").mkdir()
    (root / ".tmp-notes" / "n.txt").write_text("mine")
    (root / "loose.txt").write_text("mine")


def _assert_user_files(root):
    assert (root / "thesis" / "chapter1.tex").read_text() == "precious"
    assert (root / ("a" * 40) / "meta.json").exists()
    assert (root / ".tmp-notes" / "n.txt").exists() and (root / "loose.txt").exists()


def test_evict_and_clear_never_touch_what_the_cache_did_not_create(tmp_path, monkeypatch):
    root = tmp_path / "some_folder"
    _user_files(root)
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "rank-0.json.gz").write_bytes(GLOO_0.read_bytes())
    monkeypatch.setenv("HTA_LITE_CACHE_MAX_GB", "1e-12")  # every entry over the cap
    TraceAnalysis(trace_dir=traces, cache=root, parallel=False)
    assert len(trace_cache.entries(root)) == 1  # its own entry, kept for this load
    assert trace_cache.evict(root, limit=0) > 0
    assert trace_cache.entries(root) == []
    TraceAnalysis(trace_dir=traces, cache=root, parallel=False)
    assert main(["cache", "clear", "--dir", str(root)]) == 0
    assert trace_cache.entries(root) == []
    _assert_user_files(root)
    assert (traces / "rank-0.json.gz").exists()
    # the traces themselves as the cache folder: nothing of theirs goes
    TraceAnalysis(trace_dir=traces, cache=traces, parallel=False)
    trace_cache.clear(traces)
    assert [p.name for p in traces.iterdir()] == ["rank-0.json.gz"]


def test_a_killed_store_is_counted_and_cleaned(tmp_path, capsys):
    root = tmp_path / "cache"
    root.mkdir()
    leftover = root / ".hta_lite-tmp-killed"
    leftover.mkdir()
    (leftover / trace_cache.MARKER).write_bytes(b"")
    (leftover / "gpu.arrow").write_bytes(b"x" * 1000)
    assert trace_cache.usage(root)["leftovers"] == 1
    main(["cache", "info", "--dir", str(root)])
    assert "1 unfinished store(s)" in capsys.readouterr().out
    trace_cache.evict(root)  # a store in progress may be young: kept
    assert leftover.exists()
    old = time.time() - 2 * trace_cache.STALE_TMP_SECONDS
    os.utime(leftover, (old, old))
    trace_cache.evict(root)
    assert not leftover.exists()


def test_a_file_rewritten_under_a_reopened_rank_is_never_mixed(tmp_path):
    """A rank reopened from the cache reads its tables when first used; if its entry is evicted
    meanwhile and the file rewritten, the missing table is not parsed from the new file."""
    traces, root = tmp_path / "traces", tmp_path / "cache"
    b = TraceBuilder()
    b.step(1, 0, 100).step(2, 100, 100)
    b.kernel("k", 10, 5, launch_ts=5).kernel("k", 110, 5, launch_ts=105)
    b.write(traces / "rank-0.json")
    TraceAnalysis(trace_dir=traces, cache=root, parallel=False)
    reopened = TraceAnalysis(trace_dir=traces, cache=root, parallel=False)
    assert len(reopened.trace(0).cpu)  # one table read, the others not yet
    trace_cache.evict(root, limit=0)
    b.kernel("k2", 150, 5, launch_ts=140).write(traces / "rank-0.json")
    with pytest.raises(TraceReadError, match="changed after it was loaded"):
        _ = reopened.trace(0).gpu


def test_a_read_only_cache_is_read(tmp_path, monkeypatch):
    traces, root = tmp_path / "traces", tmp_path / "cache"
    traces.mkdir()
    (traces / "rank-0.json.gz").write_bytes(GLOO_0.read_bytes())
    TraceAnalysis(trace_dir=traces, cache=root, parallel=False)

    def read_only(*args, **kwargs):
        raise PermissionError(30, "Read-only file system")

    monkeypatch.setattr(trace_cache.os, "utime", read_only)
    again = TraceAnalysis(trace_dir=traces, cache=root, parallel=False)
    assert "cache_rebuilt" not in set(again.health()["code"])
    assert again.trace(0).__dict__.get("_build") is not None  # served from the cache


# ---- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "-1", "0", "abc"])
@pytest.mark.parametrize(
    "variable", ["HTA_LITE_MAX_INFLATE_RATIO", "HTA_LITE_MAX_TEXT_GB", "HTA_LITE_CACHE_MAX_GB"]
)
def test_a_bad_limit_is_a_setting_error_not_a_corrupt_file(tmp_path, monkeypatch, variable, value):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "rank-0.json.gz").write_bytes(GLOO_0.read_bytes())
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingError, match=variable):
        TraceAnalysis(trace_dir=folder, cache=tmp_path / "cache", parallel=False)
    assert main(["summarize", str(folder)]) == 2  # the cache folder: $HTA_LITE_CACHE_DIR


def test_inf_means_no_limit(tmp_path, monkeypatch):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "rank-0.json.gz").write_bytes(GLOO_0.read_bytes())
    for variable in ("HTA_LITE_MAX_INFLATE_RATIO", "HTA_LITE_MAX_TEXT_GB", "HTA_LITE_CACHE_MAX_GB"):
        monkeypatch.setenv(variable, "inf")
    done = subprocess.run([sys.executable, "-c", "import hta_lite"], capture_output=True)
    assert done.returncode == 0, done.stderr
    assert TraceAnalysis(trace_dir=folder, cache=tmp_path / "c", parallel=False).ranks == [0]
    assert gzip_text.inflate_limit(10) == 2**63 - 1


def test_load_limits_are_arguments_of_trace_analysis(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "rank-0.json.gz").write_bytes(GLOO_0.read_bytes())
    with pytest.raises(TraceReadError, match="inflates (to )?more than"):
        TraceAnalysis(trace_dir=folder, cache=False, parallel=False, max_inflate_ratio=1.5)
    assert _load(folder, max_text_gb=1, max_inflate_ratio=1000).ranks == [0]
    with pytest.raises(SettingError, match="max_text_gb"):
        LoadOptions(max_text_gb=float("nan"))


@pytest.mark.parametrize("threshold", ["nan", "abc", "-5%", "inf"])
def test_a_threshold_that_is_not_a_number_is_a_usage_error(threshold, capsys):
    control = str(SAMPLES / "gloo_4ranks")
    with pytest.raises(SystemExit) as exit_:
        main(["diff", control, control, "--fail-on-regression", "--threshold", threshold])
    assert exit_.value.code == 2
    assert "--threshold" in capsys.readouterr().err


# ---- the gzip bomb's running ratio ----------------------------------------------------------


def test_a_dense_gzip_bomb_is_refused_after_a_few_mb_of_text():
    """3,000 gzip members of 1 MB of spaces (~1,000:1): under the whole-file limit (200 x 3 MB
    = 600 MB of text) the text would grow to 600 MB before it is refused; the running ratio
    refuses it within the first MB of compressed data."""
    member = gzip.compress(b" " * (1 << 20), 9)
    data = member * 3000
    tracemalloc.start()
    try:
        with pytest.raises(TraceReadError, match="inflates (to )?more than"):
            gzip_text.gunzip(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100e6, peak


# ---- what is written and printed ------------------------------------------------------------

FORMULA = '=HYPERLINK("http://evil.example","click")'
DDE = "@SUM(1+1)*cmd|' /C calc'!A0"
ESCAPES = "\x1b]0;owned\x07\x1b[2Jkernel"
LINK = '<a href="http://evil.example">k</a>'


def _named_trace(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000).step(2, 1000, 1000)
    for step in (0, 1000):
        b.cpu_op(DDE, step + 10, 300)
        b.kernel(FORMULA, step + 400, 200, launch_ts=step + 20)
        b.kernel(ESCAPES, step + 700, 100, launch_ts=step + 30)
        b.kernel(LINK, step + 820, 50, launch_ts=step + 40)
    return b.write(tmp_path / "traces" / "rank-0.json").parent


def test_csv_cells_that_are_formulas_are_neutralised(tmp_path):
    traces = _named_trace(tmp_path)
    out = tmp_path / "out"
    assert main(["summarize", str(traces), "-o", str(out), "--no-cache"]) == 0
    cells = {
        p.name: [cell for row in csv.reader(p.open()) for cell in row] for p in out.glob("*.csv")
    }
    assert "'" + FORMULA in cells["top_kernels.csv"]  # the name is kept, as text
    assert "'" + DDE in cells["operators.csv"]
    for name, values in cells.items():
        assert not [v for v in values if v.startswith(("=", "@", "+"))], name
    table = csv_safe(pd.DataFrame({"n": [FORMULA, "ok"], "v": [-1.5, 2.0]}))
    assert table["n"].tolist() == ["'" + FORMULA, "ok"] and table["v"].tolist() == [-1.5, 2.0]


def test_names_printed_to_a_terminal_have_their_control_characters_escaped(tmp_path):
    traces = _named_trace(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "hta_lite", "summarize", str(traces), "--no-cache"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "\\x1b]0;owned\\x07" in done.stdout
    assert terminal_safe("a\u202eb\nc\td") == "a\\u202eb\nc\td"


def test_names_are_never_markup_in_a_figure(tmp_path):
    """Plotly reads HTML in labels: a kernel named <a href=...> must show as text in every
    chart of the report, and a snapshot frame so named in the peak-sites chart."""
    from hta_lite import plots
    from hta_lite.views.report import build_report

    page = build_report(_load(_named_trace(tmp_path)))
    assert "evil.example" in page  # shown...
    assert '<a href=\\"http://evil' not in page and '<a href="http://evil' not in page  # ...as text
    sites = pd.DataFrame({"site": [LINK, "model.py:3 f"], "bytes": [10, 5], "count": [1, 1]})
    fig = plots.plot_peak_sites(sites)
    assert LINK not in fig.to_json() and "&lt;a href" in fig.to_json()


def test_a_reader_that_stops_is_not_a_failure(tmp_path):
    done = subprocess.run(
        f"{sys.executable} -m hta_lite summarize {SAMPLES / 'gloo_4ranks'} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        executable="/bin/bash",
    )
    assert "BrokenPipe" not in done.stderr and "failed" not in done.stderr, done.stderr


def test_a_failed_write_leaves_the_previous_file(tmp_path, monkeypatch):
    report = tmp_path / "report.html"
    report.write_text("the good report")

    class FullDisk:
        def __init__(self, fd, mode):
            os.close(fd)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, data):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fdopen", FullDisk)
    with pytest.raises(OutputError, match="report.html: cannot write: No space left"):
        write_atomically(report, "a new report, cut short")
    assert report.read_text() == "the good report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary file left


def test_a_name_too_long_for_the_disk_is_a_clear_error(tmp_path):
    with pytest.raises(OutputError, match="cannot write"):
        write_atomically(tmp_path / ("x" * 300 + ".json"), b"{}")


# ---- nesting in O(N log N) ------------------------------------------------------------------


def test_nearest_ancestor_and_depth_equal_a_walk_up_the_tree():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 50))
        parent = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)])
        target = rng.random(n) < rng.random()
        rows = rng.integers(0, n, size=10)
        walked, depth = [], []
        for r in range(n):
            up, found, count = parent[r], -1, 0
            while up >= 0:
                if target[up]:
                    found = up if found < 0 else found
                    count += 1
                up = parent[up]
            walked.append(found)
            depth.append(count)
        assert nearest_ancestor(parent, target, rows).tolist() == [walked[r] for r in rows]
        assert ancestors_where(parent, target).tolist() == depth


def test_a_hundred_thousand_nested_operators(tmp_path):
    """10**5 operators each inside the previous (one pass per level took 11.8 s for 40,000)."""
    n = 100_000
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 1, "ts": 1 + i,
         "dur": 2 * n + 10 - 2 * i}
        for i in range(n)
    ]  # fmt: skip
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                   "tid": 1, "ts": n + 2, "dur": 2, "args": {"correlation": 5}})  # fmt: skip
    events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": n + 10,
                   "dur": 5, "args": {"correlation": 5, "stream": 7, "device": 0}})  # fmt: skip
    folder = tmp_path / "nested"
    folder.mkdir()
    (folder / "rank-0.json").write_text(json.dumps({"traceEvents": events}))
    analysis = _load(folder)
    started = time.perf_counter()
    ops = analysis.get_operator_instances()
    took = time.perf_counter() - started
    assert len(ops) == n and ops["op_depth"].max() == n - 1
    assert took < 20, took  # ~0.4 s here; quadratic, it took minutes


def test_counters_of_a_rank_of_several_windows_go_to_each_window(tmp_path):
    folder = tmp_path / "windows"
    for window, start in ((0, 0), (1, 10_000)):
        b = TraceBuilder()
        b.step(2 * window + 1, start, 1000).step(2 * window + 2, start + 1000, 1000)
        b.kernel("k", start + 100, 50, launch_ts=start + 10)
        b.kernel("k", start + 1100, 50, launch_ts=start + 1010)
        b.write(folder / f"rank0.{window}.pt.trace.json")
    written = _load(folder).generate_trace_with_counters(output_dir=tmp_path / "out")
    assert [p.name for p in written[0]] == [
        "rank0.0.pt.trace_with_counters.json",
        "rank0.1.pt.trace_with_counters.json",
    ]
    for path, start in zip(written[0], (0, 10_000)):
        counters = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "C"]
        assert counters and all(start <= e["ts"] < start + 5000 for e in counters)
    with pytest.raises(OutputError, match="cannot write"):  # a 245-byte name and the suffix
        name = "r" * 240 + ".json"
        b.write(tmp_path / "long" / name)
        _load(tmp_path / "long").generate_trace_with_counters(output_dir=tmp_path / "out2")


def test_times_and_byte_counts_that_would_wrap_int64_are_dropped_and_counted(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000).step(2, 1000, 1000)
    b.kernel("k", 100, 50, launch_ts=10)
    b.kernel("late", 9_200_000_000_000_000, 10**15, launch_ts=20)  # ts + dur past int64
    b.cpu_op("aten::empty", 30, 10)
    for ts, size in ((35, 2**62), (36, 512), (37, -512)):
        args = {"Addr": 1, "Bytes": size, "Total Allocated": 512, "Total Reserved": 2048,
                "Device Type": 1, "Device Id": 0}  # fmt: skip
        b.events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                         "pid": 10, "tid": 1, "ts": ts, "args": args})  # fmt: skip
    analysis = _load(b.write(tmp_path / "t" / "rank-0.json").parent)
    gpu = analysis.gpu_events(0)
    assert (gpu["ts"] + gpu["dur"] >= 0).all() and "late" not in set(gpu["name"].astype(str))
    health = analysis.health().set_index("code")
    assert health.loc["time_past_limit", "count"] == 1
    assert health.loc["arg_not_numeric", "count"] == 1  # the Bytes of 2**62
    by_op = analysis.get_memory_by_operator()
    assert (by_op.select_dtypes("number").abs() < 2**62).all().all()


@pytest.mark.parametrize("pieces", [False, True])
def test_the_last_of_two_events_arrays_is_read_as_json_does(tmp_path, monkeypatch, pieces):
    from hta_lite.load import stream

    if pieces:
        monkeypatch.setattr(stream, "MIN_FILE_BYTES", 1)
    event = '{"ph":"X","cat":"cpu_op","name":"%s","pid":1,"tid":1,"ts":1,"dur":1}'
    doc = f'{{"traceEvents":[{event % "first"}],"traceEvents":[{event % "second"}]}}'
    assert json.loads(doc)["traceEvents"][0]["name"] == "second"
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "rank-0.json").write_text(doc)
    analysis = _load(folder)
    assert analysis.cpu_events(0)["name"].tolist() == ["second"]
    assert "repeated_events_key" in set(analysis.health()["code"])


def test_an_unpaired_surrogate_escape_costs_one_character_not_the_file(tmp_path):
    event = '{"ph":"X","cat":"cpu_op","name":"%s","pid":1,"tid":1,"ts":%d,"dur":1}'
    names = ["bad\\ud800x", "pair\\ud83d\\ude00", "escaped\\\\ud800"]
    doc = '{"traceEvents":[' + ",".join(event % (n, k) for k, n in enumerate(names)) + "]}"
    expected = [e["name"].replace("\ud800", "\ufffd") for e in json.loads(doc)["traceEvents"]]
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "rank-0.json").write_text(doc)
    analysis = _load(folder)
    assert analysis.cpu_events(0)["name"].tolist() == expected
    assert analysis.health().set_index("code").loc["invalid_utf8", "count"] == 1


def test_a_zero_length_step_is_no_timer_and_a_gpu_only_trace_has_no_critical_path(tmp_path):
    from hta_lite.errors import MissingDataError

    b = TraceBuilder()
    b.step(1, 0, 0).step(2, 100, 100).step(3, 200, 100)
    b.kernel("k", 110, 5, launch_ts=105)
    timers = _load(b.write(tmp_path / "zero" / "rank-0.json").parent).get_annotation_timers()
    assert timers["step"].tolist() == [2]  # step 1: no 0.0 ms row; step 3: the dropped last
    gpu_only = TraceBuilder()
    gpu_only.kernel("k", 10, 5).kernel("k", 30, 5)
    analysis = _load(gpu_only.write(tmp_path / "gpu" / "rank-0.json").parent)
    with pytest.raises(MissingDataError, match="no CPU events: the critical path needs the host"):
        analysis.critical_path_analysis(0, "ProfilerStep", 0)
