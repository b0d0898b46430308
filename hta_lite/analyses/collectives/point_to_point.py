"""Point-to-point pairs: which send on one rank is which recv on another.

A send names its receiver and a recv its sender (``peer``, from the ``c10d::send`` /
``c10d::recv_`` op that issued it: :func:`.metadata.peers`). NCCL and gloo deliver the messages
from one rank to another in the order they were issued, so in a process group and step the k-th
send from rank a to rank b (in issue order) is the k-th recv on b from a: one instance of two
calls, collective ``send_recv``, group size 2. The recv cannot finish before the send started,
nor (for a message larger than the transport's eager buffer) the send before the recv did: the
instance is a join like any collective's, its last arrival the side that came late.

Nothing is paired silently:
- a send or recv whose peer is not recorded (the trace was recorded without
  ``record_shapes=True``, or the op is not there) is unpaired (``point-to-point``);
- a call whose peer is not loaded is an instance of its own rank alone (``complete == False``:
  the other side may have arrived later), as a collective with a member missing;
- sends from a to b and recvs on b from a that do not pair up (different counts in a step) are
  unpaired beyond the smaller count (``count mismatch``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .calls import POINT_TO_POINT

PAIRED = "send_recv"  # the collective of a pair's instance


def pair(calls: pd.DataFrame, loaded: set[int]) -> tuple[np.ndarray, list[tuple]]:
    """For the rows of ``calls`` (sorted by rank, pg, step, issue order): the pair each
    point-to-point call belongs to (0, 1, ... ; -1 unpaired or not point-to-point) and the
    problem rows (``pg, step, reason, ranks, calls, detail``)."""
    out = np.full(len(calls), -1, np.int64)
    rows = np.flatnonzero(calls["collective"].isin(POINT_TO_POINT).to_numpy())
    if not len(rows):
        return out, []
    p2p = calls.iloc[rows]
    rank = p2p["rank"].to_numpy()
    recorded = p2p["peer"] if "peer" in p2p.columns else pd.Series(-1, index=p2p.index)
    peer = pd.to_numeric(recorded, errors="coerce").fillna(-1).to_numpy(np.int64)
    sending = (p2p["collective"] == "send").to_numpy()
    problems = []
    unknown = peer < 0
    for (pg, step), part in p2p[unknown].groupby(["pg", "step"]):
        problems.append(
            (pg, step, "point-to-point", _ranks(part), len(part),
             "send / recv without a recorded peer (record with record_shapes=True, which"
             " writes the c10d op's peer): not paired")
        )  # fmt: skip
    table = pd.DataFrame(
        {
            "row": rows,
            "pg": p2p["pg"].to_numpy(),
            "step": p2p["step"].to_numpy(),
            "sender": np.where(sending, rank, peer),
            "receiver": np.where(sending, peer, rank),
            "send": sending,
            "alone": ~np.isin(peer, list(loaded)),
        }
    )[~unknown]
    keys = ["pg", "step", "sender", "receiver"]
    table["ordinal"] = table.groupby([*keys, "send"]).cumcount()
    sides = table.groupby([*keys, "ordinal"])["send"].transform("nunique")
    paired = (sides == 2) | table["alone"]
    for (pg, step, sender, receiver), part in table[~paired].groupby(keys):
        kinds = part["send"].map({True: "send", False: "recv"})
        problems.append(
            (pg, step, "count mismatch", f"{sender},{receiver}", len(part),
             f"{len(part)} {'/'.join(sorted(set(kinds)))} from rank {sender} to rank {receiver}"
             " without the other side: not paired")
        )  # fmt: skip
    kept = table[paired]
    out[kept["row"].to_numpy()] = kept.groupby([*keys, "ordinal"]).ngroup().to_numpy()
    return out, problems


def _ranks(rows: pd.DataFrame) -> str:
    return ",".join(str(int(r)) for r in sorted(rows["rank"].unique().tolist()))
