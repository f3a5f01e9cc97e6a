#!/usr/bin/env bash
# sgrad-bench --quick runs every family, and every line it prints is a JSON object with the
# fields other programs read: bench, case, params (object), ms, ref_ms, ratio, threads.
set -euo pipefail
build=$1
if [ ! -x "$build/sgrad-bench" ]; then
    echo "skipped: $build has no sgrad-bench (tools not built)"
    exit 77
fi
out=$(mktemp)
trap 'rm -f "$out" "$out.pystep" "$out.cores" "$out.rowmem" "$out.bagmem" "$out.mvt"' EXIT
"$build/sgrad-bench" --quick all >"$out"
"$build/sgrad-bench" --quick pystep >"$out.pystep" # named families, not in all
"$build/sgrad-bench" --quick cores >"$out.cores"
"$build/sgrad-bench" --quick rowmem >"$out.rowmem"
"$build/sgrad-bench" --quick bagmem >"$out.bagmem"
# bench/matmul_vs_torch.py at a tiny size, 2 rounds of 1 rep: sgrad's lines always, torch's
# and the ratios where /usr/bin/python3 has torch (without it the script times sgrad alone).
py=/usr/bin/python3
[ -x "$py" ] || py=python3
PYTHONDONTWRITEBYTECODE=1 "$py" bench/matmul_vs_torch.py --bench "$build/sgrad-bench" \
    --shapes 40x24x56 --threads 1,2 --rounds 2 --reps 1 --pause 0 >"$out.mvt" 2>/dev/null
python3 - "$out.mvt" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
assert recs[0]["framework"] == "env", recs[0]
sg = [r for r in recs if r["framework"] == "sgrad"]
assert sorted((r["threads"], r["case"]) for r in sg) == [(1, "fwd"), (1, "fwd_bwd"), (2, "fwd"), (2, "fwd_bwd")], sg
assert all(r["gflops"] > 0 and r["direct_gflops"] > 0 and len(r["rounds_ms"]) == 2 for r in sg), sg
th = [r for r in recs if r["framework"] == "torch"]
assert len(th) in (0, 4) and len([r for r in recs if r["framework"] == "ratio"]) == len(th), recs
assert len([r for r in recs if r["framework"] == "scaling"]) == 2, recs
print("matmul_vs_torch: %d lines%s" % (len(recs), "" if th else " (no torch: sgrad alone)"))
PY
python3 - "$out" "$out.pystep" "$out.cores" "$out.rowmem" "$out.bagmem" <<'PY'
import json, sys
bm = [json.loads(l) for l in open(sys.argv[5]).read().splitlines()]
assert [(o["case"], o["threads"], o["params"]["rows"]) for o in bm] == \
    [("forward_adagrad_step", 1, 20000), ("forward_adagrad_step", 2, 20000)], bm
# each half is timed inside its step, so each half's median is at most the steps' median
assert all(o["ms"] > 0 for o in bm), bm
assert all(0 < bm[0][k] <= bm[0]["ms"] * 1.001 for k in ("forward_ms", "update_ms")), bm
rm = [json.loads(l) for l in open(sys.argv[4]).read().splitlines()]
assert [o["params"]["rows"] for o in rm] == [1500, 15000, 100000], rm
assert all(o["case"] == "two_pass" and o["ns_per_row"] > 0 and o["ref_ns_per_row"] > 0 for o in rm), rm
co = [json.loads(l) for l in open(sys.argv[3]).read().splitlines()]
import os
sp = co[4:]  # core_speed: one line per processor this process may run on
assert [o["case"] for o in co] == ["handoff"] + ["rows_handover"] * 3 + ["core_speed"] * len(sp), co
assert co[0]["ns_per_handoff"] > 0 and all(o["ms"] > 0 and o["ref_ms"] > 0 for o in co[1:]), co
assert sorted(o["params"]["cpu"] for o in sp) == sorted(os.sched_getaffinity(0)), sp
assert all(0 < o["speed"] <= 1 and abs(o["speed"] - o["ref_ms"] / o["ms"]) < 1e-2 for o in sp), sp
assert min(o["ms"] for o in sp) == sp[0]["ref_ms"], sp  # ref_ms: the fastest processor's
py = [json.loads(l) for l in open(sys.argv[2]).read().splitlines()]
assert [o["params"]["opt"] for o in py] == ["sgd", "lazy_adam"], py
assert all(o["bench"] == "pystep" and o["ms"] > 0 for o in py), py
assert py[0]["probe_ms"] > 0 and "probe_ms" not in py[1], py
lines = open(sys.argv[1]).read().splitlines()
fams = set()
for n, line in enumerate(lines, 1):
    o = json.loads(line)
    for k in ("bench", "case", "params", "ms", "ref_ms", "ratio", "threads"):
        assert k in o, f"line {n}: no field {k}: {line}"
    assert isinstance(o["params"], dict), f"line {n}: params is not an object"
    assert o["ms"] > 0, f"line {n}: ms {o['ms']}"
    if o["ref_ms"] is not None:
        assert abs(o["ratio"] - o["ms"] / o["ref_ms"]) <= 1e-3 * o["ratio"] + 1e-9, f"line {n}: ratio"
    fams.add(o["bench"])
want = {"overhead", "matmul", "sparse", "optim"}
assert want <= fams, f"families missing: {want - fams}"
assert any("us_per_node" in json.loads(l) for l in lines), "no us_per_node"
assert any("peak_bytes" in json.loads(l) for l in lines), "no peak_bytes"
mm = [json.loads(l) for l in lines if json.loads(l)["bench"] == "matmul"]
assert [(o["params"]["M"], o["params"]["K"], o["params"]["N"]) for o in mm[::2]] == \
    [(64, 64, 64), (128, 128, 128), (1024, 100, 512)], mm
assert all(o["gflops"] > 0 and o["direct_gflops"] > 0 and o["kernel"] in ("blas", "direct") for o in mm), mm
print(f"{len(lines)} benchmark lines checked")
print("1 passed, 0 failed")
PY
