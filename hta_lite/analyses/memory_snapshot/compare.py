"""Two snapshots side by side (before / after a change, or two ranks).

``by="site"``: the memory in use (blocks not ``inactive``) per allocation site in each:
``site``, ``bytes_a``, ``bytes_b``, ``growth_bytes`` (b - a), ``blocks_a``, ``blocks_b``, the
largest change (growth or shrinkage) first. ``by="state"``: ``state`` (the block states, then
``reserved`` for the segments), ``bytes_a``, ``bytes_b``, ``growth_bytes``. ``by="segment"``:
the segments in one snapshot only (by device and address): ``only_in`` (``"a"`` or ``"b"``),
``device``, ``address``, ``total_size``, ``site``. Byte sums are exact.
"""

from __future__ import annotations

import pandas as pd

from ...errors import SelectionError

BY = ("site", "state", "segment")


def compare(a, b, by: str = "site") -> pd.DataFrame:
    """``a``, ``b``: the tables of the two snapshots
    (:class:`hta_lite.load.readers.snapshot_tables.SnapshotTables`)."""
    if by not in BY:
        raise SelectionError(None, f"by must be one of {list(BY)}, not {by!r}")
    if by == "segment":
        return _segments_only_in_one(a.segments, b.segments)
    key = "site" if by == "site" else "state"
    left, right = _sums(a, key), _sums(b, key)
    out = pd.merge(left, right, how="outer", left_index=True, right_index=True,
                   suffixes=("_a", "_b")).reset_index()  # fmt: skip
    for column in ("bytes_a", "bytes_b", "blocks_a", "blocks_b"):  # a side without the key: 0
        out[column] = [0 if pd.isna(v) else int(v) for v in out[column]]
    out["growth_bytes"] = [y - x for x, y in zip(out["bytes_a"], out["bytes_b"])]
    if by == "state":
        return out[["state", "bytes_a", "bytes_b", "growth_bytes"]]
    order = sorted(range(len(out)), key=lambda i: (-abs(out["growth_bytes"][i]), out["site"][i]))
    return out.iloc[order][
        ["site", "bytes_a", "bytes_b", "growth_bytes", "blocks_a", "blocks_b"]
    ].reset_index(drop=True)


def _sums(tables, key: str) -> pd.DataFrame:
    blocks = tables.blocks
    if key == "site":
        blocks = blocks[blocks["state"].to_numpy() != "inactive"]
    frame = pd.DataFrame(
        {key: blocks[key].to_numpy(), "bytes": blocks["size"].to_numpy().astype(object)}
    )
    out = frame.groupby(key).agg(bytes=("bytes", "sum"), blocks=("bytes", "size"))
    if key == "state":
        reserved = sum(tables.segments["total_size"].tolist())
        out.loc["reserved"] = [reserved, len(tables.segments)]
    return out


def _segments_only_in_one(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    keys_a = set(zip(a["device"].tolist(), a["address"].tolist()))
    keys_b = set(zip(b["device"].tolist(), b["address"].tolist()))
    parts = []
    for side, frame, other in (("a", a, keys_b), ("b", b, keys_a)):
        mask = [k not in other for k in zip(frame["device"].tolist(), frame["address"].tolist())]
        parts.append(frame[mask][["device", "address", "total_size", "site"]].assign(only_in=side))
    out = pd.concat(parts, ignore_index=True)
    return out[["only_in", "device", "address", "total_size", "site"]]
