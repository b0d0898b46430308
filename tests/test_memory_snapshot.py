"""CUDA memory snapshots (issue #38): the summary, the peak walked back from the end and who holds
it, equal to the reference numbers on every real snapshot; out-of-memory verdicts on cases
constructed from a real one; hostile pickles refused with nothing run."""

from __future__ import annotations

import gzip
import json
import pickle
import zipfile

import pytest
from conftest import DATA, SHARED, assert_missing, needs_shared

from hta_lite import MemorySnapshot
from hta_lite.analyses.memory_snapshot.timeline import BEFORE_TRACE
from hta_lite.errors import SelectionError, SnapshotError

VENDORED = DATA / "snapshots"
REFERENCE = json.loads((VENDORED / "reference.json").read_text())
TRAINING = VENDORED / "medium_128_training.pickle.gz"
SHARED_SNAPSHOTS = SHARED / "snapshots"


def cases():
    out = {name: (VENDORED / f"{name}.pickle.gz", ref) for name, ref in REFERENCE.items()}
    if (SHARED_SNAPSHOTS / "reference.json").exists():
        shared = json.loads((SHARED_SNAPSHOTS / "reference.json").read_text())
        out |= {f"shared:{n}": (SHARED_SNAPSHOTS / f"{n}.pickle", r) for n, r in shared.items()}
    return out


CASES = cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_summary_equals_the_reference(name):
    path, ref = CASES[name]
    row = MemorySnapshot(path).summary().iloc[0]
    ref = ref["0"]
    got = {
        "segments": row["segments"], "reserved": row["reserved_bytes"],
        "allocated": row["allocated_bytes"], "active_blocks_bytes": row["active_blocks_bytes"],
        "free_internal": row["free_internal_bytes"], "free_external": row["free_external_bytes"],
        "largest_free_block": row["largest_free_block_bytes"],
    }  # fmt: skip
    assert got == {k: ref[k] for k in got}
    assert row["reserved_bytes"] == (
        row["allocated_bytes"] + row["free_internal_bytes"] + row["free_external_bytes"]
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_peak_and_its_sites_equal_the_reference(name):
    path, ref = CASES[name]
    ref = ref["0"]
    snap = MemorySnapshot(path)
    line = snap.timeline()
    assert len(line) == ref["entries"]
    assert line["action"].value_counts().to_dict() == ref["actions"]
    peaks = snap.peaks().iloc[0]
    assert peaks["final_active_bytes"] == ref["final_active_bytes"]
    peak = snap.peak()
    assert peak.active_bytes == ref["peak_active_bytes"] == line["active_bytes"].max()
    traced = peak.by_site[peak.by_site["site"] != BEFORE_TRACE]
    assert int(peak.by_site["bytes"].sum()) == peak.active_bytes  # every live byte placed
    # the reference's top five (file:line), ties at the cut taken from the sites of that size
    ours = {(_file_line(s), b) for s, b in zip(traced["site"], traced["bytes"])}
    top = [tuple(pair) for pair in ref["top_sites_at_peak_traced"]]
    assert set(top) <= ours
    cut = top[-1][1]
    assert sorted(b for _, b in ours if b > cut) == sorted(b for _, b in top if b > cut)


def _file_line(site: str) -> str:
    return site if site.startswith("<") else site.rsplit(" ", 1)[0]


# ---- out of memory, constructed from the real training step -----------------------------------
def with_oom(tmp_path, size, device_free, stream=0, change=None):
    data = pickle.loads(gzip.decompress(TRAINING.read_bytes()))
    if change:
        change(data)
    last = data["device_traces"][0][-1]["time_us"]
    data["device_traces"][0].append(
        {"action": "oom", "addr": 0, "size": size, "stream": stream, "time_us": last + 1,
         "device_free": device_free, "frames": []}
    )  # fmt: skip
    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(data))
    return MemorySnapshot(path)


MIB = 2**20


def test_fragmentation_shortage_and_cache_elsewhere(tmp_path):
    """At the end of the training step 398.9 MiB are cached free, the largest block 40 MiB."""
    frag = with_oom(tmp_path, 100 * MIB, 2 * MIB).oom().iloc[0]
    assert frag["verdict"] == "fragmentation" and "expandable_segments:True" in frag["advice"]
    assert frag["cached_free_bytes"] == 418_283_008
    assert frag["largest_free_block_bytes"] == 41_943_040 and frag["device_free_bytes"] == 2 * MIB
    short = with_oom(tmp_path, 8 * 2**30, 1 * 2**30).oom().iloc[0]
    assert short["verdict"] == "real shortage"
    assert f"{8 * 2**30 - 2**30 - 418_283_008:,} bytes more" in short["advice"]

    def partly_on_stream_7(data):  # the free memory of most segments cached for stream 7
        for seg in data["segments"]:
            if any(b["state"] == "inactive" and b["size"] > 4 * MIB for b in seg["blocks"]):
                seg["stream"] = 7

    elsewhere = with_oom(tmp_path, 100 * MIB, 2 * MIB, change=partly_on_stream_7).oom().iloc[0]
    assert elsewhere["verdict"] == "cache held elsewhere"
    assert elsewhere["cached_free_same_bytes"] < 98 * MIB < elsewhere["cached_free_bytes"]
    fits = with_oom(tmp_path, 16 * MIB, 0).oom().iloc[0]
    assert fits["verdict"] == "fits in a cached block"


def test_would_fit_and_no_oom_is_said():
    snap = MemorySnapshot(TRAINING)
    assert_missing(snap.oom(), "would_fit")
    assert snap.would_fit(40 * MIB).iloc[0]["verdict"] == "fits in a cached block"
    assert snap.would_fit(41 * MIB).iloc[0]["verdict"] == "fragmentation"
    assert snap.would_fit(500 * MIB).iloc[0]["verdict"] == "real shortage"
    # with 1 GiB free on the device, a new segment holds it
    assert snap.would_fit(500 * MIB, device_free_bytes=2**30).iloc[0]["verdict"] == (
        "fits in a new segment"
    )
    with pytest.raises(SelectionError, match="device 3 has no segment"):
        snap.would_fit(MIB, device=3)  # not a real shortage on a device the snapshot lacks


# ---- formats and hostile files ----------------------------------------------------------------
def test_legacy_format_reads_the_same(tmp_path):
    data = pickle.loads(gzip.decompress(TRAINING.read_bytes()))
    for seg in data["segments"]:
        for block in seg["blocks"]:  # before PyTorch 2.1: the allocation's history
            frames, real = block.pop("frames"), block.pop("requested_size")
            block["history"] = [{"addr": block["address"], "real_size": real, "frames": frames}]
    del data["device_traces"]
    path = tmp_path / "legacy.pickle"
    path.write_bytes(pickle.dumps(data, protocol=2))
    legacy = MemorySnapshot(path)
    assert legacy.summary().equals(MemorySnapshot(TRAINING).summary())
    assert legacy.blocks()["site"].tolist() == MemorySnapshot(TRAINING).blocks()["site"].tolist()
    assert_missing(legacy.timeline(), "_record_memory_history")


class Runs:  # a pickle that would call open(path, "w") when loaded
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_a_pickle_with_a_global_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "payload": Runs(marker)}))
    with pytest.raises(SnapshotError, match=r"names the Python global io\.open") as err:
        MemorySnapshot(path)
    assert not marker.exists() and str(path) in str(err.value)
    import collections

    path.write_bytes(pickle.dumps({"segments": [], "x": collections.OrderedDict()}))
    with pytest.raises(SnapshotError, match=r"collections\.OrderedDict"):
        MemorySnapshot(path)


@pytest.mark.parametrize(
    "content, problem",
    [
        (lambda raw: raw[: len(raw) // 2], "cut short"),
        (lambda raw: b'{"segments": []}', "JSON"),
        (lambda raw: pickle.dumps([1, 2]), "not a memory snapshot"),
        (lambda raw: gzip.compress(raw)[:-100], "gzip"),
    ],
    ids=["truncated", "json", "not-a-dict", "truncated-gzip"],
)
def test_foreign_and_broken_files_are_clear_errors(tmp_path, content, problem):
    raw = gzip.decompress(TRAINING.read_bytes())
    path = tmp_path / "bad.pickle"
    path.write_bytes(content(raw))
    with pytest.raises(SnapshotError, match=problem):
        MemorySnapshot(path)


def test_a_torch_save_zip_is_a_clear_error(tmp_path):
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"x")
    with pytest.raises(SnapshotError, match="torch.save"):
        MemorySnapshot(path)


def test_integers_past_64_bits_are_refused(tmp_path):
    """No snapshot value is past int64; one (2**70 bytes) is a clear error, not a column of
    Python integers whose sums break later views."""
    data = pickle.loads(gzip.decompress(TRAINING.read_bytes()))
    huge = 2**70
    data["segments"].append(
        {"device": 0, "address": 2**80, "total_size": huge, "allocated_size": 0,
         "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
         "blocks": [{"address": 2**80, "size": huge, "requested_size": 0, "state": "inactive",
                     "frames": []}]}
    )  # fmt: skip
    path = tmp_path / "huge.pickle"
    path.write_bytes(pickle.dumps(data))
    with pytest.raises(SnapshotError, match=r"huge.pickle: an integer of \d+ bytes, past int64"):
        MemorySnapshot(path)


def test_compare_by_site_state_and_segment(tmp_path):
    a = MemorySnapshot(TRAINING)
    assert (a.compare(a)["growth_bytes"] == 0).all()
    data = pickle.loads(gzip.decompress(TRAINING.read_bytes()))
    gone = data["segments"].pop(0)
    path = tmp_path / "fewer.pickle"
    path.write_bytes(pickle.dumps(data))
    b = MemorySnapshot(path)
    only = a.compare(b, by="segment")
    assert only[["only_in", "address"]].values.tolist() == [["a", gone["address"]]]
    states = a.compare(b, by="state").set_index("state")
    assert states.loc["reserved", "growth_bytes"] == -gone["total_size"]
    inference = MemorySnapshot(VENDORED / "medium_128_inference.pickle.gz")
    by_site = a.compare(inference).set_index("site")
    assert by_site.loc["optimizer.py:76 step", "growth_bytes"] == -1_694_699_520  # AdamW state


def test_blocks_with_their_stacks():
    blocks = MemorySnapshot(TRAINING).blocks(stack=True)
    first = blocks[blocks["site"] == "optimizer.py:76 step"].iloc[0]
    assert "torch::unwind::unwind()" in first["stack"] and "optimizer.py:76 step" in first["stack"]
    assert first["stack"].count("\n") > 10


def test_views_cli_and_report(tmp_path, capsys):
    from hta_lite import TraceAnalysis, plots
    from hta_lite.views.cli import main
    from hta_lite.views.report import build_report

    snap = MemorySnapshot(TRAINING)
    assert len(plots.plot_snapshot_timeline(snap.timeline(), snap.peaks()).data) == 2
    segment_map = plots.plot_segment_map(snap.summary(by="segment"))
    assert sum(sum(bar.y) for bar in segment_map.data) * MIB == pytest.approx(
        sum(sorted(snap.segments()["total_size"], reverse=True)[:60])
    )
    assert len(plots.plot_peak_sites(snap.peak().by_site).data[0].y) == 7
    assert main(["snapshot", str(TRAINING), "--fit", str(100 * MIB)]) == 0
    out = capsys.readouterr().out
    assert "Held at the peak by" in out and "fragmentation" in out
    assert main(["snapshot", str(tmp_path / "none.pickle")]) == 2
    from conftest import SAMPLES

    html = build_report(TraceAnalysis(SAMPLES / "memory_leak", parallel=False), snapshot=snap)
    assert "Memory snapshot" in html and "optimizer.py:76 step" in html


@needs_shared
def test_every_shared_snapshot_reads_without_problems():
    for path in sorted(SHARED_SNAPSHOTS.glob("*.pickle")):
        snap = MemorySnapshot(path)
        assert snap.health().empty, path


def test_unreadable_entries_are_left_out_and_counted(tmp_path):
    data = pickle.loads(gzip.decompress(TRAINING.read_bytes()))
    data["device_traces"][0][5]["size"] = "big"
    data["device_traces"][0][6] = "not an entry"
    path = tmp_path / "odd.pickle"
    path.write_bytes(pickle.dumps(data))
    snap = MemorySnapshot(path)
    health = dict(zip(snap.health()["item"], snap.health()["count"]))
    assert health == {
        f"{data['device_traces'][0][5]['action']} entry without an integer size (left out)": 1,
        "trace entry without an action (left out)": 1,
    }
    assert len(snap.timeline()) == len(data["device_traces"][0]) - 2


def test_a_snapshot_of_odd_records_gives_answers_not_tracebacks(tmp_path):
    """Shapes a hand-edited or foreign dict may hold: each left out and counted, or read."""
    odd = {
        "segments": [
            "not a segment",
            {"address": 0, "total_size": 10, "blocks": [1, {"address": 0}], "segment_pool_id": 3},
            {"address": 100, "total_size": 8, "stream": "s", "device": None,
             "blocks": [{"address": 100, "size": 8, "state": "inactive", "history": 5}]},
        ],
        "device_traces": [[{"action": "alloc", "addr": 1, "size": 2.5}, None, {"action": 7}],
                          "no trace"],
    }  # fmt: skip
    path = tmp_path / "odd.pickle"
    path.write_bytes(pickle.dumps(odd))
    snap = MemorySnapshot(path)
    assert snap.summary()["reserved_bytes"].tolist() == [18]
    assert int(snap.health()["count"].sum()) == 7  # "no trace" too: a device trace not a list
    assert_missing(snap.timeline(), "no allocator trace")
    assert snap.would_fit(4).iloc[0]["verdict"] == "fits in a cached block"


def test_two_devices_replayed_each_from_its_own_end(tmp_path):
    """Known by construction: device 0 peaks at 60 bytes after its second alloc and traces its
    segment; device 1 traces no segment event (reserved unknown: NaN) and found 10 bytes in use
    when its trace began."""

    def segment(device, address, total, used):
        block = {
            "address": address,
            "size": used,
            "requested_size": used,
            "state": "active_allocated",
            "frames": [],
        }
        spare = {
            "address": address + used,
            "size": total - used,
            "requested_size": 0,
            "state": "inactive",
            "frames": [],
        }
        return {"device": device, "address": address, "total_size": total, "stream": 0,
                "segment_type": "large", "blocks": [block, spare], "frames": []}  # fmt: skip

    def entry(action, addr, size, time_us):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": time_us,
                "frames": []}  # fmt: skip

    data = {
        "segments": [segment(0, 0, 100, 40), segment(1, 1000, 50, 30)],
        "device_traces": [
            [entry("segment_alloc", 0, 100, 1), entry("alloc", 0, 40, 2),
             entry("alloc", 40, 20, 3), entry("free_completed", 40, 20, 4)],
            [entry("free_completed", 2000, 10, 5), entry("alloc", 1000, 30, 6)],
        ],
    }  # fmt: skip
    path = tmp_path / "two.pickle"
    path.write_bytes(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
    snap = MemorySnapshot(path)
    line = snap.timeline()
    assert line["device"].tolist() == [0, 0, 0, 0, 1, 1]
    assert line["active_bytes"].tolist() == [0, 40, 60, 40, 0, 30]
    assert line["reserved_bytes"].tolist()[:4] == [100, 100, 100, 100]
    assert line["reserved_bytes"].iloc[4:].isna().all()
    one = snap.timeline(device=1)
    assert one["index"].tolist() == [0, 1] and one["active_bytes"].tolist() == [0, 30]
    peaks = snap.peaks().set_index("device")
    assert peaks.loc[0, ["index", "active_bytes", "before_trace_bytes"]].tolist() == [2, 60, 0]
    assert peaks.loc[1, ["index", "active_bytes", "before_trace_bytes"]].tolist() == [1, 30, 10]
    assert snap.peak().device == 0 and snap.peak(1).by_site["bytes"].sum() == 30
    with pytest.raises(SelectionError):
        snap.timeline(device=2)
