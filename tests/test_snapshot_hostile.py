"""Crafted snapshot pickles (tests/snapshot_corpus.py): every one is read, or refused with a
SnapshotError naming the file, within bounded memory; where the C reader takes one, it gives
what the restricted unpickler gives."""

from __future__ import annotations

import tracemalloc

import pandas as pd
import pytest
from snapshot_corpus import crafted

from hta_lite import MemorySnapshot
from hta_lite.errors import SnapshotError
from hta_lite.load.plain_pickle import PlainData
from hta_lite.load.readers import snapshot as reader
from hta_lite.load.readers.snapshot_tables import tables

CRAFTED = crafted()
READ = {  # the inputs that are plain data, and what is read of them
    "segment_type_nested_100000",
    "entry_of_a_discarded_list",
    "frames_list_appended_after_use",
    "action_set_twice",
    "empty_device_first",
    "devices_of_other_actions",
    "device_traces_not_a_list",
    "a_device_trace_not_a_list",
    "frame_ending_after_an_opcode",  # a list, not a snapshot: refused after reading
}
REFUSED_BY_SIZE = {"size_past_16_tib"}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_read_or_refused_naming_the_file(tmp_path, name):
    path = tmp_path / f"{name}.pickle"
    path.write_bytes(CRAFTED[name])
    tracemalloc.start()
    try:
        try:
            snap = MemorySnapshot(path)
        except SnapshotError as exc:
            assert str(exc).startswith(str(path)), exc
            assert name not in READ - {"frame_ending_after_an_opcode"}, exc
            snap = None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64e6, peak  # a 22-byte file once asked for gigabytes (a memo index of 2**28)
    if snap is not None:
        assert name in READ
        snap.summary()


@pytest.mark.parametrize(
    "name, item, entries",
    [("device_traces_not_a_list", "device_traces that is not a list (left out)", 0),
     ("a_device_trace_not_a_list", "device trace that is not a list (left out)", None)],
)  # fmt: skip
def test_traces_that_are_not_lists_are_left_out_and_said(tmp_path, name, item, entries):
    """``device_traces`` that is an integer (once a raw TypeError on the unpickler's path) or one
    device's trace that is: left out, in health; the segments are read."""
    path = tmp_path / f"{name}.pickle"
    path.write_bytes(CRAFTED[name])
    snap = MemorySnapshot(path)
    health = snap.health()
    assert health.loc[health["item"] == item, "count"].tolist() == [1]
    assert len(snap.segments()) > 0
    if entries is not None:
        assert len(snap._tables.entries) == entries


def test_a_segment_type_nested_100000_deep_is_read_as_absent(tmp_path):
    path = tmp_path / "nested.pickle"
    path.write_bytes(CRAFTED["segment_type_nested_100000"])
    snap = MemorySnapshot(path)
    assert snap.segments()["segment_type"].tolist() == [""]
    assert "segment_type that is not text (read as absent)" in set(snap.health()["item"])


def test_a_size_past_16_tib_is_refused(tmp_path):
    path = tmp_path / "huge.pickle"
    path.write_bytes(CRAFTED["size_past_16_tib"])
    with pytest.raises(SnapshotError, match=r"huge.pickle: a size of [\d,]+ bytes, past 16 TiB"):
        MemorySnapshot(path)


def test_a_frames_list_appended_after_use_changes_its_own_entry_only(tmp_path):
    path = tmp_path / "late.pickle"
    path.write_bytes(CRAFTED["frames_list_appended_after_use"])
    frames = [
        [f.get("filename") for f in stack] for stack in MemorySnapshot(path)._tables.entry_frames
    ]
    assert frames == [["model.py"], ["model.py", "late.py"]]


@pytest.mark.skipif(reader._snapshot_pickle is None, reason="the C reader was not built")
@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_the_c_reader_takes_only_what_the_unpickler_reads_the_same(name):
    data = CRAFTED[name]
    fast = reader._snapshot_pickle.read(data)
    taken = fast is not None and reader._is_snapshot(fast[0]) and reader._rows_in_traces(*fast)
    try:
        plain = PlainData(data, name).load()
    except SnapshotError:
        assert not taken
        return
    if not taken:
        return
    try:
        mine = tables(*fast)
    except SnapshotError:
        with pytest.raises(SnapshotError):
            tables(plain)
        return
    theirs = tables(plain)
    for table in ("segments", "blocks", "entries"):
        pd.testing.assert_frame_equal(getattr(mine, table), getattr(theirs, table))
    assert [list(f) for f in mine.entry_frames] == [list(f) for f in theirs.entry_frames]


def test_a_time_past_any_clock_is_refused(tmp_path):
    import pickle

    from snapshot_corpus import small_real

    snap = small_real()
    snap["device_traces"][0][0]["time_us"] = -(2**63)  # a timeline once drawn at -2**63
    path = tmp_path / "time.pickle"
    path.write_bytes(pickle.dumps(snap))
    with pytest.raises(SnapshotError, match=r"time.pickle: a trace entry at time_us -9,"):
        MemorySnapshot(path)
