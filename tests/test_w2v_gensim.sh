#!/usr/bin/env bash
# gensim's KeyedVectors.load_word2vec_format reads sgrad-w2v's text and binary output:
# same words in the order Python's own count gives (most frequent first, ties by bytes),
# the same vectors from both formats, and gensim's most_similar agrees with
# sgrad-w2v -neighbors. Skips (exit 77, shown as skipped by ctest) only when python3-gensim is not installed or the
# build has no programs (SGRAD_BUILD_TOOLS=OFF).
# usage: tests/test_w2v_gensim.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
py=/usr/bin/python3
if [ ! -x "$py" ] || ! "$py" -c 'import gensim' 2>/dev/null; then
    echo "SKIP test_w2v_gensim: python3-gensim is not installed (apt-get install python3-gensim)"
    exit 77
fi
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_gensim: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF); the default build runs it"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 8 topics of 6 words, each line drawn from one topic; "rare" words fall under min-count
awk 'BEGIN { srand(7); for (s = 0; s < 1500; s++) { t = int(rand() * 8); line = "";
       for (i = 0; i < 8; i++) line = line (i ? " " : "") "t" t "w" int(rand() * 6);
       if (s % 500 == 0) line = line " rare" s; print line } }' >"$tmp/corpus.txt"

common=(-train "$tmp/corpus.txt" -cbow 0 -size 24 -window 3 -min-count 2 -iter 5 -sample 0 -batch 128
        -threads 2 -seed 5)
"$w2v" "${common[@]}" -output "$tmp/v.txt" -binary 0 2>"$tmp/log.txt"
"$w2v" "${common[@]}" -output "$tmp/v.bin" -binary 1 2>>"$tmp/log.txt"
"$w2v" -neighbors "$tmp/v.bin" -words t0w0,t3w5 -k 5 >"$tmp/neighbors.txt"

"$py" - "$tmp" <<'EOF'
import collections, sys
import numpy as np
from gensim.models import KeyedVectors

tmp = sys.argv[1]
counts = collections.Counter(open(tmp + "/corpus.txt").read().split())
expect = sorted((w for w, c in counts.items() if c >= 2), key=lambda w: (-counts[w], w))
txt = KeyedVectors.load_word2vec_format(tmp + "/v.txt", binary=False)
bin_ = KeyedVectors.load_word2vec_format(tmp + "/v.bin", binary=True)
failures = 0
def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("  FAIL:", what)
check(txt.index_to_key == expect, "text: words in frequency order")
check(bin_.index_to_key == expect, "binary: words in frequency order")
check(txt.vector_size == 24 and bin_.vector_size == 24, "vector size 24")
check(np.array_equal(txt.vectors, bin_.vectors), "text and binary vectors equal")
check(not any(w.startswith("rare") for w in txt.index_to_key), "min-count drops rare words")
for line in open(tmp + "/neighbors.txt"):
    word, rest = line.split(":", 1)
    ours = [item.split(" (")[0].strip() for item in rest.split(",")]
    theirs = [w for w, _ in bin_.most_similar(word, topn=5)]
    check(ours == theirs, "neighbours of %s: sgrad %s, gensim %s" % (word, ours, theirs))
    check(all(w.startswith(word[:2]) for w in ours[:5]), "neighbours of %s share its topic" % word)
print("%d passed, %d failed" % (1 if failures == 0 else 0, 1 if failures else 0))
sys.exit(1 if failures else 0)
EOF
