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

from . import _lib
from ._args import c_string as _c_string
from .context import default_context
from .errors import _raise
from .tensor import Tensor
from ._lib import lib


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


def save_checkpoint(path, tensors, optim=None, meta=None):
    """Writes tensors ({name: dense Tensor}), optim's state (every parameter of optim must
    be among tensors) and meta ({str: str}; keys not starting "sgrad.") to path, atomically
    (path keeps its old content on any error)."""
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


def load_checkpoint(path, tensors, optim=None):
    """Restores path into tensors ({name: Tensor} of the saved dtypes and shapes, exactly
    the file's names) and optim (None: the file's optimizer state is ignored); returns the
    user metadata as a dict."""
    ctx, handles, names, n = _named(tensors, optim, "load_checkpoint")
    meta = _lib.CheckpointMeta()
    rc = lib.sg_checkpoint_load(ctx._handle(), _c_string(os.fsencode(path), "load_checkpoint"),
                                handles, n, names,
                                None if optim is None else optim._h(), ctypes.byref(meta))
    if rc:
        _raise(ctx._ptr, "load_checkpoint", rc)
    try:
        return _meta_dict(meta)
    finally:
        lib.sg_checkpoint_meta_free(ctx._ptr, ctypes.byref(meta))


def read_checkpoint_meta(path, ctx=None):
    """The user metadata of the checkpoint at path (after the file's checks), as a dict."""
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
