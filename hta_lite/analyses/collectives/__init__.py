"""Collectives across ranks: one table of collective calls per rank (:mod:`.calls`), the same
collective matched on every member rank (:mod:`.matching`), bus bandwidth with the NCCL-tests
conventions (:mod:`.bandwidth`) and summaries by collective and by rank (:mod:`.summaries`).
"""
