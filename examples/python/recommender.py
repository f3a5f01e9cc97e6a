"""A small recommender written with sgrad.nn: a user is the mean of the embeddings of the
items in their history (EmbeddingBag), a candidate item has its own embedding, and an MLP
with layer norm and dropout turns the pair into a click logit (binary cross-entropy).

    python3 examples/python/recommender.py [--steps 600] [--checkpoint PATH]

The data are synthetic, drawn from a hidden taste model: 8 groups of users, each liking
the items whose hidden factors point its way, so there is something to learn and the
held-out AUC says how much was. Only the rows of the batch's items get a gradient and an
update (LazyAdam). ``--checkpoint PATH`` saves model and optimizer halfway and shows that
a run resumed from that file (dropout's random stream included) ends bitwise where the
uninterrupted one does.
"""
import argparse
import sys

import numpy as np

import sgrad
from sgrad import nn

N_ITEMS, HISTORY, FACTORS = 200, 10, 4


def synthetic_data(n: int, seed: int):
    """n examples: histories (n, HISTORY) int64, candidate items (n,), clicks (n,) 0/1."""
    r = np.random.default_rng(seed)
    hidden = np.random.default_rng(0)  # one taste model for every split
    items = hidden.normal(size=(N_ITEMS, FACTORS))
    groups = hidden.normal(size=(8, FACTORS))
    taste = groups[r.integers(0, 8, n)] + 0.3 * r.normal(size=(n, FACTORS))
    liked = np.argsort(-(taste @ items.T), axis=1)[:, :40]
    history = np.take_along_axis(liked, r.integers(0, 40, (n, HISTORY)), 1)
    candidates = r.integers(0, N_ITEMS, n)
    affinity = np.einsum("nf,nf->n", taste, items[candidates]) / np.sqrt(FACTORS)
    clicks = (r.random(n) < 1 / (1 + np.exp(-2 * affinity))).astype(np.float32)
    return history.astype(np.int64), candidates.astype(np.int64), clicks


class Recommender(nn.Module):
    """logit = MLP([user, item, user * item]), written as three Linear maps summed (one
    Linear over the concatenation, without building it)."""

    def __init__(self, dim: int, hidden: int, ctx: sgrad.Context, dropout: float = 0.2):
        super().__init__()
        self.history = nn.EmbeddingBag(N_ITEMS, dim, mode="mean", ctx=ctx)
        self.items = nn.Embedding(N_ITEMS, dim, ctx=ctx)
        self.from_user = nn.Linear(dim, hidden, ctx=ctx)
        self.from_item = nn.Linear(dim, hidden, bias=False, ctx=ctx)
        self.from_both = nn.Linear(dim, hidden, bias=False, ctx=ctx)
        self.head = nn.Sequential(nn.LayerNorm(hidden, ctx=ctx), nn.ReLU(),
                                  nn.Dropout(dropout), nn.Linear(hidden, 1, ctx=ctx))

    def forward(self, history, candidates) -> sgrad.Tensor:
        u, v = self.history(history), self.items(candidates)
        x = self.from_user(u) + self.from_item(v) + self.from_both(u * v)
        return self.head(x).reshape(-1)


def build(seed: int, dim: int = 8, hidden: int = 32, lr: float = 0.03):
    """A fresh model and its LazyAdam optimizer in a Context of the given seed."""
    ctx = sgrad.Context(seed=seed)
    m = Recommender(dim, hidden, ctx)
    return ctx, m, sgrad.optim.LazyAdam(list(m.parameters()), lr=lr)


def train_steps(ctx, m, opt, data, first: int, last: int, batch: int = 128):
    """Steps first..last-1 over consecutive batches of data (wrapping round)."""
    history, candidates, clicks = data
    losses = []
    m.train()
    for step in range(first, last):
        i = (np.arange(batch) + step * batch) % len(clicks)
        loss = sgrad.bce_with_logits(m(history[i], candidates[i]), clicks[i])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        ctx.tape_reset()
    return losses


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The probability that a clicked example outscores an unclicked one."""
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels > 0
    return (ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum())


def evaluate(ctx, m, data) -> float:
    """Held-out AUC in eval mode (no dropout)."""
    history, candidates, clicks = data
    m.eval()
    with sgrad.no_grad():
        scores = m(history, candidates).numpy()
    ctx.tape_reset()
    return auc(scores, clicks)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--checkpoint", help="also save halfway to this file and resume from it")
    args = ap.parse_args(argv)
    train, test = synthetic_data(20000, seed=1), synthetic_data(4000, seed=2)
    ctx, m, opt = build(args.seed)
    print(f"held-out AUC before training: {evaluate(ctx, m, test):.3f}")
    half = args.steps // 2
    losses = train_steps(ctx, m, opt, train, 0, half)
    if args.checkpoint:
        m.save_checkpoint(args.checkpoint, optim=opt)
    losses += train_steps(ctx, m, opt, train, half, args.steps)
    for i in range(0, args.steps, 50):
        print(f"step {i:4d}  loss {np.mean(losses[i:i + 50]):.4f}")
    print(f"held-out AUC after {args.steps} steps: {evaluate(ctx, m, test):.3f}")
    if args.checkpoint:
        ctx2, m2, opt2 = build(args.seed + 1)  # another seed: the file decides
        m2.load_checkpoint(args.checkpoint, optim=opt2)
        train_steps(ctx2, m2, opt2, train, half, args.steps)
        same = all(np.array_equal(a, b) for a, b in
                   zip(m.state_dict().values(), m2.state_dict().values()))
        print("resumed from the checkpoint: " + ("bitwise equal" if same else "DIFFERENT"))
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
