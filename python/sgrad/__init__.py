"""sgrad from Python: a thin layer over libsgrad.so (ctypes); the C library does the work.

Lifetimes, as in C (include/sgrad.h), made safe:
- A Context owns the C context. Tensors and optimizers keep their Context alive;
  ``ctx.close()`` frees it early, after which every handle of it raises.
- Persistent tensors (``ctx.tensor``, ``from_numpy``, parameters) keep their data in a numpy
  array that the Python Tensor holds, so ``t.numpy()`` is a view that stays valid.
- Step (tape) tensors, what ops return, die at ``ctx.tape_reset()``; the Context counts
  resets and a tape tensor of an earlier step raises StaleTensorError instead of reading
  freed memory. Their ``numpy()`` is a copy. Every tensor an op was given, and the
  optimizer of a fused op, is kept alive by the Context until the reset (the tape and the
  gradients may borrow its memory; the backward calls the optimizer).
- Gradients live until ``tape_reset`` too: step the optimizer between ``backward`` and the
  reset (there is no zero_grad: the reset clears every gradient).
"""
import contextlib
import ctypes
import operator
import weakref

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["Context", "Tensor", "Error", "StaleTensorError", "from_numpy", "coo", "no_grad",
           "clip_grad_norm", "clip_grad_value", "gradcheck", "default_context", "Word2Vec",
           "KeyedVectors", "optim", "save_checkpoint", "load_checkpoint",
           "read_checkpoint_meta", "plot_training", "fasttext"]

__version__ = lib.sg_version().decode()

F32, F64, I32, I64 = 0, 1, 2, 3
_NP_OF = {F32: np.dtype(np.float32), F64: np.dtype(np.float64), I32: np.dtype(np.int32),
          I64: np.dtype(np.int64)}
_SG_OF = {v: k for k, v in _NP_OF.items()}
DENSE, COO = 0, 1

# ---------------------------------------------------------------- errors


class Error(Exception):
    """A C call failed; ``status`` is the SG_ERR_* code, the text the library's message."""
    status = None

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class StaleTensorError(Error):
    """A tensor used after it died: a tape tensor after ``tape_reset``, a freed tensor, or
    any handle of a closed Context."""


# One class per SG_ERR_* code (in the order of SG_STATUS_LIST), with the builtin exception
# it also is, so that `except ValueError` catches a bad argument as Python code expects.
_ERRORS = [("OutOfMemoryError", MemoryError), ("NullError", ValueError),
           ("ShapeError", ValueError), ("DtypeError", TypeError), ("LayoutError", TypeError),
           ("IndexRangeError", IndexError), ("ArgumentError", ValueError),
           ("InvalidValueError", ValueError), ("StateError", RuntimeError),
           ("InputOutputError", RuntimeError), ("FormatError", ValueError),
           ("GradcheckError", AssertionError)]
_ERROR_OF = {}
for _code, (_cls_name, _builtin) in enumerate(_ERRORS, start=1):
    _cls = type(_cls_name, (Error, _builtin), {
        "status": _code, "__doc__": "SG_ERR_*: " + lib.sg_status_string(_code).decode()})
    _ERROR_OF[_code] = _cls
    __all__.append(_cls_name)
(OutOfMemoryError, NullError, ShapeError, DtypeError, LayoutError, IndexRangeError,
 ArgumentError, InvalidValueError, StateError, InputOutputError, FormatError,
 GradcheckError) = (_ERROR_OF[c] for c in range(1, len(_ERRORS) + 1))


def _raise(ctxp, what, status=None):
    if status is None:
        status = lib.sg_ctx_status(ctxp)
    msg = lib.sg_ctx_message(ctxp).decode(errors="replace")
    if status == 0:  # a NULL with no status: cannot happen for ops given valid handles
        status = 7
    raise _ERROR_OF.get(status, Error)(f"{what}: {msg}" if msg else what, status)


# ---------------------------------------------------------------- context

_live_contexts = weakref.WeakSet()
_default = None


class Context:
    """A C context: threads (<= 0: all), seed (0: 42), deterministic (bitwise identical
    results across runs and thread counts; False allows the Hogwild paths)."""

    def __init__(self, threads=0, seed=0, deterministic=True):
        opts = _lib.CtxOpts(threads=_int_arg(threads, "Context: threads", 32),
                            nondeterministic=0 if deterministic else 1,
                            seed=_int_arg(seed, "Context: seed", 64, unsigned=True))
        self._ptr = lib.sg_ctx_new(ctypes.byref(opts))
        if not self._ptr:
            raise OutOfMemoryError("sg_ctx_new failed", 1)
        self._generation = 0   # tape resets so far; tape tensors remember theirs
        self._step_refs = []   # everything an op was given, kept until the reset
        self._grad_disabled = 0
        _live_contexts.add(self)

    def _handle(self):
        if not self._ptr:
            raise StaleTensorError("the Context is closed")
        return self._ptr

    def close(self):
        """Frees the C context and everything it gave out (tensors' numpy arrays stay
        valid: they are Python's). Idempotent."""
        if self._ptr:
            lib.sg_ctx_free(self._ptr)
            self._ptr = None
            self._step_refs = []

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def threads(self):
        return lib.sg_ctx_threads(self._handle())

    @threads.setter
    def threads(self, n):
        lib.sg_ctx_set_threads(self._handle(), _int_arg(n, "threads", 32))

    @property
    def deterministic(self):
        return bool(lib.sg_ctx_deterministic(self._handle()))

    @property
    def generation(self):
        """The number of tape resets so far."""
        return self._generation

    def tape_nodes(self):
        return lib.sg_tape_nodes(self._handle())

    def mem_stats(self):
        s = lib.sg_ctx_mem_stats(self._handle())
        return {"bytes_in_use": s.bytes_in_use, "peak_bytes": s.peak_bytes,
                "arena_bytes": s.arena_bytes}

    def tape_reset(self):
        """Drops the tape, every step tensor and every gradient (sg_tape_reset); step
        tensors of this step raise StaleTensorError from now on."""
        lib.sg_tape_reset(self._handle())
        self._generation += 1
        self._release_step_refs()

    def _release_step_refs(self):
        refs, self._step_refs = self._step_refs, []
        for r in refs:
            if isinstance(r, _DeferredFree):
                lib.sg_tensor_free(r.ptr)

    def no_grad(self):
        return no_grad(self)

    def tensor(self, data, requires_grad=False, dtype=None):
        """A persistent dense tensor holding a copy of ``data`` (array-like; dtype: the
        array's if it is one of float32/float64/int32/int64, else float64 for floats and
        int64 for integers, or the one given)."""
        a = _as_supported(np.asarray(data), dtype)
        return Tensor._wrap_array(self, np.array(a, order="C", copy=True), requires_grad)

    def zeros(self, shape, dtype=np.float64, requires_grad=False):
        return Tensor._wrap_array(self, np.zeros(shape, dtype=_as_supported_dtype(dtype)),
                                  requires_grad)

    def uniform(self, shape, lo=-1.0, hi=1.0, dtype=np.float64, requires_grad=False):
        """A persistent tensor drawn from U[lo, hi) with the context's generator."""
        t = self.zeros(shape, dtype)
        t.uniform_(lo, hi)
        return t.requires_grad_(requires_grad)

    def from_numpy(self, a, requires_grad=False):
        return from_numpy(a, requires_grad, ctx=self)


def default_context():
    """The Context used where none is given (made on first use, with the defaults)."""
    global _default
    if _default is None or not _default._ptr:
        _default = Context()
    return _default


@contextlib.contextmanager
def no_grad(ctx=None):
    """Within the block ops record nothing (sg_set_grad_enabled) in ctx, or, with ctx None,
    in every live Context."""
    ctxs = [ctx] if ctx is not None else [c for c in list(_live_contexts) if c._ptr]
    previous = [lib.sg_set_grad_enabled(c._handle(), 0) for c in ctxs]
    try:
        yield
    finally:
        for c, p in zip(ctxs, previous):
            if c._ptr:
                lib.sg_set_grad_enabled(c._ptr, p)


# ---------------------------------------------------------------- tensors


def _as_supported_dtype(dtype):
    d = np.dtype(dtype)
    if d in _SG_OF:
        return d
    if d.kind == "f":
        return np.dtype(np.float64)
    if d.kind in "iu":
        return np.dtype(np.int64)
    raise TypeError(f"sgrad: no tensor dtype for numpy {d} (float32, float64, int32, int64)")


def _as_supported(a, dtype=None):
    return a.astype(_as_supported_dtype(dtype if dtype is not None else a.dtype), copy=False)


def _int_arg(x, what, bits=64, unsigned=False):
    """x (an integer: int, numpy integer, anything with __index__) checked to fit the C
    integer it is passed as (int: bits 32, int64_t: 64; unsigned: uint64_t), which ctypes
    would otherwise wrap silently. TypeError for a non-integer, OverflowError out of range."""
    try:
        i = operator.index(x)
    except TypeError:
        raise TypeError(f"{what}: an integer is needed, not {type(x).__name__}") from None
    lo, hi = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if not lo <= i <= hi:
        raise OverflowError(f"{what}: {i} is outside the C range [{lo}, {hi}]")
    return i


def _shape_arg(shape, what="shape"):
    return (ctypes.c_int64 * max(len(shape), 1))(*[_int_arg(d, what) for d in shape])


def _c_string(b, what):
    """Encoded text b for a C string parameter; ValueError when it holds a NUL byte, where C
    would end the string (and silently use what comes before, as Python's open() refuses)."""
    if b"\0" in b:
        raise ValueError(f"{what}: {b!r} holds a NUL character")
    return b


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
        p = lib.sg_tensor_wrap(ctx._handle(), _SG_OF[a.dtype], a.ndim, _shape_arg(a.shape),
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
        return _NP_OF[lib.sg_tensor_dtype(self._h())]

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
    def __add__(self, o): return add(self, o)
    def __radd__(self, o): return add(o, self)
    def __sub__(self, o): return sub(self, o)
    def __rsub__(self, o): return sub(o, self)
    def __mul__(self, o): return mul(self, o)
    def __rmul__(self, o): return mul(o, self)
    def __truediv__(self, o): return div(self, o)
    def __rtruediv__(self, o): return div(o, self)
    def __matmul__(self, o): return matmul(self, o)
    def __rmatmul__(self, o): return matmul(o, self)
    def __neg__(self): return scale(self, -1.0)

    def __getitem__(self, key):
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(self.shape[0])
            return slice_rows(self, start, max(start, stop))
        raise TypeError("Tensor indexing supports t[start:stop] (rows); use index_select")

    def sum(self, dim=None, keepdim=False):
        return sum(self, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return mean(self, dim, keepdim)

    def reshape(self, *shape):
        return reshape(self, *shape)

    def transpose(self, dim0=0, dim1=1):
        return transpose(self, dim0, dim1)

    @property
    def T(self):
        return transpose(self, 0, 1)

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
    ok = (a.dtype in _SG_OF and a.dtype.isnative and a.flags.c_contiguous and a.flags.aligned
          and a.flags.writeable)
    if not ok:
        a = np.array(_as_supported(a), order="C", copy=True)
    return Tensor._wrap_array(ctx, a, requires_grad)


def coo(indices, values, shape, ctx=None, requires_grad=False):
    """A persistent COO tensor (sg_coo_new; indices and values are copied and validated):
    indices (sparse_dim, nnz) integers, values (nnz, *shape[sparse_dim:]) float32/float64
    (other numbers become float64). ShapeError when the parts disagree with each other or
    with shape, DtypeError for indices that are not integers."""
    ctx = ctx or default_context()
    idx = np.ascontiguousarray(_index_array(indices, "coo: indices"))
    shape = tuple(_int_arg(d, "coo: shape") for d in shape)
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
    p = lib.sg_coo_new(ctx._handle(), _SG_OF[val.dtype], len(shape), _shape_arg(shape),
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


def _tensor_arg(ctx, x, dtype=None):
    """x as a Tensor of ctx: Tensors as they are, arrays and numbers copied into a step
    tensor (numbers and float arrays in dtype when given, else x's own dtype if supported,
    float64 / int64 otherwise). Kept alive until the reset."""
    if isinstance(x, Tensor):
        x._h()
        ctx._step_refs.append(x)
        return x
    a = np.asarray(x)
    if dtype is not None and (isinstance(x, (int, float)) or a.dtype.kind == "f"):
        a = a.astype(dtype)  # numbers and float arrays take the tensor operand's dtype
    elif a.dtype not in _SG_OF:
        a = a.astype(_as_supported_dtype(a.dtype))
    a = np.ascontiguousarray(a)
    p = lib.sg_tensor_new_tmp(ctx._handle(), _SG_OF[a.dtype], a.ndim, _shape_arg(a.shape))
    if not p:
        _raise(ctx._ptr, "step tensor")
    if a.size:
        ctypes.memmove(lib.sg_tensor_data(p), a.ctypes.data, a.nbytes)
    return Tensor(ctx, p, False)


def _result(ctx, p, what):
    if not p:
        _raise(ctx._ptr, what)
    return Tensor(ctx, p, False)


# ---------------------------------------------------------------- ops (include/sgrad.h)


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
         else lib.sg_sum_dim(ta._h(), _int_arg(dim, "sum: dim", 32), 1 if keepdim else 0))
    return _result(ctx, p, "sum")


def mean(a, dim=None, keepdim=False):
    """sg_mean or sg_mean_dim."""
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    p = (lib.sg_mean(ta._h()) if dim is None
         else lib.sg_mean_dim(ta._h(), _int_arg(dim, "mean: dim", 32), 1 if keepdim else 0))
    return _result(ctx, p, "mean")


def softmax(a, dim=-1):
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_softmax(_tensor_arg(ctx, a)._h(),
                                       _int_arg(dim, "softmax: dim", 32)), "softmax")


def log_softmax(a, dim=-1):
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_log_softmax(_tensor_arg(ctx, a)._h(),
                                           _int_arg(dim, "log_softmax: dim", 32)), "log_softmax")


def reshape(a, *shape):
    """sg_reshape (a view; one dim may be -1)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    ctx = _ctx_of(a)
    ta = _tensor_arg(ctx, a)
    return _result(ctx, lib.sg_reshape(ta._h(), len(shape), _shape_arg(shape, "reshape")),
                   "reshape")


def transpose(a, dim0=0, dim1=1):
    ctx = _ctx_of(a)
    return _result(ctx, lib.sg_transpose(_tensor_arg(ctx, a)._h(),
                                         _int_arg(dim0, "transpose: dim0", 32),
                                         _int_arg(dim1, "transpose: dim1", 32)), "transpose")


def concat(tensors):
    """sg_concat along dim 0."""
    ctx = _ctx_of(*tensors)
    ts = [_tensor_arg(ctx, t) for t in tensors]
    arr = (ctypes.c_void_p * max(len(ts), 1))(*[t._h() for t in ts])
    return _result(ctx, lib.sg_concat(len(ts), arr), "concat")


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
        return np.array([_int_arg(v, what) for v in a.flat], dtype=np.int64).reshape(a.shape)
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{what}: indices must be integers, not {a.dtype}", 4)
    if a.dtype.kind == "u" and int(a.max()) > np.iinfo(np.int64).max:
        raise OverflowError(f"{what}: index {a.max()} is outside the C range of int64_t")
    return a.astype(np.int64)


def _index_arg(ctx, idx, what="indices"):
    if isinstance(idx, Tensor):
        return _tensor_arg(ctx, idx)
    return _tensor_arg(ctx, _index_array(idx, what))


def _optim_ptr(ctx, fused):
    """fused's handle, kept alive until the tape reset: the backward calls it (also when
    the caller dropped the optimizer after the op)."""
    if fused is None:
        return None
    ctx._step_refs.append(fused)
    return fused._h()


def _padding_arg(padding_idx, what):
    return -1 if padding_idx is None else _int_arg(padding_idx, what)


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
    return _result(ctx, lib.sg_index_select(tx._h(), _int_arg(dim, "index_select: dim", 32),
                                            ti._h()), "index_select")


def slice_rows(x, start, end):
    """sg_slice: rows [start, end) of x's leading dimension (a view; sparse gradient)."""
    ctx = _ctx_of(x)
    return _result(ctx, lib.sg_slice(_tensor_arg(ctx, x)._h(),
                                     _int_arg(start, "slice_rows: start"),
                                     _int_arg(end, "slice_rows: end")), "slice")


def to_sparse(x, sparse_dim=1):
    ctx = _ctx_of(x)
    return _result(ctx, lib.sg_to_sparse(_tensor_arg(ctx, x)._h(),
                                         _int_arg(sparse_dim, "to_sparse: sparse_dim", 32)),
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


# ---------------------------------------------------------------- clipping, gradcheck


def clip_grad_norm(max_norm, ctx=None):
    """Scales every gradient in ctx's store so that their global L2 norm is at most
    max_norm (sg_clip_grad_norm); returns the norm before clipping."""
    ctx = ctx or default_context()
    total = ctypes.c_double()
    rc = lib.sg_clip_grad_norm(ctx._handle(), float(max_norm), ctypes.byref(total))
    if rc:
        _raise(ctx._ptr, "clip_grad_norm", rc)
    return total.value


def clip_grad_value(clip, ctx=None):
    ctx = ctx or default_context()
    rc = lib.sg_clip_grad_value(ctx._handle(), float(clip))
    if rc:
        _raise(ctx._ptr, "clip_grad_value", rc)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, masked=False, raise_exception=True):
    """sg_gradcheck: the Jacobian of ``fn(*inputs)`` by backward against central
    differences. inputs: persistent float64 tensors (dense or COO) that require grad, all of
    one Context (else ArgumentError).
    Returns True, or raises GradcheckError with the worst mismatch (False with
    raise_exception=False). Resets the tape (step tensors of this step die)."""
    ctx = _ctx_of(*inputs)
    errors = []

    def c_fn(_ctxp, ins, _ud):
        try:
            ts = []
            for i, t in enumerate(inputs):
                if ins[i] != t._ptr:
                    raise Error("gradcheck: inputs moved")
                ts.append(t)
            out = fn(*ts)
            if not isinstance(out, Tensor):
                raise TypeError("gradcheck: fn must return a Tensor")
            ctx._step_refs.append(out)
            return out._h()
        except BaseException as e:  # back to C as NULL; raised below
            errors.append(e)
            return None
    cb = _lib.GRADCHECK_FN(c_fn)
    arr = (ctypes.c_void_p * max(len(inputs), 1))(*[t._h() for t in inputs])
    opts = _lib.GradcheckOpts(eps, atol, rtol, 1 if masked else 0)
    res = _lib.GradcheckResult()
    rc = lib.sg_gradcheck(ctx._handle(), cb, None, len(inputs), arr, ctypes.byref(opts),
                          ctypes.byref(res))
    ctx._generation += 1  # sg_gradcheck reset the tape
    ctx._release_step_refs()
    if errors:
        raise errors[0]
    if rc == 0:
        return True
    if rc == 12 and not raise_exception:
        return False
    if rc == 12:
        raise GradcheckError(
            "gradcheck failed: input %d element %d (output %d): analytical %.10g, "
            "numerical %.10g, max abs error %.3g" % (res.input, res.element, res.output,
                                                     res.analytical, res.numerical,
                                                     res.max_abs_err), 12)
    _raise(ctx._ptr, "gradcheck", rc)


from . import optim  # noqa: E402,F401  (needs the names above)
from .word2vec import Word2Vec, KeyedVectors  # noqa: E402
from .checkpoint import save_checkpoint, load_checkpoint, read_checkpoint_meta  # noqa: E402
from .plot import plot_training  # noqa: E402
from . import fasttext  # noqa: E402,F401
