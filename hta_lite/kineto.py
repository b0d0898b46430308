"""The Kineto vocabulary: every event category, call name and name pattern hta_lite reads.

One place for it, so that a new launch call, GPU category or collective kernel is added once and
every analysis sees it. Names are as the PyTorch profiler (Kineto, with CUPTI / roctracer / MTIA)
writes them; the older capitalised categories (``Kernel``, ``Memcpy``, ``Memset``) come from traces
written before PyTorch 1.11.
"""

from __future__ import annotations

import re

# ---- event categories (``cat``) ---------------------------------------------------------------
#: GPU work: occupies an engine of the device; what busy, idle and overlap are made of
GPU_WORK_CATEGORIES = (
    "kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events", "Kernel", "Memcpy", "Memset",
)  # fmt: skip
#: GPU-side synchronization (``Stream Sync``, ``Event Sync``, ``Context Sync``,
#: ``Stream Wait Event``): the device waits; it is not work and never counts as busy time
GPU_SYNC_CATEGORY = "cuda_sync"
#: every category that goes to the ``gpu`` table
GPU_CATEGORIES = GPU_WORK_CATEGORIES + (GPU_SYNC_CATEGORY,)
#: record_function / NVTX ranges as the GPU ran them (``gpu_annotations`` table)
GPU_ANNOTATION_CATEGORY = "gpu_user_annotation"
#: the same ranges on the CPU
CPU_ANNOTATION_CATEGORY = "user_annotation"
#: kernels replayed by the CUPTI range profiler, one per kernel launch, with its counters as args
#: (their times are the profiler's replay, not the timeline's)
PROFILER_RANGE_CATEGORY = "cuda_profiler_range"
#: ATen operators (the op tree)
CPU_OP_CATEGORY = "cpu_op"
#: Python frames recorded with ``with_stack`` / ``with_modules`` (``nn.Module: Name_N`` ones too)
PYTHON_FUNCTION_CATEGORY = "python_function"
#: flow arrows from a forward operator to the backward operator autograd ran for it
FWDBWD_FLOW_CATEGORY = "fwdbwd"
#: host-side runtime and driver calls (launches, copies, synchronizations)
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "hip_runtime", "mtia_runtime", "runtime")

# ---- runtime / driver calls -------------------------------------------------------------------
#: calls that launch one kernel (each correlated with it); hipExtLaunchKernel launches RCCL kernels
KERNEL_LAUNCH_NAMES = (
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
    "hipLaunchKernel", "hipExtLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel",
    "hipLaunchCooperativeKernel",
    "runFunction - job_prep_and_submit_for_execution",  # MTIA
)  # fmt: skip
#: calls that enqueue one copy or set
COPY_LAUNCH_NAMES = (
    "cudaMemcpyAsync", "cudaMemcpy2DAsync", "cudaMemcpyPeerAsync", "cudaMemcpy", "cudaMemcpy2D",
    "cudaMemsetAsync", "cudaMemset",
    "hipMemcpyAsync", "hipMemcpyWithStream", "hipMemcpy", "hipMemcpyDtoDAsync",
    "hipMemcpyDtoHAsync", "hipMemcpyHtoDAsync", "hipMemsetAsync", "hipMemset",
    "enqueueCommand memcpyDtoHAsync", "enqueueCommand memcpyHtoDAsync",  # MTIA
)  # fmt: skip
#: calls that put one GPU event on a stream
LAUNCH_NAMES = KERNEL_LAUNCH_NAMES + COPY_LAUNCH_NAMES
#: calls that release many GPU events at once (a captured graph)
GRAPH_LAUNCH_NAMES = ("cudaGraphLaunch", "hipGraphLaunch")
#: the launch calls that can make a kernel a programmatic dependent launch (Hopper and later:
#: it may start before the previous kernel on its stream ends)
DEPENDENT_LAUNCH_NAMES = ("cudaLaunchKernelExC", "cuLaunchKernelEx")
#: calls that start and end capturing a stream's work into a graph (the launches between them
#: run nothing: they are what the graph will replay)
GRAPH_CAPTURE_BEGIN_NAMES = ("cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph",
                             "hipStreamBeginCapture")  # fmt: skip
GRAPH_CAPTURE_END_NAMES = ("cudaStreamEndCapture", "hipStreamEndCapture")
#: calls that make a captured graph ready to launch (part of the capture's one-time cost)
GRAPH_INSTANTIATE_NAMES = ("cudaGraphInstantiate", "cudaGraphInstantiateWithFlags",
                           "hipGraphInstantiate", "hipGraphInstantiateWithFlags")  # fmt: skip
#: driver calls that load a compiled module (a JIT's output: NVRTC, Triton, nvFuser): once per
#: module, warm-up
MODULE_LOAD_NAMES = (
    "cuModuleLoad", "cuModuleLoadData", "cuModuleLoadDataEx", "cuModuleLoadFatBinary",
    "cuLibraryLoadData", "cuLibraryLoadFromFile",
    "hipModuleLoad", "hipModuleLoadData", "hipModuleLoadDataEx",
)  # fmt: skip
#: start-up calls: a process joins MPI, NCCL creates a communicator, the driver initializes (once
#: per process or communicator; an Nsight Systems export of a whole run holds them)
STARTUP_NAMES = (
    "MPI_Init", "MPI_Init_thread", "MPI_Finalize", "ncclCommInitRank", "ncclCommInitRankConfig",
    "ncclCommInitAll", "ncclCommInitRankScalable", "cuInit",
)  # fmt: skip
#: calls correlated with a GPU-side event that enqueue no work: the host waits for the device,
#: or a stream waits for an event (GPU events of category ``cuda_sync`` or markers)
NON_ENQUEUING_NAMES = (
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaEventQuery",
    "cudaStreamWaitEvent", "cudaEventRecord", "cudaEventRecordWithFlags",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipEventQuery",
    "hipStreamWaitEvent", "hipEventRecord",
    "enqueueCommand waitOnEvent", "recordEvent",
)  # fmt: skip

# ---- dependencies (critical path) ------------------------------------------------------------
#: the GPU-side synchronizations (``cuda_sync`` event names)
STREAM_WAIT_EVENT, EVENT_SYNC = "Stream Wait Event", "Event Sync"
STREAM_SYNC, CONTEXT_SYNC = "Stream Sync", "Context Sync"
#: the GPU-side synchronization record each host call makes, as Kineto names CUPTI's (runtime
#: and driver calls)
SYNC_OF_CALL = {
    "cudaDeviceSynchronize": CONTEXT_SYNC, "cuCtxSynchronize": CONTEXT_SYNC,
    "cudaStreamSynchronize": STREAM_SYNC, "cuStreamSynchronize": STREAM_SYNC,
    "cudaEventSynchronize": EVENT_SYNC, "cuEventSynchronize": EVENT_SYNC,
    "cudaEventQuery": EVENT_SYNC, "cuEventQuery": EVENT_SYNC,
    "cudaStreamWaitEvent": STREAM_WAIT_EVENT, "cuStreamWaitEvent": STREAM_WAIT_EVENT,
}  # fmt: skip
#: calls that hold the CUDA / HIP runtime lock: only one runs at a time, across threads
RUNTIME_LOCK_NAMES = (
    "cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync",
    "hipHostMalloc", "hipLaunchKernel", "hipMemcpyAsync",
)  # fmt: skip
#: calls that may block the host until the device catches up: their own time is waiting
BLOCKING_SYNC_NAMES = (
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize",
    "cudaMemcpy", "cudaMemcpyAsync",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventQuery", "hipEventSynchronize",
    "hipMemcpy", "hipMemcpyAsync", "hipMemcpyWithStream",  # a copy then a wait (PyTorch on ROCm)
)  # fmt: skip
#: record a CUDA / HIP event on a stream (what a ``Stream Wait Event`` / ``Event Sync`` waits on)
EVENT_RECORD_NAMES = ("cudaEventRecord", "cudaEventRecordWithFlags", "hipEventRecord")
#: make a stream wait for a recorded event
STREAM_WAIT_NAMES = ("cudaStreamWaitEvent", "hipStreamWaitEvent")
#: event names that are data loading, as a regex (the profiler's ``enumerate(DataLoader)#...``,
#: user annotations such as ``data-loading`` / ``data_load``): the job critical path's default
DATA_LOADING_PATTERN = r"[Dd]ata.?[Ll]oad"
#: host ranges that compile at run time: torch.compile (2.1+), nvFuser, Triton (with_stack)
COMPILE_PATTERNS = {"torch.compile": r"^entire_frame_compile$|\(dynamo_timed\)$",
                    "nvFuser": r"::compileFusion$|^executor_utils::Nvrtc::CompileProgram$",
                    "Triton": r"triton/compiler/compiler\.py\(\d+\): compile$"}  # fmt: skip
#: a torch.compile'd frame's run: ``Torch-Compiled Region: <frame>/<compile>`` (0: the first)
COMPILED_REGION = re.compile(r"^Torch-Compiled Region: (\d{1,9})/(\d{1,9})$")  # bounded: ints

# ---- memory ----------------------------------------------------------------------------------
#: the allocator's instant events (``profile_memory=True``)
MEMORY_EVENT_NAME = "[memory]"
#: ``Device Type`` of a ``[memory]`` event: ``c10::DeviceType`` (its lower-case name is the
#: prefix of a torch device string)
DEVICE_TYPES = {
    0: "cpu", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip",
    7: "fpga", 8: "maia", 9: "xla", 10: "vulkan", 11: "metal", 12: "xpu", 13: "mps",
    14: "meta", 15: "hpu", 16: "ve", 17: "lazy", 18: "ipu", 19: "mtia", 20: "privateuseone",
}  # fmt: skip
#: categories of the raw memory timeline (``profile.export_memory_timeline_raw``), by index
MEMORY_CATEGORIES = (
    "PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT",
    "AUTOGRAD_DETAIL", "UNKNOWN",
)  # fmt: skip
#: its actions, by index
MEMORY_ACTIONS = {1: "PREEXISTING", 2: "CREATE", 3: "INCREMENT_VERSION", 4: "DESTROY"}

# ---- CUDA memory snapshots (torch.cuda.memory._dump_snapshot) -------------------------------
SNAPSHOT_ACTIVE = "active_allocated"
#: in use until a stream's work finishes: PyTorch writes ``active_pending_free`` (its Python
#: docs say ``active_awaiting_free``; both are read)
SNAPSHOT_PENDING = ("active_pending_free", "active_awaiting_free")
#: the trace actions that change memory: a trace without one records nothing but the dump
SNAPSHOT_TRACED_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc",
                           "segment_free", "segment_map", "segment_unmap", "oom")  # fmt: skip

# ---- ProfilerStep ------------------------------------------------------------------------------
STEP_PREFIX = "ProfilerStep#"
#: the annotation a critical path of one step is selected by (any name containing it)
STEP_ANNOTATION = "ProfilerStep"
STEP_PATTERN = re.compile(r"^ProfilerStep#(\d+)$")
#: Kineto's instant at the end of the profiler's record window: no CPU range it records ends later
RECORD_WINDOW_END = "Record Window End"

# ---- operators -----------------------------------------------------------------------------
#: prefix of the python_function event of an ``nn.Module`` forward (``nn.Module: BertLayer_0``)
MODULE_PREFIX = "nn.Module: "
#: bytes per element of the tensor types of ``Input type`` (what ``c10::toString`` writes);
#: anything else (``Scalar``, ``ScalarList``, ``TensorList``, ``""``) is not a tensor
DTYPE_BYTES = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "c10::Float8_e8m0fnu": 1, "c10::Float4_e2m1fn_x2": 1,
    "long int": 8, "long": 8, "int": 4, "short": 2, "signed char": 1, "unsigned char": 1,
    "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
}  # fmt: skip
#: the precision class of each type, as the device peak tables name them
DTYPE_PRECISION = {
    "double": "fp64", "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8", "c10::Float4_e2m1fn_x2": "fp4",
    "long int": "int64", "long": "int64", "int": "int32", "short": "int16", "signed char": "int8",
    "unsigned char": "int8", "bool": "int8",
}  # fmt: skip

# ---- GPU event names --------------------------------------------------------------------------
#: collective kernels that are not NCCL's, by the collective each is named after: PyTorch's
#: symmetric memory (``torch.ops.symm_mem``; ``two_shot_all_reduce_kernel`` also runs its
#: reduce_scatter), the custom all-reduce of vLLM, SGLang and aiter, AMD QuickReduce, the
#: all-reduce fused with a norm of TensorRT-LLM and FlashInfer, TransformerEngine's userbuffers
#: (Megatron-LM's ``--tp-comm-overlap``) and DeepEP's expert-parallel dispatch and combine (not
#: its ``layout`` kernels, which compute locally). The first pattern that matches names the
#: collective; the launching op names it more exactly where it names one
#: (:func:`hta_lite.collective_names.other_collective_kind`).
OTHER_COLLECTIVE_KERNELS = (
    (r"\bmultimem_all_reduce_kernel", "all_reduce"),
    (r"\bmultimem_one_shot_reduce_kernel", "reduce"),
    (r"\bmultimem_all_gather_kernel", "all_gather"),
    (r"\bone_shot_all_reduce_kernel", "all_reduce"),
    (r"\btwo_shot_all_reduce_kernel", "all_reduce"),
    (r"\bcross_device_reduce_[12]stage", "all_reduce"),
    (r"\bquickreduce::allreduce_", "all_reduce"),
    (r"\ballreduce_fusion_kernel", "all_reduce"),
    (r"\buserbuffers_\w*_rs", "reduce_scatter"),
    (r"\buserbuffers_\w*_ag", "all_gather"),
    (r"\buserbuffers_fp16_sum_inplace_gpu", "all_reduce"),
    (r"\bdeep_ep::(?:intranode|internode|internode_ll)::\w*(?:dispatch|combine)", "all_to_all"),
)
#: collective kernels: NCCL / RCCL / HCCL (``ncclKernel_*``, ``ncclDevKernel_*``, ``rccl*``) and
#: :data:`OTHER_COLLECTIVE_KERNELS`
COMMUNICATION_KERNEL = re.compile(
    r"^(nccl|rccl|hccl)|ncclKernel|ncclDevKernel|"
    + "|".join(p for p, _ in OTHER_COLLECTIVE_KERNELS)
)
#: copies and sets (CUDA, HIP, MTIA DMA)
MEMORY_KERNEL = re.compile(r"^(hip)?Memcpy|^(hip)?Memset|^dma")
#: GPU events that are neither computation nor one of the above (syncs, runtime names, MTIA
#: runtime stages): kernel type OTHER
NOT_COMPUTE_KERNEL = re.compile(
    r"Memcpy|Memset|dma|Sync|^Stream Wait Event|^cuda.*LaunchKernel|^runFunction|^hip"
    r"|^job_exe|^packet|^pe_exe|^cpum_exe_subgraph|^collective_subgraph_execution"
)
#: memcpy / memset kinds of the bandwidth series (name prefix -> kind)
MEMCPY_KINDS = ("Memcpy HtoD", "Memcpy DtoH", "Memcpy DtoD", "Memcpy PtoP", "Memset")
#: the copies that cross a link (host <-> device, device <-> device), whose roof is the link
CROSSING_MEMCPY_KINDS = ("Memcpy HtoD", "Memcpy DtoH", "Memcpy PtoP")
#: categories of copies (current and pre-1.11 spellings)
MEMCPY_CATEGORIES = ("gpu_memcpy", "Memcpy")
#: ATen operators' name prefix
ATEN_PREFIX = "aten::"
#: parts of a name that only PyTorch's code gives: its operators and its kernels' namespaces
PYTORCH_NAME_MARKS = (ATEN_PREFIX, "at::native::", "at::cuda::", "c10::")
#: the distributed backend whose collectives run on CPU worker threads
GLOO_BACKEND = "gloo"
#: CPU-side range c10d records around each collective (``gloo:all_reduce``, ``nccl:all_reduce``)
CPU_COLLECTIVE = re.compile(r"^(gloo|nccl|ucc|mpi|xccl):")

#: the op c10d records around each collective, with the collective's metadata in its args
PARAM_COMMS_NAME = "record_param_comms"
#: prefix of the ops c10d dispatches a collective through (``c10d::allreduce_``)
C10D_PREFIX = "c10d::"
#: which argument of each ``c10d::*`` op (torch/csrc/distributed/c10d/Ops.cpp) holds the
#: collective's input and which its output on this rank (None: not an argument); an op not
#: listed is read by its first tensor. ``_allgather_base_``'s first argument is the output
C10D_TENSOR_ARGS = {
    "c10d::allreduce_": (0, 0), "c10d::allreduce_coalesced_": (0, 0),
    "c10d::allgather_": (1, 0), "c10d::_allgather_base_": (1, 0),
    "c10d::allgather_coalesced_": (1, 0), "c10d::allgather_into_tensor_coalesced_": (1, 0),
    "c10d::reduce_scatter_": (1, 0), "c10d::_reduce_scatter_base_": (1, 0),
    "c10d::reduce_scatter_tensor_coalesced_": (1, 0),
    "c10d::alltoall_": (1, 0), "c10d::alltoall_base_": (1, 0),
    "c10d::broadcast_": (0, 0), "c10d::reduce_": (0, 0),
    "c10d::gather_": (1, 0), "c10d::scatter_": (1, 0),
    "c10d::send": (0, None), "c10d::recv_": (None, 0), "c10d::recv_any_source_": (None, 0),
}  # fmt: skip
#: which ``Concrete Inputs`` entry of a point-to-point ``c10d::*`` op holds the peer, the other
#: side's rank in the process group (``send(tensors, pg, dstRank, tag)``,
#: ``recv_(tensors, pg, srcRank, tag)``; recorded with ``record_shapes=True``)
C10D_PEER_ARG = {"c10d::send": 2, "c10d::recv_": 2}
#: collectives whose NCCL / RCCL kernel reduces, so its name's type suffix is the data's; the
#: others move bytes (``ncclKernel_AllGather_RING_LL_Sum_int8_t`` gathers any type)
REDUCING_COLLECTIVES = ("all_reduce", "reduce_scatter", "reduce")
#: bytes per element of the ``dtype`` c10d writes with a collective (``c10::ScalarType`` names)
#: and of the type suffix of NCCL / RCCL kernel names (``..._Sum_float``, ``..._bf16``)
COLLECTIVE_DTYPE_BYTES = {
    "Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
    "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16,
    "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
    "double": 8, "float": 4, "half": 2, "bf16": 2, "__nv_bfloat16": 2, "int8_t": 1,
    "uint8_t": 1, "int32_t": 4, "uint32_t": 4, "int64_t": 8, "uint64_t": 8,
    "__nv_fp8_e4m3": 1, "__nv_fp8_e5m2": 1,
}  # fmt: skip
#: collectives by how they are spelled (lower case, without ``_``, after any ``gloo:`` /
#: ``nccl:`` / ``c10d::`` / ``ncclKernel_`` / ``ncclDevKernel_`` prefix): first prefix wins
COLLECTIVE_SPELLINGS = (
    ("allreduce", "all_reduce"), ("allgather", "all_gather"),
    ("reducescatter", "reduce_scatter"), ("alltoall", "all_to_all"), ("all2all", "all_to_all"),
    ("broadcast", "broadcast"), ("reduce", "reduce"), ("sendrecv", "send_recv"),
    ("send", "send"), ("recv", "recv"), ("barrier", "barrier"), ("gather", "gather"),
    ("scatter", "scatter"),
)  # fmt: skip

#: torch's name of an element type, however a trace spells it: c10d's ``c10::ScalarType`` names,
#: ``Input type``'s C++ names, the type suffix of NCCL / RCCL kernels
TORCH_DTYPE = {
    **dict.fromkeys(("Double", "double"), "float64"),
    **dict.fromkeys(("Float", "float"), "float32"),
    **dict.fromkeys(("Half", "half", "c10::Half"), "float16"),
    **dict.fromkeys(("BFloat16", "bf16", "__nv_bfloat16", "c10::BFloat16"), "bfloat16"),
    **dict.fromkeys(("Long", "long", "long int", "int64_t"), "int64"),
    **dict.fromkeys(("Int", "int", "int32_t"), "int32"),
    **dict.fromkeys(("Short", "short"), "int16"),
    **dict.fromkeys(("Char", "signed char", "int8_t"), "int8"),
    **dict.fromkeys(("Byte", "unsigned char", "uint8_t"), "uint8"),
    "uint32_t": "uint32", "uint64_t": "uint64", "Bool": "bool", "bool": "bool",
    "ComplexFloat": "complex64", "ComplexDouble": "complex128",
    **dict.fromkeys(("Float8_e4m3fn", "__nv_fp8_e4m3", "c10::Float8_e4m3fn"), "float8_e4m3fn"),
    **dict.fromkeys(("Float8_e5m2", "__nv_fp8_e5m2", "c10::Float8_e5m2"), "float8_e5m2"),
    **dict.fromkeys(("Float8_e4m3fnuz", "c10::Float8_e4m3fnuz"), "float8_e4m3fnuz"),
    **dict.fromkeys(("Float8_e5m2fnuz", "c10::Float8_e5m2fnuz"), "float8_e5m2fnuz"),
}  # fmt: skip
#: the element types of NCCL 2.19+ kernel names (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``)
NCCL_SHORT_DTYPES = {
    "i8": "int8", "u8": "uint8", "i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16",
    "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}  # fmt: skip
TORCH_DTYPE.update(NCCL_SHORT_DTYPES)


def torch_dtype(name: str) -> str:
    """``'signed char'``, ``'Char'``, ``'int8_t'`` -> ``'int8'``; a name not known stays."""
    return TORCH_DTYPE.get(name, name)


def memcpy_kind(name: str) -> str:
    """``Memcpy HtoD`` ... from a copy's event name (``Memset`` for every memset,
    ``Memcpy Unknown`` when the direction is not written)."""
    if name.startswith(("Memset", "hipMemset")):
        return "Memset"
    if name.startswith("Memcpy") and name[:11] in MEMCPY_KINDS:
        return name[:11]
    direction = name[len("hipMemcpy") :][:4] if name.startswith("hipMemcpy") else ""
    kind = f"Memcpy {direction}"
    return kind if kind in MEMCPY_KINDS else "Memcpy Unknown"
