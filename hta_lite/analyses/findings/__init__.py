"""Findings ranked by the step time a fix would save (docs/analyses/findings.md)."""
