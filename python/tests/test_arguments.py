"""Arguments that the C API cannot check, checked by the package before the call: a COO
tensor's values against its indices and shape, index arrays that are not integers,
Python ints beyond the C integer a wrapper passes them as, NUL characters in strings
that C would cut short; and gradcheck's inputs from two contexts (refused by the C
library). Each of these used to be accepted and misread."""
import os

import numpy as np
import pytest

import sgrad


def test_coo_values_must_be_nnz_rows_of_the_dense_dims():
    ctx = sgrad.Context()
    # one value for three entries: the C call read past the array
    with pytest.raises(sgrad.ShapeError, match=r"\(3,\)"):
        sgrad.coo([[0, 1, 2]], np.array([1.0]), (3,), ctx=ctx)
    # rows of 3 values for a dense dim of 2: was read as 2 rows of 2 from 6 values
    with pytest.raises(sgrad.ShapeError, match=r"\(2, 2\)"):
        sgrad.coo([[0, 2]], np.arange(6.0).reshape(2, 3), (3, 2), ctx=ctx)
    with pytest.raises(sgrad.ShapeError):
        sgrad.coo([[0, 2]], np.arange(4.0), (3, 2), ctx=ctx)  # flat, right count
    with pytest.raises(sgrad.ShapeError):
        sgrad.coo([[0], [1], [0]], [1.0], (3, 2), ctx=ctx)  # sparse_dim 3 > ndim 2
    vals = np.arange(6.0).reshape(3, 2)
    t = sgrad.coo([[0, 2, 0]], vals, (3, 2), ctx=ctx)
    want = np.zeros((3, 2))
    want[0] = vals[0] + vals[2]
    want[2] = vals[1]
    assert (t.to_numpy_dense() == want).all() and (t.values == vals).all()
    t2 = sgrad.coo([[0, 1], [1, 0]], [5.0, 7.0], (2, 2), ctx=ctx)  # no dense dims: (nnz,)
    assert (t2.to_numpy_dense() == [[0, 5], [7, 0]]).all()
    with pytest.raises(sgrad.DtypeError):
        sgrad.coo([[0.5, 1.0]], [1.0, 2.0], (3,), ctx=ctx)


@pytest.mark.parametrize("bad", [[1.7, 2.2], np.array([1.0, 2.0]), [True, False],
                                 np.array([1, 0], dtype=bool)],
                         ids=["float_list", "float_array", "bool_list", "bool_array"])
def test_index_arrays_must_hold_integers(bad):
    # before: astype(int64) read [1.7, 2.2] as rows 1, 2 and booleans as rows 1, 0
    ctx = sgrad.Context()
    W = ctx.tensor(np.arange(12.0).reshape(4, 3))
    with pytest.raises(sgrad.DtypeError, match="integers"):
        sgrad.embedding(W, bad)
    with pytest.raises(sgrad.DtypeError):
        sgrad.index_select(W, 0, bad)
    with pytest.raises(sgrad.DtypeError):
        sgrad.embedding_bag(W, [0, 1], bad)
    with pytest.raises(sgrad.DtypeError):
        sgrad.cross_entropy(ctx.tensor(np.zeros((2, 3))), bad)


def test_integer_indices_and_an_empty_list_still_work():
    ctx = sgrad.Context()
    a = np.arange(12.0).reshape(4, 3)
    W = ctx.tensor(a)
    for idx in ([1, 2], (1, 2), np.array([1, 2], np.int32), np.array([1, 2], np.uint8),
                np.array([1, 2], np.int16)):
        assert (sgrad.embedding(W, idx).numpy() == a[[1, 2]]).all()
    assert sgrad.embedding(W, []).numpy().shape == (0, 3)
    logits = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]])
    lsm = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    got = sgrad.cross_entropy(ctx.tensor(logits), [0, 2]).item()
    assert abs(got - -(lsm[0, 0] + lsm[1, 2]) / 2) < 1e-12


def test_ints_beyond_the_c_integer_raise_instead_of_wrapping():
    # before: ctypes wrapped them (2**32 + 1 as dim 1, 2**64 + 12 as 12, ...)
    ctx = sgrad.Context(threads=1)
    X = ctx.tensor(np.arange(12.0).reshape(3, 4))
    calls = [lambda: sgrad.sum(X, 2**32 + 1), lambda: sgrad.mean(X, -2**31 - 1),
             lambda: sgrad.softmax(X, 2**32), lambda: sgrad.log_softmax(X, 2**32),
             lambda: sgrad.index_select(X, 2**32, [0]),
             lambda: sgrad.slice_rows(X, 2**64, 2**64 + 2), lambda: X.reshape(2**64 + 12),
             lambda: X.transpose(2**32, 0), lambda: sgrad.to_sparse(X, 2**32 + 1),
             lambda: sgrad.embedding(X, [1, 2], padding_idx=2**64 + 1),
             lambda: sgrad.embedding(X, [2**64 + 1]), lambda: sgrad.embedding(X, [2**63]),
             lambda: sgrad.coo([[0]], [1.0], (2**64 + 3,), ctx=ctx),
             lambda: sgrad.Context(threads=2**32 + 1), lambda: sgrad.Context(seed=-1)]
    for i, call in enumerate(calls):
        with pytest.raises(OverflowError):
            call()
            pytest.fail(f"call {i} did not raise")
    with pytest.raises(OverflowError):
        ctx.threads = 2**31
    with pytest.raises(TypeError):
        sgrad.sum(X, 1.5)  # no silent truncation of a float dim either
    # the same numbers within range reach the library
    assert (sgrad.sum(X, -1).numpy() == X.numpy().sum(-1)).all()
    assert (X.reshape(2, -1).numpy() == X.numpy().reshape(2, -1)).all()


def test_nul_characters_in_checkpoint_strings_are_refused(tmp_path):
    # before: C read "W\0hidden" as "W" and the value "before\0after" as "before"
    ctx = sgrad.Context(threads=1)
    path = str(tmp_path / "ck.safetensors")
    W = ctx.tensor(np.ones(2))
    for tensors, meta in (({"W\0hidden": W}, None), ({"W": W}, {"k": "before\0after"}),
                          ({"W": W}, {"k\0x": "v"})):
        with pytest.raises(ValueError, match="NUL"):
            sgrad.save_checkpoint(path, tensors, meta=meta)
        assert not os.path.exists(path)
    with pytest.raises(ValueError, match="NUL"):
        sgrad.save_checkpoint(path + "\0.tmp", {"W": W})
    assert os.listdir(tmp_path) == []
    sgrad.save_checkpoint(path, {"W": W}, meta={"k": "v"})
    with pytest.raises(ValueError, match="NUL"):
        sgrad.load_checkpoint(path, {"W\0x": ctx.zeros(2)})
    with pytest.raises(ValueError, match="NUL"):
        sgrad.read_checkpoint_meta(path + "\0x")
    assert sgrad.read_checkpoint_meta(path) == {"k": "v"}
    kv = sgrad.KeyedVectors(["a", "b\0c"], np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="NUL"):
        kv.save_word2vec_format(str(tmp_path / "v.txt"))
    assert not os.path.exists(tmp_path / "v.txt")


def test_gradcheck_refuses_inputs_of_two_contexts():
    # before: it took b's stale gradient of y (2) as the analytical derivative and reported
    # a gradcheck failure against the numerical 0
    a, b = sgrad.Context(), sgrad.Context()
    x = a.tensor(np.ones(3), requires_grad=True)
    y = b.tensor(np.ones(3), requires_grad=True)
    sgrad.sum(y * y).backward()
    with pytest.raises(sgrad.ArgumentError, match="two contexts"):
        sgrad.gradcheck(lambda x, y: sgrad.sum(x * x), [x, y])
    assert (y.grad == 2).all()
    assert sgrad.gradcheck(lambda x: sgrad.sum(x * x), [x])
