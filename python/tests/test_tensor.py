"""Tensors from numpy without copies, lifetimes (stale and freed tensors raise), errors
carrying the library's message, operators, no_grad, the version."""
import os
import re
import weakref

import numpy as np
import pytest

import sgrad
from sgrad._lib import lib


def test_version_is_the_c_librarys():
    cmake = open(os.path.join(os.path.dirname(__file__), "..", "..", "CMakeLists.txt")).read()
    assert sgrad.__version__ == re.search(r"project\(sgrad VERSION ([0-9.]+)", cmake).group(1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_from_numpy_is_zero_copy(dtype):
    ctx = sgrad.Context()
    a = np.arange(12, dtype=dtype).reshape(3, 4)
    t = sgrad.from_numpy(a, ctx=ctx)
    assert lib.sg_tensor_data(t._ptr) == a.ctypes.data  # pointer identity
    assert t.data_ptr == a.ctypes.data and t.numpy() is a
    assert t.shape == (3, 4) and t.dtype == np.dtype(dtype)
    a[1, 2] = 100
    assert t.numpy()[1, 2] == 100


def test_optimizer_step_writes_into_the_callers_array():
    ctx = sgrad.Context()
    a = np.array([1.0, -2.0, 3.0])
    w = sgrad.from_numpy(a, requires_grad=True, ctx=ctx)
    opt = sgrad.optim.SGD([w], lr=0.25)
    (w * w).sum().backward()
    opt.step()
    ctx.tape_reset()
    np.testing.assert_array_equal(a, [0.5, -1.0, 1.5])  # w - 0.25 * 2w


def test_other_arrays_are_copied_or_refused():
    ctx = sgrad.Context()
    a = np.arange(12.0).reshape(3, 4)
    for b in (a.T, a.astype(">f8"), a[:, ::2]):
        t = sgrad.from_numpy(b, ctx=ctx)
        assert t.data_ptr != a.ctypes.data
        np.testing.assert_array_equal(t.numpy(), b)
    ro = a.copy()
    ro.flags.writeable = False
    assert sgrad.from_numpy(ro, ctx=ctx).numpy() is not ro
    assert sgrad.from_numpy(a.astype(np.uint8), ctx=ctx).dtype == np.int64
    with pytest.raises(TypeError):
        sgrad.from_numpy([1.0, 2.0], ctx=ctx)


def test_dtypes_without_a_tensor_dtype_are_refused_not_widened():
    ctx = sgrad.Context()
    a = np.arange(6.0).reshape(2, 3)
    for bad in (np.float16, bool, np.complex64, object):
        with pytest.raises(sgrad.DtypeError, match="no tensor dtype"):
            sgrad.from_numpy(a.astype(bad), ctx=ctx)
        with pytest.raises(sgrad.DtypeError):
            ctx.tensor(a.astype(bad))
        with pytest.raises(sgrad.DtypeError):
            sgrad.ops.add(ctx.tensor(a), a.astype(bad))


def test_the_array_outlives_its_python_name():
    ctx = sgrad.Context()
    t = sgrad.from_numpy(np.full(1000, 7.0), ctx=ctx)  # no other reference to the array
    np.testing.assert_array_equal(t.sum().numpy(), 7000.0)


def test_step_tensors_are_copies_and_raise_after_tape_reset():
    ctx = sgrad.Context()
    x = ctx.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    view = y.numpy()
    assert not view.flags.owndata or view.ctypes.data != y.data_ptr
    loss = y.sum()
    loss.backward()
    g = x.grad
    ctx.tape_reset()
    np.testing.assert_array_equal(view, [3.0, 6.0])  # the copy survives the reset
    np.testing.assert_array_equal(g, [3.0, 3.0])
    for stale in (lambda: y.numpy(), lambda: loss.backward(), lambda: y + 1.0,
                  lambda: y.shape):
        with pytest.raises(sgrad.StaleTensorError, match="tape_reset"):
            stale()
    assert x.grad is None  # the reset cleared the gradient
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])  # persistent: still fine


def test_freed_tensors_and_closed_contexts_raise():
    ctx = sgrad.Context()
    t = ctx.tensor(np.ones(3))
    t.free()
    with pytest.raises(sgrad.StaleTensorError, match="free"):
        t.numpy()
    with pytest.raises(sgrad.StaleTensorError):
        t * 2.0
    u = ctx.tensor(np.ones(3), requires_grad=True)
    y = (u * u).sum()
    u.free()  # the tape still uses it: freed in C at the reset, unusable now
    with pytest.raises(sgrad.StaleTensorError):
        u.shape
    y.backward()
    ctx.tape_reset()
    a = np.ones(2)
    w = sgrad.from_numpy(a, ctx=ctx)
    ctx.close()
    with pytest.raises(sgrad.StaleTensorError, match="closed"):
        w.sum()
    a[0] = 5  # the array is still Python's
    assert a[0] == 5


def test_a_fused_optimizer_lives_until_the_tape_reset():
    """The optimizer given as fused= is kept until tape_reset, so one dropped before the
    backward (or made inline) still applies its update: rows 1 and 2 minus lr times how
    often the lookup names them. Before, dropping it freed the C optimizer that the
    backward then called (a segfault)."""
    ctx = sgrad.Context()
    for inline in (False, True):
        a = np.ones((6, 3))
        W = sgrad.from_numpy(a, requires_grad=True, ctx=ctx)
        if inline:
            e = sgrad.embedding(W, [1, 2, 1], fused=sgrad.optim.SGD([W], lr=0.1))
        else:
            opt = sgrad.optim.SGD([W], lr=0.1)
            gone = weakref.ref(opt)
            e = sgrad.embedding(W, [1, 2, 1], fused=opt)
            del opt
            assert gone() is not None  # the Context holds it for the tape
        e.sum().backward()
        want = np.ones((6, 3))
        want[1] -= 0.2
        want[2] -= 0.1
        np.testing.assert_allclose(a, want, rtol=0, atol=1e-12)
        ctx.tape_reset()
        if not inline:
            assert gone() is None


def test_errors_carry_the_status_and_the_c_message():
    ctx = sgrad.Context()
    a, b = ctx.tensor(np.ones((2, 3))), ctx.tensor(np.ones((2, 2)))
    with pytest.raises(sgrad.ShapeError) as e:
        a @ b
    assert e.value.status == 3 and "sg_matmul" in str(e.value) and "(2,3)" in str(e.value)
    assert isinstance(e.value, sgrad.Error) and isinstance(e.value, ValueError)
    W = ctx.tensor(np.ones((4, 2)))
    with pytest.raises(sgrad.IndexRangeError,
                       match="4"):
        sgrad.embedding(W, [0, 4])
    with pytest.raises(sgrad.DtypeError):
        ctx.tensor([1, 2], dtype=np.int64).requires_grad_()
    with pytest.raises(sgrad.ArgumentError):
        sgrad.optim.SGD([ctx.tensor([1.0])], lr=-1.0)
    # one class per status code, each named after it
    codes = {cls.status for cls in sgrad.Error.__subclasses__() if cls.status}
    assert codes == set(range(1, 13))


def test_operators_against_numpy():
    ctx = sgrad.Context()
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[0.5, -1.0], [2.0, 0.25]])
    x, y = ctx.tensor(a), ctx.tensor(b)
    for got, want in ((x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b),
                      (x @ y, a @ b), (-x, -a), (2.0 - x, 2.0 - a), (1.0 / x, 1.0 / a),
                      (x + 1.0, a + 1.0), (x * 3.0, a * 3.0), (b @ x, b @ a),
                      (x.T, a.T), (x[1:2], a[1:2]), (x.sum(0), a.sum(0)), (b * x, b * a)):
        assert isinstance(got, sgrad.Tensor)  # also with an ndarray on the left
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-15)


def test_no_grad_records_nothing():
    ctx = sgrad.Context()
    x = ctx.tensor([1.0, 2.0], requires_grad=True)
    with sgrad.no_grad():
        y = (x * x).sum()
    assert ctx.tape_nodes() == 0
    with pytest.raises(sgrad.StateError):
        y.backward()
    z = (x * x).sum()
    assert ctx.tape_nodes() > 0
    z.backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])


def test_context_options():
    ctx = sgrad.Context(threads=1, seed=7, deterministic=False)
    assert ctx.threads == 1 and not ctx.deterministic
    draws = [sgrad.Context(seed=7).uniform((5,)).numpy() for _ in range(2)]
    np.testing.assert_array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[0], sgrad.Context(seed=8).uniform((5,)).numpy())


def test_coo_tensor_parts():
    ctx = sgrad.Context()
    idx = np.array([[0, 2, 0], [1, 0, 1]])
    t = sgrad.coo(idx, [1.0, 2.0, 3.0], (3, 2), ctx=ctx)
    assert t.is_sparse and t.shape == (3, 2) and t.nnz == 3
    np.testing.assert_array_equal(t.indices, idx)
    np.testing.assert_array_equal(t.values, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.numpy(), [[0, 4], [0, 0], [2, 0]])
    c = sgrad.coalesce(t)
    assert c.is_coalesced and c.nnz == 2
    with pytest.raises(sgrad.IndexRangeError):
        sgrad.coo([[3]], [1.0], (3,), ctx=ctx)
    pytest.importorskip("scipy")
    np.testing.assert_array_equal(t.to_scipy().toarray(), t.numpy())
