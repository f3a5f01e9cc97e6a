#!/usr/bin/env bash
# sgrad-w2v -replicas with a -sync-every far above the run's steps (up to INT64_MAX is
# accepted): a replica whose share is done goes straight to the next merge instead of
# stepping through every step before it, so the run ends at once (it used to run for
# ~2^40 empty steps). Above the run's step count the only full merges are the epochs'
# ends, so -sync-every 2^40 and 10^6 must give the same file. With 3 replicas the same
# (hot rows planned, with the same periods from -sync-every 2^17 on; the done replicas
# skip the hot merges left, about 2^16 an epoch, which took 8-17 s: the timeout would not
# catch that, test_w2v_train's count of the merges does). Skips (exit 77) without the
# programs.
# usage: tests/test_w2v_sync_every_large.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_sync_every_large: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
awk 'BEGIN { for (s = 1; s <= 600; s++) { for (i = 1; i <= 10; i++) printf "w%d ", (s * 7 + i * 13) % 60; print "" } }' >"$tmp/c.txt"
for replicas in 2 3; do
    flags=(-train "$tmp/c.txt" -size 8 -iter 2 -min-count 1 -batch 64 -replicas $replicas -threads 2 -debug 0)
    for every in 1000000 1099511627776 9223372036854775807; do
        if ! timeout 60 "$w2v" "${flags[@]}" -sync-every $every -output "$tmp/v$every.txt" 2>"$tmp/err.txt"; then
            echo "FAIL: -replicas $replicas -sync-every $every did not finish within 60 s (or failed):"
            cat "$tmp/err.txt"
            fail=1
        fi
    done
    for every in 1099511627776 9223372036854775807; do
        cmp -s "$tmp/v1000000.txt" "$tmp/v$every.txt" ||
            { echo "FAIL: -replicas $replicas: -sync-every $every and 1000000 (both above the steps) differ"; fail=1; }
    done
done
exit $fail
