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
trap 'rm -f "$out" "$out.pystep" "$out.cores" "$out.rowmem"' EXIT
"$build/sgrad-bench" --quick all >"$out"
"$build/sgrad-bench" --quick pystep >"$out.pystep" # named families, not in all
"$build/sgrad-bench" --quick cores >"$out.cores"
"$build/sgrad-bench" --quick rowmem >"$out.rowmem"
python3 - "$out" "$out.pystep" "$out.cores" "$out.rowmem" <<'PY'
import json, sys
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
print(f"{len(lines)} benchmark lines checked")
print("1 passed, 0 failed")
PY
