"""The operators with a FLOP / byte model, by name: :func:`model` gives the :class:`Work` of one
call, or None for an operator without a model (or shapes that do not fit its signature).

Backward autograd nodes (``AddmmBackward0`` and their ``autograd::engine::evaluate_function:``
wrappers) are described by their forward operator's inputs (see :mod:`.shapes`) and modelled as
a multiple of the forward: matrix products 2x (input and weight gradients), attention 2.5x
(five products instead of two), convolution 2x.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from . import matrix as mx
from . import memory_bound as mb
from .work import Inputs, Work

BACKWARD_WRAPPER = "autograd::engine::evaluate_function: "

Model = Callable[[Inputs], "Work | None"]


def _sdpa(q_at, causal_at, heads_first=True, bottom_right=False, backward=False) -> Model:
    return lambda x: mx.attention(x, q_at, causal_at, heads_first, bottom_right, backward)


def _efficient(q_at, mask_at, backward=False) -> Model:
    """xformers-style kernels: ``custom_mask_type`` 1 = causal top-left, 2 = bottom-right."""

    def run(x: Inputs) -> Work | None:
        mask = x.value(mask_at, 0)
        causal = mask in (1, 2)
        return mx.attention(x, q_at, -1, False, mask == 2, backward, causal=causal)

    return run


def _scaled(model: Model, factor: float) -> Model:
    def run(x: Inputs) -> Work | None:
        work = model(x)
        return work and Work(factor * work.flops, factor * work.bytes, work.precision, work.kind)

    return run


_UNARY = (
    "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "neg", "abs", "sqrt", "rsqrt",
    "reciprocal", "erf", "sin", "cos", "hardtanh", "leaky_relu", "elu", "softplus", "mish",
    "logit", "sign", "square", "clamp", "clamp_min", "clamp_max", "nan_to_num",
)  # fmt: skip
_BINARY = (
    "add", "sub", "mul", "div", "rsub", "pow", "maximum", "minimum", "where", "eq", "ne", "lt",
    "gt", "le", "ge", "logical_and", "logical_or", "logical_not", "masked_fill", "addcmul",
    "addcdiv", "lerp", "threshold_backward", "gelu_backward", "silu_backward",
    "sigmoid_backward", "tanh_backward", "logit_backward", "fmod", "remainder",
    "bitwise_and", "bitwise_or", "bitwise_not",
)  # fmt: skip
_REDUCTIONS = (
    "sum", "mean", "amax", "amin", "max", "min", "norm", "linalg_vector_norm", "var", "std",
    "var_mean", "argmax", "argmin", "any", "all", "prod", "logsumexp", "cumsum",
)  # fmt: skip

_NORMS = {
    "layer_norm": "layer", "native_layer_norm": "layer", "rms_norm": "rms",
    "_fused_rms_norm": "rms", "group_norm": "group", "native_group_norm": "group",
    "batch_norm": "batch", "_batch_norm_impl_index": "batch", "native_batch_norm": "batch",
    "cudnn_batch_norm": "batch", "miopen_batch_norm": "batch", "_native_batch_norm_legit": "batch",
}  # fmt: skip
_NORMS_BACKWARD = {
    "native_layer_norm_backward": "layer", "native_group_norm_backward": "group",
    "native_batch_norm_backward": "batch", "cudnn_batch_norm_backward": "batch",
    "_fused_rms_norm_backward": "rms",
}  # fmt: skip

MODELS: dict[str, Model] = {
    # matrix products (forward)
    "aten::mm": lambda x: mx.gemm(x, 0, 1),
    "aten::addmm": lambda x: mx.gemm(x, 1, 2, extra=0),
    "aten::bmm": lambda x: mx.gemm(x, 0, 1),
    "aten::baddbmm": lambda x: mx.gemm(x, 1, 2, extra=0),
    "aten::matmul": lambda x: mx.gemm(x, 0, 1),
    "aten::linear": mx.linear,
    "aten::_scaled_mm": lambda x: mx.gemm(x, 0, 1),
    # convolution
    **{name: partial(mx.conv, name=name) for name in mx.CONV_ARGS},
    "aten::convolution_backward": mx.conv_backward,
    # attention: SDPA [B, H, L, E]; the flash / efficient kernels and flash-attn [B, L, H, E]
    "aten::scaled_dot_product_attention": _sdpa(0, 5),
    "aten::_scaled_dot_product_flash_attention": _sdpa(0, 4),
    "aten::_scaled_dot_product_efficient_attention": _sdpa(0, 6),
    "aten::_scaled_dot_product_cudnn_attention": _sdpa(0, 6),
    "aten::_flash_attention_forward": _sdpa(0, 8, heads_first=False),
    "aten::_efficient_attention_forward": _efficient(0, 9),
    "flash_attn::_flash_attn_forward": _sdpa(0, 5, heads_first=False, bottom_right=True),
    "FlashAttnFunc": _sdpa(0, 5, heads_first=False, bottom_right=True),  # its autograd.Function
    "aten::_scaled_dot_product_flash_attention_backward": _sdpa(1, 11, backward=True),
    "aten::_scaled_dot_product_efficient_attention_backward": _sdpa(1, 11, backward=True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _sdpa(1, 14, backward=True),
    "aten::_flash_attention_backward": _sdpa(1, 11, heads_first=False, backward=True),
    "aten::_efficient_attention_backward": _efficient(1, 14, backward=True),
    "flash_attn::_flash_attn_backward": _sdpa(
        1, 11, heads_first=False, bottom_right=True, backward=True
    ),
    # normalization, softmax
    **{f"aten::{n}": partial(mb.norm, family=f) for n, f in _NORMS.items()},
    **{f"aten::{n}": partial(mb.norm, family=f, backward=True) for n, f in _NORMS_BACKWARD.items()},
    **{f"aten::{n}": mb.softmax for n in ("softmax", "_softmax", "log_softmax", "_log_softmax")},
    "aten::_softmax_backward_data": lambda x: mb.softmax(x, backward=True),
    "aten::_log_softmax_backward_data": lambda x: mb.softmax(x, backward=True),
    # elementwise, reductions, copies
    **{f"aten::{n}{s}": mb.elementwise for n in _UNARY + _BINARY for s in ("", "_")},
    **{f"aten::{n}": mb.reduction for n in _REDUCTIONS},
    "aten::fill_": mb.fill,
    "aten::zero_": mb.fill,
    "aten::copy_": mb.copy,
    "aten::embedding": mb.embedding,
}

#: autograd nodes modelled from their forward operator's inputs: (forward model, factor)
BACKWARD_NODES: dict[str, tuple[str, float]] = {
    "MmBackward0": ("aten::mm", 2.0),
    "AddmmBackward0": ("aten::addmm", 2.0),
    "BmmBackward0": ("aten::bmm", 2.0),
    "BaddbmmBackward0": ("aten::baddbmm", 2.0),
    "MatmulBackward0": ("aten::matmul", 2.0),
    "LinearBackward0": ("aten::linear", 2.0),
    "ConvolutionBackward0": ("aten::convolution", 2.0),
    "CudnnConvolutionBackward0": ("aten::cudnn_convolution", 2.0),
    "ScaledDotProductFlashAttentionBackward0": ("aten::_scaled_dot_product_flash_attention", 2.5),
    "ScaledDotProductEfficientAttentionBackward0": (
        "aten::_scaled_dot_product_efficient_attention",
        2.5,
    ),  # fmt: skip
    "ScaledDotProductCudnnAttentionBackward0": ("aten::_scaled_dot_product_cudnn_attention", 2.5),
    "FlashAttnFuncBackward": ("flash_attn::_flash_attn_forward", 2.5),
}
for _node, (_forward, _factor) in BACKWARD_NODES.items():
    MODELS[_node] = MODELS[BACKWARD_WRAPPER + _node] = _scaled(MODELS[_forward], _factor)


def is_backward_node(name: str) -> bool:
    return name.removeprefix(BACKWARD_WRAPPER) in BACKWARD_NODES


def is_modelled(name: str) -> bool:
    """Whether :func:`model` has a model of ``name`` (for any inputs)."""
    return name in MODELS


def model(name: str, inputs: Inputs, forward_inputs: bool = False) -> Work | None:
    """The work of one call of ``name`` with these inputs; None when not modelled. A backward
    node is modelled only from its forward operator's inputs (``forward_inputs``)."""
    fn = MODELS.get(name)
    if fn is None or (is_backward_node(name) and not forward_inputs):
        return None
    try:
        return fn(inputs)
    except (IndexError, TypeError, ValueError, ZeroDivisionError):  # inputs of another overload
        return None
