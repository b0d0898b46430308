"""One finding before it is ranked: what, where, the evidence, and the fix as a cut."""

from __future__ import annotations

from dataclasses import dataclass

from .replay import Cut


@dataclass
class Finding:
    """``kind`` (a module of this package), ``rank`` (None: the job), ``where`` (step,
    operator, kernel, collective, annotation), ``evidence`` (the numbers it rests on),
    ``method`` (how the estimate is made), ``advice``; ``cut``: the fix's changes, replayed
    for the estimate; ``low``: a partial fix, replayed for the low end of the range (default:
    half of ``cut``); ``cut=None``: a finding that saves no step time (memory)."""

    kind: str
    where: str
    evidence: str
    method: str
    advice: str
    cut: Cut | None = None
    low: Cut | None = None
    rank: int | None = None
