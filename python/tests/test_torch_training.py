"""Training with sgrad.torch: the fused SGD and Adagrad follow nn.EmbeddingBag(sparse=True)
with torch's optimizers to float32 rounding over 100 steps; row-wise Adagrad and LazyAdam
follow their definitions (numpy references); the learning rate can be changed or
scheduled; torch.save mid-run resumes bitwise (state_dict, the whole model, deepcopy);
results do not depend on the thread counts."""
import copy
import io

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="sgrad.torch needs PyTorch (not installed)")
import sgrad.torch as st  # noqa: E402
from torch import nn  # noqa: E402

V, D, B, L = 200, 8, 16, 5


def batch(step, V=V, B=B, L=L):
    g = torch.Generator().manual_seed(1000 + step)
    idx = torch.randint(0, V, (B * L,), generator=g)
    off = torch.arange(0, B * L, L)
    y = (idx[::L] < V // 2).float()  # learnable: the bag's first row decides
    return idx, off, y


class Model(nn.Module):
    def __init__(self, bag):
        super().__init__()
        self.bag = bag
        torch.manual_seed(7)
        self.head = nn.Linear(D, 1)

    def forward(self, idx, off):
        return self.head(self.bag(idx, off)).squeeze(1)


def run(model, opts, steps, start=0):
    losses = []
    for s in range(start, start + steps):
        idx, off, y = batch(s)
        for o in opts:
            o.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(idx, off), y)
        loss.backward()
        for o in opts:
            o.step()
        losses.append(loss.item())
    return losses


def init_table(rows=V):
    torch.manual_seed(0)
    return torch.randn(rows, D) * 0.3


@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
def test_loss_trajectory_matches_torch(kind):
    w0 = init_table()
    ref = Model(nn.EmbeddingBag(V, D, mode="sum", sparse=True, _weight=w0.clone()))
    if kind == "sgd":
        fused = st.SGD(lr=0.2)
        ref_opts = [torch.optim.SGD(ref.parameters(), lr=0.2)]
    else:
        fused = st.Adagrad(lr=0.1)
        ref_opts = [torch.optim.Adagrad(ref.parameters(), lr=0.1)]
    mine = Model(st.EmbeddingBag(V, D, mode="sum", optimizer=fused, _weight=w0.clone()))
    head_opt = (torch.optim.SGD(mine.head.parameters(), lr=0.2) if kind == "sgd"
                else torch.optim.Adagrad(mine.head.parameters(), lr=0.1))
    r = run(ref, ref_opts, 100)
    m = run(mine, [head_opt, mine.bag.optimizer], 100)
    np.testing.assert_allclose(m, r, rtol=2e-5, atol=1e-6)
    assert np.mean(r[-10:]) < np.mean(r[:10])  # it learns
    torch.testing.assert_close(mine.bag.weight.detach(), ref.bag.weight.detach(),
                               rtol=1e-4, atol=1e-5)
    assert mine.bag.weight.grad is None


def fixed_grad_steps(module, steps, V=V):
    """Steps with a known output gradient: returns the per-step (idx, off, g)."""
    hist = []
    for s in range(steps):
        idx, off, _ = batch(s, V=V)
        g = torch.randn(B, D, generator=torch.Generator().manual_seed(s))
        module(idx, off).backward(g)
        hist.append((idx.numpy(), off.numpy(), g.numpy().astype(np.float64)))
    return hist


def row_grads(idx, off, g):
    """{row: summed gradient} of a sum-mode bag step."""
    out = {}
    bounds = list(off) + [len(idx)]
    for b in range(len(off)):
        for i in range(bounds[b], bounds[b + 1]):
            out.setdefault(int(idx[i]), np.zeros(g.shape[1]))
            out[int(idx[i])] += g[b]
    return out


def test_rowwise_adagrad_follows_its_definition():
    w0 = init_table()
    lr, eps = 0.05, 1e-10
    m = st.EmbeddingBag(V, D, mode="sum", optimizer=st.RowWiseAdagrad(lr=lr, eps=eps),
                        _weight=w0.clone())
    hist = fixed_grad_steps(m, 20)
    w, acc = w0.numpy().astype(np.float64), np.zeros(V)
    for idx, off, g in hist:
        for r, gr in row_grads(idx, off, g).items():
            acc[r] += np.mean(gr * gr)
            w[r] -= lr * gr / (np.sqrt(acc[r]) + eps)
    np.testing.assert_allclose(m.weight.detach().numpy(), w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m.optimizer_state.sum.numpy(), acc, rtol=1e-4)


def test_lazy_adam_follows_its_definition():
    rows = 1000  # some rows stay untouched
    w0 = init_table(rows)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    m = st.EmbeddingBag(rows, D, mode="sum", optimizer=st.LazyAdam(lr=lr, betas=(b1, b2),
                                                                   eps=eps), _weight=w0.clone())
    hist = fixed_grad_steps(m, 20, V=rows)
    w = w0.numpy().astype(np.float64)
    mom, vel, t = np.zeros((rows, D)), np.zeros((rows, D)), np.zeros(rows, np.int64)
    for idx, off, g in hist:
        for r, gr in row_grads(idx, off, g).items():
            t[r] += 1
            mom[r] = b1 * mom[r] + (1 - b1) * gr
            vel[r] = b2 * vel[r] + (1 - b2) * gr * gr
            w[r] -= lr / (1 - b1 ** t[r]) * mom[r] / (np.sqrt(vel[r] / (1 - b2 ** t[r])) + eps)
    np.testing.assert_allclose(m.weight.detach().numpy(), w, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(m.optimizer_state.row_step.numpy(), t)
    untouched = t == 0
    assert untouched.any()
    np.testing.assert_array_equal(m.weight.detach().numpy()[untouched],
                                  w0.numpy()[untouched])


def test_learning_rate_can_change_between_steps():
    m = st.EmbeddingBag(10, 2, mode="sum", optimizer=st.SGD(lr=1.0))
    idx, off = torch.tensor([3]), torch.tensor([0])
    w = m.weight.detach().clone()
    m(idx, off).backward(torch.ones(1, 2))
    torch.testing.assert_close(m.weight.detach()[3], w[3] - 1.0)
    m.optimizer.lr = 0.25
    m(idx, off).backward(torch.ones(1, 2))
    torch.testing.assert_close(m.weight.detach()[3], w[3] - 1.25)
    m.optimizer.param_groups[0]["lr"] = 0.5
    m(idx, off).backward(torch.ones(1, 2))
    torch.testing.assert_close(m.weight.detach()[3], w[3] - 1.75)
    with pytest.raises(ValueError):
        m.optimizer.lr = -1.0


def test_torch_scheduler_drives_the_fused_optimizer():
    m = st.EmbeddingBag(10, 2, mode="sum", optimizer=st.SGD(lr=1.0))
    sched = torch.optim.lr_scheduler.StepLR(m.optimizer, step_size=1, gamma=0.5)
    idx, off = torch.tensor([3]), torch.tensor([0])
    w = m.weight.detach().clone()
    lrs = []
    for _ in range(3):
        lrs.append(m.optimizer.lr)
        m(idx, off).backward(torch.ones(1, 2))
        m.optimizer.step()
        sched.step()
    assert lrs == [1.0, 0.5, 0.25]
    torch.testing.assert_close(m.weight.detach()[3], w[3] - 1.75)
    # the bound optimizer's own state_dict round trip (torch's), and pickling it alone
    sd = m.optimizer.state_dict()
    m.optimizer.lr = 9.0
    m.optimizer.load_state_dict(sd)
    assert m.optimizer.lr == 0.125 and m.optimizer.param_groups[0]["params"][0] is m.weight
    spec = copy.deepcopy(m.optimizer)
    assert not spec.bound and spec.lr == 0.125 and "SGD" in repr(spec)
    # a scheduler's "initial_lr" in param_groups does not disturb a checkpoint
    m2 = st.EmbeddingBag(10, 2, mode="sum", optimizer=st.SGD(lr=1.0))
    m2.load_state_dict(m.state_dict())
    assert m2.optimizer.lr == 0.125 and m2.optimizer.steps == 3


def test_only_lr_may_change():
    m = st.EmbeddingBag(10, 2, optimizer=st.Adagrad(lr=0.1, eps=1e-10))
    m.optimizer.param_groups[0]["eps"] = 1e-3
    with pytest.raises(ValueError, match="only 'lr'"):
        m(torch.tensor([1]), torch.tensor([0])).sum().backward()


OPTIMIZERS = {"sgd": lambda: st.SGD(lr=0.1), "adagrad": lambda: st.Adagrad(lr=0.1),
              "rowwise": lambda: st.RowWiseAdagrad(lr=0.1),
              "lazy_adam": lambda: st.LazyAdam(lr=0.01)}


def ebc_model(kind):
    torch.manual_seed(11)
    ebc = st.EmbeddingBagCollection([(V, D), (50, 4)], optimizer=OPTIMIZERS[kind]())
    head = nn.Linear(D + 4, 1)
    return nn.ModuleDict({"ebc": ebc, "head": head})


def ebc_batch(step):
    g = torch.Generator().manual_seed(step)
    lengths = torch.randint(0, 4, (2 * B,), generator=g)
    n0, n1 = int(lengths[:B].sum()), int(lengths[B:].sum())
    values = torch.cat([torch.randint(0, V, (n0,), generator=g),
                        torch.randint(0, 50, (n1,), generator=g)])
    return values, lengths, torch.randint(0, 2, (B,), generator=g).float()


def ebc_run(model, opt, steps, start):
    for s in range(start, start + steps):
        values, lengths, y = ebc_batch(s)
        opt.zero_grad()
        logit = model["head"](model["ebc"](values, lengths=lengths)).squeeze(1)
        nn.functional.binary_cross_entropy_with_logits(logit, y).backward()
        opt.step()
        if s == start + 2:  # a scheduler changes the lr mid-run
            model["ebc"].optimizer.lr = model["ebc"].optimizer.lr * 0.5


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()
            if isinstance(v, torch.Tensor)}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_torch_save_resumes_bitwise(kind):
    a = ebc_model(kind)
    opt_a = torch.optim.Adam(a["head"].parameters(), lr=0.01)
    ebc_run(a, opt_a, 6, 0)
    buf = io.BytesIO()
    torch.save({"model": a.state_dict(), "opt": opt_a.state_dict()}, buf)
    ebc_run(a, opt_a, 6, 6)  # the uninterrupted run

    b = ebc_model(kind)  # a fresh model: other tables, steps 0
    opt_b = torch.optim.Adam(b["head"].parameters(), lr=0.01)
    buf.seek(0)
    ck = torch.load(buf)
    b.load_state_dict(ck["model"])
    opt_b.load_state_dict(ck["opt"])
    assert b["ebc"].optimizer.steps == 6
    assert b["ebc"].optimizer.lr == pytest.approx(a["ebc"].optimizer.lr * 2)
    ebc_run(b, opt_b, 6, 6)
    sa, sb = snapshot(a), snapshot(b)
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    assert b["ebc"].optimizer.steps == a["ebc"].optimizer.steps == 12


def test_whole_model_pickles_and_deepcopies():
    a = ebc_model("adagrad")
    opt_a = torch.optim.SGD(a["head"].parameters(), lr=0.1)
    ebc_run(a, opt_a, 3, 0)
    buf = io.BytesIO()
    torch.save(a, buf)
    buf.seek(0)
    rng = torch.get_rng_state()
    b = torch.load(buf)
    assert torch.equal(torch.get_rng_state(), rng)  # loading draws no random numbers
    c = copy.deepcopy(a)
    for m in (b, c):
        assert m["ebc"]._sg is not a["ebc"]._sg
        sa, sm = snapshot(a), snapshot(m)
        for k in sa:
            assert torch.equal(sa[k], sm[k]), k
        assert m["ebc"].optimizer.steps == 3
    for m in (b, c):  # they train on as a does
        opt_m = torch.optim.SGD(m["head"].parameters(), lr=0.1)
        opt_m.load_state_dict(opt_a.state_dict())
        ebc_run(m, opt_m, 3, 3)
    ebc_run(a, opt_a, 3, 3)
    for m in (b, c):
        for k, v in snapshot(a).items():
            assert torch.equal(v, snapshot(m)[k]), k


def test_load_refuses_another_optimizer():
    a = st.EmbeddingBag(10, 2, optimizer=st.Adagrad(lr=0.1))
    b = st.EmbeddingBag(10, 2, optimizer=st.LazyAdam(lr=0.1))
    with pytest.raises((ValueError, RuntimeError)):
        b.load_state_dict(a.state_dict())
    c = st.EmbeddingBag(10, 2, optimizer=st.Adagrad(lr=0.1, eps=1e-3))
    with pytest.raises(ValueError, match="eps"):
        c.load_state_dict(a.state_dict())


@pytest.mark.parametrize("kind", ["adagrad", "lazy_adam"])
def test_deterministic_whatever_the_thread_counts(kind):
    results = []
    old = torch.get_num_threads()
    try:
        for torch_threads, sg_threads in ((1, 1), (2, 2), (2, 1), (1, 2)):
            torch.set_num_threads(torch_threads)
            m = ebc_model(kind)
            m["ebc"].threads = sg_threads
            opt = torch.optim.SGD(m["head"].parameters(), lr=0.1)
            ebc_run(m, opt, 5, 0)
            results.append(snapshot(m))
    finally:
        torch.set_num_threads(old)
    for r in results[1:]:
        for k in results[0]:
            assert torch.equal(results[0][k], r[k]), k
