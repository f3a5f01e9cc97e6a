"""Dense products, sgrad against PyTorch: forward (C = A @ B) and forward plus backward
(both input gradients) of float32 (M,K)@(K,N) on the same shapes and thread counts, in
interleaved rounds (sgrad, torch, sgrad, torch, ...), medians and ratios as JSON lines.

    /usr/bin/python3 bench/matmul_vs_torch.py [--bench build-blas/sgrad-bench]
        [--shapes 1000x200x1000,2048x512x256,1024x100x512] [--threads 1,2]
        [--rounds 3] [--reps 5] [--pause 0.5] [--frameworks sgrad,torch]

sgrad's side is the build's sgrad-bench (`sgrad-bench --threads T --reps R --shape MxKxN
matmul`, one process a round: bench/bench_matmul.c), which also times sgrad's hand-written
kernel (direct_gflops). torch's side runs in this process: torch.set_num_threads(T), and
the same count for the OpenBLAS it calls (openblas_set_num_threads, since the OpenBLAS
under Debian's torch keeps its own thread count); Debian's torch calls whatever the
libblas.so.3 alternative points to (`update-alternatives --display
libblas.so.3-x86_64-linux-gnu`), reported with the core OpenBLAS picked for this CPU and
any OPENBLAS_* settings in the environment, which change it.

Output, one JSON object a line:
  {"bench":"matmul_vs_torch","framework":"sgrad"|"torch","case":"fwd"|"fwd_bwd",
   "M","K","N","threads","ms" (median over rounds of each round's median),"gflops",
   "rounds_ms":[...], + sgrad: "direct_gflops","kernel","blas"}
  {"bench":"matmul_vs_torch","framework":"ratio", ..., "sgrad_gflops","torch_gflops",
   "ratio" (sgrad GFLOP/s over torch's)}
  {"bench":"matmul_vs_torch","framework":"scaling", ..., "threads":T, "speedup":
   sgrad's GFLOP/s at T threads over its rate at the first thread count}
and first one line of "env". Forward plus backward counts 3 products (6 M K N flops).
Without torch (or with --frameworks sgrad) only sgrad is timed; without sgrad-bench it
exits 77. tests/test_bench_smoke.sh runs it at a tiny size (no timing is checked).
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import time


def parse_shape(s):
    m, k, n = (int(x) for x in s.lower().split("x"))
    return m, k, n


def sgrad_round(bench, shape, threads, reps):
    """One sgrad-bench run: {case: record}."""
    m, k, n = shape
    out = subprocess.run([bench, "--threads", str(threads), "--reps", str(reps), "--shape",
                          f"{m}x{k}x{n}", "matmul"], check=True, capture_output=True, text=True).stdout
    recs = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {r["case"]: r for r in recs}


class Torch:
    def __init__(self):
        import torch
        self.torch = torch
        self.openblas = None
        try:  # the OpenBLAS torch already loaded (libblas.so.3 -> openblas-pthread)
            lib = ctypes.CDLL("libopenblas.so.0")
            lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            self.openblas = lib
        except (OSError, AttributeError):
            pass

    def info(self):
        t = self.torch
        blas = re.search(r"BLAS_INFO=([^,\s]+)", t.__config__.show())
        d = {"torch": t.__version__, "torch_blas_info": blas.group(1) if blas else None}
        if self.openblas:
            d["openblas_core"] = self.openblas.openblas_get_corename().decode()
            d["openblas_config"] = self.openblas.openblas_get_config().decode()
        return d

    def set_threads(self, n):
        self.torch.set_num_threads(n)
        if self.openblas:
            self.openblas.openblas_set_num_threads(n)

    def round(self, shape, reps):
        """Medians (ms) of forward and forward + backward over reps runs, after a warm-up."""
        t = self.torch
        m, k, n = shape
        g = t.Generator().manual_seed(0)
        a = (t.rand(m, k, generator=g) * 2 - 1).requires_grad_()
        b = (t.rand(k, n, generator=g) * 2 - 1).requires_grad_()
        go = t.rand(m, n, generator=g) * 2 - 1

        def fwd():
            with t.no_grad():
                c = a @ b
            return float(c[0, 0])

        def fwd_bwd():
            a.grad = None
            b.grad = None
            c = a @ b
            c.backward(go)
            return float(a.grad[0, 0]) + float(b.grad[0, 0])

        res = {}
        for case, fn in (("fwd", fwd), ("fwd_bwd", fwd_bwd)):
            fn()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            res[case] = statistics.median(times)
        return res


def env_info(bench):
    d = {"bench": "matmul_vs_torch", "framework": "env", "sgrad_bench": bench,
         "cpu_count": os.cpu_count(),
         "openblas_env": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
         "blis_env": {k: v for k, v in os.environ.items() if k.startswith("BLIS")}}
    libblas = "/usr/lib/x86_64-linux-gnu/libblas.so.3"
    if os.path.exists(libblas):
        d["libblas.so.3"] = os.path.realpath(libblas)
    try:
        d["loadavg"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    return d


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bench", default=os.path.join(here, "..", "build", "sgrad-bench"))
    ap.add_argument("--shapes", default="1000x200x1000,2048x512x256,1024x100x512")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pause", type=float, default=0.5,
                    help="seconds of sleep after each timed run: the threads OpenBLAS and OpenMP "
                         "keep spinning for a while after their work would take the cores from "
                         "the other framework's run on a small machine")
    ap.add_argument("--frameworks", default="sgrad,torch",
                    help="comma-separated: sgrad, torch (torch is skipped when not installed)")
    a = ap.parse_args()
    wanted = set(a.frameworks.split(","))
    if not os.access(a.bench, os.X_OK):
        print(f"matmul_vs_torch: no sgrad-bench at {a.bench} (--bench)", file=sys.stderr)
        sys.exit(77)
    torch = None
    if "torch" in wanted:
        try:
            torch = Torch()
        except ImportError:
            print("matmul_vs_torch: torch is not installed; sgrad only", file=sys.stderr)
    shapes = [parse_shape(s) for s in a.shapes.split(",")]
    threads = [int(x) for x in a.threads.split(",")]
    info = env_info(os.path.abspath(a.bench))
    if torch:
        info.update(torch.info())
    print(json.dumps(info), flush=True)

    base = {}  # (shape, case) -> sgrad gflops at threads[0]
    for th in threads:
        if torch:
            torch.set_threads(th)
        for shape in shapes:
            m, k, n = shape
            flops = {"fwd": 2.0 * m * k * n, "fwd_bwd": 6.0 * m * k * n}
            sg_rounds, th_rounds = [], []
            for _ in range(a.rounds):  # A B A B ...
                if "sgrad" in wanted:
                    sg_rounds.append(sgrad_round(a.bench, shape, th, a.reps))
                    time.sleep(a.pause)
                if torch:
                    th_rounds.append(torch.round(shape, a.reps))
                    time.sleep(a.pause)
            for case in ("fwd", "fwd_bwd"):
                key = {"bench": "matmul_vs_torch", "case": case, "M": m, "K": k, "N": n, "threads": th}
                sg_g = th_g = None
                if sg_rounds:
                    ms_list = [r[case]["ms"] for r in sg_rounds]
                    ms = statistics.median(ms_list)
                    sg_g = flops[case] / (ms * 1e6)
                    last = sg_rounds[-1][case]
                    print(json.dumps({**key, "framework": "sgrad", "ms": ms, "gflops": round(sg_g, 3),
                                      "rounds_ms": ms_list,
                                      "direct_gflops": statistics.median(r[case]["direct_gflops"] for r in sg_rounds),
                                      "kernel": last.get("kernel"), "blas": last.get("blas")}), flush=True)
                if th_rounds:
                    ms_list = [r[case] for r in th_rounds]
                    ms = statistics.median(ms_list)
                    th_g = flops[case] / (ms * 1e6)
                    print(json.dumps({**key, "framework": "torch", "ms": ms, "gflops": round(th_g, 3),
                                      "rounds_ms": ms_list}), flush=True)
                if sg_g and th_g:
                    print(json.dumps({**key, "framework": "ratio", "sgrad_gflops": round(sg_g, 3),
                                      "torch_gflops": round(th_g, 3), "ratio": round(sg_g / th_g, 3)}),
                          flush=True)
                if sg_g:
                    if th == threads[0]:
                        base[(shape, case)] = sg_g
                    else:
                        print(json.dumps({**key, "framework": "scaling", "base_threads": threads[0],
                                          "sgrad_gflops": round(sg_g, 3),
                                          "base_gflops": round(base[(shape, case)], 3),
                                          "speedup": round(sg_g / base[(shape, case)], 3)}), flush=True)


if __name__ == "__main__":
    main()
