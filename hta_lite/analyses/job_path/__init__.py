"""The job's critical path: which rank, and what on it, bounds each step of a distributed run.

- :mod:`.segments`: one rank's local critical path between its collectives (a per-rank
  partial, made where the rank is loaded);
- :mod:`.walk`: the ranks' segments joined at the matched collectives, walked back from the
  step's end through the last arrivals (in the driver).

See docs/analyses/job-critical-path.md.
"""

from .segments import segments
from .walk import JobCriticalPath, job_critical_path

__all__ = ["JobCriticalPath", "job_critical_path", "segments"]
