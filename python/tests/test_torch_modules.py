"""sgrad.torch's modules against PyTorch's: the same outputs as nn.Embedding and
nn.EmbeddingBag for every mode and input form, PyTorch's sparse gradient with
optimizer=None, the weight shared with sgrad, the fused update inside backward (no .grad),
EmbeddingBagCollection as the side-by-side concatenation of its tables, and the tape's
bookkeeping (no growth when outputs are dropped or computed without grad)."""
import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="sgrad.torch needs PyTorch (not installed)")
import sgrad.torch as st  # noqa: E402
from torch import nn  # noqa: E402


def twin_bag(V=20, D=4, mode="sum", **kw):
    torch.manual_seed(0)
    ref = nn.EmbeddingBag(V, D, mode=mode, sparse=mode != "max", **kw)  # torch: max is dense
    mine = st.EmbeddingBag(V, D, mode=mode, _weight=ref.weight.detach(), **kw)
    return ref, mine


def bags(N=30, B=6, V=20, seed=1):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, V, (N,), generator=g)
    cuts = torch.sort(torch.randint(0, N + 1, (B - 1,), generator=g)).values
    return idx, torch.cat([torch.zeros(1, dtype=torch.int64), cuts])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_embedding_bag_forward_and_sparse_grad_match_torch(mode, dtype):
    ref, mine = twin_bag(mode=mode)
    idx, off = bags()
    idx, off = idx.to(dtype), off.to(dtype)
    r, m = ref(idx, off), mine(idx, off)
    assert m.requires_grad and m.dtype == torch.float32
    torch.testing.assert_close(m, r, rtol=1e-6, atol=1e-6)
    g = torch.randn_like(r)
    r.backward(g)
    m.backward(g)
    assert mine.weight.grad.is_sparse
    rg = ref.weight.grad.to_dense() if ref.weight.grad.is_sparse else ref.weight.grad
    torch.testing.assert_close(mine.weight.grad.to_dense(), rg, rtol=1e-6, atol=1e-6)


def test_embedding_bag_input_forms():
    ref, mine = twin_bag(mode="mean", include_last_offset=True)
    idx, off = bags()
    off = torch.cat([off, torch.tensor([idx.numel()])])
    torch.testing.assert_close(mine(idx, off), ref(idx, off))
    ref2, mine2 = twin_bag(mode="sum")
    x2 = torch.randint(0, 20, (5, 3))
    torch.testing.assert_close(mine2(x2), ref2(x2))  # 2-D: fixed bags, no offsets


def test_padding_idx_matches_torch():
    for mode in ("sum", "mean", "max"):
        ref, mine = twin_bag(mode=mode, padding_idx=3)
        idx = torch.tensor([3, 1, 3, 2, 3, 3, 5])
        off = torch.tensor([0, 2, 4, 6])  # a bag of padding only: zeros
        torch.testing.assert_close(mine(idx, off), ref(idx, off))
    assert st.EmbeddingBag(10, 2, padding_idx=-1).padding_idx == 9


def test_per_sample_weights_and_their_gradient():
    ref, mine = twin_bag(mode="sum")
    idx, off = bags()
    w = torch.rand(idx.numel(), requires_grad=True)
    w2 = w.detach().clone().requires_grad_(True)
    r, m = ref(idx, off, per_sample_weights=w), mine(idx, off, per_sample_weights=w2)
    torch.testing.assert_close(m, r)
    g = torch.randn_like(r)
    r.backward(g)
    m.backward(g)
    torch.testing.assert_close(w2.grad, w.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mine.weight.grad.to_dense(), ref.weight.grad.to_dense())


def test_embedding_matches_torch():
    torch.manual_seed(0)
    ref = nn.Embedding(15, 3, sparse=True, padding_idx=2)
    mine = st.Embedding(15, 3, padding_idx=2, _weight=ref.weight.detach())
    x = torch.tensor([[1, 2, 4], [14, 0, 2]])
    r, m = ref(x), mine(x)
    assert m.shape == (2, 3, 3)
    torch.testing.assert_close(m, r)
    g = torch.randn_like(r)
    r.backward(g)
    m.backward(g)
    torch.testing.assert_close(mine.weight.grad.to_dense(), ref.weight.grad.to_dense())


def test_embedding_max_norm_renormalises_in_place():
    torch.manual_seed(0)
    ref = nn.Embedding(6, 4, max_norm=1.0)
    mine = st.Embedding(6, 4, max_norm=1.0, _weight=ref.weight.detach() * 3)
    with torch.no_grad():
        ref.weight.mul_(3)
    x = torch.tensor([0, 2, 2])
    torch.testing.assert_close(mine(x), ref(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mine.weight, ref.weight, rtol=1e-5, atol=1e-6)


def test_default_init_follows_torch_generator():
    torch.manual_seed(3)
    ref = nn.EmbeddingBag(50, 8)
    torch.manual_seed(3)
    mine = st.EmbeddingBag(50, 8)
    assert torch.equal(mine.weight, ref.weight.detach())


def test_weight_is_sgrad_memory():
    m = st.EmbeddingBag(10, 3, optimizer=st.SGD(lr=0.5))
    table = m._sg.tables[0]
    assert m.weight.data_ptr() == table.data_ptr
    with torch.no_grad():
        m.weight[4] = 7.0
    assert np.all(table.numpy()[4] == 7.0)
    assert not m.weight.requires_grad  # fused: torch optimizers leave it alone


def test_fused_update_happens_in_backward_without_grad():
    m = st.EmbeddingBag(10, 3, mode="sum", optimizer=st.SGD(lr=0.5))
    before = m.weight.detach().clone()
    out = m(torch.tensor([1, 1, 4]), torch.tensor([0, 2]))
    assert torch.equal(m.weight, before)  # nothing before the backward
    out.backward(torch.ones(2, 3))
    expected = before.clone()
    expected[1] -= 0.5 * 2  # row 1 twice in bag 0
    expected[4] -= 0.5
    torch.testing.assert_close(m.weight.detach(), expected)
    assert m.weight.grad is None
    assert m.optimizer.steps == 1


def test_optimizer_none_works_with_torch_optimizers():
    torch.manual_seed(0)
    ref = nn.EmbeddingBag(30, 4, mode="sum", sparse=True)
    mine = st.EmbeddingBag(30, 4, mode="sum", _weight=ref.weight.detach())
    opts = [torch.optim.SparseAdam([ref.weight], lr=0.01),
            torch.optim.SparseAdam([mine.weight], lr=0.01)]
    for step in range(10):
        idx, off = bags(V=30, seed=step)
        for mod, opt in zip((ref, mine), opts):
            opt.zero_grad()
            (mod(idx, off) ** 2).sum().backward()
            opt.step()
    torch.testing.assert_close(mine.weight.detach(), ref.weight.detach(), rtol=1e-5,
                               atol=1e-6)


def kjt(tables, B, seed=0, pooling_max=4):
    """values, lengths (K*B) and the per-table (idx, offsets) they mean."""
    g = torch.Generator().manual_seed(seed)
    vals, lens, per = [], [], []
    for V in tables:
        ln = torch.randint(0, pooling_max + 1, (B,), generator=g)
        v = torch.randint(0, V, (int(ln.sum()),), generator=g)
        off = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(ln, 0)[:-1]])
        vals.append(v)
        lens.append(ln)
        per.append((v, off))
    return torch.cat(vals), torch.cat(lens), per


def test_collection_concatenates_its_tables():
    shapes = [(20, 4), (7, 2), (30, 3)]
    torch.manual_seed(0)
    refs = [nn.EmbeddingBag(n, d, mode="sum", sparse=True) for n, d in shapes]
    ebc = st.EmbeddingBagCollection(shapes, optimizer=None)
    for k, r in zip(ebc.keys, refs):
        with torch.no_grad():
            ebc.embedding_bags[k].weight.copy_(r.weight)
    values, lengths, per = kjt([n for n, _ in shapes], B=5)
    out = ebc(values, lengths=lengths)
    expected = torch.cat([r(i, o) for r, (i, o) in zip(refs, per)], dim=1)
    assert out.shape == (5, 9)
    torch.testing.assert_close(out, expected)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    torch.testing.assert_close(ebc(values, offsets=offsets), expected)
    torch.testing.assert_close(ebc(values, lengths=lengths.view(3, 5)), expected)
    g = torch.randn_like(expected)
    expected.backward(g)
    ebc(values, lengths=lengths).backward(g)
    for k, r in zip(ebc.keys, refs):
        torch.testing.assert_close(ebc.embedding_bags[k].weight.grad.to_dense(),
                                   r.weight.grad.to_dense())


def test_collection_takes_a_keyed_jagged_tensor_and_weights():
    class KJT:  # TorchRec's interface, duck-typed
        def __init__(self, v, ln, w):
            self._v, self._l, self._w = v, ln, w

        def values(self):
            return self._v

        def lengths(self):
            return self._l

        def weights_or_none(self):
            return self._w

    shapes = {"user": (12, 3), "item": (9, 3)}
    ebc = st.EmbeddingBagCollection(shapes, optimizer=st.Adagrad(lr=0.1))
    values, lengths, per = kjt([12, 9], B=4, seed=3)
    w = torch.rand(values.numel())
    out = ebc(KJT(values, lengths, w))
    W = [ebc.embedding_bags[k].weight.detach() for k in ("user", "item")]
    n0 = int(lengths[:4].sum())
    expected = torch.cat([
        nn.functional.embedding_bag(per[0][0], W[0], per[0][1], mode="sum",
                                    per_sample_weights=w[:n0]),
        nn.functional.embedding_bag(per[1][0], W[1], per[1][1], mode="sum",
                                    per_sample_weights=w[n0:])], dim=1)
    torch.testing.assert_close(out, expected)
    assert list(ebc.state_dict()) == [
        "_extra_state", "embedding_bags.user.weight", "embedding_bags.user.optimizer_state.step",
        "embedding_bags.user.optimizer_state.sum", "embedding_bags.item.weight",
        "embedding_bags.item.optimizer_state.step", "embedding_bags.item.optimizer_state.sum"]


def test_collection_fused_updates_every_table_once():
    ebc = st.EmbeddingBagCollection([(10, 2), (10, 3)], optimizer=st.SGD(lr=1.0))
    before = [w.detach().clone() for w in ebc._weights]
    values = torch.tensor([1, 2, 2, 5])
    out = ebc(values, lengths=torch.tensor([1, 1, 1, 1]))  # B = 2
    out.backward(torch.ones(2, 5))
    after = [w.detach() for w in ebc._weights]
    d0, d1 = before[0] - after[0], before[1] - after[1]
    assert torch.equal(d0[1], torch.ones(2)) and torch.equal(d0[2], torch.ones(2))
    assert torch.equal(d1[2], torch.ones(3)) and torch.equal(d1[5], torch.ones(3))
    assert float(d0.abs().sum()) == 4 and float(d1.abs().sum()) == 6
    assert ebc.optimizer.steps == 1


def test_tape_is_reset_and_outputs_can_be_dropped():
    m = st.EmbeddingBag(10, 2, optimizer=st.Adagrad(lr=0.1))
    idx, off = torch.tensor([1, 2, 3]), torch.tensor([0, 1])
    a = m(idx, off)
    b = m(idx, off)  # two outputs awaiting backward
    assert m._sg.pending == 2 and m._sg.ctx.tape_nodes() > 0
    a.sum().backward()
    assert m._sg.pending == 1 and m._sg.ctx.tape_nodes() > 0
    del b  # dropped without backward: its tape goes
    gc.collect()
    assert m._sg.pending == 0 and m._sg.ctx.tape_nodes() == 0
    with torch.no_grad():
        c = m(idx, off)
    assert not c.requires_grad and m._sg.pending == 0 and m._sg.ctx.tape_nodes() == 0
    for _ in range(50):
        m(idx, off).sum().backward()
    assert m._sg.ctx.tape_nodes() == 0 and m.optimizer.steps == 51


def test_a_second_backward_is_refused():
    m = st.EmbeddingBag(10, 2, optimizer=st.SGD(lr=0.1))
    out = m(torch.tensor([1, 2]), torch.tensor([0]))
    out.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="ran already"):
        out.sum().backward()


def test_index_changed_in_place_is_caught():
    m = st.EmbeddingBag(10, 2, optimizer=st.SGD(lr=0.1))
    idx = torch.tensor([1, 2, 3])
    out = m(idx, torch.tensor([0]))
    idx[0] = 9
    before = m.weight.detach().clone()
    with pytest.raises(RuntimeError, match="inplace"):
        out.sum().backward()
    assert torch.equal(m.weight.detach(), before)
    del out
    gc.collect()
    assert m._sg.pending == 0


def test_threads_follow_torch():
    m = st.EmbeddingBag(10, 2)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        m(torch.tensor([1]), torch.tensor([0]))
        assert m._sg.ctx.threads == 2 and m.threads == 2
        torch.set_num_threads(1)
        m(torch.tensor([1]), torch.tensor([0]))
        assert m._sg.ctx.threads == 1
        m.threads = 2  # told otherwise: fixed
        m(torch.tensor([1]), torch.tensor([0]))
        assert m._sg.ctx.threads == 2
    finally:
        torch.set_num_threads(old)


def test_weight_replaced_is_detected():
    m = st.EmbeddingBag(10, 2)
    m.weight = nn.Parameter(torch.zeros(10, 2))
    with pytest.raises(RuntimeError, match="no longer shares"):
        m(torch.tensor([1]), torch.tensor([0]))


def test_repr_and_float64():
    m = st.Embedding(4, 2, optimizer=st.LazyAdam(lr=0.01), dtype=torch.float64)
    assert "LazyAdam" in repr(m) and m.weight.dtype == torch.float64
    out = m(torch.tensor([0, 3]))
    assert out.dtype == torch.float64
    out.sum().backward()
    assert m.optimizer.steps == 1


def test_set_num_threads_sets_torch_sgrad_and_openblas():
    old, old_blas = torch.get_num_threads(), st.blas_threads()
    m = st.EmbeddingBag(10, 2)
    try:
        st.set_num_threads(1)
        m(torch.tensor([1]), torch.tensor([0]))
        assert torch.get_num_threads() == 1 and m._sg.ctx.threads == 1
        if old_blas is not None:
            assert st.blas_threads() == 1
        st.set_num_threads(2)
        m(torch.tensor([1]), torch.tensor([0]))
        assert torch.get_num_threads() == 2 and m._sg.ctx.threads == 2
        if old_blas is not None:
            assert st.blas_threads() == 2
        st.set_num_threads(2, blas_threads=1)
        assert torch.get_num_threads() == 2
        if old_blas is not None:
            assert st.blas_threads() == 1
        with pytest.raises(ValueError):
            st.set_num_threads(0)
        st.set_num_threads(1)
        with pytest.raises(ValueError, match="blas_threads"):
            st.set_num_threads(2, blas_threads=0)
        assert torch.get_num_threads() == 1  # refused before anything was set
    finally:
        torch.set_num_threads(old)
        if old_blas is not None:
            st._openblas().openblas_set_num_threads(old_blas)


def test_many_outputs_kept_without_backward_warn_once():
    m = st.EmbeddingBag(10, 2, optimizer=st.SGD(lr=0.1))
    kept = []
    with pytest.warns(ResourceWarning, match="await their backward"):
        for _ in range(70):
            kept.append(m(torch.tensor([1]), torch.tensor([0])))
    del kept
    gc.collect()
    assert m._sg.pending == 0 and m._sg.ctx.tape_nodes() == 0


@pytest.mark.parametrize("D", [32, 64, 128, 5])
@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bag_sums_in_entry_order_bitwise(D, mode, dtype):
    """Each bag's sum is its rows added one by one in entry order (padding left out, an
    empty bag zero), whatever the width: checked bit for bit against that loop."""
    torch.manual_seed(D)
    V, pad = 40, 7
    mine = st.EmbeddingBag(V, D, mode=mode, padding_idx=pad, dtype=dtype)
    idx, off = bags(N=200, B=30, V=V, seed=D)
    off[3] = off[4]  # bag 3 empty
    W = mine.weight.detach().numpy()
    expected = np.zeros((30, D), W.dtype)
    ends = off.tolist()[1:] + [idx.numel()]
    for b, (s, e) in enumerate(zip(off.tolist(), ends)):
        rows = [r for r in idx[s:e].tolist() if r != pad]
        for r in rows:
            expected[b] += W[r]
        if mode == "mean" and rows:
            expected[b] /= W.dtype.type(len(rows))
    got = mine(idx, off).detach().numpy()
    assert np.array_equal(got, expected)


def test_forward_without_grad_reads_its_outputs_before_the_tape_goes():
    """Under no_grad the tape is reset as soon as the forward's outputs are copied: the
    copy must come first (outputs of a MB and more are freed at the reset)."""
    torch.manual_seed(0)
    ref = nn.EmbeddingBag(1000, 64, mode="sum")
    ebc = st.EmbeddingBagCollection([(1000, 64)] * 3, optimizer=st.Adagrad(lr=0.1))
    for k in ebc.keys:
        with torch.no_grad():
            ebc.embedding_bags[k].weight.copy_(ref.weight)
    g = torch.Generator().manual_seed(2)
    values = torch.randint(0, 1000, (3 * 4096 * 4,), generator=g)
    lengths = torch.full((3 * 4096,), 4, dtype=torch.int64)
    with torch.no_grad():
        out = ebc(values, lengths=lengths)
    expected = torch.cat([ref(values[k * 16384:(k + 1) * 16384].view(4096, 4))
                          for k in range(3)], dim=1)
    torch.testing.assert_close(out, expected)
    assert ebc._sg.pending == 0 and ebc._sg.ctx.tape_nodes() == 0
