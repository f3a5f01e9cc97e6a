"""Optimizers over sgrad's C optimizers (include/sgrad.h, section "optimizers").

Usage as in C: ``loss.backward(); opt.step(); ctx.tape_reset()``. There is no zero_grad:
tape_reset clears every gradient. A step visits only the parameters that got a gradient
and, for a sparse gradient, only the rows it names (SGD with momentum or weight decay is
"exact lazy": skipped rows catch up when next touched, or at ``flush()``).
"""
import ctypes

from . import _lib
from .errors import StaleTensorError, _raise
from .tensor import Tensor
from ._lib import lib


class Optimizer:
    """Base: owns a C sg_optim; keeps its parameters (Tensors) and their Context alive."""

    def __init__(self, make, opts, params):
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        self._ctx = params[0]._ctx
        self._opts = opts
        self._ptr = make(self._ctx._handle(), ctypes.byref(opts))
        if not self._ptr:
            _raise(self._ctx._ptr, type(self).__name__)
        self.params = []
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer parameters must be sgrad Tensors")
            rc = lib.sg_optim_add_param(self._ptr, p._h())
            if rc:
                _raise(self._ctx._ptr, "add_param", rc)
            self.params.append(p)

    def _h(self):
        if not self._ptr or not self._ctx._ptr:
            raise StaleTensorError("optimizer used after its Context was closed")
        return self._ptr

    def _check(self, rc, what):
        if rc:
            _raise(self._ctx._ptr, what, rc)

    def step(self):
        """One step over the context's gradient store (sg_optim_step)."""
        self._check(lib.sg_optim_step(self._h()), "step")

    def flush(self):
        """Brings every row up to date (exact lazy SGD); a no-op for the others."""
        self._check(lib.sg_optim_flush(self._h()), "flush")

    def check_finite(self, on=True):
        """The NaN/Inf guard: a step applying a non-finite gradient raises InvalidValueError."""
        self._check(lib.sg_optim_set_check_finite(self._h(), 1 if on else 0), "check_finite")

    @property
    def lr(self):
        return lib.sg_optim_lr(self._h())

    @lr.setter
    def lr(self, value):
        self._check(lib.sg_optim_set_lr(self._h(), float(value)), "lr")

    @property
    def steps(self):
        return lib.sg_optim_steps(self._h())

    def state(self, param):
        """param's state tensors by name, as numpy copies (sg_optim_state)."""
        h, ph = self._h(), param._h()
        out = {}
        for i in range(lib.sg_optim_state_count(h, ph)):
            name = ctypes.c_char_p()
            p = lib.sg_optim_state(h, ph, i, ctypes.byref(name))
            t = Tensor(self._ctx, p, True, owner=self)
            out[name.value.decode()] = t._copy_out(p)
        return out

    def __del__(self):
        try:
            if self._ptr and self._ctx._ptr:
                lib.sg_optim_free(self._ptr)
            self._ptr = None
        except Exception:
            pass


class SGD(Optimizer):
    """torch.optim.SGD's update (see sg_sgd_opts); exact lazy for sparse gradients."""

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False,
                 dampening=0.0):
        super().__init__(lib.sg_optim_sgd, _lib.SgdOpts(lr, momentum, dampening, weight_decay,
                                                        1 if nesterov else 0), params)


def _adagrad_opts(lr, lr_decay, weight_decay, initial_accumulator_value, eps):
    return _lib.AdagradOpts(lr, lr_decay, weight_decay, initial_accumulator_value, eps)


class Adagrad(Optimizer):
    """torch.optim.Adagrad's update; untouched rows of a sparse gradient stay as they are."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10):
        super().__init__(lib.sg_optim_adagrad, _adagrad_opts(
            lr, lr_decay, weight_decay, initial_accumulator_value, eps), params)


class RowWiseAdagrad(Optimizer):
    """One accumulator per row: acc[r] += mean(g[r]^2); w[r] -= lr g / (sqrt(acc[r]) + eps)."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10):
        super().__init__(lib.sg_optim_rowwise_adagrad, _adagrad_opts(
            lr, lr_decay, weight_decay, initial_accumulator_value, eps), params)


def _adam_opts(lr, betas, eps, weight_decay, decoupled):
    return _lib.AdamOpts(lr, betas[0], betas[1], eps, weight_decay, 1 if decoupled else 0)


class Adam(Optimizer):
    """torch.optim.Adam (decoupled=True: AdamW); a sparse gradient is densified."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled=False):
        super().__init__(lib.sg_optim_adam, _adam_opts(lr, betas, eps, weight_decay,
                                                       decoupled), params)


class LazyAdam(Optimizer):
    """Adam on the rows a gradient names only, each row with its own step count for the
    bias correction. torch.optim.SparseAdam uses the parameter's step count for every row
    instead, so the two agree only while every row is touched at every step (see
    sg_optim_lazy_adam in include/sgrad.h for the size of the difference)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(lib.sg_optim_lazy_adam, _adam_opts(lr, betas, eps, weight_decay,
                                                            False), params)
