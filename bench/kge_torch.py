"""The knowledge-graph embedding models of sgrad-kge written in PyTorch, the peer of
bench/kge_compare.sh: the same data order, chunked negatives, scores, losses, N3 term and
optimizers, with PyTorch's sparse embeddings (nn.Embedding(sparse=True)).

    /usr/bin/python3 bench/kge_torch.py -train T -valid V -test E [-model complex]
        [-dim 200] [-epochs 1] [-batch 1000] [-chunk 1000] [-negs 1000] [-chunk-negs 0]
        [-loss softmax] [-margin 0] [-adv-temp 1] [-reciprocal 1] [-reg n3] [-reg-coef 0.05]
        [-optim adagrad] [-lr 0.1] [-init-scale 0] [-threads 1] [-seed 1] [-max-eval 0]

Prints one JSON line: {"arm": "torch", "model", "threads", "epochs", "edges",
"train_s", "edges_per_s", "mrr", "hits@1", "hits@3", "hits@10", "mr", "count"}; the
metrics are the filtered ranking of the test file (both sides, ties as the mean rank,
known triples of train, valid and test filtered), as `sgrad-kge eval` computes them.

Semantics (docs/kge.md): entities are numbered in order of first appearance in the
training file, then valid, then test; negatives are drawn uniformly from the entities of
the training file. "edges" counts training edges (an edge with -reciprocal 1 is trained
as its tail and its reciprocal's tail, without, as its tail and its head corruption: one
edge either way). The shuffle and the negatives come from torch's generator, so the two
programs see the same distribution, not the same draws: compare MRRs within the seed
spread, not bitwise. Run it with an optimized BLAS loaded (Debian's
libopenblas0-pthread); the JSON line does not say which, the caller records it.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F


def read_tsv(path, ents, rels):
    triples = []
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            h, r, t = line.rstrip("\r\n").split("\t")
            triples.append((ents.setdefault(h, len(ents)), rels.setdefault(r, len(rels)),
                            ents.setdefault(t, len(ents))))
    return torch.tensor(triples, dtype=torch.int64)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prefix_chars="-")
    add = p.add_argument
    add("-train", required=True), add("-valid", required=True), add("-test", required=True)
    add("-model", default="complex",
        choices=["transe_l1", "transe_l2", "distmult", "complex", "rotate"])
    for name, kind, default in [("-dim", int, 200), ("-epochs", int, 1), ("-batch", int, 1000),
                                ("-chunk", int, 1000), ("-negs", int, 1000),
                                ("-chunk-negs", int, 0), ("-margin", float, 0.0),
                                ("-adv-temp", float, 1.0), ("-reciprocal", int, 1),
                                ("-reg-coef", float, 0.05), ("-lr", float, 0.1),
                                ("-init-scale", float, 0.0), ("-threads", int, 1),
                                ("-seed", int, 1), ("-max-eval", int, 0)]:
        add(name, type=kind, default=default)
    add("-loss", default="softmax", choices=["softmax", "logistic", "margin", "selfadv"])
    add("-reg", default="n3", choices=["n3", "none"])
    add("-optim", default="adagrad", choices=["adagrad", "rowwise-adagrad", "sgd", "lazy-adam"])
    return p.parse_args(argv)


def init_scale(a):
    """sgrad-kge's rule: -init-scale, or 1e-3 for the dot models, (margin + 2) / hidden
    units for the distance models (RotatE's embedding range; margin 0 counts as 6)."""
    if a.init_scale > 0:
        return a.init_scale
    if a.model in ("distmult", "complex"):
        return 1e-3
    m = a.margin if a.margin > 0 else 6.0
    return (m + 2) / (a.dim // 2 if a.model == "rotate" else a.dim)


class Model(torch.nn.Module):
    """Entity rows of dim reals (complex and rotate: dim/2 real parts, then dim/2
    imaginary parts); relation rows of dim reals (rotate: dim/2 phases). Rows start
    uniform in [-s, s] (rotate's phases in [-pi, pi]), as sgrad-kge's."""

    def __init__(self, a, n_ent, n_rel):
        super().__init__()
        self.kind = a.model
        rdim = a.dim // 2 if a.model == "rotate" else a.dim
        self.ent = torch.nn.Embedding(n_ent, a.dim, sparse=True)
        self.rel = torch.nn.Embedding(n_rel, rdim, sparse=True)
        s = init_scale(a)
        with torch.no_grad():
            self.ent.weight.uniform_(-s, s)
            if a.model == "rotate":
                self.rel.weight.uniform_(-math.pi, math.pi)
            else:
                self.rel.weight.uniform_(-s, s)

    def complex_rel(self, r):
        if self.kind == "rotate":
            return torch.cat([torch.cos(r), torch.sin(r)], 1)
        return r

    def query(self, e, r, tail):
        """The tail query of (e, r) (tail True) or the head query of (r, e)."""
        k = self.kind
        if k.startswith("transe"):
            return e + r if tail else e - r
        if k == "distmult":
            return e * r
        r = self.complex_rel(r)
        h = e.shape[1] // 2
        er, ei, rr, ri = e[:, :h], e[:, h:], r[:, :h], r[:, h:]
        if not tail:
            ri = -ri
        return torch.cat([er * rr - ei * ri, er * ri + ei * rr], 1)

    def sim(self, q, e):
        """Scores of every query row against every entity row: (Q, E)."""
        k = self.kind
        if k in ("distmult", "complex"):
            return q @ e.t()
        if k == "transe_l1":
            return -torch.cdist(q, e, p=1)
        if k == "transe_l2":
            return -torch.cdist(q, e, p=2)
        h = q.shape[1] // 2
        d = q[:, None, :] - e[None, :, :]  # the (Q, E, dim) tensor of the obvious RotatE
        return -torch.sqrt(d[:, :, :h] ** 2 + d[:, :, h:] ** 2).sum(2)

    def sim_rows(self, q, e):
        k = self.kind
        if k in ("distmult", "complex"):
            return (q * e).sum(1)
        if k == "transe_l1":
            return -(q - e).abs().sum(1)
        if k == "transe_l2":
            return -(q - e).norm(dim=1)
        h = q.shape[1] // 2
        d = q - e
        return -torch.sqrt(d[:, :h] ** 2 + d[:, h:] ** 2).sum(1)


def ranking_loss(a, pos, neg, valid=None):
    """sg_ranking_loss: pos (Q), neg (Q, N); valid (Q, N) bool marks the columns that take
    part (None: all), the masked ones counting in no sum, mean or softmax."""
    if valid is not None:
        neg_inf = neg.masked_fill(~valid, -math.inf)
        count = valid.sum(1).to(neg.dtype)
    else:
        neg_inf, count = neg, torch.full_like(pos, neg.shape[1])
    keep = (lambda x: x) if valid is None else (lambda x: x * valid)
    if a.loss == "softmax":
        return (torch.logsumexp(torch.cat([pos[:, None], neg_inf], 1), 1) - pos).sum()
    if a.loss == "logistic":
        return (F.softplus(-pos) + keep(F.softplus(neg)).sum(1) / count.clamp(min=1)).sum()
    if a.loss == "margin":
        return keep(F.relu(a.margin - pos[:, None] + neg)).sum()
    w = torch.softmax(a.adv_temp * neg_inf, 1).detach()
    return (-F.logsigmoid(a.margin + pos) - keep(w * F.logsigmoid(-neg - a.margin)).sum(1)).sum()


def n3(a, model, x):
    if a.model in ("complex", "rotate"):
        h = x.shape[1] // 2
        return torch.sqrt(x[:, :h] ** 2 + x[:, h:] ** 2).pow(3).sum()
    return x.abs().pow(3).sum()


def side_loss(a, model, q, target, own, negs, offset):
    """One side of a chunk, as sgrad-kge's: queries q (Q, dim) with true rows target
    against the chunk's shared negatives and, with -chunk-negs, against `own` (the
    chunk's true rows), query i's own column offset + i masked."""
    neg = model.sim(q, model.ent(negs))
    valid = None
    if a.chunk_negs:
        neg = torch.cat([neg, model.sim(q, own)], 1)
        valid = torch.ones_like(neg, dtype=torch.bool)
        rows = torch.arange(q.shape[0])
        valid[rows, a.negs + offset + rows] = False
    return ranking_loss(a, model.sim_rows(q, target), neg, valid)


def chunk_loss(a, model, h, r, t, n_rel, n_train, gen):
    """A chunk of edges sharing one draw of a.negs negatives: with -reciprocal, its 2M
    tail queries (h, r) and (t, r + R) in one matrix (in-chunk negatives: the chunk's
    tails, then heads); without, the tail side and the head side, each against the same
    negatives (in-chunk negatives: that side's true entities)."""
    negs = torch.randint(0, n_train, (a.negs,), generator=gen)
    H, T = model.ent(h), model.ent(t)
    if a.reciprocal:
        q = torch.cat([model.query(H, model.rel(r), True), model.query(T, model.rel(r + n_rel), True)])
        target = torch.cat([T, H])
        return side_loss(a, model, q, target, target, negs, 0)
    R = model.rel(r)
    return (side_loss(a, model, model.query(H, R, True), T, T, negs, 0) +
            side_loss(a, model, model.query(T, R, False), H, H, negs, 0))


def train_batch(a, model, opt, batch, n_rel, n_train, gen):
    h, r, t = batch[:, 0], batch[:, 1], batch[:, 2]
    loss = 0.0
    for c0 in range(0, batch.shape[0], a.chunk):
        c = slice(c0, c0 + a.chunk)
        loss = loss + chunk_loss(a, model, h[c], r[c], t[c], n_rel, n_train, gen)
    loss = loss / (2 * batch.shape[0])
    if a.reg == "n3":
        # sgrad-kge's N3: each query's head, relation and tail rows, over 2 x the batch's
        # edges (the reciprocal query's rows are t, r + R and h; rotate's phases are not
        # regularised)
        queries = [(h, r, t), (t, r + n_rel, h)] if a.reciprocal else [(h, r, t), (t, r, h)]
        reg = 0.0
        for e1, rel, e2 in queries:
            reg = reg + n3(a, model, model.ent(e1)) + n3(a, model, model.ent(e2))
            if a.model != "rotate":
                reg = reg + n3(a, model, model.rel(rel))
        loss = loss + a.reg_coef / (2 * batch.shape[0]) * reg
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss)


def filtered_metrics(a, model, test, known, n_rel):
    """Filtered ranks of both sides of every test triple against every entity."""
    ranks = []
    E = model.ent.weight.detach()
    R = model.rel.weight.detach()
    with torch.no_grad():
        for h, r, t in test.tolist():
            for e, rr, true, tail in ((h, r, t, True), (t, r, h, False)):
                if a.reciprocal and not tail:
                    q = model.query(E[e:e + 1], R[r + n_rel:r + n_rel + 1], True)
                else:
                    q = model.query(E[e:e + 1], R[rr:rr + 1], tail)
                s = model.sim(q, E)[0]
                st = s[true].item()
                drop = known[(e, r, tail)]
                mask = torch.ones_like(s, dtype=torch.bool)
                mask[list(drop)] = False
                mask[true] = False
                sm = s[mask]
                ranks.append(1 + (sm > st).sum().item() + (sm == st).sum().item() / 2)
    ranks = torch.tensor(ranks, dtype=torch.float64)
    return {"mrr": (1 / ranks).mean().item(), "hits@1": (ranks <= 1).double().mean().item(),
            "hits@3": (ranks <= 3).double().mean().item(),
            "hits@10": (ranks <= 10).double().mean().item(), "mr": ranks.mean().item(),
            "count": len(ranks) // 2}


def known_index(sets):
    known = {}
    for s in sets:
        for h, r, t in s.tolist():
            known.setdefault((h, r, True), set()).add(t)
            known.setdefault((t, r, False), set()).add(h)
    return known


class RowwiseAdagrad(torch.optim.Optimizer):
    """Row-wise Adagrad on sparse gradients, as sgrad's sg_optim_rowwise_adagrad and
    FBGEMM's: one accumulator per row, += the mean of the row's squared gradient; the
    row moves by lr g / (sqrt(acc) + eps). torch has no such optimizer."""

    def __init__(self, params, lr, eps=1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.coalesce()
                rows, vals = g.indices()[0], g.values()
                acc = self.state[p].setdefault("acc", torch.zeros(p.shape[0], dtype=p.dtype))
                acc[rows] += (vals * vals).mean(1)
                p[rows] -= group["lr"] * vals / (acc[rows].sqrt() + group["eps"])[:, None]


def make_optimizer(a, model):
    """torch's optimizers on the sparse gradients; lazy-adam is torch's SparseAdam, whose
    bias correction counts the parameter's steps where sgrad's LazyAdam counts each row's
    (docs/kge.md)."""
    params = list(model.parameters())
    if a.optim == "adagrad":
        return torch.optim.Adagrad(params, lr=a.lr)
    if a.optim == "rowwise-adagrad":
        return RowwiseAdagrad(params, lr=a.lr)
    if a.optim == "sgd":
        return torch.optim.SGD(params, lr=a.lr)
    return torch.optim.SparseAdam(params, lr=a.lr)


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    ents, rels = {}, {}
    train = read_tsv(a.train, ents, rels)
    n_train = len(ents)
    valid = read_tsv(a.valid, ents, rels)
    test = read_tsv(a.test, ents, rels)
    n_rel = len(rels)
    model = Model(a, len(ents), 2 * n_rel if a.reciprocal else n_rel)
    opt = make_optimizer(a, model)
    gen = torch.Generator().manual_seed(a.seed)
    start = time.perf_counter()
    for _ in range(a.epochs):
        order = train[torch.randperm(train.shape[0], generator=gen)]
        for b0 in range(0, order.shape[0], a.batch):
            train_batch(a, model, opt, order[b0:b0 + a.batch], n_rel, n_train, gen)
    train_s = time.perf_counter() - start
    known = known_index([train, valid, test])
    if a.max_eval:
        test = test[:a.max_eval]
    metrics = filtered_metrics(a, model, test, known, n_rel)
    edges = a.epochs * train.shape[0]
    print(json.dumps({"arm": "torch", "model": a.model, "threads": a.threads,
                      "epochs": a.epochs, "edges": edges, "train_s": round(train_s, 3),
                      "edges_per_s": round(edges / train_s, 1), **metrics}))


if __name__ == "__main__":
    main(sys.argv[1:])
