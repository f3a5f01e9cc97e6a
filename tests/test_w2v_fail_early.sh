#!/usr/bin/env bash
# sgrad-w2v fails loudly and early: no -output, an output in a missing directory, an
# output that is a directory or a device, an output name too long for the temporary file
# beside it, a corpus from a pipe are refused (status 2)
# before training; a write error at the end (file-size limit, EFBIG) and a kill -9 during
# the write of a large -output leave the previous vectors file byte for byte; a corpus
# with NUL and other control bytes trains and writes its vectors. Skips (exit 77) when the
# build has no programs.
# usage: tests/test_w2v_fail_early.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_fail_early: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# a small corpus: 50 words, 400 sentences
for s in $(seq 400); do for i in $(seq 10); do printf 'w%d ' $(((s * 7 + i * 13) % 50)); done; echo; done >"$tmp/c.txt"
small="-size 8 -iter 1 -min-count 1 -threads 1"

# expect STATUS PATTERN args...: exit status, a pattern stderr must contain, and no
# "progress" line (the refusal came before training)
expect() {
    local want=$1 pattern=$2
    shift 2
    "$w2v" "$@" 2>"$tmp/err.txt" </dev/null
    local got=$?
    if [ "$got" -ne "$want" ] || ! grep -q -- "$pattern" "$tmp/err.txt" || grep -q "epochs" "$tmp/err.txt"; then
        echo "FAIL: sgrad-w2v $* exited $got (wanted $want, stderr matching '$pattern', no training):"
        cat "$tmp/err.txt"
        fail=1
    fi
}
expect 2 "-output FILE is required" -train "$tmp/c.txt" $small
expect 2 "does not exist" -train "$tmp/c.txt" -output /nonexistent/x.vec $small
expect 2 "is a directory" -train "$tmp/c.txt" -output "$tmp" $small
expect 2 "not a regular file" -train "$tmp/c.txt" -output /dev/full $small
# a legal name (at most NAME_MAX bytes) whose temporary name ("NAME.tmp-PID-N") is not:
# refused before training instead of failing at the write
name_max=$(getconf NAME_MAX "$tmp")
long=$(printf 'v%.0s' $(seq $((name_max - 10))))
expect 2 "the temporary file beside it" -train "$tmp/c.txt" -output "$tmp/$long" $small
[ -e "$tmp/$long" ] && { echo "FAIL: a refused -output was written"; fail=1; }
expect 2 "the temporary file beside it" -train "$tmp/c.txt" -output "$tmp/o.vec" -checkpoint "$tmp/$long" $small
fits=$(printf 'v%.0s' $(seq $((name_max - 40))))
"$w2v" -train "$tmp/c.txt" -output "$tmp/$fits" $small -debug 0 2>"$tmp/err.txt" ||
    { echo "FAIL: a $((name_max - 40))-byte -output was refused:"; cat "$tmp/err.txt"; fail=1; }
cat "$tmp/c.txt" | "$w2v" -train /dev/stdin -output "$tmp/p.vec" $small 2>"$tmp/err.txt"
if [ $? -ne 2 ] || ! grep -q "not a regular file" "$tmp/err.txt" || [ -e "$tmp/p.vec" ]; then
    echo "FAIL: a corpus from a pipe was not refused:"; cat "$tmp/err.txt"; fail=1
fi

# NUL, DEL and other control bytes are whitespace: the run writes its vectors and no word
# holds one (the writer would refuse it, losing the run)
printf 'a\0b c\001d a\177c\0\0b d\n' >"$tmp/nul.txt"
for i in $(seq 50); do printf 'a b c d\0a\tb\n'; done >>"$tmp/nul.txt"
if ! "$w2v" -train "$tmp/nul.txt" -output "$tmp/nul.vec" $small 2>"$tmp/err.txt"; then
    echo "FAIL: corpus with NUL bytes:"; cat "$tmp/err.txt"; fail=1
elif [ "$(head -1 "$tmp/nul.vec")" != "4 8" ] || [ "$(cut -d' ' -f1 "$tmp/nul.vec" | tail -n +2 | sort | tr '\n' ,)" != "a,b,c,d," ]; then
    echo "FAIL: wrong vocabulary from the corpus with NUL bytes:"; head -c 200 "$tmp/nul.vec"; fail=1
fi

# a write error at the end (file-size limit: EFBIG with SIGXFSZ ignored) keeps the old file
printf '1 1\nold 1\n' >"$tmp/old.vec"
cp "$tmp/old.vec" "$tmp/old.copy"
(trap '' XFSZ; ulimit -f 4; "$w2v" -train "$tmp/c.txt" -output "$tmp/old.vec" $small -size 300) 2>"$tmp/err.txt"
st=$?
if [ $st -eq 0 ] || ! cmp -s "$tmp/old.vec" "$tmp/old.copy" || ls "$tmp" | grep -q '\.tmp-'; then
    echo "FAIL: a write error (status $st) changed the old file or left a temporary:"; cat "$tmp/err.txt"; fail=1
fi

# kill -9 while the vectors are being written: 30000 words x 300 values of text (about
# 90 MB) over a good file; killed at several points after training, the good file stays
# byte for byte
awk 'BEGIN { srand(7); for (s = 0; s < 3000; s++) { line = ""; for (i = 0; i < 20; i++) line = line " v" int(rand() * 30000); print line } }' >"$tmp/big.txt"
printf '2 1\ngood 1\nfile 2\n' >"$tmp/good.vec"
cp "$tmp/good.vec" "$tmp/good.copy"
trials=0 survived=0 inwrite=0
for delay in 0.02 0.05 0.1 0.2 0.4 0.8; do
    "$w2v" -train "$tmp/big.txt" -output "$tmp/good.vec" -size 300 -iter 1 -min-count 1 -threads 1 -negative 1 -window 1 2>"$tmp/kerr.txt" &
    pid=$!
    # wait for the end of training (the summary line), then for the temporary file
    for _ in $(seq 3000); do grep -q "epochs" "$tmp/kerr.txt" 2>/dev/null && break; sleep 0.01; done
    sleep "$delay"
    ls "$tmp" | grep -q 'good.vec.tmp-' && inwrite=$((inwrite + 1))
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    trials=$((trials + 1))
    cmp -s "$tmp/good.vec" "$tmp/good.copy" && survived=$((survived + 1))
    rm -f "$tmp"/good.vec.tmp-*
done
echo "kill -9 during the write: $trials trials ($inwrite caught with the temporary file present), $survived kept the old file"
if [ $survived -ne $trials ] || [ $inwrite -lt 1 ]; then
    echo "FAIL: kill -9 during the write"; fail=1
fi
exit $fail
