#!/usr/bin/env bash
# sgrad-w2v checkpoints: a run killed (kill -9) after a checkpoint and resumed with
# -resume writes word and context vectors byte-identical to an uninterrupted run's, with
# another -threads; resuming from the final checkpoint trains nothing and writes the same
# vectors; a checkpoint from other training flags, from another corpus of the same size,
# a corrupted one, one whose trainer position is missing and a file that is no checkpoint
# are refused (status 2) before training without writing any output; -log writes JSON lines. Skips (exit 77) when the build has
# no programs.
# usage: tests/test_w2v_resume.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_resume: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# the first 1.2 MB of the bundled corpus (about 230k words)
xz -dc data/demo-corpus.txt.xz | head -c 1200000 >"$tmp/c.txt"
flags=(-train "$tmp/c.txt" -cbow 0 -size 16 -iter 3 -min-count 3 -sample 1e-3 -seed 5)

"$w2v" "${flags[@]}" -threads 2 -output "$tmp/full.vec" -save-context "$tmp/full.ctx" \
    -log "$tmp/full.log" 2>"$tmp/err.txt" || { echo "FAIL: the uninterrupted run"; cat "$tmp/err.txt"; exit 1; }

# kill -9 once a checkpoint exists (every 20 steps, or -save-every 0: each epoch's end),
# then resume on one thread
killed=0
trials=0
for every in 20 20 0; do
    trials=$((trials + 1))
    rm -f "$tmp/ck" "$tmp/r.vec" "$tmp/r.ctx"
    "$w2v" "${flags[@]}" -threads 2 -output "$tmp/r.vec" -save-context "$tmp/r.ctx" \
        -checkpoint "$tmp/ck" -save-every $every 2>/dev/null &
    pid=$!
    # the second trial waits a little longer, so the kills land at different points; the
    # third kills at once (its first checkpoint is the first epoch's end: two remain)
    for _ in $(seq 6000); do [ -s "$tmp/ck" ] && break; sleep 0.01; done
    [ "$trials" -eq 2 ] && sleep 0.1
    if kill -9 $pid 2>/dev/null; then
        wait $pid 2>/dev/null
        if [ -e "$tmp/r.vec" ]; then
            echo "FAIL: trial $trials: the vectors were written before the kill (run too short to test)"
            fail=1
            continue
        fi
        killed=$((killed + 1))
    else
        wait $pid
    fi
    if ! "$w2v" "${flags[@]}" -threads 1 -output "$tmp/r.vec" -save-context "$tmp/r.ctx" \
        -resume "$tmp/ck" -checkpoint "$tmp/ck" 2>"$tmp/err.txt"; then
        echo "FAIL: trial $trials: the resumed run failed:"
        cat "$tmp/err.txt"
        fail=1
        continue
    fi
    grep -q "resuming from" "$tmp/err.txt" || { echo "FAIL: trial $trials: no resume message"; fail=1; }
    if ! cmp -s "$tmp/r.vec" "$tmp/full.vec" || ! cmp -s "$tmp/r.ctx" "$tmp/full.ctx"; then
        echo "FAIL: trial $trials (-save-every $every): resumed vectors differ from the uninterrupted run's"
        fail=1
    fi
done
echo "kill -9 then -resume: $killed of $trials runs killed mid-training, all resumed identical unless FAIL above"
[ "$killed" -ge 2 ] || { echo "FAIL: only $killed of $trials runs were killed before their end"; fail=1; }

# the final checkpoint (written at the end of the last resumed run): nothing left to train
rm -f "$tmp/f.vec"
if ! "$w2v" "${flags[@]}" -threads 1 -output "$tmp/f.vec" -resume "$tmp/ck" 2>"$tmp/err.txt" ||
    ! cmp -s "$tmp/f.vec" "$tmp/full.vec"; then
    echo "FAIL: resuming from the final checkpoint did not give the same vectors:"
    cat "$tmp/err.txt"
    fail=1
fi

# refusals before training: status 2, a message, no output written
refuse() {
    local pattern=$1
    shift
    rm -f "$tmp/x.vec"
    "$w2v" "$@" -output "$tmp/x.vec" 2>"$tmp/err.txt"
    local got=$?
    if [ "$got" -ne 2 ] || ! grep -q -- "$pattern" "$tmp/err.txt" || grep -q "epochs" "$tmp/err.txt" ||
        [ -e "$tmp/x.vec" ]; then
        echo "FAIL: sgrad-w2v $* exited $got (wanted 2, '$pattern', nothing written):"
        cat "$tmp/err.txt"
        fail=1
    fi
}
refuse "made with -window 5, this run has -window 3" "${flags[@]}" -window 3 -resume "$tmp/ck"
refuse "made with -cbow 0, this run has -cbow 1" "${flags[@]}" -cbow 1 -resume "$tmp/ck"
# the same size and words, one word swapped: only the hash tells
sed '0,/ the / s// and /' "$tmp/c.txt" >"$tmp/c2.txt"
[ "$(wc -c <"$tmp/c2.txt")" -eq "$(wc -c <"$tmp/c.txt")" ] || { echo "FAIL: the swapped corpus changed size"; fail=1; }
refuse "another corpus" -train "$tmp/c2.txt" "${flags[@]:2}" -resume "$tmp/ck"
refuse "header of" "${flags[@]}" -resume "$tmp/full.vec"
cp "$tmp/ck" "$tmp/bad"
printf 'X' | dd of="$tmp/bad" bs=1 seek=$(($(wc -c <"$tmp/ck") / 2)) conv=notrunc 2>/dev/null
refuse "checksum" "${flags[@]}" -resume "$tmp/bad"
refuse "needs -checkpoint" "${flags[@]}" -save-every 5
# a file that passes the checkpoint's own checks (re-signed) but not the trainer's: its
# position's key renamed
if [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 - "$tmp/ck" "$tmp/renamed" <<'EOF' || fail=1
import re, sys
sys.path.insert(0, "tools/checkpoint")
from read_safetensors import fnv1a64
b = open(sys.argv[1], "rb").read()
assert b.count(b'"w2v.tokens"') == 1 and b'"sgrad.format":"2"' in b
b = re.sub(rb"fnv1a64:[0-9a-f]{16}", b"fnv1a64:" + b"0" * 16, b.replace(b'"w2v.tokens"', b'"w2v.tokenz"'))
open(sys.argv[2], "wb").write(b.replace(b"fnv1a64:" + b"0" * 16, b"fnv1a64:%016x" % fnv1a64([b])))
EOF
    refuse "trainer position" "${flags[@]}" -resume "$tmp/renamed"
fi
refuse "are the same file" "${flags[@]}" -checkpoint "$tmp/x.vec"

# -log: one JSON object per line, progress rising to 1
if [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 - "$tmp/full.log" <<'EOF' || fail=1
import json, sys
recs = [json.loads(line) for line in open(sys.argv[1])]
keys = {"epoch", "words", "total_words", "progress", "steps", "lr", "loss", "words_per_sec_thread", "elapsed_s"}
ok = len(recs) > 100 and all(set(r) == keys for r in recs)
ok = ok and all(a["words"] <= b["words"] for a, b in zip(recs, recs[1:])) and recs[-1]["progress"] == 1.0
ok = ok and recs[0]["loss"] > recs[-2]["loss"]  # it learnt something
if not ok:
    print("FAIL: -log records", recs[:2], recs[-2:])
sys.exit(0 if ok else 1)
EOF
fi
exit $fail
