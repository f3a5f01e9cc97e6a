#!/usr/bin/env bash
# bench/python_vs_torch.py runs end to end at tiny sizes: four JSON lines (sgrad and torch,
# SGD and LazyAdam/SparseAdam) with positive steps per second, and torch's SGD table equal
# to sgrad's to float32 rounding after the same steps (so both time the same step). No
# timing is checked. Skips (exit 77) without /usr/bin/python3 with numpy and torch (CI has
# no torch: apt-get install python3-torch), and in a sanitizer build (its libsgrad.so needs
# the sanitizer runtime preloaded into Python).
# usage: tests/test_python_bench_smoke.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
py=/usr/bin/python3
if [ ! -x "$py" ] || ! "$py" -c 'import numpy, torch' 2>/dev/null; then
    echo "SKIP test_python_bench_smoke: /usr/bin/python3 with numpy and torch is not installed (apt-get install python3-numpy python3-torch)"
    exit 77
fi
if grep -q '^SGRAD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "SKIP test_python_bench_smoke: sanitizer build (the Python tests run in the normal build)"
    exit 77
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
SGRAD_LIBRARY=$build/libsgrad.so PYTHONPATH=$repo/python PYTHONDONTWRITEBYTECODE=1 \
    "$py" "$repo/bench/python_vs_torch.py" --V 2000 --D 8 --B 64 --steps 4 --warmup 1 >"$out"
"$py" - "$out" <<'PY'
import json, sys
recs = [json.loads(line) for line in open(sys.argv[1])]
got = sorted((r["framework"], r["optim"]) for r in recs)
assert got == [("sgrad", "lazy_adam"), ("sgrad", "sgd"), ("torch", "lazy_adam"),
               ("torch", "sgd")], got
for r in recs:
    assert r["steps_per_sec"] > 0 and (r["V"], r["D"], r["B"], r["steps"]) == (2000, 8, 64, 4), r
sgd = next(r for r in recs if r["framework"] == "torch" and r["optim"] == "sgd")
assert sgd["max_abs_diff"] < 1e-6, sgd
print("python_vs_torch: %d lines, torch SGD table within %.2g of sgrad's" % (len(recs), sgd["max_abs_diff"]))
PY
