"""Critical path of one rank: what bounds an iteration (HTA 0.6.1's analysis, exact and fast).

- :mod:`.window`: the events of the analysed region (an annotation instance, or the trace);
- :mod:`.events`: the rank's events in one numbering, launch / event-record lookups;
- :mod:`.graph`: the dependency graph, one start and one end node per event, edges for the
  runtime lock, launches, kernel-to-kernel order, cross-stream event waits and host
  synchronizations (:mod:`.call_stacks`: the operator spans and their nesting;
  :mod:`.edge_types`: the kinds of edge);
- :mod:`.path`: the longest path over a topological order, and what bounds each of its edges.

See docs/analyses/critical-path.md.
"""

from .path import CriticalPath, critical_path

__all__ = ["CriticalPath", "critical_path"]
