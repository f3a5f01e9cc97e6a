#!/usr/bin/env bash
# sgrad-fasttext refuses bad input with a clear message and a non-zero exit, and leaves
# an existing model file as it was: an empty file, no label at all, labels only, every
# label below -minCountLabel, -bucket 0 with -wordNgrams 2, -minn > -maxn, an output in a
# missing directory, and for test/predict a truncated model, a model with a flipped byte,
# a word2vec vectors file, a file that is no model at all and a missing one (an I/O error,
# not "not a model"); hostile models with a valid checksum (tests/fasttext_craft.py:
# metadata breaking the training rules, label counts summing past 2^63 - 1, a NaN or an
# infinity among the weights, a dim the file is too small for), and one whose bucket
# count (2^31 - 1) would have made a map of 8 GB, under a memory limit: it loads and
# predicts as the model it came from. Answers that cannot be written (/dev/full) fail
# test and predict with a message. Lines without a label or
# without a word among good ones are skipped and counted (fastText skips the first
# silently and trains on the second with its end-of-line word alone), and a label seen
# once with -minCountLabel 2 is dropped with a count. Skips (exit 77) without the programs.
# usage: tests/test_fasttext_bad_input.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
ft=$build/sgrad-fasttext
w2v=$build/sgrad-w2v
if [ ! -x "$ft" ]; then
    echo "SKIP test_fasttext_bad_input: $ft is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for i in $(seq 60); do echo "__label__$((i % 3)) w$((i % 3)) w$((i % 5)) the"; done >"$tmp/good.txt"
small="-dim 4 -epoch 1 -verbose 1"
"$ft" supervised -input "$tmp/good.txt" -output "$tmp/m" $small 2>/dev/null || { echo "FAIL: training on good input"; fail=1; }
cp "$tmp/m.bin" "$tmp/keep.bin"

# expect PATTERN args...: a non-zero exit, stderr matching PATTERN, m.bin unchanged
expect() {
    local pattern=$1
    shift
    "$ft" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt" </dev/null
    local got=$?
    if [ "$got" -eq 0 ] || ! grep -q -- "$pattern" "$tmp/err.txt" || ! cmp -s "$tmp/m.bin" "$tmp/keep.bin"; then
        echo "FAIL: sgrad-fasttext $* exited $got (wanted non-zero, stderr matching '$pattern', m.bin unchanged):"
        cat "$tmp/err.txt"
        fail=1
    fi
}
: >"$tmp/empty.txt"
expect "no token" supervised -input "$tmp/empty.txt" -output "$tmp/m" $small
printf 'just words\nand more words\n' >"$tmp/nolabel.txt"
expect "has no label" supervised -input "$tmp/nolabel.txt" -output "$tmp/m" $small
printf '__label__a\n__label__b __label__a\n' >"$tmp/onlylabels.txt"
expect "nothing to learn" supervised -input "$tmp/onlylabels.txt" -output "$tmp/m" $small
printf '__label__a x\n__label__b y\n' >"$tmp/once.txt"
expect "fewer than -minCountLabel 2" supervised -input "$tmp/once.txt" -output "$tmp/m" -minCountLabel 2 $small
expect "-bucket 0" supervised -input "$tmp/good.txt" -output "$tmp/m" -bucket 0 -wordNgrams 2 $small
expect "-minn 5 > -maxn 3" supervised -input "$tmp/good.txt" -output "$tmp/m" -minn 5 -maxn 3 $small
expect "directory" supervised -input "$tmp/good.txt" -output "$tmp/no/such/m" $small
expect "regular file" supervised -input /dev/null -output "$tmp/m" $small
mkdir "$tmp/dir.bin"
expect "dir.bin: it is a directory" supervised -input "$tmp/good.txt" -output "$tmp/dir" $small
expect "unknown flag" supervised -input "$tmp/good.txt" -output "$tmp/m" -dimm 3
expect "bad value" supervised -input "$tmp/good.txt" -output "$tmp/m" -loss hinge

# mixed lines: skipped and counted, the rest trains
{ cat "$tmp/good.txt"; echo "no label here"; echo "__label__1"; echo "__label__9 w1"; } >"$tmp/mixed.txt"
if "$ft" supervised -input "$tmp/mixed.txt" -output "$tmp/mixed" -minCountLabel 2 $small 2>"$tmp/err.txt"; then
    grep -q "skipped 2 lines without a known label and 1 with labels only" "$tmp/err.txt" &&
        grep -q "1 of 4 labels dropped" "$tmp/err.txt" || { echo "FAIL: mixed input not counted:"; cat "$tmp/err.txt"; fail=1; }
else
    echo "FAIL: mixed input did not train:"; cat "$tmp/err.txt"; fail=1
fi

# bad models for test and predict
size=$(stat -c %s "$tmp/m.bin")
head -c $((size / 2)) "$tmp/m.bin" >"$tmp/half.bin"
head -c $((size - 10)) "$tmp/m.bin" >"$tmp/short.bin"
head -c 20 "$tmp/m.bin" >"$tmp/head.bin"
cp "$tmp/m.bin" "$tmp/flip.bin"
printf '\x7f' | dd of="$tmp/flip.bin" bs=1 seek=$((size - 3)) conv=notrunc 2>/dev/null
echo "not a model" >"$tmp/text.bin"
expect "not a sgrad-fasttext model.*header of" test "$tmp/half.bin" "$tmp/good.txt"
expect "cannot load the model" test "$tmp/short.bin" "$tmp/good.txt"
expect "not a sgrad-fasttext model" test "$tmp/head.bin" "$tmp/good.txt"
expect "checksum" predict "$tmp/flip.bin" "$tmp/good.txt"
expect "not a sgrad-fasttext model" predict-prob "$tmp/text.bin" "$tmp/good.txt"
expect "cannot load the model .*missing.bin: No such file or directory" test "$tmp/missing.bin" "$tmp/good.txt"
grep -q "not a sgrad-fasttext model" "$tmp/err.txt" && { echo "FAIL: a missing model is called not a model"; fail=1; }
expect "cannot read" test "$tmp/m.bin" "$tmp/missing.txt"
if [ -x "$w2v" ]; then
    "$w2v" -train "$tmp/good.txt" -output "$tmp/vec.bin" -binary 1 -size 4 -iter 1 -min-count 1 -threads 1 2>/dev/null
    expect "not a sgrad-fasttext model" test "$tmp/vec.bin" "$tmp/good.txt"
fi

# hostile models: a valid checksum, so only the loader's own checks can refuse them
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3 || true)
craft=$(dirname "$0")/fasttext_craft.py
if [ -n "$py" ]; then
    "$ft" supervised -input "$tmp/good.txt" -output "$tmp/hs" -loss hs -wordNgrams 2 -bucket 100 $small 2>/dev/null
    for c in "bucket0:fasttext.bucket 0 with word or character n-grams" "minn-gt-maxn:fasttext.minn > fasttext.maxn" \
        "hs-counts:label counts" "nan:output holds a value that is not finite" \
        "inf:input/words holds a value that is not finite" "big-dim:need more bytes than the file's"; do
        "$py" "$craft" "$tmp/hs.bin" "$tmp/${c%%:*}.bin" "${c%%:*}" || { echo "FAIL: crafting ${c%%:*}"; fail=1; }
        expect "corrupt model.*${c#*:}" predict "$tmp/${c%%:*}.bin" "$tmp/good.txt"
    done
    # no map of a 4-byte row per bucket (8 GB): the model loads within 1 GB and predicts as
    # the model it came from (-wordNgrams 1: no bucket is looked up)
    "$py" "$craft" "$tmp/m.bin" "$tmp/big-bucket.bin" big-bucket
    "$ft" predict-prob "$tmp/m.bin" "$tmp/good.txt" 2 >"$tmp/want.txt"
    if grep -q '^SGRAD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
        limit() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=1024 "$@"; }
    else
        limit() { (ulimit -v 1048576 && exec "$@"); }
    fi
    limit "$ft" predict-prob "$tmp/big-bucket.bin" "$tmp/good.txt" 2 >"$tmp/got.txt" 2>"$tmp/err.txt" &&
        cmp -s "$tmp/want.txt" "$tmp/got.txt" ||
        { echo "FAIL: a model of 2^31 - 1 buckets does not predict as its source within 1 GB:"; cat "$tmp/err.txt"; fail=1; }
else
    echo "skip: no python3 (the hostile models)"
fi

# answers that cannot be written
if [ -w /dev/full ]; then
    for verb in test predict predict-prob; do
        "$ft" $verb "$tmp/m.bin" "$tmp/good.txt" >/dev/full 2>"$tmp/err.txt"
        got=$?
        [ $got -eq 1 ] && grep -q "error writing the output: No space left on device" "$tmp/err.txt" ||
            { echo "FAIL: $verb >/dev/full exited $got:"; cat "$tmp/err.txt"; fail=1; }
    done
fi
exit $fail
