#!/usr/bin/env bash
# `make demo`: trains word2vec with sgrad on the bundled corpus (Jane Austen's novels and
# the King James Bible, 1.5 M words; see data/README.md) with 2 threads, then prints the
# nearest neighbours of a few probe words and a few analogies, each marked right or wrong
# against the answer written next to it here, and the analogy accuracy on the shipped
# word2vec question set (data/questions-words.txt), for a person to judge.
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
    -negative 5 -sample 1e-3 -min-count 5 -iter 5 -threads 2 -seed 1 -log "$build/demo-log.jsonl"
echo
echo "== 10 nearest neighbours by cosine (sgrad-w2v -neighbors $vectors -words ...)"
"$w2v" -neighbors "$vectors" -words king,gold,sister,morning,letter,elizabeth,sword,happy
echo
echo "== analogies a : b :: c : ? with the 5 best candidates (sgrad-w2v -analogy $vectors a b c),"
echo "   marked against the expected answer d"
right=0
probes=("brother sister son daughter" "he his she her" "sons daughters son daughter"
        "morning evening day night")
for probe in "${probes[@]}"; do
    read -r a b c want <<<"$probe"
    out=$("$w2v" -analogy "$vectors" "$a" "$b" "$c")
    got=$(printf '%s\n' "$out" | sed -n '1s/.* : //p')
    printf '%s\n' "$out"
    if [ "$got" = "$want" ]; then
        echo "   -> right ($want)"
        right=$((right + 1))
    else
        echo "   -> wrong: expected $want"
    fi
done
echo "   $right of ${#probes[@]} shown analogies right"
echo
echo "== analogy accuracy on word2vec's question set, data/questions-words.txt (3CosAdd)"
"$w2v" -evaluate "$vectors" -questions data/questions-words.txt
if command -v python3 >/dev/null; then
    python3 tools/plot_log.py "$build/demo-log.jsonl" "$build/demo-training.svg" \
        "sgrad-w2v on the demo corpus: skip-gram, 5 epochs, 2 threads"
    echo
    echo "== training curve (loss and learning rate against words read): $build/demo-training.svg"
fi
