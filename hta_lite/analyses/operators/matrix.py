"""FLOPs and bytes of the operators that run on the matrix units: matrix products, convolutions,
attention. Formulas and worked examples: docs/analyses/operators.md."""

from __future__ import annotations

import math

from .work import Inputs, Work


# ---- matrix products ---------------------------------------------------------------------------
def _product(a: list, b: list) -> tuple[int, int, int, int] | None:
    """``(batch, M, K, N)`` of ``a @ b`` with matmul's broadcasting, None if they do not fit."""
    if not a or not b:
        return None
    m = a[-2] if len(a) >= 2 else 1
    k = a[-1]
    n = b[-1] if len(b) >= 2 else 1
    if (b[-2] if len(b) >= 2 else b[0]) != k:
        return None
    batch_a, batch_b = a[:-2], b[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a = [1] * (width - len(batch_a)) + list(batch_a)
    batch_b = [1] * (width - len(batch_b)) + list(batch_b)
    if any(x != y and 1 not in (x, y) for x, y in zip(batch_a, batch_b)):
        return None
    return math.prod(max(x, y) for x, y in zip(batch_a, batch_b)), m, k, n


def gemm(x: Inputs, a: int, b: int, extra: int | None = None, precision=None) -> Work | None:
    fit = _product(x.shape(a), x.shape(b))
    if fit is None:
        return None
    batch, m, k, n = fit
    out_bytes = batch * m * n * (x.elt(a) if x.elt(a) > 1 else 2)  # fp8 products write 16 bits
    moved = x.nbytes(a) + x.nbytes(b) + out_bytes + (x.nbytes(extra) if extra is not None else 0)
    return Work(2.0 * batch * m * n * k, moved, precision or x.precision(), "matmul")


def linear(x: Inputs) -> Work | None:
    inp, weight = x.shape(0), x.shape(1)
    if len(weight) != 2 or not inp or inp[-1] != weight[1]:
        return None
    rows, (n, k) = math.prod(inp[:-1]), weight
    moved = x.nbytes(0) + x.nbytes(1) + x.nbytes(2) + rows * n * x.elt(0)
    return Work(2.0 * rows * n * k, moved, x.precision(), "matmul")


# ---- convolution -------------------------------------------------------------------------------
# positions of (stride, padding, dilation, transposed, allow_tf32) among each signature's inputs
CONV_ARGS = {
    "aten::conv1d": (3, 4, 5, None, None),
    "aten::conv2d": (3, 4, 5, None, None),
    "aten::conv3d": (3, 4, 5, None, None),
    "aten::convolution": (3, 4, 5, 6, None),
    "aten::_convolution": (3, 4, 5, 6, 12),
    "aten::cudnn_convolution": (3, 2, 4, None, 8),
    "aten::miopen_convolution": (4, 3, 5, None, None),
}


def _per_dim(value, n: int, default: int) -> list | None:
    if value is None:
        return None
    if isinstance(value, int):
        return [value] * n
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return value * n if len(value) == 1 else value
    return [default] * n if value == "valid" and default == 0 else None


def conv(x: Inputs, name: str) -> Work | None:
    inp, weight = x.shape(0), x.shape(1)
    if len(inp) < 3 or len(weight) != len(inp):
        return None
    stride_at, pad_at, dil_at, transposed_at, tf32_at = CONV_ARGS[name]
    if transposed_at is not None and x.value(transposed_at, False):
        return None
    n_sp = len(inp) - 2
    stride = _per_dim(x.value(stride_at), n_sp, 1)
    padding = x.value(pad_at)
    dilation = _per_dim(x.value(dil_at), n_sp, 1)
    if stride is None or dilation is None:
        return None
    kernel = weight[2:]
    if padding == "same":
        out = [-(-i // s) for i, s in zip(inp[2:], stride)]
    else:
        padding = _per_dim(padding, n_sp, 0)
        if padding is None:
            return None
        out = [
            (i + 2 * p - d * (k - 1) - 1) // s + 1
            for i, p, d, k, s in zip(inp[2:], padding, dilation, kernel, stride)
        ]
    if min(out) <= 0:
        return None
    per_pass = 2.0 * inp[0] * math.prod(out) * math.prod(weight)
    moved = x.nbytes(0) + x.nbytes(1) + inp[0] * weight[0] * math.prod(out) * x.elt(0)
    return Work(per_pass, moved, _conv_precision(x, tf32_at), "conv")


def _conv_precision(x: Inputs, tf32_at: int | None) -> str:
    """float32 convolutions run as TF32 unless the call says ``allow_tf32=False`` (cuDNN's
    default, ``torch.backends.cudnn.allow_tf32``, is True)."""
    precision = x.precision()
    if precision != "fp32":
        return precision
    return "fp32" if tf32_at is not None and x.value(tf32_at, True) is False else "tf32"


def conv_backward(x: Inputs) -> Work | None:
    grad_out, inp, weight = x.shape(0), x.shape(1), x.shape(2)
    if len(grad_out) < 3 or len(inp) != len(grad_out) or len(weight) != len(inp):
        return None
    mask = x.value(10, [True, True, False])
    passes = sum(1 for m in mask[:2] if m) if isinstance(mask, list) else 2
    per_pass = 2.0 * grad_out[0] * math.prod(grad_out[2:]) * math.prod(weight)
    moved = x.nbytes(0) + 2 * x.nbytes(1) + 2 * x.nbytes(2)
    return Work(passes * per_pass, moved, _conv_precision(x, None), "conv")


# ---- attention ---------------------------------------------------------------------------------
def attended_pairs(q_len: int, kv_len: int, causal: bool, bottom_right: bool) -> int:
    """(query, key) pairs a mask keeps: all without one; with a causal mask, row i sees keys
    0..i (top-left aligned, PyTorch's SDPA) or 0..i + kv_len - q_len (bottom-right, flash-attn):
    the sum over rows of clip(i + 1 + shift, 0, kv_len), in closed form."""
    if not causal:
        return q_len * kv_len
    shift = kv_len - q_len if bottom_right else 0
    first_row = max(0, -shift)  # rows before it see no key
    full_from = min(q_len, max(first_row, kv_len - 1 - shift))  # rows from it see every key
    n = max(0, full_from - first_row)
    partial = n * (first_row + 1 + shift) + n * (n - 1) // 2
    return partial + (q_len - full_from) * kv_len


def attention(x: Inputs, q_at: int, causal_at: int, heads_first: bool, bottom_right=False,
              backward=False, causal=None) -> Work | None:  # fmt: skip
    """``heads_first``: q is [B, H, L, E] (SDPA), else [B, L, H, E] (flash / efficient kernels)."""
    q, k, v = x.shape(q_at), x.shape(q_at + 1), x.shape(q_at + 2)
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    if heads_first:
        (b, h, q_len, e), kv_len, ev = q, k[2], v[3]
    else:
        (b, q_len, h, e), kv_len, ev = q, k[1], v[3]
    if causal is None:
        causal = bool(x.value(causal_at, False))
    pairs = attended_pairs(q_len, kv_len, causal, bottom_right)
    flops = 2.0 * b * h * pairs * (e + ev)
    moved = (
        x.nbytes(q_at) + x.nbytes(q_at + 1) + x.nbytes(q_at + 2) + b * h * q_len * ev * x.elt(q_at)
    )
    if backward:  # 5 products instead of 2; reads q, k, v, out, d_out and writes dq, dk, dv
        flops, moved = 2.5 * flops, 2 * moved
    return Work(flops, moved, x.precision(), "attention")
