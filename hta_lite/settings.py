"""Limits set by an argument or an ``HTA_LITE_*`` environment variable, validated where read.

A limit is a positive number; ``inf`` means no limit. Anything else (``nan``, ``-1``, ``0``,
text) is a :class:`~hta_lite.errors.SettingError` naming the setting, never a silent default
or an error blamed on a trace.
"""

from __future__ import annotations

import math
import os

from .errors import SettingError


def positive_limit(value: object, name: str) -> float:
    """``value`` as a float when it is a positive number or ``inf``, else a SettingError."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not number > 0:  # nan, 0, negatives and text fail here
        raise SettingError(f"{name} must be a positive number or inf (no limit), not {value!r}")
    return number


def number_argument(text: str) -> float:
    """An argparse ``type``: a positive number (:func:`positive_limit`), else a usage error."""
    import argparse

    try:
        return positive_limit(text, "the value")
    except SettingError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def env_limit(name: str, default: float) -> float:
    """The limit ``$name`` sets (:func:`positive_limit`), ``default`` when it is unset or
    empty."""
    raw = os.environ.get(name, "").strip()
    return default if not raw else positive_limit(raw, f"${name}")


def capped_int(value: float) -> int:
    """A byte or count limit as an int: ``inf`` (or anything past int64) is the int64 maximum."""
    return int(min(value, 2**63 - 1))
