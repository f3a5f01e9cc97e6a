"""A DLRM-style training step in PyTorch, with PyTorch's own sparse embeddings against the
same model with sgrad's tables (sgrad.torch.EmbeddingBagCollection, fused optimizer in
the backward). JSON lines on stdout, one per (part, optimizer, threads, arm).

    PYTHONPATH=python /usr/bin/python3 bench/torch_embedding.py [--tables 8 --rows 1000000
        --dim 64 --pooling 20 --batch 2048 --dense 13 --steps 5 --rounds 7
        --threads 1,2 --blas-threads N --optimizers adagrad,adam
        --parts dlrm,embedding,embedding_none]

Model: K tables (rows x dim, float32), bags of exactly `pooling` uniform random rows per
sample and table (mode "sum"); a 3-layer MLP on the `dense` features (dense -> 512 -> 256
-> dim, ReLU); the MLP's output and the K pooled rows side by side -> Linear -> one logit;
BCE-with-logits loss on random 0/1 labels. Synthetic data, 4 batches drawn before timing
and cycled.

Arms (one training step each; the MLP always uses torch's optimizer of the same kind):
- torch: K nn.EmbeddingBag(sparse=True), torch.optim.Adagrad (adagrad) or
  torch.optim.SparseAdam (adam) on their sparse gradients;
- sgrad: sgrad.torch.EmbeddingBagCollection with the fused sgrad.torch.Adagrad or
  sgrad.torch.LazyAdam (its rows updated inside loss.backward());
- sgrad_none (part embedding_none): the collection with optimizer=None, torch's sparse
  optimizer on the sparse gradients it returns.
- mlp (part dlrm only): the same step with no tables at all (the pooled rows a fixed
  input), the dense half both arms share: torch's step over it is the speedup an
  embedding that cost nothing would show, and adding `sgrad-bench bagmem`'s floor (the
  tables' memory traffic alone) gives the most any implementation can show here.
Parts: dlrm (the whole step), embedding (the tables alone: forward, backward with a fixed
random output gradient, update), embedding_none (the same, sgrad_none against torch), and
threads (the sgrad DLRM step only, with torch's and sgrad's thread counts (1,1), (2,1),
(1,2), (2,2) in turn: the rule is that sgrad takes torch.get_num_threads(), and 2 + 2
threads must not run slower than 2; `speedup` is against (1,1); run it alone with
--parts threads, its --threads value is ignored).

Method: for each part and optimizer the arms run in turn, `steps` timed steps each, for
`rounds` rounds (A B A B ...) after one untimed warm-up round; each line gives the median
(and min/max) over rounds of the mean step time, and `speedup` = torch's median / the
arm's. torch and sgrad get the same thread count (torch.set_num_threads; sgrad.torch
follows it), and OpenBLAS's pool --blas-threads (default: the same count), all arms alike.
The first line records the machine, torch's version, the BLAS library torch loaded (from
/proc/self/maps) and the kernels OpenBLAS picked (`openblas_core`; Debian's OpenBLAS 0.3.21
takes its SSE3 `Prescott` kernels on CPUs it does not know, whose products run several
times slower than the AVX-512 ones `OPENBLAS_CORETYPE=SkylakeX` selects: docs/blas.md).

Pages: sgrad.torch's tables are numpy allocations, which numpy advises for transparent
huge pages (where /sys/kernel/mm/transparent_hugepage/enabled says madvise); torch's own
allocator does not. --torch-hugepages puts the torch arm's tables on numpy memory too, to
see how much of the difference that is (its optimizer state stays torch's).

Memory: each arm holds its tables and optimizer state (Adam: 3x the tables), two arms at
a time: about 12 GB at the default sizes with Adam. Shrink with --tables/--rows/--batch
for a smoke run (tests/test_python_bench_smoke.sh style: seconds).
"""
import argparse
import ctypes
import gc
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn

import sgrad
import sgrad.torch as st


def blas_libraries():
    """The BLAS/LAPACK shared libraries mapped into this process (after a matmul)."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path).lower()
                if any(k in base for k in ("blas", "mkl", "lapack", "blis")):
                    found.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(found)


def openblas_core():
    """The kernel family OpenBLAS picked for this CPU (openblas_get_corename), or None when
    torch does not run on OpenBLAS. OPENBLAS_CORETYPE overrides its detection."""
    ob = st._openblas()
    if ob is None:
        return None
    ob.openblas_get_corename.restype = ctypes.c_char_p
    return ob.openblas_get_corename().decode()


class MLP(nn.Module):
    def __init__(self, dense, dim, emb_width):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 512), nn.ReLU(), nn.Linear(512, 256),
                                    nn.ReLU(), nn.Linear(256, dim), nn.ReLU())
        self.top = nn.Linear(dim + emb_width, 1)

    def forward(self, x, pooled):
        return self.top(torch.cat([self.bottom(x), pooled], dim=1)).squeeze(1)


class TorchTables(nn.Module):
    def __init__(self, K, rows, dim, hugepages=False):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
                                  for _ in range(K))
        if hugepages:  # the same values on numpy memory (advised for huge pages)
            for bag in self.bags:
                bag.weight = nn.Parameter(torch.from_numpy(bag.weight.detach().numpy().copy()))

    def forward(self, batch):
        return torch.cat([bag(i, o) for bag, (i, o) in zip(self.bags, batch["per_table"])],
                         dim=1)


class SgradTables(nn.Module):
    def __init__(self, K, rows, dim, optimizer):
        super().__init__()
        self.ebc = st.EmbeddingBagCollection([(rows, dim)] * K, optimizer=optimizer)

    def forward(self, batch):
        return self.ebc(batch["values"], lengths=batch["lengths"])


def make_batches(args, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    K, B, P = args.tables, args.batch, args.pooling
    out = []
    for _ in range(n):
        idx = torch.randint(0, args.rows, (K, B * P), generator=g)
        offsets = torch.arange(0, B * P, P)
        out.append({
            "per_table": [(idx[k].contiguous(), offsets) for k in range(K)],
            "values": idx.reshape(-1).contiguous(),
            "lengths": torch.full((K * B,), P, dtype=torch.int64),
            "dense": torch.randn(B, args.dense, generator=g),
            "labels": torch.randint(0, 2, (B,), generator=g).float(),
            "gout": torch.randn(B, K * args.dim, generator=g),
        })
    return out


def dense_optimizer(kind, params):
    return (torch.optim.Adagrad(params, lr=0.01) if kind == "adagrad"
            else torch.optim.Adam(params, lr=1e-3))


def torch_sparse_optimizer(kind, params):
    return (torch.optim.Adagrad(params, lr=0.01) if kind == "adagrad"
            else torch.optim.SparseAdam(params, lr=1e-3))


def sgrad_fused(kind):
    return st.Adagrad(lr=0.01) if kind == "adagrad" else st.LazyAdam(lr=1e-3)


def build_arm(arm, part, kind, args):
    """A step function (taking a batch) for one arm, and what keeps it alive."""
    torch.manual_seed(1)
    K, rows, dim = args.tables, args.rows, args.dim
    if arm == "torch":
        tables = TorchTables(K, rows, dim, args.torch_hugepages)
        sparse_opt = torch_sparse_optimizer(kind, list(tables.parameters()))
    elif arm == "sgrad":
        tables = SgradTables(K, rows, dim, sgrad_fused(kind))
        sparse_opt = None
    elif arm == "mlp":  # no tables: each sample's pooled rows a fixed input
        tables = (lambda batch: batch["gout"].detach().requires_grad_())
        sparse_opt = None
    elif arm == "sgrad_none":
        tables = SgradTables(K, rows, dim, None)
        sparse_opt = torch_sparse_optimizer(kind, [tables.ebc.embedding_bags[k].weight
                                                   for k in tables.ebc.keys])
    else:
        raise ValueError(arm)
    if part == "dlrm":
        mlp = MLP(args.dense, dim, K * dim)
        dense_opt = dense_optimizer(kind, list(mlp.parameters()))
        loss_fn = nn.BCEWithLogitsLoss()

        def step(batch):
            dense_opt.zero_grad(set_to_none=True)
            if sparse_opt is not None:
                sparse_opt.zero_grad(set_to_none=True)
            loss = loss_fn(mlp(batch["dense"], tables(batch)), batch["labels"])
            loss.backward()
            dense_opt.step()
            if sparse_opt is not None:
                sparse_opt.step()
            return loss
        return step, (tables, mlp, sparse_opt, dense_opt)
    if arm == "mlp":
        raise ValueError("the mlp arm is a dlrm step without tables")

    def step(batch):
        if sparse_opt is not None:
            sparse_opt.zero_grad(set_to_none=True)
        out = tables(batch)
        out.backward(batch["gout"])
        if sparse_opt is not None:
            sparse_opt.step()
        return out
    return step, (tables, sparse_opt)


def run_threads(kind, args, batches, emit):
    """The sgrad DLRM step under (torch threads, sgrad threads) pairs, in turn."""
    pairs = [(1, 1), (2, 1), (1, 2), (2, 2)]
    step, keep = build_arm("sgrad", "dlrm", kind, args)
    ebc = keep[0].ebc
    times, blas = {p: [] for p in pairs}, {}
    for r in range(args.rounds + 1):
        for p in pairs:
            st.set_num_threads(p[0], args.blas_threads)
            blas[p] = st.blas_threads()
            ebc.threads = p[1]
            ms = time_arm(step, batches, args.steps, r * args.steps)
            if r:
                times[p].append(ms)
    base = statistics.median(times[(1, 1)])
    for p in pairs:
        med = statistics.median(times[p])
        emit({"bench": "torch_embedding", "part": "threads", "optimizer": kind,
              "torch_threads": p[0], "sgrad_threads": p[1], "blas_threads": blas[p],
              "arm": "sgrad",
              "ms": round(med, 3), "ms_min": round(min(times[p]), 3),
              "ms_max": round(max(times[p]), 3), "speedup": round(base / med, 3),
              "rounds": args.rounds, "steps": args.steps})
    del step, keep, ebc
    gc.collect()


def time_arm(step, batches, steps, start):
    t0 = time.perf_counter()
    for i in range(steps):
        step(batches[(start + i) % len(batches)])
    return (time.perf_counter() - t0) / steps * 1e3


def run_pair(part, kind, threads, arms, args, batches, emit):
    st.set_num_threads(threads, args.blas_threads)  # torch's, OpenBLAS's, so sgrad's
    built = {}
    for arm in arms:
        built[arm] = build_arm(arm, part, kind, args)
    times = {arm: [] for arm in arms}
    for r in range(args.rounds + 1):
        for arm in arms:
            ms = time_arm(built[arm][0], batches, args.steps, r * args.steps)
            if r:  # round 0 warms up
                times[arm].append(ms)
    base = statistics.median(times["torch"])
    for arm in arms:
        med = statistics.median(times[arm])
        emit({"bench": "torch_embedding", "part": part, "optimizer": kind,
              "threads": threads, "blas_threads": st.blas_threads(), "arm": arm,
              "torch_optimizer": {"adagrad": "Adagrad", "adam": "SparseAdam"}[kind]
              if arm in ("torch", "sgrad_none") else None,
              "sgrad_optimizer": {"adagrad": "Adagrad", "adam": "LazyAdam"}[kind]
              if arm == "sgrad" else None,
              "ms": round(med, 3), "ms_min": round(min(times[arm]), 3),
              "ms_max": round(max(times[arm]), 3), "speedup": round(base / med, 3),
              "rounds": args.rounds, "steps": args.steps})
    del built
    gc.collect()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--pooling", type=int, default=20)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--dense", type=int, default=13)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per arm and round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--optimizers", default="adagrad,adam")
    ap.add_argument("--parts", default="dlrm,embedding,embedding_none",
                    help="of dlrm, embedding, embedding_none, threads")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="OpenBLAS's pool for every arm (default: --threads' value)")
    ap.add_argument("--torch-hugepages", action="store_true",
                    help="the torch arm's tables on numpy memory (huge pages advised)")
    args = ap.parse_args(argv)
    if args.blas_threads is not None and args.blas_threads < 1:
        ap.error(f"--blas-threads {args.blas_threads}: a count >= 1 is needed")

    def emit(d):
        print(json.dumps(d), flush=True)

    emit({"bench": "torch_embedding", "config": {k: v for k, v in vars(args).items()},
          "torch": torch.__version__, "sgrad": sgrad.__version__, "numpy": np.__version__,
          "blas": blas_libraries(), "openblas_core": openblas_core(),
          "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
          "openblas_threads_default": st.blas_threads(),
          "machine": platform.machine(),
          "cpus": os.cpu_count(), "python": sys.version.split()[0],
          "thp": open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()
          if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled") else None})
    batches = make_batches(args)
    parts = args.parts.split(",")
    for threads in [int(t) for t in args.threads.split(",")]:
        for kind in args.optimizers.split(","):
            for part in parts:
                if part == "threads":
                    continue
                arms = ["torch", "sgrad_none" if part == "embedding_none" else "sgrad"]
                arms += ["mlp"] if part == "dlrm" else []
                run_pair(part, kind, threads, arms, args, batches, emit)
    if "threads" in parts:
        for kind in args.optimizers.split(","):
            run_threads(kind, args, batches, emit)


if __name__ == "__main__":
    main()
