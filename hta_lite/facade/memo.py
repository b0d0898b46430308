"""The facade's one memo: what a :class:`~hta_lite.TraceAnalysis` computes once and shares
between its views (the summary, the report and the findings ask for the same tables).

Every result kept between calls is a field here, keyed by what it depends on; the traces never
change after loading, so nothing is invalidated. A mixin reads another's result through that
mixin's method (``get_collectives()``, ``_operators()``), never through this memo directly.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Memo:
    """Results kept by one TraceAnalysis.

    - ``collectives``: the collectives of all ranks matched across ranks (``Matching``), None
      until first asked.
    - ``operators``: ``{rank: RankOperators}`` (operator instances and graph replays).
    - ``roofline``: ``{(ranks, device): roofline table}``.
    - ``memory``: ``{rank: (memory events, the rank's memory timeline)}``.
    - ``leaks``: the sites of all ranks that leak in every step (``steady_leaks``), None until
      first asked.
    - ``scored_steps``: ``{(ranks, ...): the steps scored against the typical step}``.
    - ``job_path_parts``: ``{ranks: each rank's local critical path between its collectives}``.
    - ``findings``: ``{(snapshot file, ...): the ranked findings}``.
    - ``problems``: ``{rank: Counter of health codes}``: what the checks found in the data
      (written only by the views that run them; :meth:`TraceAnalysis.health` shows it).
    - ``hta_trace``: the HTA-compatible ``analysis.t`` object.
    """

    collectives: Any = None
    operators: dict = field(default_factory=dict)
    roofline: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    leaks: Any = None
    scored_steps: dict = field(default_factory=dict)
    job_path_parts: dict = field(default_factory=dict)
    findings: dict = field(default_factory=dict)
    problems: dict[int, Counter] = field(default_factory=dict)
    hta_trace: Any = None
