"""FLOPs and bytes of the bytes-bound operators: normalization, softmax, elementwise, reductions,
copies, embedding lookups. Bytes = the tensors read plus the tensors written (each once: the
lower bound a fused kernel reaches); FLOPs = a small count per element, given per family.
Formulas and worked examples: docs/analyses/operators.md."""

from __future__ import annotations

import math

from .work import Inputs, Work

#: FLOPs per element of the normalized tensor (forward: mean, variance, normalize, scale, shift)
NORM_FLOPS = {"layer": 5, "rms": 4, "group": 5, "batch": 5}
SOFTMAX_FLOPS = 5  # max, subtract, exp, sum, divide


def _broadcast(shapes: list[list]) -> list | None:
    width = max((len(s) for s in shapes), default=0)
    out = [1] * width
    for shape in shapes:
        for i, d in enumerate([1] * (width - len(shape)) + list(shape)):
            if d != 1 and out[i] not in (1, d):
                return None
            out[i] = max(out[i], d) if 1 in (out[i], d) else d
    return out


def elementwise(x: Inputs) -> Work | None:
    """Reads every tensor input, writes one output of their broadcast shape (in place too);
    1 FLOP per output element."""
    tensors = x.tensors()
    if not tensors:
        return None
    out = _broadcast([x.shape(i) for i in tensors])
    if out is None:
        return None
    numel = math.prod(out)
    moved = sum(x.nbytes(i) for i in tensors) + numel * x.elt(tensors[0])
    return Work(float(numel), moved, x.precision(), "elementwise")


def fill(x: Inputs) -> Work | None:
    """``fill_`` / ``zero_``: writes its tensor, reads nothing."""
    if not x.is_tensor(0):
        return None
    return Work(0.0, x.nbytes(0), x.precision(), "elementwise")


def copy(x: Inputs) -> Work | None:
    """``copy_(self, src)``: reads ``src``, writes ``self`` (types may differ)."""
    if not (x.is_tensor(0) and x.is_tensor(1)):
        return None
    return Work(0.0, x.nbytes(1) + x.nbytes(0), x.precision(), "copy")


def reduction(x: Inputs) -> Work | None:
    """Reads its input once (the output, far smaller, is not counted); 1 FLOP per element read."""
    if not x.is_tensor(0):
        return None
    return Work(float(x.numel(0)), x.nbytes(0), x.precision(), "reduction")


def norm(x: Inputs, family: str, backward: bool = False) -> Work | None:
    """Forward: reads the input and the affine parameters, writes the output. Backward: reads
    the output gradient and the input, writes the input gradient (2x the forward FLOPs)."""
    at = 1 if backward else 0  # backward signatures start with the output gradient
    if not x.is_tensor(at):
        return None
    numel, size = x.numel(at), x.nbytes(at)
    params = sum(x.nbytes(i) for i in x.tensors() if i > at and x.numel(i) < numel)
    moved = (3 if backward else 2) * size + params
    return Work(
        float(NORM_FLOPS[family] * numel * (2 if backward else 1)), moved, x.precision(), "norm"
    )


def softmax(x: Inputs, backward: bool = False) -> Work | None:
    """Forward reads the input and writes the output; backward reads the output gradient and the
    output, writes the input gradient."""
    if not x.is_tensor(0):
        return None
    numel, size = x.numel(0), x.nbytes(0)
    return Work(
        float(SOFTMAX_FLOPS * numel), (3 if backward else 2) * size, x.precision(), "softmax"
    )


def embedding(x: Inputs) -> Work | None:
    """``embedding(weight, indices)``: reads the indices and one weight row per index, writes the
    rows out."""
    weight, indices = x.shape(0), x.shape(1)
    if len(weight) != 2 or not x.is_tensor(1):
        return None
    rows = math.prod(indices)
    return Work(0.0, x.nbytes(1) + 2 * rows * weight[1] * x.elt(0), x.precision(), "embedding")
