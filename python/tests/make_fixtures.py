"""Writes the PyTorch reference values the Python tests compare sgrad with.

    /usr/bin/python3 python/tests/make_fixtures.py     (needs python3-torch; CPU is enough)

CI has no PyTorch, so the results are committed: python/tests/fixtures/ops.npz (each op's
output and input gradients on random inputs) and optim.npz (50-step optimizer
trajectories; lr/<name>: torch.optim.lr_scheduler's learning rates, step by step). The
tests read them with numpy alone. Every case draws its inputs from its own seeded
generator, so regenerating changes nothing unless a case changes.

ops.npz, per case C: C/kinds (one letter per input: f float leaf, c float constant,
i integer constant, s COO input with float leaf values), C/in{k} (or C/in{k}_idx,
C/in{k}_val, C/in{k}_shape for COO), C/cot (the cotangent: loss = sum(out * cot)),
C/out, and C/grad{k} for each float leaf (for COO inputs: the gradient of its values);
for ops returning (values, indices) (max), C/out holds the values and C/aux0 the indices.
"""
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")

torch.set_default_dtype(torch.float64)


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def U(r, *shape, lo=-1.0, hi=1.0):
    return r.uniform(lo, hi, size=shape)


def coo_input(r, shape, sparse_dim, nnz):
    idx = np.stack([r.integers(0, shape[d], size=nnz) for d in range(sparse_dim)])
    val = U(r, nnz, *shape[sparse_dim:])
    return ("s", (idx, val, np.array(shape)))


# name: (inputs(r) -> list of (kind, array or (idx, val, shape)), torch fn(*tensors) -> out)
def cases():
    c = {}
    f = lambda *shape, **kw: lambda r: ("f", U(r, *shape, **kw))  # noqa: E731
    c["add_broadcast"] = ([f(3, 4), f(4)], lambda a, b: a + b)
    c["sub_broadcast"] = ([f(2, 3, 4), f(3, 1)], lambda a, b: a - b)
    c["mul"] = ([f(3, 4), f(3, 4)], lambda a, b: a * b)
    c["div"] = ([f(3, 4), f(1, 4, lo=0.5, hi=2.0)], lambda a, b: a / b)
    c["scale"] = ([f(5, 2)], lambda a: a * -2.5)
    c["matmul"] = ([f(4, 3), f(3, 5)], lambda a, b: a @ b)
    c["matmul_batched"] = ([f(2, 4, 3), f(2, 3, 5)], lambda a, b: a @ b)
    c["matmul_shared_b"] = ([f(2, 4, 3), f(3, 5)], lambda a, b: a @ b)
    c["rowdot"] = ([f(6, 4), f(6, 4)], lambda a, b: (a * b).sum(1))
    c["sum"] = ([f(3, 4)], lambda a: a.sum())
    c["mean"] = ([f(3, 4)], lambda a: a.mean())
    c["sum_dim"] = ([f(3, 4, 2)], lambda a: a.sum(1))
    c["sum_dim_keepdim"] = ([f(3, 4)], lambda a: a.sum(0, keepdim=True))
    c["mean_dim"] = ([f(3, 4, 2)], lambda a: a.mean(-1))
    c["relu"] = ([f(4, 5)], torch.relu)
    c["sigmoid"] = ([f(4, 5, lo=-4, hi=4)], torch.sigmoid)
    c["tanh"] = ([f(4, 5, lo=-3, hi=3)], torch.tanh)
    c["exp"] = ([f(4, 5)], torch.exp)
    c["log"] = ([f(4, 5, lo=0.1, hi=3)], torch.log)
    c["log_sigmoid"] = ([f(4, 5, lo=-30, hi=30)], F.logsigmoid)
    c["softmax"] = ([f(4, 5, lo=-5, hi=5)], lambda a: torch.softmax(a, -1))
    c["softmax_dim0"] = ([f(4, 5, lo=-5, hi=5)], lambda a: torch.softmax(a, 0))
    c["log_softmax"] = ([f(4, 5, lo=-50, hi=50)], lambda a: torch.log_softmax(a, -1))
    c["cross_entropy"] = ([f(6, 5, lo=-5, hi=5), lambda r: ("i", r.integers(0, 5, size=6))],
                          lambda a, t: F.cross_entropy(a, t))
    c["bce_with_logits"] = ([f(4, 3, lo=-8, hi=8), lambda r: ("c", r.uniform(0, 1, (4, 3)))],
                            F.binary_cross_entropy_with_logits)
    c["reshape"] = ([f(3, 4)], lambda a: a.reshape(2, -1) * torch.arange(12.).reshape(2, 6))
    c["transpose"] = ([f(2, 3, 4)], lambda a: a.transpose(0, 2))
    c["concat"] = ([f(2, 3), f(4, 3)], lambda a, b: torch.cat([a, b]))
    dup = lambda r: ("i", np.array([3, 1, 3, 3, 0, 7, 1]))  # noqa: E731 (duplicates)
    c["embedding_duplicates"] = ([f(8, 4), dup], lambda w, i: F.embedding(i, w))
    c["embedding_2d_idx"] = ([f(8, 4), lambda r: ("i", r.integers(0, 8, size=(3, 5)))],
                             lambda w, i: F.embedding(i, w))
    c["embedding_padding"] = ([f(8, 4), dup], lambda w, i: F.embedding(i, w, padding_idx=3))
    bag = [f(8, 4), lambda r: ("i", np.array([3, 1, 3, 3, 0, 7, 1, 5])),
           lambda r: ("i", np.array([0, 3, 3, 6]))]  # an empty bag
    for mode in ("sum", "mean", "max"):
        c["embedding_bag_" + mode] = (bag, lambda w, i, o, m=mode: F.embedding_bag(
            i, w, o, mode=m))
    c["embedding_bag_weights"] = (bag + [f(8)], lambda w, i, o, p: F.embedding_bag(
        i, w, o, mode="sum", per_sample_weights=p))
    c["index_select_dim0"] = ([f(6, 3), dup_small(6)], lambda x, i: x.index_select(0, i))
    c["index_select_dim1"] = ([f(3, 6), dup_small(6)], lambda x, i: x.index_select(1, i))
    c["slice"] = ([f(6, 3)], lambda x: x[1:4])
    with_zeros = lambda r: ("f", U(r, 4, 3) * (r.random((4, 3)) > 0.4))  # noqa: E731
    c["to_sparse_roundtrip"] = ([with_zeros], lambda x: x.to_sparse().to_dense())
    c["to_dense"] = ([lambda r: coo_input(r, (5, 4), 2, 9)],
                     lambda v, idx, shape: torch.sparse_coo_tensor(idx, v, shape).to_dense())
    c["to_dense_hybrid"] = ([lambda r: coo_input(r, (6, 3), 1, 5)],
                            lambda v, idx, shape: torch.sparse_coo_tensor(idx, v, shape).to_dense())
    c["spmm"] = ([lambda r: coo_input(r, (5, 4), 2, 9), f(4, 3)],
                 lambda v, idx, shape, b: torch.sparse.mm(torch.sparse_coo_tensor(idx, v, shape), b))
    c["sparse_add"] = ([lambda r: coo_input(r, (5, 4), 2, 6), lambda r: coo_input(r, (5, 4), 2, 7)],
                       lambda v1, i1, s1, v2, i2, s2: (torch.sparse_coo_tensor(i1, v1, s1) +
                                                       torch.sparse_coo_tensor(i2, v2, s2)).to_dense())
    # sparse_mask of a dense x: the gradient reaches x on the mask's pattern only (masked)
    c["sparse_mask"] = ([f(5, 4), lambda r: ("i", np.stack([r.integers(0, 5, 7),
                                                            r.integers(0, 4, 7)]))],
                        lambda x, m: x * pattern(m, (5, 4)))
    c["sgns_loss"] = ([f(4, 3), f(9, 3), lambda r: ("i", r.integers(0, 9, size=(4, 3)))],
                      sgns_reference)
    new_op_cases(c, f)
    kge_op_cases(c, f)
    return c


def f32_exact(gen):
    """Inputs exactly representable in f32, for cases whose f32 test would otherwise see
    the rounding of the inputs amplified (exp of inputs near 1e3)."""
    def g(r):
        kind, a = gen(r)
        return kind, a.astype(np.float32).astype(np.float64)
    return g


def grid(*shape, lo=-2, hi=2, step=0.5):
    """Values on a coarse grid (exact in f32), so that ties occur."""
    return lambda r: ("f", r.integers(int(lo / step), int(hi / step) + 1, size=shape) * step)


def ints(values):
    return lambda r: ("i", np.array(values))


def new_op_cases(c, f):
    zeros_in = lambda r: ("f", U(r, 4, 5) * (r.random((4, 5)) > 0.3))  # noqa: E731
    c["abs"] = ([zeros_in], torch.abs)  # sign(0) = 0 at the zeros
    c["sqrt"] = ([f(4, 5, lo=0.1, hi=3)], torch.sqrt)
    c["pow_0"] = ([f(3, 4, lo=0.1, hi=2)], lambda a: torch.pow(a, 0.0))
    c["pow_1"] = ([f(3, 4, lo=0.1, hi=2)], lambda a: torch.pow(a, 1.0))
    c["pow_2_5"] = ([f(3, 4, lo=0.1, hi=2)], lambda a: torch.pow(a, 2.5))
    c["pow_3_mixed_sign"] = ([f(3, 4, lo=-2, hi=2)], lambda a: torch.pow(a, 3.0))
    c["clamp_min"] = ([f(4, 5)], lambda a: torch.clamp(a, min=-0.25))
    c["clamp_max"] = ([f(4, 5)], lambda a: torch.clamp(a, max=0.5))
    c["clamp_both"] = ([f(4, 5)], lambda a: torch.clamp(a, min=-0.25, max=0.5))
    c["clamp_min_above_max"] = ([f(4, 5)], lambda a: torch.clamp(a, min=0.5, max=-0.25))
    c["maximum_broadcast"] = ([f(3, 4), f(4)], torch.maximum)
    c["maximum_broadcast_3d"] = ([f(2, 1, 4), f(3, 1)], torch.maximum)
    c["minimum_broadcast"] = ([f(2, 3, 4), f(3, 1)], torch.minimum)
    # ties: the gradient is split g/2, g/2 (b's halves summed over the broadcast rows)
    c["maximum_ties"] = ([grid(4, 5, lo=-1, hi=1), grid(1, 5, lo=-1, hi=1)], torch.maximum)
    c["minimum_ties"] = ([grid(4, 5, lo=-1, hi=1), grid(4, 5, lo=-1, hi=1)], torch.minimum)
    c["where_broadcast"] = ([lambda r: ("i", r.integers(0, 2, size=(1, 4))), f(3, 1), f(3, 4)],
                            lambda cond, x, y: torch.where(cond.bool(), x, y))
    c["where_broadcast_3d"] = ([lambda r: ("i", r.integers(0, 2, size=(2, 3, 1))), f(3, 4),
                                f(4)], lambda cond, x, y: torch.where(cond.bool(), x, y))
    c["gather_dim0"] = ([f(4, 3), ints([[3, 0], [3, 3], [1, 0], [3, 2], [0, 0]])],
                        lambda x, i: torch.gather(x, 0, i))
    c["gather_dim1"] = ([f(3, 5), ints([[4, 4, 0, 2, 4, 1], [1, 1, 1, 3, 0, 2]])],
                        lambda x, i: torch.gather(x, 1, i))
    c["gather_3d_dim_neg1"] = ([f(2, 3, 4), lambda r: ("i", r.integers(0, 4, size=(2, 2, 6)))],
                               lambda x, i: torch.gather(x, -1, i))
    c["narrow_dim0"] = ([f(5, 3)], lambda x: torch.narrow(x, 0, 1, 3))
    c["narrow_dim1_negative_start"] = ([f(3, 6)], lambda x: torch.narrow(x, 1, -4, 2))
    c["narrow_3d"] = ([f(2, 4, 3)], lambda x: torch.narrow(x, -2, -1, 1))
    c["cos"] = ([f(4, 5, lo=-4, hi=4)], torch.cos)
    c["sin"] = ([f(4, 5, lo=-4, hi=4)], torch.sin)
    c["norm_p2"] = ([f(4, 5)], lambda x: torch.norm(x, 2, -1))
    c["norm_p1"] = ([f(4, 5)], lambda x: torch.norm(x, 1, -1))
    c["norm_p2_dim0_keepdim"] = ([f(4, 5)], lambda x: torch.norm(x, 2, 0, keepdim=True))
    c["norm_p1_3d_dim1_keepdim"] = ([f(2, 3, 4)], lambda x: torch.norm(x, 1, 1, keepdim=True))
    # a zero row: p=2 gives it gradient 0, p=1 sign(0) = 0 (as is every element of it)
    zero_row = lambda r: ("f", U(r, 3, 4) * np.array([[1.0], [0.0], [1.0]]))  # noqa: E731
    c["norm_p2_zero_row"] = ([zero_row], lambda x: torch.norm(x, 2, 1))
    c["norm_p1_zero_row"] = ([zero_row], lambda x: torch.norm(x, 1, 1))
    c["logsumexp"] = ([f(4, 5, lo=-5, hi=5)], lambda x: torch.logsumexp(x, -1))
    c["logsumexp_dim0_keepdim"] = ([f(4, 5, lo=-5, hi=5)],
                                   lambda x: torch.logsumexp(x, 0, keepdim=True))
    # ~1e3: exp overflows in f32 (and near 710 in f64) without the shift by the max
    c["logsumexp_large"] = ([f32_exact(f(4, 5, lo=995, hi=1005))],
                            lambda x: torch.logsumexp(x, -1))
    c["logsumexp_large_keepdim"] = ([f32_exact(f(3, 4, 2, lo=-1005, hi=1005))],
                                    lambda x: torch.logsumexp(x, 1, keepdim=True))
    c["max_dim1"] = ([f(4, 5)], lambda x: torch.max(x, 1))
    c["max_dim0_keepdim"] = ([f(4, 5)], lambda x: torch.max(x, 0, keepdim=True))
    # ties: the first maximum's index, and it alone gets the gradient
    c["max_ties"] = ([grid(5, 6, lo=-1, hi=1)], lambda x: torch.max(x, -1))
    c["layer_norm_affine"] = ([f(4, 6), f(6, lo=0.5, hi=1.5), f(6)],
                              lambda x, w, b: F.layer_norm(x, (6,), w, b))
    c["layer_norm_plain"] = ([f(2, 3, 5, lo=-3, hi=3)], lambda x: F.layer_norm(x, (5,)))
    c["layer_norm_weight_eps"] = ([f(3, 4), f(4)],
                                  lambda x, w: F.layer_norm(x, (4,), w, None, eps=1e-3))
    c["dropout_eval"] = ([f(4, 5)], lambda x: F.dropout(x, 0.5, training=False))
    c["dropout_p0"] = ([f(4, 5)], lambda x: F.dropout(x, 0.0, training=True))



def sharing_rows(shape_a, shape_b, pairs):
    """Two inputs drawn in turn, the second's row j a copy of the first's row i for each
    (i, j) in pairs: zero distances between them."""
    held = {}

    def first(r):
        held["a"] = U(r, *shape_a)
        return ("f", held["a"])

    def second(r):
        b = U(r, *shape_b)
        for i, j in pairs:
            b[j] = held["a"][i]
        return ("f", b)
    return [first, second]


def complex_of(x):
    k = x.shape[-1] // 2
    return torch.complex(x[..., :k], x[..., k:])


def real_of(z):
    return torch.cat([z.real, z.imag], -1)


def rank_reference(kind, margin=0.0, adv_temp=1.0, skip=-1):
    """sg_ranking_loss by its formulas in torch; the masked entry (m, skip + m) is left out
    through a mask (no -inf enters a gradient)."""
    def loss(pos, neg):
        M, N = neg.shape
        keep = torch.ones(M, N, dtype=torch.bool)
        if skip >= 0:
            keep[torch.arange(M), skip + torch.arange(M)] = False
        if kind == "softmax":
            x = torch.cat([pos[:, None], neg.masked_fill(~keep, -1e300)], 1)
            return (torch.logsumexp(x, 1) - pos).sum()
        if kind == "logistic":
            sp = F.softplus(neg) * keep
            return (F.softplus(-pos) + sp.sum(1) / keep.sum(1)).sum()
        if kind == "margin":
            return (F.relu(margin - pos[:, None] + neg) * keep).sum()
        w = torch.softmax((adv_temp * neg).masked_fill(~keep, -1e300), 1).detach() * keep
        return (-F.logsigmoid(margin + pos) - (w * F.logsigmoid(-neg - margin)).sum(1)).sum()
    return loss


def kge_op_cases(c, f):
    c["cdist_p2"] = ([f(5, 7), f(6, 7)], lambda a, b: torch.cdist(a, b, p=2))
    c["cdist_p1"] = ([f(5, 7), f(6, 7)], lambda a, b: torch.cdist(a, b, p=1))
    # a's row 1 is b's row 3: distance 0, whose gradient is 0 (torch.cdist's convention)
    c["cdist_p2_zero_distance"] = (sharing_rows((4, 6), (5, 6), [(1, 3)]),
                                   lambda a, b: torch.cdist(a, b, p=2))
    c["complex_cdist"] = ([f(4, 8), f(5, 8)], lambda a, b: (
        complex_of(a)[:, None, :] - complex_of(b)[None, :, :]).abs().sum(-1))
    c["rowdist_l1"] = ([f(5, 7), f(5, 7)], lambda a, b: (a - b).abs().sum(1))
    c["rowdist_l2"] = (sharing_rows((5, 7), (5, 7), [(2, 2)]),
                       lambda a, b: torch.linalg.vector_norm(a - b, dim=1))
    c["rowdist_complex"] = ([f(5, 8), f(5, 8)],
                            lambda a, b: (complex_of(a) - complex_of(b)).abs().sum(1))
    c["complex_mul"] = ([f(4, 6), f(4, 6)], lambda a, b: real_of(complex_of(a) * complex_of(b)))
    c["complex_mul_conj"] = ([f(4, 6), f(4, 6)],
                             lambda a, b: real_of(complex_of(a) * complex_of(b).conj()))
    c["ranking_loss_softmax"] = ([f(4, lo=-3, hi=3), f(4, 6, lo=-3, hi=3)],
                                 rank_reference("softmax"))
    c["ranking_loss_softmax_skip"] = ([f(4, lo=-3, hi=3), f(4, 6, lo=-3, hi=3)],
                                      rank_reference("softmax", skip=2))
    c["ranking_loss_logistic_skip"] = ([f(4, lo=-3, hi=3), f(4, 6, lo=-3, hi=3)],
                                       rank_reference("logistic", skip=1))
    c["ranking_loss_margin"] = ([f(4, lo=-1, hi=1), f(4, 6, lo=-1, hi=1)],
                                rank_reference("margin", margin=0.5))
    c["ranking_loss_selfadv_skip"] = ([f(4, lo=-3, hi=3), f(4, 6, lo=-3, hi=3)],
                                      rank_reference("selfadv", margin=2.0, adv_temp=0.5, skip=0))


def dup_small(n):
    return lambda r: ("i", np.array([2, 0, 2, n - 1, 2]))


def pattern(m, shape):
    p = torch.zeros(shape)
    p[m[0], m[1]] = 1.0
    return p


def sgns_reference(h, W, t):
    dots = (W[t] * h[:, None, :]).sum(-1)  # (B,T)
    sign = torch.ones_like(dots)
    sign[:, 1:] = -1
    return -F.logsigmoid(sign * dots).sum()


def make_ops():
    out = {}
    for name, (gens, fn) in cases().items():
        r = rng_for(name)
        ins = [g(r) for g in gens]
        kinds = "".join(k for k, _ in ins)
        args, leaves = [], []
        for k, (kind, a) in enumerate(ins):
            if kind == "s":
                idx, val, shape = a
                out[f"{name}/in{k}_idx"], out[f"{name}/in{k}_val"] = idx, val
                out[f"{name}/in{k}_shape"] = shape
                v = torch.tensor(val, requires_grad=True)
                leaves.append((k, v))
                args += [v, torch.tensor(idx), tuple(int(s) for s in shape)]
                continue
            out[f"{name}/in{k}"] = a
            t = torch.tensor(a)
            if kind == "f":
                t.requires_grad_(True)
                leaves.append((k, t))
            args.append(t)
        y = fn(*args)
        aux = ()
        if isinstance(y, tuple):  # (values, indices): indices kept as C/aux{j}
            y, *aux = y
        for j, a in enumerate(aux):
            out[f"{name}/aux{j}"] = a.numpy()
        cot = U(r, *y.shape)
        (y * torch.tensor(cot)).sum().backward()
        out[f"{name}/kinds"] = np.array(kinds)
        out[f"{name}/out"] = y.detach().numpy()
        out[f"{name}/cot"] = cot
        for k, t in leaves:
            out[f"{name}/grad{k}"] = t.grad.to_dense().numpy() if t.grad.is_sparse else t.grad.numpy()
    return out


# ---------------------------------------------------------------- optimizer trajectories
V, D, B, STEPS = 20, 4, 6, 50


def optim_configs():
    return {
        "sgd": ("SGD", dict(lr=0.1)),
        "sgd_momentum_wd": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01, dampening=0.1)),
        "sgd_nesterov": ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True)),
        "adagrad": ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
        "adam": ("Adam", dict(lr=0.01, weight_decay=0.01)),
        "adamw": ("AdamW", dict(lr=0.01, weight_decay=0.01)),
        "rowwise_adagrad": ("RowWiseAdagrad", dict(lr=0.1)),
        # SparseAdam adds eps outside the bias correction (sqrt(v) + eps, Adam and sgrad:
        # sqrt(v / (1 - beta2^t)) + eps): a tiny eps leaves only rounding between them
        "lazy_adam_all_rows": ("SparseAdam", dict(lr=0.01, eps=1e-14)),
        "lazy_adam": ("LazyAdamReference", dict(lr=0.01)),
    }


def trajectory(kind, kw, W0, idx, T, dtype):
    W = torch.tensor(W0, dtype=dtype, requires_grad=True)
    sparse = kind in ("SparseAdam", "LazyAdamReference", "RowWiseAdagrad")
    if kind in ("RowWiseAdagrad", "LazyAdamReference"):
        opt = None
        acc = torch.zeros(V, dtype=dtype)
        m, v = torch.zeros(V, D, dtype=dtype), torch.zeros(V, D, dtype=dtype)
        row_step = torch.zeros(V, dtype=torch.int64)
    else:
        opt = getattr(torch.optim, kind)([W], **kw)
    snaps = []
    for t in range(STEPS):
        e = F.embedding(torch.tensor(idx[t]), W, sparse=sparse)
        loss = 0.5 * ((e - torch.tensor(T[t], dtype=dtype)) ** 2).sum()
        W.grad = None
        loss.backward()
        if opt is not None:
            opt.step()
        else:
            g = W.grad.coalesce()
            rows, vals = g.indices()[0], g.values()
            with torch.no_grad():
                if kind == "RowWiseAdagrad":
                    acc[rows] += (vals * vals).mean(1)
                    W[rows] -= kw["lr"] * vals / (acc[rows].sqrt()[:, None] + 1e-10)
                else:  # Adam per row, each row counting its own steps
                    b1, b2, eps, lr = 0.9, 0.999, 1e-8, kw["lr"]
                    row_step[rows] += 1
                    s = row_step[rows].to(dtype)[:, None]
                    m[rows] = b1 * m[rows] + (1 - b1) * vals
                    v[rows] = b2 * v[rows] + (1 - b2) * vals * vals
                    denom = (v[rows] / (1 - b2 ** s)).sqrt() + eps
                    W[rows] -= lr / (1 - b1 ** s) * m[rows] / denom
        if (t + 1) % 10 == 0:
            snaps.append(W.detach().numpy().copy())
    return np.stack(snaps)


def make_optim():
    r = np.random.default_rng(12)
    out = {"W0": r.uniform(-1, 1, (V, D)), "T": r.uniform(-1, 1, (STEPS, B, D)),
           "idx": r.integers(0, V // 2, size=(STEPS, B)) * 2}  # even rows only: most rows skip steps
    # every row at every step (plus duplicates), where LazyAdam equals SparseAdam
    out["idx_all"] = np.stack([np.concatenate([r.permutation(V), r.integers(0, V, 4)])
                               for _ in range(STEPS)])
    out["T_all"] = r.uniform(-1, 1, (STEPS, V + 4, D))
    for name, (kind, kw) in optim_configs().items():
        idx, T = (out["idx_all"], out["T_all"]) if name.endswith("all_rows") else (out["idx"], out["T"])
        for dt, tag in ((torch.float64, "f64"), (torch.float32, "f32")):
            W0 = out["W0"].astype(np.float32) if tag == "f32" else out["W0"]
            T_ = T.astype(np.float32) if tag == "f32" else T
            out[f"{name}/{tag}"] = trajectory(kind, kw, W0, idx, T_, dt)
    out.update(make_lr_schedules())
    return out


# ---------------------------------------------------------------- learning-rate schedules
LR_STEPS, LR_GROUPS = 30, (0.1, 0.01)


def lr_scheduler_configs():
    """name: [(scheduler class name, kwargs)], several schedulers stepped in order (chained)
    over one SGD of two param groups (lrs LR_GROUPS). The lambdas are test_lr_scheduler.py's."""
    return {
        "linear": [("LinearLR", dict())],  # PyTorch's defaults: 1/3 -> 1 over 5 epochs
        "linear_decay": [("LinearLR", dict(start_factor=1.0, end_factor=0.05, total_iters=20))],
        "step": [("StepLR", dict(step_size=7, gamma=0.5))],
        "cosine": [("CosineAnnealingLR", dict(T_max=10, eta_min=0.001))],  # up again after 10
        "lambda": [("LambdaLR", dict(lr_lambda=[lambda e: 0.9 ** e, lambda e: 1.0 / (1 + e)]))],
        "warmup_cosine": [("LinearLR", dict(start_factor=0.25, total_iters=4)),
                          ("CosineAnnealingLR", dict(T_max=30))],
    }


def make_lr_schedules():
    """lr/<name>: (LR_STEPS, groups) the lr each optimizer step used (param_groups[g]["lr"]
    just before optimizer.step()), with scheduler.step() after each optimizer.step()."""
    out = {}
    for name, scheds in lr_scheduler_configs().items():
        ps = [torch.zeros(1, requires_grad=True) for _ in LR_GROUPS]
        opt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, LR_GROUPS)],
                              lr=LR_GROUPS[0])
        ss = [getattr(torch.optim.lr_scheduler, k)(opt, **kw) for k, kw in scheds]
        used = []
        for _ in range(LR_STEPS):
            used.append([g["lr"] for g in opt.param_groups])
            for p in ps:
                p.grad = torch.ones(1)
            opt.step()
            for s in ss:
                s.step()
        out[f"lr/{name}"] = np.array(used, dtype=np.float64)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    np.savez_compressed(os.path.join(OUT, "ops.npz"), **make_ops())
    np.savez_compressed(os.path.join(OUT, "optim.npz"), **make_optim())
    for f in ("ops.npz", "optim.npz"):
        print(f, os.path.getsize(os.path.join(OUT, f)), "bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
