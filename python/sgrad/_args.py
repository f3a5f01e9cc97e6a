"""Argument conversion shared by the package: numpy dtypes to the C library's and back,
integers checked to fit the C type they are passed as, shapes, C strings."""
import ctypes
import operator

import numpy as np

from .errors import DtypeError

F32, F64, I32, I64 = 0, 1, 2, 3
NP_OF = {F32: np.dtype(np.float32), F64: np.dtype(np.float64), I32: np.dtype(np.int32),
         I64: np.dtype(np.int64)}
SG_OF = {v: k for k, v in NP_OF.items()}
DENSE, COO = 0, 1


def supported_dtype(dtype) -> np.dtype:
    """The tensor dtype for numpy ``dtype``: float32, float64, int32 and int64 as they are,
    in native byte order, other integers as int64 (indices may come in any integer type). float16, bfloat16,
    bool, complex and object arrays raise DtypeError: a silent copy to float64 would
    change their meaning or double their memory."""
    d = np.dtype(dtype).newbyteorder("=")  # a byte-swapped array is copied to native order
    if d in SG_OF:
        return d
    if d.kind in "iu":
        return np.dtype(np.int64)
    raise DtypeError(f"sgrad has no tensor dtype for numpy {d} (float32, float64, int32, "
                     "int64; convert with .astype first)", 4)


def as_supported(a: np.ndarray, dtype=None) -> np.ndarray:
    """``a`` in its supported dtype (or ``dtype``'s), copied only when that differs."""
    return a.astype(supported_dtype(dtype if dtype is not None else a.dtype), copy=False)


def int_arg(x, what: str, bits: int = 64, unsigned: bool = False) -> int:
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


def shape_arg(shape, what: str = "shape") -> "ctypes.Array[ctypes.c_int64]":
    """A C array of int64 dims, each checked by int_arg."""
    return (ctypes.c_int64 * max(len(shape), 1))(*[int_arg(d, what) for d in shape])


def c_string(b: bytes, what: str) -> bytes:
    """Encoded text b for a C string parameter; ValueError when it holds a NUL byte, where C
    would end the string (and silently use what comes before, as Python's open() refuses)."""
    if b"\0" in b:
        raise ValueError(f"{what}: {b!r} holds a NUL character")
    return b
