"""PyTorch's optimizer interface: param_groups (per-group lr and hyperparameters, lr
changes taking effect at the next step), zero_grad() (gradients cleared, the tape reset
only when safe), the state mapping, AdamW."""
import warnings

import numpy as np
import pytest

import sgrad


def dense_params(ctx, *values):
    arrays = [np.array(v, dtype=np.float64) for v in values]
    return arrays, [sgrad.from_numpy(a, requires_grad=True, ctx=ctx) for a in arrays]


def backward_ones(ps):
    """loss = sum of every parameter: gradient 1 everywhere."""
    sum(p.sum() for p in ps).backward()


# ---------------------------------------------------------------- param_groups

def test_groups_have_their_own_lr_and_hyperparameters():
    ctx = sgrad.Context()
    (a, b), (A, B) = dense_params(ctx, [1.0, 2.0], [3.0])
    opt = sgrad.optim.SGD([{"params": [A], "weight_decay": 0.5}, {"params": B, "lr": 0.01}],
                          lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    assert opt.param_groups[0]["weight_decay"] == 0.5 and opt.param_groups[1]["weight_decay"] == 0
    assert opt.param_groups[1]["params"] == [B] and opt.params == [A, B]
    backward_ones([A, B])
    opt.step()
    np.testing.assert_array_equal(a, [1.0 - 0.1 * (1 + 0.5), 2.0 - 0.1 * (1 + 1.0)])
    np.testing.assert_array_equal(b, [3.0 - 0.01])


def test_lr_change_takes_effect_at_the_next_step():
    ctx = sgrad.Context()
    (a, b), (A, B) = dense_params(ctx, [0.0], [0.0])
    opt = sgrad.optim.SGD([{"params": [A]}, {"params": [B]}], lr=0.5)
    opt.param_groups[0]["lr"] = 0.25
    opt.param_groups[1].update(lr=0.125)  # not through __setitem__: synced at the step
    backward_ones([A, B])
    opt.step()
    assert (a[0], b[0]) == (-0.25, -0.125)
    with pytest.raises(ValueError, match="different learning rates"):
        opt.lr
    opt.lr = 2.0  # every group
    assert [g["lr"] for g in opt.param_groups] == [2.0, 2.0] and opt.lr == 2.0
    opt.zero_grad()
    backward_ones([A, B])
    opt.step()
    assert (a[0], b[0]) == (-2.25, -2.125)


def test_bad_group_changes_raise_at_the_step_and_change_nothing():
    ctx = sgrad.Context()
    (a, b), (A, B) = dense_params(ctx, [0.0], [0.0])
    opt = sgrad.optim.SGD([{"params": [A]}, {"params": [B]}], lr=0.5, momentum=0.9)
    backward_ones([A, B])
    opt.param_groups[0]["lr"] = 0.1
    opt.param_groups[1]["lr"] = -1.0
    with pytest.raises(sgrad.ArgumentError, match=r"param_groups\[1\]\['lr'\]"):
        opt.step()
    assert (a[0], b[0]) == (0.0, 0.0) and opt.steps == 0
    opt.param_groups[1]["lr"] = 0.5
    opt.param_groups[0]["momentum"] = 0.5
    with pytest.raises(ValueError, match=r"param_groups\[0\]\['momentum'\].*only 'lr'"):
        opt.step()
    opt.param_groups[0]["momentum"] = 0.9
    opt.step()
    assert (a[0], b[0]) == (-0.1, -0.5) and opt.steps == 1


def test_group_errors():
    ctx = sgrad.Context()
    _, (A, B) = dense_params(ctx, [0.0], [0.0])
    with pytest.raises(ValueError, match="more than one parameter group"):
        sgrad.optim.SGD([{"params": [A]}, {"params": [A, B]}], lr=0.1)
    with pytest.raises(ValueError, match="lr is required"):
        sgrad.optim.SGD([{"params": [A]}, {"params": [B], "lr": 0.1}])
    with pytest.raises(ValueError, match="empty parameter list"):
        sgrad.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError):
        sgrad.optim.SGD([np.zeros(2)], lr=0.1)
    with pytest.raises(sgrad.ArgumentError):
        sgrad.optim.Adam([A], betas=(1.5, 0.9))
    other = sgrad.Context()
    with pytest.raises(ValueError, match="one Context"):
        sgrad.optim.SGD([A, other.tensor([1.0], requires_grad=True)], lr=0.1)
    # a failed group leaves the parameters free for another optimizer
    sgrad.optim.SGD([A, B], lr=0.1)


def test_add_param_group_starts_at_the_optimizers_step_count():
    ctx = sgrad.Context()
    (a, b), (A, B) = dense_params(ctx, [0.0], [0.0])
    opt = sgrad.optim.Adam([A], lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        backward_ones([A])
        opt.step()
    opt.add_param_group({"params": [B], "lr": 0.2, "name": "late"})
    assert opt.steps == 3 and opt.param_groups[1]["name"] == "late"
    assert opt.param_groups[1]["betas"] == (0.9, 0.999)
    opt.zero_grad()
    backward_ones([A, B])
    opt.step()
    assert opt.steps == 4 and int(opt.state[B]["step"]) == 1
    assert b[0] == pytest.approx(-0.2)  # Adam's first step: lr * sign(g)


def test_state_is_a_mapping_and_a_call():
    ctx = sgrad.Context()
    _, (A, B) = dense_params(ctx, [1.0], [2.0])
    opt = sgrad.optim.Adam([{"params": [A]}, {"params": [B]}], lr=0.1)
    backward_ones([A, B])
    opt.step()
    assert list(opt.state) == [A, B] and len(opt.state) == 2 and A in opt.state
    assert opt.state[B].keys() == opt.state(B).keys() == {"step", "exp_avg", "exp_avg_sq"}
    st = opt.state[A]
    st["exp_avg"][...] = 7  # a copy
    assert opt.state[A]["exp_avg"][0] == pytest.approx(0.1)
    with pytest.raises(KeyError):
        opt.state[ctx.tensor([1.0], requires_grad=True)]


def test_adamw_is_adam_decoupled():
    out = []
    for make in (lambda p: sgrad.optim.AdamW(p, lr=0.1),
                 lambda p: sgrad.optim.Adam(p, lr=0.1, weight_decay=1e-2, decoupled=True)):
        ctx = sgrad.Context()
        (a,), (A,) = dense_params(ctx, [1.0, -2.0])
        opt = make([A])
        for _ in range(3):
            opt.zero_grad()
            (A * A).sum().backward()
            opt.step()
        out.append(a.copy())
    np.testing.assert_array_equal(out[0], out[1])
    assert sgrad.optim.AdamW([sgrad.Context().tensor([1.0], requires_grad=True)]) \
        .param_groups[0]["decoupled"] is True


# ---------------------------------------------------------------- zero_grad and the tape

def test_gradient_accumulation_then_zero_grad():
    # K backwards on K micro-batches, one step, zero_grad: the step applies the sum, and
    # zero_grad (nothing ran since the step) resets the tape
    ctx = sgrad.Context()
    (a,), (A,) = dense_params(ctx, [1.0, 2.0])
    opt = sgrad.optim.SGD([A], lr=0.1)
    for k in (1.0, 2.0, 3.0):
        (A * k).sum().backward()
    np.testing.assert_array_equal(A.grad, [6.0, 6.0])
    opt.step()
    np.testing.assert_allclose(a, [1.0 - 0.6, 2.0 - 0.6], rtol=1e-15)
    assert ctx.tape_nodes() > 0
    assert opt.zero_grad() is True
    assert A.grad is None and ctx.tape_nodes() == 0


def test_pytorch_loops_keep_the_tape_short():
    ctx = sgrad.Context()
    W = sgrad.from_numpy(np.ones((10, 3)), requires_grad=True, ctx=ctx)
    opt = sgrad.optim.SGD([W], lr=0.1, momentum=0.9)
    sizes = []
    for t in range(5):  # zero_grad first
        opt.zero_grad()
        e = sgrad.embedding(W, [t, t + 1, 2])
        (e * e).sum().backward()
        opt.step()
        sizes.append(ctx.tape_nodes())
    assert opt.zero_grad() is True
    for t in range(5):  # zero_grad after the step
        e = sgrad.embedding(W, [t, t + 1, 2])
        loss = (e * e).sum()
        loss.backward()
        opt.step()
        loss.item()  # read before zero_grad
        sizes.append(ctx.tape_nodes())
        assert opt.zero_grad() is True
    assert len(set(sizes)) == 1  # the tape never grows across steps
    e = sgrad.embedding(W, [1])
    loss = e.sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    with pytest.raises(sgrad.StaleTensorError):
        loss.item()  # documented: step tensors die at the reset


def test_forward_before_zero_grad_keeps_the_tape_and_warns_when_it_grows():
    # `loss = f(x); opt.zero_grad(); loss.backward(); opt.step()` (an older PyTorch order)
    ctx = sgrad.Context()
    (a,), (A,) = dense_params(ctx, [0.0])
    opt = sgrad.optim.SGD([A], lr=0.5)
    loss = (A * 2.0).sum()
    assert opt.zero_grad() is False  # a forward awaits its backward
    loss.backward()
    np.testing.assert_array_equal(A.grad, [2.0])
    opt.step()
    assert a[0] == -1.0
    loss = (A * 2.0).sum()
    with pytest.warns(UserWarning, match="kept the tape twice"):
        assert opt.zero_grad() is False
    loss.backward()
    np.testing.assert_array_equal(A.grad, [2.0])  # only this backward's gradient
    opt.step()
    assert a[0] == -2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert opt.zero_grad() is True  # nothing ran since the step: reset, no warning


def test_zero_grad_leaves_other_optimizers_gradients():
    ctx = sgrad.Context()
    (a, b), (A, B) = dense_params(ctx, [0.0], [0.0])
    x = ctx.tensor([1.0, 2.0], requires_grad=True)
    opt1, opt2 = sgrad.optim.SGD([A], lr=0.5), sgrad.optim.SGD([B], lr=0.25)
    ((A + B) * x).sum().backward()
    opt1.step()
    opt2.step()
    assert opt1.zero_grad() is False  # B (and x) still hold gradients
    assert A.grad is None
    np.testing.assert_array_equal(B.grad, [3.0])
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])
    assert opt2.zero_grad() is False  # x still holds one: an input that requires grad
    assert B.grad is None and x.grad is not None
    assert opt2.zero_grad(reset_tape=True) is True and x.grad is None
    assert ctx.tape_nodes() == 0


def test_zero_grad_reset_tape_false_keeps_step_tensors():
    ctx = sgrad.Context()
    (a,), (A,) = dense_params(ctx, [0.0, 1.0])
    opt = sgrad.optim.Adagrad([A], lr=0.1)
    loss = (A * A).sum()
    loss.backward()
    opt.step()
    assert opt.zero_grad(set_to_none=False, reset_tape=False) is False
    assert A.grad is None and loss.item() == 1.0
    opt.step()  # no gradient: nothing moves
    assert int(opt.state[A]["step"]) == 1


def test_zero_grad_drops_a_sparse_gradient():
    ctx = sgrad.Context()
    W = sgrad.from_numpy(np.ones((4, 2)), requires_grad=True, ctx=ctx)
    opt = sgrad.optim.LazyAdam([W], lr=0.1)
    sgrad.embedding(W, [1, 3]).sum().backward()
    assert W.grad.is_sparse
    opt.zero_grad(reset_tape=False)
    assert W.grad is None
    sgrad.embedding(W, [0]).sum().backward()  # starts from zero
    np.testing.assert_array_equal(W.grad.to_numpy_dense()[[1, 3]], 0)
    opt.step()
    np.testing.assert_array_equal(opt.state[W]["row_step"], [1, 0, 0, 0])
