"""sgrad inside PyTorch: ``torch.nn.Module``s whose embedding tables live in sgrad and whose
backward applies a fused sparse optimizer to exactly the rows a batch touched (what
FBGEMM's table-batched embeddings do on GPUs), so no sparse gradient tensor is built and
no optimizer walks the table. Imported on demand (``import sgrad.torch``); it is the only
module of the package that imports torch.

Modules: ``Embedding``, ``EmbeddingBag`` (PyTorch's arguments and inputs) and
``EmbeddingBagCollection`` (many tables in one call, TorchRec's KeyedJaggedTensor layout,
outputs concatenated per sample: DLRM's layout). Fused optimizers: ``SGD``, ``Adagrad``,
``RowWiseAdagrad``, ``LazyAdam``::

    import torch, sgrad.torch
    emb = sgrad.torch.EmbeddingBag(1_000_000, 64, mode="sum",
                                   optimizer=sgrad.torch.Adagrad(lr=0.05))
    out = emb(indices, offsets)          # a torch tensor (B, 64) that requires grad
    loss = head(out).mean(); loss.backward()   # emb's rows are updated here

How it works. A module's table is a persistent sgrad tensor; ``module.weight`` is a torch
tensor over the same memory (zero copy, DLPack). The forward (a ``torch.autograd.Function``)
runs sgrad's embedding_bag op on the table and hands torch a copy of the output (torch
owns it). The backward hands the output gradient to sgrad (``sg_backward_grad``), whose
fused op applies the optimizer's row update to the touched rows inside the backward; the
table's ``weight`` never gets a ``.grad`` (it has ``requires_grad=False``; torch
optimizers given it skip it). With ``optimizer=None`` the backward instead returns
PyTorch's own sparse gradient for ``weight`` (as ``nn.EmbeddingBag(sparse=True)``), for any
torch optimizer (``torch.optim.SparseAdam``, ``SGD``, ``Adagrad``).

Threads: each module has its own sgrad Context; its kernels use ``threads`` threads when
given, else ``torch.get_num_threads()``, read at every call (so ``torch.set_num_threads``
applies to both). torch's ops and sgrad's run one after the other, never at once, so the
two never need more cores than either alone; where torch and sgrad share one OpenMP
runtime (a distribution's torch linked to the system libgomp) they even share its thread
pool. OpenBLAS (torch's BLAS in a distribution's build) keeps a pool of its own that
torch's setting does not reach: ``set_num_threads(n)`` sets torch's, OpenBLAS's and so
sgrad's at once. Results are bitwise identical for any thread count of sgrad and torch.

State: ``state_dict()`` holds the table (``weight``), the optimizer's state tensors
(``optimizer_state.<name>``, zero-copy views of sgrad's: Adagrad "sum", RowWiseAdagrad
"sum" (one per row), LazyAdam "exp_avg", "exp_avg_sq", "row_step", every kind "step")
and, as extra state, the optimizer's kind, hyperparameters, learning rate and step count;
so ``torch.save(model.state_dict())`` and ``load_state_dict`` mid-run resume bitwise.
``torch.save(model)``, pickling and ``copy.deepcopy`` work too (the module is rebuilt from
its arguments and its state_dict).

Learning rate: ``module.optimizer`` is a ``torch.optim.Optimizer`` over the module's
tables: set ``module.optimizer.lr = x`` or ``param_groups[0]["lr"]``, or drive it with any
``torch.optim.lr_scheduler``; the next backward uses it. Its ``step()`` does nothing (the
update ran in the backward); call it anyway where a scheduler expects it.

Bad input raises before any row is written: an index out of range IndexError (naming the
index and its position), indices that are not int32/int64 TypeError, a non-contiguous or
non-CPU tensor TypeError/ValueError, offsets that do not fit the indices ValueError, each
naming the module. ``check_finite=True``: a NaN or infinite output gradient makes the
backward raise ``sgrad.InvalidValueError`` (a ValueError) and no row changes.

Lifetimes: the forward's sgrad work lives on the module's tape until its backward (or
until torch frees the graph without one); the tape is reset when no output is awaiting
its backward. ``retain_graph=True`` backwards through one output are refused (the update
is applied once).
"""
import ctypes
import math
import threading
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn

from . import _lib
from ._args import F32, F64, I32, I64, NP_OF
from ._lib import lib
from . import optim as _sgoptim
from .context import Context
from .dlpack import _export_pointer
from .errors import (ArgumentError, DtypeError, Error, IndexRangeError, InvalidValueError,
                     LayoutError, StateError, _raise)
from .tensor import Tensor, _aligned_empty, from_numpy

__all__ = ["FusedOptimizer", "SGD", "Adagrad", "RowWiseAdagrad", "LazyAdam", "Embedding",
           "EmbeddingBag", "EmbeddingBagCollection", "set_num_threads", "blas_threads"]

_SG_OF_TORCH = {torch.float32: F32, torch.float64: F64, torch.int32: I32, torch.int64: I64}
_INDEX_DTYPES = (torch.int32, torch.int64)
_FLOAT_DTYPES = (torch.float32, torch.float64)
_NP_OF_TORCH = {torch.float32: np.float32, torch.float64: np.float64}
_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}
_PENDING_WARN = 64  # outputs awaiting backward at once before a ResourceWarning

try:
    _sparse_coo_unsafe = torch._sparse_coo_tensor_unsafe  # no O(nnz) validation pass
except AttributeError:  # pragma: no cover
    _sparse_coo_unsafe = torch.sparse_coo_tensor


# ---------------------------------------------------------------- threads


def _openblas() -> Optional[ctypes.CDLL]:
    """The OpenBLAS library this process has loaded (torch's BLAS), or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()
                     and line.split()[-1].startswith("/")}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib_ = ctypes.CDLL(path)  # already loaded: the same handle
            lib_.openblas_set_num_threads  # noqa: B018 - the symbol must exist
            return lib_
        except (OSError, AttributeError):
            continue
    return None


def blas_threads() -> Optional[int]:
    """The threads of the OpenBLAS pool torch's matrix products run on, when this process
    has loaded OpenBLAS (a distribution's torch, e.g. Debian's), else None. OpenBLAS sizes
    it from OPENBLAS_NUM_THREADS (default: every core), not from torch.set_num_threads."""
    ob = _openblas()
    if ob is None:
        return None
    ob.openblas_get_num_threads.restype = ctypes.c_int
    return int(ob.openblas_get_num_threads())


def set_num_threads(n: int, blas_threads: Optional[int] = None) -> None:
    """One thread count for everything a model with sgrad.torch modules runs: torch's
    intra-op pool (torch.set_num_threads), hence every sgrad.torch module whose
    ``threads`` was not given, and OpenBLAS's own pool when torch uses OpenBLAS
    (openblas_set_num_threads; it ignores torch's setting), which gets ``blas_threads``
    when given, else ``n``. One OpenBLAS thread under n > 1 torch threads suits a dense
    half of small products: OpenBLAS's workers then never wait for the cores that
    OpenMP's idle threads spin on (docs/torch.md, "Threads"). ValueError for a count < 1."""
    blas = n if blas_threads is None else blas_threads
    for name, v in (("n", n), ("blas_threads", blas)):
        if isinstance(v, bool) or int(v) < 1:
            raise ValueError(f"sgrad.torch.set_num_threads: {name}={v!r}; a count >= 1 "
                             "is needed")
    torch.set_num_threads(int(n))
    ob = _openblas()
    if ob is not None:
        ob.openblas_set_num_threads.argtypes = [ctypes.c_int]
        ob.openblas_set_num_threads(int(blas))


# ---------------------------------------------------------------- fused optimizers


class FusedOptimizer(torch.optim.Optimizer):
    """A fused optimizer: made unbound with its hyperparameters (``sgrad.torch.Adagrad(
    lr=0.05)``) and given to a module, which binds a copy of it to its tables (read it
    back as ``module.optimizer``). Bound, it is a ``torch.optim.Optimizer`` whose one
    param group holds the module's weights, so ``torch.optim.lr_scheduler`` schedulers
    drive it; the update itself runs inside the module's backward, with the group's
    current ``lr``. Only ``lr`` may change after binding (ValueError at the next backward
    for another hyperparameter)."""

    _KIND = ""
    _SG_CLASS: Any = None

    def __init__(self, lr: float, **hyper: Any) -> None:
        # Unbound: a specification only (torch's Optimizer.__init__ runs at binding).
        self.defaults = dict(lr=lr, **hyper)
        self.param_groups: List[Dict[str, Any]] = []
        self.state: Dict[Any, Any] = {}
        self._sg: Optional[_sgoptim.Optimizer] = None
        self._fixed: Dict[str, Any] = {}
        self._spec = dict(self.defaults)
        _sgoptim._check_lr(lr, f"sgrad.torch.{type(self).__name__}: lr")

    # -- binding
    def _bind(self, weights: List[torch.Tensor], tables: List[Tensor],
              check_finite: bool) -> "FusedOptimizer":
        """A bound copy over the module's torch weights and sgrad tables."""
        bound = type(self).__new__(type(self))
        hyper = dict(self.defaults)
        bound._spec = dict(hyper)  # torch's Optimizer may add keys to defaults
        torch.optim.Optimizer.__init__(bound, weights, dict(hyper))
        bound._sg = type(self)._SG_CLASS(tables, **hyper)
        bound._fixed = {k: v for k, v in hyper.items() if k != "lr"}
        if check_finite:
            bound._sg.check_finite(True)
        bound._step_count = 0
        return bound

    @property
    def bound(self) -> bool:
        """Whether this optimizer belongs to a module (else it is a specification)."""
        return self._sg is not None

    def _ptr(self) -> int:
        """The C optimizer, its learning rate synced from ``param_groups``."""
        sg = self._sg
        if sg is None:
            raise StateError("this optimizer is a specification; give it to a module and use "
                             "module.optimizer", 9)
        d = self.param_groups[0]
        for k, v in self._fixed.items():
            if k not in d or not _sgoptim._same(d[k], v):
                raise ValueError(f"sgrad.torch.{type(self).__name__}: param_groups[0][{k!r}] "
                                 f"changed to {d.get(k, '<missing>')!r} from {v!r}; only 'lr' "
                                 "can change after the optimizer is made")
        lr = d["lr"]
        if lr != sg._groups[0].lr:
            sg.lr = _sgoptim._check_lr(lr, f"sgrad.torch.{type(self).__name__}: lr")
        return sg._groups[0].ptr

    # -- torch.optim.Optimizer's interface
    def step(self, closure: Any = None) -> Any:
        """Does nothing but call ``closure``: the update of the rows a batch touched ran in
        the module's backward. Call it where a learning-rate scheduler expects an
        optimizer step."""
        return closure() if closure is not None else None

    @property
    def lr(self) -> float:
        """The learning rate the next backward's update uses (settable)."""
        if self.param_groups:
            return float(self.param_groups[0]["lr"])
        return float(self.defaults["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        value = _sgoptim._check_lr(value, f"sgrad.torch.{type(self).__name__}: lr")
        if self.param_groups:
            self.param_groups[0]["lr"] = value
        else:
            self.defaults["lr"] = value

    @property
    def steps(self) -> int:
        """Updates applied so far (sgrad's step count; each backward through the module is
        one); 0 for a specification."""
        return self._sg.steps if self._sg is not None else 0

    def __repr__(self) -> str:
        spec = dict(self._spec, lr=self.lr)
        args = ", ".join(f"{k}={v!r}" for k, v in spec.items())
        return f"sgrad.torch.{type(self).__name__}({args})"

    def __getstate__(self) -> Dict[str, Any]:
        return {"defaults": dict(self._spec, lr=self.lr)}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        if set(state) == {"defaults"}:
            # Pickled alone, an optimizer comes back as its specification (a module
            # rebuilds its bound copy).
            self.__init__(**state["defaults"])
        else:  # torch's load_state_dict hands its state and param_groups here
            torch.optim.Optimizer.__setstate__(self, state)


class SGD(FusedOptimizer):
    """Fused plain SGD: ``w[r] -= lr * g[r]`` for each touched row r (duplicates add, in
    order; the same as torch.optim.SGD on nn.EmbeddingBag(sparse=True)'s gradient to float
    rounding). No momentum or weight decay (use ``optimizer=None`` and torch.optim.SGD for
    those)."""

    _KIND = "sgd"
    _SG_CLASS = _sgoptim.SGD

    def __init__(self, lr: float = 0.01) -> None:
        super().__init__(lr)


class Adagrad(FusedOptimizer):
    """Fused Adagrad, torch.optim.Adagrad's arguments and formula on the touched rows:
    clr = lr / (1 + (step - 1) lr_decay); sum[r] += g[r]^2; w[r] -= clr g[r] /
    (sqrt(sum[r]) + eps), with duplicate rows summed first (as torch's sparse Adagrad).
    ``weight_decay`` (which torch refuses with sparse gradients) applies to touched rows
    only."""

    _KIND = "adagrad"
    _SG_CLASS = _sgoptim.Adagrad

    def __init__(self, lr: float = 0.01, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10) -> None:
        super().__init__(lr, lr_decay=lr_decay, weight_decay=weight_decay,
                         initial_accumulator_value=initial_accumulator_value, eps=eps)


class RowWiseAdagrad(Adagrad):
    """Fused row-wise Adagrad (FBGEMM's EXACT_ROWWISE_ADAGRAD; not in PyTorch): one
    accumulator per row, acc[r] += mean(g[r]^2); w[r] -= clr g[r] / (sqrt(acc[r]) + eps).
    Its state is one float per row instead of one per element."""

    _KIND = "rowwise_adagrad"
    _SG_CLASS = _sgoptim.RowWiseAdagrad


class LazyAdam(FusedOptimizer):
    """Fused LazyAdam: Adam on the touched rows only, each row counting its own steps
    ("row_step") for its bias correction; untouched rows and their moments stay as they
    are. torch.optim.SparseAdam differs in using the table's step count for every row (see
    sgrad.optim.LazyAdam)."""

    _KIND = "lazy_adam"
    _SG_CLASS = _sgoptim.LazyAdam

    def __init__(self, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        super().__init__(lr, betas=tuple(float(b) for b in betas), eps=eps,
                         weight_decay=weight_decay)


# ---------------------------------------------------------------- the sgrad side


def _torch_view(ptr: int, shape: Tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor over memory at ptr, without a copy and without keeping it alive: for
    an immediate copy only."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if n == 0:
        return torch.empty(shape, dtype=dtype)
    size = n * torch.empty((), dtype=dtype).element_size()
    buf = (ctypes.c_char * size).from_address(ptr)
    return torch.frombuffer(buf, dtype=dtype, count=n).view(shape)


class _Step:
    """One forward's sgrad work: its outputs on the tape, the C tensors wrapped over torch
    memory (freed at the tape reset) and the torch tensors they borrow (kept until then)."""
    __slots__ = ("outs", "wrapped", "keep", "psw", "done", "released", "core", "__weakref__")

    def __init__(self, core: "_Tables") -> None:
        self.outs: List[int] = []
        self.wrapped: List[int] = []
        self.keep: List[torch.Tensor] = []
        self.psw: List[Optional[int]] = []
        self.done = False
        self.released = False
        self.core = core

    def __del__(self) -> None:
        # torch freed the graph without a backward (or after it): give the tape back.
        core = self.core
        if core is not None and not self.released:
            try:
                core._release(self)
            except Exception:
                pass


class _Tables:
    """The sgrad side of a module: a Context, the tables (persistent sgrad tensors), the
    fused optimizer (or a stand-in for optimizer=None that only clears gradients), and the
    tape's bookkeeping (reset when no forward awaits its backward)."""

    def __init__(self, name: str, shapes: Sequence[Tuple[int, int]], dtype: torch.dtype,
                 threads: Optional[int]) -> None:
        self.name = name
        self.threads = threads
        self.ctx = Context(threads=threads if threads else torch.get_num_threads())
        self._threads_now = self.ctx.threads
        np_dtype = _NP_OF_TORCH[dtype]
        self.dtype = dtype
        self.sg_dtype = _SG_OF_TORCH[dtype]
        self.tables = [from_numpy(_aligned_empty(s, np_dtype), requires_grad=True, ctx=self.ctx)
                       for s in shapes]
        self.handles = [t._h() for t in self.tables]
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self.views = [torch.from_dlpack(t) for t in self.tables]
        self.lock = threading.RLock()
        self.pending = 0
        self.warned = False
        self.held: List[_Step] = []
        self.optimizer: Optional[FusedOptimizer] = None
        self._plain: Optional[_sgoptim.Optimizer] = None  # optimizer=None: clears grads

    # -- setup
    def bind(self, spec: Optional[FusedOptimizer], weights: List[torch.Tensor],
             check_finite: bool) -> Optional[FusedOptimizer]:
        if spec is None:
            self._plain = _sgoptim.SGD(self.tables, lr=0.0)
            self.optimizer = None
            self.check_finite = check_finite
            return None
        if not isinstance(spec, FusedOptimizer):
            raise TypeError(f"{self.name}: optimizer must be one of sgrad.torch.SGD, Adagrad, "
                            f"RowWiseAdagrad, LazyAdam or None, not {type(spec).__name__} (for "
                            "a torch optimizer give optimizer=None and pass module.weight to "
                            "it)")
        self.optimizer = spec._bind(weights, self.tables, check_finite)
        self.check_finite = check_finite
        return self.optimizer

    def state_views(self, i: int) -> Dict[str, torch.Tensor]:
        """Zero-copy torch views of table i's optimizer state; each keeps the sgrad
        optimizer (which owns the memory) alive."""
        if self.optimizer is None:
            return {}
        sg = self.optimizer._sg
        ptr, ph = sg._groups[0].ptr, self.handles[i]
        out = {}
        for k in range(lib.sg_optim_state_count(ptr, ph)):
            name = ctypes.c_char_p()
            p = lib.sg_optim_state(ptr, ph, k, ctypes.byref(name))
            nd = lib.sg_tensor_ndim(p)
            shp = lib.sg_tensor_shape(p)
            shape = tuple(shp[j] for j in range(nd))
            dtype = NP_OF[lib.sg_tensor_dtype(p)]
            cap = _export_pointer(lib.sg_tensor_data(p) or 0, shape, dtype, sg)
            out[name.value.decode()] = torch.utils.dlpack.from_dlpack(cap)
        return out

    def sync_threads(self) -> None:
        n = self.threads or torch.get_num_threads()
        if n != self._threads_now:
            lib.sg_ctx_set_threads(self.ctx._ptr, n)
            self._threads_now = n

    # -- torch memory as C tensors, for one step
    def wrap(self, step: _Step, t: torch.Tensor) -> int:
        """A C tensor over torch tensor t's memory (contiguous, CPU, an sgrad dtype),
        freed at the tape reset; t is kept alive until then."""
        shape = tuple(t.shape)
        if t.numel() == 0:
            p = lib.sg_tensor_new_tmp(self.ctx._ptr, _SG_OF_TORCH[t.dtype], len(shape),
                                      _shape(shape))
            if not p:
                _raise(self.ctx._ptr, self.name)
            return p
        p = lib.sg_tensor_wrap(self.ctx._ptr, _SG_OF_TORCH[t.dtype], len(shape), _shape(shape),
                               t.data_ptr())
        if not p:
            _raise(self.ctx._ptr, self.name)
        step.wrapped.append(p)
        step.keep.append(t)
        return p

    def fail(self, what: str = "") -> None:
        """Raises the context's last error, prefixed by the module's name; an offsets error
        (the C library's IndexRangeError for an offset beyond the indices) becomes an
        ArgumentError (a ValueError), as bad offsets are in PyTorch."""
        ctxp = self.ctx._ptr
        status = lib.sg_ctx_status(ctxp)
        msg = lib.sg_ctx_message(ctxp).decode(errors="replace")
        lib.sg_ctx_clear_error(ctxp)
        if status == IndexRangeError.status and "(offsets)" in msg:
            raise ArgumentError(f"{self.name}: offsets do not fit the indices: {msg}", 7)
        _raise_status(status, f"{self.name}{what}: {msg}")

    # -- the tape
    def _release(self, step: _Step) -> None:
        """step no longer needs the tape; when no step does, the tape is reset and every
        C tensor wrapped over torch memory is freed."""
        with self.lock:
            if step.released:
                return
            step.released = True
            step.core = None
            self.pending -= 1
            self.held.append(step)
            if self.pending == 0 and self.ctx._ptr:
                self.ctx.tape_reset()
                held, self.held = self.held, []
                for s in held:
                    for p in s.wrapped:
                        lib.sg_tensor_free(p)
                    s.wrapped = []
                    s.keep = []

    # -- forward and backward
    def forward(self, jobs: List["_Job"], record: bool) -> Tuple[_Step, List[int]]:
        """Runs the jobs' sgrad ops; returns the step and each job's output handle. The
        outputs live on the tape until the step is released: by the backward, when torch
        frees the graph, or (record False) by the caller once it has copied them."""
        step = _Step(self)
        with self.lock:
            self.pending += 1
            if self.pending == _PENDING_WARN and not self.warned:
                self.warned = True
                warnings.warn(
                    f"{self.name}: {self.pending} outputs await their backward; sgrad's tape "
                    "is reset only when none does, so its memory grows: call backward, drop "
                    "the outputs (or their loss), or compute them under torch.no_grad()",
                    ResourceWarning, stacklevel=4)
            try:
                self.sync_threads()
                ctxp = self.ctx._ptr
                prev = lib.sg_set_grad_enabled(ctxp, 1 if record else 0)
                try:
                    for job in jobs:
                        step.outs.append(job.run(self, step))
                finally:
                    lib.sg_set_grad_enabled(ctxp, prev)
            except BaseException:
                self._release(step)
                raise
        return step, step.outs

    def backward(self, step: _Step, jobs: List["_Job"], grads: List[torch.Tensor],
                 want_weight: bool) -> Tuple[List[Optional[torch.Tensor]], List[Optional[torch.Tensor]]]:
        """Hands each job's output gradient to sgrad: a fused update of the touched rows,
        or (optimizer None, want_weight) torch sparse gradients for the tables. Returns
        (weight grads per table, per_sample_weights grads per job)."""
        with self.lock:
            if step.done or step.released:
                raise RuntimeError(f"{self.name}: this output's backward ran already (its "
                                   "update is applied once; retain_graph=True backwards are "
                                   "not supported)")
            step.done = True
            try:
                return self._backward(step, jobs, grads, want_weight)
            finally:
                self._release(step)

    def _backward(self, step, jobs, grads, want_weight):
        self.sync_threads()
        if self.check_finite:
            for g in grads:
                if not bool(torch.isfinite(g).all()):
                    bad = (~torch.isfinite(g)).nonzero()[0].tolist()
                    raise InvalidValueError(
                        f"{self.name}: the output gradient holds {g[tuple(bad)].item()} at "
                        f"{tuple(bad)} (check_finite=True); no row was updated", 8)
        opt_ptr = self.optimizer._ptr() if self.optimizer is not None else None
        for job, out, g in zip(jobs, step.outs, grads):
            g = g.reshape(job.out_shape)
            if g.dtype != self.dtype:
                g = g.to(self.dtype)
            if not g.is_contiguous():
                g = g.contiguous()
            gh = self.wrap(step, g)
            if lib.sg_backward_grad(out, gh):
                self.fail(": backward")
        weight_grads: List[Optional[torch.Tensor]] = [None] * len(self.tables)
        if opt_ptr is not None:
            if lib.sg_optim_step(opt_ptr):
                self.fail(": optimizer step")
            self.optimizer._step_count = getattr(self.optimizer, "_step_count", 0) + 1
        elif want_weight:
            for t in {job.table for job in jobs}:
                weight_grads[t] = self._sparse_grad(t)
            lib.sg_optim_zero_grad(self._plain._groups[0].ptr)
        psw_grads = []
        for job, ph in zip(jobs, step.psw):
            gp = lib.sg_tensor_grad(ph) if ph else None
            psw_grads.append(_torch_view(lib.sg_tensor_data(gp), (job.n,), self.dtype).clone()
                             if gp else None)
        return weight_grads, psw_grads

    def _sparse_grad(self, t: int) -> Optional[torch.Tensor]:
        """Table t's gradient as PyTorch's uncoalesced sparse COO tensor (a copy)."""
        g = lib.sg_tensor_grad(self.handles[t])
        V, D = self.shapes[t]
        if not g:
            return None
        nnz = lib.sg_coo_nnz(g)
        ind = _torch_view(lib.sg_tensor_data(lib.sg_coo_indices(g)) if nnz else 0, (1, nnz),
                          torch.int64).clone()
        val = _torch_view(lib.sg_tensor_data(lib.sg_coo_values(g)) if nnz else 0, (nnz, D),
                          self.dtype).clone()
        return _sparse_coo_unsafe(ind, val, (V, D))


def _shape(shape: Sequence[int]) -> "ctypes.Array[ctypes.c_int64]":
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)


def _raise_status(status: int, message: str) -> None:
    from .errors import _ERROR_OF
    raise _ERROR_OF.get(status or 7, Error)(message, status or 7)


class _Job:
    """One sgrad op of a forward: an embedding or embedding_bag lookup in one table."""
    __slots__ = ("table", "idx", "offsets", "psw", "psw_grad", "mode", "padding_idx",
                 "include_last_offset", "max_norm", "bag", "out_shape", "n")

    def __init__(self, table: int, idx: torch.Tensor, offsets: Optional[torch.Tensor],
                 psw: Optional[torch.Tensor], mode: str, padding_idx: Optional[int],
                 include_last_offset: bool, max_norm: Optional[float], bag: bool,
                 out_shape: Tuple[int, ...]) -> None:
        self.table = table
        self.idx = idx
        self.offsets = offsets
        self.psw = psw
        self.psw_grad = psw is not None and psw.requires_grad
        self.mode = mode
        self.padding_idx = padding_idx
        self.include_last_offset = include_last_offset
        self.max_norm = max_norm
        self.bag = bag
        self.out_shape = out_shape
        self.n = idx.numel()

    def run(self, core: _Tables, step: _Step) -> int:
        W = core.handles[self.table]
        ih = core.wrap(step, self.idx)
        fused = core.optimizer._ptr() if core.optimizer is not None else None
        pad = -1 if self.padding_idx is None else self.padding_idx
        if not self.bag:
            opts = _lib.EmbeddingOpts(pad, float(self.max_norm or 0.0), fused)
            out = lib.sg_embedding(W, ih, ctypes.byref(opts))
            step.psw.append(None)
        else:
            oh = core.wrap(step, self.offsets)
            ph = None
            if self.psw is not None:
                ph = core.wrap(step, self.psw.detach())
                if self.psw_grad and not lib.sg_tensor_requires_grad(ph, 1):
                    core.fail()
            step.psw.append(ph if self.psw_grad else None)
            opts = _lib.EmbeddingBagOpts(_BAG_MODES[self.mode], ph, pad,
                                         1 if self.include_last_offset else 0, fused, 0)
            out = lib.sg_embedding_bag(W, ih, oh, ctypes.byref(opts))
        if not out:
            core.fail()
        return out


class _Lookup(torch.autograd.Function):
    """The autograd node of a module's forward: inputs (core, jobs, meta, *tensors) where
    tensors are what torch must see as differentiable inputs: the weights (optimizer
    None) or an empty anchor tensor (fused), then the per_sample_weights that require
    grad."""

    @staticmethod
    def forward(ctx: Any, core: _Tables, jobs: List[_Job], meta: Dict[str, Any],
                *tensors: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        step, outs = core.forward(jobs, meta["record"])
        try:
            out = _assemble(core, jobs, outs, meta)
        finally:
            if not meta["record"]:
                core._release(step)  # the outputs are copied: the tape may go
        ctx.core, ctx.jobs, ctx.step, ctx.meta = core, jobs, step, meta
        ctx.n_tensors = len(tensors)
        if meta["record"]:
            # The backward reads the indices (and offsets, weights) again: torch's version
            # counters then refuse a backward after an in-place change of them.
            ctx.save_for_backward(*[t for j in jobs for t in (j.idx, j.offsets, j.psw)
                                    if t is not None])
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:  # type: ignore[override]
        core, jobs, meta = ctx.core, ctx.jobs, ctx.meta
        ctx.saved_tensors  # raises if an index tensor was changed in place since the forward
        grads = _split_grad(grad, jobs, meta)
        n_w = ctx.n_tensors - sum(1 for j in jobs if j.psw_grad)
        want_weight = meta["weights_in"] and any(ctx.needs_input_grad[3:3 + n_w])
        wg, pg = core.backward(ctx.step, jobs, grads, want_weight)
        res: List[Optional[torch.Tensor]] = [None, None, None]
        res += wg if want_weight else [None] * n_w  # the weights, or the anchor
        res += [g for job, g in zip(jobs, pg) if job.psw_grad]
        return tuple(res)


def _assemble(core: _Tables, jobs: List[_Job], outs: List[int],
              meta: Dict[str, Any]) -> torch.Tensor:
    """The forward's torch output, a copy of sgrad's: one job's output in its shape, or
    several jobs' (B, D_t) outputs side by side (B, sum of D_t)."""
    views = [_torch_view(lib.sg_tensor_data(o) or 0, job.out_shape, core.dtype)
             for job, o in zip(jobs, outs)]
    if len(views) == 1:
        return views[0].reshape(meta["shape"]).clone()
    return torch.cat(views, dim=1)


def _split_grad(grad: torch.Tensor, jobs: List[_Job], meta: Dict[str, Any]) -> List[torch.Tensor]:
    if len(jobs) == 1:
        return [grad]
    out, col = [], 0
    for job in jobs:
        d = job.out_shape[1]
        out.append(grad[:, col:col + d])
        col += d
    return out


# ---------------------------------------------------------------- input checks


def _check_tensor(name: str, what: str, t: Any, kinds: Tuple[torch.dtype, ...],
                  kind_name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: {what} must be a torch.Tensor, not {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{name}: {what} is on {t.device}; sgrad's tables live in CPU memory "
                         "(move it with .cpu())")
    if t.dtype not in kinds:
        raise DtypeError(f"{name}: {what} must be {kind_name}, not {t.dtype}", 4)
    if t.is_sparse or t.layout != torch.strided:
        raise LayoutError(f"{name}: {what} must be a dense (strided) tensor, not {t.layout}", 5)
    if not t.is_contiguous():
        raise LayoutError(f"{name}: {what} is not contiguous (stride {tuple(t.stride())} for "
                          f"shape {tuple(t.shape)}); call .contiguous() first", 5)
    return t


def _check_index(name: str, what: str, t: Any) -> torch.Tensor:
    return _check_tensor(name, what, t, _INDEX_DTYPES, "int64 or int32")


def _check_psw(name: str, psw: Any, dtype: torch.dtype, shape: Tuple[int, ...],
               mode: str) -> Optional[torch.Tensor]:
    if psw is None:
        return None
    if mode != "sum":
        raise ValueError(f"{name}: per_sample_weights need mode='sum' (this module's mode is "
                         f"{mode!r}), as in PyTorch")
    psw = _check_tensor(name, "per_sample_weights", psw, (dtype,), str(dtype))
    if tuple(psw.shape) != shape:
        raise ValueError(f"{name}: per_sample_weights of shape {tuple(psw.shape)} for input "
                         f"of shape {shape}; they must have the input's shape")
    return psw


def _padding(name: str, padding_idx: Optional[int], num: int) -> Optional[int]:
    if padding_idx is None:
        return None
    p = int(padding_idx)
    if not -num <= p < num:
        raise ValueError(f"{name}: padding_idx {padding_idx} must be within [-{num}, {num})")
    return p + num if p < 0 else p


def _check_sizes(name: str, num: Any, dim: Any) -> Tuple[int, int]:
    for what, v in (("num_embeddings", num), ("embedding_dim", dim)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise ValueError(f"{name}: {what} must be a positive integer, not {v!r}")
    return int(num), int(dim)


# ---------------------------------------------------------------- modules


class _OptimizerState(nn.Module):
    """A container whose buffers are zero-copy views of one table's optimizer state in
    sgrad (state_dict keys ``optimizer_state.<name>``)."""

    def forward(self) -> None:  # pragma: no cover - a container
        """Not callable: a container of buffers."""
        raise RuntimeError("optimizer_state holds buffers only")


class _SgradModule(nn.Module):
    """What the three modules share: the sgrad tables, their weights and optimizer state
    as torch tensors, the extra state, pickling, and the checks on the weights."""

    _NAME = ""

    def _setup(self, shapes: Sequence[Tuple[int, int]], optimizer: Optional[FusedOptimizer],
               dtype: Any, threads: Optional[int], check_finite: bool,
               holders: List[nn.Module], config: Dict[str, Any]) -> None:
        name = self._NAME
        if dtype is None:
            dtype = torch.float32
        if dtype not in _FLOAT_DTYPES:
            raise DtypeError(f"{name}: dtype must be torch.float32 or torch.float64, not "
                             f"{dtype}", 4)
        if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
            raise ValueError(f"{name}: threads must be None (torch.get_num_threads()) or >= 1")
        core = _Tables(name, shapes, dtype, threads)
        self._sg = core
        self._config = config
        weights = []
        for holder, view in zip(holders, core.views):
            w = nn.Parameter(view, requires_grad=optimizer is None)
            holder.weight = w
            weights.append(w)
        self._holder_names = [n for n, mod in self.named_modules()
                              if any(mod is h for h in holders)]
        self._ptrs = [w.data_ptr() for w in weights]
        bound = core.bind(optimizer, weights, check_finite)
        self.optimizer = bound
        for i, holder in enumerate(holders):
            states = core.state_views(i)
            if states:
                box = _OptimizerState()
                for k, v in states.items():
                    box.register_buffer(k, v)
                holder.optimizer_state = box
        # anchor: makes the output of a fused lookup require grad (FBGEMM's placeholder)
        self._anchor = torch.zeros(0, requires_grad=True)

    @property
    def _weights(self) -> List[torch.Tensor]:
        """The tables' ``weight`` Parameters, in table order."""
        return [self.get_submodule(n).weight for n in self._holder_names]

    def _check_weights(self) -> List[torch.Tensor]:
        weights = self._weights
        for w, p in zip(weights, self._ptrs):
            if not isinstance(w, torch.Tensor) or w.data_ptr() != p:
                raise RuntimeError(f"{self._NAME}: weight no longer shares sgrad's memory (it "
                                   "was replaced, or converted by .to()/.half()); write into "
                                   "it in place (load_state_dict, weight.data.copy_) instead")
        return weights

    def _apply_lookup(self, jobs: List[_Job], shape: Tuple[int, ...]) -> torch.Tensor:
        weights = self._check_weights()
        weights_in = self._sg.optimizer is None
        lead: List[torch.Tensor] = weights if weights_in else [self._anchor]
        psws = [j.psw for j in jobs if j.psw_grad]
        record = torch.is_grad_enabled() and (
            any(t.requires_grad for t in lead) or bool(psws))
        meta = {"record": record, "weights_in": weights_in, "shape": shape}
        return _Lookup.apply(self._sg, jobs, meta, *lead, *psws)

    # -- state
    def get_extra_state(self) -> Dict[str, Any]:
        """The optimizer's kind, hyperparameters, learning rate and step count (the
        table and the state tensors are in the state_dict's tensors)."""
        opt = self._sg.optimizer
        if opt is None:
            return {"format": 1, "optimizer": None}
        return {"format": 1, "optimizer": opt._KIND, "hyper": dict(opt._fixed),
                "lr": float(opt.lr), "steps": int(opt.steps)}

    def set_extra_state(self, state: Any) -> None:
        """Restores the learning rate and step count saved by get_extra_state; ValueError
        when the saved optimizer is of another kind or has other hyperparameters."""
        name = self._NAME
        if not isinstance(state, dict) or "optimizer" not in state:
            raise ValueError(f"{name}: the extra state is not one of sgrad.torch's")
        opt = self._sg.optimizer
        kind = opt._KIND if opt is not None else None
        if state["optimizer"] != kind:
            raise ValueError(f"{name}: the state_dict was saved with optimizer "
                             f"{state['optimizer']!r}, this module has {kind!r}")
        if opt is None:
            return
        for k, v in state.get("hyper", {}).items():
            mine = opt._fixed.get(k)
            if not _sgoptim._same(mine, v):
                raise ValueError(f"{name}: the state_dict's optimizer has {k}={v!r}, this "
                                 f"module's {mine!r}")
        steps = int(state.get("steps", 0))
        if steps < 0:
            raise ValueError(f"{name}: a step count of {steps} in the state_dict")
        opt.lr = state.get("lr", opt.lr)
        opt._ptr()
        for g in opt._sg._groups:
            if lib.sg_optim_set_steps(g.ptr, steps):
                self._sg.fail(": load_state_dict")

    def __reduce_ex__(self, protocol: Any) -> Any:
        state = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v
                 for k, v in self.state_dict().items()}
        return (_rebuild, (type(self), dict(self._config), state, self.training))

    @property
    def threads(self) -> int:
        """The threads sgrad's kernels use now (``threads`` given at construction, else
        torch.get_num_threads())."""
        return self._sg.threads or torch.get_num_threads()

    @threads.setter
    def threads(self, n: Optional[int]) -> None:
        if n is not None and (isinstance(n, bool) or int(n) < 1):
            raise ValueError(f"{self._NAME}: threads must be None or >= 1")
        self._sg.threads = None if n is None else int(n)
        self._config["threads"] = self._sg.threads


def _rebuild(cls: type, config: Dict[str, Any], state: Dict[str, Any],
             training: bool) -> nn.Module:
    """Unpickles a module: made from its arguments (without drawing from torch's random
    generator: its state is put back) and loaded from its state_dict."""
    with torch.random.fork_rng(devices=[]):
        m = cls(**config)
    m.load_state_dict(state)
    m.train(training)
    return m


class Embedding(_SgradModule):
    """``torch.nn.Embedding`` whose table lives in sgrad: ``input`` (any shape, int64 or
    int32) -> (\\*input.shape, embedding_dim), a torch tensor that requires grad.

    ``optimizer``: a fused optimizer (``sgrad.torch.SGD(lr=...)``, ``Adagrad``,
    ``RowWiseAdagrad``, ``LazyAdam``) applied to the looked-up rows inside the backward
    (read the bound one as ``module.optimizer``), or None: the backward gives ``weight``
    PyTorch's sparse gradient, as ``nn.Embedding(sparse=True)``, for a torch optimizer.
    ``padding_idx``: that row's lookups give zeros and no gradient (PyTorch returns the
    row's values, zero unless changed); ``max_norm``: looked-up rows are renormalised in
    place to that L2 norm first (PyTorch's, norm_type 2). The table is initialised from
    torch's random generator as nn.Embedding's (N(0, 1), padding row zero) unless
    ``_weight`` gives it. ``dtype`` float32 (default) or float64; ``threads`` None
    follows torch.get_num_threads(); ``check_finite`` refuses (raises in backward) a
    non-finite gradient. See the module docstring for state, threads and errors."""

    _NAME = "sgrad.torch.Embedding"

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 optimizer: Optional[FusedOptimizer] = None, padding_idx: Optional[int] = None,
                 max_norm: Optional[float] = None, *, dtype: Any = None,
                 _weight: Optional[torch.Tensor] = None, threads: Optional[int] = None,
                 check_finite: bool = False) -> None:
        super().__init__()
        name = self._NAME
        num_embeddings, embedding_dim = _check_sizes(name, num_embeddings, embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = _padding(name, padding_idx, num_embeddings)
        if max_norm is not None and not (math.isfinite(max_norm) and max_norm > 0):
            raise ValueError(f"{name}: max_norm must be a finite number > 0 or None")
        self.max_norm = max_norm
        config = dict(num_embeddings=num_embeddings, embedding_dim=embedding_dim,
                      optimizer=_spec_of(optimizer), padding_idx=padding_idx,
                      max_norm=max_norm, dtype=dtype, threads=threads,
                      check_finite=check_finite)
        self._setup([(num_embeddings, embedding_dim)], optimizer, dtype, threads, check_finite,
                    [self], config)
        _init_weight(self.weight, _weight, self.padding_idx, name)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """The rows at ``input`` (int64/int32, any shape, contiguous, CPU) ->
        (\\*input.shape, embedding_dim)."""
        name = self._NAME
        idx = _check_index(name, "input", input)
        shape = tuple(idx.shape) + (self.embedding_dim,)
        flat = idx.reshape(-1)
        job = _Job(0, flat, None, None, "sum", self.padding_idx, False, self.max_norm, False,
                   (flat.numel(), self.embedding_dim))
        return self._apply_lookup([job], shape)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        return s + f", optimizer={self.optimizer!r}"


class EmbeddingBag(_SgradModule):
    """``torch.nn.EmbeddingBag`` whose table lives in sgrad: sums, means or maxima of bags
    of rows -> (B, embedding_dim), a torch tensor that requires grad. Inputs as PyTorch's:
    ``input`` 2-D (B, L) (bags of L, offsets None) or 1-D with ``offsets`` (B) (or B+1
    with ``include_last_offset``), int64/int32; ``per_sample_weights`` (input's shape, the
    table's dtype, mode "sum" only) scale each row and get a gradient when they require
    one. ``optimizer``, ``padding_idx`` (left out of its bag, not counted by the mean, as
    PyTorch), ``dtype``, ``_weight``, ``threads``, ``check_finite``: as Embedding's.
    Default mode "mean", as PyTorch's."""

    _NAME = "sgrad.torch.EmbeddingBag"

    def __init__(self, num_embeddings: int, embedding_dim: int, mode: str = "mean",
                 optimizer: Optional[FusedOptimizer] = None, padding_idx: Optional[int] = None,
                 include_last_offset: bool = False, *, dtype: Any = None,
                 _weight: Optional[torch.Tensor] = None, threads: Optional[int] = None,
                 check_finite: bool = False) -> None:
        super().__init__()
        name = self._NAME
        num_embeddings, embedding_dim = _check_sizes(name, num_embeddings, embedding_dim)
        if mode not in _BAG_MODES:
            raise ValueError(f"{name}: mode must be 'sum', 'mean' or 'max', not {mode!r}")
        self.num_embeddings, self.embedding_dim, self.mode = num_embeddings, embedding_dim, mode
        self.padding_idx = _padding(name, padding_idx, num_embeddings)
        self.include_last_offset = bool(include_last_offset)
        config = dict(num_embeddings=num_embeddings, embedding_dim=embedding_dim, mode=mode,
                      optimizer=_spec_of(optimizer), padding_idx=padding_idx,
                      include_last_offset=include_last_offset, dtype=dtype, threads=threads,
                      check_finite=check_finite)
        self._setup([(num_embeddings, embedding_dim)], optimizer, dtype, threads, check_finite,
                    [self], config)
        _init_weight(self.weight, _weight, self.padding_idx, name)

    def forward(self, input: torch.Tensor, offsets: Optional[torch.Tensor] = None,
                per_sample_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Bags of rows -> (B, embedding_dim); see the class docstring for the inputs."""
        name = self._NAME
        idx = _check_index(name, "input", input)
        psw = _check_psw(name, per_sample_weights, self._sg.dtype, tuple(idx.shape), self.mode)
        if idx.dim() == 2:
            if offsets is not None:
                raise ValueError(f"{name}: offsets must be None for 2-D input (bags of "
                                 f"{idx.shape[1]}), as in PyTorch")
            if self.include_last_offset:
                raise ValueError(f"{name}: include_last_offset=True takes 1-D input with "
                                 "offsets (PyTorch's result for 2-D input silently drops the "
                                 "last bag)")
            B, L = idx.shape
            flat = idx.reshape(-1)
            off = (torch.arange(0, B * L, L, dtype=idx.dtype) if L
                   else torch.zeros(B, dtype=idx.dtype))
            if psw is not None:
                psw = psw.reshape(-1)
        elif idx.dim() == 1:
            if offsets is None:
                raise ValueError(f"{name}: offsets are needed for 1-D input (or give 2-D "
                                 "input of fixed-size bags)")
            off = _check_index(name, "offsets", offsets)
            if off.dim() != 1:
                raise ValueError(f"{name}: offsets must be 1-D, not of shape "
                                 f"{tuple(off.shape)}")
            flat = idx
            B = off.numel() - (1 if self.include_last_offset else 0)
            if B < 0:
                raise ValueError(f"{name}: include_last_offset=True needs at least one offset")
        else:
            raise ValueError(f"{name}: input must be 1-D (with offsets) or 2-D (B, L), not "
                             f"{idx.dim()}-D")
        job = _Job(0, flat, off, psw, self.mode, self.padding_idx, self.include_last_offset,
                   None, True, (B, self.embedding_dim))
        return self._apply_lookup([job], (B, self.embedding_dim))

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s + f", optimizer={self.optimizer!r}"


class _BagTable(nn.Module):
    """One table of an EmbeddingBagCollection: its ``weight`` and ``optimizer_state``."""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim

    def forward(self) -> None:  # pragma: no cover - a container
        """Not callable: the collection looks the tables up."""
        raise RuntimeError("call the EmbeddingBagCollection")

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class EmbeddingBagCollection(_SgradModule):
    """Many embedding-bag tables looked up in one call (TorchRec's EmbeddingBagCollection,
    on CPU): ``tables`` a list of (num_embeddings, embedding_dim) (named "t0", "t1", ...)
    or a dict {name: (num_embeddings, embedding_dim)}; one ``mode`` ("sum" by default, as
    TorchRec) and one fused ``optimizer`` (or None) for all. Inputs in TorchRec's
    KeyedJaggedTensor layout, keys in table order: ``values`` (1-D int64/int32, every
    table's indices, table by table and within a table sample by sample) and either
    ``lengths`` (K*B or (K, B): the bag sizes, table-major) or ``offsets`` (K*B + 1: where
    each bag starts in ``values``, the last one len(values)); a KeyedJaggedTensor (any
    object with ``values()`` and ``lengths()`` or ``offsets()``) may be given as
    ``values``. ``per_sample_weights``: (len(values),) floats, mode "sum". Output (B, sum
    of the dims), each sample's pooled rows side by side in table order (DLRM's layout).
    State keys: ``embedding_bags.<name>.weight`` and
    ``embedding_bags.<name>.optimizer_state.<state>``."""

    _NAME = "sgrad.torch.EmbeddingBagCollection"

    def __init__(self, tables: Union[Sequence[Tuple[int, int]], Dict[str, Tuple[int, int]]],
                 optimizer: Optional[FusedOptimizer] = None, mode: str = "sum", *,
                 dtype: Any = None, threads: Optional[int] = None,
                 check_finite: bool = False) -> None:
        super().__init__()
        name = self._NAME
        if isinstance(tables, dict):
            items = [(str(k), v) for k, v in tables.items()]
        else:
            items = [(f"t{i}", v) for i, v in enumerate(tables)]
        if not items:
            raise ValueError(f"{name}: tables must name at least one (num_embeddings, "
                             "embedding_dim)")
        shapes = []
        for key, spec in items:
            if not isinstance(spec, (tuple, list)) or len(spec) != 2:
                raise ValueError(f"{name}: table {key!r} must be (num_embeddings, "
                                 f"embedding_dim), not {spec!r}")
            shapes.append(_check_sizes(f"{name} table {key!r}", *spec))
        if mode not in _BAG_MODES:
            raise ValueError(f"{name}: mode must be 'sum', 'mean' or 'max', not {mode!r}")
        self.mode = mode
        self.keys = [k for k, _ in items]
        self.dims = [d for _, d in shapes]
        self.embedding_bags = nn.ModuleDict({k: _BagTable(n, d) for k, (n, d) in
                                             zip(self.keys, shapes)})
        config = dict(tables=dict(zip(self.keys, shapes)) if isinstance(tables, dict)
                      else list(shapes), optimizer=_spec_of(optimizer), mode=mode,
                      dtype=dtype, threads=threads, check_finite=check_finite)
        self._setup(shapes, optimizer, dtype, threads, check_finite,
                    [self.embedding_bags[k] for k in self.keys], config)
        for k in self.keys:
            _init_weight(self.embedding_bags[k].weight, None, None, name)

    def forward(self, values: Any, lengths: Optional[torch.Tensor] = None,
                offsets: Optional[torch.Tensor] = None,
                per_sample_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Pooled rows of every table -> (B, sum of dims); see the class docstring."""
        name = self._NAME
        if not isinstance(values, torch.Tensor) and callable(getattr(values, "values", None)):
            kjt = values
            values = kjt.values()
            if lengths is None and offsets is None:
                lengths = kjt.lengths() if callable(getattr(kjt, "lengths", None)) else None
                if lengths is None:
                    offsets = kjt.offsets()
            if per_sample_weights is None and callable(getattr(kjt, "weights_or_none", None)):
                per_sample_weights = kjt.weights_or_none()
        vals = _check_index(name, "values", values)
        if vals.dim() != 1:
            raise ValueError(f"{name}: values must be 1-D, not of shape {tuple(vals.shape)}")
        K, N = len(self.keys), vals.numel()
        if (lengths is None) == (offsets is None):
            raise ValueError(f"{name}: give exactly one of lengths and offsets")
        if lengths is not None:
            ln = _check_index(name, "lengths", lengths).reshape(-1)
            if ln.numel() % K:
                raise ValueError(f"{name}: {ln.numel()} lengths for {K} tables; K*B expected")
            if ln.numel() and bool((ln < 0).any()):
                raise ValueError(f"{name}: lengths must be >= 0")
            off = torch.zeros(ln.numel() + 1, dtype=torch.int64)
            torch.cumsum(ln, 0, out=off[1:])
        else:
            off = _check_index(name, "offsets", offsets)
            if off.dim() != 1 or off.numel() < 1 or (off.numel() - 1) % K:
                raise ValueError(f"{name}: offsets of shape {tuple(off.shape)} for {K} tables; "
                                 "K*B + 1 expected")
        B = (off.numel() - 1) // K
        bounds = off[::B].tolist() if B else [int(off[0])] * (K + 1)
        if bounds[0] != 0 or bounds[-1] != N:
            raise ValueError(f"{name}: offsets must start at 0 and end at len(values) = {N}; "
                             f"they run from {bounds[0]} to {bounds[-1]}"
                             + (" (the lengths do not sum to len(values))"
                                if lengths is not None else ""))
        for k in range(K):
            if bounds[k + 1] < bounds[k]:
                raise ValueError(f"{name}: offsets decrease between tables {self.keys[k]!r} "
                                 f"and {self.keys[k + 1]!r}")
        psw = _check_psw(name, per_sample_weights, self._sg.dtype, (N,), self.mode)
        rel = (off[:K * B].view(K, B) - off[:K * B:B].view(K, 1)) if B else \
            torch.zeros(K, 0, dtype=off.dtype)
        jobs = []
        for k in range(K):
            s, e = bounds[k], bounds[k + 1]
            jobs.append(_Job(k, vals[s:e], rel[k], None if psw is None else psw[s:e],
                             self.mode, None, False, None, True, (B, self.dims[k])))
        return self._apply_lookup(jobs, (B, sum(self.dims)))

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}, optimizer={self.optimizer!r}"


def _spec_of(optimizer: Optional[FusedOptimizer]) -> Optional[FusedOptimizer]:
    """A specification (unbound copy) of optimizer, for rebuilding a pickled module."""
    if optimizer is None or not isinstance(optimizer, FusedOptimizer):
        return optimizer
    spec = type(optimizer).__new__(type(optimizer))
    FusedOptimizer.__setstate__(spec, {"defaults": dict(optimizer._spec, lr=optimizer.lr)})
    return spec


def _init_weight(weight: torch.Tensor, init: Optional[torch.Tensor],
                 padding_idx: Optional[int], name: str) -> None:
    with torch.no_grad():
        if init is not None:
            if tuple(init.shape) != tuple(weight.shape):
                raise ValueError(f"{name}: _weight of shape {tuple(init.shape)}; "
                                 f"{tuple(weight.shape)} expected")
            weight.copy_(init)
        else:
            nn.init.normal_(weight)
            if padding_idx is not None:
                weight[padding_idx].fill_(0)
