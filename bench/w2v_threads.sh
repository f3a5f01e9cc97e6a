#!/usr/bin/env bash
# sgrad-w2v on 2 threads against 1, with what the machine gives 2 threads at that moment:
# rounds in turn of
#   (p) sgrad-bench cores' core_speed: each core's speed at word2vec's row work, the
#       fastest 1.00 (a host may slow one virtual core for minutes);
#   (a) one model, -threads 1;          (b) one model, -threads 2;
#   (c) -replicas 2 -threads 2;         (d) two independent 1-thread runs at once
#       (seeds 1 and 2), whose rate is twice the slower one's.
# A rate is the total words/sec of training as the program prints it (words/sec/thread
# times the threads: counting and writing not included). Per round: each rate over (a)'s,
# and the probe's slower core. Then the medians over all rounds and over the rounds whose
# slower core had at least 0.9 of the faster's speed ("even cores").
#
# usage: bench/w2v_threads.sh [ROUNDS] [BUILD_DIR]    (defaults: 9, build)
#   env: CORPUS (default bench/data/w2v/brown.txt, fetched by bench/brown_corpus.sh when
#        missing; any other CORPUS must exist)
#        FLAGS (default: bench/w2v_compare.sh's skip-gram flags, 5 epochs; no -threads,
#        -debug 0 or -hogwild 1: the script sets the threads and reads the summary line)
#        QUICK=1: the probe's --quick form (tests; its handoffs crawl on busy cores)
# Prints a line and a JSON line per round, then the medians. Run it with nothing else
# running: it times two cores' worth of work.
set -euo pipefail
rounds=${1:-9}
build=${2:-build}
brown=bench/data/w2v/brown.txt
corpus=${CORPUS:-$brown}
flags=${FLAGS:--cbow 0 -size 100 -window 5 -negative 5 -sample 1e-4 -min-count 5 -iter 5 -binary 1}
w2v=$build/sgrad-w2v
for prog in "$w2v" "$build/sgrad-bench"; do
    [ -x "$prog" ] || { echo "w2v_threads: no $prog (build first)" >&2; exit 2; }
done
me=w2v_threads
. "$(dirname "$0")/bench_lib.sh"
w2v_corpus_ready "$corpus" "$brown"
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
read -r -a f <<<"$flags"
for ((i = 1; i <= rounds; i++)); do
    "$build/sgrad-bench" ${QUICK:+--quick} cores >"$tmp/cores.jsonl"
    slow=$(python3 -c '
import json, sys
s = [o["speed"] for o in map(json.loads, open(sys.argv[1])) if o["case"] == "core_speed"]
print("%.3f" % (min(s) if len(s) > 1 else 1.0))' "$tmp/cores.jsonl")
    run "$tmp/one.log" "$w2v" -train "$corpus" "${f[@]}" -threads 1 -seed 1 -output "$tmp/one.bin"
    run "$tmp/two.log" "$w2v" -train "$corpus" "${f[@]}" -threads 2 -seed 1 -output "$tmp/two.bin"
    run "$tmp/rep.log" "$w2v" -train "$corpus" "${f[@]}" -replicas 2 -threads 2 -seed 1 -output "$tmp/rep.bin"
    "$w2v" -train "$corpus" "${f[@]}" -threads 1 -seed 1 -output "$tmp/p1.bin" >"$tmp/p1.log" 2>&1 &
    pid=$!
    run "$tmp/p2.log" "$w2v" -train "$corpus" "${f[@]}" -threads 1 -seed 2 -output "$tmp/p2.bin"
    wait "$pid" || { echo "w2v_threads: an independent run failed" >&2; cat "$tmp/p1.log" >&2; exit 1; }
    pid=
    one=$(w2v_total_rate "$tmp/one.log") && two=$(w2v_total_rate "$tmp/two.log") &&
        rep=$(w2v_total_rate "$tmp/rep.log") && p1=$(w2v_total_rate "$tmp/p1.log") &&
        p2=$(w2v_total_rate "$tmp/p2.log") || exit 1
    awk -v i="$i" -v slow="$slow" -v one="$one" -v two="$two" -v rep="$rep" -v p1="$p1" -v p2="$p2" 'BEGIN {
        ind = 2 * (p1 < p2 ? p1 : p2)
        printf "round %d: slower core %.2f; 1 thread %.0fk words/s, 2 threads %.2fx, -replicas 2 %.2fx, two independent runs %.2fx\n",
               i, slow, one / 1000, two / one, rep / one, ind / one
        printf "{\"bench\":\"w2v_threads\",\"round\":%d,\"slower_core\":%.3f,\"one_wps\":%.0f,\"two_ratio\":%.4f,\"replicas_ratio\":%.4f,\"independent_ratio\":%.4f}\n",
               i, slow, one, two / one, rep / one, ind / one
    }' | tee -a "$tmp/rounds"
done
grep '^{' "$tmp/rounds" | python3 -c '
import json, statistics, sys
r = [json.loads(l) for l in sys.stdin]
for name, rs in (("all rounds", r), ("even cores", [x for x in r if x["slower_core"] >= 0.9])):
    if not rs:
        print("%s: none" % name)
        continue
    print("%s (%d):" % (name, len(rs)), ", ".join("%s median %.2fx (%.2f-%.2f)" % (k, statistics.median(v), min(v), max(v))
          for k in ("two_ratio", "replicas_ratio", "independent_ratio") for v in [[x[k] for x in rs]]))
'
