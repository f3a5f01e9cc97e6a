"""sgrad.optim.lr_scheduler against torch.optim.lr_scheduler (fixtures/optim.npz, lr/<name>,
written by make_fixtures.py): an SGD of two param groups (lr 0.1 and 0.01), 30 steps,
scheduler.step() after each optimizer.step(). Both the lr in param_groups before each step
and the lr the C step actually applies (a parameter at 0 with gradient 1 lands at -lr)
must equal PyTorch's lr of that step, bit for bit (the schedulers use PyTorch's own
recursive formulas in Python floats)."""
import os
import warnings

import numpy as np
import pytest

import sgrad
from sgrad.optim import lr_scheduler as L

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = np.load(os.path.join(HERE, "fixtures", "optim.npz"))
GROUPS = (0.1, 0.01)

# make_fixtures.py's lr_scheduler_configs, spelled with sgrad's classes
CONFIGS = {
    "linear": [(L.LinearLR, dict())],
    "linear_decay": [(L.LinearLR, dict(start_factor=1.0, end_factor=0.05, total_iters=20))],
    "step": [(L.StepLR, dict(step_size=7, gamma=0.5))],
    "cosine": [(L.CosineAnnealingLR, dict(T_max=10, eta_min=0.001))],
    "lambda": [(L.LambdaLR, dict(lr_lambda=[lambda e: 0.9 ** e, lambda e: 1.0 / (1 + e)]))],
    "warmup_cosine": [(L.LinearLR, dict(start_factor=0.25, total_iters=4)),
                      (L.CosineAnnealingLR, dict(T_max=30))],
}


def two_groups(ctx):
    arrays = [np.zeros(1) for _ in GROUPS]
    ps = [sgrad.from_numpy(a, requires_grad=True, ctx=ctx) for a in arrays]
    opt = sgrad.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, GROUPS)],
                          lr=GROUPS[0])
    return arrays, ps, opt


def run(opt, ps, arrays, scheds, steps, ctx):
    """steps optimizer steps; returns (lr in param_groups, lr applied) per step."""
    listed, applied = [], []
    for _ in range(steps):
        listed.append([g["lr"] for g in opt.param_groups])
        for a in arrays:
            a[...] = 0.0
        opt.zero_grad()
        sum(p.sum() for p in ps).backward()   # gradient 1 for each parameter
        opt.step()
        applied.append([-a[0] for a in arrays])  # 0 - lr * 1
        for s in scheds:
            s.step()
        assert scheds[-1].get_last_lr() == [g["lr"] for g in opt.param_groups]
    return np.array(listed), np.array(applied)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_lr_sequence_equals_torch(name):
    want = FIX[f"lr/{name}"]
    ctx = sgrad.Context()
    arrays, ps, opt = two_groups(ctx)
    scheds = [cls(opt, **kw) for cls, kw in CONFIGS[name]]
    listed, applied = run(opt, ps, arrays, scheds, len(want), ctx)
    np.testing.assert_array_equal(listed, want)
    np.testing.assert_array_equal(applied, want)  # what sg_optim_step used at step t


def test_scheduler_state_dict_resumes_the_sequence():
    want = FIX["lr/warmup_cosine"]
    ctx = sgrad.Context()
    arrays, ps, opt = two_groups(ctx)
    scheds = [cls(opt, **kw) for cls, kw in CONFIGS["warmup_cosine"]]
    first, _ = run(opt, ps, arrays, scheds, 12, ctx)
    saved_opt, saved = opt.state_dict(), [s.state_dict() for s in scheds]
    ctx2 = sgrad.Context()
    arrays2, ps2, opt2 = two_groups(ctx2)
    scheds2 = [cls(opt2, **kw) for cls, kw in CONFIGS["warmup_cosine"]]
    opt2.load_state_dict(saved_opt)
    for s, sd in zip(scheds2, saved):
        s.load_state_dict(sd)
    rest, applied = run(opt2, ps2, arrays2, scheds2, len(want) - 12, ctx2)
    np.testing.assert_array_equal(np.concatenate([first, rest]), want)
    np.testing.assert_array_equal(applied, want[12:])


def test_lambda_lr_state_dict_keeps_callable_objects_only():
    class Decay:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, epoch):
            return self.rate ** epoch

    ctx = sgrad.Context()
    _, _, opt = two_groups(ctx)
    f = Decay()
    s = L.LambdaLR(opt, [f, lambda e: 1.0])
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.5}, None]
    f.rate = 0.9
    s.load_state_dict(sd)
    assert f.rate == 0.5 and sd["lr_lambdas"] == [{"rate": 0.5}, None]


def test_step_before_optimizer_step_warns_as_torch():
    ctx = sgrad.Context()
    _, _, opt = two_groups(ctx)
    s = L.StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()


def test_chainable_form_follows_a_manual_change():
    # StepLR multiplies the current lr, as PyTorch's: a manual change carries on
    ctx = sgrad.Context()
    arrays, ps, opt = two_groups(ctx)
    s = L.StepLR(opt, step_size=2, gamma=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt.step()
    s.step()
    opt.param_groups[0]["lr"] = 1.0
    opt.step()
    s.step()  # epoch 2: halves
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[1]["lr"] == 0.005


def test_bad_arguments_raise_before_anything_changes():
    ctx = sgrad.Context()
    _, _, opt = two_groups(ctx)
    with pytest.raises(ValueError, match="step_size"):
        L.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        L.CosineAnnealingLR(opt, T_max=0)
    with pytest.raises(ValueError, match="Starting"):
        L.LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match="lr_lambdas"):
        L.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(TypeError):
        L.StepLR(object(), step_size=1)
    s = L.LambdaLR(opt, [lambda e: 1.0, lambda e: -1.0 if e else 1.0])
    opt.step()
    with pytest.raises(sgrad.ArgumentError, match=r"param_groups\[1\]"):
        s.step()
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    with pytest.raises(KeyError, match="initial_lr"):
        fresh = sgrad.optim.SGD([ctx.tensor([1.0], requires_grad=True)], lr=0.1)
        L.StepLR(fresh, step_size=3, last_epoch=5)


def test_public_names_are_documented_and_annotated():
    # test_package.py's rule, for sgrad.optim.lr_scheduler too
    import inspect
    for mod in (sgrad.optim, L):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.ismodule(obj):
                continue
            members = [obj] + [m for k, m in vars(obj).items() if not k.startswith("_") and
                               (inspect.isfunction(m) or isinstance(m, property))] \
                if inspect.isclass(obj) else [obj]
            for m in members:
                assert (inspect.getdoc(m) or "").strip(), f"{name}.{m}"
                fn = m.fget if isinstance(m, property) else m
                if inspect.isfunction(fn) and fn.__name__ != "__init__":
                    assert inspect.signature(fn).return_annotation is not \
                        inspect.Signature.empty, f"{name}.{fn.__name__}"
