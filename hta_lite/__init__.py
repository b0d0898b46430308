"""hta_lite: fast, lossless analysis of PyTorch profiler (Kineto) traces.

>>> from hta_lite import TraceAnalysis
>>> analysis = TraceAnalysis(trace_dir="sample_traces/two_ranks")
>>> analysis.get_temporal_breakdown(visualize=False)

The package, in the order data flows (each layer imports only the ones before it):
``kineto`` (vocabulary), ``load`` (files -> typed tables), ``analyses`` (tables -> DataFrames),
``plots`` (DataFrames -> figures), ``tools`` (writers, batch, synthetic traces), ``facade``
(``TraceAnalysis``, ``TraceDiff``), ``views`` (CLI, HTML report). docs/architecture.md.
"""

from importlib import import_module

#: name -> the module that defines it, imported when first used (PEP 562): ``import hta_lite``
#: and ``hta-lite --help`` then cost no pandas, pyarrow or plotly
_WHERE = {
    "TraceAnalysis": ".facade",
    "TraceDiff": ".facade",
    "MemoryAnalysis": ".facade",
    "MemorySnapshot": ".facade.snapshot",
    "DeviceType": ".facade",
    "TimeSeriesTypes": ".facade",
    "LoadOptions": ".load.loader",
    "TraceError": ".errors",
    "summarize_folder": ".tools.batch",
}

__all__ = [
    "TraceAnalysis",
    "TraceDiff",
    "MemoryAnalysis",
    "MemorySnapshot",
    "DeviceType",
    "TimeSeriesTypes",
    "LoadOptions",
    "TraceError",
    "summarize_folder",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hta_lite' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
