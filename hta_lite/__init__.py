"""hta_lite: fast, lossless analysis of PyTorch profiler (Kineto) traces.

>>> from hta_lite import TraceAnalysis
>>> analysis = TraceAnalysis(trace_dir="sample_traces/two_ranks")
>>> analysis.get_temporal_breakdown(visualize=False)

The package, in the order data flows (each layer imports only the ones before it):
``kineto`` (vocabulary), ``load`` (files -> typed tables), ``analyses`` (tables -> DataFrames),
``plots`` (DataFrames -> figures), ``tools`` (writers, batch, synthetic traces), ``facade``
(``TraceAnalysis``, ``TraceDiff``), ``views`` (CLI, HTML report). docs/architecture.md.
"""

from .errors import TraceError
from .facade import DeviceType, MemoryAnalysis, TimeSeriesTypes, TraceAnalysis, TraceDiff
from .load.loader import LoadOptions
from .tools.batch import summarize_folder

__all__ = [
    "TraceAnalysis",
    "TraceDiff",
    "MemoryAnalysis",
    "DeviceType",
    "TimeSeriesTypes",
    "LoadOptions",
    "TraceError",
    "summarize_folder",
]
__version__ = "0.1.0"
