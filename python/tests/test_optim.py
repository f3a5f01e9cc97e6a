"""50-step optimizer trajectories against torch.optim (fixtures/optim.npz, written by
make_fixtures.py): an embedding table W (20,4), per step loss = 0.5 |W[idx] - T|^2 with 6
indices drawn from the even rows (duplicates likely, odd rows never touched), so the
sparse paths (exact lazy SGD, Adagrad's untouched rows) meet PyTorch's dense optimizers.
W is compared after every 10th step: f64 to 1e-10 relative, f32 to 1e-5 (relative, or
1e-5 of the table's largest element for elements near zero).

Exact lazy SGD (momentum or weight decay) leaves untouched rows behind; an op that reads a
row brings it up to date first, so no flush is needed before a forward (this test found
the library reading the rows as last touched, since fixed)."""
import os

import numpy as np
import pytest

import sgrad

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = np.load(os.path.join(HERE, "fixtures", "optim.npz"))

CONFIGS = {
    "sgd": lambda p: sgrad.optim.SGD(p, lr=0.1),
    "sgd_momentum_wd": lambda p: sgrad.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01,
                                                 dampening=0.1),
    "sgd_nesterov": lambda p: sgrad.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01,
                                              nesterov=True),
    "adagrad": lambda p: sgrad.optim.Adagrad(p, lr=0.1, lr_decay=0.01,
                                             initial_accumulator_value=0.1),
    "adam": lambda p: sgrad.optim.Adam(p, lr=0.01, weight_decay=0.01),
    "adamw": lambda p: sgrad.optim.Adam(p, lr=0.01, weight_decay=0.01, decoupled=True),
    # references: the row-wise rule written in torch, and torch.optim.SparseAdam
    # where every row is touched at every step (idx_all), where LazyAdam must equal it
    "rowwise_adagrad": lambda p: sgrad.optim.RowWiseAdagrad(p, lr=0.1),
    "lazy_adam_all_rows": lambda p: sgrad.optim.LazyAdam(p, lr=0.01, eps=1e-14),
    # per-row step counts written in torch (SparseAdam counts steps per parameter)
    "lazy_adam": lambda p: sgrad.optim.LazyAdam(p, lr=0.01),
}

@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_trajectory_against_torch(name, dtype):
    tag = "f64" if dtype == np.float64 else "f32"
    idx, T = (FIX["idx_all"], FIX["T_all"]) if name.endswith("all_rows") else (FIX["idx"], FIX["T"])
    want = FIX[f"{name}/{tag}"]
    ctx = sgrad.Context()
    W0 = FIX["W0"].astype(dtype)
    W = sgrad.from_numpy(W0.copy(), requires_grad=True, ctx=ctx)
    opt = CONFIGS[name]([W])
    rtol = 1e-10 if tag == "f64" else 1e-5
    atol = 1e-12 if tag == "f64" else 1e-5 * np.max(np.abs(want))
    for t in range(len(idx)):
        e = sgrad.embedding(W, idx[t])
        d = e - T[t].astype(dtype)
        loss = (d * d).sum() * 0.5
        loss.backward()
        assert W.grad.is_sparse
        opt.step()
        ctx.tape_reset()
        if (t + 1) % 10 == 0:
            opt.flush()
            np.testing.assert_allclose(W.numpy(), want[(t + 1) // 10 - 1], rtol=rtol,
                                       atol=atol, err_msg=f"{name} after step {t + 1}")
    assert opt.steps == len(idx)


def test_lazy_adam_differs_from_sparse_adam_when_rows_skip_steps():
    # the documented difference: SparseAdam's bias correction uses the parameter's step
    # count for every row; on the even-rows data the two trajectories must differ
    assert not np.allclose(FIX["lazy_adam/f64"], _sparse_adam_like(), rtol=1e-6)


def _sparse_adam_like():
    # SparseAdam's rule on the even-rows data, in numpy (global step for every row)
    W = FIX["W0"].copy()
    m, v = np.zeros_like(W), np.zeros_like(W)
    snaps = []
    for t in range(len(FIX["idx"])):
        idx, T = FIX["idx"][t], FIX["T"][t]
        g = np.zeros_like(W)
        np.add.at(g, idx, W[idx] - T)
        rows = np.unique(idx)
        s = t + 1
        m[rows] = 0.9 * m[rows] + 0.1 * g[rows]
        v[rows] = 0.999 * v[rows] + 0.001 * g[rows] ** 2
        W[rows] -= 0.01 / (1 - 0.9 ** s) * m[rows] / (np.sqrt(v[rows] / (1 - 0.999 ** s)) + 1e-8)
        if s % 10 == 0:
            snaps.append(W.copy())
    return np.stack(snaps)


def test_fused_sgd_equals_unfused():
    r = np.random.default_rng(5)
    W0 = r.uniform(-1, 1, (10, 3))
    idx = r.integers(0, 10, size=(5, 7))
    out = []
    for fused in (False, True):
        ctx = sgrad.Context()
        W = sgrad.from_numpy(W0.copy(), requires_grad=True, ctx=ctx)
        opt = sgrad.optim.SGD([W], lr=0.1)
        for t in range(5):
            e = sgrad.embedding(W, idx[t], fused=opt if fused else None)
            (e * e).sum().backward()
            opt.step()
            ctx.tape_reset()
        out.append(W.numpy().copy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-14)


def test_state_is_reported_by_name():
    ctx = sgrad.Context()
    W = ctx.tensor(np.ones((3, 2)), requires_grad=True)
    opt = sgrad.optim.Adam([W], lr=0.1)
    (W * W).sum().backward()   # g = 2
    opt.step()
    st = opt.state(W)
    np.testing.assert_allclose(st["exp_avg"], np.full((3, 2), 0.2), rtol=1e-15)
    np.testing.assert_allclose(st["exp_avg_sq"], np.full((3, 2), 0.004), rtol=1e-12)
    assert int(st["step"]) == 1


def test_exact_lazy_sgd_without_flush_equals_dense_sgd():
    # the forward reads each row caught up over the steps it skipped (it once read the row
    # as last touched and drifted from torch by 0.29 in 10 steps)
    ctx = sgrad.Context()
    W = sgrad.from_numpy(FIX["W0"].copy(), requires_grad=True, ctx=ctx)
    opt = sgrad.optim.SGD([W], lr=0.1, momentum=0.9, weight_decay=0.01, dampening=0.1)
    for t in range(10):
        d = sgrad.embedding(W, FIX["idx"][t]) - FIX["T"][t]
        ((d * d).sum() * 0.5).backward()
        opt.step()
        ctx.tape_reset()
    opt.flush()
    np.testing.assert_allclose(W.numpy(), FIX["sgd_momentum_wd/f64"][0], rtol=1e-10)
