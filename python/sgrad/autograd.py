"""Gradient utilities: clipping the gradient store by norm or value, and gradcheck."""
import ctypes
from typing import Callable, Optional, Sequence

from . import _lib
from ._lib import lib
from .context import Context, default_context
from .errors import Error, GradcheckError, _raise
from .tensor import Tensor, _ctx_of

__all__ = ["clip_grad_norm", "clip_grad_value", "gradcheck"]


def clip_grad_norm(max_norm: float, ctx: Optional[Context] = None) -> float:
    """Scales every gradient in ``ctx``'s gradient store (default: ``default_context()``),
    dense and COO, in place so that their global L2 norm is at most ``max_norm``
    (by max_norm / (norm + 1e-6) when over it), and returns the norm before clipping as a
    float (sg_clip_grad_norm). Where PyTorch's ``clip_grad_norm_`` takes the parameters,
    this clips every gradient of the Context, i.e. of the current step (call it between
    backward and the optimizer step). ArgumentError (a ValueError) for a negative or NaN
    max_norm, InvalidValueError (a ValueError, gradients unchanged) when the norm is not
    finite."""
    ctx = ctx or default_context()
    total = ctypes.c_double()
    rc = lib.sg_clip_grad_norm(ctx._handle(), float(max_norm), ctypes.byref(total))
    if rc:
        _raise(ctx._ptr, "clip_grad_norm", rc)
    return total.value


def clip_grad_value(clip: float, ctx: Optional[Context] = None) -> None:
    """Clamps every element of every gradient in ``ctx``'s gradient store (default:
    ``default_context()``), dense and COO (summed duplicates), to [-clip, clip] in place
    (sg_clip_grad_value). Where PyTorch's ``clip_grad_value_`` takes the parameters, this
    clips every gradient of the Context, i.e. of the current step (call it between backward
    and the optimizer step). ArgumentError (a ValueError) for a negative clip."""
    ctx = ctx or default_context()
    rc = lib.sg_clip_grad_value(ctx._handle(), float(clip))
    if rc:
        _raise(ctx._ptr, "clip_grad_value", rc)


def gradcheck(fn: Callable[..., Tensor], inputs: Sequence[Tensor], eps: float = 1e-6,
              atol: float = 1e-5, rtol: float = 1e-3, masked: bool = False,
              raise_exception: bool = True) -> bool:
    """Checks the gradients of ``fn(*inputs)`` (a function returning a Tensor) against
    central finite differences, as ``torch.autograd.gradcheck`` (sg_gradcheck): the
    Jacobian by backward must match the numerical one within ``atol + rtol * |numerical|``.
    ``inputs``: persistent float64 tensors (dense or COO) that require grad, all of one
    Context (else ArgumentError, a ValueError); ``masked``: for COO inputs, perturb only
    their stored entries (backward must then give 0 elsewhere). Returns True, or raises
    GradcheckError (an AssertionError) naming the worst mismatch (returns False instead
    with ``raise_exception=False``); an exception raised by ``fn`` propagates. Unlike
    PyTorch, it resets the tape: step tensors of the current step die and stored
    gradients are dropped."""
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

