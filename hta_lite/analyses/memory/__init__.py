"""Memory: the allocator's events of a rank (:mod:`.events`), the allocated / reserved timeline
and its peaks (:mod:`.timeline`), allocation lifetimes and leaks (:mod:`.lifetimes`), memory by
operator (:mod:`.operators`), and the raw memory timeline ``export_memory_timeline_raw`` writes
(:mod:`.raw_timeline`). docs/analyses/memory.md.
"""
