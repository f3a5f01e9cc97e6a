#!/usr/bin/env bash
# sgrad-w2v on 2 ranks x 1 thread against 1 process x 1 thread, with what the machine
# gives two processes: rounds in turn of (a) one process, (b) `mpirun -np 2`, (c) two
# independent 1-thread processes at once (seeds 1 and 2). Each run's rate is the total
# words/sec of its training as the program prints it (words/sec/thread times the ranks:
# start-up, counting and writing not included); (c)'s is set by the slower of the two.
# Per round: 2 ranks / one process, and the independent pair / one process (what two
# cores give two such processes then: the 2 ranks cannot beat it). Then the medians.
#
# usage: bench/dist/w2v_mpi_rounds.sh [ROUNDS] [BUILD_DIR]    (defaults: 9, build)
#   env: CORPUS (default bench/data/w2v/brown.txt, fetched by bench/brown_corpus.sh when
#        missing; any other CORPUS must exist)
#        FLAGS (default: the skip-gram flags of docs/word2vec.md "Under mpirun"; keep
#        -threads 1, which the rates assume, and the summary line: no -debug 0)
# needs: a build with MPI, mpirun. Prints a line and a JSON line per round, then medians.
# Run it with nothing else running: it times two cores' worth of work.
set -euo pipefail
rounds=${1:-9}
build=${2:-build}
brown=bench/data/w2v/brown.txt
corpus=${CORPUS:-$brown}
flags=${FLAGS:--cbow 0 -size 100 -window 5 -negative 5 -sample 1e-4 -min-count 5 -iter 5 -binary 1 -threads 1}
w2v=$build/sgrad-w2v
if ! nm "$w2v" 2>/dev/null | grep w2v_dist_start >/dev/null; then # not -q: SIGPIPE under pipefail
    echo "w2v_mpi_rounds: $w2v is not built with MPI" >&2
    exit 2
fi
me=w2v_mpi_rounds
. "$(dirname "$0")/../bench_lib.sh"
w2v_corpus_ready "$corpus" "$brown"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none -np 2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
read -r -a f <<<"$flags"
for ((i = 1; i <= rounds; i++)); do
    run "$tmp/one.log" "$w2v" -train "$corpus" "${f[@]}" -seed 1 -output "$tmp/one.bin"
    run "$tmp/two.log" "${mpi[@]}" "$w2v" -train "$corpus" "${f[@]}" -seed 1 -output "$tmp/two.bin"
    "$w2v" -train "$corpus" "${f[@]}" -seed 1 -output "$tmp/p1.bin" >"$tmp/p1.log" 2>&1 &
    pid=$!
    trap 'kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
    run "$tmp/p2.log" "$w2v" -train "$corpus" "${f[@]}" -seed 2 -output "$tmp/p2.bin"
    wait "$pid" || { echo "w2v_mpi_rounds: an independent run failed" >&2; cat "$tmp/p1.log" >&2; exit 1; }
    trap 'rm -rf "$tmp"' EXIT
    one=$(w2v_rate "$tmp/one.log") && two=$(w2v_rate "$tmp/two.log") && p1=$(w2v_rate "$tmp/p1.log") &&
        p2=$(w2v_rate "$tmp/p2.log") || exit 1
    awk -v one="$one" -v two="$two" -v p1="$p1" -v p2="$p2" -v i="$i" 'BEGIN {
        slow = p1 < p2 ? p1 : p2
        printf "round %d: one process %.1fk words/s, 2 ranks %.1fk (%.2fx), two independent %.1fk (%.2fx)\n",
               i, one, 2 * two, 2 * two / one, 2 * slow, 2 * slow / one
        printf "{\"bench\":\"w2v_mpi_rounds\",\"round\":%d,\"one_wps\":%.0f,\"ranks2_wps\":%.0f,\"ranks2_ratio\":%.4f,\"independent_wps\":%.0f,\"independent_ratio\":%.4f}\n",
               i, 1000 * one, 2000 * two, 2 * two / one, 2000 * slow, 2 * slow / one
    }' | tee -a "$tmp/rounds"
done
grep '^{' "$tmp/rounds" | python3 -c '
import json, statistics, sys
r = [json.loads(l) for l in sys.stdin]
for k in ("ranks2_ratio", "independent_ratio"):
    v = [x[k] for x in r]
    print("%s: median %.2fx (%.2f-%.2f), %d rounds" % (k, statistics.median(v), min(v), max(v), len(v)))
'
