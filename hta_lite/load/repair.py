"""What some writers put in a trace that JSON forbids, repaired before a second decode (each fix
counted): invalid UTF-8, NaN / Infinity literals, an escaped UTF-16 surrogate without its other
half."""

from __future__ import annotations

import re
from collections import Counter

from .health_items import note

_NON_FINITE = re.compile(rb'(?<![\w"])-?(?:NaN|Infinity)(?![\w"])')
# an escaped UTF-16 surrogate (its backslashes: an odd number make it an escape)
_SURROGATE = re.compile(rb"(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")


def _lone_surrogates(data: bytes) -> tuple[bytes, int]:
    """``data`` with every escaped surrogate that is not half of a pair replaced by the escape
    of U+FFFD (Python's json reads them; msgspec, rightly, does not), and how many."""
    out, last, count = [], 0, 0
    matches = [m for m in _SURROGATE.finditer(data) if len(m.group(1)) % 2]
    for k, m in enumerate(matches):
        high = m.group(2)[1:2].lower() in b"89ab"
        nxt = matches[k + 1] if k + 1 < len(matches) else None
        prev = matches[k - 1] if k else None
        paired_next = high and nxt is not None and nxt.start() == m.end() and len(
            nxt.group(1)) == 1 and nxt.group(2)[1:2].lower() in b"cdef"  # fmt: skip
        paired_prev = not high and prev is not None and prev.end() == m.start() and len(
            m.group(1)) == 1 and prev.group(2)[1:2].lower() in b"89ab"  # fmt: skip
        if paired_next or paired_prev:
            continue
        start = m.start() + len(m.group(1)) - 1  # the escaping backslash
        out += [data[last:start], b"\\ufffd"]
        last, count = m.end(), count + 1
    return (b"".join(out) + data[last:], count) if count else (data, 0)


def repair(data: bytes, skipped: Counter) -> bytes | None:
    """Fix what some writers emit but JSON forbids: invalid UTF-8, NaN / Infinity literals, an
    escaped UTF-16 surrogate without its other half (one such name would refuse the file).

    Returns the repaired document (counting each fix in ``skipped``), or None when
    there was nothing to repair.
    """
    repaired = data
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        note(skipped, "invalid_utf8", text.count("\ufffd"))
        repaired = text.encode("utf-8")
    repaired, n_non_finite = _NON_FINITE.subn(b"null", repaired)
    note(skipped, "non_finite_literal", n_non_finite)
    repaired, n_lone = _lone_surrogates(repaired)
    note(skipped, "invalid_utf8", n_lone)
    return repaired if repaired != data else None
