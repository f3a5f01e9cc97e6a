#!/usr/bin/env bash
# sgrad-kge train, eval, predict and export on a tiny generated graph: eval's one JSON line
# has exactly its eight fields; predict's scores recomputed from export's vectors (TSV and
# .npy, which agree) in Python; a malformed TSV refused naming its line, exit non-zero, no
# model written; flags and paths checked before training; an eval that ranks no triple
# prints null means (count 0); -threads 0 (every core) taken; more than 64 -filter files
# refused.
set -euo pipefail
build=$1
prog=$build/sgrad-kge
[ -x "$prog" ] || { echo "skipped: no $prog"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

awk 'BEGIN { srand(7); for (i = 0; i < 400; i++) { a = int(rand() * 30); b = int(rand() * 30);
       printf "e%d\tr%d\te%d\n", a, i % 3, b > "'"$tmp"'/train.tsv";
       if (i % 10 == 0) printf "e%d\tr%d\te%d\n", b, i % 3, a > "'"$tmp"'/valid.tsv";
       if (i % 10 == 5) printf "e%d\tr%d\te%d\n", b, i % 3, a > "'"$tmp"'/test.tsv" } }'

common=(-dim 8 -epochs 3 -batch 64 -chunk 32 -negs 8 -threads 2 -progress 0)
"$prog" train -train "$tmp/train.tsv" -valid "$tmp/valid.tsv" -test "$tmp/test.tsv" -output "$tmp/m.kge" \
    -model distmult -eval-every 1 -log "$tmp/log.jsonl" "${common[@]}" >"$tmp/train.out"
[ -s "$tmp/m.kge" ] || bad "train wrote no model"
[ "$(grep -c '"epoch"' "$tmp/log.jsonl")" = 3 ] || bad "-log: not one line per epoch"
grep -q '"split":"test"' "$tmp/log.jsonl" || bad "-log: no test metrics line"

"$prog" eval "$tmp/m.kge" -test "$tmp/test.tsv" -filter "$tmp/train.tsv,$tmp/valid.tsv,$tmp/test.tsv" >"$tmp/eval.out"
python3 - "$tmp/eval.out" "$tmp/train.out" <<'PY' || fail=1
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
m = json.loads(lines[0])
assert list(m) == ["mrr", "hits@1", "hits@3", "hits@10", "mr", "count", "unseen", "unknown"], list(m)
assert 0 < m["mrr"] <= 1 and m["count"] > 0 and m["mr"] >= 1, m
t = json.loads(open(sys.argv[2]).read().splitlines()[-1])
assert abs(t["mrr"] - m["mrr"]) < 1e-6, (t, m)  # train's -test line: the same filtered ranking
PY

# no test triple the model can rank (unknown names): count 0, the means null (valid JSON)
printf 'nobody\tr0\tnone\n' >"$tmp/unknown.tsv"
"$prog" eval "$tmp/m.kge" -test "$tmp/unknown.tsv" -threads 0 >"$tmp/eval0.out"
python3 - "$tmp/eval0.out" <<'PY' || fail=1
import json, sys
m = json.loads(open(sys.argv[1]).read())
assert m["count"] == 0 and m["unknown"] == 1, m
assert all(m[k] is None for k in ("mrr", "hits@1", "hits@3", "hits@10", "mr")), m
PY

"$prog" predict "$tmp/m.kge" -head e3 -relation r1 -k 5 >"$tmp/tails.out"
"$prog" predict "$tmp/m.kge" -relation r2 -tail e4 -k 30 >"$tmp/heads.out"
mkdir "$tmp/export"
"$prog" export "$tmp/m.kge" -output "$tmp/export"
python3 - "$tmp" <<'PY' || fail=1
import struct, sys
d = sys.argv[1]
def tsv(name):
    rows = [l.split("\t") for l in open(f"{d}/export/{name}").read().splitlines()]
    f32 = lambda x: struct.unpack("<f", struct.pack("<f", float(x)))[0]  # 9 digits give the float back
    return {n: [f32(x) for x in v.split()] for n, v in rows}, [n for n, _ in rows]
def npy(name):
    b = open(f"{d}/export/{name}", "rb").read()
    assert b[:8] == b"\x93NUMPY\x01\x00"
    hl = struct.unpack("<H", b[8:10])[0]
    head = b[10:10 + hl].decode()
    assert "'<f4'" in head and (10 + hl) % 64 == 0
    data = b[10 + hl:]
    return struct.unpack("<%df" % (len(data) // 4), data)
E, en = tsv("entities.tsv")
R, rn = tsv("relations.tsv")
assert en == open(f"{d}/export/entity_names.txt").read().splitlines()
assert rn == open(f"{d}/export/relation_names.txt").read().splitlines()
flat = npy("entities.npy")
assert list(flat) == [x for n in en for x in E[n]], "entities.npy differs from entities.tsv"
assert list(npy("relations.npy")) == [x for n in rn for x in R[n]]
def check(path, score, k):
    got = [l.split("\t") for l in open(path).read().splitlines()]
    assert len(got) == k, got
    want = sorted(((score(n), i, n) for i, n in enumerate(en)), key=lambda x: (-x[0], x[1]))[:k]
    for (n, s), (ws, _, wn) in zip(got, want):
        assert abs(float(s) - ws) <= 1e-5 * max(1, abs(ws)), (n, s, wn, ws)
    assert [n for n, _ in got] == [n for _, _, n in want] or all(
        abs(float(s) - w[0]) < 1e-5 for (n, s), w in zip(got, want)), (got, want)
# distmult, reciprocal (its default): tails of (h, r) = sum h r t; heads of (r, t) = sum t r' h
dot3 = lambda a, b, c: sum(x * y * z for x, y, z in zip(a, b, c))
check(f"{d}/tails.out", lambda n: dot3(E["e3"], R["r1"], E[n]), 5)
check(f"{d}/heads.out", lambda n: dot3(E["e4"], R["r2 (inverse)"], E[n]), 30)
PY

# a malformed line: refused naming it, nothing written
printf 'a\tr\tb\nc\tr\td\ne\tr\n' >"$tmp/bad.tsv"
if "$prog" train -train "$tmp/bad.tsv" -output "$tmp/bad.kge" "${common[@]}" 2>"$tmp/bad.err"; then bad "malformed TSV accepted"; fi
grep -q "bad.tsv:3" "$tmp/bad.err" || bad "the error does not name bad.tsv:3: $(cat "$tmp/bad.err")"
[ ! -e "$tmp/bad.kge" ] || bad "a model was written from a malformed file"
# checks before training
set +e
"$prog" train -train "$tmp/train.tsv" "${common[@]}" 2>/dev/null; [ $? = 2 ] || bad "no -output: not exit 2"
"$prog" train -train "$tmp/train.tsv" -output "$tmp/nodir/m.kge" "${common[@]}" 2>"$tmp/e1"; [ $? = 2 ] || bad "missing output dir: not exit 2"
"$prog" train -train "$tmp/none.tsv" -output "$tmp/x.kge" "${common[@]}" 2>/dev/null; [ $? = 2 ] || bad "missing -train: not exit 2"
"$prog" train -train "$tmp/train.tsv" -output "$tmp/x.kge" -model complex -dim 7 -progress 0 2>/dev/null; [ $? = 2 ] || bad "odd -dim for complex: not exit 2"
"$prog" predict "$tmp/m.kge" -head nobody -relation r1 2>/dev/null; [ $? = 2 ] || bad "unknown entity: not exit 2"
"$prog" eval "$tmp/m.kge" -test "$tmp/bad.tsv" >/dev/null 2>&1; [ $? != 0 ] || bad "eval of a malformed file succeeded"
many=$(printf "$tmp/train.tsv%.0s," $(seq 65))
"$prog" eval "$tmp/m.kge" -test "$tmp/test.tsv" -filter "${many%,}" >/dev/null 2>"$tmp/e2"; [ $? = 2 ] || bad "65 -filter files: not exit 2"
grep -q "more than 64 -filter files" "$tmp/e2" || bad "65 -filter files: no message"
"$prog" train -train "$tmp/train.tsv" -output "$tmp/t0.kge" "${common[@]}" -epochs 1 -threads 0 || bad "-threads 0 refused"
set -e
[ ! -e "$tmp/x.kge" ] || bad "a refused run wrote a model"
[ "$fail" = 0 ] || exit 1
echo "1 passed, 0 failed"
