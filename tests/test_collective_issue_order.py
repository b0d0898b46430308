"""gloo collectives are paired in issue order (issue #37).

The worker range of a gloo collective starts when a worker thread takes it from the queue; two
workers freed together can record the second of two queued collectives first. The checks compare
hta_lite's waits with an independent pairing of the raw ``gloo:*`` ranges read from the JSON:
same step, same collective, same element count, k-th of them on each rank (and for
gloo_collectives, the half a half-group call belongs to).
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import SAMPLES

from hta_lite import TraceAnalysis

BUCKETS = SAMPLES / "gloo_buckets"
BUCKET_SIZES = {524_800, 525_312}


def raw_ranges(folder: Path) -> dict[int, list[dict]]:
    """rank -> its ``gloo:*`` ranges (``name``, ``ts`` µs, ``numel``, ``step``), from the JSON;
    those of the last step left out (as HTA and hta_lite leave its CPU events out)."""
    out = {}
    for path in sorted(folder.glob("rank-*.json.gz")):
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        steps = [
            (e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
            for e in events
            if e.get("name", "").startswith("ProfilerStep#")
        ]
        ranges = []
        for e in events:
            if e.get("ph") == "X" and e["name"].startswith("gloo:"):
                dims = json.loads(json.dumps(e["args"].get("Input Dims", [])))
                numel = dims[0][0] if dims and dims[0] else 0
                step = next((s for lo, hi, s in steps if lo <= e["ts"] < hi), -1)
                ranges.append({"name": e["name"], "ts": e["ts"], "numel": numel, "step": step})
        last = max(s for _, _, s in steps)
        ranges = [r for r in ranges if r["step"] != last]
        out[int(path.name.split("-")[1].split(".")[0])] = ranges
    return out


def independent_waits(ranges: dict[int, list[dict]], group_of) -> dict[int, tuple[float, float]]:
    """rank -> (wait caused, wait suffered) µs from pairing the ranges by (group, step, name,
    numel, k-th)."""
    instances = defaultdict(dict)
    for rank, items in ranges.items():
        seen = defaultdict(int)
        for r in sorted(items, key=lambda r: r["ts"]):
            key = (group_of(rank, r), r["step"], r["name"], r["numel"])
            instances[(*key, seen[key])][rank] = r["ts"]
            seen[key] += 1
    caused = defaultdict(float)
    suffered = defaultdict(float)
    for starts in instances.values():
        last_rank = max(starts, key=starts.get)
        for rank, ts in starts.items():
            suffered[rank] += starts[last_rank] - ts
            caused[last_rank] += starts[last_rank] - ts
    return {rank: (caused[rank], suffered[rank]) for rank in ranges}


def assert_waits_equal(analysis: TraceAnalysis, expected: dict[int, tuple[float, float]]):
    by_rank = analysis.get_collective_summary(by="rank").set_index("rank")
    for rank, (caused, suffered) in expected.items():
        assert by_rank.at[rank, "wait_caused_us"] == pytest.approx(caused, abs=1.0), rank
        assert by_rank.at[rank, "wait_suffered_us"] == pytest.approx(suffered, abs=1.0), rank


def swap_bucket_ranges(src: Path, dst: Path, rank: int) -> int:
    """Copy ``src`` to ``dst`` with, on ``rank``, each step's second bucket range moved 0.3 µs
    before the first's (as a real gloo run recorded it); the number of steps changed."""
    shutil.copytree(src, dst)
    path = dst / f"rank-{rank}.json.gz"
    trace = json.loads(gzip.decompress(path.read_bytes()))
    by_step = defaultdict(list)
    ranges = raw_ranges(src)[rank]
    keyed = {(r["ts"], r["numel"]): r["step"] for r in ranges}
    for e in trace["traceEvents"]:
        if e.get("name", "").startswith("gloo:"):
            numel = e["args"]["Input Dims"][0][0]
            if numel in BUCKET_SIZES and (e["ts"], numel) in keyed:
                by_step[keyed[(e["ts"], numel)]].append(e)
    for first, second in (sorted(pair, key=lambda e: e["ts"]) for pair in by_step.values()):
        second["ts"] = round(first["ts"] - 0.3, 3)
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return len(by_step)


def test_buckets_as_recorded_pair_every_call():
    analysis = TraceAnalysis(trace_dir=BUCKETS, parallel=False, cache=False)
    matching = analysis.get_collectives()
    assert matching.problems.empty
    assert (matching.calls["instance"] >= 0).all()
    assert sorted(matching.instances["bytes"].unique()) == [32, 2_099_200, 2_101_248]
    assert_waits_equal(analysis, independent_waits(raw_ranges(BUCKETS), lambda rank, r: 0))


def test_buckets_taken_in_reverse_order_pair_in_issue_order(tmp_path):
    """The second bucket's range starts 0.3 µs before the first's on rank 1: each range is
    still paired with the same bucket on the other ranks (by the c10d op that issued it), with
    its exact size, no ``metadata disagree``, and waits from the ranges' own starts."""
    folder = tmp_path / "swapped"
    assert swap_bucket_ranges(BUCKETS, folder, rank=1) == 3
    analysis = TraceAnalysis(trace_dir=folder, parallel=False, cache=False)
    matching = analysis.get_collectives()
    assert matching.problems.empty, matching.problems
    assert matching.instances["consistent"].all() and matching.instances["ordered"].all()
    calls = matching.calls
    sizes = calls.groupby("instance")["in_bytes"].nunique()
    assert (sizes == 1).all()
    expected = independent_waits(raw_ranges(folder), lambda rank, r: 0)
    assert_waits_equal(analysis, expected)
    # pairing by the ranges' starts alone pairs different buckets: the mutation does bite
    by_start = calls.sort_values("ts")
    rank1 = by_start[(by_start["rank"] == 1) & (by_start["in_bytes"] > 1_000_000)]
    assert (rank1["in_bytes"].diff().dropna() != 0).any()
    assert (rank1["issued"].diff().dropna() < 0).any()


@pytest.mark.parametrize("world", [4, 8])
def test_gloo_collectives_waits_equal_an_independent_pairing(world):
    folder = SAMPLES / "gloo_collectives" / f"{world}ranks"
    analysis = TraceAnalysis(trace_dir=folder, parallel=False, cache=False)
    assert analysis.get_collectives().problems.empty

    def group_of(rank, r):  # record.py: broadcast and the 4,096-float all_reduce on the half
        on_half = r["name"] == "gloo:broadcast" or r["numel"] == 4096
        return rank // (world // 2) if on_half else "world"

    assert_waits_equal(analysis, independent_waits(raw_ranges(folder), group_of))
