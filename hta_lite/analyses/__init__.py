"""Analyses: pure functions from rank traces to pandas DataFrames (no plotting, no I/O)."""
