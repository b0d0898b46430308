"""Fuzz the C decoder (hta_lite/load/_fastjson.c) built with AddressSanitizer and
UndefinedBehaviorSanitizer, against the msgspec path as the reference.

    python tests/fuzz/fuzz_decoder.py --seconds 120            # CI (.ci/run)
    python tests/fuzz/fuzz_decoder.py --seconds 3600 --coverage  # a long run (docs/fuzzing.md)

A mutation loop (atheris' coverage guidance needs clang; this machine and CI have gcc): inputs
start from seeds — the first events of real traces cut down, and JSON edge cases — and are
mutated at the byte level (flips, insertions, deletions, repeats) and at the token level
(interesting numbers, strings, escapes, brackets, events spliced from other seeds). For every
input the sanitized decoder must either decline (None) or give exactly the msgspec path's result,
floats compared bit for bit; a sanitizer report aborts the run with the input saved. The run also
probes complexity: names crafted to collide in the string table cost at most MAX_PROBES each.

Exit status 0 when every input passed; 1 with the failing input in --out.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "hta_lite" / "load" / "_fastjson.c"
SANITIZERS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]


def build(folder: Path, coverage: bool, original: Path = SOURCE) -> Path:
    """The C extension ``original`` (default: the decoder) as a module in ``folder``, sanitized
    (and gcov-instrumented)."""
    include = sysconfig.get_paths()["include"]
    name = original.stem
    target = folder / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    flags = ["-O1", "-g", "-fno-omit-frame-pointer", "-fPIC", *SANITIZERS]
    if coverage:
        flags += ["--coverage"]
    source, obj = folder / f"{name}.c", folder / f"{name}.o"  # gcov's files go next to them
    source.write_bytes(original.read_bytes())
    subprocess.run(["gcc", *flags, "-c", f"-I{include}", str(source), "-o", str(obj)], check=True)
    subprocess.run(["gcc", *flags, "-shared", str(obj), "-o", str(target)], check=True)
    return target


def seeds() -> list[bytes]:
    """Cut-down real traces (their first events) and hand-written edge cases."""
    out = []
    for path in sorted((ROOT / "sample_traces").glob("*/*.json.gz"))[:6] + sorted(
        (ROOT / "tests" / "data").glob("*/*.json.gz")
    ):
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        for start in (0, len(events) // 2):
            out.append(json.dumps(events[start : start + 40]).encode())
    out += [
        b"[]",
        b"[{}]",
        b'[{"ph": "X", "ts": 1712195495519689.047, "dur": 0.5, "args": {"stream": 7}}]',
        b'[{"ph": "X", "name": "a\\u00e9\\ud83d\\ude00", "cat": "\\\\\\"", "pid": "Spans"}]',
        b'[{"args": {"memory bandwidth (GB/s)": -0, "grid": [1, 2, 3], "Process Group Ranks":'
        b' [0, 1]}, "id": -0.0}]',
        b'[{"ph": "M", "name": "process_name", "args": {"name": "x", "labels": null}}]',
        b'[{"ph": "X", "ts": -0.0019, "dur": 1.0010, "ts": 3, "args": null, "args": {"bytes": 9}}]',
        b'[{"ph": "X", "args": {"stream": 7}}, {}, {}, {}, {"args": {"stream": "7"}}]',
        b'[{"name": "a\\b\\f\\n\\r\\t\\/\\u20ac\\u0800\\u07ff\\ud83d\\ude00\\u0000",'
        b' "cat": "\\ud800x", "args": {"dtype": "\\udc00"}}]',
        b'[{"args": {"memory bandwidth (GB/s)": 1e400, "Process Group Ranks": '
        + b"[" * 600
        + b"]" * 600
        + b"}}]",
        # more distinct strings than the first string table holds: it grows and rehashes
        json.dumps([{"name": f"op{i}", "cat": f"c{i % 7}"} for i in range(3000)]).encode(),
        # raw memory timelines (int_rows)
        b"[[-1, 1, 37888, 7], [1696966048083248105, 3, -4000, 0]]",
        b"[[9223372036854775807,-9223372036854775808,0,1]]",
        b"[[-1, 1, 5, 7], [-1, 1, 9223372036854775807, 7], [3, 2, 9, 7], [3, 2, 1, 0]]",
        b"[[4, 1, 1, 8]]",
        # long enough for the plain-row fast path (rows_next's row_plain): mutations cut it
        b"["
        + b", ".join(
            b"[%d, %d, %d, %d]" % r
            for r in [
                (-1, 1, 37888, 7),
                (-1, 0, 0, 0),
                (0, 1, -512, 6),
                (1696966048083248105, 3, -8, 0),
                (1696966048083248105, 2, 9223372036854775807, 1),
                (1, 1, -9223372036854775808, 2),
                (12345678, 4, 123456789, 3),
                (99999999999999999, 1, 10, 4),
            ]
            * 3
        )
        + b"]",
        b" [ ] ",
    ]
    return out


TOKENS = [
    b"-0", b"-0.0", b"1e5", b"1E-3", b"0.000000000001", b"123456789012345678901", b"9e15",
    b"null", b"true", b"false", b'""', b'"\\u0041"', b'"\\ud83d"', b'"\\\\"', b"[", b"]", b"{",
    b"}", b",", b":", b'"ts"', b'"dur"', b'"args"', b'"ph"', b'"X"', b'"stream"', b'"grid"',
    b"\xff", b"\xc3\xa9", b"\x00", b" ", b"[[[[[[[[", b'{"a":' * 8, b"NaN", b"Infinity",
]  # fmt: skip


def mutate(data: bytes, pool: list[bytes], rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        pos = rng.randint(0, len(buf))
        if choice < 0.2 and buf:
            buf[min(pos, len(buf) - 1)] ^= 1 << rng.randint(0, 7)
        elif choice < 0.45:
            buf[pos:pos] = rng.choice(TOKENS)
        elif choice < 0.6 and buf:
            del buf[pos : pos + rng.randint(1, 8)]
        elif choice < 0.75 and buf:
            end = min(len(buf), pos + rng.randint(1, 40))
            buf[pos:pos] = buf[pos:end] * rng.randint(1, 4)
        elif choice < 0.9:
            other = rng.choice(pool)
            a = rng.randint(0, len(other))
            buf[pos:pos] = other[a : a + rng.randint(1, 200)]
        else:
            token = rng.choice(TOKENS)
            end = buf.find(b",", pos)
            if end > pos:
                buf[pos:end] = token
    return bytes(buf)


def check(data: bytes, fast, ref_decoder, spec, seed, same) -> tuple[str | None, bool]:
    """``(problem, accepted)``: problem is None when the decoder declines or agrees with
    msgspec, else what differs; accepted says whether the decoder took the input."""
    out = fast.decode_events(data, *spec, seed)
    if out is None:
        return None, False
    return compare(data, out, ref_decoder, same), True


def compare(data: bytes, out: dict, ref_decoder, same) -> str | None:
    """What differs between the decoder's output and the msgspec path's, or None."""
    from hta_lite.load import schema
    from hta_lite.load.events import EventColumns, EventList

    try:
        ref = EventList(ref_decoder.decode(data), schema.Args())
    except Exception as exc:  # the msgspec path rejects what the C decoder took
        return f"accepted input the msgspec path rejects ({type(exc).__name__}: {exc})"
    cols = EventColumns.from_decoder(out, schema.EVENT_DEFAULTS, schema.ARGS_DEFAULTS)
    if len(cols) != len(ref):
        return f"{len(cols)} rows vs {len(ref)}"
    for f in schema.EVENT_FIELDS:
        if not same(cols.field(f.name), ref.field(f.name)):
            return f"field {f.name}"
    for f in schema.ARGS_FIELDS:
        if not same(cols.args().field(f.name), ref.args().field(f.name)):
            return f"args.{f.name}"
    for name in ("ts", "dur"):
        a, b = cols.times(name), ref.times(name)
        if a[0].tolist() != b[0].tolist() or a[1].tolist() != b[1].tolist() or a[2] != b[2]:
            return f"times {name}"
    for name in ("ph", "cat", "name", "pid", "tid"):
        if cols.factorized(name)[0].tolist() != ref.factorized(name)[0].tolist():
            return f"codes {name}"
    return None


def feed_in_pieces(fast, data: bytes, spec, seed: int, cuts: list[int], split: int = -1):
    """The events array ``data`` fed to ``stream_feed`` cut at ``cuts`` (positions in ``data``):
    the stream's result, or None when it declines or text other than whitespace follows. With
    ``split`` (a position in ``data``), the first stream stops at the first event from there on
    and a second stream reads the rest, joined after it (as two threads read a large file)."""
    body = data.lstrip()
    if body[:1] != b"[":
        return None
    lead = len(data) - len(body)
    handle = fast.stream_open(*spec, seed, 16)
    window, start = b"", 1  # the text after the opening "["
    for end in [*(c - lead for c in cuts), len(body)]:
        window += body[start : max(start, end)]
        start = max(start, end)
        base = start - len(window)
        fed = fast.stream_feed(handle, window, start == len(body), base, split - lead)
        if fed is None:
            return None
        if fed[1] == 2:  # stopped: the rest (from the event there) read by a second stream
            at = base + fed[0]
            second = fast.stream_open(*spec, seed, 16, True)
            rest = fast.stream_feed(second, body[at:], True)
            if rest is None or rest[1] != 1 or body[at + rest[0] :].strip():
                return None
            assert fast.stream_join(handle, second)
            return fast.stream_result(handle)
        window = window[fed[0] :]
        if fed[1]:  # the array ended: what follows is the caller's (here: nothing may)
            return fast.stream_result(handle) if not (window + body[start:]).strip() else None
    return None


def check_stream(data: bytes, fast, spec, seed, rng, accepted: bool, ref_decoder) -> str | None:
    """The same input fed to ``stream_feed`` in pieces cut at random: declined exactly when the
    whole call declines, else the same result."""
    cuts = sorted(rng.randint(1, max(1, len(data) - 1)) for _ in range(rng.randint(0, 3)))
    split = rng.randint(1, max(1, len(data) - 1)) if rng.random() < 0.5 else -1
    out = feed_in_pieces(fast, data, spec, seed, cuts, split)
    if (out is None) != (not accepted):
        return f"stream {'declined' if out is None else 'took'} what the whole call did not"
    return None if out is None else compare(data, out, ref_decoder, same)


def check_int_rows(data: bytes, fast) -> tuple[str | None, bool]:
    """``(problem, accepted)`` for ``int_rows``: when it takes the input (widths 1 and 4), the
    values must be msgspec's rows of int64."""
    import msgspec
    import numpy as np

    took, rows = False, None
    for width in (1, 4):
        out = fast.int_rows(data, width)
        if out is None:
            continue
        took = True
        try:
            ref = msgspec.json.decode(data, type=list[tuple[(int,) * width]])
            ref = np.array(ref, np.int64).reshape(-1, width)
        except Exception as exc:
            return f"int_rows accepted input msgspec rejects ({type(exc).__name__}: {exc})", took
        if np.frombuffer(out, np.int64).tolist() != ref.ravel().tolist():
            return f"int_rows values differ (width {width})", took
        rows = ref if width == 4 else rows
    return check_category_sums(data, rows, fast), took


def check_category_sums(data: bytes, rows, fast) -> str | None:
    """``category_sums`` over the text whose rows of 4 ``int_rows`` took (None: declined):
    numpy's sums (``raw_timeline``), or None exactly when it declined or a category is outside
    0-7; the same from a reader of the text."""
    import io

    import numpy as np

    from hta_lite.load.readers.memory_timeline import _category_sums

    out = fast.category_sums(data, 8)
    for piece in (7, 64):  # read a piece at a time: the same, wherever the pieces cut the rows
        if fast.category_sums(io.BytesIO(data), 8, len(data), piece) != out:
            return f"category_sums in pieces of {piece} differ from the whole text's"
    if rows is None:
        return None if out is None else "category_sums took text int_rows declined"
    if out is None:
        bad = ((rows[:, 3] < 0) | (rows[:, 3] > 7)).any()
        return None if bad else "category_sums declined rows of known categories"
    if np.frombuffer(out, np.int64).tolist() != _category_sums(rows).T.ravel().tolist():
        return "category_sums differ from numpy's"
    return None


def same(a, b) -> bool:
    """Equal values of the same types, all the way down (1 and 1.0 differ; floats bit for bit, so
    -0.0 and 0.0 differ; NaN equals NaN)."""
    import math
    import struct

    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def _mix64(h):
    import numpy as np

    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


def colliding_names(seed: int, count: int, low_bits: int = 12) -> list[str]:
    """8-character names whose string-table hash (under ``seed``) shares its low bits: all in
    one slot of the decoder's first table (4096 slots). Mirrors hash_bytes of _fastjson.c."""
    import numpy as np

    rng = np.random.default_rng(0)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", np.uint8)
    names: list[str] = []
    with np.errstate(over="ignore"):
        start = _mix64(np.uint64(seed) ^ (np.uint64(8) * np.uint64(0x9E3779B97F4A7C15)))
        while len(names) < count:
            chars = alphabet[rng.integers(0, len(alphabet), size=(1 << 21, 8))]
            words = chars.copy().view("<u8").ravel()
            hit = (_mix64(_mix64(start ^ words)) & np.uint64((1 << low_bits) - 1)) == 0
            names = list(dict.fromkeys(names + [bytes(c).decode() for c in chars[hit]]))
    return names[:count]


def collision_probe(fast, spec) -> str | None:
    """Names colliding in the string table under a known seed: at most MAX_PROBES each."""
    names = colliding_names(99, 1200)
    out = fast.decode_events(json.dumps([{"name": n} for n in names]).encode(), *spec, 99)
    if out["string_probes"] > 32 * len(names):
        return f"{out['string_probes']} probes for {len(names)} colliding names"
    return None


def run(args) -> int:
    """The loop itself (in the process that has the sanitizer runtime preloaded)."""
    import msgspec

    from hta_lite.load import schema

    sys.path.insert(0, args.build_dir)
    import _fastjson as fast  # the sanitized build

    spec = schema.c_spec(schema.EVENT_FIELDS), schema.c_spec(schema.ARGS_FIELDS)
    ref_decoder = msgspec.json.Decoder(list[schema.Event])
    rng = random.Random(args.seed)
    pool = seeds()
    problem = collision_probe(fast, spec)
    executions = accepted = 0
    deadline = time.monotonic() + args.seconds
    corpus = list(pool)
    data = b""
    last = Path(args.out + ".last")  # the input being run, left behind if a sanitizer aborts
    while problem is None and time.monotonic() < deadline:
        data = mutate(rng.choice(corpus), pool, rng)
        last.write_bytes(data)
        seed = rng.getrandbits(64)
        problem, took = check(data, fast, ref_decoder, spec, seed, same)
        if problem is None:
            problem = check_stream(data, fast, spec, seed, rng, took, ref_decoder)
        if problem is None:
            problem, took_rows = check_int_rows(data, fast)
            took = took or took_rows
        executions += 1
        accepted += took
        if took and problem is None and len(corpus) < 5000:
            corpus.append(data)  # inputs the decoder takes are worth mutating further
    last.unlink(missing_ok=True)
    if problem:
        Path(args.out).write_bytes(data)
        print(f"FAIL after {executions} inputs: {problem}; input saved to {args.out}")
        return 1
    print(f"{executions} inputs in {args.seconds:.0f} s, {accepted} accepted by the C decoder and"
          " equal to the msgspec path, none crashed under ASan/UBSan")  # fmt: skip
    return 0


def main() -> int:
    return fuzz_main(__doc__, SOURCE, __file__, "C decoder", run, seconds=120,
                     out="fuzz-failure.json")  # fmt: skip


def fuzz_main(doc: str, source: Path, script: str, what: str, run, seconds: float, out: str) -> int:
    """A fuzzer's command line: build ``source`` sanitized into a temporary folder, then run
    ``script`` again there (``run(args)`` in the child) with the sanitizers preloaded."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=seconds)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--coverage", action="store_true", help="report gcov line coverage")
    parser.add_argument("--out", default=out)
    parser.add_argument("--build-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_dir:  # the child: run the loop
        return run(args)
    with tempfile.TemporaryDirectory() as folder:
        build(Path(folder), args.coverage, source)
        libs = [
            subprocess.run(
                ["gcc", f"-print-file-name={lib}"], capture_output=True, text=True
            ).stdout.strip()
            for lib in ("libasan.so", "libubsan.so")
        ]
        env = dict(
            os.environ,
            LD_PRELOAD=" ".join(libs),
            ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
            UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
            PYTHONPATH=str(ROOT),
            HTA_LITE_NO_C="",
        )
        child = [sys.executable, script, "--build-dir", folder, "--seconds", str(args.seconds),
                 "--seed", str(args.seed), "--out", args.out]  # fmt: skip
        print(f"fuzzing the sanitized {what} for {args.seconds:.0f} s (seed {args.seed})")
        status = subprocess.run(child, env=env).returncode
        if args.coverage:
            report = subprocess.run(
                ["gcov", "-n", "-o", folder, str(Path(folder) / source.name)],
                capture_output=True, text=True, cwd=folder,
            )  # fmt: skip
            print(next((line for line in report.stdout.splitlines() if "Lines" in line), "?"))
        if status:
            print(
                f"the sanitized {what} failed (exit {status}); see above, and {args.out}.last"
                " for the input of a sanitizer abort",
                file=sys.stderr,
            )
        return 1 if status else 0


if __name__ == "__main__":
    sys.exit(main())
