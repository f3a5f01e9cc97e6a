#!/usr/bin/env bash
# sgrad-w2v refuses flag combinations whose per-step index arrays would be huge (CBOW's
# -batch x 2*-window context slots, -batch x (-negative + 1) targets, allocated up front)
# with exit status 2 and a message naming the flags, before it reads the corpus; the
# largest accepted combinations get as far as reading it; -replicas with -hogwild 1 or a
# checkpoint is refused the same way. Skips (exit 77) when the build
# has no programs (SGRAD_BUILD_TOOLS=OFF).
# usage: tests/test_w2v_flags.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_flags: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
missing=$tmp/no-such-corpus.txt
fail=0

# expect STATUS PATTERN flags...: exit status and a pattern its stderr must contain
expect() {
    local want=$1 pattern=$2
    shift 2
    "$w2v" -train "$missing" "$@" 2>"$tmp/err.txt"
    local got=$?
    if [ "$got" -ne "$want" ] || ! grep -q -- "$pattern" "$tmp/err.txt"; then
        echo "FAIL: sgrad-w2v $* exited $got (wanted $want, stderr matching '$pattern'):"
        cat "$tmp/err.txt"
        fail=1
    fi
}

# 2^24 x 2 x 100 context slots: 13 GB of int32, and offsets past INT32_MAX
expect 2 "-batch" -cbow 1 -batch 16777216 -window 100
# 2^24 x 101 targets (skip-gram too)
expect 2 "-negative" -cbow 0 -batch 16777216 -negative 100
# 2^26 slots exactly is accepted: the run gets to the missing corpus (refused up front, status 2)
expect 2 "cannot read" -cbow 1 -batch 16777216 -window 2 -negative 3
expect 2 "cannot read" -cbow 1 -batch 335544 -window 100 -negative 5
expect 2 "-replicas 2 does not go with -hogwild 1" -replicas 2 -hogwild 1
expect 2 "-replicas 2 does not go with -checkpoint" -replicas 2 -checkpoint "$tmp/ck"
expect 2 "bad value for -replicas" -replicas 0
exit $fail
