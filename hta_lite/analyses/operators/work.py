"""What one operator call does: :class:`Work` (FLOPs, bytes moved, precision, kind) and
:class:`Inputs` (its shapes, types and concrete inputs, as the trace recorded them)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...kineto import DTYPE_BYTES, DTYPE_PRECISION
from ...load.inputs import concrete_value

MATRIX_KINDS = ("matmul", "conv", "attention")  # run on the matrix units (tensor / matrix cores)
MAX_ELEMENTS = 2**63  # a tensor's element count fits in int64 (PyTorch's own limit)
#: the work of a call whose inputs cannot be (:meth:`Inputs.valid`): not modelled, counted
INVALID_KIND = "invalid shape"


@dataclass(frozen=True)
class Work:
    flops: float
    bytes: float
    precision: str  # "bf16", "fp32", "tf32", ... (the key of the device peak tables)
    kind: str  # "matmul", "conv", "attention", "norm", "softmax", "elementwise", "reduction", ...


class Inputs:
    """One call's inputs: ``dims`` (a shape per input, [] for scalars), ``types``, ``concrete``."""

    def __init__(self, dims: list, types: list, concrete: list | None):
        self.dims, self.types = dims, types
        self.concrete = concrete or []
        # the tensor inputs, found once: the models ask about each input several times
        self._tensors = [
            i for i, t in enumerate(types[: len(dims)]) if isinstance(t, str) and t in DTYPE_BYTES
        ]
        self._is_tensor = frozenset(self._tensors)

    def valid(self) -> bool:
        """Whether every tensor's shape can be: a list of non-negative integers whose product
        fits in int64 (a trace can hold anything: negative dims, 10**30, floats)."""
        for i in self._tensors:
            shape = self.dims[i]
            if not isinstance(shape, list) or not all(
                type(d) is int and 0 <= d < MAX_ELEMENTS for d in shape
            ):
                return False
            if math.prod(shape) >= MAX_ELEMENTS:
                return False
        return True

    def is_tensor(self, i: int) -> bool:
        return i in self._is_tensor

    def shape(self, i: int) -> list:
        return self.dims[i] if self.is_tensor(i) else []

    def numel(self, i: int) -> int:
        return math.prod(self.dims[i]) if self.is_tensor(i) else 0

    def elt(self, i: int) -> int:
        return DTYPE_BYTES.get(self.types[i], 0) if i < len(self.types) else 0

    def nbytes(self, i: int) -> int:
        return self.numel(i) * self.elt(i)

    def tensors(self) -> list[int]:
        return list(self._tensors)

    def precision(self) -> str:
        for i in self._tensors:
            p = DTYPE_PRECISION.get(self.types[i], "")
            if p.startswith("fp") or p in ("bf16", "tf32"):
                return p
        return DTYPE_PRECISION.get(self.types[self._tensors[0]], "") if self._tensors else ""

    def value(self, i: int, default=None):
        """A concrete input parsed (``"[1, 1]"`` -> [1, 1], ``"True"`` -> True), else default."""
        return concrete_value(self.concrete[i] if i < len(self.concrete) else "", default)
