#!/usr/bin/env bash
# Word2vec throughput against vocabulary size: sgrad-w2v, word2vec.c, fastText and gensim
# on synthetic Zipf corpora (bench/zipf_corpus.py) whose vocabularies surviving
# -min-count 5 are VOCABS words, with 1 and 2 threads and the same hyperparameters:
# skip-gram, size 100, window 5, negative 5, sample 1e-4, min-count 5, learning rate 0.025,
# EPOCHS epochs.
#
# Measures, per run (one JSON line each, then a table):
#   seconds        wall time of the program (reading the corpus, the vocabulary, training,
#                  writing the vectors: binary for sgrad-w2v and word2vec.c, fastText writes
#                  .bin and .vec); gensim: timed inside Python around Word2Vec(), no output
#   words_per_sec_per_thread  corpus tokens x epochs / seconds / threads
#   pairs_per_sec  expected (centre, context) pairs x epochs / seconds: the pairs are the
#                  generator's estimate under word2vec.c's subsampling (see
#                  bench/zipf_corpus.py), the same number for every tool, so that rates at
#                  different vocabulary sizes compare (a larger vocabulary subsamples less)
#   peak_rss_kb    from /usr/bin/time (null without it)
# With matplotlib, a plot of pairs/sec against vocabulary size goes to $OUT/w2v_scale.svg.
#
# usage: bench/w2v_scale.sh [BUILD_DIR]         (default: build)
#   env: VOCABS="15000 150000 1000000"  TOKENS_PER_WORD=50 (tokens = vocab x this) or
#        TOKENS (one count for every size)  THREADS="1 2"  EPOCHS=1  SEED=1  REPS=3
#        TOOLS="sgrad word2vec fastText gensim"  WORD2VEC (word2vec.c's binary; default:
#        bench/word2vec_c.sh's: `word2vec` on PATH, else one built from the published
#        source)  OUT=bench/data/w2v_scale
#        PYTHON (default: /usr/bin/python3 when it has numpy, else python3)
# Each (vocabulary, threads) point runs the tools in turn, REPS rounds (A B C A B C ...);
# the table and the plot give each tool's median over the rounds, the JSON lines every run.
# A tool that is not installed is skipped with a message. The corpora are kept in $OUT
# and reused when their metadata matches (the 1M-word one is 50M tokens, about 450 MB).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
vocabs=(${VOCABS:-15000 150000 1000000})
threads_list=(${THREADS:-1 2})
epochs=${EPOCHS:-1}
reps=${REPS:-3}
seed=${SEED:-1}
tools_req=(${TOOLS:-sgrad word2vec fastText gensim})
out=${OUT:-bench/data/w2v_scale}
w2v=$build/sgrad-w2v
mkdir -p "$out"

py=${PYTHON:-}
if [ -z "$py" ]; then
    for c in /usr/bin/python3 python3; do
        if "$c" -c 'import numpy' 2>/dev/null; then py=$c; break; fi
    done
fi
if [ -z "$py" ] || ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "w2v_scale: no python3 with numpy (apt-get install python3-numpy): the generator needs it" >&2
    exit 1
fi

tools=()
for tool in "${tools_req[@]}"; do
    case $tool in
    sgrad)
        if [ -x "$w2v" ]; then tools+=(sgrad)
        else echo "w2v_scale: $w2v not found (build first); sgrad skipped" >&2; fi ;;
    word2vec)
        w2c=$(bash "$here/word2vec_c.sh" "$out/word2vec-c" || true)
        if [ -n "$w2c" ] && [ -x "$w2c" ]; then tools+=(word2vec)
        else echo "w2v_scale: no word2vec.c binary (set WORD2VEC, or see bench/word2vec_c.sh); skipped" >&2; fi ;;
    fastText)
        if command -v fasttext >/dev/null; then tools+=(fastText)
        else echo "w2v_scale: fasttext not installed (apt-get install fasttext); skipped" >&2; fi ;;
    gensim)
        if "$py" -c 'import gensim' 2>/dev/null; then tools+=(gensim)
        else echo "w2v_scale: $py has no gensim (apt-get install python3-gensim); skipped" >&2; fi ;;
    *) echo "w2v_scale: unknown tool $tool (sgrad, word2vec, fastText, gensim)" >&2; exit 2 ;;
    esac
done
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -f '%M' -o "$out/rss")

now() { date +%s.%N; }
json_field() { "$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# run TOOL CORPUS THREADS: sets secs and rss (kB or null)
run() {
    local tool=$1 corpus=$2 th=$3 t0 t1 vec=$out/vectors
    rm -f "$out/rss"
    t0=$(now)
    case $tool in
    sgrad)
        "${timer[@]}" "$w2v" -train "$corpus" -output "$vec.bin" -binary 1 -cbow 0 -size 100 \
            -window 5 -negative 5 -sample 1e-4 -min-count 5 -iter "$epochs" -alpha 0.025 \
            -threads "$th" -seed "$seed" 2>"$out/sgrad.log" ;;
    word2vec)
        "${timer[@]}" "$w2c" -train "$corpus" -output "$vec.bin" -binary 1 -cbow 0 -size 100 \
            -window 5 -negative 5 -hs 0 -sample 1e-4 -min-count 5 -iter "$epochs" -alpha 0.025 \
            -threads "$th" >"$out/word2vec.log" 2>&1 ;;
    fastText)
        "${timer[@]}" fasttext skipgram -input "$corpus" -output "$vec" -dim 100 -ws 5 -neg 5 \
            -t 1e-4 -minCount 5 -epoch "$epochs" -minn 0 -maxn 0 -lr 0.025 -thread "$th" \
            -seed "$seed" -verbose 0 >"$out/fastText.log" 2>&1 ;;
    gensim)
        "${timer[@]}" "$py" - "$corpus" "$th" "$epochs" "$seed" >"$out/gensim.time" 2>"$out/gensim.log" <<'EOF'
import sys, time
from gensim.models import Word2Vec
corpus, threads, epochs, seed = sys.argv[1:5]
t0 = time.time()
Word2Vec(corpus_file=corpus, vector_size=100, window=5, negative=5, hs=0, sample=1e-4,
         min_count=5, epochs=int(epochs), sg=1, workers=int(threads), alpha=0.025, seed=int(seed))
print("%.3f" % (time.time() - t0))
EOF
        ;;
    esac
    t1=$(now)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    [ "$tool" = gensim ] && secs=$(cat "$out/gensim.time")
    rss=null
    [ -s "$out/rss" ] && rss=$(tail -n 1 "$out/rss")
    rm -f "$vec.bin" "$vec.vec"
    return 0
}

results=$out/results.jsonl
: >"$results"
for V in "${vocabs[@]}"; do
    tokens=${TOKENS:-$((V * ${TOKENS_PER_WORD:-50}))}
    corpus=$out/zipf-$V.txt
    meta=$out/zipf-$V.json
    want="\"vocab\": $V, \"tokens\": $tokens,"
    if [ ! -s "$corpus" ] || ! grep -q "$want" "$meta" 2>/dev/null || ! grep -q "\"seed\": $seed," "$meta"; then
        echo "== generating $corpus: $V words surviving min-count 5, $tokens tokens" >&2
        "$py" "$here/zipf_corpus.py" --vocab "$V" --tokens "$tokens" --seed "$seed" \
            --out "$corpus" --meta "$meta"
    fi
    pairs=$(json_field "$meta" pairs_per_epoch)
    for th in "${threads_list[@]}"; do
        for ((rep = 1; rep <= reps; rep++)); do
            for tool in "${tools[@]}"; do
                echo "== $tool, vocabulary $V, $th thread(s), round $rep of $reps" >&2
                run "$tool" "$corpus" "$th"
                awk -v tool="$tool" -v V="$V" -v th="$th" -v w="$tokens" -v e="$epochs" -v s="$secs" \
                    -v p="$pairs" -v rss="$rss" -v rep="$rep" 'BEGIN {
                    printf "{\"bench\":\"w2v_scale\",\"tool\":\"%s\",\"vocab\":%d,\"threads\":%d,\"round\":%d,\"words\":%d,\"epochs\":%d,\"seconds\":%s,\"words_per_sec_per_thread\":%.0f,\"pairs_per_sec\":%.0f,\"peak_rss_kb\":%s}\n",
                        tool, V, th, rep, w, e, s, w * e / s / th, p * e / s, rss }' >>"$results"
            done
        done
    done
done

echo
echo "skip-gram, size 100, window 5, negative 5, sample 1e-4, min-count 5, lr 0.025, $epochs epoch(s)"
"$py" - "$results" "$out/w2v_scale.svg" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
rows = []  # one per (tool, vocab, threads): the median run by seconds
for key in dict.fromkeys((r["tool"], r["vocab"], r["threads"]) for r in runs):
    group = sorted((r for r in runs if (r["tool"], r["vocab"], r["threads"]) == key),
                   key=lambda r: r["seconds"])
    med = dict(group[(len(group) - 1) // 2])
    med["seconds"] = statistics.median(r["seconds"] for r in group)
    med["words_per_sec_per_thread"] = med["words"] * med["epochs"] / med["seconds"] / med["threads"]
    med["pairs_per_sec"] = statistics.median(r["pairs_per_sec"] for r in group)
    rows.append(med)
print("medians of %d round(s)" % max(r["round"] for r in runs))
print("%-9s %9s %7s %11s %9s %12s %13s %12s" % ("tool", "vocab", "threads", "words", "seconds",
      "words/s/thr", "pairs/s", "peak RSS kB"))
for r in rows:
    print("%-9s %9d %7d %11d %9.2f %12d %13d %12s" % (r["tool"], r["vocab"], r["threads"], r["words"],
          r["seconds"], r["words_per_sec_per_thread"], r["pairs_per_sec"], r["peak_rss_kb"]))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("(no matplotlib: no plot)")
    sys.exit(0)
fig, ax = plt.subplots(figsize=(7, 4.5))
for key in sorted({(r["tool"], r["threads"]) for r in rows}):
    pts = sorted((r["vocab"], r["pairs_per_sec"]) for r in rows if (r["tool"], r["threads"]) == key)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="%s, %d thread(s)" % key)
ax.set_xscale("log")
ax.set_xlabel("vocabulary (words surviving min-count 5)")
ax.set_ylabel("pairs / second")
ax.set_title("skip-gram throughput against vocabulary size")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2])
print("plot: " + sys.argv[2])
EOF
echo
cat "$results"
