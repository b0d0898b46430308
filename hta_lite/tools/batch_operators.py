"""The batch's operator roofline, MFU and time by module across ranks, as ``TraceAnalysis``
gives them (``get_operator_roofline()``, ``get_mfu()``, ``get_operator_summary(by="module")``),
from what each worker made of its rank (:mod:`.batch_worker`): its modelled calls summed by
roofline group, its MFU rows, its module rows, and in its ``rank_facts`` its device, GPU time,
what its kernel names say of the device and whether an Nsight Systems export has operator
ranges."""

from __future__ import annotations

import pandas as pd

from ..analyses import operators as ops
from ..analyses.operators.roofline import mfu_view, with_problems
from ..missing_data import missing


def operator_views(partials: dict[str, pd.DataFrame], facts: pd.DataFrame) -> dict:
    """``operator_roofline``, ``mfu`` and ``operator_modules`` of all ranks from the batch's
    ``partials`` (``roofline_sums``, ``mfu_rows``, ``module_rows``) and ``facts`` (each rank's
    ``rank_facts``); an empty one's ``attrs["why"]`` says why, as the analysis's does."""
    devices = {
        int(rank): ops.DEVICES.get(name) for rank, name in zip(facts["rank"], facts["device"])
    }
    total_gpu_us = float(facts["gpu_time_us"].sum())
    roofline = ops.roofline_of_sums(partials["roofline_sums"], devices, total_gpu_us)
    if roofline.empty:
        roofline = missing(list(roofline.columns), operator_hint(facts) or ops.NO_MODEL)
    else:
        roofline = with_problems(roofline)
    mfu = mfu_view(ops.with_peaks(partials["mfu_rows"], devices, ops.tf32_ranks(devices, roofline)))
    modules = ops.combine_modules([partials["module_rows"]], total_gpu_us)
    if modules.empty:
        modules.attrs["why"] = ops.NO_MODULES
    return {"operator_roofline": roofline, "mfu": mfu, "operator_modules": modules}


def architecture(facts: pd.DataFrame) -> str:
    """What the first GPU rank's kernel names say of its device (``"sm80 or newer"``), as the
    key findings' MFU line says it."""
    said = facts["architecture"].dropna()  # None: a rank without GPU events
    return str(said.iloc[0]) if len(said) else ""


def operator_hint(facts: pd.DataFrame) -> str:
    """What an Nsight Systems export would need for the operator views ("" for Kineto traces),
    as ``nsys_operator_hint`` says it."""
    ranges = [None if pd.isna(found) else bool(found) for found in facts["operator_ranges"]]
    return ops.recorded_hint(ranges) or ""
