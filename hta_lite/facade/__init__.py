"""The facades users call: :class:`TraceAnalysis` and :class:`TraceDiff`, with the reference's
method names and columns, composed of one mixin per family of analyses."""

from .analysis import TimeSeriesTypes, TraceAnalysis
from .memory import MemoryAnalysis
from .trace_diff import DeviceType, TraceDiff

__all__ = ["TraceAnalysis", "TraceDiff", "DeviceType", "TimeSeriesTypes", "MemoryAnalysis"]
