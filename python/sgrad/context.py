"""The Context: one C context (allocator, threads, determinism, seed, the tape and the
gradient store, the last error) and the default one used where none is given.

Lifetimes: Tensors and optimizers keep their Context alive; ``ctx.close()`` frees it early,
after which every handle of it raises StaleTensorError. Step (tape) tensors, what ops
return, and every gradient die at ``ctx.tape_reset()``; the Context counts resets so that a
step tensor of an earlier step raises instead of reading freed memory. Everything an op was
given (and the optimizer of a fused op) is kept alive by the Context until the reset.
"""
import contextlib
import ctypes
import warnings
import weakref
from typing import TYPE_CHECKING, Any, ContextManager, Dict, Iterator, Optional, Sequence, Union

import numpy as np

from . import _lib
from ._args import as_supported, int_arg, supported_dtype
from ._lib import lib
from .errors import OutOfMemoryError, StaleTensorError

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["Context", "default_context", "no_grad"]

_live_contexts: "weakref.WeakSet[Context]" = weakref.WeakSet()
_default: "Optional[Context]" = None



class Context:
    """A C context (sg_ctx_new): ``threads`` (<= 0: all cores), ``seed`` (0: 42; the random
    stream of uniform_ and dropout), ``deterministic`` (True: results bitwise identical
    across runs and thread counts; False allows the Hogwild paths). Usable as a ``with``
    block, which closes it."""

    # A tape this long without a reset is almost always a loop that forgot tape_reset() or
    # zero_grad(): each node holds its outputs until the reset, so memory grows without
    # bound. Warned once per Context.
    TAPE_WARN_NODES = 1_000_000

    def __init__(self, threads: int = 0, seed: int = 0, deterministic: bool = True):
        opts = _lib.CtxOpts(threads=int_arg(threads, "Context: threads", 32),
                            nondeterministic=0 if deterministic else 1,
                            seed=int_arg(seed, "Context: seed", 64, unsigned=True))
        self._ptr = lib.sg_ctx_new(ctypes.byref(opts))
        if not self._ptr:
            raise OutOfMemoryError("sg_ctx_new failed", 1)
        self._generation = 0   # tape resets so far; tape tensors remember theirs
        self._step_refs: list = []   # everything an op was given, kept until the reset
        self._tape_warned = False
        _live_contexts.add(self)

    def _handle(self) -> int:
        if not self._ptr:
            raise StaleTensorError("the Context is closed")
        return self._ptr

    def close(self) -> None:
        """Frees the C context and everything it gave out (numpy arrays given to
        from_numpy stay valid: they are Python's). Idempotent."""
        if self._ptr:
            lib.sg_ctx_free(self._ptr)
            self._ptr = None
            self._step_refs = []

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def threads(self) -> int:
        """The number of threads the C kernels use (settable)."""
        return lib.sg_ctx_threads(self._handle())

    @threads.setter
    def threads(self, n: int) -> None:
        lib.sg_ctx_set_threads(self._handle(), int_arg(n, "threads", 32))

    @property
    def deterministic(self) -> bool:
        """Whether results are bitwise identical across runs and thread counts."""
        return bool(lib.sg_ctx_deterministic(self._handle()))

    @property
    def generation(self) -> int:
        """The number of tape resets so far."""
        return self._generation

    def tape_nodes(self) -> int:
        """The number of nodes on the tape since the last reset."""
        return lib.sg_tape_nodes(self._handle())

    def mem_stats(self) -> Dict[str, int]:
        """Bytes held by the context, as {name: int}: ``bytes_in_use``, ``peak_bytes``,
        ``arena_bytes`` (the step arena that tape tensors live in)."""
        s = lib.sg_ctx_mem_stats(self._handle())
        return {"bytes_in_use": s.bytes_in_use, "peak_bytes": s.peak_bytes,
                "arena_bytes": s.arena_bytes}

    def tape_reset(self) -> None:
        """Drops the tape, every step tensor and every gradient (sg_tape_reset, O(1)); step
        tensors of this step raise StaleTensorError from now on."""
        lib.sg_tape_reset(self._handle())
        self._generation += 1
        self._release_step_refs()

    def _release_step_refs(self) -> None:
        from .tensor import _DeferredFree
        refs, self._step_refs = self._step_refs, []
        for r in refs:
            if isinstance(r, _DeferredFree):
                lib.sg_tensor_free(r.ptr)

    def _check_tape_length(self) -> None:
        """Warns once when the tape has grown past TAPE_WARN_NODES without a reset."""
        if not self._tape_warned and lib.sg_tape_nodes(self._ptr) > self.TAPE_WARN_NODES:
            self._tape_warned = True
            warnings.warn(f"sgrad: the tape holds over {self.TAPE_WARN_NODES:,} nodes without "
                          "a tape_reset(); call ctx.tape_reset() (or optimizer.zero_grad()) "
                          "after each optimizer step, or memory keeps growing",
                          ResourceWarning, stacklevel=3)

    def no_grad(self) -> ContextManager[None]:
        """A context manager for a ``with`` block in which this Context's ops record nothing
        on the tape (inference), as ``torch.no_grad()``; ``sgrad.no_grad()`` does it for
        every live Context."""
        return no_grad(self)

    def tensor(self, data: Any, requires_grad: bool = False, dtype: Any = None) -> "Tensor":
        """A persistent dense tensor of this Context holding a copy of ``data`` (any
        array-like), as ``torch.tensor``. dtype: the one given, else the array's if it is
        float32/float64/int32/int64, int64 for other integers (Python floats give float64,
        where PyTorch gives float32); float16, bool and the like raise DtypeError (a
        TypeError), and so does ``requires_grad`` on an integer tensor."""
        from .tensor import Tensor
        a = as_supported(np.asarray(data), dtype)
        return Tensor._wrap_array(self, np.array(a, order="C", copy=True), requires_grad)

    def zeros(self, shape: Union[int, Sequence[int]], dtype: Any = np.float64,
              requires_grad: bool = False) -> "Tensor":
        """A persistent dense tensor of zeros of ``shape`` (an int or a tuple) and ``dtype``
        (default float64, where PyTorch's default is float32); DtypeError (a TypeError) for
        a dtype sgrad has no tensor for."""
        from .tensor import Tensor
        return Tensor._wrap_array(self, np.zeros(shape, dtype=supported_dtype(dtype)),
                                  requires_grad)

    def uniform(self, shape: Union[int, Sequence[int]], lo: float = -1.0, hi: float = 1.0,
                dtype: Any = np.float64, requires_grad: bool = False) -> "Tensor":
        """A persistent dense tensor of ``shape`` drawn from U[lo, hi) with the Context's
        random generator (reproducible from its ``seed``); ``dtype`` float32 or float64
        (default), an integer dtype raises DtypeError (a TypeError)."""
        t = self.zeros(shape, dtype)
        t.uniform_(lo, hi)
        return t.requires_grad_(requires_grad)

    def from_numpy(self, a: np.ndarray, requires_grad: bool = False) -> "Tensor":
        """``sgrad.from_numpy`` in this context (no copy when the array allows it)."""
        from .tensor import from_numpy
        return from_numpy(a, requires_grad, ctx=self)


def default_context() -> Context:
    """The Context used where none is given (made on first use, with the defaults)."""
    global _default
    if _default is None or not _default._ptr:
        _default = Context()
    return _default


@contextlib.contextmanager
def no_grad(ctx: Optional[Context] = None) -> Iterator[None]:
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
