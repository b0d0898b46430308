"""Bad-input corpus: each case derived from a real trace, with its exact expected outcome.

    python tests/bad_corpus.py OUT_DIR     # writes one folder per case, for manual runs

Each case is ``(writer, expected)``: ``writer(folder)`` creates the folder's files; ``expected``
is an error class with a message fragment, or the health counters the load must report.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import sys
from pathlib import Path

from hta_lite.errors import DuplicateRankError, TraceDecodeError, TraceFormatError, TraceReadError

SOURCE = (
    Path(__file__).resolve().parents[1]
    / "sample_traces"
    / "h100_bert_small"
    / "gaunernst_bert-small-uncased__1016001.json.gz"
)


def source_document() -> dict:
    return json.loads(gzip.decompress(SOURCE.read_bytes()))


def _kernels(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]


def _write(folder: Path, doc, name: str = "rank0.json", gz: bool = False) -> None:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    (folder / name).write_bytes(gzip.compress(data) if gz else data)


def _edit(change):
    """Writer that applies ``change(doc)`` to the source trace."""

    def writer(folder: Path) -> None:
        doc = source_document()
        change(doc)
        _write(folder, doc)

    return writer


def _set_on_kernels(n: int, key: str, value, in_args: bool = False):
    def change(doc):
        for e in _kernels(doc)[:n]:
            if value is _DELETE:
                e.pop(key)
            elif in_args:
                e["args"][key] = value
            else:
                e[key] = value

    return change


_DELETE = object()


def _raw_replace(old: bytes, new: bytes, count: int):
    def writer(folder: Path) -> None:
        data = json.dumps(source_document()).encode()
        assert data.count(old) >= count, old
        _write(folder, data.replace(old, new, count))

    return writer


def _duplicate_correlation(doc):
    runtime = [
        e
        for e in doc["traceEvents"]
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    ]
    clone = copy.deepcopy(runtime[0])
    clone["ts"] += 1
    doc["traceEvents"].append(clone)


def _kernel_without_launch(doc):
    clone = copy.deepcopy(_kernels(doc)[0])
    clone["args"]["correlation"] = 999999999
    doc["traceEvents"].append(clone)


def _launch_without_kernel(doc):
    runtime = next(e for e in doc["traceEvents"] if e.get("name") == "cudaLaunchKernel")
    clone = copy.deepcopy(runtime)
    clone["args"]["correlation"] = 888888888
    doc["traceEvents"].append(clone)


def _overlap_on_stream(doc):
    first, second = sorted(_kernels(doc), key=lambda e: e["ts"])[:2]
    second["ts"] = first["ts"] + first["dur"] / 2


def _symlink_loop(folder: Path) -> None:
    _write(folder, source_document())
    os.symlink(folder / "loop.json", folder / "loop.json")


def _dangling(folder: Path) -> None:
    _write(folder, source_document())
    os.symlink(folder / "missing.json", folder / "rank1.json")


def _two_same_rank(folder: Path) -> None:
    doc = source_document()
    doc["distributedInfo"] = {"rank": 0, "world_size": 2}
    _write(folder, doc, "a.json")
    _write(folder, doc, "b.json.gz", gz=True)


def _non_utf8(folder: Path) -> None:
    data = json.dumps(source_document()).encode()
    name = _kernels(source_document())[0]["name"].encode()
    _write(folder, data.replace(name, name[:5] + b"\xff\xfe" + name[5:], 1))


CASES = {
    "truncated_gzip": (
        lambda f: (f / "rank0.json.gz").write_bytes(SOURCE.read_bytes()[:20000]),
        (TraceReadError, "gzip"),
    ),
    "truncated_json": (
        lambda f: _write(f, json.dumps(source_document()).encode()[:50000]),
        (TraceDecodeError, "truncated"),
    ),
    "empty_file": (lambda f: _write(f, b""), (TraceDecodeError, "empty")),
    "whitespace_file": (lambda f: _write(f, b" \n\t\r\n"), (TraceDecodeError, "empty")),
    "json_list": (lambda f: _write(f, [1, 2, 3]), (TraceFormatError, "JSON list")),
    "json_object_not_a_trace": (
        lambda f: _write(f, {"hello": "world"}),
        (TraceFormatError, "no 'traceEvents'"),
    ),
    "execution_trace": (  # torch.profiler.ExecutionTraceObserver's output, often mistaken for it
        lambda f: _write(f, {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "nodes": [{"id": 1}]}),
        (TraceFormatError, "a PyTorch execution trace .*prof.export_chrome_trace"),
    ),
    "trace_events_not_a_list": (
        lambda f: _write(f, {"traceEvents": {"a": 1}}),
        (TraceFormatError, "not a JSON list"),
    ),
    "missing_ts": (
        _edit(_set_on_kernels(3, "ts", _DELETE)),
        {"complete event without a valid ts (dropped)": 3},
    ),
    "null_ts": (
        _edit(_set_on_kernels(2, "ts", None)),
        {"complete event without a valid ts (dropped)": 2},
    ),
    "nan_ts": (
        _raw_replace(b'"ts": 1', b'"ts": NaN, "x": 1', 4),
        {
            "NaN/Infinity literals (read as null)": 4,
            "complete event without a valid ts (dropped)": 4,
        },
    ),
    "string_ts": (
        _edit(_set_on_kernels(2, "ts", "not a number")),
        {"complete event without a valid ts (dropped)": 2},
    ),
    "negative_dur": (_edit(_set_on_kernels(5, "dur", -3.5)), {"negative dur (clamped to 0)": 5}),
    "missing_dur": (
        _edit(_set_on_kernels(2, "dur", _DELETE)),
        {"complete event without a valid dur (dur set to 0)": 2},
    ),
    "huge_dur": (
        _edit(_set_on_kernels(1, "dur", 1.8e13)),
        {"complete event with implausible dur (> 10x the trace span; dropped)": 1},
    ),
    "non_numeric_stream": (
        _edit(_set_on_kernels(4, "stream", "seven", in_args=True)),
        {"non-numeric or out-of-range args.stream (stored as -1)": 4},
    ),
    "unknown_phase": (
        _edit(lambda d: d["traceEvents"].extend([{"ph": "Z", "name": "?", "ts": 1}] * 3)),
        {"unsupported phase 'Z' (ignored)": 3},
    ),
    "event_not_an_object": (
        _edit(lambda d: d["traceEvents"].extend([7, "x"])),
        {"event is not a JSON object": 2},
    ),
    "duplicate_correlation": (
        _edit(_duplicate_correlation),
        {"runtime calls sharing a correlation id (first kept for linking)": 1},
    ),
    "kernel_without_launch": (
        _edit(_kernel_without_launch),
        {"GPU events without a launching call in the trace": 1},
    ),
    "launch_without_kernel": (
        _edit(_launch_without_kernel),
        {"launch calls without a GPU event in the trace": 23},
    ),
    "overlap_on_one_stream": (
        _edit(_overlap_on_stream),
        {
            "GPU events overlapping an earlier event on the same stream (the earlier ends"
            " clipped to the next start: 1.6 µs removed)": 1
        },
    ),
    "non_utf8_bytes": (
        _non_utf8,
        {"invalid UTF-8 bytes or unpaired surrogate escapes (replaced by U+FFFD)": 2},
    ),
    "symlink_loop": (_symlink_loop, (TraceReadError, "loop.json")),
    "dangling_symlink": (_dangling, (TraceReadError, "rank1.json")),
    "same_rank_twice": (_two_same_rank, (DuplicateRankError, "rank 0")),
}


def write_case(name: str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    CASES[name][0](folder)
    return folder


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for case in CASES:
        write_case(case, out / case)
    print(f"wrote {len(CASES)} cases under {out}")
