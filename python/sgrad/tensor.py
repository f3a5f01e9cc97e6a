"""Tensors: a handle on a C tensor, dense or COO, persistent or of one step.

- Persistent tensors (``ctx.tensor``, ``from_numpy``, ``coo``, parameters) live until
  ``free()`` or their Context's end. A dense one keeps its data in a numpy array that the
  Tensor holds, so ``t.numpy()`` is a view that stays valid.
- Step (tape) tensors, what ops return and gradients, die at ``ctx.tape_reset()``; using
  one afterwards raises StaleTensorError instead of reading freed memory. Their
  ``numpy()`` is a copy.
"""
import ctypes
import weakref
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from ._args import COO, NP_OF, SG_OF, as_supported, int_arg, shape_arg, supported_dtype
from ._lib import lib
from .context import Context, default_context
from .errors import ArgumentError, DtypeError, LayoutError, ShapeError, StaleTensorError, _raise

__all__ = ["Tensor", "from_numpy", "coo"]

# What an op or a method accepts where a tensor is expected: a Tensor, or a numpy array or
# Python number copied into a step tensor.
_TensorLike = Union["Tensor", np.ndarray, float, int]


class Tensor:
    """A handle on a C tensor, dense or COO, of dtype float32, float64, int32 or int64.

    Persistent tensors (made by a Context, ``from_numpy``, ``coo``, ``nn.Parameter``) live
    until ``free()`` or the Context's end; step tensors (op results, gradients) only until
    the next ``ctx.tape_reset()`` (or ``optimizer.zero_grad()``), unlike PyTorch, where a
    tensor lives as long as a reference to it. Any use of a dead handle (a step tensor after
    the reset, a freed tensor, a tensor of a closed Context) raises
    ``sgrad.StaleTensorError``; copy what you need with ``.numpy()`` first. Arithmetic
    operators (``+ - * / @``, unary ``-``, ``**``, ``abs()``) and ``t[start:stop]`` (rows)
    record on the tape as the functions of ``sgrad.ops`` do. Tensors are made by the
    functions above, not by calling ``Tensor`` directly."""

    __array_priority__ = 1000  # ndarray op Tensor gives Tensor's reflected operator

    def __init__(self, ctx: Context, ptr: int, persistent: bool,
                 array: Optional[np.ndarray] = None, owner: Any = None):
        self._ctx = ctx
        self._ptr = ptr
        self._persistent = persistent
        self._generation = None if persistent else ctx._generation
        self._array = array   # persistent dense: the numpy array that holds the data
        self._owner = owner   # something that keeps ptr alive (a parent COO, a wordvec)
        self._freed = False
        self._dtype = None    # cached: a tensor's dtype never changes
        # A persistent tensor of its own is freed when the last reference goes; step
        # tensors die with the tape and need no finalizer (none keeps op calls cheap).
        self._finalizer = (weakref.finalize(self, _free_persistent, ctx, ptr)
                           if persistent and owner is None else None)

    @classmethod
    def _wrap_array(cls, ctx, a, requires_grad=False):
        t = cls.__new__(cls)
        _wrap_new_array(t, ctx, a)
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

    def free(self) -> None:
        """Frees a persistent tensor's C memory now instead of when its last reference goes
        (sg_tensor_free); a parameter is unregistered from its optimizer. Any later use
        raises StaleTensorError; a second ``free()`` does nothing. If the current step's
        tape uses the tensor, the C memory is released at the next tape_reset instead.
        A ``from_numpy`` array stays valid (it is Python's). ArgumentError (a ValueError)
        for a step tensor, which dies at tape_reset. PyTorch has no counterpart."""
        if not self._persistent:
            raise ArgumentError("free(): step tensors die at tape_reset", 7)
        if self._freed:
            return
        self._h()
        self._freed = True
        if self._finalizer is not None:
            self._finalizer.detach()
        if any(r is self for r in self._ctx._step_refs):
            self._ctx._step_refs.append(_DeferredFree(self._ptr))
        else:
            lib.sg_tensor_free(self._ptr)
        self._ptr = None

    # -- properties
    @property
    def ctx(self) -> Context:
        """The Context that owns this tensor: its memory, tape and gradient store (ops on
        it record on that Context's tape)."""
        return self._ctx

    @property
    def dtype(self) -> np.dtype:
        """The element type as a numpy dtype: float32, float64, int32 or int64 (PyTorch
        gives ``torch.float32`` and the like; compare with ``np.float32`` here)."""
        h = self._h()
        if self._dtype is None:
            self._dtype = NP_OF[lib.sg_tensor_dtype(h)]
        return self._dtype

    @property
    def layout(self) -> str:
        """``"dense"`` or ``"coo"`` (PyTorch's ``torch.strided`` and ``torch.sparse_coo``,
        here as strings)."""
        return "coo" if lib.sg_tensor_layout(self._h()) == COO else "dense"

    @property
    def is_sparse(self) -> bool:
        """True for a COO tensor, False for a dense one (as PyTorch's)."""
        return lib.sg_tensor_layout(self._h()) == COO

    @property
    def shape(self) -> Tuple[int, ...]:
        """The dimensions as a tuple of ints (``()`` for a 0-d scalar); a COO tensor's is
        the shape of the dense array it means. PyTorch gives a ``torch.Size``, also a
        tuple."""
        h = self._h()
        n = lib.sg_tensor_ndim(h)
        s = lib.sg_tensor_shape(h)
        return tuple(s[i] for i in range(n))

    @property
    def ndim(self) -> int:
        """The number of dimensions, ``len(self.shape)`` (0 for a scalar)."""
        return lib.sg_tensor_ndim(self._h())

    def numel(self) -> int:
        """The number of elements, the product of ``shape``; for a COO tensor that of the
        dense array it means (its stored entries are ``nnz``)."""
        return lib.sg_tensor_numel(self._h())

    def __len__(self):
        return self.shape[0]

    @property
    def persistent(self) -> bool:
        """True for a persistent tensor (lives until ``free()`` or its Context's end), False
        for a step tensor (an op result or a gradient), which dies at the next
        ``ctx.tape_reset()``. sgrad only: PyTorch has no step tensors."""
        return self._persistent

    @property
    def data_ptr(self) -> Optional[int]:
        """The address of the first element of a dense tensor's row-major data, as an int;
        None for a COO tensor. A property here, a method in PyTorch. Valid as long as the
        tensor: until ``free()`` for a persistent one, tape_reset for a step one."""
        return lib.sg_tensor_data(self._h())

    @property
    def requires_grad(self) -> bool:
        """Whether backward computes a gradient for this tensor: set on a leaf (as
        ``requires_grad_``), True on an op result that depends on one."""
        return bool(lib.sg_tensor_get_requires_grad(self._h()))

    @requires_grad.setter
    def requires_grad(self, on: bool) -> None:
        self.requires_grad_(on)

    def requires_grad_(self, on: bool = True) -> "Tensor":
        """Marks this leaf tensor as needing a gradient (or, with False, not), in place, and
        returns it, as PyTorch's. DtypeError (a TypeError) for an integer tensor,
        ArgumentError (a ValueError) for an op result with a history (not a leaf)."""
        if not lib.sg_tensor_requires_grad(self._h(), 1 if on else 0):
            _raise(self._ctx._ptr, "requires_grad")
        return self

    @property
    def grad(self) -> Optional[Union[np.ndarray, "Tensor"]]:
        """The gradient accumulated since the last tape_reset: a numpy array (a copy, of
        this tensor's shape and dtype) for a dense gradient, a COO step Tensor for a sparse
        one (an Embedding's weight), None if none reached it. Unlike PyTorch, gradients
        are dropped by ``ctx.tape_reset()`` and ``optimizer.zero_grad()`` (read as None
        afterwards), and a dense one is not a Tensor: writing to the array changes nothing;
        read ``grad`` again after each backward."""
        g = lib.sg_tensor_grad(self._h())
        if not g:
            return None
        t = Tensor(self._ctx, g, False)
        return t if t.is_sparse else t.numpy()

    # -- data
    def numpy(self) -> np.ndarray:
        """The values as a numpy array of this tensor's shape and dtype. Dense persistent
        tensors: a view of their data (writes go to the tensor, optimizer steps show in
        it), valid as long as the array, even after ``free()``. Step tensors and tensors
        whose memory the library owns (optimizer state): a copy, which outlives the
        tape_reset that kills the tensor. COO tensors: a dense copy of their meaning
        (duplicates summed). PyTorch's ``numpy()`` is always a view and refuses tensors
        that require grad; here no ``detach()`` is needed. StaleTensorError for a dead
        tensor."""
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

    def __dlpack__(self, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule of this dense tensor, for ``torch.from_dlpack(t)`` and
        ``numpy.from_dlpack(t)``: a persistent tensor's memory is SHARED (writes on either
        side are seen by the other; the consumer's tensor keeps the memory alive, also
        after this Tensor goes). A step tensor, whose memory the next step reuses, is
        copied (refused with StateError, a RuntimeError, when ``copy=False``); ``copy=True``
        copies any tensor. LayoutError (a TypeError) for a COO tensor. ``stream``,
        ``max_version`` and ``dl_device`` (the array API's) are accepted for CPU memory
        only. See ``sgrad.dlpack``."""
        if stream is not None and stream != -1:
            raise ArgumentError("__dlpack__: stream must be None for CPU memory", 7)
        if dl_device is not None and tuple(int(v) for v in dl_device) != (1, 0):
            raise ArgumentError(f"__dlpack__: dl_device {tuple(dl_device)}; sgrad tensors "
                                "live on the CPU, (1, 0)", 7)
        from .dlpack import _tensor_capsule
        return _tensor_capsule(self, copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(1, 0): DLPack's kDLCPU, device 0 (every sgrad tensor lives in CPU memory)."""
        self._h()
        return (1, 0)

    def __array__(self, dtype: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self) -> Union[float, int]:
        """The value of a one-element tensor (any shape) as a Python float or int, as
        PyTorch's; ValueError for any other number of elements."""
        a = self.numpy()
        if a.size != 1:
            raise ValueError("item(): tensor has %d elements" % a.size)
        return a.reshape(()).item()

    def tolist(self) -> Union[List[Any], float, int]:
        """The values as nested Python lists of floats or ints (a bare number for a 0-d
        tensor; a COO tensor's dense meaning), as PyTorch's."""
        return self.numpy().tolist()

    def fill_(self, value: float) -> "Tensor":
        """Sets every element to ``value`` in place and returns the tensor, as PyTorch's;
        not recorded on the tape (as under ``torch.no_grad()``). Dense float tensors only:
        DtypeError (a TypeError) for an integer tensor, LayoutError (a TypeError) for a COO
        one."""
        rc = lib.sg_tensor_fill(self._h(), float(value))
        if rc:
            _raise(self._ctx._ptr, "fill_", rc)
        return self

    def uniform_(self, lo: float = -1.0, hi: float = 1.0) -> "Tensor":
        """Fills the tensor in place with draws from U[lo, hi) by its Context's random
        generator (reproducible from the Context's ``seed``) and returns it; not recorded
        on the tape. The default range is [-1, 1), where PyTorch's is [0, 1). Dense float
        tensors only: DtypeError (a TypeError) for an integer tensor, LayoutError (a
        TypeError) for a COO one."""
        rc = lib.sg_tensor_fill_uniform(self._h(), float(lo), float(hi))
        if rc:
            _raise(self._ctx._ptr, "uniform_", rc)
        return self

    def copy_(self, src: _TensorLike) -> "Tensor":
        """Copies ``src`` (a Tensor, dense or COO, or an array) into this dense tensor in
        place and returns it; float dtypes are converted, not recorded on the tape. Unlike
        PyTorch, no broadcasting: ShapeError (a ValueError) when the shapes differ;
        DtypeError (a TypeError) for an integer source or target, LayoutError (a
        TypeError) for a COO target."""
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
    def indices(self) -> np.ndarray:
        """A COO tensor's indices: a (sparse_dim, nnz) int64 numpy array, a copy
        (duplicates allowed, unsorted unless coalesced). A property returning numpy here,
        where PyTorch has the method ``indices()`` returning a Tensor. LayoutError (a
        TypeError) for a dense tensor."""
        return self._coo_part(lib.sg_coo_indices)

    @property
    def values(self) -> np.ndarray:
        """A COO tensor's values: a (nnz, *shape[sparse_dim:]) numpy array of its dtype, a
        copy. A property returning numpy here, where PyTorch has the method ``values()``.
        LayoutError (a TypeError) for a dense tensor."""
        return self._coo_part(lib.sg_coo_values)

    @property
    def nnz(self) -> int:
        """The number of stored entries of a COO tensor, duplicates counted (PyTorch's
        ``_nnz()``); -1 for a dense tensor."""
        return lib.sg_coo_nnz(self._h())

    @property
    def sparse_dim(self) -> int:
        """The number of leading dimensions a COO tensor indexes (the rest are dense in each
        entry's values; PyTorch's ``sparse_dim()``); -1 for a dense tensor."""
        return lib.sg_coo_sparse_dim(self._h())

    @property
    def is_coalesced(self) -> bool:
        """Whether a COO tensor is known to have sorted, unique indices (``sgrad.coalesce``
        makes one); False for a dense tensor. A property here, a method in PyTorch."""
        return bool(lib.sg_coo_is_coalesced(self._h()))

    def to_numpy_dense(self) -> np.ndarray:
        """The dense array the tensor means, always a new array (COO duplicates summed);
        unlike ``numpy()``, never a view."""
        if not self.is_sparse:
            return np.array(self.numpy(), copy=True)
        idx, val, shape = self.indices, self.values, self.shape
        out = np.zeros(shape, dtype=val.dtype)
        np.add.at(out, tuple(idx), val)
        return out

    def to_scipy(self) -> Any:
        """A 2-D COO tensor as a ``scipy.sparse.coo_matrix`` of its shape and dtype (hybrid
        rows, sparse_dim 1, expanded to one entry per element; duplicates kept, scipy sums
        them). ValueError for a dense tensor or another number of dims; ImportError
        without scipy."""
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
    def backward(self, grad: Optional[_TensorLike] = None) -> None:
        """Computes the gradient of this tensor with respect to every leaf that requires
        grad and adds it to the leaf's ``.grad`` (sg_backward). Without ``grad`` the tensor
        must be a dense one-element loss (else ShapeError, a ValueError); with it, ``grad``
        (a Tensor, dense or COO, or an array) is the incoming gradient, of this tensor's
        shape (ShapeError) and dtype (DtypeError, a TypeError) (sg_backward_grad).
        StateError (a RuntimeError) when nothing it depends on requires grad.

        Unlike PyTorch the graph is kept until ``ctx.tape_reset()``: backward may run again
        (no ``retain_graph``), each run accumulating, and the gradients die at the reset.
        A tape that grows past ``Context.TAPE_WARN_NODES`` nodes without a reset warns
        once (ResourceWarning)."""
        self._ctx._check_tape_length()
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

    def __pow__(self, exponent): return _ops.pow(self, exponent)
    def __abs__(self): return _ops.abs(self)

    def sum(self, dim: Optional[int] = None, keepdim: bool = False) -> "Tensor":
        """The sum of every element (a 0-d step tensor; COO too), or along ``dim``
        (``sgrad.sum``)."""
        return _ops.sum(self, dim, keepdim)

    def abs(self) -> "Tensor":
        """|x| elementwise, a step tensor (``sgrad.abs``)."""
        return _ops.abs(self)

    def sqrt(self) -> "Tensor":
        """sqrt(x) elementwise (NaN below 0), a step tensor (``sgrad.sqrt``)."""
        return _ops.sqrt(self)

    def cos(self) -> "Tensor":
        """cos(x) elementwise, a step tensor (``sgrad.cos``)."""
        return _ops.cos(self)

    def sin(self) -> "Tensor":
        """sin(x) elementwise, a step tensor (``sgrad.sin``)."""
        return _ops.sin(self)

    def exp(self) -> "Tensor":
        """exp(x) elementwise, a step tensor (``sgrad.exp``)."""
        return _ops.exp(self)

    def log(self) -> "Tensor":
        """The natural log elementwise (NaN below 0, -inf at 0), a step tensor
        (``sgrad.log``)."""
        return _ops.log(self)

    def relu(self) -> "Tensor":
        """max(x, 0) elementwise, a step tensor (``sgrad.relu``)."""
        return _ops.relu(self)

    def sigmoid(self) -> "Tensor":
        """1 / (1 + exp(-x)) elementwise, a step tensor (``sgrad.sigmoid``)."""
        return _ops.sigmoid(self)

    def tanh(self) -> "Tensor":
        """tanh(x) elementwise, a step tensor (``sgrad.tanh``)."""
        return _ops.tanh(self)

    def pow(self, exponent: float) -> "Tensor":
        """x ** exponent elementwise for a number ``exponent`` (a Tensor exponent raises
        TypeError), a step tensor (``sgrad.pow``)."""
        return _ops.pow(self, exponent)

    def clamp(self, min: Optional[float] = None, max: Optional[float] = None) -> "Tensor":  # noqa: A002
        """min(max(x, min), max) elementwise, a step tensor; either bound may be None, not
        both (ValueError) (``sgrad.clamp``)."""
        return _ops.clamp(self, min, max)

    def maximum(self, other: _TensorLike) -> "Tensor":
        """The elementwise max of self and ``other``, broadcasting, a step tensor
        (``sgrad.maximum``)."""
        return _ops.maximum(self, other)

    def minimum(self, other: _TensorLike) -> "Tensor":
        """The elementwise min of self and ``other``, broadcasting, a step tensor
        (``sgrad.minimum``)."""
        return _ops.minimum(self, other)

    def gather(self, dim: int, index: Union["Tensor", np.ndarray, Sequence[int]]) -> "Tensor":
        """The elements at integer ``index`` along ``dim``, as ``torch.gather``: a step
        tensor of index's shape; IndexRangeError (an IndexError) for an index out of range
        (``sgrad.gather``)."""
        return _ops.gather(self, dim, index)

    def narrow(self, dim: int, start: int, length: int) -> "Tensor":
        """Elements [start, start + length) along ``dim``: a step tensor, a copy (PyTorch
        returns a view); IndexRangeError (an IndexError) for a range outside the dimension
        (``sgrad.narrow``)."""
        return _ops.narrow(self, dim, start, length)

    def norm(self, p: float = 2, dim: int = -1, keepdim: bool = False) -> "Tensor":
        """The p-norm along ``dim`` (p 1 or 2, else ArgumentError, a ValueError), a step
        tensor (``sgrad.norm``)."""
        return _ops.norm(self, p, dim, keepdim)

    def logsumexp(self, dim: int, keepdim: bool = False) -> "Tensor":
        """log(sum(exp(x))) along ``dim``, stable for large inputs, a step tensor
        (``sgrad.logsumexp``)."""
        return _ops.logsumexp(self, dim, keepdim)

    def max(self, dim: int, keepdim: bool = False) -> Tuple["Tensor", "Tensor"]:
        """(values, indices) of the maximum along ``dim``, two step tensors: values
        differentiable, indices int64 (``sgrad.max``). ``dim`` is required here, where
        PyTorch's ``max()`` without it gives the overall maximum."""
        return _ops.max(self, dim, keepdim)

    def softmax(self, dim: int = -1) -> "Tensor":
        """exp(x) / sum(exp(x)) along ``dim``, stable, a step tensor (``sgrad.softmax``)."""
        return _ops.softmax(self, dim)

    def log_softmax(self, dim: int = -1) -> "Tensor":
        """x - logsumexp(x) along ``dim``, stable, a step tensor
        (``sgrad.log_softmax``)."""
        return _ops.log_softmax(self, dim)

    def mean(self, dim: Optional[int] = None, keepdim: bool = False) -> "Tensor":
        """``sgrad.mean(self, dim, keepdim)``: the mean of every element (a 0-d step
        tensor) or along ``dim``; ArgumentError (a ValueError) for a dim out of range."""
        return _ops.mean(self, dim, keepdim)

    def reshape(self, *shape: Union[int, Sequence[int]]) -> "Tensor":
        """``sgrad.reshape(self, *shape)``: the same elements in a new shape, given as ints
        or one tuple (one dim may be -1). ShapeError (a ValueError) when the number of
        elements differs."""
        return _ops.reshape(self, *shape)

    def transpose(self, dim0: int = 0, dim1: int = 1) -> "Tensor":
        """``sgrad.transpose(self, dim0, dim1)``: dims ``dim0`` and ``dim1`` swapped, as a
        new step tensor (PyTorch returns a view and needs both dims; here they default to
        0 and 1). ArgumentError (a ValueError) for a dim out of range."""
        return _ops.transpose(self, dim0, dim1)

    @property
    def T(self) -> "Tensor":
        """``transpose(0, 1)``: a 2-D tensor's transpose, a new step tensor. For more dims
        sgrad swaps the first two only (PyTorch's ``T`` reverses them all); a 1-D tensor
        raises ArgumentError (a ValueError) where PyTorch returns it unchanged."""
        return _ops.transpose(self, 0, 1)

    def __repr__(self):
        try:
            kind = "persistent" if self._persistent else "step"
            return "sgrad.Tensor(%s, %s, %s %s%s)" % (
                self.shape, self.dtype, kind, self.layout,
                ", requires_grad" if self.requires_grad else "")
        except StaleTensorError as e:
            return "sgrad.Tensor(<dead: %s>)" % e


def _free_persistent(ctx: Context, ptr: int) -> None:
    """The finalizer of a persistent tensor: frees its C tensor while the context lives."""
    if ctx._ptr:
        lib.sg_tensor_free(ptr)


_HUGE_PAGE = 2 << 20


def _aligned_empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """np.empty(shape, dtype), starting on a 2 MiB boundary when it is at least that large
    (a view of a larger buffer, which it keeps alive): as the library's own large blocks,
    a table's rows then start on cache lines (malloc's 16-byte offset spreads a 256-byte
    row over 5 lines instead of 4), and numpy's huge-page advice covers all of it."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < _HUGE_PAGE:
        return np.empty(shape, dtype)
    buf = np.empty(nbytes + _HUGE_PAGE, np.uint8)
    off = -buf.ctypes.data % _HUGE_PAGE
    return buf[off:off + nbytes].view(dtype).reshape(shape)


def _wrap_new_array(t: "Tensor", ctx: Context, a: np.ndarray) -> None:
    """Makes t (new, uninitialised) a persistent tensor over a's memory (sg_tensor_wrap);
    a is C-contiguous, of a supported dtype, and kept alive by t."""
    p = lib.sg_tensor_wrap(ctx._handle(), SG_OF[a.dtype], a.ndim, shape_arg(a.shape),
                           a.ctypes.data)
    if not p:
        _raise(ctx._ptr, "sg_tensor_wrap")
    Tensor.__init__(t, ctx, p, True, array=a)


class _DeferredFree:
    """Sits in a Context's step refs: frees a tensor's C handle once the tape lets go."""

    def __init__(self, ptr):
        self.ptr = ptr


def from_numpy(a: np.ndarray, requires_grad: bool = False,
               ctx: Optional[Context] = None) -> Tensor:
    """A persistent dense tensor over ``a``'s memory, without a copy, when ``a`` is a
    C-contiguous, aligned, writeable, native-endian float32/float64/int32/int64 array
    (as ``torch.from_numpy``): writes by the library (an optimizer step) land in ``a``, and
    the Tensor keeps ``a`` alive. Any other array is COPIED first (other integers to int64,
    a byte-swapped or strided array to a native contiguous one); float16, bool, complex and
    object arrays raise DtypeError (a TypeError), as does a non-array (TypeError: use
    ``ctx.tensor`` for lists). ``t.numpy() is a`` tells whether no copy was made. ``ctx``:
    the Context to make it in (default: ``default_context()``)."""
    ctx = ctx or default_context()
    if not isinstance(a, np.ndarray):
        raise TypeError("from_numpy needs a numpy array (ctx.tensor copies any array-like)")
    ok = (a.dtype in SG_OF and a.dtype.isnative and a.flags.c_contiguous and a.flags.aligned
          and a.flags.writeable)
    if not ok:
        a = np.array(as_supported(a), order="C", copy=True)
    return Tensor._wrap_array(ctx, a, requires_grad)


def coo(indices: Any, values: Any, shape: Sequence[int], ctx: Optional[Context] = None,
        requires_grad: bool = False) -> Tensor:
    """A persistent COO tensor of ``shape`` (as ``torch.sparse_coo_tensor``), from copies
    of ``indices`` ((sparse_dim, nnz) integers) and ``values`` ((nnz,
    *shape[sparse_dim:]), float32 or float64; other numbers become float64); duplicate
    indices are allowed and sum. ShapeError (a ValueError) when the parts disagree with
    each other or with shape, DtypeError (a TypeError) for indices that are not integers,
    IndexRangeError (an IndexError) for an index < 0 or beyond its dimension."""
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
