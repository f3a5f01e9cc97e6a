#!/usr/bin/env bash
# sgrad-w2v -export: a -checkpoint file turned into vectors without the corpus (the
# checkpoint holds the vocabulary, words and counts): with the corpus moved away, the
# final checkpoint's -export gives -output and -save-context byte-identical to the
# training run's own, in text and in binary; a file that is no model is refused naming
# it, and -export wants an -output. Skips (exit 77) when the build has no programs.
# usage: tests/test_w2v_export.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_export: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
xz -dc data/demo-corpus.txt.xz | head -c 300000 >"$tmp/c.txt"
for binary in 0 1; do
    "$w2v" -train "$tmp/c.txt" -cbow 0 -size 12 -iter 2 -min-count 3 -threads 2 -binary $binary \
        -output "$tmp/full.$binary" -save-context "$tmp/ctx.$binary" -checkpoint "$tmp/ck.$binary" 2>"$tmp/err" ||
        { bad "training (-binary $binary)"; cat "$tmp/err"; }
done
mv "$tmp/c.txt" "$tmp/gone.txt" # no corpus from here on
for binary in 0 1; do
    if ! "$w2v" -export "$tmp/ck.$binary" -binary $binary -output "$tmp/e.$binary" -save-context "$tmp/ectx.$binary" \
        2>"$tmp/err"; then
        bad "-export (-binary $binary) failed:"; cat "$tmp/err"
    fi
    cmp -s "$tmp/e.$binary" "$tmp/full.$binary" || bad "-export's vectors differ from training's (-binary $binary)"
    cmp -s "$tmp/ectx.$binary" "$tmp/ctx.$binary" || bad "-export's context vectors differ (-binary $binary)"
done
grep -q "wrote .* word vectors to $tmp/e.1 (binary)" "$tmp/err" || bad "-export said nothing of what it wrote"
# the query modes read what -export wrote
"$w2v" -neighbors "$tmp/e.0" -words the -k 3 >"$tmp/nn" 2>&1 && grep -q '^the: ' "$tmp/nn" ||
    bad "-neighbors on the exported vectors: $(cat "$tmp/nn")"
# refusals: a file that is no model (named), no -output
"$w2v" -export "$tmp/full.0" -output "$tmp/x.vec" 2>"$tmp/err"
rc=$?
{ [ $rc -eq 1 ] && grep -q "$tmp/full.0" "$tmp/err" && [ ! -e "$tmp/x.vec" ]; } ||
    { bad "-export of a vectors file exited $rc (wanted 1, naming it):"; cat "$tmp/err"; }
"$w2v" -export "$tmp/ck.0" 2>"$tmp/err"
rc=$?
{ [ $rc -eq 2 ] && grep -q -- "-export needs -output" "$tmp/err"; } || { bad "-export without -output exited $rc"; cat "$tmp/err"; }
"$w2v" -export "$tmp/ck.0" -train "$tmp/gone.txt" -output "$tmp/x.vec" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "separate modes" "$tmp/err" || bad "-export with -train was not refused"
[ $fail -eq 0 ] && echo "1 passed, 0 failed"
exit $fail
