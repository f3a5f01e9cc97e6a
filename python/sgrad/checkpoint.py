"""Checkpoints from Python over sg_checkpoint_save / _load / _read_meta (include/sgrad.h,
"io: checkpoints"): one safetensors file with the named tensors, an optimizer's state and
string metadata, written atomically. Tensors are given as {name: Tensor}; a load writes
into the tensors given (for a from_numpy tensor, into its numpy array) and restores the
optimizer and the Context's random generator, so a resumed run is bitwise the run that
did not stop (deterministic mode). Errors raise the sgrad.Error subclass of the C status
(a corrupt file: FormatError) with the library's message; on error nothing changes. A NUL
character in a path, a tensor name or the metadata raises ValueError (C would cut the
string there)."""
import ctypes
import os
from typing import TYPE_CHECKING, Dict, Optional, Union

from . import _lib
from ._args import c_string as _c_string
from .context import Context, default_context
from .errors import _raise, check_input_file
from .tensor import Tensor
from ._lib import lib

if TYPE_CHECKING:  # for the annotations only: sgrad.optim is not imported at run time
    from .optim import Optimizer

_Path = Union[str, bytes, "os.PathLike"]


def _named(tensors, optim, what):
    """(ctx, C handle array, C name array, keep-alive list) for {name: Tensor}."""
    if not isinstance(tensors, dict):
        raise TypeError(f"{what}: tensors must be a dict {{name: Tensor}}")
    for name, t in tensors.items():
        if not isinstance(name, str) or not isinstance(t, Tensor):
            raise TypeError(f"{what}: tensors must map str names to sgrad Tensors")
    ctx = (next(iter(tensors.values()))._ctx if tensors
           else optim._ctx if optim is not None else default_context())
    n = len(tensors)
    handles = (ctypes.c_void_p * max(n, 1))(*[t._h() for t in tensors.values()])
    names = (ctypes.c_char_p * max(n, 1))(*[_c_string(k.encode(), f"{what}: tensor name")
                                            for k in tensors])
    return ctx, handles, names, n


def _meta_dict(meta):
    return {meta.keys[i].decode(errors="replace"): meta.values[i].decode(errors="replace")
            for i in range(meta.n)}


def save_checkpoint(path: _Path, tensors: Dict[str, Tensor],
                    optim: Optional["Optimizer"] = None,
                    meta: Optional[Dict[str, str]] = None) -> None:
    """Writes ``tensors`` ({name: dense Tensor}, any dtype), ``optim``'s state (every
    parameter of optim must be among tensors), the Context's random generator state and
    ``meta`` ({str: str}; keys must not start with "sgrad.") to one safetensors file at
    ``path``, atomically: path keeps its old content on any error. Where PyTorch pickles a
    state_dict you build (``torch.save``), this saves the tensors and optimizer directly.
    TypeError for tensors that are not {str: Tensor} or meta that is not {str: str};
    ArgumentError (a ValueError) for a bad or duplicate name or an optimizer parameter not
    among tensors; LayoutError (a TypeError) for a COO tensor; InputOutputError (a
    RuntimeError) when the file cannot be written; ValueError for a NUL character."""
    ctx, handles, names, n = _named(tensors, optim, "save_checkpoint")
    meta = dict(meta or {})
    for k, v in meta.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("save_checkpoint: meta must map str keys to str values")
    m = len(meta)
    keys = (ctypes.c_char_p * max(m, 1))(*[_c_string(k.encode(), "save_checkpoint: meta key")
                                           for k in meta])
    vals = (ctypes.c_char_p * max(m, 1))(*[_c_string(v.encode(), "save_checkpoint: meta value")
                                           for v in meta.values()])
    cmeta = _lib.CheckpointMeta(m, keys, vals)
    rc = lib.sg_checkpoint_save(ctx._handle(), _c_string(os.fsencode(path), "save_checkpoint"),
                                handles, n, names,
                                None if optim is None else optim._h(), ctypes.byref(cmeta))
    if rc:
        _raise(ctx._ptr, "save_checkpoint", rc)


def load_checkpoint(path: _Path, tensors: Dict[str, Tensor],
                    optim: Optional["Optimizer"] = None) -> Dict[str, str]:
    """Restores the file at ``path`` into existing tensors ({name: Tensor}, exactly the
    file's names, of the saved dtypes and shapes; a from_numpy tensor's array is written),
    into ``optim`` (its state, step count, learning rate and schedule; None: the file's
    optimizer state is ignored) and into the Context's random generator, so a resumed run
    is bitwise the run that did not stop; returns the user metadata as {str: str}.
    Everything is checked before anything is written; on error nothing changes.
    FileNotFoundError for a missing file, sgrad.FormatError (a ValueError) for a damaged
    or foreign one, DtypeError (a TypeError) / ShapeError (a ValueError) for a tensor saved
    with another dtype / shape, StateError (a RuntimeError) for a name missing from the file
    or an extra one in it, or an optimizer of another kind or parameters."""
    ctx, handles, names, n = _named(tensors, optim, "load_checkpoint")
    meta = _lib.CheckpointMeta()
    path = check_input_file(path, "load_checkpoint")
    rc = lib.sg_checkpoint_load(ctx._handle(), _c_string(os.fsencode(path), "load_checkpoint"),
                                handles, n, names,
                                None if optim is None else optim._h(), ctypes.byref(meta))
    if rc:
        _raise(ctx._ptr, "load_checkpoint", rc)
    try:
        if optim is not None:
            optim._pull_lr()  # the restored lr into param_groups (sgrad.optim)
        return _meta_dict(meta)
    finally:
        lib.sg_checkpoint_meta_free(ctx._ptr, ctypes.byref(meta))


def read_checkpoint_meta(path: _Path, ctx: Optional[Context] = None) -> Dict[str, str]:
    """The user metadata of the checkpoint at ``path`` as {str: str}, after the same checks
    of the file as load_checkpoint, without loading anything (to see what a checkpoint was
    made from before building the tensors to load it into). FileNotFoundError for a
    missing file, sgrad.FormatError (a ValueError) for a damaged or foreign one. ``ctx``:
    where errors are recorded (default: ``default_context()``)."""
    path = check_input_file(path, "read_checkpoint_meta")
    ctx = ctx or default_context()
    meta = _lib.CheckpointMeta()
    rc = lib.sg_checkpoint_read_meta(ctx._handle(),
                                     _c_string(os.fsencode(path), "read_checkpoint_meta"),
                                     ctypes.byref(meta))
    if rc:
        _raise(ctx._ptr, "read_checkpoint_meta", rc)
    try:
        return _meta_dict(meta)
    finally:
        lib.sg_checkpoint_meta_free(ctx._ptr, ctypes.byref(meta))
