"""Tools over loaded traces: trace writers (augmented and overlaid traces), batch summaries of
large folders (process pool or Dask), and the synthetic multi-rank trace generator (test
tooling)."""
