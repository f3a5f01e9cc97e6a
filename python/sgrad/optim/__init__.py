"""Optimizers over sgrad's C optimizers (include/sgrad.h, section "optimizers"), with
PyTorch's interface: ``param_groups``, ``zero_grad()``, ``step()``, ``state_dict()`` /
``load_state_dict()``, and learning-rate schedulers in ``sgrad.optim.lr_scheduler``.

A PyTorch training loop runs as it is::

    opt = sgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches:
        opt.zero_grad()          # also frees the last step's tape (see zero_grad)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

Where sgrad differs from PyTorch:

- The tape. Every op's output (a "step tensor": ``loss``, activations) and every gradient
  lives on the Context's tape until ``ctx.tape_reset()``, which frees them all at once.
  ``zero_grad()`` resets the tape when that cannot destroy anything still needed (no op
  ran since this optimizer's last ``step()`` and no other leaf holds a gradient), so read
  what you need (``loss.item()``) before it; ``zero_grad(reset_tape=False)`` keeps the
  tape, ``ctx.tape_reset()`` frees it by hand.
- Sparse gradients. A step visits only the parameters that got a gradient, and for a
  sparse (COO) gradient only the rows it names. SGD with momentum or weight decay is
  "exact lazy": a row it skips (a zero gradient still moves it) catches up, exactly, when
  an op next reads it, a step touches it, or at ``flush()``; reading the array directly
  (``W.numpy()``) sees such rows as last brought up to date: ``flush()`` first.
  ``LazyAdam`` counts steps per row (PyTorch's SparseAdam per parameter).
- Hyperparameters other than ``lr`` are fixed when a group is made (each parameter group
  is one C optimizer); changing one in ``param_groups`` raises ValueError at the next
  step.
- ``state_dict()`` returns copies (a snapshot), not references to the live state.
"""
import copy
import ctypes
import math
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from .. import _lib
from .._args import NP_OF
from .._lib import lib
from ..errors import ArgumentError, StaleTensorError, _raise
from ..tensor import Tensor

__all__ = ["Optimizer", "SGD", "Adagrad", "RowWiseAdagrad", "Adam", "AdamW", "LazyAdam",
           "lr_scheduler"]

ParamsT = Union[Iterable[Tensor], Iterable[Dict[str, Any]]]

_CTYPE_OF = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double,
             np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64}
# exact lazy SGD's bookkeeping in a state_dict, besides the C state tensors
_LAZY_KEYS = ("lr_run_start", "lr_run_lr", "lagging_rows", "lagging_param")


def _c_view(ptr: int) -> np.ndarray:
    """A writeable numpy view of a dense C tensor's data (valid while the tensor lives)."""
    dtype = NP_OF[lib.sg_tensor_dtype(ptr)]
    n = lib.sg_tensor_ndim(ptr)
    s = lib.sg_tensor_shape(ptr)
    shape = tuple(s[i] for i in range(n))
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    cp = ctypes.cast(lib.sg_tensor_data(ptr), ctypes.POINTER(_CTYPE_OF[dtype]))
    return np.ctypeslib.as_array(cp, shape=(count,)).reshape(shape)


def _check_lr(lr: Any, what: str) -> float:
    """lr as a float, or ArgumentError (a ValueError) unless it is a finite number >= 0."""
    if isinstance(lr, bool) or not isinstance(lr, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"{what}: a learning rate must be a number, not {lr!r}", 7)
    lr = float(lr)
    if not math.isfinite(lr) or lr < 0:
        raise ArgumentError(f"{what}: learning rate {lr!r} must be finite and >= 0", 7)
    return lr


def _same(a: Any, b: Any) -> bool:
    """Hyperparameter equality that takes a list for a tuple (betas)."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


class _Group:
    """The C side of one parameter group: its sg_optim, its parameters, the options fixed
    at construction and the learning rate last handed to C."""
    __slots__ = ("ptr", "params", "fixed", "lr")

    def __init__(self, ptr: int, params: List[Tensor], fixed: Dict[str, Any], lr: float) -> None:
        self.ptr = ptr
        self.params = params
        self.fixed = fixed
        self.lr = lr


class _StateView(Mapping):
    """``opt.state``: ``opt.state[param]`` (as PyTorch) or ``opt.state(param)`` (sgrad's
    older spelling) gives param's state tensors by name as numpy copies (sg_optim_state);
    iterating gives the parameters."""

    def __init__(self, opt: "Optimizer") -> None:
        self._opt = opt

    def __call__(self, param: Tensor) -> Dict[str, np.ndarray]:
        return self[param]

    def __getitem__(self, param: Tensor) -> Dict[str, np.ndarray]:
        g = self._opt._group_of(param)
        if g is None:
            raise KeyError("not a parameter of this optimizer")
        return {name: a.copy() for name, a in _state_views(g.ptr, param._h()).items()}

    def __iter__(self) -> Iterator[Tensor]:
        for g in self._opt._groups:
            yield from g.params

    def __len__(self) -> int:
        return sum(len(g.params) for g in self._opt._groups)


def _state_views(h: int, ph: int) -> Dict[str, np.ndarray]:
    """{name: writeable view} of the C state tensors of parameter ph in optimizer h."""
    out = {}
    for i in range(lib.sg_optim_state_count(h, ph)):
        name = ctypes.c_char_p()
        p = lib.sg_optim_state(h, ph, i, ctypes.byref(name))
        out[name.value.decode()] = _c_view(p)
    return out


class Optimizer:
    """The base of sgrad's optimizers: ``param_groups`` (a list of dicts, PyTorch's layout:
    ``"params"``, ``"lr"`` and the kind's other hyperparameters), ``step()``,
    ``zero_grad()``, ``state``, ``state_dict()``/``load_state_dict()``,
    ``add_param_group()``, and sgrad's ``flush()``, ``check_finite()``, ``lr``,
    ``steps``.

    Each parameter group is one C optimizer (sg_optim) made with the group's
    hyperparameters; ``step()`` steps them in order. Only ``"lr"`` can change afterwards
    (``opt.param_groups[i]["lr"] = x``, a scheduler, or ``opt.lr = x`` for every group): it
    takes effect at the next step (and the next fused update). Parameters must be dense
    float32/float64 persistent Tensors of one Context, each in one group of one optimizer
    (else ValueError / TypeError). The optimizer keeps its parameters and their Context
    alive."""

    _KIND = ""  # the C optimizer's name (sg_optim's "sgd", "adam", ...)

    def __init__(self, params: ParamsT, defaults: Dict[str, Any]) -> None:
        self.defaults: Dict[str, Any] = dict(defaults)
        self.param_groups: List[Dict[str, Any]] = []
        self._groups: List[_Group] = []
        self._ctx = None
        self._step_count = 0   # Python step() calls (the schedulers' ordering check)
        self._mark: Optional[Tuple[int, int, int]] = None  # tape after the last step()
        self._declined: Optional[int] = None  # generation of zero_grad's last kept tape
        self._warned_tape = False
        if isinstance(params, Tensor):
            raise TypeError("optimizer params must be an iterable of Tensors or of dicts, "
                            "not a Tensor")
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for g in groups:
            self.add_param_group(g)

    # -- construction
    def _make(self, ctx_ptr: int, hyper: Dict[str, Any]) -> int:
        raise NotImplementedError

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """Adds a group ({"params": Tensors, and any hyperparameter to override the
        defaults}) as a new C optimizer whose step count starts at the optimizer's.
        TypeError for a non-Tensor parameter; ValueError for an empty group, a parameter
        already in a group, parameters of another Context, or a missing lr; ArgumentError
        (a ValueError) for a hyperparameter out of range."""
        if not isinstance(param_group, dict):
            raise TypeError(f"a param group must be a dict, not {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError("a param group needs a 'params' entry")
        ps = param_group["params"]
        ps = [ps] if isinstance(ps, Tensor) else list(ps)
        if not ps:
            raise ValueError("optimizer got an empty parameter list")
        for p in ps:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer parameters must be sgrad Tensors, not "
                                + type(p).__name__)
            p._h()
        ctx = self._ctx or ps[0]._ctx
        if any(p._ctx is not ctx for p in ps):
            raise ValueError("optimizer parameters must all belong to one Context")
        seen = {id(p) for g in self._groups for p in g.params}
        if len({id(p) for p in ps}) != len(ps) or any(id(p) in seen for p in ps):
            raise ValueError("some parameters appear in more than one parameter group")
        hyper = {}
        for k, v in self.defaults.items():
            hyper[k] = param_group.get(k, v)
        if hyper.get("lr") is None:
            raise ValueError(f"{type(self).__name__}: lr is required (no default), for the "
                             "optimizer or in every param group")
        hyper["lr"] = _check_lr(hyper["lr"], f"{type(self).__name__}: lr")
        if "betas" in hyper:
            hyper["betas"] = tuple(float(b) for b in hyper["betas"])
        ptr = self._make(ctx._handle(), hyper)
        if not ptr:
            _raise(ctx._ptr, type(self).__name__)
        try:
            for p in ps:
                rc = lib.sg_optim_add_param(ptr, p._h())
                if rc:
                    _raise(ctx._ptr, "add_param", rc)
            if self._groups:
                rc = lib.sg_optim_set_steps(ptr, lib.sg_optim_steps(self._groups[0].ptr))
                if rc:
                    _raise(ctx._ptr, "add_param_group", rc)
        except BaseException:
            lib.sg_optim_free(ptr)
            raise
        self._ctx = ctx
        d = dict(param_group)
        d.update(hyper)
        d["params"] = ps
        self.param_groups.append(d)
        self._groups.append(_Group(ptr, ps, {k: v for k, v in hyper.items() if k != "lr"},
                                   hyper["lr"]))

    # -- handles
    @property
    def params(self) -> List[Tensor]:
        """Every parameter, in group order."""
        return [p for g in self._groups for p in g.params]

    def _alive(self) -> None:
        if not self._groups or not self._ctx._ptr or not self._groups[0].ptr:
            raise StaleTensorError("optimizer used after its Context was closed")

    def _h(self) -> int:
        """The C optimizer of a single-group optimizer (for save_checkpoint and fused
        ops), its learning rate synced. ValueError with several groups."""
        self._alive()
        if len(self._groups) != 1:
            raise ValueError(f"this optimizer has {len(self._groups)} param groups, each its "
                             "own C optimizer; save_checkpoint and fused= take an optimizer "
                             "with one group (use state_dict() for several groups)")
        self._sync()
        return self._groups[0].ptr

    def _h_for(self, param: Tensor) -> int:
        """The C optimizer of the group holding param (synced); ValueError if none does."""
        self._alive()
        g = self._group_of(param)
        if g is None:
            raise ValueError("the tensor is not a parameter of this optimizer")
        self._sync()
        return g.ptr

    def _group_of(self, param: Tensor) -> Optional[_Group]:
        self._alive()
        ph = param._h()
        for g in self._groups:
            if lib.sg_optim_state_count(g.ptr, ph) > 0:
                return g
        return None

    def _check(self, rc: int, what: str) -> None:
        if rc:
            _raise(self._ctx._ptr, what, rc)

    def _sync(self) -> None:
        """Hands changed learning rates in param_groups to C; ValueError for a changed
        fixed hyperparameter, ArgumentError for a bad lr (checked for every group before
        any is set)."""
        if len(self.param_groups) != len(self._groups):
            raise ValueError(f"param_groups has {len(self.param_groups)} groups, the optimizer "
                             f"made {len(self._groups)}: add groups with add_param_group()")
        todo = []
        for i, (g, d) in enumerate(zip(self._groups, self.param_groups)):
            lr = d.get("lr")
            if lr is not g.lr and not (type(lr) is float and lr == g.lr):
                todo.append((g, _check_lr(lr, f"param_groups[{i}]['lr']")))
            for k, v in g.fixed.items():
                if k not in d or not _same(d[k], v):
                    raise ValueError(
                        f"param_groups[{i}][{k!r}] changed to {d.get(k, '<missing>')!r} "
                        f"from {v!r}: sgrad fixes it when the group is made (each group is "
                        "a C optimizer); only 'lr' can change (make a new optimizer)")
        for g, lr in todo:
            self._check(lib.sg_optim_set_lr(g.ptr, lr), "lr")
            g.lr = lr
        for g, d in zip(self._groups, self.param_groups):
            d["lr"] = g.lr  # the float handed to C (an int lr becomes a float)

    def _pull_lr(self) -> None:
        """Takes each group's lr from its C optimizer, after a C call that set it
        (load_checkpoint restores the saved rate)."""
        self._alive()
        for g, d in zip(self._groups, self.param_groups):
            g.lr = d["lr"] = lib.sg_optim_lr(g.ptr)

    # -- stepping
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """One step of every group over the context's gradient store (sg_optim_step):
        the parameters that got a gradient since the last tape reset (or zero_grad) move,
        with each group's current lr. closure (optional, PyTorch's): called first, its
        result returned. InvalidValueError under check_finite() for a gradient holding
        NaN/Inf (that group and the later ones do not step)."""
        loss = closure() if closure is not None else None
        self._alive()
        self._sync()
        for g in self._groups:
            self._check(lib.sg_optim_step(g.ptr), "step")
        self._step_count += 1
        ctx = self._ctx
        self._mark = (ctx._generation, lib.sg_tape_nodes(ctx._ptr),
                      len(getattr(ctx, "_step_refs", ())))
        return loss

    def zero_grad(self, set_to_none: bool = True, reset_tape: Optional[bool] = None) -> bool:
        """Clears the gradients of this optimizer's parameters (sg_optim_zero_grad): each
        ``p.grad`` is None afterwards and the next backward starts from zero; other leaves
        keep theirs. sgrad has no zero-filled gradients, so ``set_to_none`` (PyTorch's) has
        no effect: both give None.

        The tape (sgrad only; PyTorch has none): every op output and gradient of the
        Context lives on it until ``ctx.tape_reset()``, which frees them at once; a loop
        that never resets grows without bound. ``reset_tape``:

        - None (default): reset when it is safe, i.e. no op ran since this optimizer's
          last ``step()`` (a forward whose backward is still to come, as in ``loss =
          f(x); opt.zero_grad(); loss.backward()``, is kept) and no other leaf holds a
          gradient (another optimizer's parameters that have not been cleared yet).
          Otherwise only the gradients are cleared, and if that happens twice without a
          reset in between a UserWarning says why. So the usual loops, ``zero_grad()``
          first or right after ``step()``, free each step's memory; but step tensors of
          the step die with it: read ``loss.item()`` before ``zero_grad()``, or a
          StaleTensorError says the tensor is gone.
        - True: always ``ctx.tape_reset()`` (every gradient of the Context goes).
        - False: never; the tape is kept until ``ctx.tape_reset()``.

        Returns whether the tape was reset."""
        self._alive()
        for g in self._groups:
            self._check(lib.sg_optim_zero_grad(g.ptr), "zero_grad")
        ctx = self._ctx
        if reset_tape is False:
            return False
        if reset_tape is None:
            why = self._keep_tape_reason()
            if why:
                if self._declined == ctx._generation and not self._warned_tape:
                    self._warned_tape = True
                    warnings.warn(
                        f"sgrad: zero_grad() kept the tape twice without a reset in between "
                        f"({why}), so the tape's memory grows; call zero_grad() right after "
                        "step() or before the forward, or ctx.tape_reset() yourself (see "
                        "sgrad.optim.Optimizer.zero_grad)", UserWarning, stacklevel=2)
                self._declined = ctx._generation
                return False
        ctx.tape_reset()
        return True

    def _keep_tape_reason(self) -> Optional[str]:
        """Why a reset now could destroy something still needed, or None."""
        ctx = self._ctx
        nodes = lib.sg_tape_nodes(ctx._ptr)
        refs = len(getattr(ctx, "_step_refs", ()))
        mark = self._mark
        since = (mark[1], mark[2]) if mark and mark[0] == ctx._generation else (0, 0)
        if (nodes, refs) != since:
            return "ops ran since this optimizer's last step(): a forward awaiting its backward?"
        for i in range(lib.sg_grads_count(ctx._ptr)):
            if lib.sg_tensor_grad(lib.sg_grads_param(ctx._ptr, i)):
                return ("other leaves hold gradients: another optimizer's parameters not "
                        "cleared yet, or inputs that require grad")
        return None

    def flush(self) -> None:
        """Brings every row of every parameter up to date (exact lazy SGD; a no-op for
        the other kinds). Needed before reading a lazily updated parameter's array
        directly; ops that read rows bring them up to date themselves."""
        self._alive()
        for g in self._groups:
            self._check(lib.sg_optim_flush(g.ptr), "flush")

    def check_finite(self, on: bool = True) -> None:
        """The NaN/Inf guard: while on, a step (or fused update) applying a non-finite
        gradient raises InvalidValueError (a ValueError) and changes nothing in the group
        concerned."""
        self._alive()
        for g in self._groups:
            self._check(lib.sg_optim_set_check_finite(g.ptr, 1 if on else 0), "check_finite")

    @property
    def lr(self) -> float:
        """The learning rate the next step uses (sg_optim_lr); ValueError when the groups
        have different ones (read ``param_groups[i]["lr"]``). Setting it sets every
        group's."""
        self._alive()
        self._sync()
        lrs = {g.lr for g in self._groups}
        if len(lrs) != 1:
            raise ValueError("the param groups have different learning rates; read "
                             "param_groups[i]['lr']")
        return lib.sg_optim_lr(self._groups[0].ptr)

    @lr.setter
    def lr(self, value: float) -> None:
        value = _check_lr(value, "lr")
        for d in self.param_groups:
            d["lr"] = value
        self._sync()

    @property
    def steps(self) -> int:
        """Steps taken (sg_optim_steps): step() calls, restored by load_state_dict."""
        self._alive()
        return lib.sg_optim_steps(self._groups[0].ptr)

    @property
    def state(self) -> _StateView:
        """Per-parameter state: ``opt.state[p]`` or ``opt.state(p)`` is
        {name: numpy copy}. Names: SGD "momentum_buffer" (with momentum) and "last_step"
        (int64 per row, with momentum or weight decay: the parameter step each row was
        last brought to); Adagrad "sum"; RowWiseAdagrad "sum" (one per row); Adam
        "exp_avg", "exp_avg_sq"; LazyAdam the same and "row_step" (int64 per row); every
        kind "step" (int64, 0-d: the parameter's steps). Rows of exact lazy SGD that are
        behind hold their values as of "last_step"."""
        return _StateView(self)

    # -- state_dict
    def state_dict(self) -> Dict[str, Any]:
        """The optimizer's state as numpy arrays (copies), in PyTorch's layout::

            {"state": {i: {name: array, ..., "step": 0-d int64}, ...},
             "param_groups": [{"lr": ..., <hyperparameters>, "params": [i, ...]}, ...],
             "optimizer": "sgd" | "adagrad" | "rowwise_adagrad" | "adam" | "lazy_adam",
             "steps": int}

        with parameters numbered across groups in order. The names are those of
        ``state``; exact lazy SGD adds its bookkeeping, so that a load resumes bitwise:
        "lr_run_start" (int64) / "lr_run_lr" (float64), the learning rates of the steps
        its rows behind still have to catch up on (runs starting at those parameter
        steps), and "lagging_rows" (int64) / "lagging_param" (rows, *shape[1:]), those
        rows of the parameter as last brought up to date. The arrays hold the exact
        internal state, not a flushed one: nothing is changed, so a run that saves goes on
        bitwise as one that does not. Picklable (np.savez needs it flattened)."""
        self._alive()
        self._sync()
        state: Dict[int, Dict[str, np.ndarray]] = {}
        groups = []
        i = 0
        for g, d in zip(self._groups, self.param_groups):
            ids = []
            for p in g.params:
                state[i] = self._param_state(g, p)
                ids.append(i)
                i += 1
            gd = {k: copy.deepcopy(v) for k, v in d.items() if k != "params"}
            gd["params"] = ids
            groups.append(gd)
        return {"state": state, "param_groups": groups, "optimizer": self._KIND,
                "steps": self.steps}

    def _param_state(self, g: _Group, p: Tensor) -> Dict[str, np.ndarray]:
        ph = p._h()
        out = {k: v.copy() for k, v in _state_views(g.ptr, ph).items()}
        if "last_step" in out:  # exact lazy SGD
            n = lib.sg_optim_lr_runs(g.ptr, ph, None, None, 0)
            if n < 0:
                _raise(self._ctx._ptr, "state_dict")
            start, lrs = np.zeros(n, np.int64), np.zeros(n, np.float64)
            if n:
                lib.sg_optim_lr_runs(g.ptr, ph, start.ctypes.data_as(_lib.I64P),
                                     lrs.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), n)
            rows = np.flatnonzero(out["last_step"] < out["step"]).astype(np.int64)
            w = _c_view(ph)
            out["lr_run_start"], out["lr_run_lr"] = start, lrs
            out["lagging_rows"] = rows
            out["lagging_param"] = _rows_of(w)[rows].reshape((len(rows),) + w.shape[1:])
        return out

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restores a state_dict() of an optimizer of the same kind, options and
        parameter shapes: the state tensors, each group's lr (and its other non-fixed
        entries, such as a scheduler's "initial_lr") and the step count. Everything is
        checked before anything changes: ValueError naming the key for another kind
        ("optimizer"), another number of groups or parameters, a fixed hyperparameter
        that differs, a missing or foreign state name, a shape that differs, or values out
        of range; float state is cast to the parameter's dtype (as PyTorch does).

        Exact lazy SGD: the rows behind ("lagging_rows") are also written into the
        parameters, as saved. Load the parameters first (model.load_state_dict), then the
        optimizer: the result is then bitwise the saved run's whether the parameters were
        copied before or after a flush() of the source."""
        self._alive()
        if not isinstance(state_dict, dict):
            raise TypeError("load_state_dict needs a dict (from state_dict())")
        for key in ("state", "param_groups"):
            if key not in state_dict:
                raise ValueError(f"state_dict has no {key!r}")
        kind = state_dict.get("optimizer")
        if kind is not None and kind != self._KIND:
            raise ValueError(f"state_dict['optimizer'] is {kind!r}; this optimizer is "
                             f"{self._KIND!r} ({type(self).__name__})")
        saved, states = state_dict["param_groups"], state_dict["state"]
        if not isinstance(states, dict) or not isinstance(saved, (list, tuple)):
            raise ValueError("state_dict['state'] must be a dict and state_dict['param_groups'] "
                             "a list")
        if len(saved) != len(self._groups):
            raise ValueError(f"state_dict['param_groups'] has {len(saved)} groups, the "
                             f"optimizer {len(self._groups)}")
        self._sync()
        steps = state_dict.get("steps")
        if steps is not None:
            if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
                raise ValueError(f"state_dict['steps'] is {steps!r}: an integer >= 0 expected")
        plans, updates = [], []
        for gi, (sg, g) in enumerate(zip(saved, self._groups)):
            where = f"state_dict['param_groups'][{gi}]"
            if not isinstance(sg, dict) or "params" not in sg:
                raise ValueError(f"{where} has no 'params'")
            ids = list(sg["params"])
            if len(ids) != len(g.params):
                raise ValueError(f"{where}['params'] lists {len(ids)} parameters, the "
                                 f"optimizer's group {gi} has {len(g.params)}")
            for k, v in g.fixed.items():
                if k in sg and not _same(sg[k], v):
                    raise ValueError(f"{where}[{k!r}] is {sg[k]!r}, the optimizer's {v!r} "
                                     "(fixed when the optimizer is made)")
            lr = _check_lr(sg.get("lr", g.lr), f"{where}['lr']")
            extra = {k: copy.deepcopy(v) for k, v in sg.items()
                     if k not in ("params", "lr") and k not in g.fixed}
            updates.append((g, lr, extra))
            for pid, p in zip(ids, g.params):
                st = states.get(pid, states.get(str(pid)))
                if st is None:
                    raise ValueError(f"state_dict['state'] has no entry for parameter {pid}")
                plans.append((g, p, self._checked_state(g, p, st, f"state_dict['state'][{pid}]")))
        if steps is None:
            steps = max([int(a["step"]) for _, _, a in plans] + [0])
        # ---- commit: nothing below can fail on valid handles
        for g, p, arrays in plans:
            self._write_state(g, p, arrays)
        for (g, lr, extra), d in zip(updates, self.param_groups):
            d.update(extra)
            d["lr"] = lr
            self._check(lib.sg_optim_set_steps(g.ptr, int(steps)), "load_state_dict")
        self._sync()

    def _checked_state(self, g: _Group, p: Tensor, st: Any, where: str) -> Dict[str, np.ndarray]:
        """st validated against p's state in g, as contiguous arrays of the right dtypes."""
        if not isinstance(st, dict):
            raise ValueError(f"{where} is not a dict of arrays")
        ph = p._h()
        views = _state_views(g.ptr, ph)
        lazy = "last_step" in views
        expected = list(views) + (list(_LAZY_KEYS) if lazy else [])
        for k in st:
            if k not in expected:
                raise ValueError(f"{where}[{k!r}] is not state of this {type(self).__name__} "
                                 f"(its names: {expected})")
        for k in expected:
            if k not in st:
                raise ValueError(f"{where} has no {k!r} (a state of another optimizer or "
                                 "other options?)")
        out = {}
        for k, v in views.items():
            out[k] = _array_like(st[k], v.dtype, v.shape, f"{where}[{k!r}]")
        step = int(out["step"])
        if step < 0:
            raise ValueError(f"{where}['step'] is {step}: >= 0 expected")
        for k in ("last_step", "row_step"):
            if k in out:
                bad = np.flatnonzero((out[k] < 0) | (out[k] > step))
                if len(bad):
                    raise ValueError(f"{where}[{k!r}][{bad[0]}] is {out[k][bad[0]]}, outside "
                                     f"[0, step {step}]")
        if lazy:
            start = _array_like(st["lr_run_start"], np.int64, None, f"{where}['lr_run_start']")
            lrs = _array_like(st["lr_run_lr"], np.float64, None, f"{where}['lr_run_lr']")
            if start.ndim != 1 or lrs.shape != start.shape:
                raise ValueError(f"{where}['lr_run_start'] and ['lr_run_lr'] must be 1-D of "
                                 "one length")
            if len(start) and (start[0] < 1 or np.any(np.diff(start) <= 0)):
                raise ValueError(f"{where}['lr_run_start'] must ascend strictly from >= 1")
            if not np.all(np.isfinite(lrs)) or np.any(lrs < 0):
                raise ValueError(f"{where}['lr_run_lr'] must be finite and >= 0")
            rows = np.flatnonzero(out["last_step"] < step)
            saved_rows = _array_like(st["lagging_rows"], np.int64, None,
                                     f"{where}['lagging_rows']")
            if saved_rows.shape != rows.shape or np.any(saved_rows != rows):
                raise ValueError(f"{where}['lagging_rows'] must list the rows whose "
                                 "last_step is below step, ascending")
            if len(rows) and not len(start):
                raise ValueError(f"{where}['lr_run_start'] is empty while rows are behind")
            shape = tuple(p.shape)
            out["lagging_param"] = _array_like(st["lagging_param"], p.dtype,
                                               (len(rows),) + shape[1:],
                                               f"{where}['lagging_param']")
            out["lagging_rows"], out["lr_run_start"], out["lr_run_lr"] = rows, start, lrs
        return out

    def _write_state(self, g: _Group, p: Tensor, arrays: Dict[str, np.ndarray]) -> None:
        ph = p._h()
        for k, v in _state_views(g.ptr, ph).items():
            v[...] = arrays[k]
        if "lr_run_start" in arrays:
            rows = arrays["lagging_rows"]
            if len(rows):
                w = _rows_of(_c_view(ph))
                w[rows] = arrays["lagging_param"].reshape(len(rows), -1)
            start, lrs = arrays["lr_run_start"], arrays["lr_run_lr"]
            self._check(lib.sg_optim_set_lr_runs(
                g.ptr, ph, start.ctypes.data_as(_lib.I64P),
                lrs.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), len(start)),
                "load_state_dict")

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, d in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(d):
                if k != "params":
                    lines.append(f"    {k}: {d[k]}")
        return "\n".join(lines) + "\n)"

    def __del__(self) -> None:
        try:
            if self._ctx is not None and self._ctx._ptr:
                for g in self._groups:
                    if g.ptr:
                        lib.sg_optim_free(g.ptr)
                    g.ptr = None
        except Exception:
            pass


def _rows_of(a: np.ndarray) -> np.ndarray:
    """a (a parameter's array) viewed as (rows, width): rows = shape[0], or 1 for 0-d."""
    return a.reshape((a.shape[0] if a.ndim else 1, -1))


def _array_like(v: Any, dtype, shape: Optional[tuple], where: str) -> np.ndarray:
    """v as a contiguous array of dtype (and shape); ValueError naming where otherwise.
    Integer state needs integers; float state takes any real numbers (cast)."""
    a = np.asarray(v)
    dtype = np.dtype(dtype)
    if shape is not None and a.shape != tuple(shape):
        raise ValueError(f"{where} has shape {a.shape}, the optimizer's is {tuple(shape)}")
    if dtype.kind in "iu" and a.dtype.kind not in "iu" and a.size:
        raise ValueError(f"{where} holds {a.dtype}; integers expected")
    if dtype.kind == "f" and a.dtype.kind not in "fiu":
        raise ValueError(f"{where} holds {a.dtype}; real numbers expected")
    return np.ascontiguousarray(a, dtype=dtype)


class SGD(Optimizer):
    """torch.optim.SGD (PyTorch's arguments and order; see sg_sgd_opts): with momentum
    ``v = g`` at a parameter's first step, then ``v = momentum v + (1 - dampening) g``;
    ``g += weight_decay w`` first; ``w -= lr (g + momentum v if nesterov else v)``.
    lr has no default: give it here or in every param group.

    Differs from PyTorch on sparse gradients only in cost: with momentum or weight decay
    it is exact lazy (rows a step skips catch up exactly when next read, touched or
    flushed; see the module's docstring), so it equals dense SGD to rounding."""

    _KIND = "sgd"

    def __init__(self, params: ParamsT, lr: Optional[float] = None, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def _make(self, ctx_ptr: int, h: Dict[str, Any]) -> int:
        o = _lib.SgdOpts(h["lr"], h["momentum"], h["dampening"], h["weight_decay"],
                         1 if h["nesterov"] else 0)
        return lib.sg_optim_sgd(ctx_ptr, ctypes.byref(o))


class _AdagradBase(Optimizer):
    def __init__(self, params: ParamsT, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10) -> None:
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps))

    def _make(self, ctx_ptr: int, h: Dict[str, Any]) -> int:
        o = _lib.AdagradOpts(h["lr"], h["lr_decay"], h["weight_decay"],
                             h["initial_accumulator_value"], h["eps"])
        make = lib.sg_optim_rowwise_adagrad if self._KIND == "rowwise_adagrad" \
            else lib.sg_optim_adagrad
        return make(ctx_ptr, ctypes.byref(o))


class Adagrad(_AdagradBase):
    """torch.optim.Adagrad (same arguments): clr = lr / (1 + (step - 1) lr_decay);
    sum += g^2; w -= clr g / (sqrt(sum) + eps). With a sparse gradient the rows it does
    not name stay as they are (as PyTorch's sparse Adagrad); weight decay applies to the
    rows named only."""

    _KIND = "adagrad"


class RowWiseAdagrad(_AdagradBase):
    """Adagrad with one accumulator per row (table-batched embedding trainers; not in
    PyTorch): acc[r] += mean(g[r]^2); w[r] -= clr g[r] / (sqrt(acc[r]) + eps). State
    "sum" has one float per row."""

    _KIND = "rowwise_adagrad"


class Adam(Optimizer):
    """torch.optim.Adam (decoupled=True: torch.optim.AdamW's weight decay). A sparse
    gradient is densified and every element steps, as in dense Adam (see LazyAdam for
    the O(rows touched) variant). No amsgrad."""

    _KIND = "adam"

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, *, decoupled: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled=decoupled))

    def _make(self, ctx_ptr: int, h: Dict[str, Any]) -> int:
        b1, b2 = h["betas"]
        o = _lib.AdamOpts(h["lr"], b1, b2, h["eps"], h["weight_decay"],
                          1 if h["decoupled"] else 0)
        return lib.sg_optim_adam(ctx_ptr, ctypes.byref(o))


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (w *= 1 - lr weight_decay),
    weight_decay 1e-2 by default. The same C optimizer as Adam(decoupled=True); its
    state_dict loads into either."""

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, decoupled=True)


class LazyAdam(Adam):
    """Adam on the rows a sparse gradient names only, each row counting its own steps
    (state "row_step") for its bias correction. torch.optim.SparseAdam uses the
    parameter's step count for every row instead, so the two agree only while every row
    is touched at every step (see sg_optim_lazy_adam in include/sgrad.h for the size of
    the difference). With a dense gradient it equals Adam."""

    _KIND = "lazy_adam"

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        Optimizer.__init__(self, params, dict(lr=lr, betas=betas, eps=eps,
                                              weight_decay=weight_decay))

    def _make(self, ctx_ptr: int, h: Dict[str, Any]) -> int:
        b1, b2 = h["betas"]
        o = _lib.AdamOpts(h["lr"], b1, b2, h["eps"], h["weight_decay"], 0)
        return lib.sg_optim_lazy_adam(ctx_ptr, ctypes.byref(o))


from . import lr_scheduler  # noqa: E402  (schedulers need Optimizer)
