"""Snapshots of every layout PyTorch has written (tests/data/snapshots/make_layouts.py): blocks
without addresses (2.0, 1.x), sites from a block's history, a bare list of segments, a dump
without an allocator trace, a dump taken at an out-of-memory. Reserved and allocated equal the
segments' own sums, and what ``torch.cuda._memory_viz.segsum`` reads."""

from __future__ import annotations

import json
import pickle

import pytest
from conftest import DATA, assert_missing

from hta_lite import MemorySnapshot, plots
from hta_lite.views.cli import main

SNAPSHOTS = DATA / "snapshots"
REFERENCE = json.loads((SNAPSHOTS / "layouts_reference.json").read_text())
LAYOUTS = sorted(REFERENCE)


def _raw(name):
    data = pickle.loads((SNAPSHOTS / f"{name}.pickle").read_bytes())
    return data["segments"] if isinstance(data, dict) else data


@pytest.mark.parametrize("name", LAYOUTS)
def test_totals_are_the_segments_own_sums_and_memory_viz(name):
    snap = MemorySnapshot(SNAPSHOTS / f"{name}.pickle")
    row = snap.summary().iloc[0]
    segments = _raw(name)
    assert row["reserved_bytes"] == sum(s["total_size"] for s in segments)
    blocks_allocated = sum(b["size"] for s in segments for b in s["blocks"]
                           if b["state"] == "active_allocated")  # fmt: skip
    assert row["active_blocks_bytes"] == blocks_allocated
    if name != "layout_mismatch":  # the one whose segment says otherwise
        assert row["active_blocks_bytes"] == sum(s["allocated_size"] for s in segments)
    if all("requested_size" in s for s in segments):
        assert row["allocated_bytes"] == sum(s["requested_size"] for s in segments)
    viz = REFERENCE[name]
    assert row["reserved_bytes"] == viz["total_reserved"]
    assert row["allocated_bytes"] == viz["total_allocated"]
    assert row["free_internal_bytes"] + row["free_external_bytes"] == viz["total_free"]
    assert row["allocated_bytes"] > 0  # PyTorch 2.0's layout once read as 0 bytes allocated


@pytest.mark.parametrize("name", ["layout_2_0_oom_dump", "layout_1_x_list"])
def test_addresses_are_implied_by_block_order(name):
    snap = MemorySnapshot(SNAPSHOTS / f"{name}.pickle")
    blocks, segments = snap.blocks(), snap.segments()
    for seg, part in blocks.groupby("segment"):
        starts = part["address"].to_numpy()
        assert starts[0] == segments.loc[seg, "address"]
        assert (starts[1:] == (starts + part["size"].to_numpy())[:-1]).all()
    assert "2.0" in snap._tables.layout or "1.x" in snap._tables.layout


def test_sites_come_from_the_history_of_a_2_0_block():
    snap = MemorySnapshot(SNAPSHOTS / "layout_2_0_oom_dump.pickle")
    assert set(snap.blocks()["site"]) == {"train.py:42 forward"}
    assert snap.peak().by_site["site"].tolist() == ["train.py:42 forward"]


def test_a_bare_list_of_segments_is_a_snapshot_without_trace():
    snap = MemorySnapshot(SNAPSHOTS / "layout_1_x_list.pickle")
    assert not snap.traced and "no allocator trace" in repr(snap)
    assert_missing(snap.timeline(), "state at the dump")
    peaks = snap.peaks()
    assert peaks["index"].tolist() == [-1]
    assert peaks["active_bytes"].iloc[0] == snap.summary()["active_blocks_bytes"].iloc[0]


def test_a_snapshot_without_trace_gives_summary_fragmentation_and_would_fit():
    snap = MemorySnapshot(SNAPSHOTS / "layout_2_1_segments_only.pickle")
    summary = snap.summary().iloc[0]
    assert summary["awaiting_free_bytes"] > 0  # active_pending_free, as PyTorch writes it
    free = snap.at_dump().iloc[0]
    fits = snap.would_fit(int(free["largest_free_block_bytes"]))
    assert fits["verdict"].iloc[0] == "fits in a cached block"
    assert snap.would_fit(10**12)["verdict"].iloc[0] == "real shortage"


def test_a_dump_at_an_out_of_memory_reads_as_a_real_shortage():
    """PyTorch 2.0 dumped at the OOM: the trace holds only the dump's own entry; 440 MB reserved,
    every block allocated (11.5 KB of rounding)."""
    snap = MemorySnapshot(SNAPSHOTS / "layout_2_0_oom_dump.pickle")
    assert not snap.traced
    reading = snap.at_dump().iloc[0]
    assert reading["reading"].startswith("real shortage")
    assert reading["cached_free_bytes"] == snap.summary()["free_external_bytes"].iloc[0] == 0
    assert_missing(snap.oom(), "At the dump: device 0: real shortage")
    big = snap.would_fit(200 * 10**6, device_free_bytes=10**6)
    assert big["verdict"].iloc[0] == "real shortage"
    fits = snap.would_fit(200 * 10**6, device_free_bytes=10**9)["verdict"].iloc[0]
    assert fits == "fits in a new segment"


def test_a_trace_without_times_is_drawn_by_entry_index():
    snap = MemorySnapshot(SNAPSHOTS / "layout_2_0_trace.pickle")
    line = snap.timeline()
    assert snap.traced and (line["time_us"] == -1).all()
    assert line["active_bytes"].iloc[-1] == snap.summary()["active_blocks_bytes"].iloc[0]
    fig = plots.plot_snapshot_timeline(line, snap.peaks())
    assert fig.layout.xaxis.title.text.startswith("trace entry")
    assert list(fig.data[0].x) == list(range(1, len(line) + 1))


def test_a_segment_whose_blocks_do_not_add_up_is_a_health_item():
    snap = MemorySnapshot(SNAPSHOTS / "layout_mismatch.pickle")
    health = dict(zip(snap.health()["item"], snap.health()["count"]))
    assert health == {
        "segment whose allocated_size is not its blocks' sum (the blocks are used)": 1
    }


def test_the_cli_takes_sizes_with_units_and_the_free_memory(capsys):
    path = str(SNAPSHOTS / "layout_2_0_oom_dump.pickle")
    assert main(["snapshot", path, "--fit", "200MB", "--free", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "Would 200,000,000 bytes fit, with 1,073,741,824 bytes free on the device" in out
    assert "At the dump:" in out and "real shortage" in out
    assert main(["snapshot", path, "--fit", "1.5GiB"]) == 0
    assert "no free device memory assumed" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["snapshot", path, "--fit", "lots"])
    assert exit_.value.code == 2
