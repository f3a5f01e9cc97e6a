#!/usr/bin/env bash
# The README's minimal program compiles against the library as built in $1, runs, and
# reports a gradient of 3 rows (3 lookups, one repeated: uncoalesced).
set -euo pipefail
build=$(cd "$1" && pwd)
if [ ! -f "$build/libsgrad.a" ]; then
    echo "skipped: needs a build with libsgrad.a"
    exit 77
fi
san=
grep -q '^SGRAD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" && san="-fsanitize=address,undefined"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^```c$/ {on = 1; next} on && /^```$/ {exit} on' README.md >"$tmp/example.c"
[ -s "$tmp/example.c" ] || { echo "no C example in README.md"; exit 1; }
# What a static user links besides libsgrad.a: sgrad.pc's Libs.private (libm, OpenMP, and
# the BLAS of a build with one, docs/blas.md).
libs=$(sed -n 's/^Libs.private: //p' "$build/sgrad.pc" 2>/dev/null || true)
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror $san -Iinclude "$tmp/example.c" "$build/libsgrad.a" ${libs:--fopenmp -lm} -o "$tmp/example"
out=$("$tmp/example")
echo "$out"
[ "$out" = "gradient rows: 3" ] || { echo "unexpected output"; exit 1; }
echo "1 passed, 0 failed"
