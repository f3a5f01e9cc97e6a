#!/usr/bin/env bash
# sgrad-w2v's word2vec.c flags -hs, -save-vocab / -read-vocab, -classes and -debug:
# -save-vocab writes the corpus's word counts (checked against awk's count); training from
# it with -read-vocab gives vectors byte-identical to the counting run's (on another
# -threads, with and without -hs); malformed vocabulary files are refused with status 2
# before training and write nothing; -classes writes V `word class` lines in vocabulary
# order with classes in [0, K), the same for 1 and 2 threads; a -resume with another -hs
# is refused and one from an -hs run's final checkpoint gives its vectors back; flag
# combinations that cannot train are refused up front; -debug 0 is silent; every new flag
# is in -help and docs/word2vec.md. Skips (exit 77) when the build has
# no programs.
# usage: tests/test_w2v_word2vec_flags.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_word2vec_flags: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# the first 400 kB of the bundled corpus (about 75k words)
xz -dc data/demo-corpus.txt.xz | head -c 400000 >"$tmp/c.txt"
flags=(-train "$tmp/c.txt" -cbow 0 -size 12 -iter 1 -min-count 3 -seed 3)

# -save-vocab: the words seen at least 3 times with their counts, most frequent first
"$w2v" "${flags[@]}" -threads 1 -output "$tmp/a.vec" -save-vocab "$tmp/v.txt" 2>"$tmp/err" ||
    { bad "the counting run"; cat "$tmp/err"; }
awk '{ for (i = 1; i <= NF; i++) n[$i]++ } END { for (w in n) if (n[w] >= 3) print w, n[w] }' \
    "$tmp/c.txt" | LC_ALL=C sort >"$tmp/awk.txt"
LC_ALL=C sort "$tmp/v.txt" | cmp -s - "$tmp/awk.txt" || bad "-save-vocab differs from awk's count"
sort -s -k2,2nr "$tmp/v.txt" | cmp -s - "$tmp/v.txt" || bad "-save-vocab is not most frequent first"
# -read-vocab: the same vectors, also on 2 threads
"$w2v" "${flags[@]}" -threads 2 -output "$tmp/b.vec" -read-vocab "$tmp/v.txt" 2>"$tmp/err" ||
    { bad "the -read-vocab run"; cat "$tmp/err"; }
cmp -s "$tmp/a.vec" "$tmp/b.vec" || bad "-read-vocab vectors differ from the counting run's"
"$w2v" "${flags[@]}" -hs 1 -threads 1 -output "$tmp/ha.vec" 2>/dev/null || bad "the -hs counting run"
"$w2v" "${flags[@]}" -hs 1 -threads 2 -output "$tmp/hb.vec" -read-vocab "$tmp/v.txt" 2>/dev/null ||
    bad "the -hs -read-vocab run"
cmp -s "$tmp/ha.vec" "$tmp/hb.vec" || bad "-hs: -read-vocab on 2 threads differs from counting on 1"

# malformed vocabulary files: status 2, a message naming the line, no output, no training
long=$(printf 'x%.0s' $(seq 100))
cases=("a 5\na 3\n" "a x\n" "a -1\n" "a\n" " 5\n" "a 5\n\nb 3\n" "$long 5\n" "a\001b 5\n" "a 5 6\n"
       "a 99999999999999999999\n" "a 4611686018427387905\n" "a 3000000000000000000\nb 3000000000000000000\n" "a 4611686018427387904\nb 4611686018427387904\n")
for c in "${cases[@]}"; do
    printf "$c" >"$tmp/bad.txt"
    rm -f "$tmp/x.vec"
    "$w2v" "${flags[@]}" -output "$tmp/x.vec" -read-vocab "$tmp/bad.txt" 2>"$tmp/err"
    rc=$?
    if [ $rc -ne 2 ] || ! grep -q "read-vocab.*line [0-9]" "$tmp/err" || [ -e "$tmp/x.vec" ] ||
        grep -q "progress\|skip-gram," "$tmp/err"; then
        bad "vocabulary file '$c': status $rc, $(cat "$tmp/err")"
    fi
done

# -classes K: V lines in vocabulary order, classes in [0, K), several used, thread-independent
"$w2v" "${flags[@]}" -threads 1 -classes 6 -output "$tmp/k1.txt" 2>/dev/null || bad "the -classes run"
"$w2v" "${flags[@]}" -threads 2 -classes 6 -output "$tmp/k2.txt" 2>/dev/null || bad "the -classes run, 2 threads"
cmp -s "$tmp/k1.txt" "$tmp/k2.txt" || bad "-classes differs between 1 and 2 threads"
cut -d' ' -f1 "$tmp/k1.txt" | cmp -s - <(cut -d' ' -f1 "$tmp/v.txt") || bad "-classes: not the vocabulary's words in order"
awk 'NF != 2 || $2 !~ /^[0-9]+$/ || $2 >= 6 { exit 1 }' "$tmp/k1.txt" || bad "-classes: a class outside [0, 6)"
used=$(cut -d' ' -f2 "$tmp/k1.txt" | sort -u | wc -l)
[ "$used" -ge 2 ] || bad "-classes: $used classes used"
V=$(wc -l <"$tmp/v.txt")
"$w2v" "${flags[@]}" -classes $((V + 1)) -output "$tmp/k3.txt" 2>"$tmp/err"
[ $? -eq 2 ] && [ ! -e "$tmp/k3.txt" ] || bad "-classes above the vocabulary size accepted"

# checkpoints: another -hs is refused; an -hs run's final checkpoint gives its vectors back
"$w2v" "${flags[@]}" -hs 1 -threads 2 -output "$tmp/h.vec" -checkpoint "$tmp/ck" 2>/dev/null || bad "-hs with -checkpoint"
cmp -s "$tmp/h.vec" "$tmp/ha.vec" || bad "-hs vectors change with -checkpoint"
"$w2v" "${flags[@]}" -hs 0 -output "$tmp/r.vec" -resume "$tmp/ck" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q -- "-hs 1, this run has -hs 0" "$tmp/err" && [ ! -e "$tmp/r.vec" ] ||
    { bad "a -resume with another -hs"; cat "$tmp/err"; }
"$w2v" "${flags[@]}" -hs 1 -output "$tmp/r.vec" -resume "$tmp/ck" 2>"$tmp/err" || { bad "-hs -resume"; cat "$tmp/err"; }
cmp -s "$tmp/r.vec" "$tmp/ha.vec" || bad "resuming an -hs run's final checkpoint changed the vectors"

# refused up front (status 2, nothing written)
expect2() {
    local what=$1
    shift
    rm -f "$tmp/x.vec"
    "$w2v" "${flags[@]}" -output "$tmp/x.vec" "$@" 2>"$tmp/err"
    local rc=$?
    [ $rc -eq 2 ] && [ ! -e "$tmp/x.vec" ] && ! grep -q "progress" "$tmp/err" ||
        { bad "$what: status $rc"; cat "$tmp/err"; }
}
expect2 "-negative 0 without -hs" -negative 0
expect2 "-save-context with -negative 0" -negative 0 -hs 1 -save-context "$tmp/ctx.vec"
expect2 "-save-vocab into a missing directory" -save-vocab "$tmp/none/v.txt"
expect2 "-read-vocab of a missing file" -read-vocab "$tmp/none.txt"
expect2 "-read-vocab of a directory" -read-vocab "$tmp"
expect2 "-debug 3" -debug 3

# -debug: 0 prints nothing; 2 adds the settings, the tree and each epoch
"$w2v" "${flags[@]}" -output "$tmp/d.vec" -debug 0 2>"$tmp/err" || bad "-debug 0 run"
[ ! -s "$tmp/err" ] || { bad "-debug 0 printed"; cat "$tmp/err"; }
"$w2v" "${flags[@]}" -hs 1 -classes 3 -output "$tmp/d.txt" -debug 2 2>"$tmp/err" || bad "-debug 2 run"
for want in "row hit caps" "Huffman tree" "epoch 1 of 1" "k-means iteration 10 of 10" \
            "1 of 1 epochs replayed the corpus as token ids"; do
    grep -q "$want" "$tmp/err" || bad "-debug 2 lacks '$want'"
done
# which runs replay the vocabulary pass's token ids: not with -checkpoint (a position is a
# byte offset); with -read-vocab (no word counting pass) only the epochs after the first
"$w2v" "${flags[@]}" -output "$tmp/k.vec" -checkpoint "$tmp/k.ckpt" -debug 2 2>"$tmp/err" || bad "-checkpoint run"
grep -q "0 of 1 epochs replayed" "$tmp/err" || bad "a -checkpoint run replayed the corpus"
"$w2v" "${flags[@]}" -iter 2 -read-vocab "$tmp/v.txt" -output "$tmp/r.vec" -debug 2 2>"$tmp/err" || bad "-read-vocab run"
grep -q "1 of 2 epochs replayed" "$tmp/err" || bad "a -read-vocab run did not replay exactly its second epoch"

# every new flag is documented
"$w2v" -help >"$tmp/help.txt"
for f in -hs -save-vocab -read-vocab -classes -debug; do
    grep -q -- "^ *$f " "$tmp/help.txt" || bad "$f missing from -help"
    grep -q -- "\`$f" docs/word2vec.md || bad "$f missing from docs/word2vec.md"
done
exit $fail
