"""Figure builders: DataFrame in, ``plotly.graph_objects.Figure`` out (no computation), one
module per family of analyses. ``show(fig)`` displays a figure only inside a notebook kernel,
so ``visualize=True`` never opens a browser or blocks a batch script. Every ``plot_*`` here
returns its figure with its text escaped (:func:`.base.escaped`): a name from a trace is never
markup; and within what a browser can draw (:func:`.budget.within_budget`: at most
:data:`.budget.MAX_POINTS` points, the points as they were in :func:`.budget.full_data`).
"""

import functools as _functools

from .base import escaped, in_notebook, show
from .breakdowns import (
    plot_comm_comp_overlap,
    plot_gpu_idle_by_cause,
    plot_idle_time_breakdown,
    plot_kernel_distribution,
    plot_kernel_type_pie,
    plot_kernel_type_pies_per_rank,
    plot_step_breakdown,
    plot_temporal_breakdown,
    plot_user_annotation_breakdown,
)
from .budget import full_data, within_budget
from .collectives import (
    plot_arrival_skew,
    plot_bus_bandwidth,
    plot_wait_heatmap,
)
from .counters import (
    plot_cupti_counters,
    plot_frequent_sequences,
    plot_launch_stats,
    plot_memory_bw,
    plot_queue_length,
)
from .critical_path import (
    critical_path_segments,
    plot_critical_path,
    plot_path_segments,
)
from .cross_rank import (
    plot_pipeline_stages,
    plot_rank_lateness,
    plot_timer_heatmap,
    plot_timers_minmax,
)
from .diff import (
    plot_diff,
)
from .findings import (
    plot_findings,
    plot_key_findings,
)
from .graphs import (
    plot_graph_launches,
)
from .job_path import (
    plot_job_critical_path,
)
from .memory import (
    plot_memory_by_category,
    plot_memory_timeline,
)
from .operators import (
    plot_mfu,
    plot_module_sunburst,
    plot_operator_summary,
    plot_roofline,
)
from .snapshot import (
    plot_peak_sites,
    plot_segment_map,
    plot_snapshot_timeline,
)
from .steps import (
    plot_step_anomalies,
)

__all__ = [
    "in_notebook",
    "full_data",
    "show",
    "plot_temporal_breakdown",
    "plot_idle_time_breakdown",
    "plot_gpu_idle_by_cause",
    "plot_comm_comp_overlap",
    "plot_kernel_type_pie",
    "plot_kernel_type_pies_per_rank",
    "plot_kernel_distribution",
    "plot_user_annotation_breakdown",
    "plot_step_breakdown",
    "plot_cupti_counters",
    "plot_launch_stats",
    "plot_queue_length",
    "plot_memory_bw",
    "plot_frequent_sequences",
    "plot_timers_minmax",
    "plot_timer_heatmap",
    "plot_pipeline_stages",
    "plot_rank_lateness",
    "plot_bus_bandwidth",
    "plot_critical_path",
    "critical_path_segments",
    "plot_path_segments",
    "plot_memory_timeline",
    "plot_memory_by_category",
    "plot_wait_heatmap",
    "plot_arrival_skew",
    "plot_diff",
    "plot_findings",
    "plot_key_findings",
    "plot_operator_summary",
    "plot_module_sunburst",
    "plot_roofline",
    "plot_mfu",
    "plot_graph_launches",
    "plot_job_critical_path",
    "plot_snapshot_timeline",
    "plot_segment_map",
    "plot_peak_sites",
    "plot_step_anomalies",
]


def _finishing(build):
    @_functools.wraps(build)
    def plot(*args, **kwargs):
        out = build(*args, **kwargs)
        for fig in out if isinstance(out, (list, tuple)) else [out]:
            if fig is not None:
                escaped(within_budget(fig))
        return out

    return plot


for _name in [n for n in __all__ if n.startswith("plot_")]:
    globals()[_name] = _finishing(globals()[_name])
