"""The knowledge-graph embedding ops at the Python level: sgrad.cdist against torch.cdist
computed here (values and gradients, p = 1 and 2, shapes past the C kernel's lanes and
cache blocks; skipped where torch is not installed: fixtures/ops.npz covers small cases
without it), the argument checks of the wrappers, and ranking_loss's defaults."""
import numpy as np
import pytest

import sgrad

try:
    import torch
except ImportError:  # pragma: no cover - CI without torch
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


@needs_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("p", [1, 2])
def test_cdist_against_torch(p, dtype):
    rng = np.random.default_rng(17 + p)
    a, b = rng.uniform(-1, 1, (37, 70)), rng.uniform(-1, 1, (301, 70))
    b[5] = a[3]  # a zero distance: gradient 0 there for p = 2, sign(0) = 0 for p = 1
    cot = rng.uniform(-1, 1, (37, 301))
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    want = torch.cdist(ta, tb, p=float(p), compute_mode="donot_use_mm_for_euclid_dist")
    (want * torch.tensor(cot)).sum().backward()

    ctx = sgrad.Context(seed=1, threads=2)
    sa = ctx.tensor(a.astype(dtype), requires_grad=True)
    sb = ctx.tensor(b.astype(dtype), requires_grad=True)
    got = sgrad.cdist(sa, sb, p=p)
    (got * cot.astype(dtype)).sum().backward()
    rtol, atol = (1e-10, 1e-12) if dtype == np.float64 else (2e-5, 2e-5)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
    gscale = float(np.abs(ta.grad.numpy()).max())
    np.testing.assert_allclose(np.asarray(sa.grad), ta.grad.numpy(), rtol=rtol, atol=atol * gscale)
    np.testing.assert_allclose(np.asarray(sb.grad), tb.grad.numpy(), rtol=rtol, atol=atol * gscale)
    assert got.numpy()[3, 5] == 0
    ctx.tape_reset()


def test_wrapper_arguments():
    ctx = sgrad.Context(seed=1)
    a = ctx.tensor(np.ones((2, 4)), requires_grad=True)
    with pytest.raises(sgrad.ArgumentError):
        sgrad.cdist(a, a, p=3)
    with pytest.raises(sgrad.ArgumentError):
        sgrad.rowdist(a, a, kind="l3")
    with pytest.raises(sgrad.ArgumentError):
        sgrad.ranking_loss(ctx.tensor(np.ones(2)), a, kind="hinge")
    with pytest.raises(sgrad.ShapeError):
        sgrad.complex_cdist(a, ctx.tensor(np.ones((2, 3))))
    with pytest.raises(sgrad.ShapeError):
        sgrad.complex_mul(a, ctx.tensor(np.ones((3, 4))))
    ctx.tape_reset()


def test_ranking_loss_defaults_are_the_softmax_loss_unmasked():
    ctx = sgrad.Context(seed=1)
    rng = np.random.default_rng(3)
    pos, neg = rng.uniform(-2, 2, 5), rng.uniform(-2, 2, (5, 4))
    got = float(sgrad.ranking_loss(pos.copy(), ctx.tensor(neg)).numpy())
    x = np.concatenate([pos[:, None], neg], 1)
    m = x.max(1)
    want = float((m + np.log(np.exp(x - m[:, None]).sum(1)) - pos).sum())
    assert got == pytest.approx(want, rel=1e-12)
    ctx.tape_reset()
