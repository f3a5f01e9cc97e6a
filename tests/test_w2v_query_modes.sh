#!/usr/bin/env bash
# sgrad-w2v's query modes on the command line, against answers worked out by hand:
# one mode a run (training plus a query, or two queries, is refused with status 2 and
# nothing written); a subnormal but finite row gives finite similarities (its direction,
# cosine 1), not NaN; vectors from a pipe are read when -binary 0|1 gives the format,
# and without it the message names -binary. Skips (exit 77) when the programs are not built.
# usage: tests/test_w2v_query_modes.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_query_modes: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect_status() { # want, what, command...
    local want=$1 what=$2 rc=0
    shift 2
    "$@" >"$tmp/out.txt" 2>"$tmp/err.txt" || rc=$?
    if [ $rc -ne "$want" ]; then
        echo "FAIL: $what: status $rc, want $want; stderr: $(cat "$tmp/err.txt")"
        fail=1
    fi
}

# the = e1, a = (0.6, 0.8, 0), b = e2: neighbours of the are a (0.600), b (0.000)
printf '3 3\nthe 1 0 0\na 0.6 0.8 0\nb 0 1 0\n' >"$tmp/v.txt"
printf 'the a b c d e f\n' >"$tmp/corpus.txt"
printf ': s\nthe a b the\n' >"$tmp/q.txt"
want='the: a (0.600), b (0.000)'

expect_status 2 "-train with -neighbors" "$w2v" -train "$tmp/corpus.txt" -output "$tmp/o.txt" \
    -min-count 1 -neighbors "$tmp/v.txt" -words the
[ ! -e "$tmp/o.txt" ] || { echo "FAIL: -train with -neighbors wrote $tmp/o.txt"; fail=1; }
expect_status 2 "-train with -words" "$w2v" -train "$tmp/corpus.txt" -output "$tmp/o.txt" -min-count 1 -words the
[ ! -e "$tmp/o.txt" ] || { echo "FAIL: -train with -words wrote $tmp/o.txt"; fail=1; }
expect_status 2 "-neighbors with -analogy" "$w2v" -neighbors "$tmp/v.txt" -words the -analogy "$tmp/v.txt" the a b
[ ! -s "$tmp/out.txt" ] || { echo "FAIL: -neighbors with -analogy answered: $(cat "$tmp/out.txt")"; fail=1; }
expect_status 2 "-evaluate with -neighbors" "$w2v" -evaluate "$tmp/v.txt" -questions "$tmp/q.txt" \
    -neighbors "$tmp/v.txt" -words the
expect_status 2 "-questions with -neighbors" "$w2v" -neighbors "$tmp/v.txt" -words the -questions "$tmp/q.txt"
expect_status 0 "-neighbors alone" "$w2v" -neighbors "$tmp/v.txt" -words the
[ "$(cat "$tmp/out.txt")" = "$want" ] || { echo "FAIL: neighbours: $(cat "$tmp/out.txt")"; fail=1; }

# 1e-45 is a subnormal float: the row's direction is e1, as a's, so both cosines are 1
printf '2 3\nthe 1e-45 0 0\na 1 0 0\n' >"$tmp/s.txt"
expect_status 0 "subnormal row" "$w2v" -neighbors "$tmp/s.txt" -words the,a
printf 'the: a (1.000)\na: the (1.000)\n' >"$tmp/want.txt"
cmp -s "$tmp/out.txt" "$tmp/want.txt" || { echo "FAIL: subnormal row: $(cat "$tmp/out.txt")"; fail=1; }

# from a pipe: text with -binary 0, binary (written here by hand) with -binary 1
{ printf '3 3\n'; for w in "the 1 0 0" "a 0.6 0.8 0" "b 0 1 0"; do
    set -- $w
    printf '%s ' "$1"
    /usr/bin/python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<3f", *map(float, sys.argv[1:])))' "$2" "$3" "$4"
    printf '\n'
  done; } >"$tmp/v.bin"
for f in txt:0 bin:1; do
    rc=0
    cat "$tmp/v.${f%:*}" | "$w2v" -neighbors /dev/stdin -binary "${f#*:}" -words the >"$tmp/out.txt" 2>"$tmp/err.txt" || rc=$?
    if [ $rc -ne 0 ] || [ "$(cat "$tmp/out.txt")" != "$want" ]; then
        echo "FAIL: pipe with -binary ${f#*:}: status $rc, $(cat "$tmp/out.txt" "$tmp/err.txt")"
        fail=1
    fi
done
rc=0
cat "$tmp/v.txt" | "$w2v" -neighbors /dev/stdin -words the >"$tmp/out.txt" 2>"$tmp/err.txt" || rc=$?
if [ $rc -ne 1 ] || ! grep -q -- "-binary 0" "$tmp/err.txt"; then
    echo "FAIL: pipe without -binary: status $rc, stderr: $(cat "$tmp/err.txt")"
    fail=1
fi
[ $fail -eq 0 ] && echo "query modes: all checks passed"
exit $fail
