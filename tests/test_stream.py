"""A large file decoded in pieces (``hta_lite.load.stream``) gives exactly the tables of the
whole-text path, declines whatever it does not take (the whole-text path then decides), and
never holds the whole text."""

from __future__ import annotations

import gzip
import json
import os
import tracemalloc

import msgspec
import pytest
from conftest import DATA, SAMPLES, sample_folders, shared_cases
from fuzz.fuzz_decoder import compare, feed_in_pieces, same
from table_digest import trace_digests

from hta_lite.errors import TraceReadError
from hta_lite.load import decode as dec
from hta_lite.load import rank_trace, schema, stream

if dec._fastjson is None:
    pytest.skip("the C decoder is not built (or HTA_LITE_NO_C is set)", allow_module_level=True)

SPEC = (dec._C_EVENT_SPEC, dec._C_ARGS_SPEC)
SOURCE = SAMPLES / "two_ranks" / sorted(p.name for p in (SAMPLES / "two_ranks").iterdir())[0]


def _events_text(n: int) -> bytes:
    events = json.loads(gzip.decompress(SOURCE.read_bytes()))["traceEvents"][:n]
    return json.dumps(events, indent=1).encode()


def _feed(text: bytes, cuts: list[int]):
    return feed_in_pieces(dec._fastjson, text, SPEC, 7, cuts)


def test_every_cut_gives_what_the_whole_text_gives():
    text = _events_text(12)
    ref = msgspec.json.Decoder(list[schema.Event])
    for cut in range(1, len(text)):
        assert compare(text, _feed(text, [cut]), ref, same) is None, cut


def test_many_small_pieces():
    text = _events_text(400)
    ref = msgspec.json.Decoder(list[schema.Event])
    assert compare(text, _feed(text, list(range(1, len(text), 37))), ref, same) is None


@pytest.mark.parametrize(
    "text",
    [b"[{}, ]", b"[{}", b'[{"ts": NaN}]', b"[{}] x", b'[{"ph": 1}]', b"[1]", b"[{},,{}]"],
)
def test_what_the_whole_text_would_decline_is_declined(text):
    assert dec._fastjson.decode_events(text, *SPEC, 7) is None
    assert _feed(text, [len(text) // 2]) is None


def test_a_value_cut_by_a_piece_is_not_judged_before_it_is_whole():
    """A float whose digits a piece cuts (its first 19+ digits read alone are an integer past
    int64, which a field declines) is read again whole: no cut declines what the whole text
    takes. A repeated key's first value past int64 declines both ways (the whole text reads it
    before the second replaces it). Found by the stream fuzzer (tests/fuzz/fuzz_decoder.py)."""
    text = b'[{"ph": "X", "name": "a", "id": -12345678901234567890123456789.5}]'
    ref = msgspec.json.Decoder(list[schema.Event])
    assert dec._fastjson.decode_events(text, *SPEC, 7) is not None
    for cut in range(1, len(text)):
        assert compare(text, _feed(text, [cut]), ref, same) is None, cut
    repeated = b'[{"ph": "X", "id": 12345678901234567890123, "id": 1}]'
    assert dec._fastjson.decode_events(repeated, *SPEC, 7) is None
    for cut in (0, 25, 40):
        assert _feed(repeated, [cut] if cut else []) is None, cut


RAW_TIMELINE = DATA / "memory_timeline" / "memory_timeline.raw.gz"  # not a Kineto trace
SNAPSHOTS = DATA / "snapshots"  # CUDA memory snapshots, not Kineto traces
NSYS = DATA / "nsys"  # Nsight Systems exports, not JSON (tests/test_nsys.py)


def _cases() -> dict:
    cases = dict(sample_folders())
    not_traces = (DATA, RAW_TIMELINE.parent, SNAPSHOTS, NSYS)
    for folder in sorted(p for p in DATA.glob("**/") if p not in not_traces):
        cases[f"data/{folder.relative_to(DATA)}"] = folder
    cases.update({f"shared/{k}": v for k, v in shared_cases().items()})
    return {
        f"{name}/{f.name}": f
        for name, folder in cases.items()
        for f in sorted(folder.iterdir())
        if f.name.endswith((".json", ".gz", ".pt")) and "traceinsight" not in f.name  # not answers
    }


@pytest.mark.parametrize("path", list(_cases().values()), ids=list(_cases()))
def test_tables_equal_the_whole_text_path(path, monkeypatch):
    """Every file of the repository and the workspace, forced through the pieces path in pieces
    of 64 KiB: the same tables, health, metadata and event counts."""
    whole = rank_trace.parse_file(path)
    monkeypatch.setattr(stream, "MIN_FILE_BYTES", 0)
    monkeypatch.setattr(stream, "PIECE_BYTES", 1 << 16)
    _assert_same_trace(rank_trace.parse_file(path), whole)


def _assert_same_trace(trace, whole) -> None:
    """The same tables, health, metadata and event counts."""
    assert trace_digests(trace) == trace_digests(whole)
    assert (trace.health, trace.metadata, trace.events_read) == (
        whole.health,
        whole.metadata,
        whole.events_read,
    )


def _trace_file(tmp_path, events: list, gz: bool = True, name: str = "t.json.gz"):
    doc = json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "x"}).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(doc) if gz else doc)
    return path


def test_counters_and_profiler_ranges_take_the_whole_text(tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "MIN_FILE_BYTES", 0)
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}
    counter = {"ph": "C", "name": "mem", "pid": 0, "ts": 1, "args": {"x": 1}}
    prange = {**kernel, "cat": "cuda_profiler_range"}
    assert stream.decode_in_pieces(_trace_file(tmp_path, [kernel])) is not None
    assert stream.decode_in_pieces(_trace_file(tmp_path, [kernel, counter])) is None
    assert stream.decode_in_pieces(_trace_file(tmp_path, [kernel, prange])) is None
    trace = rank_trace.parse_file(_trace_file(tmp_path, [kernel, counter]))
    assert len(trace.counters) == 1  # read by the whole-text path's second pass


def test_bad_gzip_and_layouts_leave_the_verdict_to_the_whole_text_path(tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "MIN_FILE_BYTES", 0)
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}
    path = _trace_file(tmp_path, [kernel] * 50)
    path.write_bytes(path.read_bytes()[:-30])  # truncated
    assert stream.decode_in_pieces(path) is None
    with pytest.raises(TraceReadError, match="corrupt or truncated gzip"):
        rank_trace.parse_file(path)
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([kernel]))
    assert stream.decode_in_pieces(listed) is None  # no "traceEvents": the whole-text path
    nan = tmp_path / "nan.json"
    nan.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": NaN}]}')
    assert stream.decode_in_pieces(nan) is None  # repaired by the whole-text path


@pytest.mark.parametrize("piece, join", [(3, 1), (7, 16), (100, 1 << 14), (4096, 8)])
def test_any_piece_and_join_size_gives_the_whole_text(tmp_path, monkeypatch, piece, join):
    """Pieces cut anywhere; the event cut at a piece's start completed from the next piece's
    first ``join`` bytes or, longer than that, from the whole of it."""
    path = _trace_file(tmp_path, json.loads(_events_text(300)))
    whole = rank_trace.parse_file(path)  # small: the whole-text path
    monkeypatch.setattr(stream, "MIN_FILE_BYTES", 0)
    monkeypatch.setattr(stream, "PIECE_BYTES", piece)
    monkeypatch.setattr(stream, "_JOIN_BYTES", join)
    assert stream.decode_in_pieces(path) is not None
    pieces = rank_trace.parse_file(path)
    assert trace_digests(pieces) == trace_digests(whole)
    assert pieces.metadata == whole.metadata == {"schemaVersion": 1, "traceName": "x"}


def test_the_array_ending_in_the_completing_bytes(monkeypatch):
    """The array's end among the first bytes of a piece: the rest of that piece is the tail."""
    monkeypatch.setattr(stream, "_JOIN_BYTES", 2)
    event = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}'
    pieces = [b'{"schemaVersion": 1, "traceEvents": [' + event[:20], event[20:], b'], "x": [5]}']
    decoded = stream._decode(iter(pieces), 200)
    assert len(decoded.events) == 1 and decoded.metadata == {"schemaVersion": 1, "x": [5]}


def test_several_gzip_members_and_plain_json(tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "MIN_FILE_BYTES", 0)
    monkeypatch.setattr(stream, "PIECE_BYTES", 100)
    text = gzip.decompress(SOURCE.read_bytes())
    half = len(text) // 2
    members = tmp_path / "members.json.gz"
    members.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]) + b"\0\0")
    plain = tmp_path / "plain.json"
    plain.write_bytes(text)
    whole = trace_digests(rank_trace.parse_file(SOURCE))
    for path in (members, plain):
        assert stream.decode_in_pieces(path) is not None
        assert trace_digests(rank_trace.parse_file(path)) == whole


def test_the_whole_text_is_never_in_memory(tmp_path, monkeypatch):
    """An 11 MB trace: the pieces path's peak is the whole-text path's less most of the text."""
    kernel = {"ph": "X", "cat": "kernel", "name": "void k<float>(int)", "pid": 0, "tid": 7,
              "ts": 1712195495519689.047, "dur": 2.5, "args": {"stream": 7}}  # fmt: skip
    monkeypatch.setattr(stream, "MIN_FILE_BYTES", 0)  # it compresses to 40 KB
    monkeypatch.setenv("HTA_LITE_MAX_INFLATE_RATIO", "1000")  # 250x: one event repeated
    path = _trace_file(tmp_path, [kernel] * 80_000)
    size = len(gzip.decompress(path.read_bytes()))
    peaks = []
    for decode in (stream.decode_in_pieces, dec.read_and_decode):
        tracemalloc.start()
        decoded = decode(path)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert len(decoded.events) == 80_000
    assert size > 10e6 and peaks[0] < peaks[1] - 0.75 * size  # a piece and a cut event held


def _split_everywhere(monkeypatch, piece: int = 1 << 16) -> list[bool]:
    """Every file through the pieces path with a second thread (whatever this machine's CPUs);
    returns the list the joins of the two threads' events are recorded in."""
    monkeypatch.setattr(stream, "MIN_FILE_BYTES", 0)
    monkeypatch.setattr(stream, "PIECE_BYTES", piece)
    monkeypatch.setattr(stream, "_two_threads", lambda size: True)
    joins: list[bool] = []
    fast = dec._fastjson

    class Spy:  # the C module, its joins recorded
        def __getattr__(self, name):
            return getattr(fast, name)

        def stream_join(self, first, second):
            joins.append(fast.stream_join(first, second))
            return joins[-1]

    monkeypatch.setattr(dec, "_fastjson", Spy())
    return joins


@pytest.mark.parametrize("path", list(_cases().values()), ids=list(_cases()))
def test_two_threads_give_the_tables_of_one(path, monkeypatch):
    """Every file of the repository and the workspace read by two threads (the second from the
    first event after the middle): the tables, health and metadata of the whole-text path."""
    whole = rank_trace.parse_file(path)
    joins = _split_everywhere(monkeypatch)
    _assert_same_trace(rank_trace.parse_file(path), whole)
    assert joins in ([], [True])  # one join, or none (e.g. a one-line text: no line to start at)


def test_the_second_thread_joins_on_kineto_layout(tmp_path, monkeypatch):
    events = json.loads(_events_text(300))
    text = b'{"traceEvents": [\n' + b",\n".join(b"  " + json.dumps(e).encode() for e in events)
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text + b'\n], "traceName": "x"}'))
    whole = trace_digests(rank_trace.parse_file(path))
    joins = _split_everywhere(monkeypatch, piece=1000)
    assert trace_digests(rank_trace.parse_file(path)) == whole
    assert joins == [True]


def test_a_line_opening_an_object_inside_an_event_is_not_taken(tmp_path, monkeypatch):
    """The second thread starts at the first line opening an object past the middle; here that
    line is inside an event (an args value), so the first thread does not stop there: it reads
    on alone, with the same result."""
    events = json.loads(_events_text(300))
    for event in events:  # a list of objects, one per line, in every event's args
        event.setdefault("args", {})["labels"] = [{"a": 1}, {"b": [2]}]
    text = json.dumps({"traceEvents": events, "traceName": "x"}, indent=1).encode()
    path = tmp_path / "t.json"
    path.write_bytes(text)
    whole = trace_digests(rank_trace.parse_file(path))
    joins = _split_everywhere(monkeypatch, piece=4096)
    middle = text.index(b'"labels"', len(text) // 2)  # the event's nested objects follow it
    monkeypatch.setattr(stream, "second_half_start", lambda size: middle)
    assert trace_digests(rank_trace.parse_file(path)) == whole
    assert joins == []  # the first thread stopped at the next event, not where the second began


def test_a_failing_second_thread_leaves_the_first_to_read_on(tmp_path, monkeypatch):
    path = _trace_file(tmp_path, json.loads(_events_text(300)))
    whole = trace_digests(rank_trace.parse_file(path))
    joins = _split_everywhere(monkeypatch, piece=1000)

    def fail(self, pieces, position):
        raise MemoryError

    monkeypatch.setattr(stream._SecondHalf, "_read", fail)
    assert trace_digests(rank_trace.parse_file(path)) == whole
    assert joins == []


def test_streams_are_joined_only_where_the_first_stopped():
    fast = dec._fastjson
    event = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}'
    body = b",".join([event] * 4) + b"]"
    first, second = fast.stream_open(*SPEC, 7, 16), fast.stream_open(*SPEC, 7, 16, True)
    assert not fast.stream_join(first, second)  # neither has read anything
    consumed, status = fast.stream_feed(first, body, False, 0, len(event) + 1)
    assert (consumed, status) == (len(event) + 1, 2)  # stopped at the second event
    assert not fast.stream_join(first, second)  # the second has not read to the array's end
    assert fast.stream_feed(second, body[consumed:], True) == (len(body) - consumed, 1)
    assert not fast.stream_join(first, first)
    assert fast.stream_join(first, second)
    assert not fast.stream_join(first, second)  # once
    out = fast.stream_result(first)
    assert out["n"] == 4 and out["coded"]["name"][1] == ["k"]  # one str for both streams' "k"
    with pytest.raises(ValueError, match="not read to its end"):
        fast.stream_result(second)


def _second_thread_allowed() -> bool:
    return stream.SECOND_THREAD


def test_pool_workers_read_alone_unless_cpus_are_left():
    """A pool of as many workers as CPUs leaves none for second threads; a smaller one does."""
    from hta_lite.load import workers

    cpus = os.cpu_count() or 1
    with workers.process_pool(cpus) as pool:
        assert pool.submit(_second_thread_allowed).result() is False
    if cpus > 1:
        with workers.process_pool(cpus - 1) as pool:
            assert pool.submit(_second_thread_allowed).result() is True
