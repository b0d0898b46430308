"""A folder of good ranks with one bad file, loaded in worker processes and on Dask.

Every error class crosses a process boundary intact; with ``on_error="raise"`` the bad file's own
error comes out, with ``"skip"`` / ``"warn"`` the good ranks load and the bad file is listed; on
folders of 2 and 16 files, the bad file in each position; through ``TraceAnalysis``, ``batch``
(process pool and Dask) and the CLI.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import warnings

import pytest
from synth import TraceBuilder

from hta_lite import LoadOptions, TraceAnalysis, errors
from hta_lite.tools.batch import summarize_folder
from hta_lite.views.cli import main


def truncated_gzip(path):
    data = gzip.compress(json.dumps(TraceBuilder(rank=None).kernel("k", 0, 1).document()).encode())
    (path.parent / f"{path.name}.gz").write_bytes(data[: len(data) // 2])


def _write(text: str):
    return lambda path: path.write_text(text)


# bad file writers (path without suffix) -> the error class the load must report for it
BAD = {
    "truncated_gzip": (truncated_gzip, errors.TraceReadError),
    "invalid_json": (_write('{"traceEvents": [{"ph": "X", "name": '), errors.TraceDecodeError),
    "not_a_trace": (_write('{"events": []}'), errors.TraceFormatError),
    "nested_too_deep": (
        _write('{"traceEvents": [{"args": {"x": ' + "[" * 5000 + "]" * 5000 + "}}]}"),
        errors.TraceDecodeError,
    ),
}
KINDS = sorted(BAD)


def make_folder(tmp_path, size: int, bad_position: int) -> tuple:
    """``size`` files, ranks 0..size-1 in file-name order; the one at ``bad_position`` is bad
    (a different kind of bad for each position)."""
    folder = tmp_path / f"f{size}_{bad_position}"
    folder.mkdir()
    kind = KINDS[bad_position % len(KINDS)]
    for i in range(size):
        path = folder / f"rank{i:02d}.json"
        if i == bad_position:
            BAD[kind][0](path)
        else:
            TraceBuilder(rank=i).kernel("k", 10, 5, launch_ts=8).write(path)
    bad = [p for p in folder.iterdir() if p.name.startswith(f"rank{bad_position:02d}")]
    return folder, (bad[0] if bad else None), BAD[kind][1]


POSITIONS = [(2, i) for i in range(2)] + [(16, i) for i in range(16)]


def every_error_class():
    pending = [errors.TraceError]
    while pending:
        cls = pending.pop()
        yield cls
        pending += cls.__subclasses__()


@pytest.mark.parametrize("cls", list(every_error_class()), ids=lambda c: c.__name__)
def test_every_error_class_survives_pickling(cls):
    err = cls("/traces/rank3.json", "what is wrong")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == str(err) == "/traces/rank3.json: what is wrong"
    assert (back.path, back.problem) == ("/traces/rank3.json", "what is wrong")


@pytest.mark.parametrize("size, position", POSITIONS)
def test_process_pool_raise_skip_warn(tmp_path, size, position):
    folder, bad, error = make_folder(tmp_path, size, position)
    load = dict(trace_dir=folder, parallel=True, max_workers=2, progress=False, cache=False)
    with pytest.raises(error) as raised:
        TraceAnalysis(**load)
    assert raised.value.path == str(bad)
    good = sorted(set(range(size)) - {position})
    skipped = TraceAnalysis(**load, on_error="skip")
    assert skipped.ranks == good and list(skipped.skipped_files) == [str(bad)]
    health = skipped.health()
    assert health[health["rank"] == -1]["file"].tolist() == [str(bad)]
    with pytest.warns(UserWarning, match=bad.name):
        warned = TraceAnalysis(**load, on_error="warn")
    assert warned.ranks == good


@pytest.mark.parametrize("size, position", [(2, 1), (16, 0), (16, 7), (16, 15)])
def test_batch_process_pool(tmp_path, size, position):
    folder, bad, error = make_folder(tmp_path, size, position)
    with pytest.raises(error, match=bad.name):
        summarize_folder(folder, executor="process", max_workers=2, cache=False)
    summary = summarize_folder(folder, executor="process", on_error="skip", cache=False)
    assert sorted(summary["temporal_breakdown"]["rank"]) == sorted(set(range(size)) - {position})
    assert list(summary.skipped_files) == [str(bad)]


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("dask.distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.mark.parametrize("size, position", POSITIONS)
def test_dask_raise_skip_warn(tmp_path, dask_client, size, position):
    folder, bad, error = make_folder(tmp_path, size, position)
    with pytest.raises(error) as raised:
        summarize_folder(folder, executor=dask_client, cache=False)
    assert raised.value.path == str(bad)
    good = sorted(set(range(size)) - {position})
    for mode in ("skip", "warn"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            summary = summarize_folder(folder, executor=dask_client, on_error=mode, cache=False)
        assert sorted(summary["temporal_breakdown"]["rank"]) == good
        assert list(summary.skipped_files) == [str(bad)]
        assert any(bad.name in str(w.message) for w in caught) == (mode == "warn")


def test_unexpected_exception_names_the_file(tmp_path, monkeypatch):
    """A defect of ours on one file (any exception) is reported for that file; the rest load."""
    folder, _, _ = make_folder(tmp_path, 4, 99)
    from hta_lite.load import loader

    real = loader.parse_parts

    def failing(path, *args):
        if path.name == "rank02.json":
            raise ZeroDivisionError("boom")
        return real(path, *args)

    monkeypatch.setattr(loader, "parse_parts", failing)  # forked workers inherit it
    fork = dict(max_workers=2, progress=False, cache=False, start_method="fork")
    with pytest.raises(
        errors.TraceParseError,
        match="rank02.json: unexpected ZeroDivisionError while parsing: boom",
    ):
        TraceAnalysis(trace_dir=folder, options=LoadOptions(**fork))
    skipped = TraceAnalysis(trace_dir=folder, options=LoadOptions(on_error="skip", **fork))
    assert skipped.ranks == [0, 1, 3]


def test_a_worker_that_dies_is_named(tmp_path, monkeypatch):
    folder, _, _ = make_folder(tmp_path, 4, 99)
    from hta_lite.load import loader

    real = loader.parse_parts

    def dying(path, *args):
        if path.name == "rank01.json":
            os._exit(9)  # as a crash or the out-of-memory killer would
        return real(path, *args)

    monkeypatch.setattr(loader, "parse_parts", dying)  # forked workers inherit it
    options = LoadOptions(on_error="skip", progress=False, cache=False, start_method="fork")
    loaded = TraceAnalysis(trace_dir=folder, options=options)
    assert loaded.ranks == [0, 2, 3]
    assert "died" in loaded.skipped_files[str(folder / "rank01.json")]


def test_no_file_loads_is_an_error(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    for name in ("a.json", "b.json"):
        (folder / name).write_text("{")
    for mode in ("raise", "skip"):
        with pytest.raises(errors.TraceError, match="a.json") as raised:
            TraceAnalysis(trace_dir=folder, on_error=mode, cache=False)
        if mode == "skip":
            assert isinstance(raised.value, errors.NoRanksLoadedError)
            assert "b.json" in str(raised.value)


def test_cli_skip_and_raise(tmp_path, capsys):
    folder, bad, _ = make_folder(tmp_path, 3, 1)
    assert main(["summarize", str(folder), "--on-error", "skip", "--no-cache"]) == 0
    out, err = capsys.readouterr()
    assert "Loaded ranks [0, 2]" in out and f"skipped {bad}" in err
    assert main(["summarize", str(folder), "--no-cache"]) == 2
    assert str(bad) in capsys.readouterr().err
