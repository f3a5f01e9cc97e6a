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
from .errors import ArgumentError, _raise
from .tensor import Tensor, _ctx_of, _index_arg, _result, _tensor_arg

__all__ = ["add", "sub", "mul", "div", "scale", "matmul", "rowdot", "sum", "mean", "relu",
           "sigmoid", "tanh", "exp", "log", "log_sigmoid", "softmax", "log_softmax",
           "cross_entropy", "bce_with_logits", "reshape", "transpose", "concat", "embedding",
           "embedding_bag", "index_select", "slice_rows", "to_dense", "to_sparse",
           "sparse_mask", "sgns_loss", "hs_loss", "coalesce", "index_add_"]

def _dtype_of(*xs):
    for x in xs:
        if isinstance(x, Tensor):
            return x.dtype
    return None


def _binary(name):
    fn = getattr(lib, "sg_" + name)

    def op(a, b):
        ctx = _ctx_of(a, b)
        dt = _dtype_of(a, b)
        ta, tb = _tensor_arg(ctx, a, dt), _tensor_arg(ctx, b, dt)
        return _result(ctx, fn(ta._h(), tb._h()), name)
    op.__name__ = name
    op.__doc__ = f"sg_{name} (see include/sgrad.h); arrays and scalars become step tensors."
    return op


def _unary(name):
    fn = getattr(lib, "sg_" + name)

    def op(a):
        ctx = _ctx_of(a)
        ta = _tensor_arg(ctx, a)
        return _result(ctx, fn(ta._h()), name)
    op.__name__ = name
    op.__doc__ = f"sg_{name} (see include/sgrad.h)."
    return op


add, sub, div, rowdot, bce_with_logits, sparse_mask = (
    _binary(n) for n in ("add", "sub", "div", "rowdot", "bce_with_logits", "sparse_mask"))
_mul, matmul = _binary("mul"), _binary("matmul")
relu, sigmoid, tanh, exp, log, log_sigmoid, to_dense = (
    _unary(n) for n in ("relu", "sigmoid", "tanh", "exp", "log", "log_sigmoid", "to_dense"))


def mul(a, b):
    """sg_mul; a Tensor times a Python number is sg_scale (COO tensors too)."""
    if isinstance(b, (int, float)) and isinstance(a, Tensor):
        return scale(a, b)
    if isinstance(a, (int, float)) and isinstance(b, Tensor):
        return scale(b, a)
    return _mul(a, b)


def scale(a, s):
    """sg_scale: s * a (also for COO a)."""
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    return _result(ctx, lib.sg_scale(ta._h(), float(s)), "scale")


def cross_entropy(logits, targets):
    """sg_cross_entropy: logits (N,C), targets (N) int -> mean NLL of log_softmax."""
    ctx = _ctx_of(logits, targets)
    tl, tt = _tensor_arg(ctx, logits), _index_arg(ctx, targets)
    return _result(ctx, lib.sg_cross_entropy(tl._h(), tt._h()), "cross_entropy")


def sum(a, dim=None, keepdim=False):  # noqa: A001 (numpy's and torch's name)
    """sg_sum (all elements; COO too) or sg_sum_dim."""
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    p = (lib.sg_sum(ta._h()) if dim is None
         else lib.sg_sum_dim(ta._h(), int_arg(dim, "sum: dim", 32), 1 if keepdim else 0))
    return _result(ctx, p, "sum")


def mean(a, dim=None, keepdim=False):
    """sg_mean or sg_mean_dim."""
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    p = (lib.sg_mean(ta._h()) if dim is None
         else lib.sg_mean_dim(ta._h(), int_arg(dim, "mean: dim", 32), 1 if keepdim else 0))
    return _result(ctx, p, "mean")


def softmax(a, dim=-1):
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_softmax(_tensor_arg(ctx, a)._h(),
                                       int_arg(dim, "softmax: dim", 32)), "softmax")


def log_softmax(a, dim=-1):
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_log_softmax(_tensor_arg(ctx, a)._h(),
                                           int_arg(dim, "log_softmax: dim", 32)), "log_softmax")


def reshape(a, *shape):
    """sg_reshape (a view; one dim may be -1)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    return _result(ctx, lib.sg_reshape(ta._h(), len(shape), shape_arg(shape, "reshape")),
                   "reshape")


def transpose(a, dim0=0, dim1=1):
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_transpose(_tensor_arg(ctx, a)._h(),
                                         int_arg(dim0, "transpose: dim0", 32),
                                         int_arg(dim1, "transpose: dim1", 32)), "transpose")


def concat(tensors):
    """sg_concat along dim 0."""
    ctx = _ctx_of(*tensors)
    ts = [_tensor_arg(ctx, t) for t in tensors]
    arr = (ctypes.c_void_p * max(len(ts), 1))(*[t._h() for t in ts])
    return _result(ctx, lib.sg_concat(len(ts), arr), "concat")


def _optim_ptr(ctx, fused):
    """fused's handle, kept alive until the tape reset: the backward calls it (also when
    the caller dropped the optimizer after the op)."""
    if fused is None:
        return None
    ctx._step_refs.append(fused)
    return fused._h()


def _padding_arg(padding_idx, what):
    return -1 if padding_idx is None else int_arg(padding_idx, what)


def embedding(W, idx, padding_idx=None, max_norm=0.0, fused=None):
    """sg_embedding: W (V,D), idx int of any shape (...) -> (..., D); W's gradient is COO.
    fused: an optimizer whose update the backward applies to W's rows directly."""
    ctx = _ctx_of(W)
    tw, ti = _tensor_arg(ctx, W), _index_arg(ctx, idx, "embedding")
    opts = _lib.EmbeddingOpts(_padding_arg(padding_idx, "embedding: padding_idx"), max_norm,
                              _optim_ptr(ctx, fused))
    return _result(ctx, lib.sg_embedding(tw._h(), ti._h(), ctypes.byref(opts)), "embedding")


_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


_BAG_GRADS = {"true": 0, "word2vec": 1}


def embedding_bag(W, idx, offsets, mode="mean", per_sample_weights=None, padding_idx=None,
                  include_last_offset=False, fused=None, grad="true"):
    """sg_embedding_bag: W (V,D), idx (N) int, offsets (B) (or B+1 with
    include_last_offset) -> (B,D); mode "sum", "mean" (default, as PyTorch) or "max".
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
                                 1 if include_last_offset else 0, _optim_ptr(ctx, fused),
                                 _BAG_GRADS[grad])
    return _result(ctx, lib.sg_embedding_bag(tw._h(), ti._h(), to._h(), ctypes.byref(opts)),
                   "embedding_bag")


def index_select(x, dim, idx):
    ctx = _ctx_of(x)
    tx, ti = _tensor_arg(ctx, x), _index_arg(ctx, idx, "index_select")
    return _result(ctx, lib.sg_index_select(tx._h(), int_arg(dim, "index_select: dim", 32),
                                            ti._h()), "index_select")


def slice_rows(x, start, end):
    """sg_slice: rows [start, end) of x's leading dimension (a view; sparse gradient)."""
    ctx = _ctx_of(x)
    return _result(ctx, lib.sg_slice(_tensor_arg(ctx, x)._h(),
                                     int_arg(start, "slice_rows: start"),
                                     int_arg(end, "slice_rows: end")), "slice")


def to_sparse(x, sparse_dim=1):
    ctx = _ctx_of(x)
    return _result(ctx, lib.sg_to_sparse(_tensor_arg(ctx, x)._h(),
                                         int_arg(sparse_dim, "to_sparse: sparse_dim", 32)),
                   "to_sparse")


def sgns_loss(h, W, targets, fused=None):
    """sg_sgns_loss: word2vec's negative-sampling loss; h (B,D), W (V,D), targets (B,T)
    (column 0 the true target) -> scalar."""
    ctx = _ctx_of(h, W)
    th, tw, tt = _tensor_arg(ctx, h), _tensor_arg(ctx, W), _index_arg(ctx, targets, "sgns_loss")
    opts = _lib.SgnsOpts(_optim_ptr(ctx, fused))
    return _result(ctx, lib.sg_sgns_loss(th._h(), tw._h(), tt._h(), ctypes.byref(opts)),
                   "sgns_loss")


def hs_loss(h, W, nodes, codes, offsets):
    """sg_hs_loss: hierarchical softmax; h (B,D), W (N,D) inner-node rows, nodes and codes
    (P) int (codes 0/1), offsets (B) int (example i's path is entries offsets[i] ..
    offsets[i+1]) -> scalar sum of softplus(-z), z = +-(W[node] . h_i), + for code 1."""
    ctx = _ctx_of(h, W)
    th, tw = _tensor_arg(ctx, h), _tensor_arg(ctx, W)
    tn = _index_arg(ctx, nodes, "hs_loss: nodes")
    tc = _index_arg(ctx, codes, "hs_loss: codes")
    to = _index_arg(ctx, offsets, "hs_loss: offsets")
    return _result(ctx, lib.sg_hs_loss(th._h(), tw._h(), tn._h(), tc._h(), to._h()), "hs_loss")


def coalesce(t):
    """sg_coalesce: sorted, duplicates summed; not differentiable (see sgrad.h)."""
    ctx = _ctx_of(t)
    tt = _tensor_arg(ctx, t)
    p = lib.sg_coalesce(tt._h())
    if p == tt._ptr:
        return tt
    return _result(ctx, p, "coalesce")


def index_add_(dst, src, alpha=1.0):
    """dst += alpha * src for dense dst and COO src (sg_index_add_scaled_); not taped."""
    ctx = _ctx_of(dst)
    rc = lib.sg_index_add_scaled_(dst._h(), _tensor_arg(ctx, src)._h(), float(alpha))
    if rc:
        _raise(ctx._ptr, "index_add_", rc)
    return dst

