"""Checkpoints from Python: N steps, a save, a load into a fresh Context with fresh tensors
and a fresh optimizer, then M more steps give bitwise the parameters of N + M steps
without a stop (exact lazy SGD with momentum and LazyAdam, on a sparse embedding table
with rows that a step leaves behind, plus a dense matrix); tools/checkpoint/
read_safetensors.py (numpy only) reads the file back; damaged files raise FormatError
with the library's message and change nothing."""
import importlib.util
import os

import numpy as np
import pytest

import sgrad

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
V, D, N_STEPS, M_STEPS = 40, 4, 7, 9

OPTIMS = {
    "sgd_momentum": lambda ps: sgrad.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01),
    "lazy_adam": lambda ps: sgrad.optim.LazyAdam(ps, lr=0.01),
}


def batches():
    r = np.random.default_rng(5)
    # rows 0..V/2 only, duplicates likely: most rows lag behind at any step
    return [r.integers(0, V // 2, 6) for _ in range(N_STEPS + M_STEPS)]


def fresh(make_opt):
    ctx = sgrad.Context(threads=2, seed=9, deterministic=True)
    r = np.random.default_rng(1)
    W = sgrad.from_numpy(r.uniform(-0.5, 0.5, (V, D)), requires_grad=True, ctx=ctx)
    M = sgrad.from_numpy(r.uniform(-0.5, 0.5, (D, 3)), requires_grad=True, ctx=ctx)
    return ctx, W, M, make_opt([W, M])


def train(ctx, W, M, opt, idx_list):
    for idx in idx_list:
        y = sgrad.embedding(W, idx) @ M
        loss = ((y - 0.25) * (y - 0.25)).sum()
        loss.backward()
        opt.step()
        ctx.tape_reset()


@pytest.mark.parametrize("name", sorted(OPTIMS))
def test_resume_is_bitwise_the_run_without_a_stop(tmp_path, name):
    make, bs = OPTIMS[name], batches()
    ctx, W, M, opt = fresh(make)
    train(ctx, W, M, opt, bs)
    want_raw = (W.numpy().copy(), M.numpy().copy())
    want_rand = ctx.tensor(np.zeros(5)).uniform_().numpy().copy()
    opt.flush()
    want = (W.numpy().copy(), M.numpy().copy())

    ctx1, W1, M1, opt1 = fresh(make)
    train(ctx1, W1, M1, opt1, bs[:N_STEPS])
    path = tmp_path / "ck.safetensors"
    sgrad.save_checkpoint(str(path), {"W": W1, "M": M1}, optim=opt1, meta={"step": "7"})
    ctx1.close()

    ctx2 = sgrad.Context(threads=1, seed=123, deterministic=True)
    W2 = sgrad.from_numpy(np.zeros((V, D)), requires_grad=True, ctx=ctx2)
    M2 = sgrad.from_numpy(np.zeros((D, 3)), requires_grad=True, ctx=ctx2)
    opt2 = make([W2, M2])
    assert sgrad.load_checkpoint(str(path), {"W": W2, "M": M2}, optim=opt2) == {"step": "7"}
    assert opt2.steps == N_STEPS
    train(ctx2, W2, M2, opt2, bs[N_STEPS:])
    assert W2.numpy().tobytes() == want_raw[0].tobytes()
    assert M2.numpy().tobytes() == want_raw[1].tobytes()
    # the random generator came back too
    assert ctx2.tensor(np.zeros(5)).uniform_().numpy().tobytes() == want_rand.tobytes()
    opt2.flush()
    assert W2.numpy().tobytes() == want[0].tobytes()
    assert M2.numpy().tobytes() == want[1].tobytes()
    assert sgrad.read_checkpoint_meta(str(path)) == {"step": "7"}


def read_safetensors():
    spec = importlib.util.spec_from_file_location(
        "read_safetensors", os.path.join(REPO, "tools", "checkpoint", "read_safetensors.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.read


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_numpy_reader_reads_what_python_saved(tmp_path, dtype):
    ctx = sgrad.Context(seed=2)
    r = np.random.default_rng(3)
    a = (r.uniform(-9, 9, (5, 3)) * 1000).astype(dtype)
    b = np.arange(7, dtype=np.float64)
    W = sgrad.from_numpy(np.ascontiguousarray(r.uniform(-1, 1, (6, 2))), requires_grad=True,
                         ctx=ctx)
    opt = sgrad.optim.Adagrad([W], lr=0.1, initial_accumulator_value=0.5)
    path = tmp_path / "t.safetensors"
    sgrad.save_checkpoint(str(path), {"a": sgrad.from_numpy(a, ctx=ctx),
                                      "b/c": sgrad.from_numpy(b, ctx=ctx), "W": W},
                          optim=opt, meta={"note": "from python", "empty": ""})
    tensors, meta = read_safetensors()(str(path))
    assert tensors["a"].dtype == a.dtype and np.array_equal(tensors["a"], a)
    assert tensors["b/c"].dtype == np.float64 and np.array_equal(tensors["b/c"], b)
    assert np.array_equal(tensors["W"], W.numpy())
    state = opt.state(W)
    assert {"optim/W/" + k for k in state} == {k for k in tensors if k.startswith("optim/")}
    for k, v in state.items():
        assert np.array_equal(tensors["optim/W/" + k], v), k
    assert np.all(tensors["optim/W/sum"] == 0.5)  # initial_accumulator_value
    assert meta["note"] == "from python" and meta["empty"] == ""
    assert meta["sgrad.checksum"].startswith("fnv1a64:")


def saved(tmp_path):
    ctx = sgrad.Context(seed=4)
    W = sgrad.from_numpy(np.linspace(0, 1, 12).reshape(4, 3), ctx=ctx)
    path = tmp_path / "w.safetensors"
    sgrad.save_checkpoint(str(path), {"W": W}, meta={"k": "v"})
    return ctx, path


def test_damaged_files_raise_format_error_with_the_message(tmp_path):
    ctx, path = saved(tmp_path)
    blob = path.read_bytes()
    target = sgrad.from_numpy(np.full((4, 3), 7.0), ctx=ctx)
    flipped = bytearray(blob)
    flipped[-3] ^= 0x40  # a byte of the data section: the checksum disagrees
    cases = {"flipped": bytes(flipped), "truncated": blob[:len(blob) - 5],
             "short header": blob[:6], "not json": blob[:8] + b"{" * (len(blob) - 8)}
    for what, data in cases.items():
        bad = tmp_path / (what.replace(" ", "_") + ".safetensors")
        bad.write_bytes(data)
        with pytest.raises(sgrad.FormatError) as e:
            sgrad.load_checkpoint(str(bad), {"W": target})
        assert e.value.status == 11 and isinstance(e.value, ValueError)
        assert str(e.value).startswith("load_checkpoint: ") and len(str(e.value)) > 20, what
        with pytest.raises(sgrad.FormatError):
            sgrad.read_checkpoint_meta(str(bad), ctx=ctx)
        assert np.all(target.numpy() == 7.0), what  # nothing written
    with pytest.raises(sgrad.FormatError, match="checksum"):
        sgrad.load_checkpoint(str(tmp_path / "flipped.safetensors"), {"W": target})


def test_other_bad_input_raises_and_changes_nothing(tmp_path):
    ctx, path = saved(tmp_path)
    wrong_shape = sgrad.from_numpy(np.zeros((3, 4)), ctx=ctx)
    with pytest.raises(sgrad.ShapeError):
        sgrad.load_checkpoint(str(path), {"W": wrong_shape})
    assert np.all(wrong_shape.numpy() == 0)
    with pytest.raises(sgrad.DtypeError):
        sgrad.load_checkpoint(str(path), {"W": sgrad.from_numpy(np.zeros((4, 3), np.float32),
                                                                ctx=ctx)})
    with pytest.raises(sgrad.StateError):
        sgrad.load_checkpoint(str(path), {"V": sgrad.from_numpy(np.zeros((4, 3)), ctx=ctx)})
    with pytest.raises(FileNotFoundError, match="absent"):
        sgrad.load_checkpoint(str(tmp_path / "absent"), {"W": wrong_shape})
    W = sgrad.from_numpy(np.ones(2), ctx=ctx)
    before = path.read_bytes()
    with pytest.raises(sgrad.ArgumentError):
        sgrad.save_checkpoint(str(path), {"W": W}, meta={"sgrad.x": "reserved"})
    with pytest.raises(sgrad.InputOutputError):
        sgrad.save_checkpoint(str(tmp_path / "no" / "dir.st"), {"W": W})
    with pytest.raises(TypeError):
        sgrad.save_checkpoint(str(path), {"W": np.ones(2)})
    assert path.read_bytes() == before
