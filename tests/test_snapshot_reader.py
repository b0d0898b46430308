"""The C reader of snapshot pickles (``hta_lite/load/_snapshot_pickle.c``) gives the same tables
as the restricted unpickler, and declines whatever is not plain data."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import pandas as pd
import pytest

from hta_lite.load.readers import snapshot as reader
from hta_lite.load.readers.snapshot_tables import tables

DATA = Path(__file__).parent / "data" / "snapshots"
SHARED = Path(__file__).parent.parent.parent / "shared" / "snapshots"
FILES = sorted(DATA.glob("*.pickle.gz")) + sorted(SHARED.glob("*.pickle"))
C = pytest.mark.skipif(reader._snapshot_pickle is None, reason="the C reader was not built")


@C
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_columns_equal_the_unpickler(path):
    data, columns = reader.read_snapshot_columns(path)
    assert columns is not None and columns["rows"] > 0
    fast, plain = tables(data, columns), tables(reader.read_snapshot(path))
    pd.testing.assert_frame_equal(fast.entries, plain.entries)
    pd.testing.assert_frame_equal(fast.blocks, plain.blocks)
    pd.testing.assert_frame_equal(fast.segments, plain.segments)
    assert [list(f) for f in fast.entry_frames] == [list(f) for f in plain.entry_frames]


@C
def test_declines_what_is_not_plain_data():
    plain = pickle.loads(gzip.decompress((DATA / "medium_128_inference.pickle.gz").read_bytes()))
    ok = pickle.dumps(plain, protocol=4)
    assert reader._snapshot_pickle.read(ok) is not None
    hostile = pickle.dumps({"segments": [], "x": print})  # a global
    assert reader._snapshot_pickle.read(hostile) is None
    assert reader._snapshot_pickle.read(ok[: len(ok) // 2]) is None  # cut short
    twice = dict(plain, device_traces=[plain["device_traces"][0] * 2])  # an entry met twice
    assert reader._snapshot_pickle.read(pickle.dumps(twice)) is None
    stray = dict(plain, extra={"action": "alloc", "addr": 1, "size": 2, "stream": 0, "time_us": 3})
    data = reader._snapshot_pickle.read(pickle.dumps(stray))
    assert data is None or not reader._rows_in_traces(*data)  # an entry outside the traces
    big = dict(plain, device_traces=[[dict(e, addr=2**70) for e in plain["device_traces"][0]]])
    assert reader._snapshot_pickle.read(pickle.dumps(big)) is None  # past int64: the slow path
