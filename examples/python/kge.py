"""Knowledge-graph embeddings on a tiny built-in graph: TransE or RotatE, written with
sgrad.nn, trained with a margin ranking loss against sampled negative tails.

    python3 examples/python/kge.py [--model rotate|transe] [--steps 400]

The graph: 48 entities on a ring, with three relations (the next entity, the previous one,
the one opposite). RotatE holds it exactly (each relation a rotation), so the filtered
hits@1 of tail prediction on the training triples reaches 1 as the loss falls. TransE
cannot: going round the ring by "next" 48 times must add up to a zero translation, and
"opposite" is its own inverse, which a translation other than 0 is not; its hits@1 stays
well below 1, the limitation that led to RotatE. The run prints the
loss every 50 steps and the final ranking metrics; ``--checkpoint PATH`` also saves the
model and optimizer halfway and shows that a run resumed from that file ends bitwise
where the uninterrupted one does.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

import sgrad
from sgrad import nn

N_ENTITIES, N_RELATIONS = 48, 3


def tiny_graph(n: int = N_ENTITIES) -> np.ndarray:
    """(E, 3) int64 triples (head, relation, tail): next, previous and opposite on a ring."""
    h = np.arange(n)
    tails = [(h + 1) % n, (h - 1) % n, (h + n // 2) % n]
    return np.concatenate([np.stack([h, np.full(n, r), t], 1) for r, t in enumerate(tails)])


class TransE(nn.Module):
    """score(h, r, t) = -||e_h + w_r - e_t||_1 (Bordes et al., 2013)."""

    def __init__(self, n_entities: int, n_relations: int, dim: int, ctx: sgrad.Context):
        super().__init__()
        self.entities = nn.Embedding(n_entities, dim, max_norm=1.0, ctx=ctx)
        self.relations = nn.Embedding(n_relations, dim, ctx=ctx)

    def forward(self, h, r, t) -> sgrad.Tensor:
        d = self.entities(h) + self.relations(r) - self.entities(t)
        return -sgrad.norm(d, p=1, dim=-1)


class RotatE(nn.Module):
    """score(h, r, t) = -sum_k |e_h,k * exp(i theta_r,k) - e_t,k| (Sun et al., 2019): the
    entity rows hold real and imaginary halves, the relation rows phases."""

    def __init__(self, n_entities: int, n_relations: int, dim: int, ctx: sgrad.Context):
        super().__init__()
        self.dim = dim
        self.entities = nn.Embedding(n_entities, 2 * dim, ctx=ctx)
        self.phases = nn.Embedding(n_relations, dim, ctx=ctx)

    def forward(self, h, r, t) -> sgrad.Tensor:
        eh, et, th = self.entities(h), self.entities(t), self.phases(r)
        hre, him = eh.narrow(-1, 0, self.dim), eh.narrow(-1, self.dim, self.dim)
        tre, tim = et.narrow(-1, 0, self.dim), et.narrow(-1, self.dim, self.dim)
        c, s = th.cos(), th.sin()
        dre = hre * c - him * s - tre
        dim_ = hre * s + him * c - tim
        return -(dre * dre + dim_ * dim_ + 1e-9).sqrt().sum(dim=-1)


MODELS = {"transe": TransE, "rotate": RotatE}


def build(model: str, seed: int, dim: int = 16, lr: float = 0.3):
    """A fresh model and its Adagrad optimizer in a Context of the given seed."""
    ctx = sgrad.Context(seed=seed)
    m = MODELS[model](N_ENTITIES, N_RELATIONS, dim, ctx)
    return ctx, m, sgrad.optim.Adagrad(list(m.parameters()), lr=lr)


def train_steps(ctx, m, opt, triples, first: int, last: int, seed: int, batch: int = 32,
                negatives: int = 8, margin: float = 2.0):
    """Steps first..last-1; each draws its batch and negative tails from a generator
    seeded by (seed, step), so a resumed run draws what the uninterrupted one did."""
    losses = []
    for step in range(first, last):
        r = np.random.default_rng([seed, step])
        b = triples[r.integers(0, len(triples), batch)]
        h, rel, t = (np.repeat(b[:, k], negatives) for k in range(3))
        t_neg = r.integers(0, N_ENTITIES, batch * negatives)
        loss = sgrad.relu(m(h, rel, t_neg) - m(h, rel, t) + margin).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        ctx.tape_reset()
    return losses


def tail_ranks(m, triples) -> np.ndarray:
    """The filtered rank of each true tail among all entities (ties: the mean rank)."""
    known = {(h, r, t) for h, r, t in triples.tolist()}
    ranks = []
    with sgrad.no_grad():
        for h, r, t in triples.tolist():
            s = m(np.full(N_ENTITIES, h), np.full(N_ENTITIES, r), np.arange(N_ENTITIES)).numpy()
            others = np.array([e != t and (h, r, e) not in known for e in range(N_ENTITIES)])
            ranks.append(1 + np.sum(s[others] > s[t]) + 0.5 * np.sum(s[others] == s[t]))
    m.entities.weight.ctx.tape_reset()
    return np.array(ranks)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="rotate")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--checkpoint", help="also save halfway to this file and resume from it")
    args = ap.parse_args(argv)
    triples = tiny_graph()
    ctx, m, opt = build(args.model, args.seed)
    half = args.steps // 2
    losses = train_steps(ctx, m, opt, triples, 0, half, args.seed)
    if args.checkpoint:
        m.save_checkpoint(args.checkpoint, optim=opt)
    losses += train_steps(ctx, m, opt, triples, half, args.steps, args.seed)
    for i in range(0, args.steps, 50):
        print(f"step {i:4d}  loss {np.mean(losses[i:i + 50]):.4f}")
    same = True
    if args.checkpoint:  # before the ranking: TransE's max_norm renormalises rows it reads
        ctx2, m2, opt2 = build(args.model, args.seed + 1)  # other seed: the file decides
        m2.load_checkpoint(args.checkpoint, optim=opt2)
        train_steps(ctx2, m2, opt2, triples, half, args.steps, args.seed)
        same = all(np.array_equal(a, b) for a, b in
                   zip(m.state_dict().values(), m2.state_dict().values()))
        print("resumed from the checkpoint: " + ("bitwise equal" if same else "DIFFERENT"))
    ranks = tail_ranks(m, triples)
    print(f"{args.model}: filtered tail ranking on the training triples: "
          f"MRR {np.mean(1 / ranks):.3f}, hits@1 {np.mean(ranks <= 1):.3f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
