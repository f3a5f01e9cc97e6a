"""DLPack both ways, without copies: ``torch.from_dlpack(t)`` and ``numpy.from_dlpack(t)``
share an sgrad Tensor's memory (``Tensor.__dlpack__``), and ``sgrad.from_dlpack(x)`` shares
the memory of any CPU object with ``__dlpack__`` (a torch tensor, a numpy array, a JAX or
CuPy host array) or of a DLPack capsule.

The structs and the capsule are built with ctypes (DLPack 0.x: ``DLManagedTensor`` in a
capsule named ``"dltensor"``, which a consumer renames ``"used_dltensor"`` when it takes
ownership and then calls the tensor's deleter when it is done).

What is shared, what is copied, what is refused:

- ``sgrad.from_dlpack(x)`` never copies. CPU memory, C-contiguous (row-major; strides of
  dimensions of size 1 are ignored), aligned to its element size, of dtype float32,
  float64, int32 or int64 becomes a persistent Tensor over that memory (writes on either
  side are seen by the other). Any other dtype raises ``DtypeError`` (float16, bfloat16,
  bool, uint8, complex, ...), any other layout ``LayoutError`` (a strided view, misaligned
  data, memory on another device); convert on the producer's side first
  (``x.contiguous()``, ``x.to(torch.float32)``). The producer's memory stays alive as long
  as the Tensor or any numpy array from its ``numpy()`` does, and the producer's own
  object may go first.
- ``Tensor.__dlpack__()`` of a dense persistent Tensor shares its memory; the consumer's
  tensor keeps the memory alive (the Tensor's numpy array, or for memory the library owns,
  such as an optimizer's state, the object owning it), so the sgrad Tensor may go first.
  Its Context must stay open while the library owns the memory (``ctx.close()`` frees
  everything the Context gave out, exported or not).
- A step tensor (an op result or a gradient: it dies at ``ctx.tape_reset()``) is COPIED
  into memory owned by the consumer's tensor by default (the array API's ``copy=None``:
  sharing is impossible, since the memory is reused by the next step);
  ``__dlpack__(copy=False)`` refuses it with ``StateError``. ``copy=True`` copies any
  tensor. A COO tensor raises ``LayoutError`` (DLPack has no sparse layout).
"""
import ctypes
import threading
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from .context import Context
from .errors import ArgumentError, DtypeError, LayoutError, StateError

__all__ = ["from_dlpack", "to_dlpack", "KDL_CPU"]

KDL_CPU = 1  # DLDeviceType kDLCPU

_c_int32, _c_int64, _c_uint8, _c_uint16, _c_uint64 = (ctypes.c_int32, ctypes.c_int64,
                                                       ctypes.c_uint8, ctypes.c_uint16,
                                                       ctypes.c_uint64)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", _c_int32), ("device_id", _c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", _c_uint8), ("bits", _c_uint8), ("lanes", _c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", _c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(_c_int64)),
                ("strides", ctypes.POINTER(_c_int64)), ("byte_offset", _c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void (*)(DLManagedTensor *)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


# (code, bits) of DLPack's DLDataTypeCode (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4,
# kDLComplex 5, kDLBool 6) <-> numpy dtypes sgrad has tensors for.
_DL_OF = {np.dtype(np.float32): (2, 32), np.dtype(np.float64): (2, 64),
          np.dtype(np.int32): (0, 32), np.dtype(np.int64): (0, 64)}
_NP_OF_DL = {v: k for k, v in _DL_OF.items()}
_DL_NAMES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}
_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                 9: "VPI", 10: "ROCm", 13: "CUDA managed", 14: "oneAPI"}

_api = ctypes.pythonapi
_py, _vp, _cp, _int = ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
# Two spellings of the capsule calls: on a live capsule (a Python object, referenced as
# usual) and on a raw pointer (inside the capsule's destructor, when no new reference may
# be made to it). PYFUNCTYPE calls hold the GIL.
_capsule_new = ctypes.PYFUNCTYPE(_py, _vp, _cp, _vp)(("PyCapsule_New", _api))
_capsule_is_valid = ctypes.PYFUNCTYPE(_int, _py, _cp)(("PyCapsule_IsValid", _api))
_capsule_get = ctypes.PYFUNCTYPE(_vp, _py, _cp)(("PyCapsule_GetPointer", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(_int, _py, _cp)(("PyCapsule_SetName", _api))
_raw_is_valid = ctypes.PYFUNCTYPE(_int, _vp, _cp)(("PyCapsule_IsValid", _api))
_raw_get = ctypes.PYFUNCTYPE(_vp, _vp, _cp)(("PyCapsule_GetPointer", _api))
_CAPSULE_NAME = b"dltensor"       # module constants: the capsule keeps pointing at them
_USED_NAME = b"used_dltensor"

# ---------------------------------------------------------------- export

# What an exported DLManagedTensor needs until its deleter runs, by its address: the
# struct, its shape and strides arrays, and the object that owns the data.
_exports: Dict[int, Tuple[Any, ...]] = {}
_exports_lock = threading.Lock()


def _release_export(addr: Optional[int]) -> None:
    """The deleter of an exported tensor (called by its consumer, from any thread: ctypes
    takes the GIL): drops what kept the memory alive."""
    if addr is None or _exports is None:  # interpreter shutdown
        return
    with _exports_lock:
        _exports.pop(addr, None)


_deleter = _DELETER(_release_export)
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void (*)(PyObject *capsule)


def _destroy_capsule(cap: Optional[int]) -> None:
    """A capsule's destructor: a capsule nobody consumed (still named "dltensor") owns its
    tensor, so it calls the deleter; a consumed one ("used_dltensor") does nothing. Takes
    the raw pointer (the capsule is being freed: no new reference may be made to it)."""
    if cap is None or _raw_is_valid is None:  # interpreter shutdown
        return
    if _raw_is_valid(cap, _CAPSULE_NAME):
        _release_export(_raw_get(cap, _CAPSULE_NAME))


_destructor = _DESTRUCTOR(_destroy_capsule)


def _capsule(data: int, shape: Sequence[int], dtype: np.dtype, owner: Any) -> Any:
    """A "dltensor" capsule over ``data`` (row-major, of shape and dtype) whose deleter
    releases ``owner``, the object keeping the memory alive."""
    ndim = len(shape)
    shp = (_c_int64 * max(ndim, 1))(*shape)
    strides = [1] * ndim
    for i in range(ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * max(int(shape[i + 1]), 1)
    st = (_c_int64 * max(ndim, 1))(*strides)
    code, bits = _DL_OF[np.dtype(dtype)]
    m = _DLManagedTensor()
    m.dl_tensor.data = data or None
    m.dl_tensor.device = _DLDevice(KDL_CPU, 0)
    m.dl_tensor.ndim = ndim
    m.dl_tensor.dtype = _DLDataType(code, bits, 1)
    m.dl_tensor.shape = ctypes.cast(shp, ctypes.POINTER(_c_int64))
    m.dl_tensor.strides = ctypes.cast(st, ctypes.POINTER(_c_int64))
    m.dl_tensor.byte_offset = 0
    m.manager_ctx = None
    m.deleter = _deleter
    addr = ctypes.addressof(m)
    with _exports_lock:
        _exports[addr] = (m, shp, st, owner)
    try:
        return _capsule_new(addr, _CAPSULE_NAME, ctypes.cast(_destructor, ctypes.c_void_p))
    except BaseException:
        _release_export(addr)
        raise


def _export_array(a: np.ndarray, owner: Any = None) -> Any:
    """A capsule sharing numpy array ``a`` (C-contiguous, of an sgrad dtype); the capsule's
    consumer keeps ``a`` (and ``owner``) alive."""
    return _capsule(a.ctypes.data, a.shape, a.dtype, (a, owner))


def _export_pointer(data: int, shape: Sequence[int], dtype: Any, owner: Any) -> Any:
    """A capsule over memory at ``data`` that ``owner`` keeps alive (the library's own
    memory: an optimizer's state)."""
    return _capsule(data, tuple(int(d) for d in shape), np.dtype(dtype), owner)


def to_dlpack(t: Any, copy: Optional[bool] = None) -> Any:
    """A DLPack capsule of sgrad Tensor ``t`` (what ``t.__dlpack__(copy=copy)`` returns),
    for consumers that take capsules (``torch.utils.dlpack.from_dlpack``). See the module
    docstring for what is shared and what is copied."""
    from .tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"to_dlpack needs an sgrad Tensor, not {type(t).__name__}")
    return t.__dlpack__(copy=copy)


def _tensor_capsule(t: Any, copy: Optional[bool]) -> Any:
    """Tensor.__dlpack__'s body."""
    h = t._h()
    if t.is_sparse:
        raise LayoutError("__dlpack__: a COO tensor has no DLPack form; export its "
                          "indices and values, or to_dense() it first", 5)
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"__dlpack__: copy must be None, True or False, not {copy!r}")
    if not t.persistent:
        if copy is False:
            raise StateError("__dlpack__(copy=False): a step tensor dies at tape_reset, so "
                             "its memory cannot be shared; export a copy (copy=None or True) "
                             "or a persistent tensor", 9)
        return _export_array(t._copy_out(h))
    if copy:
        return _export_array(np.array(t.numpy(), copy=True))
    if t._array is not None:
        return _export_array(t._array, t)
    from ._lib import lib
    return _export_pointer(lib.sg_tensor_data(h) or 0, t.shape, t.dtype, t)


# ---------------------------------------------------------------- import


class _Imported:
    """Owns a consumed DLManagedTensor: calls its deleter when it goes (when the last
    array or Tensor over its memory is gone)."""
    __slots__ = ("addr", "__weakref__")

    def __init__(self, addr: int) -> None:
        self.addr = addr

    def __del__(self) -> None:
        addr, self.addr = self.addr, None
        if addr:
            m = _DLManagedTensor.from_address(addr)
            if m.deleter:
                m.deleter(addr)


class _ArrayHolder:
    """The base of the numpy array over imported memory: it exposes the memory through
    ``__array_interface__`` and keeps the DLPack owner alive as long as the array."""

    def __init__(self, data: int, shape: Tuple[int, ...], dtype: np.dtype,
                 owner: _Imported) -> None:
        self.__array_interface__ = {"data": (data, False), "shape": shape,
                                    "typestr": dtype.str, "version": 3}
        self.owner = owner


def _dtype_name(code: int, bits: int, lanes: int) -> str:
    name = f"{_DL_NAMES.get(code, 'code %d ' % code)}{bits}"
    return name if lanes == 1 else f"{name}x{lanes}"


def _capsule_of(x: Any, what: str) -> Any:
    """x's DLPack capsule: x itself if it is one, else x.__dlpack__() after checking
    x.__dlpack_device__() names the CPU."""
    if type(x).__name__ == "PyCapsule":
        return x
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"{what}: {type(x).__name__} has no __dlpack__ (a torch tensor, a "
                        "numpy array >= 1.22, or a DLPack capsule is expected)")
    if hasattr(x, "__dlpack_device__"):
        dev = x.__dlpack_device__()
        kind = int(dev[0])
        if kind != KDL_CPU:
            raise LayoutError(f"{what}: the memory is on device "
                              f"{_DEVICE_NAMES.get(kind, kind)}:{int(dev[1])}; sgrad "
                              "shares CPU memory only (move it with .cpu() first)", 5)
    try:
        return x.__dlpack__()
    except Exception as e:  # a producer refusing its own dtype (numpy, torch: bool)
        dt = getattr(x, "dtype", None)
        name = str(dt).replace("torch.", "") if dt is not None else None
        if name is not None and name not in ("float32", "float64", "int32", "int64"):
            raise DtypeError(f"{what}: dtype {name} has no sgrad tensor (float32, float64, "
                             f"int32, int64; convert it first); the producer refused to "
                             f"export it: {e}", 4) from e
        raise


def from_dlpack(x: Any, requires_grad: bool = False, ctx: Optional[Context] = None) -> Any:
    """A persistent dense sgrad Tensor sharing the memory of ``x``: any object with
    ``__dlpack__`` (a CPU torch tensor, a numpy array, ...) or a DLPack capsule; never a
    copy (``t.numpy()`` is a view of the same memory, so are writes by an optimizer step).
    ``x`` must be C-contiguous, aligned and on the CPU (else LayoutError, a TypeError), of
    dtype float32, float64, int32 or int64 (else DtypeError, a TypeError); a capsule
    already consumed raises ArgumentError (a ValueError). The memory stays alive while the
    Tensor or an array from its ``numpy()`` lives, whatever becomes of ``x``. A torch
    tensor that requires grad must be ``detach()``-ed first (torch refuses to export it).
    ``requires_grad``: mark the Tensor as a parameter (float dtypes); ``ctx``: the Context
    to make it in (default: ``default_context()``)."""
    from .tensor import from_numpy
    cap = _capsule_of(x, "from_dlpack")
    if not _capsule_is_valid(cap, _CAPSULE_NAME):
        raise ArgumentError("from_dlpack: not an unused DLPack capsule (named 'dltensor'; "
                            "a capsule can be consumed once)", 7)
    addr = _capsule_get(cap, _CAPSULE_NAME)
    m = _DLManagedTensor.from_address(addr)
    dl = m.dl_tensor
    kind = dl.device.device_type
    if kind != KDL_CPU:
        raise LayoutError(f"from_dlpack: the memory is on device "
                          f"{_DEVICE_NAMES.get(kind, kind)}; sgrad shares CPU memory only", 5)
    code, bits, lanes = dl.dtype.code, dl.dtype.bits, dl.dtype.lanes
    dtype = _NP_OF_DL.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise DtypeError(f"from_dlpack: dtype {_dtype_name(code, bits, lanes)} has no sgrad "
                         "tensor (float32, float64, int32, int64; convert it first, e.g. "
                         "x.to(torch.float32)); nothing was copied", 4)
    ndim = dl.ndim
    if ndim > 4:
        raise LayoutError(f"from_dlpack: {ndim} dimensions; sgrad tensors have at most 4", 5)
    shape = tuple(int(dl.shape[i]) for i in range(ndim))
    numel = int(np.prod(shape, dtype=np.int64)) if ndim else 1
    if dl.strides and numel > 0:
        expected = 1
        for i in range(ndim - 1, -1, -1):
            if shape[i] != 1 and int(dl.strides[i]) != expected:
                strides = tuple(int(dl.strides[j]) for j in range(ndim))
                raise LayoutError(f"from_dlpack: strides {strides} (in elements) for shape "
                                  f"{shape} are not C-contiguous; sgrad shares row-major "
                                  "memory only (make it contiguous first, e.g. "
                                  "x.contiguous()); nothing was copied", 5)
            expected *= shape[i]
    data = (dl.data or 0) + int(dl.byte_offset)
    if numel > 0 and data % dtype.itemsize:
        raise LayoutError(f"from_dlpack: data at {data:#x} is not aligned to its "
                          f"{dtype.itemsize}-byte elements", 5)
    # Checks passed: take ownership (the capsule no longer calls the deleter).
    if _capsule_set_name(cap, _USED_NAME):
        raise ArgumentError("from_dlpack: could not take the capsule", 7)
    owner = _Imported(addr)
    if numel == 0:  # nothing to share; the producer's tensor is released at once
        a = np.empty(shape, dtype)
        del owner
    else:
        a = np.asarray(_ArrayHolder(data, shape, dtype, owner))
    return from_numpy(a, requires_grad, ctx)

