"""Optimizer state_dict()/load_state_dict() and checkpoints resume bitwise: N steps, a
state_dict (through pickle), a fresh Context, model and optimizer loaded from it (the
parameters copied too), M more steps equal N + M steps without the interruption, bit for
bit. The data are test_optim.py's: an embedding table with sparse gradients on the even
rows only, so exact lazy SGD has rows behind when the state is taken and LazyAdam rows
with different step counts."""
import copy
import os
import pickle

import numpy as np
import pytest

import sgrad
from sgrad.optim import lr_scheduler as L

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = np.load(os.path.join(HERE, "fixtures", "optim.npz"))
N, M = 7, 9

CONFIGS = {
    "sgd_momentum_wd": lambda p: sgrad.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01,
                                                 dampening=0.1),
    "sgd_wd_only": lambda p: sgrad.optim.SGD(p, lr=0.1, weight_decay=0.05),
    "sgd_nesterov": lambda p: sgrad.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "adagrad": lambda p: sgrad.optim.Adagrad(p, lr=0.1, lr_decay=0.01,
                                             initial_accumulator_value=0.1),
    "rowwise_adagrad": lambda p: sgrad.optim.RowWiseAdagrad(p, lr=0.1),
    "adam": lambda p: sgrad.optim.Adam(p, lr=0.01, weight_decay=0.01),
    "adamw": lambda p: sgrad.optim.AdamW(p, lr=0.01),
    "lazy_adam": lambda p: sgrad.optim.LazyAdam(p, lr=0.01),
}


def model(ctx, W0, dtype):
    """The table W and a small dense bias b (two parameters: one sparse, one dense grad)."""
    W = sgrad.from_numpy(np.array(W0, dtype=dtype), requires_grad=True, ctx=ctx)
    b = sgrad.from_numpy(np.linspace(-1, 1, 4).astype(dtype), requires_grad=True, ctx=ctx)
    return W, b


def train(ctx, W, b, opt, first, last, dtype, scheds=()):
    for t in range(first, last):
        opt.zero_grad()
        d = sgrad.embedding(W, FIX["idx"][t]) + b - FIX["T"][t].astype(dtype)
        ((d * d).sum() * 0.5).backward()
        opt.step()
        for s in scheds:
            s.step()


def uninterrupted(name, dtype, sched=None):
    ctx = sgrad.Context()
    W, b = model(ctx, FIX["W0"], dtype)
    opt = CONFIGS[name]([W, b])
    scheds = [sched(opt)] if sched else []
    train(ctx, W, b, opt, 0, N + M, dtype, scheds)
    opt.flush()
    return W.numpy().copy(), b.numpy().copy(), opt.state_dict()


def resumed(name, dtype, sched=None, flush_source=False):
    ctx = sgrad.Context()
    W, b = model(ctx, FIX["W0"], dtype)
    opt = CONFIGS[name]([W, b])
    scheds = [sched(opt)] if sched else []
    train(ctx, W, b, opt, 0, N, dtype, scheds)
    saved = pickle.loads(pickle.dumps(opt.state_dict()))
    saved_scheds = [s.state_dict() for s in scheds]
    if flush_source:
        opt.flush()  # the parameters copied below are then caught up, the state is not
    W_raw, b_raw = W.numpy().copy(), b.numpy().copy()
    train(ctx, W, b, opt, N, N + 2, dtype, scheds)  # the source goes on: saved is a copy
    ctx.close()

    ctx2 = sgrad.Context()
    W2, b2 = model(ctx2, W_raw, dtype)
    b2.numpy()[...] = b_raw
    opt2 = CONFIGS[name]([W2, b2])
    scheds2 = [sched(opt2)] if sched else []
    opt2.load_state_dict(saved)
    for s, sd in zip(scheds2, saved_scheds):
        s.load_state_dict(sd)
    assert opt2.steps == N
    train(ctx2, W2, b2, opt2, N, N + M, dtype, scheds2)
    opt2.flush()
    return W2.numpy().copy(), b2.numpy().copy(), opt2.state_dict()


def assert_same_state(a, b):
    assert a["param_groups"] == b["param_groups"] and a["steps"] == b["steps"]
    assert a["state"].keys() == b["state"].keys()
    for i in a["state"]:
        assert a["state"][i].keys() == b["state"][i].keys()
        for k in a["state"][i]:
            np.testing.assert_array_equal(a["state"][i][k], b["state"][i][k], err_msg=k)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_state_dict_resumes_bitwise(name, dtype):
    Wa, ba, sa = uninterrupted(name, dtype)
    Wb, bb, sb = resumed(name, dtype)
    np.testing.assert_array_equal(Wb, Wa)
    np.testing.assert_array_equal(bb, ba)
    assert_same_state(sa, sb)


def test_lazy_sgd_under_a_schedule_resumes_bitwise_from_flushed_parameters():
    # a cosine schedule gives every step its own lr: the rows behind at the save need the
    # whole history (lr_run_*) to catch up; the parameters copied after a flush of the
    # source are caught up, the state is not: lagging_param puts the saved rows back
    sched = lambda opt: L.CosineAnnealingLR(opt, T_max=6, eta_min=0.01)  # noqa: E731
    Wa, ba, sa = uninterrupted("sgd_momentum_wd", np.float64, sched)
    for flush_source in (False, True):
        Wb, bb, sb = resumed("sgd_momentum_wd", np.float64, sched, flush_source)
        np.testing.assert_array_equal(Wb, Wa)
        assert_same_state(sa, sb)


def test_lazy_sgd_state_dict_holds_its_bookkeeping():
    ctx = sgrad.Context()
    W, b = model(ctx, FIX["W0"], np.float64)
    opt = CONFIGS["sgd_momentum_wd"]([W, b])
    train(ctx, W, b, opt, 0, 3, np.float64)
    before = W.numpy().copy()
    st = opt.state_dict()
    np.testing.assert_array_equal(W.numpy(), before)  # nothing flushed
    s = st["state"][0]
    assert set(s) == {"step", "momentum_buffer", "last_step", "lr_run_start", "lr_run_lr",
                      "lagging_rows", "lagging_param"}
    assert int(s["step"]) == 3 and st["steps"] == 3 and st["optimizer"] == "sgd"
    odd = np.arange(1, 20, 2)
    assert set(odd) <= set(s["lagging_rows"])  # the odd rows never got a gradient
    np.testing.assert_array_equal(s["lagging_rows"], np.flatnonzero(s["last_step"] < 3))
    np.testing.assert_array_equal(s["lagging_param"], before[s["lagging_rows"]])
    np.testing.assert_array_equal(s["lr_run_start"], [1]) and s["lr_run_lr"].tolist() == [0.1]
    assert st["param_groups"] == [{"lr": 0.1, "momentum": 0.9, "dampening": 0.1,
                                   "weight_decay": 0.01, "nesterov": False, "params": [0, 1]}]


def snapshot(opt, *params):
    return copy.deepcopy(opt.state_dict()), [p.numpy().copy() for p in params]


def test_load_state_dict_refuses_before_changing_anything():
    ctx = sgrad.Context()
    W, b = model(ctx, FIX["W0"], np.float64)
    opt = sgrad.optim.Adam([W, b], lr=0.01)
    train(ctx, W, b, opt, 0, 2, np.float64)
    good = opt.state_dict()
    before, params = snapshot(opt, W, b)

    sgd = sgrad.optim.SGD([ctx.tensor(np.ones((20, 4)), requires_grad=True),
                           ctx.tensor(np.ones(4), requires_grad=True)], lr=0.1, momentum=0.9)
    other = sgd.state_dict()
    cases = []
    cases.append((other, r"\['optimizer'\] is 'sgd'"))
    no_kind = dict(other)
    del no_kind["optimizer"]
    cases.append((no_kind, "momentum_buffer"))
    small = sgrad.optim.Adam([ctx.tensor(np.ones((3, 4)), requires_grad=True),
                              ctx.tensor(np.ones(4), requires_grad=True)], lr=0.01)
    cases.append((small.state_dict(), r"\['state'\]\[0\]\['exp_avg'\] has shape \(3, 4\)"))
    bad = copy.deepcopy(good)
    bad["param_groups"][0]["betas"] = (0.5, 0.999)
    cases.append((bad, r"\['betas'\]"))
    bad = copy.deepcopy(good)
    bad["state"][1]["step"] = np.array(-1)
    cases.append((bad, r"\['state'\]\[1\]\['step'\]"))
    bad = copy.deepcopy(good)
    bad["param_groups"][0]["lr"] = float("nan")
    cases.append((bad, r"\['lr'\]"))
    bad = copy.deepcopy(good)
    del bad["state"][1]
    cases.append((bad, "no entry for parameter 1"))
    bad = copy.deepcopy(good)
    bad["param_groups"][0]["params"] = [0]
    cases.append((bad, "lists 1 parameters"))
    bad = copy.deepcopy(good)
    bad["state"][0]["exp_avg"] = bad["state"][0]["exp_avg"].astype(bool).astype(object)
    cases.append((bad, "real numbers expected"))
    for sd, match in cases:
        with pytest.raises(ValueError, match=match):
            opt.load_state_dict(sd)
        after, now = snapshot(opt, W, b)
        assert_same_state(before, after)
        for x, y in zip(params, now):
            np.testing.assert_array_equal(x, y)
    opt.load_state_dict(good)  # the right one still loads


def test_lazy_sgd_load_checks_its_bookkeeping():
    ctx = sgrad.Context()
    W, b = model(ctx, FIX["W0"], np.float64)
    opt = CONFIGS["sgd_momentum_wd"]([W, b])
    train(ctx, W, b, opt, 0, 3, np.float64)
    good = opt.state_dict()
    for key, value, match in [
            ("lagging_rows", np.array([0]), "lagging_rows"),
            ("lr_run_start", np.zeros(0, np.int64), "lr_run_start"),
            ("lr_run_start", np.array([2, 2]), "ascend"),
            ("lr_run_start", np.array([0]), "ascend"),
            ("last_step", np.full(20, 4), "last_step"),
            ("lagging_param", np.zeros((1, 4)), "lagging_param")]:
        bad = copy.deepcopy(good)
        bad["state"][0][key] = value
        if key == "lr_run_start":
            bad["state"][0]["lr_run_lr"] = np.full(len(value), 0.1)
        with pytest.raises(ValueError, match=match):
            opt.load_state_dict(bad)


def test_param_groups_resume_bitwise():
    # two groups (two C optimizers, different lrs and weight decay) through a state_dict
    def make(W, b):
        return sgrad.optim.SGD([{"params": [W], "weight_decay": 0.01},
                                {"params": [b], "lr": 0.02}], lr=0.1, momentum=0.9)

    def run(resume):
        ctx = sgrad.Context()
        W, b = model(ctx, FIX["W0"], np.float64)
        opt = make(W, b)
        train(ctx, W, b, opt, 0, N, np.float64)
        if resume:
            saved, raw = opt.state_dict(), [W.numpy().copy(), b.numpy().copy()]
            ctx = sgrad.Context()
            W, b = model(ctx, raw[0], np.float64)
            b.numpy()[...] = raw[1]
            opt = make(W, b)
            opt.load_state_dict(saved)
        train(ctx, W, b, opt, N, N + M, np.float64)
        opt.flush()
        return W.numpy().copy(), b.numpy().copy()

    for x, y in zip(run(False), run(True)):
        np.testing.assert_array_equal(x, y)


def test_checkpoint_round_trip_with_a_scheduler(tmp_path):
    # save_checkpoint keeps the lr a scheduler set (the C optimizer's base lr); the
    # scheduler's own counters come from its state_dict
    path = str(tmp_path / "ck.safetensors")
    sched = lambda opt: L.StepLR(opt, step_size=3, gamma=0.5)  # noqa: E731
    Wa, ba, _ = uninterrupted("sgd_momentum_wd", np.float64, sched)

    ctx = sgrad.Context()
    W, b = model(ctx, FIX["W0"], np.float64)
    opt = CONFIGS["sgd_momentum_wd"]([W, b])
    s = sched(opt)
    train(ctx, W, b, opt, 0, N, np.float64, [s])
    sgrad.save_checkpoint(path, {"W": W, "b": b}, optim=opt)
    s_state = s.state_dict()

    ctx2 = sgrad.Context()
    W2, b2 = model(ctx2, np.zeros((20, 4)), np.float64)
    opt2 = CONFIGS["sgd_momentum_wd"]([W2, b2])
    s2 = sched(opt2)
    sgrad.load_checkpoint(path, {"W": W2, "b": b2}, optim=opt2)
    s2.load_state_dict(s_state)
    assert opt2.lr == opt.lr == 0.025 and opt2.param_groups[0]["lr"] == 0.025
    train(ctx2, W2, b2, opt2, N, N + M, np.float64, [s2])
    opt2.flush()
    np.testing.assert_array_equal(W2.numpy(), Wa)
    np.testing.assert_array_equal(b2.numpy(), ba)


def test_checkpoint_needs_a_single_group(tmp_path):
    ctx = sgrad.Context()
    W, b = model(ctx, FIX["W0"], np.float64)
    opt = sgrad.optim.SGD([{"params": [W]}, {"params": [b]}], lr=0.1)
    with pytest.raises(ValueError, match="2 param groups"):
        sgrad.save_checkpoint(str(tmp_path / "x"), {"W": W, "b": b}, optim=opt)


def test_c_set_lr_runs_refuses_rows_behind_without_runs():
    # the C check behind load_state_dict's (sg_optim_set_lr_runs): nothing changes on error
    import ctypes
    from sgrad._lib import lib, I64P
    ctx = sgrad.Context()
    W, b = model(ctx, FIX["W0"], np.float64)
    opt = CONFIGS["sgd_momentum_wd"]([W, b])
    train(ctx, W, b, opt, 0, 3, np.float64)
    h, ph = opt._h(), W._h()
    n = lib.sg_optim_lr_runs(h, ph, None, None, 0)
    assert n == 1
    dp = ctypes.POINTER(ctypes.c_double)
    empty_i, empty_d = np.zeros(1, np.int64), np.zeros(1)
    assert lib.sg_optim_set_lr_runs(h, ph, empty_i.ctypes.data_as(I64P),
                                    empty_d.ctypes.data_as(dp), 0) == 7  # SG_ERR_ARG
    assert "behind" in lib.sg_ctx_message(ctx._ptr).decode()
    bad = np.array([3, 2], np.int64)
    assert lib.sg_optim_set_lr_runs(h, ph, bad.ctypes.data_as(I64P),
                                    np.ones(2).ctypes.data_as(dp), 2) == 7
    assert lib.sg_optim_lr_runs(h, ph, None, None, 0) == 1  # unchanged
    plain = sgrad.optim.Adam([ctx.tensor([1.0], requires_grad=True)], lr=0.1)
    assert lib.sg_optim_lr_runs(plain._h(), plain.params[0]._h(), None, None, 0) == 0
    assert lib.sg_optim_lr_runs(plain._h(), ph, None, None, 0) == -1  # not its parameter
