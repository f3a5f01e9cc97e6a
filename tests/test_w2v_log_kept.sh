#!/usr/bin/env bash
# sgrad-w2v's -log and -save-vocab are never destroyed by a run that fails before training:
# an empty vocabulary is refused before -save-vocab is written, and -log is created only
# at the first record (after the first step). A run killed (kill -9) after a checkpoint,
# its log ending in records past the checkpoint and a half-written line, then resumed with
# -resume and the same -log: the log reads as one run, every line one JSON object (the
# format's rule), the first run's records up to the checkpoint's step count (read from
# the checkpoint's safetensors header) kept as they were, then the resumed run's, steps
# rising. Skips (exit 77) without the programs or /usr/bin/python3.
# usage: tests/test_w2v_log_kept.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ] || [ ! -x /usr/bin/python3 ]; then
    echo "SKIP test_w2v_log_kept: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF) or no /usr/bin/python3"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
awk 'BEGIN { for (s = 1; s <= 3000; s++) { for (i = 1; i <= 10; i++) printf "w%d ", (s * 7 + i * 13) % 300; print "" } }' >"$tmp/c.txt"
small=(-size 8 -iter 1 -min-count 1 -threads 1 -debug 0)

# a failing run keeps the previous -save-vocab and -log
echo 'old 5' >"$tmp/v.txt"
echo '{"old":1}' >"$tmp/l.jsonl"
cp "$tmp/v.txt" "$tmp/v.orig"
cp "$tmp/l.jsonl" "$tmp/l.orig"
"$w2v" -train "$tmp/c.txt" -output "$tmp/o.txt" "${small[@]}" -min-count 1000000 -save-vocab "$tmp/v.txt" \
    -log "$tmp/l.jsonl" 2>"$tmp/err.txt"
[ $? -eq 1 ] && grep -q "vocabulary has 0 words" "$tmp/err.txt" || { echo "FAIL: empty vocabulary:"; cat "$tmp/err.txt"; fail=1; }
cmp -s "$tmp/v.txt" "$tmp/v.orig" || { echo "FAIL: an empty vocabulary replaced -save-vocab"; fail=1; }
cmp -s "$tmp/l.jsonl" "$tmp/l.orig" || { echo "FAIL: a run refused for its vocabulary changed -log"; fail=1; }
printf 'a b\n' >"$tmp/ab.txt" # two words, no example (subsampled away)
"$w2v" -train "$tmp/ab.txt" -output "$tmp/o.txt" "${small[@]}" -log "$tmp/l.jsonl" 2>"$tmp/err.txt"
[ $? -eq 1 ] || { echo "FAIL: a corpus of no examples did not fail"; fail=1; }
cmp -s "$tmp/l.jsonl" "$tmp/l.orig" || { echo "FAIL: a run of no training step changed -log"; fail=1; }

# kill -9 after a checkpoint (which flushes the log), a killed run's records past it and
# a half line, resume
flags=(-train "$tmp/c.txt" -output "$tmp/k.vec" "${small[@]}" -batch 32 -log "$tmp/k.jsonl" -checkpoint "$tmp/k.ckpt")
"$w2v" "${flags[@]}" -iter 40 -save-every 5000 2>/dev/null &
pid=$!
for _ in $(seq 600); do [ -e "$tmp/k.ckpt" ] && break; sleep 0.02; done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
[ $? -eq 137 ] || { echo "FAIL: the run ended before it was killed"; exit 1; }
cp "$tmp/k.ckpt" "$tmp/killed.ckpt"
printf '{"epoch":1,"words":9999999,"total_words":30000,"progress":1,"steps":999999,"lr":0.01,"loss":1,"words_per_sec_thread":1,"elapsed_s":99}\n' >>"$tmp/k.jsonl"
printf '{"epoch":1,"words":12' >>"$tmp/k.jsonl"
cp "$tmp/k.jsonl" "$tmp/killed.jsonl"
if ! "$w2v" "${flags[@]}" -iter 40 -resume "$tmp/k.ckpt" 2>"$tmp/err.txt"; then
    echo "FAIL: the resumed run failed:"; cat "$tmp/err.txt"; fail=1
fi
/usr/bin/python3 - "$tmp/killed.ckpt" "$tmp/killed.jsonl" "$tmp/k.jsonl" <<'EOF' || fail=1
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    S = int(json.loads(f.read(n))["__metadata__"]["w2v.steps"])
lines = open(sys.argv[3]).read().split("\n")
if lines[-1] != "":
    sys.exit("FAIL: the log does not end with a newline")
try:
    recs = [json.loads(l) for l in lines[:-1]]
except ValueError as e:
    sys.exit(f"FAIL: a log line is not JSON: {e}")
kept = []
for l in open(sys.argv[2]).read().split("\n"):  # the killed run's whole records within S
    try:
        r = json.loads(l)
    except ValueError:
        break
    if r["steps"] > S:
        break
    kept.append(r)
ok = recs[:len(kept)] == kept and all(r["steps"] > S for r in recs[len(kept):])
ok = ok and all(a["steps"] < b["steps"] and a["words"] <= b["words"] and a["elapsed_s"] <= b["elapsed_s"]
                for a, b in zip(recs, recs[1:-1]))
ok = ok and recs[-1]["progress"] == 1.0 and len(recs) > len(kept) and len(kept) > 0
if not ok:
    sys.exit(f"FAIL: resumed log (checkpoint at step {S}, {len(kept)} records kept): {recs[:3]} ... {recs[-3:]}")
EOF
exit $fail
