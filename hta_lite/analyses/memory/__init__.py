"""Memory: the allocator's events of a rank (:mod:`.events`), the allocated / reserved timeline
and its peaks (:mod:`.timeline`), allocation lifetimes and leaks (:mod:`.lifetimes`), memory by
operator (:mod:`.operators`); the raw memory timeline ``export_memory_timeline_raw`` writes is
read by :mod:`hta_lite.load.readers.memory_timeline`. docs/analyses/memory.md.
"""
