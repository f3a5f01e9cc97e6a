"""The differentiable ops (include/sgrad.h, "dense ops" and "sparse-gradient ops"), with
PyTorch's names and signatures. Every op takes Tensors, numpy arrays or numbers (arrays and
numbers become step tensors of the first Tensor's dtype) and returns a step Tensor that
dies at the next ``tape_reset``. Errors are raised before anything is written: ShapeError
and ArgumentError (ValueError), DtypeError and LayoutError (TypeError), IndexRangeError
(IndexError) for an index out of range.
"""
import builtins
import ctypes
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from ._args import int_arg, shape_arg
from ._lib import lib
from .errors import ArgumentError, ShapeError, _raise
from .tensor import Tensor, _ctx_of, _index_arg, _result, _tensor_arg

__all__ = ["add", "sub", "mul", "div", "scale", "matmul", "rowdot", "sum", "mean", "relu",
           "sigmoid", "tanh", "exp", "log", "log_sigmoid", "softmax", "log_softmax",
           "cross_entropy", "bce_with_logits", "reshape", "transpose", "concat", "embedding",
           "embedding_bag", "index_select", "slice_rows", "to_dense", "to_sparse",
           "sparse_mask", "sgns_loss", "hs_loss", "coalesce", "index_add_", "abs", "sqrt",
           "cos", "sin", "pow", "clamp", "maximum", "minimum", "where", "gather", "narrow",
           "norm", "logsumexp", "max", "dropout", "layer_norm", "cdist", "complex_cdist",
           "rowdist", "complex_mul", "ranking_loss"]

def _dtype_of(*xs):
    for x in xs:
        if isinstance(x, Tensor):
            return x.dtype
    return None


def _binary(fn, a, b, what: str) -> Tensor:
    if isinstance(a, Tensor) and isinstance(b, Tensor):  # the common case, kept short
        ctx = a._ctx
        refs = ctx._step_refs
        refs.append(a)
        refs.append(b)
        p = fn(a._h(), b._h())
    else:
        ctx = _ctx_of(a, b)
        dt = _dtype_of(a, b)
        p = fn(_tensor_arg(ctx, a, dt)._h(), _tensor_arg(ctx, b, dt)._h())
    if not p:
        _raise(ctx._ptr, what)
    return Tensor(ctx, p, False)


def _unary(fn, a, what: str) -> Tensor:
    if isinstance(a, Tensor):
        ctx = a._ctx
        ctx._step_refs.append(a)
        p = fn(a._h())
    else:
        ctx = _ctx_of(a)
        p = fn(_tensor_arg(ctx, a)._h())
    if not p:
        _raise(ctx._ptr, what)
    return Tensor(ctx, p, False)


def add(a, b) -> Tensor:
    """a + b, broadcasting (numpy rules); also COO + COO (a concatenation) and COO + dense
    (dense). Arrays and numbers take the Tensor operand's dtype. ShapeError for shapes that
    do not broadcast, DtypeError for mixed float dtypes."""
    return _binary(lib.sg_add, a, b, "add")


def sub(a, b) -> Tensor:
    """a - b, broadcasting."""
    return _binary(lib.sg_sub, a, b, "sub")


def div(a, b) -> Tensor:
    """a / b, broadcasting."""
    return _binary(lib.sg_div, a, b, "div")


def matmul(a, b) -> Tensor:
    """Matrix product: (M,K) @ (K,N), batched (B,M,K) @ (B,K,N), broadcast (B,M,K) @ (K,N),
    and COO (M,K) @ dense (K,N). Results are bitwise identical for any thread count."""
    return _binary(lib.sg_matmul, a, b, "matmul")


def rowdot(a, b) -> Tensor:
    """Row-wise dot products: a (N,D), b (N,D) -> (N,)."""
    return _binary(lib.sg_rowdot, a, b, "rowdot")


def bce_with_logits(logits, targets) -> Tensor:
    """Mean binary cross-entropy of sigmoid(logits) against targets (same shape, floats in
    [0, 1]), computed stably from the logits -> scalar."""
    return _binary(lib.sg_bce_with_logits, logits, targets, "bce_with_logits")


def sparse_mask(x, mask) -> Tensor:
    """x's values at the pattern of COO ``mask`` (a COO result); the backward restricts the
    gradient to that pattern (masked semantics, opt-in)."""
    return _binary(lib.sg_sparse_mask, x, mask, "sparse_mask")


def relu(a) -> Tensor:
    """max(x, 0) elementwise."""
    return _unary(lib.sg_relu, a, "relu")


def sigmoid(a) -> Tensor:
    """1 / (1 + exp(-x)) elementwise, stable for any finite x."""
    return _unary(lib.sg_sigmoid, a, "sigmoid")


def tanh(a) -> Tensor:
    """tanh(x) elementwise."""
    return _unary(lib.sg_tanh, a, "tanh")


def exp(a) -> Tensor:
    """exp(x) elementwise."""
    return _unary(lib.sg_exp, a, "exp")


def log(a) -> Tensor:
    """Natural log elementwise (NaN below 0, -inf at 0)."""
    return _unary(lib.sg_log, a, "log")


def log_sigmoid(a) -> Tensor:
    """log(sigmoid(x)) elementwise, stable for any finite x."""
    return _unary(lib.sg_log_sigmoid, a, "log_sigmoid")


def to_dense(a) -> Tensor:
    """The dense tensor a COO tensor means (duplicates summed); its backward passes the
    whole incoming gradient (not masked). A dense input is returned as it is."""
    return _unary(lib.sg_to_dense, a, "to_dense")


def mul(a, b) -> Tensor:
    """a * b elementwise, broadcasting; a Tensor times a Python number scales it (COO
    tensors too)."""
    if isinstance(a, Tensor):
        if isinstance(b, (int, float)):
            return scale(a, b)
    elif isinstance(a, (int, float)) and isinstance(b, Tensor):
        return scale(b, a)
    return _binary(lib.sg_mul, a, b, "mul")


def scale(a, s: float) -> Tensor:
    """s * a for a number s (a COO a stays COO)."""
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    return _result(ctx, lib.sg_scale(ta._h(), float(s)), "scale")


def cross_entropy(logits, targets) -> Tensor:
    """Mean over N of -log_softmax(logits)[target]: logits (N, C) float, targets (N) int in
    [0, C) (IndexRangeError otherwise) -> scalar."""
    ctx = _ctx_of(logits, targets)
    tl, tt = _tensor_arg(ctx, logits), _index_arg(ctx, targets)
    return _result(ctx, lib.sg_cross_entropy(tl._h(), tt._h()), "cross_entropy")


def sum(a, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """The sum of every element (-> scalar; COO too), or along ``dim``."""
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    p = (lib.sg_sum(ta._h()) if dim is None
         else lib.sg_sum_dim(ta._h(), int_arg(dim, "sum: dim", 32), 1 if keepdim else 0))
    return _result(ctx, p, "sum")


def mean(a, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """The mean of every element (-> scalar), or along ``dim``."""
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    p = (lib.sg_mean(ta._h()) if dim is None
         else lib.sg_mean_dim(ta._h(), int_arg(dim, "mean: dim", 32), 1 if keepdim else 0))
    return _result(ctx, p, "mean")


def softmax(a, dim: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``, stable."""
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_softmax(_tensor_arg(ctx, a)._h(),
                                       int_arg(dim, "softmax: dim", 32)), "softmax")


def log_softmax(a, dim: int = -1) -> Tensor:
    """x - logsumexp(x) along ``dim``, stable at large inputs."""
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_log_softmax(_tensor_arg(ctx, a)._h(),
                                           int_arg(dim, "log_softmax: dim", 32)), "log_softmax")


def reshape(a, *shape) -> Tensor:
    """The same elements in a new shape (a view; one dim may be -1); ``reshape(a, 2, 3)``
    or ``reshape(a, (2, 3))``. ShapeError when the element counts differ."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    return _result(ctx, lib.sg_reshape(ta._h(), len(shape), shape_arg(shape, "reshape")),
                   "reshape")


def transpose(a, dim0: int = 0, dim1: int = 1) -> Tensor:
    """``a`` with dims ``dim0`` and ``dim1`` swapped (a copy; COO too)."""
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_transpose(_tensor_arg(ctx, a)._h(),
                                         int_arg(dim0, "transpose: dim0", 32),
                                         int_arg(dim1, "transpose: dim1", 32)), "transpose")


def concat(tensors: Sequence) -> Tensor:
    """The tensors one after the other along dim 0 (the other dims must agree)."""
    ctx = _ctx_of(*tensors)
    ts = [_tensor_arg(ctx, t) for t in tensors]
    arr = (ctypes.c_void_p * builtins.max(len(ts), 1))(*[t._h() for t in ts])
    return _result(ctx, lib.sg_concat(len(ts), arr), "concat")


def _optim_ptr(ctx, fused, table: Tensor) -> Optional[int]:
    """The C optimizer of fused's group that holds ``table`` (ValueError if none does),
    kept alive until the tape reset: the backward calls it (also when the caller dropped
    the optimizer after the op)."""
    if fused is None:
        return None
    ctx._step_refs.append(fused)
    return fused._h_for(table)


def _padding_arg(padding_idx: Optional[int], what: str) -> int:
    return -1 if padding_idx is None else int_arg(padding_idx, what)


def embedding(W: Tensor, idx, padding_idx: Optional[int] = None, max_norm: float = 0.0,
              fused=None) -> Tensor:
    """Rows of the table W (V, D) at int indices idx of any shape (...) -> (..., D); W's
    gradient is COO, one row per index (none for ``padding_idx``). ``max_norm`` > 0: rows
    looked up are renormalised in place to that L2 norm. ``fused``: an optimizer holding
    W whose update the backward applies to W's rows directly. IndexRangeError for an index
    outside [0, V), before anything is written. (``nn.functional.embedding`` takes the
    indices first, as PyTorch.)"""
    ctx = _ctx_of(W)
    tw, ti = _tensor_arg(ctx, W), _index_arg(ctx, idx, "embedding")
    opts = _lib.EmbeddingOpts(_padding_arg(padding_idx, "embedding: padding_idx"), max_norm,
                              _optim_ptr(ctx, fused, tw))
    return _result(ctx, lib.sg_embedding(tw._h(), ti._h(), ctypes.byref(opts)), "embedding")


_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


_BAG_GRADS = {"true": 0, "word2vec": 1}


def embedding_bag(W: Tensor, idx, offsets, mode: str = "mean", per_sample_weights=None,
                  padding_idx: Optional[int] = None, include_last_offset: bool = False,
                  fused=None, grad: str = "true") -> Tensor:
    """Bags of rows of W (V, D): idx (N) int, offsets (B) int, each bag's start (or B+1
    with include_last_offset) -> (B, D); mode "sum", "mean" (default, as PyTorch) or
    "max"; per_sample_weights (N) float scales each row. W's gradient is COO; ``fused`` as
    embedding's. IndexRangeError for an index outside [0, V), ArgumentError (a ValueError)
    for bad offsets.
    grad "true" (default): the gradient of the forward; "word2vec" (mean bags only):
    every row of a bag gets the bag's undivided output gradient, word2vec's CBOW update,
    which is not the gradient of the forward."""
    if grad not in _BAG_GRADS:
        raise ArgumentError("embedding_bag: grad must be true or word2vec", 7)
    ctx = _ctx_of(W)
    tw = _tensor_arg(ctx, W)
    ti = _index_arg(ctx, idx, "embedding_bag")
    to = _index_arg(ctx, offsets, "embedding_bag: offsets")
    psw = None if per_sample_weights is None else _tensor_arg(ctx, per_sample_weights,
                                                              tw.dtype)._h()
    if mode not in _BAG_MODES:
        raise ArgumentError("embedding_bag: mode must be sum, mean or max", 7)
    opts = _lib.EmbeddingBagOpts(_BAG_MODES[mode], psw,
                                 _padding_arg(padding_idx, "embedding_bag: padding_idx"),
                                 1 if include_last_offset else 0, _optim_ptr(ctx, fused, tw),
                                 _BAG_GRADS[grad])
    return _result(ctx, lib.sg_embedding_bag(tw._h(), ti._h(), to._h(), ctypes.byref(opts)),
                   "embedding_bag")


def index_select(x, dim: int, idx) -> Tensor:
    """The slices of x at int indices idx (1-D) along ``dim``; x's gradient is COO along
    dim 0. IndexRangeError for an index out of range."""
    ctx = _ctx_of(x)
    tx, ti = _tensor_arg(ctx, x), _index_arg(ctx, idx, "index_select")
    return _result(ctx, lib.sg_index_select(tx._h(), int_arg(dim, "index_select: dim", 32),
                                            ti._h()), "index_select")


def slice_rows(x, start: int, end: int) -> Tensor:
    """Rows [start, end) of x's leading dimension (a view; x's gradient is COO on those
    rows). Also ``x[start:end]``."""
    ctx = _ctx_of(x)
    return _result(ctx, lib.sg_slice(_tensor_arg(ctx, x)._h(),
                                     int_arg(start, "slice_rows: start"),
                                     int_arg(end, "slice_rows: end")), "slice")


def to_sparse(x, sparse_dim: int = 1) -> Tensor:
    """The COO tensor of dense x's nonzero slices (``sparse_dim`` leading sparse dims)."""
    ctx = _ctx_of(x)
    return _result(ctx, lib.sg_to_sparse(_tensor_arg(ctx, x)._h(),
                                         int_arg(sparse_dim, "to_sparse: sparse_dim", 32)),
                   "to_sparse")


def sgns_loss(h, W: Tensor, targets, fused=None) -> Tensor:
    """word2vec's negative-sampling loss: h (B, D), W (V, D), targets (B, T) int (column 0
    the true target, the others negatives) -> scalar; W's gradient is COO on the targets'
    rows (or the update is fused). IndexRangeError for a target outside [0, V)."""
    ctx = _ctx_of(h, W)
    th, tw, tt = _tensor_arg(ctx, h), _tensor_arg(ctx, W), _index_arg(ctx, targets, "sgns_loss")
    opts = _lib.SgnsOpts(_optim_ptr(ctx, fused, tw))
    return _result(ctx, lib.sg_sgns_loss(th._h(), tw._h(), tt._h(), ctypes.byref(opts)),
                   "sgns_loss")


def hs_loss(h, W: Tensor, nodes, codes, offsets) -> Tensor:
    """Hierarchical softmax: h (B, D), W (N, D) inner-node rows, nodes and codes
    (P) int (codes 0/1), offsets (B) int (example i's path is entries offsets[i] ..
    offsets[i+1]) -> scalar sum of softplus(-z), z = +-(W[node] . h_i), + for code 1."""
    ctx = _ctx_of(h, W)
    th, tw = _tensor_arg(ctx, h), _tensor_arg(ctx, W)
    tn = _index_arg(ctx, nodes, "hs_loss: nodes")
    tc = _index_arg(ctx, codes, "hs_loss: codes")
    to = _index_arg(ctx, offsets, "hs_loss: offsets")
    return _result(ctx, lib.sg_hs_loss(th._h(), tw._h(), tn._h(), tc._h(), to._h()), "hs_loss")


def coalesce(t: Tensor) -> Tensor:
    """A COO tensor sorted with duplicates summed (``t`` itself if already coalesced); not
    recorded on the tape (no gradient flows through it)."""
    ctx = _ctx_of(t)
    tt = _tensor_arg(ctx, t)
    p = lib.sg_coalesce(tt._h())
    if p == tt._ptr:
        return tt
    return _result(ctx, p, "coalesce")


def index_add_(dst: Tensor, src, alpha: float = 1.0) -> Tensor:
    """dst += alpha * src for dense dst and COO src (sg_index_add_scaled_); not taped."""
    ctx = _ctx_of(dst)
    rc = lib.sg_index_add_scaled_(dst._h(), _tensor_arg(ctx, src)._h(), float(alpha))
    if rc:
        _raise(ctx._ptr, "index_add_", rc)
    return dst



# ---------------------------------------------------------------- ops for your own model


def abs(a) -> Tensor:  # noqa: A001 (torch's name)
    """|x| elementwise; gradient sign(x), 0 at x == 0 (as PyTorch)."""
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_abs(_tensor_arg(ctx, a)._h()), "abs")


def sqrt(a) -> Tensor:
    """sqrt(x) elementwise (NaN below 0); gradient g / (2 sqrt(x)), inf at 0 (as PyTorch)."""
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_sqrt(_tensor_arg(ctx, a)._h()), "sqrt")


def cos(a) -> Tensor:
    """cos(x) elementwise."""
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_cos(_tensor_arg(ctx, a)._h()), "cos")


def sin(a) -> Tensor:
    """sin(x) elementwise."""
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_sin(_tensor_arg(ctx, a)._h()), "sin")


def pow(x, exponent: float) -> Tensor:  # noqa: A001 (torch's name)
    """x ** exponent elementwise, a scalar exponent (a Tensor exponent raises TypeError);
    gradient exponent * x ** (exponent - 1), exactly 0 for exponent 0."""
    if isinstance(exponent, Tensor) or np.ndim(exponent) != 0:
        raise TypeError("pow: the exponent must be a number (tensor exponents are not "
                        "supported)")
    ctx = _ctx_of(x)
    return _result(ctx, lib.sg_pow(_tensor_arg(ctx, x)._h(), float(exponent)), "pow")


def clamp(x, min: Optional[float] = None, max: Optional[float] = None) -> Tensor:  # noqa: A002
    """min(max(x, min), max) elementwise; either bound may be None, not both (ValueError).
    min > max gives max everywhere (as PyTorch). The gradient passes where min <= x <= max
    and is 0 elsewhere. A NaN bound raises InvalidValueError."""
    if min is None and max is None:
        raise ArgumentError("clamp: at least one of min and max must not be None", 7)
    ctx = _ctx_of(x)
    lo = None if min is None else ctypes.byref(ctypes.c_double(float(min)))
    hi = None if max is None else ctypes.byref(ctypes.c_double(float(max)))
    return _result(ctx, lib.sg_clamp(_tensor_arg(ctx, x)._h(), lo, hi), "clamp")


def maximum(a, b) -> Tensor:
    """Elementwise max, broadcasting; the gradient goes to the larger operand, split half
    and half on ties, and a NaN wins (as torch.maximum)."""
    ctx = _ctx_of(a, b)
    dt = _dtype_of(a, b)
    return _result(ctx, lib.sg_maximum(_tensor_arg(ctx, a, dt)._h(),
                                       _tensor_arg(ctx, b, dt)._h()), "maximum")


def minimum(a, b) -> Tensor:
    """Elementwise min, broadcasting; the gradient goes to the smaller operand, split half
    and half on ties, and a NaN wins (as torch.minimum)."""
    ctx = _ctx_of(a, b)
    dt = _dtype_of(a, b)
    return _result(ctx, lib.sg_minimum(_tensor_arg(ctx, a, dt)._h(),
                                       _tensor_arg(ctx, b, dt)._h()), "minimum")


def where(condition, x, y) -> Tensor:
    """x where ``condition`` else y, all three broadcasting. condition: a 0/1 mask (bool
    arrays are taken as int64 0/1; any other value raises InvalidValueError); it gets no
    gradient, x gets g where it is 1 and y where it is 0."""
    ctx = _ctx_of(x, y, condition)
    dt = _dtype_of(x, y)
    if not isinstance(condition, Tensor):
        c = np.asarray(condition)
        condition = c.astype(np.int64) if c.dtype == np.bool_ else c
    tc = _tensor_arg(ctx, condition)
    return _result(ctx, lib.sg_where(tc._h(), _tensor_arg(ctx, x, dt)._h(),
                                     _tensor_arg(ctx, y, dt)._h()), "where")


def gather(input, dim: int, index) -> Tensor:
    """torch.gather: out[i][j] = input[index[i][j]][j] for dim 0 (likewise for the other
    dims) -> index's shape. index int32/int64 of input's rank, with index.size(d) <=
    input.size(d) for d != dim; IndexRangeError names the first entry outside
    [0, input.size(dim)), before anything is written. Gradient: a dense scatter-add."""
    ctx = _ctx_of(input)
    tx, ti = _tensor_arg(ctx, input), _index_arg(ctx, index, "gather: index")
    return _result(ctx, lib.sg_gather(tx._h(), int_arg(dim, "gather: dim", 32), ti._h()),
                   "gather")


def narrow(input, dim: int, start: int, length: int) -> Tensor:
    """Elements [start, start + length) along ``dim`` (a copy; start may be negative, as
    PyTorch). The backward writes only that range of input's gradient. IndexRangeError
    for a range outside the dimension."""
    ctx = _ctx_of(input)
    return _result(ctx, lib.sg_narrow(_tensor_arg(ctx, input)._h(),
                                      int_arg(dim, "narrow: dim", 32),
                                      int_arg(start, "narrow: start"),
                                      int_arg(length, "narrow: length")), "narrow")


def norm(input, p: float = 2, dim: int = -1, keepdim: bool = False) -> Tensor:
    """The p-norm along ``dim``, p = 1 or 2 (ArgumentError otherwise). Subgradients at 0 as
    PyTorch: p = 1 uses sign(0) = 0; p = 2 gives 0 where the norm is 0."""
    ctx = _ctx_of(input)
    return _result(ctx, lib.sg_norm_dim(_tensor_arg(ctx, input)._h(), float(p),
                                        int_arg(dim, "norm: dim", 32), 1 if keepdim else 0),
                   "norm")


def logsumexp(input, dim: int, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) along ``dim``, stable for large inputs (as log_softmax); -inf where
    every element is -inf. Gradient g * softmax(x)."""
    ctx = _ctx_of(input)
    return _result(ctx, lib.sg_logsumexp_dim(_tensor_arg(ctx, input)._h(),
                                             int_arg(dim, "logsumexp: dim", 32),
                                             1 if keepdim else 0), "logsumexp")


def max(input, dim: int, keepdim: bool = False) -> Tuple[Tensor, Tensor]:  # noqa: A001
    """(values, indices) of the maximum along ``dim``: values differentiable (the gradient
    goes to the first maximum, as PyTorch), indices int64 (not differentiable; a NaN is
    the maximum). ShapeError for an empty dimension."""
    ctx = _ctx_of(input)
    idx = ctypes.c_void_p()
    p = lib.sg_max_dim(_tensor_arg(ctx, input)._h(), int_arg(dim, "max: dim", 32),
                       1 if keepdim else 0, ctypes.byref(idx))
    values = _result(ctx, p, "max")
    return values, Tensor(ctx, idx.value, False)


def dropout(input, p: float = 0.5, training: bool = True) -> Tensor:
    """Zeroes each element with probability p and scales the others by 1/(1-p), from the
    context's random stream (the same mask for a seed and call sequence, whatever the
    thread count); ``training=False`` or p == 0 returns the input itself. ArgumentError (a
    ValueError) for p outside [0, 1]. Also ``sgrad.nn.functional.dropout``."""
    ctx = _ctx_of(input)
    tx = _tensor_arg(ctx, input)
    p_out = lib.sg_dropout(tx._h(), float(p), 1 if training else 0)
    if p_out == tx._ptr:
        return tx
    return _result(ctx, p_out, "dropout")


def layer_norm(input, normalized_shape, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dimension (biased
    variance, as PyTorch); ``normalized_shape`` (an int or a 1-tuple) must be that
    dimension (ShapeError otherwise); weight and bias (D,) are optional. Also
    ``sgrad.nn.functional.layer_norm``."""
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(
        normalized_shape)
    if len(shape) != 1:
        raise ShapeError(f"layer_norm: only the last dimension is normalised; got "
                         f"normalized_shape {shape}", 3)
    ctx = _ctx_of(input)
    tx = _tensor_arg(ctx, input)
    tw = None if weight is None else _tensor_arg(ctx, weight, tx.dtype)._h()
    tb = None if bias is None else _tensor_arg(ctx, bias, tx.dtype)._h()
    return _result(ctx, lib.sg_layer_norm(tx._h(), int_arg(shape[0], "layer_norm: size"),
                                          tw, tb, float(eps)), "layer_norm")


# ---------------------------------------------------------------- knowledge-graph embeddings

_DIST_KINDS = {"l1": 0, "l2": 1, "complex": 2}
_RANK_KINDS = {"softmax": 0, "logistic": 1, "margin": 2, "selfadv": 3}


def _dist_kind(kind: str, what: str) -> int:
    if kind not in _DIST_KINDS:
        raise ArgumentError(f"{what}: kind must be l1, l2 or complex, not {kind!r}", 7)
    return _DIST_KINDS[kind]


def cdist(x1, x2, p: float = 2.0) -> Tensor:
    """Distances between every row of x1 (M, D) and every row of x2 (N, D) -> (M, N), as
    torch.cdist for p = 1 or 2 (ArgumentError otherwise); p = 2's gradient is 0 where a
    distance is 0. Bitwise identical for any thread count."""
    if p not in (1, 2):
        raise ArgumentError(f"cdist: p must be 1 or 2, not {p!r}", 7)
    kind = _DIST_KINDS["l1" if p == 1 else "l2"]
    return _binary(lambda a, b: lib.sg_cdist(a, b, kind), x1, x2, "cdist")


def complex_cdist(x1, x2) -> Tensor:
    """cdist of complex rows: x1 (M, 2K), x2 (N, 2K), columns [0, K) the real parts and
    [K, 2K) the imaginary parts -> (M, N), sum over k of |x1_k - x2_k| (the complex modulus;
    RotatE's distance). A term of modulus 0 passes no gradient."""
    kind = _DIST_KINDS["complex"]
    return _binary(lambda a, b: lib.sg_cdist(a, b, kind), x1, x2, "complex_cdist")


def rowdist(x1, x2, kind: str = "l2") -> Tensor:
    """Row m's distance between x1 (M, D) and x2 (M, D) -> (M,): kind "l1", "l2" or
    "complex" (rows of real | imaginary halves), with cdist's conventions."""
    k = _dist_kind(kind, "rowdist")
    return _binary(lambda a, b: lib.sg_rowdist(a, b, k), x1, x2, "rowdist")


def complex_mul(a, b, conj_b: bool = False) -> Tensor:
    """The complex product a * b (or a * conj(b)) of rows of complex numbers: a and b of one
    shape (M, 2K), real parts in columns [0, K), imaginary parts in [K, 2K) -> (M, 2K)."""
    c = bool(conj_b)
    return _binary(lambda x, y: lib.sg_complex_mul(x, y, c), a, b, "complex_mul")


def ranking_loss(pos, neg, kind: str = "softmax", margin: float = 0.0, adv_temp: float = 1.0,
                 skip_offset: int = -1) -> Tensor:
    """The ranking loss of positive scores pos (M,) against negative scores neg (M, N)
    (higher is better) -> scalar, the sum over rows: "softmax" logsumexp(pos, neg) - pos;
    "logistic" softplus(-pos) + mean softplus(neg); "margin" sum relu(margin - pos + neg);
    "selfadv" -logsigmoid(margin + pos) - sum w logsigmoid(-neg - margin), w =
    softmax(adv_temp * neg) taken as a constant. ``skip_offset`` >= 0 leaves out entry
    (m, skip_offset + m) of neg (a chunk's own positive among its negatives)."""
    if kind not in _RANK_KINDS:
        raise ArgumentError("ranking_loss: kind must be softmax, logistic, margin or selfadv, "
                            f"not {kind!r}", 7)
    ctx = _ctx_of(pos, neg)
    dt = _dtype_of(pos, neg)
    tp, tn = _tensor_arg(ctx, pos, dt), _tensor_arg(ctx, neg, dt)
    opts = _lib.RankLossOpts(_RANK_KINDS[kind], float(margin), float(adv_temp),
                             int_arg(skip_offset, "ranking_loss: skip_offset"))
    return _result(ctx, lib.sg_ranking_loss(tp._h(), tn._h(), ctypes.byref(opts)),
                   "ranking_loss")
