"""DLPack both ways: sgrad.from_dlpack and Tensor.__dlpack__ share memory with numpy and
PyTorch (a write on one side is read on the other) for every dtype, the memory outlives
whichever side goes first, and what cannot be shared is refused (or, for step tensors,
copied) as sgrad.dlpack documents. The torch cases skip where torch is not installed."""
import gc
import sys

import numpy as np
import pytest

import sgrad
import sgrad.dlpack as dl

DTYPES = [np.float32, np.float64, np.int32, np.int64]

try:
    import torch
except ImportError:  # pragma: no cover - CI without torch
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: the "
                                 "torch <-> sgrad DLPack cases need it")
TORCH_OF = ({np.float32: torch.float32, np.float64: torch.float64, np.int32: torch.int32,
             np.int64: torch.int64} if torch is not None else {})


def collect():
    gc.collect()


# ---------------------------------------------------------------- numpy


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_to_sgrad_shares_memory(dtype):
    a = np.arange(12, dtype=dtype).reshape(3, 4)
    t = sgrad.from_dlpack(a)
    assert t.dtype == np.dtype(dtype) and t.shape == (3, 4) and t.persistent
    assert t.data_ptr == a.ctypes.data
    a[1, 2] = 99
    assert t.numpy()[1, 2] == 99
    t.numpy()[0, 0] = -5
    assert a[0, 0] == -5


@pytest.mark.parametrize("dtype", DTYPES)
def test_sgrad_to_numpy_shares_memory(dtype):
    t = sgrad.from_numpy(np.arange(6, dtype=dtype))
    v = np.from_dlpack(t)
    assert v.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(v, np.arange(6))
    t.numpy()[3] = 42  # numpy marks a DLPack import read-only; the sgrad side writes
    assert v[3] == 42


def test_numpy_producer_dies_first():
    a = np.arange(5, dtype=np.float32)
    t = sgrad.from_dlpack(a)
    del a
    collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(5, dtype=np.float32))


def test_sgrad_producer_dies_first():
    t = sgrad.from_numpy(np.full(4, 7.0))
    v = np.from_dlpack(t)
    del t
    collect()
    np.testing.assert_array_equal(v, np.full(4, 7.0))


def test_freed_tensor_leaves_the_export_valid():
    t = sgrad.from_numpy(np.full(3, 2.0))
    v = np.from_dlpack(t)
    t.free()
    np.testing.assert_array_equal(v, np.full(3, 2.0))


def test_exports_are_released():
    collect()
    before = len(dl._exports)
    t = sgrad.from_numpy(np.ones(3))
    views = [np.from_dlpack(t) for _ in range(3)]
    assert len(dl._exports) == before + 3
    del views
    collect()
    assert len(dl._exports) == before
    cap = t.__dlpack__()  # never consumed: its destructor releases it
    assert len(dl._exports) == before + 1
    del cap
    collect()
    assert len(dl._exports) == before


def test_scalar_and_empty():
    t = sgrad.from_dlpack(np.array(3.5))
    assert t.shape == () and t.item() == 3.5
    e = sgrad.from_dlpack(np.zeros((0, 4), np.float32))
    assert e.shape == (0, 4)
    assert np.from_dlpack(sgrad.from_numpy(np.zeros((2, 0)))).shape == (2, 0)
    assert np.from_dlpack(sgrad.from_numpy(np.array(1.25))).item() == 1.25


@pytest.mark.parametrize("dtype", [np.float16, np.bool_, np.uint8, np.int16, np.complex64])
def test_unsupported_dtype_is_refused(dtype):
    with pytest.raises(sgrad.DtypeError, match="no sgrad tensor"):
        sgrad.from_dlpack(np.zeros(4, dtype))


def test_strided_is_refused_not_copied():
    a = np.arange(20.0).reshape(4, 5)
    with pytest.raises(sgrad.LayoutError, match="not C-contiguous"):
        sgrad.from_dlpack(a[:, 1:3])
    with pytest.raises(sgrad.LayoutError):
        sgrad.from_dlpack(a.T)
    # size-1 dimensions may have any stride: still row-major
    t = sgrad.from_dlpack(a[1:2])
    assert t.data_ptr == a[1:2].ctypes.data


def test_offset_view_is_shared():
    a = np.arange(10.0)
    t = sgrad.from_dlpack(a[3:])
    a[4] = -1
    assert t.numpy()[1] == -1 and t.shape == (7,)


def test_requires_grad_and_ctx():
    ctx = sgrad.Context()
    a = np.ones((2, 3))
    W = sgrad.from_dlpack(a, requires_grad=True, ctx=ctx)
    assert W.ctx is ctx and W.requires_grad
    sgrad.sum(W * W).backward()
    np.testing.assert_array_equal(W.grad, 2 * a)


def test_step_tensor_is_copied_or_refused():
    x = sgrad.from_numpy(np.arange(3.0), requires_grad=True)
    y = x * 2.0
    v = np.from_dlpack(y)  # copy=None: a copy (the step's memory is reused)
    np.testing.assert_array_equal(v, [0.0, 2.0, 4.0])
    assert v.ctypes.data != y.data_ptr
    with pytest.raises(sgrad.StateError, match="step tensor"):
        y.__dlpack__(copy=False)
    x.ctx.tape_reset()
    np.testing.assert_array_equal(v, [0.0, 2.0, 4.0])  # outlives the reset


def test_copy_true_copies():
    t = sgrad.from_numpy(np.zeros(3))
    v = np.from_dlpack(_Producer(t.__dlpack__(copy=True)))
    t.numpy()[0] = 1
    assert v[0] == 0


class _Producer:
    """Hands out a given capsule, as a __dlpack__ producer."""

    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, stream=None):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)


def test_coo_is_refused():
    c = sgrad.coo([[0, 2]], [1.0, 2.0], (3,))
    with pytest.raises(sgrad.LayoutError, match="COO"):
        c.__dlpack__()


def test_capsule_can_be_consumed_once():
    cap = sgrad.from_numpy(np.ones(2)).__dlpack__()
    t = sgrad.from_dlpack(cap)
    assert t.shape == (2,)
    with pytest.raises(sgrad.ArgumentError, match="consumed once"):
        sgrad.from_dlpack(cap)


def test_not_a_dlpack_object():
    with pytest.raises(TypeError, match="__dlpack__"):
        sgrad.from_dlpack([1.0, 2.0])


def test_device_is_checked():
    class Gpu:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None):  # pragma: no cover - never reached
            raise AssertionError

    with pytest.raises(sgrad.LayoutError, match="CUDA"):
        sgrad.from_dlpack(Gpu())


def test_dlpack_device_and_stream():
    t = sgrad.from_numpy(np.ones(2))
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(sgrad.ArgumentError):
        t.__dlpack__(stream=5)


def test_sgrad_round_trip_through_sgrad():
    t = sgrad.from_numpy(np.arange(4, dtype=np.int32))
    u = sgrad.from_dlpack(t)
    t.numpy()[2] = 9
    assert u.numpy()[2] == 9 and u.data_ptr == t.data_ptr


# ---------------------------------------------------------------- torch


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_round_trips_share_memory(dtype):
    td = TORCH_OF[dtype]
    # torch -> sgrad
    x = torch.arange(12, dtype=td).reshape(3, 4)
    s = sgrad.from_dlpack(x)
    assert s.dtype == np.dtype(dtype) and s.data_ptr == x.data_ptr()
    x[2, 3] = 77
    assert s.numpy()[2, 3] == 77
    s.numpy()[0, 1] = -3
    assert x[0, 1].item() == -3
    # sgrad -> torch
    t = sgrad.from_numpy(np.arange(6, dtype=dtype))
    y = torch.from_dlpack(t)
    assert y.dtype == td and y.data_ptr() == t.data_ptr
    y[1] = 55
    assert t.numpy()[1] == 55
    t.numpy()[4] = 66
    assert y[4].item() == 66
    # and back: sgrad -> torch -> sgrad is the same memory
    assert sgrad.from_dlpack(y).data_ptr == t.data_ptr


@needs_torch
def test_torch_side_deleted_first():
    x = torch.arange(6, dtype=torch.float32) * 1.5
    expected = x.numpy().copy()
    s = sgrad.from_dlpack(x)
    del x
    collect()
    np.testing.assert_array_equal(s.numpy(), expected)
    arr = s.numpy()
    del s
    collect()
    np.testing.assert_array_equal(arr, expected)  # the numpy view keeps it too


@needs_torch
def test_sgrad_side_deleted_first():
    t = sgrad.from_numpy(np.linspace(0, 1, 5))
    y = torch.from_dlpack(t)
    del t
    collect()
    np.testing.assert_array_equal(y.numpy(), np.linspace(0, 1, 5))


@needs_torch
def test_torch_layouts_and_dtypes_refused():
    with pytest.raises(sgrad.LayoutError, match="not C-contiguous"):
        sgrad.from_dlpack(torch.ones(3, 4).t())
    with pytest.raises(sgrad.LayoutError):
        sgrad.from_dlpack(torch.ones(10)[::2])
    for d in (torch.float16, torch.bfloat16, torch.bool, torch.uint8, torch.int16):
        with pytest.raises(sgrad.DtypeError):
            sgrad.from_dlpack(torch.zeros(3, dtype=d))
    # a refused tensor is not consumed: the producer keeps and frees it
    x = torch.ones(2, 3).t()
    for _ in range(3):
        with pytest.raises(sgrad.LayoutError):
            sgrad.from_dlpack(x)


@needs_torch
def test_torch_offset_and_size_one_strides():
    base = torch.arange(20, dtype=torch.float64)
    s = sgrad.from_dlpack(base[5:11].view(2, 3))
    base[7] = -1
    assert s.numpy()[0, 2] == -1
    col = torch.zeros(4, 1)  # strides of size-1 dims are ignored
    assert sgrad.from_dlpack(col.expand(4, 1)).shape == (4, 1)


@needs_torch
def test_torch_from_optimizer_state_keeps_it_alive():
    W = sgrad.from_numpy(np.ones((3, 2), np.float32), requires_grad=True)
    opt = sgrad.optim.Adagrad([W], lr=0.1)
    from sgrad.dlpack import _export_pointer
    from sgrad.optim import _state_views
    view = _state_views(opt._groups[0].ptr, W._h())["sum"]
    y = torch.utils.dlpack.from_dlpack(_export_pointer(view.ctypes.data, view.shape,
                                                       view.dtype, opt))
    del opt, view
    collect()
    assert y.shape == (3, 2) and float(y.sum()) == 0.0


@needs_torch
def test_torch_requires_grad_must_be_detached():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        sgrad.from_dlpack(x)
    assert sgrad.from_dlpack(x.detach()).data_ptr == x.data_ptr()


def test_package_does_not_import_torch():
    import subprocess
    code = ("import sys, sgrad, sgrad.dlpack, numpy as np; "
            "t = sgrad.from_dlpack(np.ones(2)); np.from_dlpack(t); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
