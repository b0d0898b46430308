"""hta_lite: fast, lossless analysis of PyTorch profiler (Kineto) traces.

>>> from hta_lite import TraceAnalysis
>>> analysis = TraceAnalysis(trace_dir="sample_traces/two_ranks")
>>> analysis.get_temporal_breakdown(visualize=False)
"""

from .analysis import TraceAnalysis
from .diff import DeviceType, TraceDiff
from .errors import TraceError

__all__ = ["TraceAnalysis", "TraceDiff", "DeviceType", "TraceError"]
__version__ = "0.1.0"
