"""How trace files are loaded: :class:`LoadOptions`, one set of options for ``TraceAnalysis``,
the CLI and :mod:`hta_lite.tools.batch`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..settings import positive_limit
from . import cache, gzip_text
from .finish import StepRule

OnError = Literal["raise", "skip", "warn"]
ON_ERROR = ("raise", "skip", "warn")


@dataclass(frozen=True)
class LoadOptions:
    """How trace files are loaded: one set of options for ``TraceAnalysis``, the CLI and
    :mod:`hta_lite.tools.batch`.

    Args:
        include_last_profiler_step: keep the last ProfilerStep (dropped by default, as in the
            reference, because the profiler usually cuts it short).
        step_range: the name of the range (NVTX, ``record_function``) that marks a step: its
            occurrences in time order are the steps (default: ``ProfilerStep#N``; in Nsight
            Systems exports without them, the repeating outermost NVTX range). A file without
            such a range is a :class:`~hta_lite.errors.SelectionError` naming it.
        parallel: parse ranks in worker processes when there are several files.
        max_workers: cap on worker processes (default: the CPU count).
        on_error: ``"raise"`` (default): the first unreadable file's error; ``"skip"``: keep the
            good ranks and list the bad files; ``"warn"``: the same, with a warning per file.
        progress: show a progress bar (default: when there is more than one file).
        start_method: how worker processes start: ``"fork"``, ``"forkserver"`` or ``"spawn"``;
            default: fork where it is safe (a process with one thread, not a notebook kernel),
            else forkserver (see :func:`start_method`).
        cache: the cache of parsed ranks (:mod:`hta_lite.load.cache`): ``None``
            (default) lets ``HTA_LITE_CACHE`` decide (on unless ``off``), ``False`` turns it off,
            ``True`` or a folder turns it on (there).
        max_inflate_ratio, max_text_gb: a gzip trace that inflates to more than this many
            times its size, or this many GiB of text, is refused as soon as it does (a gzip
            bomb); default ``$HTA_LITE_MAX_INFLATE_RATIO`` (200) and ``$HTA_LITE_MAX_TEXT_GB``
            (32).
    """

    include_last_profiler_step: bool = False
    parallel: bool = True
    max_workers: int | None = None
    on_error: OnError = "raise"
    progress: bool | None = None
    cache: bool | str | Path | None = None
    start_method: str | None = None
    max_inflate_ratio: float | None = None
    max_text_gb: float | None = None
    step_range: str | None = None

    def __post_init__(self):
        if self.on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, not {self.on_error!r}")
        for name in ("max_inflate_ratio", "max_text_gb"):
            if getattr(self, name) is not None:
                positive_limit(getattr(self, name), name)

    def check_settings(self) -> None:
        """A :class:`~hta_lite.errors.SettingError` now, in the caller, for a bad limit in the
        environment (not a failed file per worker later)."""
        with gzip_text.inflate_limits(self.max_inflate_ratio, self.max_text_gb):
            gzip_text.limits()
        if self.cache_root is not None:
            cache.max_bytes()

    @property
    def steps(self) -> StepRule:
        """What a step is, as the readers' finishing step takes it."""
        return StepRule(self.include_last_profiler_step, self.step_range)

    @property
    def cache_root(self) -> Path | None:
        """Folder of the cache, None when the cache is off."""
        return cache.cache_dir(self.cache) if cache.enabled(self.cache) else None
