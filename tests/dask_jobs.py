"""A job function for Dask workers in tests (importable by them): it kills its worker process
on a file named ``poison*``, and returns the file's name otherwise."""

import os
from pathlib import Path


def die_on_poison(job):
    path = Path(job[0])
    if path.name.startswith("poison"):
        os._exit(1)
    return path.name, None
