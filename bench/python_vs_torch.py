"""The same embedding training step written once with sgrad's Python package and once with
PyTorch, steps per second side by side (JSON lines on stdout, one per framework and
optimizer).

    PYTHONPATH=python /usr/bin/python3 bench/python_vs_torch.py [--V 1000000 --D 64 --B 10000
                                                                 --steps 50 --threads 1
                                                                 --frameworks sgrad,torch]

Step: e = embedding(W, idx) with idx (B) uniform in [0, V), a fresh batch every step;
loss = (e * e).sum() * (1 / B), spelled the same in both; backward; optimizer step
(sgrad: tape_reset after it). `sgrad-bench pystep` is this step written in C with the same
ops (bench/bench_pystep.c): the Python package's overhead is the ratio of the two. Optimizers: SGD (lr 0.1) and LazyAdam
against torch.optim.SparseAdam (lr 1e-3; torch with sparse=True gradients). Both tables
start equal (uniform [-0.1, 0.1), float32); the index batches are drawn before timing.
Needs numpy and sgrad; the torch half is skipped where torch is not installed. Each torch
line also gives max_abs_diff, the largest difference of its final table from sgrad's after
the same steps: about float32 rounding for SGD; for LazyAdam large wherever a row is not
touched at every step (SparseAdam counts steps per table, LazyAdam per row).
tests/test_python_bench_smoke.sh runs it at tiny sizes (no timing is checked).
"""
import argparse
import json
import time

import numpy as np

import sgrad


def run_sgrad(W0, batches, opt_name, threads):
    ctx = sgrad.Context(threads=threads)
    W = sgrad.from_numpy(W0.copy(), requires_grad=True, ctx=ctx)
    opt = (sgrad.optim.SGD([W], lr=0.1) if opt_name == "sgd"
           else sgrad.optim.LazyAdam([W], lr=1e-3))
    idx = [sgrad.from_numpy(b, ctx=ctx) for b in batches]
    scale = 1.0 / len(batches[0])

    def step(i):
        e = sgrad.embedding(W, idx[i])
        ((e * e).sum() * scale).backward()
        opt.step()
        ctx.tape_reset()
    return step, lambda: W.numpy()


def run_torch(W0, batches, opt_name, threads):
    import torch
    torch.set_num_threads(threads)
    W = torch.tensor(W0, requires_grad=True)
    opt = (torch.optim.SGD([W], lr=0.1) if opt_name == "sgd"
           else torch.optim.SparseAdam([W], lr=1e-3))
    idx = [torch.from_numpy(b) for b in batches]
    scale = 1.0 / len(batches[0])

    def step(i):
        e = torch.nn.functional.embedding(idx[i], W, sparse=True)
        opt.zero_grad(set_to_none=True)
        ((e * e).sum() * scale).backward()
        opt.step()
    return step, lambda: W.detach().numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--V", type=int, default=1_000_000)
    ap.add_argument("--D", type=int, default=64)
    ap.add_argument("--B", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--frameworks", default="sgrad,torch",
                    help="comma-separated: sgrad, torch (torch is skipped when not installed)")
    a = ap.parse_args()
    wanted = set(a.frameworks.split(","))
    r = np.random.default_rng(0)
    W0 = r.uniform(-0.1, 0.1, (a.V, a.D)).astype(np.float32)
    n = a.steps + a.warmup
    batches = [r.integers(0, a.V, a.B, dtype=np.int64) for _ in range(n)]
    frameworks = [("sgrad", run_sgrad)] if "sgrad" in wanted else []
    if "torch" in wanted:
        try:
            import torch  # noqa: F401
            frameworks.append(("torch", run_torch))
        except ImportError:
            pass
    for opt_name in ("sgd", "lazy_adam"):
        final = {}
        for fw, make in frameworks:
            step, table = make(W0, batches, opt_name, a.threads)
            for i in range(a.warmup):
                step(i)
            t0 = time.perf_counter()
            for i in range(a.warmup, n):
                step(i)
            dt = time.perf_counter() - t0
            final[fw] = table()
            rec = {"bench": "python_vs_torch", "framework": fw, "optim": opt_name, "V": a.V,
                   "D": a.D, "B": a.B, "threads": a.threads, "steps": a.steps,
                   "steps_per_sec": a.steps / dt}
            if fw != "sgrad" and "sgrad" in final:
                rec["max_abs_diff"] = float(np.max(np.abs(final[fw] - final["sgrad"])))
            print(json.dumps(rec))


if __name__ == "__main__":
    main()
