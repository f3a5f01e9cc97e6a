"""Errors: one exception class per failure kind, each also the builtin exception Python code
expects (``except ValueError`` catches a bad argument, ``except FileNotFoundError`` a missing
file).

- ``Error``: the base of every sgrad error; ``status`` is the C library's SG_ERR_* code.
- ``StaleTensorError``: a handle used after it died (a step tensor after ``tape_reset``, a
  freed tensor, anything of a closed Context).
- One class per SG_ERR_* code: ``OutOfMemoryError`` (MemoryError), ``NullError``,
  ``ShapeError``, ``ArgumentError``, ``InvalidValueError`` (ValueError), ``DtypeError``,
  ``LayoutError`` (TypeError), ``IndexRangeError`` (IndexError), ``StateError``,
  ``InputOutputError`` (RuntimeError), ``FormatError`` (ValueError: a damaged or foreign
  file), ``GradcheckError`` (AssertionError).
- A missing input file is the builtin ``FileNotFoundError`` everywhere, naming the path.
"""
import errno
import os
from typing import NoReturn, Optional

from ._lib import lib

__all__ = ["Error", "StaleTensorError", "OutOfMemoryError", "NullError", "ShapeError",
           "DtypeError", "LayoutError", "IndexRangeError", "ArgumentError",
           "InvalidValueError", "StateError", "InputOutputError", "FormatError",
           "GradcheckError"]

class Error(Exception):
    """A C call failed: ``status`` is the SG_ERR_* code, the text the library's message."""
    status: Optional[int] = None

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        if status is not None:
            self.status = status


class StaleTensorError(Error):
    """A handle used after it died: a step tensor after ``tape_reset``, a freed tensor, or
    any handle of a closed Context."""


# One class per SG_ERR_* code, in the order of SG_STATUS_LIST (include/sgrad.h).
class OutOfMemoryError(Error, MemoryError):
    """SG_ERR_NOMEM: an allocation failed; nothing was changed."""
    status = 1


class NullError(Error, ValueError):
    """SG_ERR_NULL: a required argument was missing."""
    status = 2


class ShapeError(Error, ValueError):
    """SG_ERR_SHAPE: shapes that do not fit the operation (the message gives both)."""
    status = 3


class DtypeError(Error, TypeError):
    """SG_ERR_DTYPE: a dtype the operation does not take; also raised for numpy dtypes
    sgrad has no tensor for (float16, bfloat16, bool, complex, object)."""
    status = 4


class LayoutError(Error, TypeError):
    """SG_ERR_LAYOUT: a COO tensor where a dense one is needed, or the reverse; also a
    non-contiguous buffer where no copy is allowed."""
    status = 5


class IndexRangeError(Error, IndexError):
    """SG_ERR_INDEX: an index out of range or negative, found before anything was written."""
    status = 6


class ArgumentError(Error, ValueError):
    """SG_ERR_ARG: a bad argument value (a dim out of range, a negative size, ...)."""
    status = 7


class InvalidValueError(Error, ValueError):
    """SG_ERR_VALUE: a value the operation refuses (NaN or Inf where it matters)."""
    status = 8


class StateError(Error, RuntimeError):
    """SG_ERR_STATE: a call out of order (a gradient after the tape was reset, ...)."""
    status = 9


class InputOutputError(Error, RuntimeError):
    """SG_ERR_IO: reading or writing a file failed (a missing input is FileNotFoundError)."""
    status = 10


class FormatError(Error, ValueError):
    """SG_ERR_FORMAT: a damaged or foreign file; the message names the file and the fault."""
    status = 11


class GradcheckError(Error, AssertionError):
    """SG_ERR_GRADCHECK: backward and finite differences disagree."""
    status = 12


_ERROR_OF = {c.status: c for c in (
    OutOfMemoryError, NullError, ShapeError, DtypeError, LayoutError, IndexRangeError,
    ArgumentError, InvalidValueError, StateError, InputOutputError, FormatError,
    GradcheckError)}


def _raise(ctxp, what: str, status: Optional[int] = None) -> NoReturn:
    """Raises the exception of ctxp's last error (or of ``status``), prefixed by ``what``."""
    if status is None:
        status = lib.sg_ctx_status(ctxp)
    msg = lib.sg_ctx_message(ctxp).decode(errors="replace")
    if status == 0:  # a NULL with no status: cannot happen for ops given valid handles
        status = 7
    raise _ERROR_OF.get(status, Error)(f"{what}: {msg}" if msg else what, status)


def check_input_file(path, what: str) -> str:
    """``path`` as a str, or FileNotFoundError naming it when there is no such file (the
    C library would report the same as an I/O error; Python code expects this one);
    ValueError for a path holding a NUL character, as Python's open()."""
    p = os.fspath(path)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if "\0" in p:
        raise ValueError(f"{what}: {p!r} holds a NUL character")
    if not os.path.exists(p):
        raise FileNotFoundError(errno.ENOENT, f"{what}: no such file", p)
    return p
