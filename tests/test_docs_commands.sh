#!/usr/bin/env bash
# The manual cannot drift from the programs: every fenced ```sh block of README.md,
# docs/*.md and bench/README.md whose opening line follows a `<!-- run this -->` line
# (blank lines between allowed) is run here, each block as one bash script with `set -e`, and must succeed.
#
# Usage: tests/test_docs_commands.sh BUILD_DIR. Each block runs in a fresh scratch
# directory that links every top-level entry of the repository (so `data/...`,
# `examples/...` and `python` read as from the repository root) and `build` to BUILD_DIR;
# BUILD_DIR is first on PATH (the programs `sgrad-*` by name) and SGRAD_LIBRARY and
# PYTHONPATH point the Python package at the build. Whatever a block writes lands in the
# scratch directory. A block that needs mpirun, torch or numpy is skipped, saying so, when
# that is missing. Marked blocks use tiny sizes, so the whole test takes seconds.
set -euo pipefail
build=$(cd "$1" && pwd)
repo=$(pwd)
if [ ! -x "$build/sgrad-w2v" ] || [ ! -f "$build/libsgrad.so" ]; then
    echo "skipped: needs a build with the programs (SGRAD_BUILD_TOOLS) and libsgrad.so"
    exit 77
fi
if grep -q '^SGRAD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
    # The blocks compile and load programs as a user would, without the sanitizer runtime.
    echo "skipped: a sanitizer build (the normal build runs these commands)"
    exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Writes each marked block to $tmp/blocks/N.sh and its origin (file:line) to N.where.
mkdir -p "$tmp/blocks"
n=0
for doc in README.md docs/*.md bench/README.md; do
    awk -v doc="$doc" -v dir="$tmp/blocks" -v start="$n" '
        BEGIN { n = start }
        /^<!-- run this -->[ \t]*$/ { marked = 1; next }
        marked && /^[ \t]*$/ { next }
        marked && /^```(sh|bash|console)?[ \t]*$/ && !inblock {
            inblock = 1; marked = 0; n++
            f = dir "/" n ".sh"; print doc ":" NR > (dir "/" n ".where"); next }
        marked { printf "%s:%d: <!-- run this --> is not followed by a ```sh block\n", doc, NR > "/dev/stderr"; bad = 1; marked = 0 }
        inblock && /^```[ \t]*$/ { inblock = 0; close(f); next }
        inblock { print > f }
        END { print n > (dir "/count"); exit bad }
    ' "$doc" || { echo "a marker without its block (above)"; exit 1; }
    n=$(cat "$tmp/blocks/count")
done
if [ "$n" -lt 3 ]; then
    echo "only $n marked blocks in README.md and docs/*.md: the markers were lost"
    exit 1
fi

have_numpy=0
python3 -c 'import numpy' 2>/dev/null && have_numpy=1
have_torch=0
python3 -c 'import torch' 2>/dev/null && have_torch=1

passed=0 skipped=0 failed=0
for i in $(seq 1 "$n"); do
    script=$tmp/blocks/$i.sh
    where=$(cat "$tmp/blocks/$i.where")
    [ -s "$script" ] || { echo "$where: empty block"; failed=$((failed + 1)); continue; }
    why=
    if grep -q 'mpirun' "$script" && ! command -v mpirun >/dev/null; then why="needs mpirun"; fi
    if grep -q 'torch' "$script" && [ $have_torch = 0 ]; then why="needs torch"; fi
    if grep -q 'python' "$script" && [ $have_numpy = 0 ]; then why="needs python3 with numpy"; fi
    if [ -n "$why" ]; then
        echo "SKIP $where ($why)"
        skipped=$((skipped + 1))
        continue
    fi
    work=$tmp/run$i
    mkdir "$work"
    for e in "$repo"/* "$repo"/.[!.]*; do
        [ -e "$e" ] || continue
        b=$(basename "$e")
        case "$b" in .git | build | build-*) continue ;; esac
        ln -s "$e" "$work/$b"
    done
    ln -s "$build" "$work/build"
    start=$(date +%s)
    if (cd "$work" && PATH="$build:$PATH" SGRAD_LIBRARY="$build/libsgrad.so" \
        PYTHONPATH="$repo/python" timeout 120 bash -e "$script") >"$work.log" 2>&1; then
        echo "ok   $where ($(($(date +%s) - start)) s)"
        passed=$((passed + 1))
    else
        echo "FAIL $where: the block"
        sed 's/^/    /' "$script"
        echo "  printed:"
        tail -n 30 "$work.log" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
