"""Tensors: a handle on a C tensor, dense or COO, persistent or of one step.

- Persistent tensors (``ctx.tensor``, ``from_numpy``, ``coo``, parameters) live until
  ``free()`` or their Context's end. A dense one keeps its data in a numpy array that the
  Tensor holds, so ``t.numpy()`` is a view that stays valid.
- Step (tape) tensors, what ops return and gradients, die at ``ctx.tape_reset()``; using
  one afterwards raises StaleTensorError instead of reading freed memory. Their
  ``numpy()`` is a copy.
"""
import ctypes
from typing import Optional, Tuple

import numpy as np

from . import _lib
from ._args import COO, NP_OF, SG_OF, as_supported, int_arg, shape_arg, supported_dtype
from ._lib import lib
from .context import Context, default_context
from .errors import ArgumentError, DtypeError, LayoutError, ShapeError, StaleTensorError, _raise

__all__ = ["Tensor", "from_numpy", "coo"]


class Tensor:
    """A handle on a C tensor. Persistent tensors (made by a Context, from_numpy, coo)
    live until ``free()`` or the Context's end; step tensors (op results, gradients) until
    the next ``tape_reset``."""

    __array_priority__ = 1000  # ndarray op Tensor gives Tensor's reflected operator

    def __init__(self, ctx, ptr, persistent, array=None, owner=None):
        self._ctx = ctx
        self._ptr = ptr
        self._persistent = persistent
        self._generation = None if persistent else ctx._generation
        self._array = array   # persistent dense: the numpy array that holds the data
        self._owner = owner   # something that keeps ptr alive (a parent COO, a wordvec)
        self._freed = False

    @classmethod
    def _wrap_array(cls, ctx, a, requires_grad=False):
        p = lib.sg_tensor_wrap(ctx._handle(), SG_OF[a.dtype], a.ndim, shape_arg(a.shape),
                               a.ctypes.data)
        if not p:
            _raise(ctx._ptr, "sg_tensor_wrap")
        t = cls(ctx, p, True, array=a)
        return t.requires_grad_(requires_grad) if requires_grad else t

    def _h(self):
        """The C handle, or StaleTensorError when the tensor is dead."""
        if self._freed:
            raise StaleTensorError("tensor used after free()")
        if not self._ctx._ptr:
            raise StaleTensorError("tensor of a closed Context")
        if self._generation is not None and self._generation != self._ctx._generation:
            raise StaleTensorError(
                "step tensor used after tape_reset (it lived in step %d, the context is at "
                "step %d); copy what you need with .numpy() before the reset"
                % (self._generation, self._ctx._generation))
        return self._ptr

    def free(self):
        """Frees a persistent tensor now (sg_tensor_free; a parameter is unregistered from
        its optimizer). Later use raises StaleTensorError. If the current step's tape
        uses the tensor, the C tensor is freed at the next tape_reset instead."""
        if not self._persistent:
            raise ArgumentError("free(): step tensors die at tape_reset", 7)
        if self._freed:
            return
        self._h()
        self._freed = True
        if any(r is self for r in self._ctx._step_refs):
            self._ctx._step_refs.append(_DeferredFree(self._ptr))
        else:
            lib.sg_tensor_free(self._ptr)
        self._ptr = None

    def __del__(self):
        try:
            if (self._persistent and not self._freed and self._owner is None and self._ptr
                    and self._ctx._ptr):
                lib.sg_tensor_free(self._ptr)
        except Exception:
            pass

    # -- properties
    @property
    def ctx(self):
        return self._ctx

    @property
    def dtype(self):
        return NP_OF[lib.sg_tensor_dtype(self._h())]

    @property
    def layout(self):
        return "coo" if lib.sg_tensor_layout(self._h()) == COO else "dense"

    @property
    def is_sparse(self):
        return lib.sg_tensor_layout(self._h()) == COO

    @property
    def shape(self):
        h = self._h()
        n = lib.sg_tensor_ndim(h)
        s = lib.sg_tensor_shape(h)
        return tuple(s[i] for i in range(n))

    @property
    def ndim(self):
        return lib.sg_tensor_ndim(self._h())

    def numel(self):
        return lib.sg_tensor_numel(self._h())

    def __len__(self):
        return self.shape[0]

    @property
    def persistent(self):
        return self._persistent

    @property
    def data_ptr(self):
        """Address of the dense data (sg_tensor_data); None for COO."""
        return lib.sg_tensor_data(self._h())

    @property
    def requires_grad(self):
        return bool(lib.sg_tensor_get_requires_grad(self._h()))

    @requires_grad.setter
    def requires_grad(self, on):
        self.requires_grad_(on)

    def requires_grad_(self, on=True):
        if not lib.sg_tensor_requires_grad(self._h(), 1 if on else 0):
            _raise(self._ctx._ptr, "requires_grad")
        return self

    @property
    def grad(self):
        """The gradient accumulated since the last tape_reset: a numpy array (a copy) for a
        dense gradient, a COO step Tensor for a sparse one, None if none reached it."""
        g = lib.sg_tensor_grad(self._h())
        if not g:
            return None
        t = Tensor(self._ctx, g, False)
        return t if t.is_sparse else t.numpy()

    # -- data
    def numpy(self):
        """Dense persistent tensors: a view of their data (writes go to the tensor), valid
        as long as the array. Step tensors and tensors whose memory the library owns
        (optimizer state): a copy. COO tensors: a dense copy of their meaning."""
        h = self._h()
        if self._array is not None:
            return self._array
        if lib.sg_tensor_layout(h) == COO:
            return self.to_numpy_dense()
        return self._copy_out(h)

    def _copy_out(self, h):
        shape, dtype = self.shape, self.dtype
        n = int(np.prod(shape, dtype=np.int64))
        out = np.empty(shape, dtype=dtype)
        if n:
            ctypes.memmove(out.ctypes.data, lib.sg_tensor_data(h), n * dtype.itemsize)
        return out

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self):
        a = self.numpy()
        if a.size != 1:
            raise ValueError("item(): tensor has %d elements" % a.size)
        return a.reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def fill_(self, value):
        rc = lib.sg_tensor_fill(self._h(), float(value))
        if rc:
            _raise(self._ctx._ptr, "fill_", rc)
        return self

    def uniform_(self, lo=-1.0, hi=1.0):
        rc = lib.sg_tensor_fill_uniform(self._h(), float(lo), float(hi))
        if rc:
            _raise(self._ctx._ptr, "uniform_", rc)
        return self

    def copy_(self, src):
        src = _tensor_arg(self._ctx, src, self.dtype)
        rc = lib.sg_tensor_copy(self._h(), src._h())
        if rc:
            _raise(self._ctx._ptr, "copy_", rc)
        return self

    # -- COO parts
    def _coo_part(self, fn):
        h = self._h()
        if lib.sg_tensor_layout(h) != COO:
            raise LayoutError("not a COO tensor", 5)
        part = Tensor(self._ctx, fn(h), self._persistent, owner=self)
        part._generation = self._generation
        return part._copy_out(part._ptr)

    @property
    def indices(self):
        """COO: (sparse_dim, nnz) int64 indices, a copy (duplicates allowed)."""
        return self._coo_part(lib.sg_coo_indices)

    @property
    def values(self):
        """COO: (nnz, dense dims...) values, a copy."""
        return self._coo_part(lib.sg_coo_values)

    @property
    def nnz(self):
        return lib.sg_coo_nnz(self._h())

    @property
    def sparse_dim(self):
        return lib.sg_coo_sparse_dim(self._h())

    @property
    def is_coalesced(self):
        return bool(lib.sg_coo_is_coalesced(self._h()))

    def to_numpy_dense(self):
        """The dense meaning as a new array (COO duplicates summed)."""
        if not self.is_sparse:
            return np.array(self.numpy(), copy=True)
        idx, val, shape = self.indices, self.values, self.shape
        out = np.zeros(shape, dtype=val.dtype)
        np.add.at(out, tuple(idx), val)
        return out

    def to_scipy(self):
        """A 2-D COO tensor as scipy.sparse.coo_matrix (hybrid rows expanded; duplicates
        kept, scipy sums them). Needs scipy."""
        import scipy.sparse
        shape = self.shape
        if len(shape) != 2 or not self.is_sparse:
            raise ValueError("to_scipy needs a 2-D COO tensor")
        idx, val = self.indices, self.values
        if idx.shape[0] == 2:
            return scipy.sparse.coo_matrix((val, (idx[0], idx[1])), shape=shape)
        rows = np.repeat(idx[0], shape[1])
        cols = np.tile(np.arange(shape[1]), idx.shape[1])
        return scipy.sparse.coo_matrix((val.reshape(-1), (rows, cols)), shape=shape)

    # -- autograd
    def backward(self, grad=None):
        """sg_backward from a scalar, or sg_backward_grad with the given gradient (an
        array or Tensor of this tensor's shape and dtype)."""
        if grad is None:
            rc = lib.sg_backward(self._h())
        else:
            g = _tensor_arg(self._ctx, grad, self.dtype)
            rc = lib.sg_backward_grad(self._h(), g._h())
        if rc:
            _raise(self._ctx._ptr, "backward", rc)

    # -- operators
    def __add__(self, o): return _ops.add(self, o)
    def __radd__(self, o): return _ops.add(o, self)
    def __sub__(self, o): return _ops.sub(self, o)
    def __rsub__(self, o): return _ops.sub(o, self)
    def __mul__(self, o): return _ops.mul(self, o)
    def __rmul__(self, o): return _ops.mul(o, self)
    def __truediv__(self, o): return _ops.div(self, o)
    def __rtruediv__(self, o): return _ops.div(o, self)
    def __matmul__(self, o): return _ops.matmul(self, o)
    def __rmatmul__(self, o): return _ops.matmul(o, self)
    def __neg__(self): return _ops.scale(self, -1.0)

    def __getitem__(self, key):
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(self.shape[0])
            return _ops.slice_rows(self, start, max(start, stop))
        raise TypeError("Tensor indexing supports t[start:stop] (rows); use index_select")

    def sum(self, dim=None, keepdim=False):
        return _ops.sum(self, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return _ops.mean(self, dim, keepdim)

    def reshape(self, *shape):
        return _ops.reshape(self, *shape)

    def transpose(self, dim0=0, dim1=1):
        return _ops.transpose(self, dim0, dim1)

    @property
    def T(self):
        return _ops.transpose(self, 0, 1)

    def __repr__(self):
        try:
            kind = "persistent" if self._persistent else "step"
            return "sgrad.Tensor(%s, %s, %s %s%s)" % (
                self.shape, self.dtype, kind, self.layout,
                ", requires_grad" if self.requires_grad else "")
        except StaleTensorError as e:
            return "sgrad.Tensor(<dead: %s>)" % e


class _DeferredFree:
    """Sits in a Context's step refs: frees a tensor's C handle once the tape lets go."""

    def __init__(self, ptr):
        self.ptr = ptr


def from_numpy(a, requires_grad=False, ctx=None):
    """A persistent tensor over ``a``'s memory, without a copy (sg_tensor_wrap), when ``a``
    is a C-contiguous, aligned, writeable, native-endian float32/float64/int32/int64
    array: writes by the library (an optimizer step) land in ``a``, and the Tensor keeps
    ``a`` alive. Any other array is COPIED first (other float dtypes to float64, other
    integers to int64; np.ascontiguousarray for the layout); bool, complex and object
    arrays are refused with TypeError. ``t.numpy() is a`` tells whether no copy was made."""
    ctx = ctx or default_context()
    if not isinstance(a, np.ndarray):
        raise TypeError("from_numpy needs a numpy array (ctx.tensor copies any array-like)")
    ok = (a.dtype in SG_OF and a.dtype.isnative and a.flags.c_contiguous and a.flags.aligned
          and a.flags.writeable)
    if not ok:
        a = np.array(as_supported(a), order="C", copy=True)
    return Tensor._wrap_array(ctx, a, requires_grad)


def coo(indices, values, shape, ctx=None, requires_grad=False):
    """A persistent COO tensor (sg_coo_new; indices and values are copied and validated):
    indices (sparse_dim, nnz) integers, values (nnz, *shape[sparse_dim:]) float32/float64
    (other numbers become float64). ShapeError when the parts disagree with each other or
    with shape, DtypeError for indices that are not integers."""
    ctx = ctx or default_context()
    idx = np.ascontiguousarray(_index_array(indices, "coo: indices"))
    shape = tuple(int_arg(d, "coo: shape") for d in shape)
    if idx.ndim != 2 or not 1 <= idx.shape[0] <= len(shape):
        raise ShapeError(f"coo: indices of shape {idx.shape} for a tensor of shape {shape}; "
                         "(sparse_dim, nnz) with sparse_dim in 1..ndim expected", 3)
    val = np.ascontiguousarray(values)
    if val.dtype not in (np.float32, np.float64):
        val = val.astype(np.float64)
    expected = (idx.shape[1],) + shape[idx.shape[0]:]
    if val.shape != expected:  # the C call reads exactly that many values
        raise ShapeError(f"coo: values of shape {val.shape}; {idx.shape[1]} entries of a "
                         f"tensor of shape {shape} with sparse_dim {idx.shape[0]} need "
                         f"(nnz, *shape[sparse_dim:]) = {expected}", 3)
    p = lib.sg_coo_new(ctx._handle(), SG_OF[val.dtype], len(shape), shape_arg(shape),
                       idx.shape[0], idx.shape[1],
                       idx.ctypes.data_as(_lib.I64P), val.ctypes.data)
    if not p:
        _raise(ctx._ptr, "coo")
    t = Tensor(ctx, p, True)
    return t.requires_grad_(True) if requires_grad else t


def _ctx_of(*xs):
    for x in xs:
        if isinstance(x, Tensor):
            return x._ctx
    return default_context()


def _tensor_arg(ctx: Context, x, dtype=None) -> "Tensor":
    """x as a Tensor of ctx: Tensors as they are, arrays and numbers copied into a step
    tensor (numbers and float32/float64 arrays in dtype when given, else x's own dtype,
    int64 for other integers; DtypeError for float16, bool and other dtypes without a
    tensor dtype). Kept alive until the reset."""
    if isinstance(x, Tensor):
        x._h()
        ctx._step_refs.append(x)
        return x
    a = np.asarray(x)
    if not isinstance(x, (int, float)):
        supported_dtype(a.dtype)  # refuses float16, bool, ... before any cast
    if dtype is not None and (isinstance(x, (int, float)) or a.dtype.kind == "f"):
        a = a.astype(dtype)  # numbers and float arrays take the tensor operand's dtype
    elif a.dtype not in SG_OF:
        a = a.astype(supported_dtype(a.dtype))
    a = np.ascontiguousarray(a)
    p = lib.sg_tensor_new_tmp(ctx._handle(), SG_OF[a.dtype], a.ndim, shape_arg(a.shape))
    if not p:
        _raise(ctx._ptr, "step tensor")
    if a.size:
        ctypes.memmove(lib.sg_tensor_data(p), a.ctypes.data, a.nbytes)
    return Tensor(ctx, p, False)


def _result(ctx, p, what):
    if not p:
        _raise(ctx._ptr, what)
    return Tensor(ctx, p, False)



def _index_array(idx, what):
    """idx (array-like of integers) as an int32/int64 array. Floats and bools are refused
    with DtypeError rather than truncated (as torch does); an empty one ([] is float64 in
    numpy) holds nothing to truncate and becomes int64; Python ints beyond int64 raise
    OverflowError."""
    a = np.asarray(idx)
    if a.dtype in (np.int32, np.int64):
        return a
    if a.size == 0:
        return a.astype(np.int64)
    if a.dtype.kind == "O":  # Python ints numpy could not hold in one integer dtype
        return np.array([int_arg(v, what) for v in a.flat], dtype=np.int64).reshape(a.shape)
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{what}: indices must be integers, not {a.dtype}", 4)
    if a.dtype.kind == "u" and int(a.max()) > np.iinfo(np.int64).max:
        raise OverflowError(f"{what}: index {a.max()} is outside the C range of int64_t")
    return a.astype(np.int64)


def _index_arg(ctx, idx, what="indices"):
    if isinstance(idx, Tensor):
        return _tensor_arg(ctx, idx)
    return _tensor_arg(ctx, _index_array(idx, what))



from . import ops as _ops  # noqa: E402  (ops need Tensor; Tensor's operators need ops)
