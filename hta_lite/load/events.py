"""The decoded events of one file, read field by field.

Two containers with the same interface, so that :mod:`hta_lite.load.tables` does not care which
decoder ran:

- :class:`EventColumns`: one list per field, from the C decoder (``hta_lite.load._fastjson``); no
  Python object per event, equal strings shared, ``ts`` / ``dur`` and integer args already int64.
- :class:`EventList`: the msgspec structs of :mod:`hta_lite.load.decode` (the path taken without the
  C decoder, or for traces it declines).

Rows are selected with ``take(index)``; ``field(name)`` gives one value per row (the decoder's
default where the key was absent), ``times(name)`` gives ``(ns, valid, n_subns)`` as
:func:`hta_lite.load.timestamps.raw_us_to_ns` does, and ``args()`` the ``args`` keys as another
container with the same rows.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import numpy as np

from ..rows import first_seen
from .columns import (
    category_from_codes,
    combine_codes,
    factorize,
    float_column,
    int_column,
    take,
    to_category,
)
from .schema import RAW_FIELDS
from .timestamps import raw_us_to_ns


class EventList:
    """Events as decoded structs (``decode.Event`` or ``decode.Args``)."""

    def __init__(self, items: list, empty_args: Any = None):
        self.items = items
        self._empty_args = empty_args  # stands in for an event without args

    def __len__(self) -> int:
        return len(self.items)

    def field(self, name: str) -> list:
        values = list(map(attrgetter(name), self.items))
        if name in RAW_FIELDS:  # msgspec.Raw -> its text, as the C decoder gives it
            return [v if v is None else bytes(v).decode(errors="replace") for v in values]
        return values

    def ints(self, name: str) -> tuple[np.ndarray, int]:
        """The field as int64 (-1 when absent or unusable) and the count of unusable values."""
        return int_column(self.field(name))

    def holding(self, name: str) -> np.ndarray:
        """Positions of the rows whose field is not None (absent or null)."""
        return _not_none(self.field(name))

    def floats(self, name: str) -> np.ndarray:
        """The field as float64 (NaN when absent or not a number)."""
        return float_column(self.field(name))

    def factorized(self, name: str) -> tuple[np.ndarray, list]:
        """Each row's code among the distinct values of the field (first seen first), and the
        values."""
        return factorize(self.field(name))

    def category(self, name: str):
        """The field as a text categorical (see :func:`hta_lite.load.columns.to_category`)."""
        return to_category(self.field(name))

    def combinations(self, names: tuple) -> tuple[np.ndarray, list[tuple]]:
        """Each row's code among the distinct tuples of its ``names`` fields (first-seen order)."""
        return factorize(list(map(attrgetter(*names), self.items)))  # one pass over the structs

    def times(self, name: str) -> tuple[np.ndarray, np.ndarray, int]:
        return raw_us_to_ns(self.items, name)

    def take(self, index: np.ndarray) -> EventList:
        return EventList(take(self.items, index), self._empty_args)

    def args(self) -> EventList:
        raw = np.fromiter(map(attrgetter("args"), self.items), dtype=object, count=len(self.items))
        raw[np.equal(raw, None)] = self._empty_args
        return EventList(raw.tolist())


class EventColumns:
    """Events as one list per field (the C decoder's output), viewed through a row index."""

    def __init__(
        self,
        n: int,
        fields: dict[str, list],
        defaults: dict[str, Any],
        times: dict,
        args: EventColumns | None = None,
        index: np.ndarray | None = None,
        arrays: dict | None = None,
        coded: dict | None = None,
    ):
        self._n = n
        self._fields = fields
        self._coded = (
            {} if coded is None else coded
        )  # name -> (codes of every row, distinct values), text and pid / tid
        self._defaults = defaults
        # name -> (int64 ns, uint8 state: 0 invalid, 1 valid, 2 valid with sub-ns digits dropped)
        self._times = times
        self._args = args
        self._index = index
        self._index_sorted: bool | None = None  # found at the first sparse lookup
        self._arrays = (
            {} if arrays is None else arrays
        )  # name -> object ndarray of the field, made at the first take

    @classmethod
    def from_decoder(cls, out: dict, event_defaults: dict, args_defaults: dict) -> EventColumns:
        n = out["n"]
        times = {
            name: (
                np.frombuffer(out[name], np.int64),
                np.frombuffer(out[f"{name}_valid"], np.uint8),
            )
            for name in ("ts", "dur")
        }
        return cls(
            n,
            out["fields"],
            event_defaults,
            times,
            cls(n, out["args"], args_defaults, {}, coded=_coded(out["args_coded"])),
            coded=_coded(out["coded"]),
        )

    def __len__(self) -> int:
        return self._n if self._index is None else len(self._index)

    def field(self, name: str) -> list:
        values = self._fields.get(name)
        if values is None and name in self._coded:  # text and id fields come as codes alone
            codes, distinct = self._coded[name]
            codes = codes if self._index is None else codes[self._index]
            return np.fromiter(distinct, dtype=object, count=len(distinct))[codes].tolist()
        if values is None:
            return [self._defaults[name]] * len(self)
        if isinstance(values, tuple) and isinstance(values[1], bytes):  # integers, typed
            return self.ints(name)[0].tolist()
        if isinstance(values, tuple):  # (rows, values): a key few rows hold
            return self._sparse_field(name, *values)
        if self._index is None:
            return values
        array = self._arrays.get(name)
        if array is None and len(self._index) * 8 < len(values):  # a few rows: not worth an array
            return take(values, self._index)
        if array is None:  # numpy takes many rows 6x faster than a list comprehension does
            array = self._arrays[name] = np.fromiter(values, dtype=object, count=len(values))
        return array[self._index].tolist()

    def _sparse_field(self, name: str, rows: bytes, values: list) -> list:
        """One value per selected row of a column the decoder gave as (rows, values)."""
        hit, pos = self._held(rows)
        if len(hit) * 8 < len(self):  # a few rows hold it
            out = [self._defaults[name]] * len(self)
            for i, k in zip(hit.tolist(), pos.tolist()):
                out[i] = values[k]
            return out
        array = self._arrays.get(name)
        if array is None:
            array = self._arrays[name] = np.fromiter(values, dtype=object, count=len(values))
        out = np.full(len(self), self._defaults[name], dtype=object)
        out[hit] = array[pos]
        return out.tolist()

    def _held(self, rows: bytes) -> tuple[np.ndarray, np.ndarray]:
        """Of a sparse column's rows: the selected positions that hold a value, and where."""
        held = np.frombuffer(rows, np.int32)
        if self._index is None:
            return held.astype(np.int64), np.arange(len(held))
        wanted = self._index
        if len(wanted) == 0 or len(held) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        if self._index_sorted is None:
            self._index_sorted = bool(np.all(wanted[1:] > wanted[:-1]))
        if self._index_sorted:  # look the few held rows up among the selected ones
            at = np.searchsorted(wanted, held)
            ok = np.flatnonzero(wanted[np.minimum(at, len(wanted) - 1)] == held)
            return at[ok], ok
        pos = np.minimum(np.searchsorted(held, wanted), len(held) - 1)
        hit = np.flatnonzero(held[pos] == wanted)
        return hit, pos[hit]

    def holding(self, name: str) -> np.ndarray:
        values = self._fields.get(name)
        if values is None and name not in self._coded:  # no row has the key: its default
            return np.arange(len(self) if self._defaults[name] is not None else 0)
        if isinstance(values, tuple) and not isinstance(values[1], bytes) and values[0]:
            hit, pos = self._held(values[0])  # a key few rows hold: look at those rows only
            present = np.fromiter((v is not None for v in values[1]), bool, len(values[1]))
            return hit[present[pos]]
        return _not_none(self.field(name))

    def ints(self, name: str) -> tuple[np.ndarray, int]:
        values = self._fields.get(name)
        if isinstance(values, tuple) and isinstance(values[1], bytes):  # int64 from the decoder
            rows, array = values[0], np.frombuffer(values[1], np.int64)
            if rows is None:  # one value per row
                return (array.copy() if self._index is None else array[self._index]), 0
            hit, pos = self._held(rows)
            out = np.full(len(self), self._defaults[name], np.int64)
            out[hit] = array[pos]
            return out, 0
        if isinstance(values, tuple):  # sparse: convert the values held, not a list per row
            held, bad = int_column(values[1])
            if not bad:
                hit, pos = self._held(values[0])
                out = np.full(len(self), int_column([self._defaults[name]])[0][0], np.int64)
                out[hit] = held[pos]
                return out, 0
        return int_column(self.field(name))

    def floats(self, name: str) -> np.ndarray:
        values = self._fields.get(name)
        if isinstance(values, tuple):
            hit, pos = self._held(values[0])
            out = np.full(len(self), float_column([self._defaults[name]])[0], np.float64)
            out[hit] = float_column(values[1])[pos]
            return out
        return float_column(self.field(name))

    def factorized(self, name: str) -> tuple[np.ndarray, list]:
        if name not in self._fields and name not in self._coded:  # no row holds it
            return np.zeros(len(self), np.int64), [self._defaults[name]] if len(self) else []
        if name not in self._coded:
            return factorize(self.field(name))
        codes, distinct = self._coded[name]
        codes = codes if self._index is None else codes[self._index]
        renumbered, rows = first_seen(codes)
        return renumbered, [distinct[c] for c in codes[rows].tolist()]

    def category(self, name: str):
        return category_from_codes(*self.factorized(name))

    def combinations(self, names: tuple) -> tuple[np.ndarray, list[tuple]]:
        """As :meth:`EventList.combinations`, from each field's codes combined in numpy."""
        fields = [self.factorized(name) for name in names]
        codes, rows = combine_codes([field_codes for field_codes, _ in fields])
        return codes, list(
            zip(
                *([values[c] for c in field_codes[rows].tolist()] for field_codes, values in fields)
            )
        )

    def times(self, name: str) -> tuple[np.ndarray, np.ndarray, int]:
        ns, state = self._times[name]
        if self._index is None:
            ns = ns.copy()  # a read-only view of the decoder's buffer otherwise
        else:
            ns, state = ns[self._index], state[self._index]
        return ns, state != 0, int(np.count_nonzero(state == 2))

    def take(self, index: np.ndarray) -> EventColumns:
        rows = index if self._index is None else self._index[index]
        args = None if self._args is None else self._args.take(index)
        return EventColumns(
            self._n,
            self._fields,
            self._defaults,
            self._times,
            args,
            rows,
            self._arrays,
            self._coded,
        )

    def args(self) -> EventColumns:
        return self._args


def _not_none(values: list) -> np.ndarray:
    return np.flatnonzero([v is not None for v in values])


def _coded(coded: dict) -> dict:
    return {
        name: _merge_equal(np.frombuffer(codes, np.int32), distinct)
        for name, (codes, distinct) in coded.items()
    }


def _merge_equal(codes: np.ndarray, distinct: list) -> tuple[np.ndarray, list]:
    """The C decoder numbers objects by identity: merge the rare equal values held by distinct
    objects (an integer the decoder did not reuse, a string written with escapes)."""
    merged, values = factorize(distinct)
    return (codes if len(values) == len(distinct) else merged[codes]), values
