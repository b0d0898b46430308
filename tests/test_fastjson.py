"""The optional C decoder (``hta_lite.load._fastjson``) gives exactly what the msgspec path gives,
or declines (returns None) and leaves the trace to the msgspec path. Skipped when it is not
built."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pandas as pd
import pytest
from conftest import shared_cases
from fuzz.fuzz_decoder import colliding_names
from fuzz.fuzz_decoder import same as _same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hta_lite.load import decode as dec
from hta_lite.load import rank_trace, schema
from hta_lite.load.events import EventColumns, EventList

fastjson = pytest.importorskip(
    "hta_lite.load._fastjson", reason="the C decoder is not built (no C compiler at install)"
)
if dec._fastjson is None:
    pytest.skip("HTA_LITE_NO_C is set", allow_module_level=True)

ARGS_FIELDS = dec.Args.__struct_fields__
EVENT_FIELDS = tuple(f.name for f in schema.EVENT_FIELDS)


def _c(text: bytes) -> EventColumns | None:
    return dec.decode_with_c(text)


def _msgspec(text: bytes) -> EventList:
    return EventList(dec._events_decoder.decode(text), dec._EMPTY_ARGS)


def _assert_same_as_msgspec(text: bytes) -> None:
    fast, ref = _c(text), _msgspec(text)
    assert fast is not None, "declined"
    assert len(fast) == len(ref)
    for name in EVENT_FIELDS:
        assert _same(fast.field(name), ref.field(name)), name
    rows = np.arange(len(ref))[::2]  # the numbered (coded) views, on every row and on a subset
    for view, ref_view in ((fast, ref), (fast.take(rows), ref.take(rows))):
        for name in ("ph", "cat", "name", "pid", "tid"):
            codes, values = view.factorized(name)
            ref_codes, ref_values = ref_view.factorized(name)
            assert codes.tolist() == ref_codes.tolist() and _same(values, ref_values), name
        codes, combos = view.combinations(("ph", "cat", "pid", "tid"))
        ref_codes, ref_combos = ref_view.combinations(("ph", "cat", "pid", "tid"))
        assert codes.tolist() == ref_codes.tolist() and _same(combos, ref_combos)
        pd.testing.assert_extension_array_equal(view.category("name"), ref_view.category("name"))
    fast_args, ref_args = fast.args(), ref.args()
    for name in ARGS_FIELDS:
        assert _same(fast_args.field(name), ref_args.field(name)), f"args.{name}"
    int_args = [f.name for f in schema.ARGS_FIELDS if f.kind == schema.Kind.INT_STR]
    for view, ref_view in ((fast_args, ref_args), (fast.take(rows).args(), ref.take(rows).args())):
        for name in int_args:  # int64 straight from the decoder, on every row and a subset
            (values, bad), (ref_values, ref_bad) = view.ints(name), ref_view.ints(name)
            assert values.tolist() == ref_values.tolist() and bad == ref_bad, f"args.{name}"
    for name in ("ts", "dur"):
        ns, valid, n_subns = fast.times(name)
        ref_ns, ref_valid, ref_subns = ref.times(name)
        assert valid.tolist() == ref_valid.tolist(), name
        assert ns[valid].tolist() == ref_ns[ref_valid].tolist(), name
        assert n_subns == ref_subns, name


ACCEPTED = {
    "escapes in kept strings": [
        {"ph": "X", "name": 'a"b\\c/\b\f\n\r\t\u00e9\U0001f600', "cat": "ü☃"}
    ],
    "repeated keys: the last wins": '[{"ph": "X", "name": "a", "name": "b", "ts": 1, "ts": 2.5,'
    ' "args": {"stream": 7}, "args": null}]',
    "empty events": [{}, {"ph": ""}],
    "negative zeros (an integer -0 is the float 0.0, as msgspec reads it)": '[{"args": '
    '{"memory bandwidth (GB/s)": -0}}, {"args": {"memory bandwidth (GB/s)": -0.0}},'
    ' {"args": {"memory bandwidth (GB/s)": -0e0}}, {"id": -0.0, "args": {"name": -0}}]',
    "a key few rows hold (a sparse column)": [{"ph": "X", "args": {"stream": 7}}, *[{}] * 9],
    "times": [
        {"ph": "X", "ts": t, "dur": d}
        for t, d in (
            ("-5.5", "0"),
            ("-0", "1.25"),
            ("1712195495519689.047", "null"),
            ("0.001", "12"),
        )
    ],
    "times below a nanosecond": [
        {"ph": "X", "ts": t, "dur": d}
        for t, d in (("1.0001", "0.123456789012"), ("-2.0005", "7.1230"), ("3.000000000001", "1"))
    ],
    "any-typed values": [
        {
            "ph": "M",
            "id": [1, {"a": [True, False, None, 1.5e3, "x"]}],
            "args": {"name": "n", "labels": "l", "sort_index": 3},
        },
        {"ph": "s", "id": -3},
        {"ph": "f", "id": "abc"},
        {"ph": "t", "id": 12345678901234567},
    ],
    "typed args": [
        {
            "ph": "X",
            "cat": "kernel",
            "args": {
                "memory bandwidth (GB/s)": 3,
                "grid": [1, 2, 3],
                "block": "x",
                "Process Group Ranks": [0, 1],
                "stream": "7",
                "Collective name": "allreduce",
                "External id": -2,
                "dtype": None,
            },
        },
        {
            "ph": "X",
            "args": {"memory bandwidth (GB/s)": 2.5, "grid": None, "block": [], "Group size": 8},
        },
    ],
    # integer args come back as int64 arrays (no object per value): dense, sparse, negative,
    # 18 digits, a key repeated (the last wins), args repeated (the last object wins)
    "integer args": '[{"ph": "X", "args": {"correlation": 123456789012345678, "stream": -7,'
    ' "stream": 8}}, {"ph": "X", "args": {"correlation": 2, "External id": 5}},'
    ' {"ph": "X", "args": {"correlation": 3}, "args": {"device": 1}}, {"ph": "X"}]',
    "text among integer args": [
        {"ph": "X", "args": {"correlation": 1, "External id": "x"}},
        {"ph": "X", "args": {"correlation": "2", "External id": 3}},
        {"ph": "X", "args": {"External id": 4}},
    ],
    "unknown keys of any shape": [
        {
            "ph": "X",
            "Input Dims": [[1, 2], []],
            "x": {"y": [1, "]", {"z": None}], "w": -1.5e-3},
            "args": {"Record function id": ["float", ""]},
        }
    ],
    "operator inputs kept as JSON text, as written": '[{"ph": "X", "args": {"Input Dims": [[2,'
    ' 3],\n [ ]], "Input type": ["c10::BFloat16", "\\u00e9"], "Input Strides": null,'
    ' "Concrete Inputs": ["", "1.5e3", {"a": true}]}}, {"args": {"Input Dims": 7}}]',
    "pids as text": [{"ph": "X", "pid": "Spans", "tid": None}, {"ph": "X", "pid": 3, "tid": "t"}],
    "equal values held by distinct objects": '[{"ph": "X", "name": "AB", "pid": 1000},'
    ' {"ph": "X", "name": "\\u0041B", "pid": 2024}, {"ph": "X", "name": "AB", "pid": 1000}]',
}


def _text(case) -> bytes:
    return case.encode() if isinstance(case, str) else json.dumps(case).encode()


def _times_text(events: list) -> bytes:
    parts = [
        ", ".join(
            f'"{k}": {v}' if k in ("ts", "dur") else f'"{k}": {json.dumps(v)}'
            for k, v in ev.items()
        )
        for ev in events
    ]
    return ("[" + ", ".join("{" + p + "}" for p in parts) + "]").encode()


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_accepted_cases_decode_like_msgspec(case):
    events = ACCEPTED[case]
    text = _times_text(events) if case.startswith("times") else _text(events)
    _assert_same_as_msgspec(text)
    _assert_same_as_msgspec(
        json.dumps(json.loads(text), indent=2).encode()
    )  # whitespace everywhere


DECLINED = {
    "escaped key": b'[{"ph": "X", "n\\u0061me": "a"}]',
    "ts with an exponent": b'[{"ph": "X", "ts": 1e3}]',
    "ts with more than 12 decimals": b'[{"ph": "X", "ts": 1.0000000000001}]',
    "ts at 9e15 us": b'[{"ph": "X", "dur": 9000000000000000}]',
    "ts quoted": b'[{"ph": "X", "ts": "12"}]',
    "ts boolean": b'[{"ph": "X", "dur": true}]',
    "ts beyond 9e15 us": b'[{"ph": "X", "ts": 10000000000000000}]',
    "float pid": b'[{"ph": "X", "pid": 1.5}]',
    "19-digit integer": b'[{"ph": "X", "tid": 1234567890123456789}]',
    "unknown phase": b'[{"ph": "Q"}]',
    "phase not text": b'[{"ph": 1}]',
    "leading zero": b'[{"ph": "X", "a": 01}]',
    "control character": b'[{"ph": "X", "a": "x\x01"}]',
    "invalid UTF-8 in a kept string": b'[{"ph": "X", "name": "\xff"}]',
    "lone surrogate": b'[{"ph": "X", "name": "\\ud800"}]',
    "event not an object": b"[1]",
    "trailing text": b'[{"ph": "X"}] x',
    "trailing comma": b'[{"ph": "X",}]',
    "null where int or text": b'[{"ph": "X", "args": {"stream": null}}]',
    "float in an integer arg": b'[{"ph": "X", "args": {"correlation": 1.5}}]',
    "19-digit integer arg": b'[{"ph": "X", "args": {"correlation": 1234567890123456789}}]',
    "grid of floats": b'[{"ph": "X", "args": {"grid": [1.5]}}]',
    "args not an object": b'[{"ph": "X", "args": []}]',
    "float overflow": b'[{"ph": "X", "id": 1e999}]',
    "truncated": b'[{"ph": "X", "name": "a',
    "lone surrogate in a skipped string": b'[{"ph": "X", "zz": "\\udc00"}]',
    "unpaired surrogate in a skipped string": b'[{"ph": "X", "zz": "\\ud83dx"}]',
}


@pytest.mark.parametrize("case", sorted(DECLINED))
def test_declines_what_it_does_not_handle(case):
    assert dec.decode_with_c(DECLINED[case]) is None


def test_declined_trace_still_loads_through_msgspec(tmp_path):
    (tmp_path / "rank0.json").write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1,'
        ' "ts": 1e3, "dur": 5}]}'
    )
    decoded = dec.read_and_decode(tmp_path / "rank0.json")
    assert isinstance(decoded.events, EventList)
    assert rank_trace.parse_file(tmp_path / "rank0.json").cpu["ts"].tolist() == [1_000_000]


@pytest.mark.parametrize("case", sorted(shared_cases()))
def test_shared_traces_give_the_same_tables_on_both_paths(case, monkeypatch):
    for path in sorted(shared_cases()[case].iterdir()):
        assert isinstance(dec.read_and_decode(path).events, EventColumns), (
            "the C decoder declined a real trace"
        )
        fast = rank_trace.parse_file(path)
        monkeypatch.setattr(dec, "_fastjson", None)
        slow = rank_trace.parse_file(path)
        monkeypatch.undo()
        for name in (
            "gpu",
            "cpu",
            "gpu_annotations",
            "steps",
            "instants",
            "flows",
            "counters",
            "meta_events",
        ):
            pd.testing.assert_frame_equal(
                getattr(fast, name), getattr(slow, name), check_exact=True, obj=name
            )
        assert fast.health == slow.health and fast.events_read == slow.events_read


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(
        ["Spans", "X", "s", "kernel", "\\", '"', "\u2603", "\ud83d", "\udc00", "\ud83d\ude00"]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
STRS = (
    st.none() | st.text(max_size=6) | st.sampled_from(["\\", '"', "\u2603", "\ud83d", "\x00", "\n"])
)
INTS = st.integers(-(2**70), 2**70)
NUMBERS = (
    INTS
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.decimals(-(10**17), 10**17, allow_nan=False, allow_infinity=False, places=4).map(float)
)


def _mostly(right):
    """The right type three times in four, any JSON value otherwise."""
    return st.one_of(right, right, right, VALUES)


ARGS_VALUES = {field.encode_name: VALUES for field in msgspec.structs.fields(dec.Args)} | {
    "stream": INTS | STRS,
    "correlation": INTS | STRS,
    "External id": INTS,
    "memory bandwidth (GB/s)": NUMBERS | STRS,
    "grid": st.lists(INTS, max_size=3) | STRS,
    "Collective name": STRS,
    "Process Group Ranks": VALUES,
    "zz": VALUES,
}
ANY_EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": _mostly(st.sampled_from(["X", "s", "f", "M", "", "i"])),
        "cat": _mostly(STRS),
        "name": _mostly(STRS),
        "s": _mostly(STRS),
        "pid": _mostly(INTS | STRS),
        "tid": _mostly(INTS | STRS),
        "ts": _mostly(NUMBERS),
        "dur": _mostly(NUMBERS),
        "id": VALUES,
        "zz": VALUES,
        "args": _mostly(
            st.fixed_dictionaries(
                {}, optional={key: _mostly(value) for key, value in ARGS_VALUES.items()}
            )
        ),
    },
)


@settings(
    max_examples=600, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(events=st.lists(ANY_EVENT, max_size=3), ascii_only=st.booleans())
def test_random_events_decode_like_msgspec_or_decline(events, ascii_only):
    """Never accepts what msgspec rejects; whatever it accepts equals msgspec's result."""
    try:
        text = json.dumps(events, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    except UnicodeEncodeError:
        return
    try:
        _msgspec(text)
    except msgspec.MsgspecError:
        assert _c(text) is None
        return
    if _c(text) is not None:
        _assert_same_as_msgspec(text)


TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)  # no lone surrogates
PLAIN_TIME = (
    st.integers(-(10**15), 10**15)
    | st.decimals(-(10**12), 10**12, places=3).map(lambda d: f"{d:f}")
    | st.floats(-1e6, 1e6).map(lambda f: f"{f:.7f}")
)  # float-written, below a ns


@settings(max_examples=300, deadline=None, derandomize=True)
@given(value=VALUES, ascii_only=st.booleans(), key=st.sampled_from(["zz", "id"]))
def test_any_value_is_skipped_or_built_like_msgspec(value, ascii_only, key):
    """An unknown key's value (validated, dropped) or an any-typed one (built), alone in an
    event."""
    text = json.dumps([{"ph": "X", key: value}], ensure_ascii=ascii_only).encode(
        "utf-8", "surrogatepass"
    )
    try:
        _msgspec(text)
    except msgspec.MsgspecError:
        assert _c(text) is None
        return
    if (
        _c(text) is not None or key == "zz"
    ):  # dropped values are never declined when msgspec takes them
        _assert_same_as_msgspec(text)


PLAIN_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
PLAIN_EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(list("XisfMC") + [""])},
    optional={
        "cat": st.none() | TEXT,
        "name": st.none() | TEXT,
        "pid": st.none() | st.integers(-(10**18) + 1, 10**18 - 1) | TEXT,
        "tid": st.integers(0, 10**6),
        "ts": PLAIN_TIME,
        "dur": PLAIN_TIME,
        "id": st.integers(0, 10**12) | TEXT,
        "s": st.sampled_from(["t", "p", "g"]),
        "args": st.none()
        | st.fixed_dictionaries(
            {},
            optional={
                "stream": st.integers(-1, 99),
                "correlation": st.integers(0, 10**9),
                "grid": st.lists(st.integers(0, 65535), max_size=3),
                "memory bandwidth (GB/s)": st.floats(0, 1e4),
                "Collective name": TEXT,
                "Input Dims": PLAIN_VALUES,
            },
        ),
    },
)


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    events=st.lists(PLAIN_EVENT, max_size=6),
    indent=st.sampled_from([None, 1]),
    ascii_only=st.booleans(),
)
def test_plain_kineto_events_take_the_c_path(events, indent, ascii_only):
    """Events of the shapes real traces have are never declined (decimal ts / dur written as
    JSON numbers)."""
    decimals = {}
    for ev in events:  # decimal texts become placeholders, then bare JSON numbers
        for key in ("ts", "dur"):
            if isinstance(ev.get(key), str):
                decimals[f"@{len(decimals)}@"] = ev[key]
                ev[key] = f"@{len(decimals) - 1}@"
    text = json.dumps(events, indent=indent, ensure_ascii=ascii_only)
    for marker, number in decimals.items():
        text = text.replace(f'"{marker}"', number)
    _assert_same_as_msgspec(text.encode())


def test_times_are_exact_nanoseconds():
    fast = _c(
        b'[{"ts": 1712195495519689.047, "dur": 0.5}, {"ts": -2.25}, {"dur": null},'
        b' {"ts": -0.0019, "dur": 1.0010}]'
    )
    ns, valid, n_subns = fast.times("ts")
    assert (
        ns[valid].tolist() == [1712195495519689047, -2250, -1] and n_subns == 1
    )  # truncated toward zero
    fast = _c(b'[{"ts": 1712195495519689.047, "dur": 0.5}, {"ts": -2.25}, {"dur": null}]')
    ns, valid, n_subns = fast.times("ts")
    assert (
        ns[valid].tolist() == [1712195495519689047, -2250]
        and valid.tolist() == [True, True, False]
        and n_subns == 0
    )
    dur, valid, _ = fast.times("dur")
    assert dur[valid].tolist() == [500] and valid.tolist() == [True, False, False]
    assert np.asarray(fast.field("ph")).tolist() == ["", "", ""]


def test_colliding_names_cost_a_bounded_number_of_probes():
    """Names crafted to collide in the string table (possible only knowing the seed, which is
    random per process) cost at most MAX_PROBES (32) slots each, not one per earlier name."""
    seed, names = 12345, colliding_names(12345, 1500)
    text = json.dumps([{"name": n} for n in names]).encode()
    spec = schema.c_spec(schema.EVENT_FIELDS), schema.c_spec(schema.ARGS_FIELDS)
    out = fastjson.decode_events(text, *spec, seed)
    assert out["string_probes"] <= 32 * len(names)  # quadratic before: ~len(names) ** 2 / 2
    codes, distinct = out["coded"]["name"]
    assert [distinct[c] for c in np.frombuffer(codes, np.int32)] == names
    other = fastjson.decode_events(text, *spec, seed + 1)  # a seed the names were not made for
    assert other["string_probes"] < 4 * len(names)


def test_a_key_few_rows_hold_costs_memory_for_those_rows_only():
    """One event with every field, then many empty ones: each args column keeps its one value
    (no slot per row), so memory stays within a few bytes per input byte (the msgspec path
    takes about 33)."""
    import tracemalloc

    valid = {schema.Kind.OPT_STR: "x", schema.Kind.FLOAT_STR: 1.5, schema.Kind.TUPLE_STR_NULL: [1]}
    args = {f.key: valid.get(f.kind, 1) for f in schema.ARGS_FIELDS}
    full = {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 2, "id": 3, "s": "t",
            "ts": 1, "dur": 2, "args": args}  # fmt: skip
    text = (json.dumps([full])[:-1] + ", {}" * 200_000 + "]").encode()
    tracemalloc.start()
    columns = dec.decode_with_c(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak / len(text) < 25  # about 150 bytes per input byte before
    assert columns.args().field("stream")[:2] == [1, -1]
    assert len(columns.args().field("stream")) == 200_001
    assert columns.take(np.array([0, 5])).args().field("group_size") == [1, -1]


# ---- int_rows: the raw memory timeline ------------------------------------------------------

INT_ROWS_TAKEN = [
    (b"[]", []),
    (b" [ [1, 2] ,[3,-4]]\n", [[1, 2], [3, -4]]),
    (b"[[0,-0]]", [[0, 0]]),
    (b"[[9223372036854775807,-9223372036854775808]]", [[2**63 - 1, -(2**63)]]),
    # eight digits at a time: 8, 9, 16, 17 and 19 digits
    (b"[[12345678,-123456789]]", [[12345678, -123456789]]),
    (b"[[1234567890123456,12345678901234567]]", [[1234567890123456, 12345678901234567]]),
    (b"[[1000000000000000000,-1696966048083248105]]", [[10**18, -1696966048083248105]]),
]
INT_ROWS_DECLINED = [
    b"", b"[", b"[[1,2]", b"[[1,2],]", b"[[1,2]]x", b"[[1,2],[3]]", b"[[1,2,3]]", b"[[01,2]]",
    b"[[1.0,2]]", b"[[1e3,2]]", b"[[+1,2]]", b"[[-,2]]", b"[[9223372036854775808,1]]",
    b"[[-9223372036854775809,1]]", b"[[99999999999999999999,1]]", b'[["1",2]]', b"[[1,null]]",
    b"{}", b"[[00000000,1]]", b"[[0123456789,1]]", b"[[18446744073709551616,1]]",
    b"[[12345678a,1]]", b"[[1234567812345678.5,1]]",
]  # fmt: skip


@pytest.mark.parametrize("text, rows", INT_ROWS_TAKEN)
def test_int_rows_reads_rows_of_integers(text, rows):
    got = dec.int_rows(text, 2)
    assert got.dtype == np.int64 and got.reshape(-1, 2).tolist() == rows


@pytest.mark.parametrize("text", INT_ROWS_DECLINED)
def test_int_rows_declines_anything_else(text):
    assert dec.int_rows(text, 2) is None


PLAIN_ROWS = [
    b"[0, -0]", b"[-1, 7]", b"[12345678, -123456789]", b"[1234567890123456, 12345678901234567]",
    b"[9223372036854775807, -9223372036854775808]", b"[01, 2]", b"[-01, 2]", b"[00, 2]",
    b"[9223372036854775808, 1]", b"[-9223372036854775809, 1]", b"[99999999999999999999, 1]",
    b"[1.5, 2]", b"[1e3, 2]", b"[-, 2]", b"[1, 2 ]", b"[1,  2]", b"[1,2]", b"[ 1, 2]",
    b"[1, 2, 3]", b"[1]", b"[1, null]", b"[1, -]", b"[123456781234567812, 1]",
]  # fmt: skip


@pytest.mark.parametrize("row", PLAIN_ROWS)
@pytest.mark.parametrize("after", [b", ", b",\n ", b"]"])
def test_int_rows_plain_layout_equals_msgspec(row, after):
    """Rows in the layout the fast path reads (``row_plain``: ", " after each comma, room to
    spare after the row): the same values, and the same declines, as msgspec's."""
    padding = b", ".join([b"[0, 0]"] * 40)
    text = b"[" + row + (after + padding + b"]" if after != b"]" else b"]" + b" " * 200)
    try:
        expected = msgspec.json.decode(text, type=list[tuple[int, int]])
        expected = np.array(expected, np.int64).tolist()
    except (msgspec.DecodeError, msgspec.ValidationError, OverflowError):
        expected = None
    got = dec.int_rows(text, 2)
    assert (None if got is None else got.reshape(-1, 2).tolist()) == expected


@given(st.lists(st.tuples(*[st.integers(-(2**63), 2**63 - 1)] * 4), max_size=30), st.booleans())
def test_int_rows_equal_msgspec(rows, indent):
    text = json.dumps(rows, indent=1 if indent else None).encode()
    expected = msgspec.json.decode(text, type=list[tuple[int, int, int, int]])
    assert dec.int_rows(text, 4).tolist() == [list(r) for r in expected]
