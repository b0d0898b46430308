"""CUDA memory snapshots (``torch.cuda.memory._dump_snapshot`` pickles): the allocator's own state,
which a Kineto trace does not have.

- :mod:`.summary`: reserved, allocated, internal / external free and fragmentation per device;
- :mod:`.timeline`: the trace replayed back from the snapshot: memory over time, the peak, who
  holds it;
- :mod:`.oom`: the state at an out-of-memory entry and its verdict (shortage or fragmentation);
- :mod:`.compare`: two snapshots side by side.

The facade is :class:`hta_lite.MemorySnapshot`; the reader is :mod:`hta_lite.load.readers.snapshot`
(the tables: :mod:`~hta_lite.load.readers.snapshot_tables`, allocation sites:
:mod:`~hta_lite.load.readers.snapshot_sites`).
"""
