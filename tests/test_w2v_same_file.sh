#!/usr/bin/env bash
# sgrad-w2v refuses (status 2, before training, naming both flags) an output that is the
# same file as an input (-train, -read-vocab, -resume) or as another output, however the
# two paths are spelt: the same name, ./name, an absolute path, a symbolic or hard link.
# Every input is left byte for byte. -checkpoint may be the -resume file
# (tests/test_w2v_resume.sh resumes that way). Skips (exit 77) without the programs.
# usage: tests/test_w2v_same_file.sh BUILD_DIR
set -uo pipefail
build=$(cd "${1:-build}" && pwd)
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_same_file: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail=0
awk 'BEGIN { for (s = 1; s <= 200; s++) { for (i = 1; i <= 10; i++) printf "w%d ", (s * 7 + i * 13) % 40; print "" } }' >c.txt
printf 'w1 5\nw2 4\n' >v.txt
printf 'not a checkpoint\n' >r.ckpt
ln -s c.txt sym.txt
ln c.txt hard.txt
for f in c.txt v.txt r.ckpt; do cp "$f" "$f.orig"; done
small="-size 8 -iter 1 -min-count 1 -threads 1"

# same FLAG1 FLAG2 args...: status 2, a message naming both flags, no training, inputs intact
same() {
    local f1=$1 f2=$2
    shift 2
    "$w2v" "$@" $small 2>err.txt </dev/null
    local got=$?
    if [ "$got" -ne 2 ] || ! grep -q -- "$f1 .* and $f2 .* are the same file" err.txt || grep -q epochs err.txt; then
        echo "FAIL: sgrad-w2v $* exited $got (wanted 2, naming $f1 and $f2):"
        cat err.txt
        fail=1
    fi
    for f in c.txt v.txt r.ckpt; do
        cmp -s "$f" "$f.orig" || { echo "FAIL: sgrad-w2v $* changed $f"; fail=1; cp "$f.orig" "$f"; }
    done
}
same -train -output -train c.txt -output c.txt
same -train -output -train c.txt -output ./c.txt
same -train -checkpoint -train c.txt -output o.txt -checkpoint c.txt
same -train -log -train c.txt -output o.txt -log "$tmp/c.txt"
same -train -log -train c.txt -output o.txt -log sym.txt
same -train -output -train c.txt -output hard.txt
same -train -save-vocab -train c.txt -output o.txt -save-vocab c.txt
same -train -save-context -train c.txt -output o.txt -save-context ../"$(basename "$tmp")"/c.txt
same -read-vocab -log -train c.txt -output o.txt -read-vocab v.txt -log v.txt
same -read-vocab -save-vocab -train c.txt -output o.txt -read-vocab v.txt -save-vocab ./v.txt
same -resume -log -train c.txt -output o.txt -resume r.ckpt -log r.ckpt
same -resume -output -train c.txt -resume r.ckpt -output r.ckpt
# two outputs, neither existing yet
same -output -save-context -train c.txt -output o.txt -save-context ./o.txt
same -output -checkpoint -train c.txt -output o.txt -checkpoint "$tmp/o.txt"
same -checkpoint -log -train c.txt -output o.txt -checkpoint k.ckpt -log ./k.ckpt
[ -e o.txt ] && { echo "FAIL: a refused run wrote o.txt"; fail=1; }

# distinct files are not refused
if ! "$w2v" -train c.txt -output o.txt -save-context o2.txt -log o.jsonl $small -debug 0 2>err.txt; then
    echo "FAIL: distinct outputs refused:"; cat err.txt; fail=1
fi
exit $fail
