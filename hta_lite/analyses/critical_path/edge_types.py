"""The kinds of edge of the critical-path graph, as the reference names them."""

OPERATOR, DEPENDENCY, LAUNCH_DELAY, KERNEL_KERNEL_DELAY, SYNC = range(5)
#: edge types, as the reference names them
EDGE_TYPES = (
    "critical_path_operator", "critical_path_dependency", "critical_path_kernel_launch_delay",
    "critical_path_kernel_kernel_delay", "critical_path_sync_dependency",
)  # fmt: skip
#: a longer gap between kernels on a stream is an unrecognized dependency, not a delay
KERNEL_KERNEL_DELAY_THRESHOLD_NS = 1_500_000
