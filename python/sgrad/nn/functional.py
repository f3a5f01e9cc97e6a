"""Functional forms of the layers, with ``torch.nn.functional``'s names and argument order
(``embedding(input, weight)``, where ``sgrad.embedding`` takes the table first). Each
returns a step Tensor; errors are the ops' (see ``sgrad.ops``)."""
from typing import Optional, Sequence, Union

import numpy as np

from .. import ops
from ..tensor import Tensor

__all__ = ["embedding", "embedding_bag", "linear", "dropout", "layer_norm", "relu",
           "sigmoid", "tanh", "softmax", "log_softmax", "cross_entropy",
           "binary_cross_entropy_with_logits"]


def embedding(input, weight: Tensor, padding_idx: Optional[int] = None,
              max_norm: Optional[float] = None, *, fused=None) -> Tensor:
    """Rows of ``weight`` (V, D) at int indices ``input`` (...) -> (..., D); the weight's
    gradient is COO (one row per index; none for ``padding_idx``). ``max_norm``: rows
    looked up are renormalised in place to at most that L2 norm. ``fused``: an optimizer
    whose update the backward applies to the rows. IndexRangeError for an index out of
    [0, V)."""
    return ops.embedding(weight, input, padding_idx=padding_idx,
                         max_norm=0.0 if max_norm is None else float(max_norm), fused=fused)


def embedding_bag(input, weight: Tensor, offsets=None, max_norm: Optional[float] = None,
                  norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = True, per_sample_weights=None,
                  include_last_offset: bool = False, padding_idx: Optional[int] = None, *,
                  fused=None) -> Tensor:
    """Bags of rows of ``weight`` (V, D) reduced by ``mode`` ("sum", "mean", "max") ->
    (B, D). ``input`` 1-D int with ``offsets`` (B, or B+1 with ``include_last_offset``),
    or 2-D (B, L) without offsets. ``per_sample_weights`` (N) float scales each row (mode
    "sum"). The weight's gradient is always COO (``sparse`` is accepted for PyTorch's
    signature; False raises NotImplementedError, as do ``max_norm`` and
    ``scale_grad_by_freq``, which sgrad's bags do not implement)."""
    if max_norm is not None:
        raise NotImplementedError("embedding_bag: max_norm is not supported")
    if scale_grad_by_freq:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq is not supported")
    if not sparse:
        raise NotImplementedError("embedding_bag: the gradient is always sparse (sparse=True)")
    if offsets is None:
        if not isinstance(input, Tensor):
            input = np.asarray(input)
        shape = input.shape
        if len(shape) != 2:
            raise ValueError("embedding_bag: input must be 2-D (B, L) when offsets is None, "
                             f"got shape {tuple(shape)}")
        offsets = np.arange(shape[0], dtype=np.int64) * shape[1]
        input = ops.reshape(input, -1) if isinstance(input, Tensor) else input.reshape(-1)
    return ops.embedding_bag(weight, input, offsets, mode=mode,
                             per_sample_weights=per_sample_weights, padding_idx=padding_idx,
                             include_last_offset=include_last_offset, fused=fused)


def linear(input, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """input (..., in) @ weight.T (weight (out, in)) + bias (out) -> (..., out)."""
    y = ops.matmul(input, ops.transpose(weight, 0, 1))
    return y if bias is None else ops.add(y, bias)


def dropout(input, p: float = 0.5, training: bool = True) -> Tensor:
    """Zeroes each element with probability ``p`` and scales the others by 1/(1-p), from
    the context's random stream (the same mask for a seed whatever the thread count);
    ``training=False`` or ``p == 0``: the input unchanged. ValueError for p outside
    [0, 1]."""
    return ops.dropout(input, p, training)


def layer_norm(input, normalized_shape: Union[int, Sequence[int]],
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over the last dimension (biased variance), times
    ``weight`` plus ``bias`` (both (D,), optional). ``normalized_shape`` must be the last
    dimension (an int or a 1-tuple): ShapeError otherwise."""
    return ops.layer_norm(input, normalized_shape, weight, bias, eps)


def relu(input) -> Tensor:
    """max(x, 0) elementwise."""
    return ops.relu(input)


def sigmoid(input) -> Tensor:
    """1 / (1 + exp(-x)) elementwise, stable for any finite x."""
    return ops.sigmoid(input)


def tanh(input) -> Tensor:
    """tanh(x) elementwise."""
    return ops.tanh(input)


def softmax(input, dim: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``, stable."""
    return ops.softmax(input, dim)


def log_softmax(input, dim: int = -1) -> Tensor:
    """x - logsumexp(x) along ``dim``, stable."""
    return ops.log_softmax(input, dim)


def cross_entropy(input, target) -> Tensor:
    """Mean over N of -log_softmax(input)[target]: input (N, C) float, target (N) int in
    [0, C) (IndexRangeError otherwise)."""
    return ops.cross_entropy(input, target)


def binary_cross_entropy_with_logits(input, target) -> Tensor:
    """Mean binary cross-entropy of sigmoid(input) against target (same shape, in [0, 1]),
    computed stably from the logits."""
    return ops.bce_with_logits(input, target)
