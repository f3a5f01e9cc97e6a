"""Bad input to sgrad.torch's modules raises what a PyTorch user expects, naming the
module, before any row is written: IndexError for an index out of range (naming it),
TypeError for indices of another dtype or a non-contiguous tensor, ValueError for another
device or offsets that do not fit; check_finite=True refuses a NaN gradient in backward()
and changes nothing."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="sgrad.torch needs PyTorch (not installed)")
import sgrad  # noqa: E402
import sgrad.torch as st  # noqa: E402

MODULES = {
    "EmbeddingBag": lambda **kw: st.EmbeddingBag(10, 3, mode="sum", **kw),
    "Embedding": lambda **kw: st.Embedding(10, 3, **kw),
    "EmbeddingBagCollection": lambda **kw: st.EmbeddingBagCollection([(10, 3), (10, 2)],
                                                                     **kw),
}


def call(name, m, idx, offsets=None):
    if name == "Embedding":
        return m(idx)
    if name == "EmbeddingBag":
        return m(idx, torch.tensor([0]) if offsets is None else offsets)
    n = idx.numel() if isinstance(idx, torch.Tensor) else len(idx)
    return m(idx, lengths=torch.tensor([n, 0]) if offsets is None else offsets)


def state(m):
    return {k: v.clone() for k, v in m.state_dict().items() if isinstance(v, torch.Tensor)}


def unchanged(m, before):
    for k, v in state(m).items():
        assert torch.equal(v, before[k]), k


@pytest.mark.parametrize("name", sorted(MODULES))
def test_index_out_of_range_names_it_and_writes_nothing(name):
    m = MODULES[name](optimizer=st.Adagrad(lr=0.1))
    before = state(m)
    for bad in (10, -1):
        with pytest.raises(IndexError, match=f"sgrad.torch.{name}.*index {bad} at position 2"):
            call(name, m, torch.tensor([1, 2, bad, 3]))
    unchanged(m, before)
    assert m._sg.pending == 0 and m._sg.ctx.tape_nodes() == 0
    call(name, m, torch.tensor([1, 2, 3])).sum().backward()  # still usable


def test_max_norm_writes_nothing_on_a_bad_index():
    m = st.Embedding(10, 3, max_norm=0.01)
    before = state(m)
    with pytest.raises(IndexError, match="index 12"):
        m(torch.tensor([1, 2, 12]))
    unchanged(m, before)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_index_dtype_layout_device(name):
    m = MODULES[name]()
    prefix = f"sgrad.torch.{name}"
    with pytest.raises(TypeError, match=f"{prefix}.*int64 or int32, not torch.float32"):
        call(name, m, torch.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match=f"{prefix}.*int64 or int32"):
        call(name, m, torch.tensor([1, 2], dtype=torch.int16))
    with pytest.raises(TypeError, match=f"{prefix}.*not contiguous"):
        call(name, m, torch.arange(8)[::2])
    with pytest.raises(ValueError, match=f"{prefix}.*meta"):
        call(name, m, torch.zeros(3, dtype=torch.int64, device="meta"))
    with pytest.raises(TypeError, match=f"{prefix}.*torch.Tensor"):
        call(name, m, [1, 2])
    assert isinstance(sgrad.DtypeError("x"), TypeError)


def test_embedding_bag_offsets():
    m = st.EmbeddingBag(10, 3, mode="mean")
    idx = torch.tensor([1, 2, 3, 4])
    name = "sgrad.torch.EmbeddingBag"
    with pytest.raises(ValueError, match=f"{name}.*offsets"):
        m(idx, torch.tensor([0, 2, 9]))  # beyond the indices
    with pytest.raises(ValueError, match=f"{name}.*offsets decrease"):
        m(idx, torch.tensor([0, 3, 1]))
    with pytest.raises(ValueError, match=f"{name}.*offsets\\[0\\] must be 0"):
        m(idx, torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=f"{name}.*offsets are needed"):
        m(idx)
    with pytest.raises(ValueError, match=f"{name}.*offsets must be None"):
        m(idx.view(2, 2), torch.tensor([0]))
    with pytest.raises(TypeError, match=f"{name}.*offsets must be int64"):
        m(idx, torch.tensor([0.0]))
    with pytest.raises(ValueError, match=f"{name}.*per_sample_weights need mode='sum'"):
        m(idx, torch.tensor([0]), per_sample_weights=torch.ones(4))
    s = st.EmbeddingBag(10, 3, mode="sum")
    with pytest.raises(ValueError, match=f"{name}.*per_sample_weights of shape"):
        s(idx, torch.tensor([0]), per_sample_weights=torch.ones(3))
    with pytest.raises(TypeError, match=f"{name}.*per_sample_weights must be torch.float32"):
        s(idx, torch.tensor([0]), per_sample_weights=torch.ones(4, dtype=torch.float64))
    last = st.EmbeddingBag(10, 3, include_last_offset=True)
    with pytest.raises(ValueError, match=f"{name}.*last offset must be 4"):
        last(idx, torch.tensor([0, 2, 3]))
    with pytest.raises(ValueError, match=f"{name}.*include_last_offset=True takes 1-D"):
        last(idx.view(2, 2))


def test_collection_offsets_and_lengths():
    m = st.EmbeddingBagCollection([(10, 3), (10, 2)])
    name = "sgrad.torch.EmbeddingBagCollection"
    values = torch.tensor([1, 2, 3, 4])
    with pytest.raises(ValueError, match=f"{name}.*lengths do not sum"):
        m(values, lengths=torch.tensor([1, 1, 1, 0]))
    with pytest.raises(ValueError, match=f"{name}.*3 lengths for 2 tables"):
        m(values, lengths=torch.tensor([1, 1, 2]))
    with pytest.raises(ValueError, match=f"{name}.*lengths must be >= 0"):
        m(values, lengths=torch.tensor([3, -1, 1, 1]))
    with pytest.raises(ValueError, match=f"{name}.*exactly one of lengths and offsets"):
        m(values)
    with pytest.raises(ValueError, match=f"{name}.*K\\*B \\+ 1"):
        m(values, offsets=torch.tensor([0, 2, 4, 4]))
    with pytest.raises(ValueError, match=f"{name}.*offsets"):
        m(values, offsets=torch.tensor([0, 3, 1, 4, 4]))
    out = m(values, offsets=torch.tensor([0, 1, 2, 3, 4]))
    assert out.shape == (2, 5)


def test_constructor_arguments():
    with pytest.raises(ValueError, match="num_embeddings"):
        st.EmbeddingBag(0, 3)
    with pytest.raises(ValueError, match="mode"):
        st.EmbeddingBag(5, 3, mode="median")
    with pytest.raises(ValueError, match="padding_idx"):
        st.Embedding(5, 3, padding_idx=5)
    with pytest.raises(TypeError, match="optimizer must be one of"):
        st.EmbeddingBag(5, 3, optimizer=torch.optim.SGD)
    with pytest.raises(TypeError, match="float32 or torch.float64"):
        st.EmbeddingBag(5, 3, dtype=torch.float16)
    with pytest.raises(ValueError, match="learning rate"):
        st.SGD(lr=-1.0)
    with pytest.raises(ValueError, match="must be"):
        st.EmbeddingBagCollection([(5, 3, 1)])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_nan_gradient_is_refused_with_check_finite(name):
    m = MODULES[name](optimizer=st.LazyAdam(lr=0.1), check_finite=True)
    before = state(m)
    out = call(name, m, torch.tensor([1, 2, 3]))
    g = torch.ones_like(out)
    g.view(-1)[1] = float("nan")
    with pytest.raises(ValueError, match=f"sgrad.torch.{name}.*nan.*no row was updated"):
        out.backward(g)
    unchanged(m, before)
    assert m.optimizer.steps == 0 and m._sg.pending == 0
    call(name, m, torch.tensor([1, 2, 3])).sum().backward()
    assert m.optimizer.steps == 1


def test_nan_gradient_applies_without_check_finite():
    m = st.EmbeddingBag(10, 3, optimizer=st.SGD(lr=0.1))
    out = m(torch.tensor([1]), torch.tensor([0]))
    out.backward(torch.full((1, 3), float("nan")))
    assert torch.isnan(m.weight[1]).all() and not torch.isnan(m.weight[2]).any()


def test_error_classes_are_sgrads():
    m = st.EmbeddingBag(10, 3)
    with pytest.raises(sgrad.IndexRangeError):
        m(torch.tensor([11]), torch.tensor([0]))
    with pytest.raises(sgrad.ArgumentError):
        m(torch.tensor([1]), torch.tensor([0, 5]))
    np.testing.assert_equal(m._sg.pending, 0)
