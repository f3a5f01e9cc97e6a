#!/usr/bin/env bash
# `make demo`: trains word2vec with sgrad on the bundled corpus (Jane Austen's novels and
# the King James Bible, 1.5 M words; see data/README.md) with 2 threads, then prints the
# nearest neighbours of a few probe words and a few analogies, for a person to judge.
# usage: tools/demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
w2v=$build/sgrad-w2v
corpus=$build/demo-corpus.txt
vectors=$build/demo-vectors.bin
if [ ! -x "$w2v" ]; then
    echo "demo: $w2v not found; build first (make build)" >&2
    exit 1
fi
if [ ! -s "$corpus" ]; then
    xz -dc data/demo-corpus.txt.xz >"$corpus.tmp"
    mv "$corpus.tmp" "$corpus"
fi

echo "== sgrad demo: word2vec skip-gram with negative sampling, trained through sgrad's ops"
echo "   (sg_embedding, sg_sgns_loss with a fused sparse SGD update, the SGD optimizer) on"
echo "   Jane Austen's six novels and the King James Bible: $(wc -w <"$corpus") words."
echo
"$w2v" -train "$corpus" -output "$vectors" -binary 1 -cbow 0 -size 100 -window 5 \
    -negative 5 -sample 1e-3 -min-count 5 -iter 5 -threads 2 -seed 1
echo
echo "== 10 nearest neighbours by cosine (sgrad-w2v -neighbors $vectors -words ...)"
"$w2v" -neighbors "$vectors" -words king,gold,sister,morning,letter,elizabeth,sword,happy
echo
echo "== analogies a : b :: c : ? with the 5 best candidates (sgrad-w2v -analogy $vectors a b c)"
for q in "brother sister son" "he his she" "sons daughters son" "morning evening day"; do
    "$w2v" -analogy "$vectors" $q
done
