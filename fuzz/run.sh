#!/usr/bin/env bash
# Runs one libFuzzer target as a test: replays its committed corpus (each input once; a
# crash there fails at once), then fuzzes for SECONDS starting from that corpus. New
# inputs go to WORK/corpus, never into the committed directory; a crash leaves its input
# in WORK/crash-* (or leak-*, timeout-*, oom-*) and fails the test. Prints one line:
# inputs replayed, executions, seconds, crashes.
# usage: fuzz/run.sh FUZZER CORPUS_DIR WORK_DIR SECONDS
set -uo pipefail
fuzzer=$1 corpus=$2 work=$3 seconds=$4
name=$(basename "$corpus")
rm -rf "$work"
mkdir -p "$work/corpus"
dict=$(dirname "$corpus")/../$name.dict
dict_flag=()
[ -f "$dict" ] && dict_flag=("-dict=$dict")
inputs=$(find "$corpus" -type f | wc -l)

if ! "$fuzzer" -runs=0 "${dict_flag[@]}" "$corpus" >"$work/replay.log" 2>&1; then
    tail -n 60 "$work/replay.log"
    echo "fuzz $name: FAILED: an input of the committed corpus ($corpus) crashes"
    exit 1
fi

start=$(date +%s)
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/" "${dict_flag[@]}" "$work/corpus" "$corpus" >"$work/fuzz.log" 2>&1
status=$?
elapsed=$(($(date +%s) - start))
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log" | tail -n1)
found=$(find "$work" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | wc -l)
echo "fuzz $name: $inputs corpus inputs replayed, ${execs:-?} executions in ${elapsed} s, $found crashes"
if [ "$status" -ne 0 ] || [ "$found" -ne 0 ]; then
    tail -n 80 "$work/fuzz.log"
    find "$work" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \)
    echo "fuzz $name: FAILED (exit $status); the input is saved above"
    exit 1
fi
echo "1 passed, 0 failed"
