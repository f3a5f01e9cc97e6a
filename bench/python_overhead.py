"""What one small op costs from Python, sgrad against PyTorch: the per-call overhead that
dominates models built of many small ops. JSON lines on stdout, one per case and
framework, then one ratio line per case.

    PYTHONPATH=python /usr/bin/python3 bench/python_overhead.py [--rounds 5 --calls 10000
                                                                 --threads 1 --cases all]

Cases (each call is timed in a loop of --calls, both frameworks on equal inputs):
- add, mul, matmul: one (4,16) + (4,16), (4,16) * (4,16), (4,16) @ (16,16), no gradient;
- mlp_step: a 2-layer MLP (32 x 64 -> 128 -> 1, ReLU, BCE with logits) forward, backward
  and an SGD step (sgrad: then tape_reset; torch: zero_grad(set_to_none=True));
- embedding_step: the sparse step of bench/python_vs_torch.py (V 100,000 x D 64, B 1,000
  lookups, SGD on a sparse gradient).
Rounds alternate the frameworks (sgrad, torch, sgrad, torch, ...); each record gives the
median, min and max of the rounds in microseconds per call, and each ratio line
sgrad's median over torch's (below 1: sgrad is faster). Torch uses whatever BLAS Debian's
libblas.so.3 points to (install libopenblas0-pthread for a fair peer: the record names it).
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import sgrad

CASES = ["add", "mul", "matmul", "mlp_step", "embedding_step"]


def blas_name() -> str:
    """The library Debian's libblas.so.3 resolves to in this process (torch loads it)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower()}
        return ",".join(sorted(os.path.basename(p) for p in libs)) or "none loaded"
    except OSError:
        return "unknown"


def sgrad_case(name, r, threads, calls):
    ctx = sgrad.Context(threads=threads)
    a = sgrad.from_numpy(r.standard_normal((4, 16)).astype(np.float32), ctx=ctx)
    b = sgrad.from_numpy(r.standard_normal((4, 16)).astype(np.float32), ctx=ctx)
    w = sgrad.from_numpy(r.standard_normal((16, 16)).astype(np.float32), ctx=ctx)
    if name in ("add", "mul", "matmul"):
        op = {"add": sgrad.add, "mul": sgrad.mul, "matmul": sgrad.matmul}[name]
        y = w if name == "matmul" else b

        def run():
            with sgrad.no_grad(ctx):
                for i in range(calls):
                    op(a, y)
                    if i % 1000 == 999:
                        ctx.tape_reset()  # step tensors of no_grad ops live until a reset
            ctx.tape_reset()
        return run
    if name == "mlp_step":
        x = sgrad.from_numpy(r.standard_normal((32, 64)).astype(np.float32), ctx=ctx)
        t = sgrad.from_numpy((r.random(32) < 0.5).astype(np.float32), ctx=ctx)
        m = sgrad.nn.Sequential(sgrad.nn.Linear(64, 128, ctx=ctx), sgrad.nn.ReLU(),
                                sgrad.nn.Linear(128, 1, ctx=ctx))
        opt = sgrad.optim.SGD(list(m.parameters()), lr=0.01)

        def run():
            for _ in range(calls):
                sgrad.bce_with_logits(m(x).reshape(-1), t).backward()
                opt.step()
                ctx.tape_reset()
        return run
    W = sgrad.from_numpy(r.uniform(-0.1, 0.1, (100_000, 64)).astype(np.float32),
                         requires_grad=True, ctx=ctx)
    opt = sgrad.optim.SGD([W], lr=0.1)
    idx = sgrad.from_numpy(r.integers(0, 100_000, 1000), ctx=ctx)

    def run():
        for _ in range(calls):
            e = sgrad.embedding(W, idx)
            ((e * e).sum() * 1e-3).backward()
            opt.step()
            ctx.tape_reset()
    return run


def torch_case(name, r, threads, calls):
    import torch
    torch.set_num_threads(threads)
    a = torch.from_numpy(r.standard_normal((4, 16)).astype(np.float32))
    b = torch.from_numpy(r.standard_normal((4, 16)).astype(np.float32))
    w = torch.from_numpy(r.standard_normal((16, 16)).astype(np.float32))
    if name in ("add", "mul", "matmul"):
        op = {"add": torch.add, "mul": torch.mul, "matmul": torch.matmul}[name]
        y = w if name == "matmul" else b

        def run():
            with torch.no_grad():
                for _ in range(calls):
                    op(a, y)
        return run
    if name == "mlp_step":
        x = torch.from_numpy(r.standard_normal((32, 64)).astype(np.float32))
        t = torch.from_numpy((r.random(32) < 0.5).astype(np.float32))
        m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 1))
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        loss_fn = torch.nn.functional.binary_cross_entropy_with_logits

        def run():
            for _ in range(calls):
                loss_fn(m(x).reshape(-1), t).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        return run
    W = torch.tensor(r.uniform(-0.1, 0.1, (100_000, 64)).astype(np.float32),
                     requires_grad=True)
    opt = torch.optim.SGD([W], lr=0.1)
    idx = torch.from_numpy(r.integers(0, 100_000, 1000))

    def run():
        for _ in range(calls):
            e = torch.nn.functional.embedding(idx, W, sparse=True)
            ((e * e).sum() * 1e-3).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10000, help="calls per round (small ops)")
    ap.add_argument("--step-calls", type=int, default=200, help="calls per round (steps)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cases", default="all", help="comma-separated subset of " +
                    ",".join(CASES))
    ap.add_argument("--frameworks", default="sgrad,torch")
    args = ap.parse_args()
    cases = CASES if args.cases == "all" else args.cases.split(",")
    frameworks = args.frameworks.split(",")
    makers = {"sgrad": sgrad_case, "torch": torch_case}
    for case in cases:
        calls = args.step_calls if case.endswith("_step") else args.calls
        runs = {fw: makers[fw](case, np.random.default_rng(1), args.threads, calls)
                for fw in frameworks}
        times = {fw: [] for fw in frameworks}
        for fw in frameworks:
            runs[fw]()  # warm-up round, untimed
        for _ in range(args.rounds):
            for fw in frameworks:
                t0 = time.perf_counter()
                runs[fw]()
                times[fw].append((time.perf_counter() - t0) / calls * 1e6)
        med = {}
        for fw in frameworks:
            med[fw] = statistics.median(times[fw])
            rec = {"bench": "python_overhead", "case": case, "framework": fw,
                   "threads": args.threads, "calls": calls, "rounds": args.rounds,
                   "us_per_call_median": round(med[fw], 3),
                   "us_per_call_min": round(min(times[fw]), 3),
                   "us_per_call_max": round(max(times[fw]), 3)}
            if fw == "torch":
                import torch
                rec["torch_version"] = torch.__version__
                rec["blas"] = blas_name()
            print(json.dumps(rec), flush=True)
        if "sgrad" in med and "torch" in med:
            print(json.dumps({"bench": "python_overhead", "case": case,
                              "ratio_sgrad_over_torch": round(med["sgrad"] / med["torch"], 3)}),
                  flush=True)


if __name__ == "__main__":
    main()
