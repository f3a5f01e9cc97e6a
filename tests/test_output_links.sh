#!/usr/bin/env bash
# The programs check an output where they will write it: a symbolic link is followed, as
# the writers follow it (the link stays a link, its target is replaced). So a link into a
# missing directory, or to a name too long for the temporary file beside it, is refused
# before training instead of failing at the write; sgrad-fasttext's name check counts
# its staged names (MODEL.bin.staged-PID-N, then that file's own temporary one); every
# writer (sgrad-w2v's -output and -save-vocab, sgrad-fasttext's MODEL.bin and MODEL.vec)
# replaces a link's target and keeps its permission bits; /dev/stdout and /dev/stdin
# redirected to files work whatever their paths' lengths, and into a pipe /dev/stdout is
# refused before training; sgrad-w2v's same-file check matches a link to an output not yet
# written, and sgrad-fasttext refuses MODEL.bin and MODEL.vec that are one file or its
# -input; a FIFO
# behind a chain of links the kernel gives up on is refused and kept, and a log is
# written through its own path. Skips (exit 77) without the programs.
# usage: tests/test_output_links.sh BUILD_DIR
set -uo pipefail
build=$(cd "${1:-build}" && pwd)
w2v=$build/sgrad-w2v
ft=$build/sgrad-fasttext
if [ ! -x "$w2v" ] || [ ! -x "$ft" ]; then
    echo "SKIP test_output_links: the programs are not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail=0
awk 'BEGIN { for (s = 1; s <= 300; s++) { for (i = 1; i <= 10; i++) printf "w%d ", (s * 7 + i * 13) % 50; print "" } }' >c.txt
small="-size 8 -iter 1 -min-count 1 -threads 1" # -debug 1: "epochs" once it trains
ftsmall="-dim 4 -epoch 1 -minCount 1 -minn 0 -maxn 0 -thread 1 -verbose 2" # 2: "Read N words" once it trains
name_max=$(getconf NAME_MAX .)

# refused STATUS PROGRAM PATTERN args...: that exit status (sgrad-w2v's 2 for a refused
# flag, sgrad-fasttext's 1 as fastText's), stderr matching PATTERN, nothing trained (no
# progress line or word count, no failed save)
refused() {
    local want=$1 prog=$2 pattern=$3
    shift 3
    "$prog" "$@" >/dev/null 2>err.txt </dev/null
    local got=$?
    if [ "$got" -ne "$want" ] || ! grep -q -- "$pattern" err.txt || grep -q "epochs\|Read [0-9]* words\|left as" err.txt; then
        echo "FAIL: $(basename "$prog") $* exited $got (wanted $want, stderr matching '$pattern', no training):"
        cat err.txt
        fail=1
    fi
}

# ---- a link into a directory that does not exist
ln -s missing/x.vec to-missing.vec
refused 2 "$w2v" "does not exist" -train c.txt -output to-missing.vec $small
ln -s missing/m.bin ft-missing.bin
refused 1 "$ft" "does not exist" skipgram -input c.txt -output ft-missing $ftsmall

# ---- a link (short name) to a legal name that leaves no room for the temporary name
long=$(printf 'v%.0s' $(seq $((name_max - 10))))
ln -s "$long" to-long.vec
refused 2 "$w2v" "the temporary file beside it" -train c.txt -output to-long.vec $small
[ -e "$long" ] && { echo "FAIL: a refused -output was written through the link"; fail=1; }

# ---- sgrad-fasttext: a name with room for "NAME.tmp-PID-N" but not for the staged
# "NAME.staged-PID-N.tmp-PID-N" is refused before training
pid_max=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 4194304)
direct=$((${#pid_max} + 16)) # ".tmp-" PID "-" and a 10-digit counter
mid=$(printf 'm%.0s' $(seq $((name_max - direct - 4 - 1)))) # MID.bin: 1 byte under the direct budget
refused 1 "$ft" "the temporary file beside it" skipgram -input c.txt -output "$mid" $ftsmall
ls | grep "^mmm" >/dev/null && { echo "FAIL: a refused sgrad-fasttext run left files:"; ls; fail=1; }

# ---- writers replace a link's target and keep its mode: sgrad-w2v's library writer
# (-output) and its own (-save-vocab); sgrad-fasttext's staged pair
mkdir real
echo old >old.txt
for f in real/o.vec real/v.txt real/m.bin real/m.vec; do cp old.txt "$f"; chmod 640 "$f"; done
ln -s real/o.vec o.vec
ln -s real/v.txt v.txt
ln -s real/m.bin m.bin
ln -s real/m.vec m.vec
"$w2v" -train c.txt -output o.vec -save-vocab v.txt $small 2>err.txt || { echo "FAIL: w2v through links:"; cat err.txt; fail=1; }
"$ft" skipgram -input c.txt -output m $ftsmall 2>err.txt || { echo "FAIL: fasttext through links:"; cat err.txt; fail=1; }
for f in o.vec v.txt m.bin m.vec; do
    if [ ! -L "$f" ] || [ "$(stat -c %a "real/$f")" != 640 ] || cmp -s old.txt "real/$f"; then
        echo "FAIL: $f: wanted a link still, its target real/$f rewritten with mode 640; got:"
        ls -l "$f" "real/$f"
        fail=1
    fi
done
grep -q "^w0 " real/v.txt || { echo "FAIL: real/v.txt is not the vocabulary:"; head -3 real/v.txt; fail=1; }
ls real | grep "tmp-\|staged" >/dev/null && { echo "FAIL: temporary files left in real/:"; ls real; fail=1; }

# ---- /proc's links (/dev/stdout, /dev/stdin): a redirected file is found at its path,
# however long (the link's size says 64); a pipe is refused before training
deep=$tmp/$(printf 'd%.0s' $(seq 60))/$(printf 'e%.0s' $(seq 60))
mkdir -p "$deep"
"$w2v" -train c.txt -output /dev/stdout $small >"$deep/out.vec" 2>err.txt ||
    { echo "FAIL: -output /dev/stdout into a file:"; cat err.txt; fail=1; }
head -n1 "$deep/out.vec" | grep -q "^50 8$" || { echo "FAIL: $deep/out.vec is not the vectors"; fail=1; }
cp c.txt "$deep/c.txt"
"$w2v" -train /dev/stdin -output o2.vec $small <"$deep/c.txt" 2>err.txt ||
    { echo "FAIL: -train /dev/stdin from a file:"; cat err.txt; fail=1; }
for flag in -output -save-vocab -log; do
    if [ $flag = -output ]; then args=(-output /dev/stdout); else args=(-output o3.vec $flag /dev/stdout); fi
    "$w2v" -train c.txt "${args[@]}" $small 2>err.txt | cat >/dev/null
    got=${PIPESTATUS[0]}
    if [ "$got" -ne 2 ] || ! grep -q -- "cannot write $flag /dev/stdout: not a regular file" err.txt; then
        echo "FAIL: $flag /dev/stdout into a pipe exited $got (wanted 2, refused before training):"; cat err.txt; fail=1
    fi
done

# ---- a FIFO at the end of a chain the kernel gives up on (more than 40 links in all,
# though each step is short): refused, and kept
mkdir chain
ln -s . chain/d
mkfifo chain/ff
for i in $(seq 0 24); do ln -s "d/l$((i + 1))" "chain/l$i"; done
ln -s ff chain/l25
refused 2 "$w2v" "Too many levels of symbolic links" -train c.txt -output chain/l0 $small
refused 2 "$w2v" "Too many levels of symbolic links" -train c.txt -output o4.vec -save-vocab chain/l0 $small
[ -p chain/ff ] || { echo "FAIL: the FIFO behind chain/l0 was replaced"; fail=1; }

# ---- a log is written in place, through its own path: a /proc link to a deleted file
# takes it (nothing is made beside the file)
exec 3>gone.log
rm gone.log
"$w2v" -train c.txt -output o5.vec -log /proc/self/fd/3 $small 2>err.txt ||
    { echo "FAIL: -log through a /proc link to a deleted file:"; cat err.txt; fail=1; }
[ -s /proc/$$/fd/3 ] || { echo "FAIL: nothing was logged into the deleted file"; fail=1; }
ls | grep "tmp-" >/dev/null && { echo "FAIL: a temporary file was made for the log:"; ls; fail=1; }
exec 3>&-

# ---- sgrad-fasttext: MODEL.bin and MODEL.vec may not be one file (two links to one
# name); hard links are two names, each replaced by its own rename
touch hard.bin
ln hard.bin hard.vec
"$ft" skipgram -input c.txt -output hard $ftsmall 2>err.txt || { echo "FAIL: hard-linked .bin and .vec:"; cat err.txt; fail=1; }
[ "$(stat -c %i hard.bin)" != "$(stat -c %i hard.vec)" ] && head -n1 hard.vec | grep -q "^51 4$" ||
    { echo "FAIL: hard.bin and hard.vec are not two files, the .vec the vectors"; fail=1; }
ln -s shared.txt twice.bin
ln -s shared.txt twice.vec
refused 1 "$ft" "are the same file" skipgram -input c.txt -output twice $ftsmall
[ -e shared.txt ] && { echo "FAIL: a refused run wrote shared.txt"; fail=1; }
# nor the corpus (it would be replaced by the model or the vectors)
cp c.txt in.vec
cp c.txt in.bin
refused 1 "$ft" "-input in.vec and -output's in.vec are the same file" skipgram -input in.vec -output in $ftsmall
refused 1 "$ft" "-input in.bin and -output's ./in.bin are the same file" supervised -input in.bin -output ./in -dim 4 -epoch 1 -verbose 2
cmp -s c.txt in.vec && cmp -s c.txt in.bin || { echo "FAIL: a corpus named as an output was changed"; fail=1; }

# ---- a link to an output not yet written is that output
ln -s new.vec dangling.vec
"$w2v" -train c.txt -output new.vec -save-context dangling.vec $small 2>err.txt </dev/null
got=$?
if [ "$got" -ne 2 ] || ! grep -q -- "-output new.vec and -save-context dangling.vec are the same file" err.txt; then
    echo "FAIL: -save-context, a link to -output's file not yet written, exited $got:"; cat err.txt; fail=1
fi
[ -e new.vec ] && { echo "FAIL: a refused run wrote new.vec"; fail=1; }
exit $fail
