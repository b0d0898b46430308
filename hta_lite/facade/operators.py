"""Operator view: GPU time per operator, shapes, call stack and module; roofline, optimization
targets, MFU, kernel launch efficiency (docs/analyses/operators.md)."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..analyses import operators as ops
from ..analyses.common import select
from ..analyses.operators.graph_sources import for_rank
from ..analyses.operators.roofline import mfu_view, with_problems
from ..errors import MissingDataError
from .base import plots
from .missing import empty_says, missing, need, no_gpu_work, table_view

Device = str | ops.DeviceSpec | None
#: the columns of :meth:`Operators.get_operator_roofline` (and of its optimization targets)
ROOFLINE_COLUMNS = [
    "device", "name", "input_dims", "input_types", "precision", "kind", "calls", "gpu_time(us)",
    "gpu_pctg", "flops", "bytes", "achieved_tflops", "achieved_tbps", "intensity", "peak_tflops",
    "tf32_inferred", "memory_tbps", "ridge", "attainable_tflops", "bound", "roof_pctg",
    "time_below_roof(us)", "above_roof",
]  # fmt: skip
_TIMES = ["calls", "host_self(us)", "host_total(us)", "kernels", "device_self_sum(us)",
          "device_self(us)", "device_total_sum(us)", "device_total(us)", "device_self_pctg",
          "cumulative_pctg"]  # fmt: skip
#: the columns of :meth:`Operators.get_operator_summary` by each grouping it can miss data for
SUMMARY_COLUMNS = {
    "name": ["name", *_TIMES],
    "shape": ["name", "input_dims", "input_types", *_TIMES],
    "module": ["module", "depth", "calls", "host_total(us)", "device_self_sum(us)",
               "device_total_sum(us)", "device_total(us)", "device_total_pctg"],
}  # fmt: skip


class Operators:
    """Operator methods of :class:`hta_lite.TraceAnalysis` (beyond the reference: TensorBoard
    plugin's operator view and TraceLens' perf model, on hta_lite's tables)."""

    def _operators(self, ranks: Iterable[int] | None) -> list[ops.RankOperators]:
        cache = self.memo.operators
        out = []
        for trace in select(self.traces, ranks):
            if trace.rank not in cache:
                captures = for_rank(self.graph_sources, trace.rank)
                cache[trace.rank] = ops.RankOperators.of(trace, captures)
                self._found(trace.rank).update(cache[trace.rank].problems)
            out.append(cache[trace.rank])
        return out

    def _roofline(self, ranks: Iterable[int] | None, device: Device) -> pd.DataFrame:
        """The roofline table, computed once per (ranks, device)."""
        rank_ops = self._operators(ranks)
        key = (tuple(r.rank for r in rank_ops), device if isinstance(device, str) else id(device))
        cache = self.memo.roofline
        if key not in cache:
            devices = ops.devices_of([r.attribution.trace for r in rank_ops], device)
            cache[key] = with_problems(ops.roofline_table(rank_ops, devices))
        return cache[key]

    def get_operator_instances(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """One row per operator call (``cpu_op`` event): host self / total time, the GPU time of
        the events it launched itself and of all those under it (union of their intervals, and
        sum), kernel counts, input shapes / types (a backward operator: its forward operator's,
        ``shapes_from == "forward"``), ``nn.Module`` path, modelled ``flops`` / ``bytes``.

        Args:
            ranks: ranks to include (default: all).

        Returns:
            DataFrame, columns in :mod:`hta_lite.analyses.operators.instances`; times in µs
            except ``ts`` (ns).
        """
        return pd.concat([r.instances for r in self._operators(ranks)], ignore_index=True)

    def get_operator_summary(
        self,
        by: str = "name",
        ranks: Iterable[int] | None = None,
        stack_depth: int = 3,
        visualize: bool = False,
        top: int = 20,
    ) -> pd.DataFrame:
        """GPU and host time per operator group, heaviest first; ``[graph replay]`` and
        ``[no operator]`` rows hold the GPU events no operator launched, so
        ``device_self_sum(us)`` adds up to all GPU work.

        Args:
            by: ``"name"``, ``"shape"`` (name, input dims, input types), ``"stack"`` (the
                operator under its ``stack_depth - 1`` enclosing CPU events: operators, Python
                frames, annotations) or ``"module"`` (``nn.Module`` path; needs a trace
                recorded with ``with_stack=True`` or ``with_modules=True``).
            ranks: ranks to include (default: all; their rows are added).
            stack_depth: frames in the ``"stack"`` key.
            visualize: show a bar chart (a sunburst for ``"module"``) of the ``top`` groups.

        Returns:
            DataFrame: the group's key columns, ``calls``, ``host_self(us)``,
            ``host_total(us)``, ``kernels``, ``device_self_sum(us)``, ``device_self(us)``,
            ``device_total_sum(us)``, ``device_total(us)``, ``device_self_pctg``,
            ``cumulative_pctg`` (by module: ``module, depth, calls, host_total(us),
            device_self_sum(us), device_total_sum(us), device_total(us),
            device_total_pctg``, in tree order).

            ``by="shape"`` on traces without shapes and ``by="module"`` on traces without
            ``nn.Module`` events: no rows, ``attrs["why"]`` says what to record
            (docs/missing-data.md).
        """
        rank_ops = self._operators(ranks)
        try:
            self._check_recorded(rank_ops, by)
        except MissingDataError as exc:
            return missing(SUMMARY_COLUMNS.get(by, SUMMARY_COLUMNS["name"]), exc.problem)
        table = ops.operator_summary(rank_ops, by, stack_depth)
        if visualize:
            figure = (
                plots.plot_module_sunburst(table)
                if by == "module"
                else plots.plot_operator_summary(table, top)
            )
            plots.show(figure)
        return table

    @staticmethod
    def _check_recorded(rank_ops: list[ops.RankOperators], by: str) -> None:
        if by == "shape" and not any((r.columns["input_dims"].codes >= 0).any() for r in rank_ops):
            raise MissingDataError(
                None, "no operator has input shapes: record with record_shapes=True"
            )
        if by == "module" and not any((r.instances["module"] != "").any() for r in rank_ops):
            raise MissingDataError(None, ops.NO_MODULES)

    @table_view(ROOFLINE_COLUMNS)
    def get_operator_roofline(
        self, ranks: Iterable[int] | None = None, device: Device = None, visualize: bool = False
    ) -> pd.DataFrame:
        """How close each operator group (name, shapes, types) runs to the device's roofs:
        achieved TFLOP/s and TB/s, arithmetic intensity, the binding roof, percent of it.

        Args:
            ranks: ranks to include (default: all).
            device: a name of ``hta_lite.analyses.operators.DEVICES`` or a ``DeviceSpec``
                (default: each rank's device from its trace; a device not in the table gives
                NaN peaks, ``device == "unknown"`` and a warning).
            visualize: show the log-log roofline chart.

        Returns:
            DataFrame, one row per group of modelled calls, columns in
            :func:`hta_lite.analyses.operators.roofline.roofline`.

            No rows where no modelled operator ran GPU work (no shapes recorded, or only
            operators without a FLOP model): ``attrs["why"]`` says so.
        """
        table = self._roofline(ranks, device)
        if table.empty:
            raise MissingDataError(
                None, ops.nsys_operator_hint(select(self.traces, ranks)) or ops.NO_MODEL
            )
        if visualize:
            plots.show(plots.plot_roofline(table))
        return table

    @table_view(ROOFLINE_COLUMNS)
    def get_optimization_targets(
        self, ranks: Iterable[int] | None = None, device: Device = None, top: int = 10
    ) -> pd.DataFrame:
        """The operator groups furthest below their roof, weighted by time.

        Args:
            ranks, device: as in :meth:`get_operator_roofline`.
            top: how many groups.

        Returns:
            DataFrame with the columns of :meth:`get_operator_roofline`, the ``top`` groups with
            the most ``time_below_roof(us)`` (GPU time x share of the roof not reached) first.

            No rows, with ``attrs["why"]``, as :meth:`get_operator_roofline`, or where no
            device peaks are known (pass ``device``)."""
        table = need(self.get_operator_roofline(ranks, device))
        targets = ops.optimization_targets(table, top)
        if targets.empty:
            raise MissingDataError(
                None, f"no device peaks for {sorted(set(table['device']))}: pass device=..."
            )
        return targets

    def get_mfu(
        self, ranks: Iterable[int] | None = None, device: Device = None, visualize: bool = False
    ) -> pd.DataFrame:
        """Model FLOPs utilization per rank and ProfilerStep: the FLOPs of the modelled matrix
        products, convolutions and attention calls over the step's wall time, as a share of the
        device's dense peak for the dominant precision; ``modelled_gpu_pctg`` says how much of
        the step's GPU time the modelled calls cover.

        Args:
            ranks: ranks to include (default: all).
            device: as in :meth:`get_operator_roofline`.
            visualize: show MFU per step.

        Returns:
            DataFrame, columns in :func:`hta_lite.analyses.operators.roofline.mfu`; where no
            device of the peak table is known, ``peak_tflops`` and ``mfu_pctg`` are NaN and
            ``attrs["why"]`` says to pass ``device``.
        """
        rank_ops = self._operators(ranks)
        devices = ops.devices_of([r.attribution.trace for r in rank_ops], device)
        table = mfu_view(ops.mfu_table(rank_ops, devices, self._roofline(ranks, device)))
        if visualize:
            plots.show(plots.plot_mfu(table))
        return table

    @empty_says(no_gpu_work)
    def get_kernel_efficiency(
        self, by: str = "kernel", ranks: Iterable[int] | None = None
    ) -> pd.DataFrame:
        """Launch efficiency from CUPTI's kernel args (NVIDIA traces): blocks and warps per SM,
        estimated achieved occupancy, registers per thread, shared memory, each a time-weighted
        mean over the kernels carrying it.

        Args:
            by: ``"kernel"`` (kernel name) or ``"operator"`` (the operator that launched it).
            ranks: ranks to include (default: all).

        Returns:
            DataFrame: ``kernel`` or ``operator``, ``kernels``, ``gpu_time(us)``,
            ``kernels_with_args`` (0 on ROCm traces, which do not write these args),
            ``blocks_per_sm``, ``warps_per_sm``, ``occupancy_pct``, ``registers_per_thread``,
            ``shared_memory`` (bytes per block); heaviest first.
        """
        return ops.kernel_efficiency([r.attribution for r in self._operators(ranks)], by)
