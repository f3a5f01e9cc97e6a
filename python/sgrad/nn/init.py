"""Initialisers for parameters, drawn from the tensor's Context's random stream (so a model
built in a Context of a given seed starts from the same values every run)."""
import math

import numpy as np

from ..tensor import Tensor

__all__ = ["uniform_", "normal_", "zeros_", "ones_"]


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fills a dense float tensor with U[a, b) in place; returns it."""
    return t.uniform_(a, b)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fills a dense float tensor with N(mean, std^2) in place (Box-Muller over two uniform
    draws of the context's stream); returns it."""
    ctx, shape, dtype = t.ctx, t.shape, t.dtype
    u = ctx.zeros(shape, np.float64)
    v = ctx.zeros(shape, np.float64)
    u.uniform_(0.0, 1.0)
    v.uniform_(0.0, 1.0)
    r = np.sqrt(-2.0 * np.log1p(-u.numpy()))  # 1 - u lies in (0, 1]: the log is finite
    z = mean + std * r * np.cos(2.0 * math.pi * v.numpy())
    u.free()
    v.free()
    t.numpy()[...] = z.astype(dtype)
    return t


def zeros_(t: Tensor) -> Tensor:
    """Sets every element to 0 in place; returns the tensor."""
    return t.fill_(0.0)


def ones_(t: Tensor) -> Tensor:
    """Sets every element to 1 in place; returns the tensor."""
    return t.fill_(1.0)
