"""Readable quantities for text a person reads (findings, the report, the CLI): bytes in binary
units, times in µs / ms / s. Tables keep raw numbers (bytes, µs) for computing; these are only
for display."""

from __future__ import annotations

import math
import re

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_bytes(value: float) -> str:
    """``1536`` -> ``'1.5 KiB'``; ``2**31`` -> ``'2.0 GiB'``; NaN -> ``'–'``."""
    if value is None or not math.isfinite(value):
        return "–"
    sign, size = ("-" if value < 0 else ""), abs(float(value))
    unit = 0
    while size >= 1024 and unit < len(_BINARY) - 1:
        size /= 1024
        unit += 1
    return f"{sign}{size:.0f} B" if unit == 0 else f"{sign}{size:.1f} {_BINARY[unit]}"


def fmt_us(value: float) -> str:
    """A duration given in µs: ``850`` -> ``'850 µs'``, ``167577`` -> ``'167.6 ms'``,
    ``2.5e6`` -> ``'2.50 s'``; NaN -> ``'–'``."""
    if value is None or not math.isfinite(value):
        return "–"
    size = abs(float(value))
    if size < 1_000:
        return f"{value:,.0f} µs" if size >= 10 or size == 0 else f"{value:.1f} µs"
    if size < 1_000_000:
        return f"{value / 1e3:,.1f} ms"
    return f"{value / 1e6:,.2f} s"


def fmt_pct(value: float) -> str:
    """``54.137`` -> ``'54.1 %'``; NaN -> ``'–'``."""
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:.1f} %"


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3,
          "gb": 1000**3, "t": 1000**4, "tb": 1000**4, "kib": 1024, "mib": 1024**2,
          "gib": 1024**3, "tib": 1024**4}  # fmt: skip
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*")


def parse_bytes(text: str) -> int:
    """A size as people write it: ``'200MB'`` (10**6), ``'1.5GiB'`` (2**30), ``'4096'``, ``'2 g'``
    -> bytes (int); a ``ValueError`` saying what is accepted otherwise."""
    match = _SIZE.fullmatch(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"not a size: {text!r} (a number with an optional unit: B, KB, MB, GB, TB in powers"
            " of 1000, KiB, MiB, GiB, TiB in powers of 1024)"
        )
    return int(round(float(match.group(1)) * _UNITS[unit]))


def distinct_names(names, width: int = 60) -> list[str]:
    """``names`` cut to ``width`` characters keeping their start and end (``head…tail``: kernel
    names differ in their template arguments as often as in their start), and distinct: names
    that would still print the same are numbered (``… #2``) in their order."""
    head = width * 2 // 3
    cut = [
        n if len(n) <= width else f"{n[: head - 1]}…{n[-(width - head) :]}" for n in map(str, names)
    ]
    full = list(map(str, names))
    seen: dict[str, list[str]] = {}
    for short, name in zip(cut, full):
        seen.setdefault(short, [])
        if name not in seen[short]:
            seen[short].append(name)
    return [s if len(seen[s]) == 1 else f"{s} #{seen[s].index(n) + 1}" for s, n in zip(cut, full)]
