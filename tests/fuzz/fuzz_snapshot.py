"""Fuzz the C reader of snapshot pickles (hta_lite/load/_snapshot_pickle.c) built with
AddressSanitizer and UndefinedBehaviorSanitizer, against the restricted unpickler
(hta_lite/load/plain_pickle.py) as the reference.

    python tests/fuzz/fuzz_snapshot.py --seconds 60             # CI (.ci/run)
    python tests/fuzz/fuzz_snapshot.py --seconds 1800 --coverage  # a long run

Seeds: the crafted pickles of tests/snapshot_corpus.py and a real snapshot cut down, pickled with
protocols 2 to 5. Mutations: byte flips, deletions, repeats, opcodes inserted (memo puts and gets
with large indices, FRAME and length headers, LONG1 of 9 bytes, BUILD, APPEND, SETITEMS, MARK),
spans spliced from other seeds. Oracle: when the C reader takes an input (its data is a snapshot
and its rows are the traces' entries), the restricted unpickler reads it too and both give equal
tables (or both refuse its sizes); a sanitizer report aborts the run with the input saved.

Exit status 0 when every input passed; 1 with the failing input in --out.
"""

from __future__ import annotations

import pickle
import random
import struct
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
from fuzz_decoder import ROOT, fuzz_main  # noqa: E402 - the same sanitized build, another source

SOURCE = ROOT / "hta_lite" / "load" / "_snapshot_pickle.c"


def seeds() -> list[bytes]:
    from snapshot_corpus import crafted, small_real

    snap = small_real(entries=12, segments=2)
    out = [pickle.dumps(snap, protocol=p) for p in (2, 3, 4, 5)]
    return out + list(crafted().values())


TOKENS = [
    b"\x94", b"q\x00", b"q\xff", b"r\x00\x00\x00\x10", b"h\x00", b"h\x01", b"j\x00\x00\x00\x00",
    b"j\xff\xff\xff\x0f", b"\x95" + struct.pack("<Q", 4), b"\x95" + struct.pack("<Q", 2**63),
    b"\x8a\x09" + b"\x01" * 9, b"\x8a\x08" + b"\xff" * 8, b"\x8b\x02\x00\x00\x00\x01\x00",
    b"b", b"a", b"e", b"s", b"u", b"(", b"0", b"1", b"2", b"]", b"}", b")", b"N",
    b"\x8c\x06action", b"\x8c\x05alloc", b"\x8c\x06frames", b"\x8c\x04size", b"K\x07",
    b"\x8d" + struct.pack("<Q", 2**63), b"X\xff\xff\xff\x7f", b"c__builtin__\neval\n",
]  # fmt: skip


def mutate(data: bytes, pool: list[bytes], rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not out:
            out += rng.choice(pool)
        at = rng.randrange(len(out))
        kind = rng.randrange(6)
        if kind == 0:
            out[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            del out[at : at + rng.randint(1, 16)]
        elif kind == 2:
            span = out[at : at + rng.randint(1, 64)]
            out[at:at] = span * rng.randint(1, 4)
        elif kind == 3:
            out[at:at] = rng.choice(TOKENS)
        elif kind == 4:
            out[at : at + 1] = rng.choice(TOKENS)
        else:
            other = rng.choice(pool)
            start = rng.randrange(len(other))
            out[at:at] = other[start : start + rng.randint(1, 200)]
    return bytes(out)


def check(data: bytes, fast) -> tuple[str | None, bool]:
    """(problem or None, whether the C reader took the input)."""
    import pandas as pd

    from hta_lite.errors import SnapshotError
    from hta_lite.load.plain_pickle import PlainData
    from hta_lite.load.readers import snapshot as reader
    from hta_lite.load.readers.snapshot_tables import tables

    out = fast.read(data)
    taken = out is not None and reader._is_snapshot(out[0]) and reader._rows_in_traces(*out)
    try:
        plain = PlainData(data, "fuzz").load()
    except SnapshotError as exc:
        return (f"the C reader took what the unpickler refuses: {exc}" if taken else None), False
    if not taken:
        return None, False
    try:
        mine = tables(*out)
    except SnapshotError:
        try:
            tables(plain)
        except SnapshotError:
            return None, True
        return "the C reader's sizes were refused, the unpickler's not", True
    try:
        theirs = tables(plain)
    except SnapshotError:
        return "the unpickler's sizes were refused, the C reader's not", True
    try:
        for name in ("segments", "blocks", "entries"):
            pd.testing.assert_frame_equal(getattr(mine, name), getattr(theirs, name))
    except AssertionError as exc:
        return f"tables differ: {exc}", True
    if _stacks(mine.entry_frames) != _stacks(theirs.entry_frames):
        return "entry frames differ", True
    return None, True


def _stacks(stacks) -> list:
    """Each stack's frames by their plain values (a frame may hold itself: no deep ==)."""
    plain = (str, int, float, bool, type(None))

    def frame(f):
        if not isinstance(f, dict):
            return type(f).__name__
        return sorted((repr(k), v) for k, v in f.items() if type(v) in plain and type(k) in plain)

    return [[frame(f) for f in stack] if isinstance(stack, list) else None for stack in stacks]


def run(args) -> int:
    sys.path.insert(0, args.build_dir)
    import _snapshot_pickle as fast  # the sanitized build

    rng = random.Random(args.seed)
    pool = seeds()
    corpus = list(pool)
    executions = accepted = 0
    problem, data = None, b""
    last = Path(args.out + ".last")
    deadline = time.monotonic() + args.seconds
    while problem is None and time.monotonic() < deadline:
        data = mutate(rng.choice(corpus), pool, rng)
        last.write_bytes(data)
        problem, took = check(data, fast)
        executions += 1
        accepted += took
        if took and problem is None and len(corpus) < 2000:
            corpus.append(data)
    last.unlink(missing_ok=True)
    if problem:
        Path(args.out).write_bytes(data)
        print(f"FAIL after {executions} inputs: {problem}; input saved to {args.out}")
        return 1
    print(f"{executions} inputs in {args.seconds:.0f} s, {accepted} taken by the C reader and"
          " equal to the restricted unpickler, none crashed under ASan/UBSan")  # fmt: skip
    return 0


def main() -> int:
    return fuzz_main(
        __doc__,
        SOURCE,
        __file__,
        "snapshot reader",
        run,
        seconds=60,
        out="fuzz-snapshot-failure.pickle",
    )


if __name__ == "__main__":
    sys.exit(main())
