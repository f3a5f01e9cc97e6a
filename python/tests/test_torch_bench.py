"""bench/torch_embedding.py at tiny sizes: every part and optimizer runs and prints the JSON
lines it documents (no timing is checked)."""
import importlib.util
import json
import os

import pytest

torch = pytest.importorskip("torch", reason="the benchmark needs PyTorch (not installed)")
import sgrad.torch as st  # noqa: E402

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "torch_embedding.py")


def test_bench_smoke(capsys):
    spec = importlib.util.spec_from_file_location("torch_embedding_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    threads, blas = torch.get_num_threads(), st.blas_threads()
    try:
        bench.main(["--tables", "2", "--rows", "500", "--dim", "8", "--pooling", "3",
                    "--batch", "16", "--steps", "1", "--rounds", "1", "--threads", "2",
                    "--blas-threads", "1",
                    "--parts", "dlrm,embedding,embedding_none,threads"])
    finally:  # the bench sets the process's thread counts
        torch.set_num_threads(threads)
        if blas is not None:
            st._openblas().openblas_set_num_threads(blas)
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    head, rows = lines[0], lines[1:]
    assert head["config"]["tables"] == 2 and "blas" in head and "torch" in head
    assert (head["openblas_core"] is None) == (blas is None)
    paired = [r for r in rows if r["part"] != "threads"]
    assert all(r["threads"] == 2 and r["blas_threads"] == (1 if blas else None)
               for r in paired)
    parts = {(r["part"], r["optimizer"], r["arm"]) for r in rows if r["part"] != "threads"}
    for kind in ("adagrad", "adam"):
        for part, arm in (("dlrm", "sgrad"), ("embedding", "sgrad"),
                          ("embedding_none", "sgrad_none")):
            assert (part, kind, "torch") in parts and (part, kind, arm) in parts
    threads = [r for r in rows if r["part"] == "threads"]
    assert {(r["torch_threads"], r["sgrad_threads"]) for r in threads} == {
        (1, 1), (2, 1), (1, 2), (2, 2)}
    assert all(r["ms"] > 0 and r["speedup"] > 0 for r in rows)
