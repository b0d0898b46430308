"""Why msgspec, python-isal and the C decoder are there, and how hta_lite uses them: decode and
gunzip timings on one trace (best of 5 in one process; a fresh process pays more for new memory).

    python benchmarks/bench_decode.py [TRACE.json.gz]
"""

from __future__ import annotations

import gzip
import sys
import time
from pathlib import Path

import msgspec
import orjson
from isal import igzip

from hta_lite.load import decode, gzip_text, stream

DEFAULT = Path(__file__).resolve().parents[2] / "shared/traces/hta/diff_control/control.json.gz"


def best(fn, repeat=5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    packed = path.read_bytes()
    data = gzip.decompress(packed)
    top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    rows = [
        ("gunzip, zlib (gzip module)", best(lambda: gzip.decompress(packed))),
        ("gunzip, python-isal igzip.decompress", best(lambda: igzip.decompress(packed))),
        (
            "gunzip, python-isal, read into one buffer of the trailer's size (hta_lite)",
            best(lambda: gzip_text.gunzip(packed)),
        ),
        ("JSON, orjson.loads (all dicts)", best(lambda: orjson.loads(data))),
        ("JSON, msgspec untyped (all dicts)", best(lambda: msgspec.json.decode(data))),
        (
            "JSON, msgspec typed events only",
            best(lambda: decode._events_decoder.decode(top["traceEvents"])),
        ),
        (
            "JSON, top-level scan + typed events",
            best(
                lambda: decode._events_decoder.decode(decode.decode_top(data, path)["traceEvents"])
            ),
        ),
    ]
    if decode._fastjson is not None:
        spec = (decode._C_EVENT_SPEC, decode._C_ARGS_SPEC, decode._C_SEED)
        rows.append(
            (
                "JSON, C decoder, events to columns (hta_lite.load._fastjson)",
                best(lambda: decode._fastjson.decode_events(top["traceEvents"], *spec)),
            )
        )
        rows.append(
            (
                "gunzip + C decoder in 1 MiB pieces (hta_lite.load.stream, a large file)",
                best(lambda: stream.decode_in_pieces(path)),
            )
        )
    rows.append(
        (
            "JSON, whole document in one pass (hta_lite, "
            + ("C decoder)" if decode._fastjson else "msgspec)"),
            best(lambda: decode.decode(data, path)),
        )
    )
    print(f"{path.name}: {len(data) / 1e6:.1f} MB JSON")
    print("| step | best of 5, s |\n|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.3f} |")


if __name__ == "__main__":
    main()
