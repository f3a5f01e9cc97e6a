#!/usr/bin/env bash
# bench/w2v_threads.sh end to end, one round on 1 MB of the demo corpus: the round's line
# and JSON line, with a speed for the slower core in (0, 1] and positive rates, and both
# summary lines; a missing CORPUS is refused. Skips (77) without sgrad-w2v or sgrad-bench
# (SGRAD_BUILD_TOOLS=OFF).
# usage: tests/test_w2v_threads_smoke.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
for prog in sgrad-w2v sgrad-bench; do
    if [ ! -x "$build/$prog" ]; then
        echo "SKIP test_w2v_threads_smoke: $build/$prog is not built here (SGRAD_BUILD_TOOLS=OFF)"
        exit 77
    fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
xz -dc data/demo-corpus.txt.xz >"$tmp/full.txt"
head -c 1000000 "$tmp/full.txt" >"$tmp/c.txt"
QUICK=1 CORPUS="$tmp/c.txt" FLAGS="-size 20 -iter 1 -min-count 5" bench/w2v_threads.sh 1 "$build" >"$tmp/out.txt"
# a CORPUS that is not there ends the script before any run (Brown is fetched only for
# the default path), and creates nothing
status=0
CORPUS="$tmp/missing/c.txt" bench/w2v_threads.sh 1 "$build" >"$tmp/err.txt" 2>&1 || status=$?
if [ "$status" -ne 2 ] || ! grep -q "no corpus at $tmp/missing/c.txt" "$tmp/err.txt" || [ -e "$tmp/missing" ]; then
    echo "test_w2v_threads_smoke: a missing CORPUS: status $status, wanted 2 and a message:"
    cat "$tmp/err.txt"
    exit 1
fi
python3 - "$tmp/out.txt" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
rounds = [l for l in lines if l.startswith("round 1: slower core ")]
js = [json.loads(l) for l in lines if l.startswith("{")]
assert len(rounds) == 1 and len(js) == 1, lines
o = js[0]
assert o["bench"] == "w2v_threads" and o["round"] == 1, o
assert 0 < o["slower_core"] <= 1, o
assert o["one_wps"] > 0 and all(o[k] > 0 for k in ("two_ratio", "replicas_ratio", "independent_ratio")), o
assert any(l.startswith("all rounds (1): two_ratio median ") for l in lines), lines
assert any(l.startswith("even cores") for l in lines), lines
print("1 passed, 0 failed")
PY
