"""Peak throughput of known accelerators: dense FLOP/s per precision and memory bandwidth, each
from its vendor's public specification; and which one a trace ran on.

Values are per device *as PyTorch sees it*: an MI250X / MI250 module is two devices (two GCDs),
so their entries are half the module's. Dense means without 2:4 sparsity. ``matrix`` peaks are
the tensor / matrix cores', ``vector_fp32`` the CUDA cores' / SIMD units' (the compute roof of
the bytes-bound operators). A precision missing from ``matrix`` falls back to ``vector_fp32``;
TF32 on AMD devices falls back to FP32 (PyTorch does not use XF32 there by default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import SelectionError
from ...load.metadata import Device, TraceMetadata


@dataclass(frozen=True)
class DeviceSpec:
    """A device's peaks: ``matrix`` TFLOP/s by precision (``fp64``, ``fp32``, ``tf32``,
    ``fp16``, ``bf16``, ``fp8``, ``int8``), ``vector_fp32`` TFLOP/s, ``memory_tbps`` TB/s
    (10^12 B/s), and where the numbers come from."""

    name: str
    matrix: dict[str, float]
    vector_fp32: float
    memory_tbps: float
    source: str = ""
    vendor: str = "NVIDIA"

    def peak_tflops(self, precision: str, on_matrix_units: bool = True) -> float:
        if precision == "tf32" and self.vendor == "AMD":
            precision = "fp32"
        if on_matrix_units and precision in self.matrix:
            return self.matrix[precision]
        return self.vector_fp32


def _nv(name, fp64, tf32, fp32, fp16, fp8, vector, tbps, source, bf16=None) -> DeviceSpec:
    matrix = {"fp64": fp64, "fp32": fp32, "fp16": fp16, "bf16": fp16 if bf16 is None else bf16}
    matrix.update({"tf32": tf32} if tf32 else {})
    matrix.update({"fp8": fp8, "int8": fp8} if fp8 else {"int8": 2 * fp16})
    return DeviceSpec(name, {k: v for k, v in matrix.items() if v}, vector, tbps, source)


def _amd(name, fp64, tf32, fp32, fp16, fp8, vector, tbps, source) -> DeviceSpec:
    matrix = {"fp64": fp64, "fp32": fp32, "fp16": fp16, "bf16": fp16, "int8": fp8 or fp16}
    matrix.update({"tf32": tf32} if tf32 else {})
    matrix.update({"fp8": fp8} if fp8 else {})
    return DeviceSpec(name, matrix, vector, tbps, source, vendor="AMD")


_NV = "https://www.nvidia.com/"
_AMD = "https://www.amd.com/en/products/accelerators/instinct/"
#: the built-in table (TFLOP/s dense, TB/s); name -> spec
DEVICES: dict[str, DeviceSpec] = {
    d.name: d
    for d in (
        _nv("V100 SXM2", 7.8, 0, 15.7, 125, 0, 15.7, 0.9,
            _NV + "en-us/data-center/v100/ (datasheet)", bf16=0),
        _nv("V100 PCIe", 7, 0, 14, 112, 0, 14, 0.9,
            _NV + "en-us/data-center/v100/ (datasheet)", bf16=0),
        _nv("A100 SXM4 40GB", 19.5, 156, 19.5, 312, 0, 19.5, 1.555,
            _NV + "content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet.pdf"),
        _nv("A100 SXM4 80GB", 19.5, 156, 19.5, 312, 0, 19.5, 2.039,
            _NV + "content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet.pdf"),
        _nv("A100 PCIe 80GB", 19.5, 156, 19.5, 312, 0, 19.5, 1.935,
            _NV + "content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet.pdf"),
        _nv("H100 SXM", 66.9, 494.7, 66.9, 989.4, 1978.9, 66.9, 3.35,
            _NV + "en-us/data-center/h100/ (datasheet, sparsity values halved)"),
        _nv("H100 PCIe", 51.2, 378, 51.2, 756, 1513, 51.2, 2.0,
            _NV + "en-us/data-center/h100/ (datasheet, sparsity values halved)"),
        _nv("H100 NVL", 60, 417.5, 60, 835.5, 1670.5, 60, 3.9,
            _NV + "en-us/data-center/h100/ (datasheet, sparsity values halved)"),
        _nv("H200 SXM", 66.9, 494.7, 66.9, 989.4, 1978.9, 66.9, 4.8,
            _NV + "en-us/data-center/h200/ (datasheet, sparsity values halved)"),
        _nv("B200", 37, 1125, 75, 2250, 4500, 75, 8.0,
            _NV + "en-us/data-center/hgx/ (HGX B200 per GPU: 8-GPU totals / 8, sparsity halved)"),
        _amd("MI210", 45.3, 0, 45.3, 181, 0, 22.6, 1.6384, _AMD + "mi200/mi210.html"),
        _amd("MI250 (one GCD)", 45.3, 0, 45.3, 181, 0, 22.6, 1.6384,
             _AMD + "mi200/mi250.html (module values / 2)"),
        _amd("MI250X (one GCD)", 47.9, 0, 47.9, 191.5, 0, 23.9, 1.6384,
             _AMD + "mi200/mi250x.html (module values / 2)"),
        _amd("MI300X", 163.4, 653.7, 163.4, 1307.4, 2614.9, 163.4, 5.3, _AMD + "mi300/mi300x.html"),
        _amd("MI325X", 163.4, 653.7, 163.4, 1307.4, 2614.9, 163.4, 6.0, _AMD + "mi300/mi325x.html"),
        _amd("MI350X", 72.1, 0, 144.2, 2306.9, 4613.7, 144.2, 8.0, _AMD + "mi350/mi350x.html"),
        _amd("MI355X", 78.6, 0, 157.3, 2516.6, 5033.2, 157.3, 8.0, _AMD + "mi350/mi355x.html"),
    )
}  # fmt: skip

# device names as the driver reports them (deviceProperties[].name) -> table entry; first match
_NAME_PATTERNS = (
    (r"B200", "B200"),
    (r"H200", "H200 SXM"),
    (r"H100.*PCIe", "H100 PCIe"),
    (r"H100 NVL", "H100 NVL"),
    (r"H100", "H100 SXM"),
    (r"A100.*PCIE.*80|A100 80GB PCIe", "A100 PCIe 80GB"),
    (r"A100", None),  # by memory size, below
    (r"V100.*PCIE", "V100 PCIe"),
    (r"V100", "V100 SXM2"),
    (r"MI355X", "MI355X"),
    (r"MI350X", "MI350X"),
    (r"MI325X", "MI325X"),
    (r"MI300X", "MI300X"),
    (r"MI250X", "MI250X (one GCD)"),
    (r"MI250", "MI250 (one GCD)"),
    (r"MI210", "MI210"),
)


#: (compute capability, SMs / compute units, memory GiB range) -> the table entry they can only
#: be, for a device whose name says nothing (``AMD Radeon Graphics``, an empty name): only
#: where every device with those numbers has the entry's peaks
_BY_PROPERTIES = (
    ((8, 0), 108, (30, 48), "A100 SXM4 40GB"),  # the PCIe 40 GB: the same peaks and bandwidth
    ((9, 0), 132, (70, 88), "H100 SXM"),
    ((9, 0), 114, (70, 88), "H100 PCIe"),
    ((9, 0), 132, (88, 100), "H100 NVL"),
    ((9, 0), 132, (130, 150), "H200 SXM"),
    ((10, 0), 148, (170, 200), "B200"),
    ((9, 0), 104, (60, 68), "MI250 (one GCD)"),  # gfx90a: MI210 and an MI250 GCD, same peaks
    ((9, 4), 304, (180, 200), "MI300X"),
    ((9, 4), 304, (240, 270), "MI325X"),
)


def detect(meta: TraceMetadata, device_ids: list[int]) -> DeviceSpec | None:
    """The spec of the device the rank's kernels ran on (the described device of its most used
    device id): by its name, else by its compute capability, SM count and memory where those can
    only be one entry's (:data:`_BY_PROPERTIES`); None when neither says."""
    chosen = described(meta, device_ids)
    if chosen is None:
        return None
    for pattern, entry in _NAME_PATTERNS:
        if re.search(pattern, chosen.name, re.IGNORECASE):
            if entry is None:  # A100: 40 GB or 80 GB SXM4
                entry = "A100 SXM4 80GB" if (chosen.total_memory or 0) > 60 * 2**30 else (
                    "A100 SXM4 40GB")  # fmt: skip
            return DEVICES[entry]
    return by_properties(chosen)


def described(meta: TraceMetadata, device_ids: list[int]) -> Device | None:
    """The described device of the first of ``device_ids`` (most used first) the file
    describes, else its first device; None when it describes none."""
    return next((d for d in meta.devices if d.index in device_ids), None) or next(
        iter(meta.devices), None
    )


def by_properties(device: Device) -> DeviceSpec | None:
    """The table entry a device's numbers can only be (see :data:`_BY_PROPERTIES`), or None."""
    if device.compute_capability is None or device.sm_count is None or not device.total_memory:
        return None
    memory = device.total_memory / 2**30
    for cap, count, (low, high), entry in _BY_PROPERTIES:
        if device.compute_capability == cap and device.sm_count == count and low <= memory < high:
            return DEVICES[entry]
    return None


_ARCH = re.compile(r"\bsm_?(\d{2,3})|cutlass_(\d{2,3})_|\b(volta|turing|ampere|hopper|blackwell)_")
_ARCH_NAMES = {"volta": 70, "turing": 75, "ampere": 80, "hopper": 90, "blackwell": 100}


def architecture_hint(kernel_names) -> str:
    """What a rank's kernel names say of its device: ``"sm80 or newer"`` (the newest
    architecture a kernel was built for: a device runs kernels of older ones too), or ``""``."""
    newest = 0
    for name in kernel_names:
        for match in _ARCH.finditer(str(name)):
            sm, cutlass, word = match.groups()
            newest = max(newest, int(sm or cutlass or _ARCH_NAMES[word]))
    return f"sm{newest} or newer" if newest else ""


def resolve(device: str | DeviceSpec | None) -> DeviceSpec | None:
    """A user's device choice: a :class:`DeviceSpec`, a table name (case-insensitive), or None."""
    if device is None or isinstance(device, DeviceSpec):
        return device
    for name, spec in DEVICES.items():
        if name.lower() == str(device).lower():
            return spec
    raise SelectionError(None, f"device {device!r} is not in the table; known: {list(DEVICES)}")
