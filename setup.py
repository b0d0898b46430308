"""Build hook for the optional C accelerators (``hta_lite.load._fastjson``, the trace decoder;
``hta_lite.load._snapshot_pickle``, the memory snapshot reader; ``hta_lite.load._sqlite_scan``,
the integer columns of Nsight Systems exports;
``hta_lite.analyses.critical_path._longest_path``, the critical path's longest-path pass); all
metadata is in pyproject.toml.

``optional=True``: without a C compiler the package still installs and loads traces through the
pure-Python (msgspec) path, reads exports through SQLite, and walks graphs in Python, with
identical results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hta_lite.load._fastjson",
            ["hta_lite/load/_fastjson.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "hta_lite.load._snapshot_pickle",
            ["hta_lite/load/_snapshot_pickle.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "hta_lite.load._sqlite_scan",
            ["hta_lite/load/_sqlite_scan.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "hta_lite.analyses.critical_path._longest_path",
            ["hta_lite/analyses/critical_path/_longest_path.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
